-- API reference: the package table and tensors (see lua/ember/doc/init.lua for the format)
return [==[
## `ember`: the package

`local ember = require("ember")` (preloaded as the global `ember` in the
`ember` command). Besides the functions below it holds the modules
`ember.nn`, `ember.optim`, `ember.autodiff`, `ember.data`, `ember.io`,
`ember.distributed`, `ember.cuda`, `ember.plot` and `ember.progress`. Reading
a name it does not have raises an error with the closest names
(`ember: no field 'zeross' (did you mean zeros?)`); `ember.cuda` and
`ember.distributed` may be probed (`if ember.distributed then`), private
names (`_C`) read as nil.

### `ember.tensor(data, opts?)`
A tensor from a number (0-d), a nested table of numbers or booleans, or a
tensor (copied, converted to `opts.dtype` and `opts.device` when given).
`opts = {dtype =, device =}`; the dtype defaults to float32, bool for
booleans. `{}` is an empty tensor of shape `{0}` (`{{}, {}}`:
`{2, 0}`). With an integer dtype a number it cannot hold (NaN, an infinity,
`2^70` as int64, 300 as uint8) raises naming the value and the dtype, as
PyTorch; a fraction is truncated toward zero (docs/dtypes.md).

### `ember.zeros(shape, opts?)`, `ember.ones(shape, opts?)`, `ember.empty(shape, opts?)`
A tensor of zeros or ones of the given shape: a list such as `{2, 3}`, or
the sizes one by one, `ember.zeros(2, 3, opts?)`; `empty` leaves its memory
uninitialised. `opts = {dtype =, device =}`.

Every factory raises naming the call for an option it does not take
(`ember.zeros: unknown option 'requires_grad' (known: device, dtype)`), for a
value after its options table (`ember.zeros({2, 3}, {}, 5)`: `extra argument
3 (5): it takes 2 (shape, opts)`), for a non-number among the sizes
(`nil` included) and for a shape table holding anything besides its sizes
(`ember.zeros({2, 3, dtype = 'int64'})`).

### `ember.full(shape, value, opts?)`
A tensor filled with `value` (a number, or a boolean for a bool tensor).
`opts = {dtype =, device =}`.

### `ember.zeros_like(t, opts?)`, `ember.ones_like(t, opts?)`, `ember.empty_like(t, opts?)`
A new tensor of `t`'s shape, dtype and device (overridable in `opts`).
`opts.memory_format`: `"preserve_format"` (the default: channels_last where
`t` is channels_last and not contiguous, else contiguous),
`"contiguous_format"` or `"channels_last"` (4-D only; see `Tensor:contiguous`).

### `ember.full_like(t, value, opts?)`
A tensor of `t`'s shape, dtype and device (overridable in `opts`) filled
with `value` (a number, or a boolean: 1 or 0); `opts.memory_format` as in
`ember.zeros_like`.

### `ember.rand_like(t, opts?)`, `ember.randn_like(t, opts?)`
Uniform [0, 1) or standard normal samples of `t`'s shape, dtype and device;
`opts = {dtype =, device =, generator =}`.

### `ember.arange(a, b, step?, opts?)`, `ember.arange(n, opts?)`
`a, a+step, ...` stopping before `b`, or `0, 1, ..., n-1`. int64 when every
bound is an integer, else the default float dtype. `opts = {dtype =, device
=}`; a value after it raises (`ember.arange(5, {}, 3)`).

### `ember.linspace(a, b, steps, opts?)`
`steps` evenly spaced values from `a` to `b` inclusive. `opts = {dtype =,
device =}`.

### `ember.eye(n, m?, opts?)`
The `n` x `m` identity matrix (`m` defaults to `n`); `ember.eye(n, opts)`
also works. `opts = {dtype =, device =}`.

### `ember.rand(shape, opts?)`, `ember.randn(shape, opts?)`
Samples from U[0, 1) or N(0, 1) drawn from ember's Philox generator; the
shape as for `ember.zeros`. `opts = {dtype =, device =, generator =}`: every
random function takes `opts.generator`, an `ember.Generator`, to draw from it
instead of the default generator.

### `ember.randint(low, high, shape, opts?)`
Integers uniformly from `low` to `high - 1` (int64 unless `opts.dtype`);
`randint(high, shape, opts?)` starts at 0. `opts = {dtype =, device =,
generator =}`.

### `ember.randperm(n, opts?)`
A random permutation of `1..n` (int64 unless `opts.dtype`); `opts =
{dtype =, device =, generator =}`.

### `ember.bernoulli(p, opts?)`, `ember.bernoulli(t, p, opts?)`, `Tensor:bernoulli(p?, opts?)`
1 with probability `p` and 0 otherwise, elementwise for a floating point
tensor of probabilities (in its dtype); with a tensor `t` and a number `p`,
`t`'s shape and dtype. Probabilities outside [0, 1] raise. No gradient.
`opts = {generator =}`.

### `ember.multinomial(probs, n, opts?)`, `Tensor:multinomial(n, opts?)`
`n` 1-based category indices (int64) drawn with the weights in each row of
`probs` (1-D, or 2-D for a row each; non-negative and finite, not
necessarily summing to 1). `opts = {replacement = false, generator =}`:
without replacement a row needs `n` categories of positive weight, and each
draw is made among the categories left, as PyTorch's.

### `ember.Generator(seed?)`, `ember.Generator{seed =, device =}`
A random number generator of its own: a Philox stream (a seed and a counter)
held in C, which the random functions draw from when given
`{generator = g}`, leaving every other stream where it was. The seed
defaults to PyTorch's default, 67280421310721. One generator serves every
device (CUDA draws come from the same Philox stream), so `device` is only
checked to be one ember knows.

### `ember.default_generator`
The process's generator (the one `manual_seed` seeds), as a Generator.

### `ember.is_generator(x)`
True when `x` is an `ember.Generator`.

## `ember.Generator_class`: what ember.Generator returns

`tostring(g)` shows its seed and offset.

### `Generator:manual_seed(seed)`
Seeds the generator and starts its stream over; returns it.

### `Generator:seed()`
Seeds the generator from the clock and returns the seed.

### `Generator:initial_seed()`
The seed last given to the generator.

### `Generator:get_state()`, `Generator:set_state(state)`
The state `{seed = n, offset = m}` (the Philox seed and the next unused
counter block), and its restoring: the draws after `set_state` repeat those
made after the state was read.

### `ember.manual_seed(seed)`
Seeds the generator: the same seed gives the same numbers on every run and
platform, whatever the thread count.

### `ember.initial_seed()`
The seed last given to `manual_seed` (or the default one).

### `ember.get_rng_state()`
The generator's whole state for a checkpoint, `{seed = n, offset = m}`: the
Philox seed and the next unused counter block. Reading it draws nothing. Not
PyTorch's byte tensor.

### `ember.set_rng_state(state)`
Restores what `get_rng_state` returned, so the draws after it repeat the
draws made after the state was read; anything else (a key besides `seed` and
`offset` included) raises.

### `ember.is_tensor(x)`
True when `x` is an ember tensor.

### `ember.cat(list, dim?)`
Concatenates a list of tensors along `dim` (default 1); shapes must agree
elsewhere.

### `ember.stack(list, dim?)`
Stacks tensors of one shape along a new dim `dim` (default 1).

## `ember.Tensor`: tensors

A tensor is a typed, strided view of memory with a shape. Dims and indices
are 1-based; negative dims count from the end. Operators `+ - * / ^` and
unary `-` work elementwise with broadcasting, numbers on either side;
`a == b` compares identity (elementwise: `a:eq(b)`). Brackets follow Torch7:
`x[i]` selects along dim 1, `x[{i, j}]` with every dim given is a Lua number,
`x[{{}, {2, 4}}]` a range view, `x[mask]` and `x[idx]` gather, and
assignment writes in place (docs/indexing.md). LuaJIT (Lua 5.1) never
calls a table's `__len`, `__lt` or `__le`, so `#t` is not the size of a
tensor (write `t:size(1)`) and `t < x` raises (write `t:lt(x)`, `t:le(x)`,
`t:gt(x)`, `t:ge(x)`). Reading a method or field that tensors do not have
raises with the closest names; `t:backward()` says to write
`gm:backward(t)` (docs/pytorch_users.md).
`tostring(t)` lays the numbers out as PyTorch does (one format for all,
rows wrapped at 80 columns, more than 1000 elements summarised with the first
and last 3 of each dim) and ends with the dtype and shape:
`tensor([[1., 2.], [3., 4.]], dtype=float32, shape={2,2})`, a row per line.
Math on tensors is listed in the `ops` section; every op there is also a
method.

### `Tensor.dtype`, `Tensor.device`
The dtype and device as strings: `"float32"`, `"float64"`, `"float16"`,
`"bfloat16"`, `"int32"`, `"int64"`, `"uint8"`, `"bool"`; `"cpu"`, `"cuda:0"`.

### `Tensor.grad`
The gradient GradManager accumulated (a tensor of the same shape, or nil);
assignable, nil clears it.

### `Tensor:shape()`
The shape as a Lua list (`{2, 3}`; `{}` for a 0-d tensor).

### `Tensor:size(d?)`
The size of dim `d`, or the shape when `d` is nil.

### `Tensor:dim()`
The number of dims.

### `Tensor:numel()`
The number of elements.

### `Tensor:stride()`
The strides, in elements, as a Lua list.

### `Tensor:item()`
The value of a one-element tensor as a Lua number (a boolean for bool).

### `Tensor:tolist()`
The elements as nested Lua tables (a number for a 0-d tensor).

### `Tensor:is_contiguous(opts?)`
True when the elements are laid out in row-major order without gaps; with
`{memory_format = "channels_last"}`, when `t` is 4-D (N, C, H, W) with the
strides of a row-major (N, H, W, C) (size-1 dims skipped, as PyTorch), so
a tensor may be both. An unknown format, or `"preserve_format"`, raises.

### `Tensor:contiguous(opts?)`, `ember.contiguous(t, opts?)`
The tensor itself when contiguous, else a contiguous copy (recorded).
`{memory_format = "channels_last"}`: the same for PyTorch's channels_last
layout, an NCHW-shaped 4-D tensor whose strides are NHWC; any other rank
raises naming the shape. Such a tensor is an ordinary strided tensor to
every op (views, indexing, in-place writes); convolutions, batch norm and
pooling read and write it without reordering, and elementwise ops keep it
(`docs/nn.md`, "channels_last"). `"contiguous_format"` is the default;
`"preserve_format"` and unknown formats raise.

### `Tensor:clone()`, `ember.clone(t)`
A copy with its own memory (recorded: gradients flow through it).

### `Tensor:detach()`, `ember.detach(t)`
A view of the same memory with no autograd history.

### `Tensor:to(dtype_or_device, ...)`
A converted copy: `t:to("float64")`, `t:to("cuda")`, `t:to({dtype =, device =})`
or `t:to(other)` (other's dtype and device). Returns `t` itself when nothing
changes. `t:to("cuda", {non_blocking = true})` (or `non_blocking` in the
table form) queues a copy from pinned memory to the GPU without waiting for
it; later work on the GPU sees the data, and the host must not write `t`
before `ember.cuda.synchronize()`. Other copies wait as without it.
`memory_format` (in either table): `"preserve_format"` (the default),
`"contiguous_format"` (a contiguous result) or `"channels_last"` (4-D only,
as `Tensor:contiguous`); an unknown option or format raises, as does
`"channels_last_3d"` (not supported).

### `Tensor:pin_memory()`, `Tensor:is_pinned()`
A contiguous copy of a CPU tensor in pinned (page-locked) host memory, from
the CUDA backend (`t` itself when it is pinned already), so that its copies
to the GPU can run asynchronously; raises with the backend's reason where
CUDA cannot be used, as PyTorch does. Not recorded by autograd.
`is_pinned()`: whether `t`'s memory is pinned.

### `Tensor:float()`, `Tensor:double()`, `Tensor:half()`
Shorthands for `t:to("float32")`, `t:to("float64")` and `t:to("float16")`.

### `Tensor:long()`, `Tensor:int()`, `Tensor:bool()`
Shorthands for `t:to("int64")`, `t:to("int32")` and `t:to("bool")`.

### `Tensor:cpu()`, `Tensor:cuda(k?)`
The tensor on the CPU, or on CUDA device `k` (raises when no CUDA backend).

### `Tensor:type()`
The dtype string (as `t.dtype`).

### `Tensor:version()`
The version counter of the tensor's storage, bumped by every in-place write.

### `Tensor:data_ptr()`
The address of the first element as an FFI pointer (`void *`). A write
through it is not seen as an in-place write: call
`ember.autodiff.graph.increment_version(t)` after it, since what ops keep
derived from a tensor (a convolution weight in oneDNN's layout, eval-mode
batch norm's scale and shift) holds while its version does.

### `Tensor:free()`
Releases the tensor's memory now instead of at garbage collection; using the
tensor afterwards raises. Calling it twice is harmless.

### `Tensor:grad_fn()`
The autograd node that produced this tensor in an active recording, or nil
(docs: `ember.autodiff.graph`).

### `Tensor:register_hook(fn)`
`fn(grad)` runs when the tensor's gradient is computed and may return a
replacement. Returns a handle with `:remove()`.

### `Tensor:register_post_accumulate_grad_hook(fn)`
`fn(t)` runs after `t.grad` has been updated by backward. Returns a handle.
]==]
