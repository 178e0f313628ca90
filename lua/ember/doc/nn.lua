-- API reference: ember.nn (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.nn`: layers

Layers are modules (`ember.nn.Module`): call one like a function to run its
`forward`. Each is a thin wrapper over `ember.nn.functional`; parameters are
float32 unless the options say `{dtype = "float64"}`, initialised as in
PyTorch. Inputs are batched `(N, ...)`. Details: docs/nn.md.

### `ember.nn.Linear(in_features, out_features, opts?)`
`y = x W^T + b`; `weight` `{out, in}` and `bias` `{out}` from
U(-1/sqrt(in), 1/sqrt(in)); `{bias = false}` leaves the bias out.

### `ember.nn.Conv2d(in_channels, out_channels, kernel, opts?)`
2-D convolution of `(N, C, H, W)` input; `kernel` a number or `{kh, kw}`;
`opts = {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true,
activation = nil}`. `activation = "relu"` makes it PyTorch's `ConvReLU2d`:
the forward is `F.conv2d_relu`, one op for the convolution, its bias and the
ReLU.

### `ember.nn.Conv1d(in_channels, out_channels, kernel, opts?)`
1-D convolution of `(N, C, L)` input (conv2d over a height of 1); `weight`
`{out, in/groups, k}`; `opts` as Conv2d's, each spatial option a number or
`{n}`. Stride and padding may also come positionally.

### `ember.nn.ConvTranspose2d(in_channels, out_channels, kernel, opts?)`
Transposed 2-D convolution (conv2d's input gradient); `weight` `{in,
out/groups, kh, kw}`; `opts = {stride = 1, padding = 0, output_padding = 0,
groups = 1, dilation = 1, bias = true}`. `m(x, output_size)` picks the
`output_padding` that gives `output_size` (`{H, W}` or `{N, C, H, W}`).

### `ember.nn.MaxPool2d(kernel, opts?)`, `ember.nn.AvgPool2d(kernel, opts?)`
Max or average pooling over `(N, C, H, W)`; `opts = {stride = kernel,
padding = 0}` (average pooling counts padding as zeros).

### `ember.nn.AdaptiveAvgPool2d(output_size)`
Average pooling of `(N, C, H, W)` or `(C, H, W)` to `output_size`, a number
or `{h, w}` (`nil` keeps that dim's size: `{nil, 7}`), with PyTorch's bins.

### `ember.nn.Upsample(opts)`
`F.interpolate` as a module: `opts = {size, scale_factor, mode = "nearest",
align_corners, recompute_scale_factor}`, kept as fields.

### `ember.nn.BatchNorm1d(num_features, opts?)`, `ember.nn.BatchNorm2d(num_features, opts?)`
Batch normalisation over `(N, C)`/`(N, C, L)` or `(N, C, H, W)` with running
statistics for `eval()`; `opts = {eps = 1e-5, momentum = 0.1, affine = true,
track_running_stats = true}`.

### `ember.nn.LayerNorm(normalized_shape, opts?)`
Normalises over the last dims `normalized_shape`; `opts = {eps = 1e-5,
elementwise_affine = true}`.

### `ember.nn.GroupNorm(num_groups, num_channels, opts?)`
Normalises each of `num_groups` channel groups of `(N, C, ...)` input by its
own mean and biased variance; `opts = {eps = 1e-5, affine = true}`
(`weight` 1, `bias` 0, one per channel).

### `ember.nn.InstanceNorm1d(num_features, opts?)`, `ember.nn.InstanceNorm2d(num_features, opts?)`, `ember.nn.InstanceNorm3d(num_features, opts?)`
Normalises each `(n, c)` plane of `(N, C, L)`, `(N, C, H, W)` or `(N, C, D,
H, W)` input (or unbatched `(C, ...)`) over its spatial dims; `opts = {eps =
1e-5, momentum = 0.1, affine = false, track_running_stats = false}`. With
`track_running_stats`, `eval()` uses the running statistics
(`num_batches_tracked` stays 0, as in PyTorch); with neither option any
channel count is taken (PyTorch warns).

### `ember.nn.Dropout(p?)`
Zeroes elements with probability `p` (0.5) in training and scales the rest
by `1/(1-p)`; the identity in `eval()`.

### `ember.nn.Embedding(num_embeddings, embedding_dim, opts?)`
A lookup table: int64 1-based indices to rows of `weight` (from N(0, 1)).

### `ember.nn.ReLU()`, `ember.nn.Tanh()`, `ember.nn.Sigmoid()`, `ember.nn.SiLU()`
The activation as a module.

### `ember.nn.GELU(opts?)`
GELU as a module (`GELU({approximate = "tanh"})` for the tanh form).

### `ember.nn.Softmax(dim?)`, `ember.nn.LogSoftmax(dim?)`
`softmax` or `log_softmax` along `dim` (default the last).

### `ember.nn.Identity()`
Returns its input.

### `ember.nn.Flatten(start_dim?, end_dim?)`
Flattens dims `start_dim` (2) to `end_dim` (-1).

### `ember.nn.Sequential(...)`
Runs its modules in order; children are named `"1"`, `"2"`, ...;
`seq:add(m)`, `seq:get(i)`, `#seq`. An `nn.Linear` with a bias followed
by an `nn.ReLU` (neither of them given a `forward` of its own) runs as one
`F.linear_relu`, with the same values and gradients.

### `ember.nn.ModuleList(list?)`
A list of modules registered as children; `:append(m)`, `:get(i)`,
`:iter()`.

### `ember.nn.MultiheadAttention(embed_dim, num_heads, opts?)`
Multi-head attention; `forward(q, k, v, {attn_mask, is_causal,
key_padding_mask, need_weights = true})` returns the output and the
head-averaged weights. `opts = {bias = true, dropout = 0, batch_first =
false}`; parameters named as PyTorch's.

### `ember.nn.RNN(input_size, hidden_size, opts?)`, `ember.nn.LSTM(input_size, hidden_size, opts?)`, `ember.nn.GRU(input_size, hidden_size, opts?)`
Recurrent layers as PyTorch's: `opts = {num_layers = 1, bias = true,
batch_first = false, dropout = 0, bidirectional = false}` (RNN also
`nonlinearity = "tanh" | "relu"`; `num_layers` may come third). `m(input,
hx?)` returns `out, h_n` (LSTM: `out, {h_n, c_n}` from `hx = {h_0, c_0}`);
input `(L, N, H_in)`, `(N, L, H_in)` with `batch_first`, or unbatched.
Parameters `weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`
(`_reverse` for the backward direction), gates i, f, g, o (LSTM) and r, z,
n (GRU). Each step is one GEMM and one fused cell op.

### `ember.nn.RNNCell(input_size, hidden_size, opts?)`, `ember.nn.LSTMCell(input_size, hidden_size, opts?)`, `ember.nn.GRUCell(input_size, hidden_size, opts?)`
One step: `m(x, h?)` returns `h'` (LSTMCell: `m(x, {h, c}?)` returns `h',
c'`); `opts = {bias = true}` (RNNCell also `nonlinearity`). Parameters
`weight_ih`, `weight_hh`, `bias_ih`, `bias_hh`.

