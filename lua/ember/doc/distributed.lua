-- API reference: ember.distributed (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.distributed`: data parallel over MPI (CPU tensors) and NCCL (CUDA tensors)

Run a script in several processes with `mpirun -np 2 ember train.lua`;
ranks are 0-based. Without a launcher the world has one rank. Details:
docs/distributed.md.

### `ember.distributed.init()`
Joins the job (may be called more than once); MPI is finalised at exit.

### `ember.distributed.is_available()`
True when `libember_dist` (MPI) can be loaded.

### `ember.distributed.is_nccl_available()`
True when CUDA tensors can be reduced (`libember_nccl` loads and a CUDA
device is there); otherwise false and why not.

### `ember.distributed.is_initialized()`
True after `init()`.

### `ember.distributed.rank()`, `ember.distributed.world_size()`, `ember.distributed.local_rank()`
This process's rank, the number of ranks, and the rank within its node.

### `ember.distributed.backend()`
`"mpi"`, or `"local"` for a world of one without MPI.

### `ember.distributed.barrier()`
Waits until every rank has reached it.

### `ember.distributed.all_reduce(t, op?, opts?)`
Reduces `t` over all ranks in place (`op` `"sum"`, `"mean"`, `"max"` or
`"min"`) and returns it; `{async = true}` returns a handle with `:wait()` and
`:is_completed()`. CPU tensors go over MPI, CUDA tensors over NCCL.

### `ember.distributed.broadcast(t, root?, opts?)`
Copies rank `root`'s (0) `t` into every rank's `t` in place.

### `ember.distributed.all_gather(t, opts?)`
A list of `world_size` tensors: every rank's `t`.

### `ember.distributed.broadcast_parameters(model, root?)`
Broadcasts every parameter and buffer of a module (or list of tensors) from
`root`, so that all ranks start the same.

### `ember.distributed.make_allreduce_cb(op?, opts?)`
A GradManager callback that all-reduces gradients in buckets while backward
goes on: `gm:attach(params, dist.make_allreduce_cb("mean", {bucket_mb = 25}))`.

### `ember.distributed.wtime()`
Seconds from a monotonic clock (as `MPI_Wtime`).
]==]
