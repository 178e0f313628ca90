/* ember_dist: ember's own thin layer over MPI (libember_dist.so). Lua reaches
   it through the FFI (lua/ember/distributed.lua); MPI's handle types differ
   between MPI implementations, so they never cross this interface: requests
   are small integer handles, dtypes are ember's dtype codes, ops are
   EDIST_SUM.. below. Every function returns 0 on success or -1 with a message
   in edist_last_error(); none aborts the process.

   Failure of a peer: when a rank's process exits (normally or after an
   uncaught error) it tells every other rank on a private communicator. A rank
   waiting in any edist call notices that within a millisecond and returns -1
   ("rank 1 exited while this rank waited in all_reduce"), so the job ends
   instead of hanging. At exit, a rank that saw such a failure (or has
   requests still in flight) calls MPI_Abort; otherwise it waits until every
   rank has exited and calls MPI_Finalize. */
#include <stdint.h>
/* ffi:begin */
enum { EDIST_SUM = 0, EDIST_MAX = 1, EDIST_MIN = 2 };
int edist_init(void);
int edist_initialized(void);
int edist_rank(void);
int edist_size(void);
int edist_local_rank(void);
const char *edist_last_error(void);
int edist_barrier(void);
int edist_iallreduce(void *buf, int64_t count, int dtype, int op, int *handle);
int edist_ibroadcast(void *buf, int64_t count, int dtype, int root, int *handle);
int edist_iallgather(const void *send, void *recv, int64_t count, int dtype, int *handle);
int edist_test(int handle, int *done);
int edist_wait(int handle, const char *opname);
int edist_pending(void);
int edist_imeta_max(int64_t *buf, int n, int *handle);
/* The rank that exited while this one still waits (past a grace of 2 s), or
   -1; after one has, this rank's exit aborts the job. the waits of NCCL
   collectives (lua/ember/distributed_nccl.lua) ask this between polls. */
int edist_peer_exited(void);
/* ffi:end */