### `ember.nn.causal_mask(L)`
The `{L, L}` bool mask that is true above the diagonal (positions that may
not be attended to).

### `ember.nn.MSELoss(opts?)`, `ember.nn.L1Loss(opts?)`
`criterion(input, target)` is `F.mse_loss` or `F.l1_loss`;
`opts = {reduction = "mean"}`. Losses as modules keep their options as
fields (checked again at each call), PyTorch 1.13's names and defaults.

### `ember.nn.SmoothL1Loss(opts?)`, `ember.nn.HuberLoss(opts?)`
`F.smooth_l1_loss` (`opts = {reduction = "mean", beta = 1}`) or
`F.huber_loss` (`opts = {reduction = "mean", delta = 1}`) as a module.

### `ember.nn.BCELoss(opts?)`, `ember.nn.BCEWithLogitsLoss(opts?)`
`F.binary_cross_entropy` (`opts = {weight, reduction = "mean"}`) or
`F.binary_cross_entropy_with_logits` (also `pos_weight`) as a module;
`weight` and `pos_weight` are buffers (in `state_dict`, converted by `:to()`,
never parameters).

### `ember.nn.KLDivLoss(opts?)`
`F.kl_div` as a module; `opts = {reduction = "mean", log_target = false}`.

### `ember.nn.NLLLoss(opts?)`, `ember.nn.CrossEntropyLoss(opts?)`
`F.nll_loss` (`opts = {weight, ignore_index = -100, reduction = "mean"}`) or
`F.cross_entropy` (also `label_smoothing = 0`) as a module: labels are
1-based; `weight`, one per class, is a buffer.

## `ember.nn.Module`: the base of every layer

```lua
local Net = ember.nn.Module:extend("Net")
function Net:init(n) self.fc = ember.nn.Linear(n, 10) end
function Net:forward(x) return self.fc(x) end
local net = Net(784)
```

Assigning a tensor to a field registers a parameter, a module a child, in
assignment order.

### `Module:extend(name)`
A subclass named `name`; calling it creates an instance and runs `init`.

### `Module:new(...)`
Creates an instance and calls `init(...)` (what calling the class does).

### `Module:init(...)`
The constructor a subclass defines.

### `Module:forward(...)`
The computation a subclass defines; `m(x)` calls it.

### `Module:register_buffer(name, t)`
Registers state saved in `state_dict` but not a parameter (running stats).

