/* ember_nccl: ember's own thin layer over NCCL (libember_nccl.so), for the
   collectives of CUDA tensors in ember.distributed. Lua reaches it through
   the FFI (lua/ember/distributed_nccl.lua); NCCL's and CUDA's types never
   cross this interface: the unique id is ENCCL_ID_BYTES bytes (made on rank 0
   and handed to the other ranks by the caller, over MPI), dtypes are ember's dtype codes, ops
   are ENCCL_SUM.. below, and a launched collective is a small integer handle
   naming a CUDA event recorded after it. Every function returns 0 on success
   or -1 with a message in enccl_last_error(); none aborts the process.

   Streams: ember's CUDA backend queues all its work on the legacy default
   stream, so the collectives are queued there too: they start after the
   kernels that wrote their buffers, and later kernels start after them. A
   handle's event is recorded on that stream after the collective; waiting
   for it is waiting for the collective's result. */
#include <stdint.h>
/* ffi:begin */
enum { ENCCL_ID_BYTES = 128 };
enum { ENCCL_SUM = 0, ENCCL_MAX = 1, ENCCL_MIN = 2, ENCCL_AVG = 3 };
const char *enccl_last_error(void);
int enccl_version(void);
int enccl_check_dtype(int dtype, const char *op);
int enccl_device(int local_rank, int *device);
int enccl_unique_id(uint8_t *id);
int enccl_init(const uint8_t *id, int rank, int size, int device);
int enccl_initialized(void);
int enccl_all_reduce(void *buf, int64_t count, int dtype, int op, int *handle);
int enccl_broadcast(void *buf, int64_t count, int dtype, int root, int *handle);
int enccl_all_gather(const void *send, void *recv, int64_t count, int dtype, int *handle);
int enccl_test(int handle, int *done);
int enccl_wait(int handle, double seconds, int *done);
int enccl_pending(void);
void enccl_abort(void);
/* ffi:end */
