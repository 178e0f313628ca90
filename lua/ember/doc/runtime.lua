-- API reference: memory, threads, determinism, devices, help
-- (see lua/ember/doc/init.lua for the format)
return [==[
## `runtime`: memory, threads, determinism, versions

### `ember.memory_stats(device?)`
`{live_tensors, bytes_in_use, peak_bytes, bytes_cached, limit, cache_hits,
cache_misses, cache_evictions, cache_limit, huge_bytes, gc_steps, gc_sweeps,
gc_collections}` of the tensor allocator (`limit` nil when none is set). The
`cache_*` counters and `bytes_cached` are the calling thread's cache of freed
blocks: allocations it served, allocations that went to the C library, blocks
it gave back (past `cache_limit`, 256 MiB, the oldest first, or after 65536
later frees without reuse; `cache_limit` is 0 in sanitizer builds, which keep
no cache). `huge_bytes` counts the bytes, in use or cached, of all threads,
in blocks of 8 MiB or more (tensors over 6 MiB) that sit on 2 MiB huge pages (Linux with
transparent huge pages "always" or "madvise"; 0 elsewhere, in sanitizer
builds, and with `EMBER_HUGEPAGES=0` in the environment, which keeps them on
4 KiB pages; any value but 0 or 1 raises when ember loads). The `gc_*` counters are the binding's pacing of the Lua garbage
collector by tensor memory since ember loaded: incremental steps it ran,
sweeps that gave dead tensors back after a GC cycle, and full collections it
forced (a backstop, DTR's requests, out of memory under a limit), as
docs/performance.md ("Memory") explains. `ember.memory_stats("cuda")` gives
the CUDA allocator's counters (`ember.cuda.memory_stats()`).

### `ember.reset_peak_memory()`
Starts `peak_bytes` again from the bytes in use.

### `ember.set_memory_limit(bytes)`
Past `bytes` in use an allocation raises, naming the op, the bytes and the
limit; `nil` removes the limit.

### `ember.empty_cache()`
Returns the allocator's cached blocks to the system.

### `ember.tidy(fn, ...)`
Runs `fn(...)` and returns its results; then every tensor made inside `fn`
that `fn` does not return (also inside returned tables, and a returned
tensor's `.grad`) and that nobody kept is freed at once, as with
`t:free()`, instead of when the garbage collector finds it (TensorFlow.js's
`tf.tidy`). When `fn` raises, everything it made is freed and the error
propagates. A tensor `fn` stores elsewhere (an upvalue, a table field) must
be returned or passed to `ember.keep`: used after the tidy it raises naming
the op (`tensor argument 1 was freed`). Freeing drops Lua's reference only:
a view's base, what the autograd tape saved for backward and a `.grad`
keep their memory, so a tidy inside `gm:record()` leaves backward intact.
What the library stores for later is kept by itself: an optimizer's state,
a module's fields, a custom `Function`'s context, the autocast cache; a
`.grad` stays while it is one, and the tidy that clears or replaces it
(`opt:zero_grad()` in the next step's tidy) frees it, unless kept. Tidies
nest: what an inner one returns belongs to the outer one. A training step
in a tidy keeps its memory steady without the GC; docs/performance.md
("Memory") has the figures.

### `ember.keep(t)`
Marks `t` so that no `ember.tidy` frees it (it goes back with the garbage
collector); returns `t`.

### `ember.set_num_threads(n)`, `ember.get_num_threads()`
The threads of ember's kernels (oneDNN's and OpenBLAS's calls each run on
one of them). By default the policy for hosts and busy machines, `"auto"`,
decides per job, up to `get_num_threads()` (the CPUs the process may use):
a job runs on the calling thread when it is small, when no core is spare (a
host's busy thread, another busy process) or while workers have lately come
late, unless short trials measured large jobs faster on all the threads
anyway. `set_num_threads(n)` (a whole number from 1 to the maximum, or
`EMBER_NUM_THREADS=n`) gives every job large enough for its grain `n`;
`set_num_threads("auto")` (or `EMBER_NUM_THREADS=auto`; any other value
makes `require("ember")` raise) turns the default back on. No op's result
depends on the count, so every setting gives the same bits, on a busy
machine and an idle one (docs/frame_loop.md, "Threads").

### `ember.thread_stats()`
`{policy, threads, max_threads, spare, online_cpus, jobs_parallel,
jobs_inline_small, jobs_inline_busy, late_jobs, load_samples,
inline_seconds_left, backoff_seconds, arm, trial, kinds, jobs_sampled,
jobs_team, trials, trials_won, trials_stopped, team_cuts,
last_trial_ratio, trials_postponed, crowded}`: the thread policy (`"auto"` or `"fixed"`) and what it
decided since the process started: jobs given several threads, run inline
as small or as the machine was busy, parallel jobs whose workers came
late, the cores the last load sample left ember. The rest is auto's
measured choice: `arm`, the arm that won the last comparison (`"sampled"`:
large jobs take the threads the load sample and the back-off leave;
`"team"`: every large job takes all the threads), `trial` (`true` while a
trial of the other arm runs), the kinds of large job whose times are kept,
the large jobs timed under each arm, the trials run, won (the arms changed
places) and ended early as far slower, the team phases ended because the
machine got busier, and the last trial's time over the winner's (a lost
trial's once weighed against the winner's jobs after it; below 1: the
trial won; 0: nothing to compare), the trials of the team put off 16 jobs
at a time because the cores were crowded, and `crowded` (`true` when the
last two load samples found other threads on every core, so that the
calling thread shares one: trials of the team wait then).

### `ember.set_deterministic(on)`, `ember.is_deterministic()`
With `true`, every op gives the same bits for any thread count and run (as
every op does anyway), and the products and convolutions that oneDNN would
run run on OpenBLAS and ember's kernels instead. `on` is a boolean (as for
every `set_*(on)` switch; another value raises).

### `ember.clock()`
Seconds from a monotonic clock, as a number.

### `ember.version()`
ember's version string (`"0.1.0"`).

### `ember.blas_info()`
The BLAS in use and its configuration: OpenBLAS's configuration, its core,
why that core runs and the file, e.g. `"OpenBLAS 0.3.21 ... (core
SkylakeX); ember chose SkylakeX from the CPU's flags;
/lib/x86_64-linux-gnu/libopenblas.so.0"`. libember loads OpenBLAS itself
and chooses the core from the CPU's flags when `OPENBLAS_CORETYPE` is unset,
so every host runs the same kernels (docs/hardening.md).

### `ember.dnnl_info()`
The oneDNN ember is built with (`"oneDNN 2.6.3 (OpenMP threads)"`), or
`"none (...)"`.

### `ember.set_dnnl_enabled(on)`, `ember.dnnl_enabled()`
float32 convolutions run through oneDNN when ember is built with it and
this is on (the default); with `false`, and under deterministic mode, they
run on ember's own kernels. `dnnl_enabled()` is true when oneDNN is built
in, works and is on. It also switches oneDNN's float32 matrix products off.

### `ember.set_conv_kernels_enabled(on)`, `ember.conv_kernels_enabled()`
ember's direct kernels for depthwise convolutions (groups equal to the
input channels: MobileNet's 3x3 layers), which run them where oneDNN does
not or is slower (docs/nn.md, "Depthwise, 1x1 and grouped convolutions"),
are on by default; with `false` those convolutions run as the others do
(oneDNN, else im2col + GEMM), which is how the specs compare the paths.
`conv_kernels_enabled()` says whether they are on.

### `ember.set_dnnl_matmul_enabled(on)`, `ember.dnnl_matmul_enabled()`
float32 matrix products (`matmul`, `linear`, their gradients) run through
oneDNN's sgemm at the shapes where it beats OpenBLAS (docs/nn.md, "Matrix
products"), when oneDNN is on and this is on (the default); with `false`
they all run on OpenBLAS. Under deterministic mode they always do.
`dnnl_matmul_enabled()` is true when both switches are on and oneDNN works.

### `ember.profile(fn, ...)`
Runs `fn(...)` with the op profiler on and returns a report, then `fn`'s
results. Every op `fn` runs (backward's included) is timed, without the ops
it runs inside; `report.ops[name]` is `{seconds =, calls =}` for each op that
ran, `report.gemm` (matmul, linear), `report.conv` (conv2d, conv2d_relu,
conv2d_relu_max_pool2d, whose pooling counts here, and the adjoints), `report.pool` (the poolings and their adjoints) and
`report.elementwise` (every other op: elementwise, reductions, copies,
indexing) their sums in seconds, `report.sections[name]` the seconds of
each `profile_section`, `report.seconds` the wall time and `report.other`
what is left (Lua, autograd's bookkeeping, factories). A GPU op counts its
launch, not its run. Off, the profiler costs each op one test. Profiles do
not nest; an error in `fn` ends the profile and is raised again.

### `ember.profile_section(name, fn, ...)`
Runs `fn(...)` and returns its results; inside `ember.profile` its wall
time is added to `report.sections[name]` and its ops are not counted apart
(a data loader's batch, an optimizer step). A section inside another counts
in both.

### `ember.help(x?)`
Prints the documentation of `x`: a public function, module, class or tensor
(`help(ember.nn.Linear)`), or a name (`help("F.linear")`); with no argument,
the list of sections. At the `ember` prompt `help` is a global and
`?name` is short for it.

## `ember.cuda`: the CUDA backend

ember loads `libember_cuda.so` beside `libember` at run time when it is
there (built when CMake finds nvcc); `docs/cuda.md` lists what runs on the
device so far. Tensors move with `t:cuda()` / `t:to("cuda")`.

### `ember.cuda.is_available()`
True when a CUDA backend and at least one device are present.

### `ember.cuda.device_count()`
The number of CUDA devices (0 without a backend).

### `ember.cuda.status()`
Why CUDA is or is not available, in words.

### `ember.cuda.memory_stats()`
The CUDA caching allocator's counters: `{bytes_in_use, peak_bytes,
bytes_cached, device_allocs, cache_hits}` (also `ember.memory_stats("cuda")`).

### `ember.cuda.empty_cache()`
Gives the allocator's cached device blocks back to CUDA.

### `ember.cuda.synchronize()`
Waits until every queued kernel and copy on the device has finished.

### `ember.cuda.allow_tf32(on?)`
Whether float32 convolutions on the device may use TF32 tensor cores
(products of 10-bit mantissas: faster on Ampere and newer, but results no
longer agree with the CPU's within float32's tolerance). Off by default.
`allow_tf32(true)` or `allow_tf32(false)` sets it and returns the previous
setting; `allow_tf32()` returns it. It works without CUDA.

## `ember.dtr`: training past memory (docs/dtr.md)

### `ember.dtr.enable({budget =, min_size =})`
Training past memory (MegEngine's DTR, docs/dtr.md): while a recording is
open, what ops make remembers how to be remade; when an allocation would
take the bytes in use past `budget` (bytes, required), stored results are
evicted (the cheapest to remake per byte and per step unused first, none
under `min_size` bytes, by default 1 MiB or budget / 1024 when smaller)
and recomputed from their inputs, recursively, when backward or a later op
reads them. Parameters come out
bit for bit as without it. When nothing more can be evicted the op raises
the out-of-memory error of `set_memory_limit`, naming the op, the bytes and
the budget, and everything stays usable. Again with another budget: the
new one, counters from zero.

### `ember.dtr.disable()`
Remakes what is still evicted and held, then forgets every recipe.

### `ember.dtr.is_enabled()`
Whether `ember.dtr.enable` is in force.

### `ember.dtr.stats()`
`{evictions, recomputes, recompute_s, peak_bytes, drops, tracked, evicted,
budget, min_size}`: since `enable`, the storages evicted to stay under the
budget, remade (parents included), the seconds spent remaking, the most
bytes in use any allocation reached; dropped as soon as only recipes held
them; the recipes alive now and how many are evicted (`budget` nil when off).
]==]