### `Module:parameters()`, `Module:named_parameters()`
Every parameter of the tree (shared ones once), in registration order; the
named form is a list of `{name, t}` that also answers `list["fc.weight"]`
and iterates as `for name, t in m:named_parameters() do`.

### `Module:buffers()`, `Module:named_buffers()`
Every buffer of the tree, likewise.

### `Module:children()`, `Module:named_children()`
The direct child modules.

### `Module:modules()`
This module and every module below it.

### `Module:train(mode?)`, `Module:eval()`
Sets `training` on the whole tree (`eval()` is `train(false)`); returns the
module.

### `Module:zero_grad()`
Clears every parameter's `.grad`.

### `Module:state_dict()`
A table name -> tensor of the parameters and buffers (sharing storage).

### `Module:load_state_dict(sd, strict?)`
Copies `sd` into the parameters and buffers after checking every shape (and,
with `strict`, the default, missing and unexpected keys); returns
`{missing_keys =, unexpected_keys =}`.

### `Module:to(...)`, `Module:float()`, `Module:double()`, `Module:cpu()`, `Module:cuda()`
Converts every parameter and buffer in place (as `Tensor:to`); returns the
module.

### `Module:extra_repr()`
The text inside the parentheses when the module prints (`Linear(3, 2)`).

## `ember.nn.init`: initialisers

PyTorch 1.13's initialisers, gains and fan modes. Each fills a floating
point tensor in place from the seeded generator (`ember.manual_seed`),
outside any recording, and returns it. The arguments after the tensor come
positionally in PyTorch's order or as one table with PyTorch's names:
`init.kaiming_normal_(w, {mode = "fan_out", nonlinearity = "relu"})`.
Details: docs/nn.md.

### `ember.nn.init.uniform_(t, a?, b?)`
Fills `t` from U(a, b), `a = 0`, `b = 1` (`a <= b`).

### `ember.nn.init.normal_(t, mean?, std?)`
Fills `t` from N(mean, std^2), `mean = 0`, `std = 1` (`std >= 0`).

### `ember.nn.init.constant_(t, val)`, `ember.nn.init.zeros_(t)`, `ember.nn.init.ones_(t)`
Fills `t` with `val`, 0 or 1.

### `ember.nn.init.xavier_uniform_(t, gain?)`, `ember.nn.init.xavier_normal_(t, gain?)`
U(-b, b) with `b = gain * sqrt(6 / (fan_in + fan_out))`, or N(0, std^2)
with `std = gain * sqrt(2 / (fan_in + fan_out))`; `gain = 1`.

### `ember.nn.init.kaiming_uniform_(t, a?, mode?, nonlinearity?)`, `ember.nn.init.kaiming_normal_(t, a?, mode?, nonlinearity?)`
U(-sqrt(3) std, sqrt(3) std) or N(0, std^2) with
`std = calculate_gain(nonlinearity, a) / sqrt(fan)`; `a = 0`,
`mode = "fan_in"` (or `"fan_out"`), `nonlinearity = "leaky_relu"`. A tensor
with no elements is returned as it is.

### `ember.nn.init.orthogonal_(t, gain?)`
`t` seen as `(size(1), numel / size(1))` gets orthonormal rows (or columns,
when taller than wide) times `gain` (1): the Q of the QR factorisation of
N(0, 1) draws with R's diagonal positive, as PyTorch. 2 or more dims.

### `ember.nn.init.calculate_gain(nonlinearity, param?)`
The recommended gain: 1 for `"linear"`, the `"conv*"` names and
`"sigmoid"`, 5/3 for `"tanh"`, sqrt(2) for `"relu"`, 3/4 for `"selu"`,
`sqrt(2 / (1 + slope^2))` for `"leaky_relu"` (slope `param`, 0.01).

### `ember.nn.init.calculate_fan_in_and_fan_out(t)`
Two numbers, `fan_in, fan_out = size(2) * r, size(1) * r`, `r` the product
of the dims after the second (`{out, in}` for Linear, `{out, in / groups, kh,
kw}` for Conv2d); 2 or more dims. PyTorch's private
`_calculate_fan_in_and_fan_out`.

## `ember.nn.utils`: parameter-list helpers

PyTorch's `torch.nn.utils` helpers for a list of tensors (or a Module's
`parameters()`).

### `ember.nn.utils.parameters_to_vector(params)`
The parameters flattened and concatenated in order into one 1-D tensor,
with gradients to them; all must share a dtype and device.

### `ember.nn.utils.vector_to_parameters(vec, params)`
Copies consecutive slices of the 1-D `vec` into the parameters in place, in
order, outside any recording; `vec` must hold exactly as many elements.

### `ember.nn.utils.clip_grad_norm_(params, max_norm, norm_type?)`, `ember.nn.utils.clip_grad_value_(params, clip_value)`
`ember.optim.clip_grad_norm` and `ember.optim.clip_grad_value` under
PyTorch's names.
]==]
