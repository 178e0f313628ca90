-- API reference: ember.nn.functional (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.nn.functional`: layers as functions

`local F = ember.nn.functional`. Stateless forms of the layers, with
PyTorch's signatures; options come in a last table. Losses reduce by mean
(`{reduction = "sum"}` or `"none"`); the pointwise ones take an input and a
target of one shape (PyTorch would broadcast them).

### `ember.nn.functional.linear(x, w, b?)`
`x w^T + b`, `w` of shape `{out, in}`.

### `ember.nn.functional.linear_relu(x, w, b?)`
`relu(x w^T + b)` as one op (PyTorch's `torch.nn.intrinsic.LinearReLU`)
for a bias of shape `{out}`: in float32 and float64 on the CPU the bias is
copied into the result's rows, the product added to it (beta = 1) and the
ReLU applied to the rows just written, and backward reads
the ReLU's mask from the output and sums the bias gradient in the pass that
applies it (C `ember_relu_bias_backward`). Values and gradients are those of
`F.linear(x, w, b):relu()`. `nn.Sequential` runs an `nn.Linear` with a bias
followed by an `nn.ReLU` through it.

### `ember.nn.functional.conv2d(x, w, b?, opts?)`
2-D convolution of `(N, C, H, W)` with `w` `{out, C/groups, kh, kw}`;
`opts = {stride = 1, padding = 0, dilation = 1, groups = 1}`.

### `ember.nn.functional.conv2d_relu(x, w, b?, opts?)`
`relu(conv2d(x, w, b, opts))` as one op where it can be: with a bias, on the
CPU, the convolution adds the bias and applies the ReLU as it writes its
output (a oneDNN convolution with a ReLU post-op for float32, one pass after
ember's kernels otherwise), and backward keeps the output instead of the
convolution's and the sum's. Without a bias, or on a GPU, it is conv2d then
relu.

### `ember.nn.functional.conv2d_relu_max_pool2d(x, w, b?, opts?, kernel, pool_opts?)`
`max_pool2d(relu(conv2d(x, w, b, opts)), kernel, pool_opts)` as one op:
`pool_opts = {stride = kernel}`, no padding. The pooled values are what
the three ops give, the first maximum of a window kept. Backward keeps x, w
and the pooled values and their int32 positions, not the convolution's output. On the
CPU in float32 through oneDNN, with the pool's stride equal to its kernel,
the convolution's output is pooled in the blocked layout oneDNN writes it
in, and backward writes the gradient straight into the layout the adjoints
read. Elsewhere it runs conv2d_relu and max_pool2d. Without a bias it is the
three ops. `nn.Sequential` runs it for a `Conv2d` with a bias and
`activation = "relu"` followed by a `MaxPool2d` without padding.

### `ember.nn.functional.conv1d(x, w, b?, opts?)`
1-D convolution of `(N, C, L)` with `w` `{out, C/groups, k}`; `opts` as
conv2d's (each a number or `{n}`). No unbatched `(C, L)` input.

### `ember.nn.functional.conv_transpose2d(x, w, b?, opts?)`
Transposed 2-D convolution of `(N, C, H, W)` with `w` `{C, out/groups, kh,
kw}`; `opts = {stride = 1, padding = 0, output_padding = 0, groups = 1,
dilation = 1}`. Output size `(in - 1) stride - 2 padding + dilation (k - 1)
+ output_padding + 1`; `output_padding` must be below the stride or the
dilation.

### `ember.nn.functional.max_pool2d(x, kernel_size, stride?, padding?, dilation?, ceil_mode?, return_indices?, opts?)`
Max pooling of `(N, C, H, W)` or `(C, H, W)` with PyTorch's arguments,
positionally or in a last options table: `stride = kernel_size`, `padding =
0` (at most half the kernel), `dilation = 1`, `ceil_mode = false` (the last
window may run past the input but must start inside it or the left
padding), `return_indices = false`: also the int64 flat positions of the
maxima (`h * W + w`, 0-based). NaN propagates. The older form
`F.max_pool2d(x, k, {stride =, padding =}, return_indices)` still works.

### `ember.nn.functional.max_pool1d(x, kernel_size, stride?, padding?, dilation?, ceil_mode?, return_indices?, opts?)`, `ember.nn.functional.max_pool3d(x, kernel_size, stride?, padding?, dilation?, ceil_mode?, return_indices?, opts?)`
`max_pool2d` over `(N, C, L)` / `(C, L)`, or `(N, C, D, H, W)` / `(C, D, H,
W)`; the indices are flat positions within each plane of 1 or 3 dims.

### `ember.nn.functional.avg_pool2d(x, kernel_size, stride?, padding?, ceil_mode?, count_include_pad?, divisor_override?, opts?)`
Average pooling with PyTorch's arguments (positionally or in a last options
table): `count_include_pad = true` counts the zero padding in each window's
divisor (not the part of a `ceil_mode` window past the padding);
`divisor_override` divides every window's sum by that number instead.

### `ember.nn.functional.avg_pool1d(x, kernel_size, stride?, padding?, ceil_mode?, count_include_pad?, opts?)`, `ember.nn.functional.avg_pool3d(x, kernel_size, stride?, padding?, ceil_mode?, count_include_pad?, divisor_override?, opts?)`
`avg_pool2d` over 1 or 3 spatial dims.

### `ember.nn.functional.adaptive_max_pool2d(x, output_size, return_indices?, opts?)`
Max pooling of `(N, C, H, W)` or `(C, H, W)` to `output_size` (a number or
`{h, w}`, `nil` keeping a size) over PyTorch's bins (as
`adaptive_avg_pool2d`'s); `return_indices` also gives the int64 0-based flat
positions of the maxima.

### `ember.nn.functional.adaptive_max_pool1d(x, output_size, return_indices?, opts?)`, `ember.nn.functional.adaptive_max_pool3d(x, output_size, return_indices?, opts?)`
`adaptive_max_pool2d` over 1 or 3 spatial dims.

### `ember.nn.functional.adaptive_avg_pool1d(x, output_size, opts?)`, `ember.nn.functional.adaptive_avg_pool3d(x, output_size, opts?)`
`adaptive_avg_pool2d` over 1 or 3 spatial dims.

### `ember.nn.functional.conv3d(x, w, b?, stride?, padding?, dilation?, groups?, opts?)`
3-D convolution of `(N, C, D, H, W)` (or `(C, D, H, W)`) with `w` `{out,
C/groups, kd, kh, kw}`; arguments positionally or in a last options table,
each spatial one a number or `{d, h, w}`. A sum over the depth taps of
conv2d.

### `ember.nn.functional.conv_transpose1d(x, w, b?, stride?, padding?, output_padding?, groups?, dilation?, opts?)`
Transposed 1-D convolution of `(N, C, L)` (or `(C, L)`) with `w` `{C,
out/groups, k}`: `conv_transpose2d` over a height of 1.

### `ember.nn.functional.pixel_shuffle(x, upscale_factor, opts?)`, `ember.nn.functional.pixel_unshuffle(x, downscale_factor, opts?)`
`(*, C r^2, H, W)` to `(*, C, H r, W r)` and back, as PyTorch's.

### `ember.nn.functional.adaptive_avg_pool2d(x, output_size)`
Average pooling of `(N, C, H, W)` or `(C, H, W)` to `output_size`, a number
or `{h, w}` (`nil` keeps a size); bin `i` of `h` covers rows `floor(i H / h)`
to `ceil((i + 1) H / h) - 1`, as in PyTorch.

### `ember.nn.functional.pad(x, pads, mode?, value?)`
Pads with `pads = {left, right, top, bottom, ...}` (pairs from the last dim
backwards); `mode` `"constant"` (fills `value`, 0; negative pads crop),
`"reflect"`, `"replicate"` or `"circular"` (all the spatial dims, 1 to 3,
of `(N, C, ...)` or `(C, ...)`). Also `F.pad(x, pads, {mode =, value =})`.

### `ember.nn.functional.interpolate(x, opts)`
Resizes the spatial dims of `(N, C, ...)`: `opts = {size | scale_factor,
mode = "nearest", align_corners = false, recompute_scale_factor}`, `mode`
`"nearest"` (1 to 3 spatial dims), `"linear"`, `"bilinear"` or
`"trilinear"`; PyTorch 1.13's source indices (docs/nn.md). No `"bicubic"`,
`"area"` or `"nearest-exact"`.

### `ember.nn.functional.relu(x)`
`max(x, 0)`, as `x:relu()`.

### `ember.nn.functional.gelu(x, opts?)`
`x * Phi(x)`, or the tanh approximation with `{approximate = "tanh"}`.

### `ember.nn.functional.tanh(x)`
`tanh(x)`, as `x:tanh()`.

### `ember.nn.functional.sigmoid(x)`
`1 / (1 + e^-x)`, as `x:sigmoid()`.

### `ember.nn.functional.silu(x)`
`x * sigmoid(x)`, as `x:silu()`.

### `ember.nn.functional.softmax(x, dim?)`, `ember.nn.functional.log_softmax(x, dim?)`
As the tensor methods.

### `ember.nn.functional.dropout(x, p?, training?)`
Zeroes elements with probability `p` (0.5) and scales the rest by
`1/(1-p)`; returns `x` when `training` is false. Also `dropout(x, {p =,
training =, generator =})`: the mask drawn from an `ember.Generator`.

### `ember.nn.functional.one_hot(t, num_classes?, opts?)`
`t` (an integer tensor of 1-based class indices) as one-hot rows: `t`'s
shape plus a last dim of `num_classes` (default -1: the largest index in
`t`), 1 at each class. int64 as PyTorch's unless `opts = {dtype =}` (e.g.
`"float32"`); an index outside `1..num_classes` raises.

### `ember.nn.functional.dropout1d(x, p?, training?, inplace?, opts?)`, `ember.nn.functional.dropout2d(x, p?, training?, inplace?, opts?)`
Zeroes whole channels of `(N, C, L)` / `(C, L)` or `(N, C, H, W)` with
probability `p` (0.5), scaling the rest by `1/(1-p)`; `dropout2d` refuses a
3-D input (PyTorch 1.13 reads it as `(N, C, L)`, later versions as `(C, H,
W)`).

### `ember.nn.functional.leaky_relu(x, negative_slope?, inplace?, opts?)`
`x` where `x > 0`, else `negative_slope * x` (0.01). Every activation
below takes its arguments positionally or in a last options table, and
`inplace = true` writes the result into `x` and returns `x`; NaN
propagates.

### `ember.nn.functional.elu(x, alpha?, inplace?, opts?)`, `ember.nn.functional.celu(x, alpha?, inplace?, opts?)`, `ember.nn.functional.selu(x, inplace?, opts?)`
`x` where `x > 0`, else `alpha (exp(x) - 1)` (ELU) or `alpha (exp(x /
alpha) - 1)` (CELU), `alpha = 1`; SELU is `1.0507 * elu(x, 1.6733)` with
PyTorch's constants.

### `ember.nn.functional.prelu(x, weight)`
`leaky_relu` with a learnable slope: `weight` one value or one per channel
(dim 2 of `x`).

### `ember.nn.functional.relu6(x, inplace?, opts?)`, `ember.nn.functional.hardtanh(x, min_val?, max_val?, inplace?, opts?)`
`x` clamped to `[0, 6]` or `[min_val, max_val]` (-1, 1); the gradient is
0 at the bounds, as PyTorch's.

### `ember.nn.functional.hardswish(x, inplace?, opts?)`, `ember.nn.functional.hardsigmoid(x, inplace?, opts?)`
`x * relu6(x + 3) / 6` and `relu6(x + 3) / 6`.

### `ember.nn.functional.softplus(x, beta?, threshold?, opts?)`
`log(1 + exp(beta x)) / beta` (`beta = 1`), `x` where `beta x > threshold`
(20).

### `ember.nn.functional.softsign(x)`, `ember.nn.functional.mish(x, inplace?, opts?)`, `ember.nn.functional.logsigmoid(x)`
`x / (1 + |x|)`, `x * tanh(softplus(x))` and `log(sigmoid(x))` (stable for
large `|x|`).

### `ember.nn.functional.glu(x, dim?, opts?)`
`a * sigmoid(b)` for the two halves `a`, `b` of `x` along `dim` (-1).

### `ember.nn.functional.layer_norm(x, normalized_shape, w?, b?, opts?)`
Normalises over the last dims; `opts = {eps = 1e-5}`.

### `ember.nn.functional.rms_norm(x, normalized_shape, w?, opts?)`
`x / sqrt(mean(x^2) + eps) * w` over the last dims; `opts = {eps =}`, by
default the dtype's machine epsilon (PyTorch's `eps=None`).

### `ember.nn.functional.group_norm(x, num_groups, w?, b?, opts?)`
Normalises `(N, C, ...)` over each group of `C/num_groups` channels (mean
and biased variance), then scales by `w` and shifts by `b` (`{C}` each);
`opts = {eps = 1e-5}`.

### `ember.nn.functional.instance_norm(x, running_mean?, running_var?, w?, b?, opts?)`
Normalises each `(n, c)` plane of `(N, C, ...)` over its spatial dims;
`opts = {use_input_stats = true, momentum = 0.1, eps = 1e-5}`. Given
running statistics, they move by `momentum` towards the batch mean of the
per-plane mean and unbiased variance, or normalise when `use_input_stats` is
false.

### `ember.nn.functional.batch_norm(x, running_mean, running_var, w?, b?, opts?)`
Batch normalisation; `opts = {training = false, momentum = 0.1, eps = 1e-5,
activation = nil}` (in training the running statistics are updated in
place). Training runs the op `batch_norm` (C `ember_batch_norm`, which also
returns the batch's mean and biased variance as a (2, C) tensor; docs/nn.md,
"Batch normalisation"). `activation = "relu"` or `"relu6"` gives `F.relu` or
`F.relu6` of the result, bit for bit, in training as one op,
`batch_norm_act`, that applies it as y is written and whose backward masks
the gradient in the same pass (`nn.Sequential` runs a `BatchNorm1d/2d`
followed by `ReLU` or `ReLU6` so); any other value raises. In
eval mode it is one op, `channel_affine` (C `ember_channel_affine`): `x
scale + shift` with the activation, scale and shift worked out per channel
from the running statistics, w and b.

### `ember.nn.functional.embedding(idx, weight, padding_idx?, max_norm?, norm_type?, scale_grad_by_freq?, sparse?, opts?)`
The rows of `weight` at the 1-based int64/int32 indices `idx`; arguments
positionally or in a last options table. The lookups of row `padding_idx`
(1-based, negative from the end) pass no gradient; with `max_norm` each row
looked up whose `norm_type`-norm (2) exceeds it is scaled in place to
`max_norm`, as PyTorch's. `scale_grad_by_freq` and `sparse` raise.

### `ember.nn.functional.cross_entropy(logits, labels, opts?)`
Softmax cross-entropy of logits `(N, C)` (or `(N, C, ...)`, `(C)`) and
int64 1-based class labels; `opts = {reduction, weight, ignore_index,
label_smoothing}`.

### `ember.nn.functional.nll_loss(logp, labels, opts?)`
Negative log-likelihood of log-probabilities, with `cross_entropy`'s
options.

### `ember.nn.functional.mse_loss(a, b, opts?)`, `ember.nn.functional.l1_loss(a, b, opts?)`
Mean squared error and mean absolute error.

### `ember.nn.functional.smooth_l1_loss(input, target, opts?)`
`0.5 d^2 / beta` where `|d| < beta`, else `|d| - 0.5 beta`, `d = input -
target`; `opts = {reduction = "mean", beta = 1}` (`beta >= 0`; 0 gives
`l1_loss`).

### `ember.nn.functional.huber_loss(input, target, opts?)`
`0.5 d^2` where `|d| <= delta`, else `delta (|d| - 0.5 delta)`:
`smooth_l1_loss` with `beta = delta`, times `delta`;
`opts = {reduction = "mean", delta = 1}` (`delta > 0`).

### `ember.nn.functional.binary_cross_entropy(input, target, opts?)`
`-(y log p + (1-y) log(1-p))` of probabilities `p = input` in [0, 1]
(another value raises), each log floored at -100 as in PyTorch, so a
saturated 0 or 1 gives a finite gradient; `opts = {weight, reduction =
"mean"}`, `weight` broadcast to the input.

### `ember.nn.functional.binary_cross_entropy_with_logits(x, y, opts?)`
`-(y log sigmoid(x) + (1-y) log(1 - sigmoid(x)))`, computed stably;
`opts = {weight, pos_weight, reduction = "mean"}`, `pos_weight` scaling the
positive term (broadcast along the last dim).

### `ember.nn.functional.kl_div(input, target, opts?)`
`target * (log target - input)` pointwise: `input` holds log-probabilities,
`target` probabilities (log-probabilities with `log_target = true`); a
target of 0 adds 0. `opts = {reduction = "mean", log_target = false}`;
`reduction = "batchmean"` divides the sum by the size of dim 1 (the KL
divergence), `"mean"` by the number of elements, as in PyTorch.

### `ember.nn.functional.lstm_cell(gi, gh, c)`
The LSTM cell's fused op: from the input's and the state's gate products
`gi`, `gh` `(N, 4 H)` (order i, f, g, o, biases included) and the cell state
`c` `(N, H)`, returns `h', c'`; differentiable to any order.

### `ember.nn.functional.gru_cell(gi, gh, h)`
The GRU cell's fused op: from `gi`, `gh` `(N, 3 H)` (order r, z, n) and the
state `h` `(N, H)`, returns `h'`, with `n = tanh(gi_n + r * gh_n)` as in
PyTorch.

### `ember.nn.functional.scaled_dot_product_attention(q, k, v, opts?)`
`softmax(q k^T * scale + mask) v` over `(..., L, d)` inputs;
`opts = {attn_mask, is_causal, scale = 1/sqrt(d)}` (a bool mask is true
where attention is not allowed).
]==]
