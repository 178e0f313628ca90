-- API reference: math on tensors (see lua/ember/doc/init.lua for the format)
return [==[
## `ops`: math on tensors

Every op is a method (`a:add(b)`) and most are also functions of `ember`
(`ember.add(a, b)`). Binary ops broadcast as PyTorch does and take numbers on
either side; dtypes promote as in PyTorch (docs/dtypes.md). Ops are recorded
by every active GradManager. Methods ending in `_` write in place, return the
tensor itself and bump its version.

### `Tensor:add(b)`, `ember.add(a, b)`
`a + b` elementwise.

### `Tensor:sub(b)`, `ember.sub(a, b)`
`a - b` elementwise.

### `Tensor:mul(b)`, `ember.mul(a, b)`
`a * b` elementwise.

### `Tensor:div(b)`, `ember.div(a, b)`
`a / b` elementwise (true division; integers promote to float).

### `Tensor:pow(p)`, `ember.pow(a, p)`
`a ^ p` elementwise; `p` a number or a tensor.

### `Tensor:maximum(b)`, `ember.maximum(a, b)`, `Tensor:minimum(b)`, `ember.minimum(a, b)`
The elementwise larger or smaller of `a` and `b` (NaN propagates).

### `Tensor:add_(b)`, `Tensor:sub_(b)`, `Tensor:mul_(b)`, `Tensor:div_(b)`, `Tensor:pow_(p)`
In-place `a = a + b` (and so on); `b` broadcasts to `a`'s shape.

### `Tensor:eq(b)`, `ember.eq(a, b)`, `Tensor:ne(b)`, `ember.ne(a, b)`
Elementwise `==` and `~=` as a bool tensor.

### `Tensor:lt(b)`, `ember.lt(a, b)`
Elementwise `a < b` as a bool tensor.

### `Tensor:le(b)`, `ember.le(a, b)`
Elementwise `a <= b` as a bool tensor.

### `Tensor:gt(b)`, `ember.gt(a, b)`
Elementwise `a > b` as a bool tensor.

### `Tensor:ge(b)`, `ember.ge(a, b)`
Elementwise `a >= b` as a bool tensor.

### `Tensor:neg()`, `ember.neg(t)`, `Tensor:neg_()`
`-t`, elementwise; `neg_` in place.

### `Tensor:exp()`, `ember.exp(t)`, `Tensor:exp_()`
`e^t`, elementwise; `exp_` in place.

### `Tensor:log()`, `ember.log(t)`, `Tensor:log_()`
The natural logarithm, elementwise; `log_` in place.

### `Tensor:log1p()`, `ember.log1p(t)`, `Tensor:log1p_()`
`log(1 + t)`, elementwise, exact for small `t` where `log(1 + t)` would round
`1 + t` first; `log1p_` in place.

### `Tensor:sqrt()`, `ember.sqrt(t)`, `Tensor:sqrt_()`
`sqrt(t)`, elementwise; `sqrt_` in place.

### `Tensor:rsqrt()`, `ember.rsqrt(t)`, `Tensor:rsqrt_()`
`1 / sqrt(t)`, elementwise; `rsqrt_` in place.

### `Tensor:abs()`, `ember.abs(t)`, `Tensor:abs_()`
`|t|`, elementwise; `abs_` in place.

### `Tensor:sign()`, `ember.sign(t)`, `Tensor:sign_()`
-1, 0 or 1 by the sign, elementwise; `sign_` in place.

### `Tensor:sin()`, `ember.sin(t)`, `Tensor:sin_()`
The sine (radians), elementwise; `sin_` in place.

### `Tensor:cos()`, `ember.cos(t)`, `Tensor:cos_()`
The cosine (radians), elementwise; `cos_` in place.

### `Tensor:tanh()`, `ember.tanh(t)`, `Tensor:tanh_()`
`tanh(t)`, elementwise; `tanh_` in place.

### `Tensor:sigmoid()`, `ember.sigmoid(t)`, `Tensor:sigmoid_()`
`1 / (1 + e^-t)`, elementwise; `sigmoid_` in place.

### `Tensor:erf()`, `ember.erf(t)`, `Tensor:erf_()`
The error function, elementwise; `erf_` in place.

### `Tensor:lgamma()`, `ember.lgamma(t)`, `Tensor:lgamma_()`
`log|Gamma(t)|`, elementwise (the math library's; `inf` at 0 and the
negative integers); `lgamma_` in place. Its gradient is `digamma`.

### `Tensor:digamma()`, `ember.digamma(t)`, `Tensor:digamma_()`
`Gamma'(t) / Gamma(t)`, elementwise, as PyTorch's: `-inf` at 0, NaN at the
negative integers; `digamma_` in place. Its gradient is `trigamma`.

### `Tensor:trigamma()`, `ember.trigamma(t)`, `Tensor:trigamma_()`
The derivative of `digamma` (PyTorch's `polygamma(1, t)`), elementwise;
`inf` at 0 and the negative integers; `trigamma_` in place. Its gradient
is `polygamma(2, t)`.

### `ember.polygamma(n, t)`, `Tensor:polygamma(n)`
The `n`-th derivative of `digamma` (`n` an integer >= 0), elementwise, as
PyTorch's: `digamma` and `trigamma` for 0 and 1, `(-1)^(n+1) n! zeta(n + 1,
t)` (the Hurwitz zeta function) beyond; `+-inf` at 0 and the negative
integers (by that sign), 0 at `inf` (PyTorch's gives NaN there). Computed
in double; floats keep their dtype, integers and bools give float32. Its
gradient is `polygamma(n + 1, t)`, so every order differentiates again.

### `Tensor:relu()`, `ember.relu(t)`, `Tensor:relu_()`
`max(t, 0)`, elementwise, NaN kept (as PyTorch: `relu(NaN)` is NaN and
`relu(-0)` is -0); `relu_` in place. Its gradient is 0 where the output is
<= 0, else the incoming gradient (also where the output is NaN).

### `Tensor:silu()`, `ember.silu(t)`, `Tensor:silu_()`
`t * sigmoid(t)`, elementwise; `silu_` in place.

### `Tensor:mish()`, `ember.mish(t)`, `Tensor:mish_()`
`t * tanh(log(1 + e^t))`, elementwise, one op (`F.mish`); `mish_` in place.

### `Tensor:gelu(opts?)`, `ember.gelu(t, opts?)`
`t * Phi(t)` (the exact erf form), or the tanh approximation with
`{approximate = "tanh"}`.

### `Tensor:clamp(min?, max?)`, `ember.clamp(t, min?, max?)`
Elements limited to `[min, max]` (either bound nil for none; numbers or
tensors). On an integer tensor number bounds must be whole numbers its dtype
holds, else it raises naming the bound (docs/dtypes.md).

### `Tensor:clamp_(min?, max?)`
In-place `clamp`.

### `ember.where(cond, a, b)`, `Tensor:where(cond, b)`
`a` where the bool tensor `cond` is true, else `b` (all broadcast; numbers
allowed). `a:where(cond, b)` is `ember.where(cond, a, b)`.

### `Tensor:masked_fill(mask, value)`, `ember.masked_fill(t, mask, value)`
`value` where the bool `mask` (broadcast to `t`) is true, `t` elsewhere.

### `Tensor:masked_fill_(mask, value)`
In-place `masked_fill` (what `x[mask] = value` does).

### `Tensor:fill_(value)`, `Tensor:zero_()`
Sets every element to `value` (or 0); cuts the autograd history.

### `Tensor:copy_(src)`
Copies `src` (broadcast, converted to this dtype) into the tensor; the
history comes from `src`.

### `Tensor:uniform_(lo?, hi?, opts?)`, `Tensor:normal_(mean?, std?, opts?)`
Refills the tensor from U[lo, hi) (default [0, 1)) or N(mean, std^2)
(default N(0, 1)). `opts = {generator =}` draws from an `ember.Generator`.

### `Tensor:exponential_(lambd?, opts?)`
Refills a floating point tensor with exponential draws of rate `lambd`
(default 1; mean 1/lambd).

### `Tensor:geometric_(p, opts?)`
Refills the tensor with the trial of the first success of probability `p`
(1, 2, ...; mean 1/p), any numeric dtype.

### `Tensor:bernoulli_(p?, opts?)`
Refills the tensor with 1 with probability `p` (a number, default 0.5, or a
tensor of probabilities broadcast to it) and 0 otherwise.

### `Tensor:sum(dim?, keepdim?)`, `ember.sum(t, dim?, keepdim?)`
The sum over all elements (0-d), or over `dim` (a dim or a list of dims),
dropping it unless `keepdim`. As in every reduction, `keepdim` (and
`unbiased`) is a boolean or nil: another value (`"yes"`, `1`) raises naming it.

### `Tensor:mean(dim?, keepdim?)`, `ember.mean(t, dim?, keepdim?)`
The mean over all elements or over `dim`.

### `Tensor:var(dim?, keepdim?, unbiased?)`, `ember.var(t, dim?, keepdim?, unbiased?)`
The variance (divided by n - 1 unless `unbiased` is false).

### `Tensor:std(dim?, keepdim?, unbiased?)`, `ember.std(t, dim?, keepdim?, unbiased?)`
The square root of `var`.

### `Tensor:norm(p?, dim?, keepdim?)`, `ember.norm(t, p?, dim?, keepdim?)`
The p-norm (default 2; `math.huge` for the max norm) over everything or
over `dim`.

### `Tensor:logsumexp(dim, keepdim?)`, `ember.logsumexp(t, dim, keepdim?)`
`log(sum(exp(t), dim))`, computed stably.

### `Tensor:max(dim?, keepdim?)`, `ember.max(t, dim?, keepdim?)`
With no dim, the largest element as a 0-d tensor; with `dim`, two tensors:
the largest values along it and their int64 1-based indices.

### `Tensor:min(dim?, keepdim?)`, `ember.min(t, dim?, keepdim?)`
As `max`, for the smallest.

### `Tensor:argmax(dim?, keepdim?)`, `ember.argmax(t, dim?, keepdim?)`
The int64 1-based index of the largest element, over the flattened tensor
or along `dim`.

### `Tensor:argmin(dim?, keepdim?)`, `ember.argmin(t, dim?, keepdim?)`
As `argmax`, for the smallest.

### `Tensor:softmax(dim?)`, `ember.softmax(t, dim?)`
`exp(t) / sum(exp(t), dim)` along `dim` (default the last).

### `Tensor:log_softmax(dim?)`, `ember.log_softmax(t, dim?)`
`log(softmax(t, dim))`, computed stably.

### `Tensor:sum_to(shape)`
Sums broadcast dims away so that the result has `shape` (the reverse of
broadcasting).

### `Tensor:matmul(b)`, `ember.matmul(a, b)`
Matrix product: 1-D with 1-D is a dot product, 2-D with 2-D a matrix
product, and more dims are batched with broadcasting (PyTorch's rules).

### `Tensor:t()`
The transpose of a 2-D tensor (a view); 0-D and 1-D come back as they are.

### `Tensor:reshape(shape)`, `ember.reshape(t, shape)`
The same elements in a new shape (one size may be -1): a view when the
strides allow it, else a copy. Sizes may also be given as arguments.

### `Tensor:view(shape)`, `ember.view(t, shape)`
Like `reshape`, but always a view; raises when the strides do not allow one.

### `Tensor:view_as(other)`, `Tensor:reshape_as(other)`
`view` or `reshape` to `other`'s shape.

### `Tensor:expand(shape)`, `ember.expand(t, shape)`, `Tensor:expand_as(other)`
A broadcast view of size-1 dims to `shape` (-1 keeps a size); no copy.

### `Tensor:transpose(d1, d2)`, `ember.transpose(t, d1, d2)`
A view with dims `d1` and `d2` swapped.

### `Tensor:permute(dims)`, `ember.permute(t, dims)`
A view with the dims reordered (`t:permute({2, 1, 3})`).

### `Tensor:squeeze(d?)`, `ember.squeeze(t, d?)`
A view without size-1 dims (or only dim `d`, if it has size 1).

### `Tensor:unsqueeze(d)`, `ember.unsqueeze(t, d)`
A view with a new size-1 dim at position `d`.

### `Tensor:flatten(start?, end?)`, `ember.flatten(t, start?, end?)`
Dims `start..end` (default all) merged into one.

### `Tensor:narrow(d, start, length)`, `ember.narrow(t, d, start, length)`
A view of `length` entries of dim `d` from `start`.

### `Tensor:select(d, i)`, `ember.select(t, d, i)`
The view at index `i` of dim `d`, that dim removed (`x[i]` is `x:select(1, i)`).

### `Tensor:index_select(d, idx)`, `ember.index_select(t, d, idx)`
The entries of dim `d` at the 1-based indices in the int64/int32 tensor
`idx` (a copy).

### `Tensor:index_add(d, idx, src)`, `ember.index_add(t, d, idx, src)`
`t` with the slices of `src` added at the 1-based positions `idx` of dim
`d` (repeated indices accumulate).

### `Tensor:index_add_(d, idx, src)`
`index_add` in place.

### `Tensor:gather(d, idx)`, `ember.gather(t, d, idx)`
`out[i][j] = t[idx[i][j]][j]` for `d = 1` (and so on): the entries along
`d` at the 1-based indices in `idx`, which has the output's shape.
]==]
