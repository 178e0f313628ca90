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

### `ember.nn.Conv2d(in_channels, out_channels, kernel, stride?, padding?, dilation?, groups?, bias?, opts?)`
2-D convolution of `(N, C, H, W)` input; `kernel` a number or `{kh, kw}`;
`opts = {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true,
activation = nil}`. The options before `opts` may come positionally in
PyTorch's order, the options table after them (`Conv2d(3, 8, 3, 2, 1,
{bias = false})`); one given both ways, a value after the table or past
`bias` raises. `activation = "relu"` makes it PyTorch's `ConvReLU2d`: the
forward is `F.conv2d_relu`, one op for the convolution, its bias and the
ReLU.

### `ember.nn.Conv1d(in_channels, out_channels, kernel, stride?, padding?, dilation?, groups?, bias?, opts?)`
1-D convolution of `(N, C, L)` input (conv2d over a height of 1); `weight`
`{out, in/groups, k}`; `opts` as Conv2d's, each spatial option a number or
`{n}`, positionally in PyTorch's order as for Conv2d.

### `ember.nn.ConvTranspose2d(in_channels, out_channels, kernel, stride?, padding?, output_padding?, groups?, bias?, dilation?, opts?)`
Transposed 2-D convolution (conv2d's input gradient); `weight` `{in,
out/groups, kh, kw}`; `opts = {stride = 1, padding = 0, output_padding = 0,
groups = 1, bias = true, dilation = 1}`, positionally in PyTorch's order
(as listed) with the options table after them. `m(x, output_size)` picks the
`output_padding` that gives `output_size` (`{H, W}` or `{N, C, H, W}`).

### `ember.nn.MaxPool2d(kernel_size, stride?, padding?, dilation?, return_indices?, ceil_mode?, opts?)`, `ember.nn.MaxPool1d(kernel_size, stride?, padding?, dilation?, return_indices?, ceil_mode?, opts?)`, `ember.nn.MaxPool3d(kernel_size, stride?, padding?, dilation?, return_indices?, ceil_mode?, opts?)`
`F.max_pool1d/2d/3d` as modules, PyTorch's argument order (positionally or
in a last options table); with `return_indices` the module returns the
values and the indices.

### `ember.nn.AvgPool2d(kernel_size, stride?, padding?, ceil_mode?, count_include_pad?, divisor_override?, opts?)`, `ember.nn.AvgPool1d(kernel_size, stride?, padding?, ceil_mode?, count_include_pad?, opts?)`, `ember.nn.AvgPool3d(kernel_size, stride?, padding?, ceil_mode?, count_include_pad?, divisor_override?, opts?)`
`F.avg_pool1d/2d/3d` as modules (AvgPool1d has no `divisor_override`).

### `ember.nn.AdaptiveMaxPool2d(output_size, return_indices?, opts?)`, `ember.nn.AdaptiveMaxPool1d(output_size, return_indices?, opts?)`, `ember.nn.AdaptiveMaxPool3d(output_size, return_indices?, opts?)`
`F.adaptive_max_pool1d/2d/3d` as modules.

### `ember.nn.AdaptiveAvgPool1d(output_size, opts?)`, `ember.nn.AdaptiveAvgPool3d(output_size, opts?)`
`F.adaptive_avg_pool1d/3d` as modules.

### `ember.nn.Conv3d(in_channels, out_channels, kernel_size, stride?, padding?, dilation?, groups?, bias?, opts?)`
3-D convolution of `(N, C, D, H, W)`; `weight` `{out, in/groups, kd, kh,
kw}`, initialised as PyTorch's; arguments after the kernel positionally or
in a last options table; `dtype` only in the table (PyTorch's positional
order has `padding_mode` and `device` before it).

### `ember.nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride?, padding?, output_padding?, groups?, bias?, dilation?, opts?)`
Transposed 1-D convolution; `weight` `{in, out/groups, k}`; arguments as
Conv3d's (`dtype` only in the table).

### `ember.nn.PixelShuffle(upscale_factor, opts?)`, `ember.nn.PixelUnshuffle(downscale_factor, opts?)`
`F.pixel_shuffle` and `F.pixel_unshuffle` as modules.

### `ember.nn.Unflatten(dim, unflattened_size, opts?)`
Splits dim `dim` (1-based, negative from the end) into `unflattened_size`
(a list; one `-1` is inferred).

### `ember.nn.AdaptiveAvgPool2d(output_size)`
Average pooling of `(N, C, H, W)` or `(C, H, W)` to `output_size`, a number
or `{h, w}` (`nil` keeps that dim's size: `{nil, 7}`), with PyTorch's bins.

### `ember.nn.Upsample(opts)`
`F.interpolate` as a module: `opts = {size, scale_factor, mode = "nearest",
align_corners, recompute_scale_factor}`, kept as fields.

### `ember.nn.BatchNorm1d(num_features, opts?)`, `ember.nn.BatchNorm2d(num_features, opts?)`
Batch normalisation over `(N, C)`/`(N, C, L)` or `(N, C, H, W)` with running
statistics for `eval()`; `opts = {eps = 1e-5, momentum = 0.1, affine = true,
track_running_stats = true}`. `momentum = false` is PyTorch's
`momentum=None` (which Lua cannot spell, `nil` being the default): the
running statistics are the cumulative average over the batches seen (each
update weighted `1 / num_batches_tracked`).

### `ember.nn.LayerNorm(normalized_shape, opts?)`
Normalises over the last dims `normalized_shape`; `opts = {eps = 1e-5,
elementwise_affine = true}`.

### `ember.nn.RMSNorm(normalized_shape, opts?)`
`F.rms_norm` over the last dims `normalized_shape` with a `weight` of ones;
`opts = {eps =, elementwise_affine = true}` (`eps` by default the input's
machine epsilon).

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

### `ember.nn.Dropout1d(p?, inplace?, opts?)`, `ember.nn.Dropout2d(p?, inplace?, opts?)`
`F.dropout1d` and `F.dropout2d` in training; the identity in `eval()`.

### `ember.nn.Embedding(num_embeddings, embedding_dim, padding_idx?, max_norm?, norm_type?, scale_grad_by_freq?, sparse?, opts?)`
A lookup table: int64 1-based indices to rows of `weight` (from N(0, 1));
`F.embedding`'s `padding_idx` (whose row starts at zeros and takes no
gradient), `max_norm` and `norm_type`, positionally or as options (also
`dtype`, by name only); `scale_grad_by_freq` and `sparse` raise when true.

### `ember.nn.ReLU()`, `ember.nn.Tanh()`, `ember.nn.Sigmoid()`, `ember.nn.SiLU()`
The activation as a module.

### `ember.nn.GELU(opts?)`
GELU as a module (`GELU({approximate = "tanh"})` for the tanh form).

### `ember.nn.Softmax(dim?)`, `ember.nn.LogSoftmax(dim?)`
`softmax` or `log_softmax` along `dim` (default the last).

### `ember.nn.LeakyReLU(negative_slope?, inplace?, opts?)`, `ember.nn.ELU(alpha?, inplace?, opts?)`, `ember.nn.SELU(inplace?, opts?)`, `ember.nn.CELU(alpha?, inplace?, opts?)`
The activations of `ember.nn.functional` as modules, with their arguments
(positionally or in an options table) kept as fields.

### `ember.nn.ReLU6(inplace?, opts?)`, `ember.nn.Hardtanh(min_val?, max_val?, inplace?, opts?)`, `ember.nn.Hardswish(inplace?, opts?)`, `ember.nn.Hardsigmoid(inplace?, opts?)`
Likewise.

### `ember.nn.Softplus(beta?, threshold?, opts?)`, `ember.nn.Softsign()`, `ember.nn.Mish(inplace?, opts?)`, `ember.nn.LogSigmoid()`, `ember.nn.GLU(dim?, opts?)`
Likewise.

### `ember.nn.PReLU(num_parameters?, init?, opts?)`
`F.prelu` with a learnable `weight` of `num_parameters` (1) slopes, each
`init` (0.25); `opts = {num_parameters, init, dtype}` (`dtype` by name only).

### `ember.nn.Identity()`
Returns its input.

### `ember.nn.Flatten(start_dim?, end_dim?)`
Flattens dims `start_dim` (2) to `end_dim` (-1).

### `ember.nn.Sequential(...)`
Runs its modules in order; children are named `"1"`, `"2"`, ... (PyTorch's
`"0"`, `"1"`, ... with `torch_names`). The modules sit in the instance's
array part: `seq[i]` (negative from the end; out of range raises), `#seq`,
`seq:len()`, `ipairs(seq)`, `seq[i] = m` (replaces, or appends at `#seq + 1`),
`seq[#seq] = nil` (removes the last), `seq:append(m)` (`seq:add(m)`),
`seq:extend(list)`, `seq:get(i)`, `seq:iter()`. An existing entry is Lua's
own slot, so `seq[2] = x` is not checked when written: anything but a module
there raises at the next forward or `parameters()`. An `nn.Linear` with a bias followed
by an `nn.ReLU` (neither of them given a `forward` of its own) runs as one
`F.linear_relu`, with the same values and gradients.

### `ember.nn.ModuleList(list?)`
A list of modules registered as children, indexed, measured and iterated
as `Sequential` (`ml[i]`, `#ml`, `ipairs(ml)`, `:append(m)`, `:extend(list)`,
`:get(i)`, `:len()`, `:iter()`); it has no `forward`.

### `ember.nn.ParameterList(list?)`
A list of floating point tensors, each a parameter (named `"1"`, `"2"`, ...;
PyTorch's from 0 with `torch_names`); indexed and iterated as `ModuleList`.

### `ember.nn.ModuleDict(entries?)`, `ember.nn.ParameterDict(entries?)`
Modules (or floating point tensors, each a parameter) by name, in insertion
order: `entries` is a table (taken in sorted key order) or a list of
`{name, value}` pairs (in its order). `d[name]`, `d[name] = v`, `d:keys()`,
`d:values()`, `d:items()` (`for name, v in d:items() do`), `d:len()`,
`d:contains(name)`, `d:pop(name)`, `d:update(entries)`. A name may not be
one of the class's methods (`keys`, `to`, ...) or contain `.`.

### `ember.nn.MultiheadAttention(embed_dim, num_heads, dropout?, bias?, add_bias_kv?, add_zero_attn?, kdim?, vdim?, batch_first?, opts?)`
PyTorch's multi-head attention; `opts = {dropout = 0, bias = true,
add_bias_kv = false, add_zero_attn = false, kdim = embed_dim, vdim =
embed_dim, batch_first = false, dtype}` (also positionally in that order,
all but `dtype`).
Parameters as PyTorch's: `in_proj_weight` `{3E, E}` (or `q_proj_weight`,
`k_proj_weight` `{E, kdim}`, `v_proj_weight` `{E, vdim}` when `kdim` or
`vdim` differs), `in_proj_bias`, `out_proj.weight`, `out_proj.bias`,
`bias_k` and `bias_v` `{1, 1, E}` (one more key and value);
`add_zero_attn` appends a key and value of zeros. `m(query, key, value,
{key_padding_mask, need_weights = true, attn_mask, average_attn_weights =
true, is_causal = false})` (or the same positionally) returns the output and
the weights (`(N, L, S)` averaged over heads, `(N, H, L, S)` with
`average_attn_weights = false`, nil without `need_weights`). Inputs `(L, N,
E)`, `(N, L, E)` with `batch_first`, or unbatched `(L, E)`; `attn_mask` `(L,
S)` or `(N * num_heads, L, S)`, `key_padding_mask` `(N, S)`: bool (true =
may not attend) or float (added to the scores, of the query's dtype).

### `ember.nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward?, dropout?, activation?, layer_norm_eps?, batch_first?, norm_first?, opts?)`
PyTorch's encoder layer: self-attention then a feed-forward block
`linear2(dropout(activation(linear1(x))))`, each added to its input and
normalised after (`norm_first = false`) or before (`true`). Defaults 2048,
0.1, `"relu"` (or `"gelu"`, a function, a module), 1e-5, false, false; the
arguments after `nhead` may come as a table by name (`{dim_feedforward =
64, dtype = "float64"}`). Children `self_attn`, `linear1`, `dropout`,
`linear2`, `norm1`, `norm2`, `dropout1`, `dropout2`, as PyTorch's.
`m(src, src_mask?, src_key_padding_mask?)` or `m(src, {src_mask =,
src_key_padding_mask =})`; masks as MultiheadAttention's.

### `ember.nn.TransformerDecoderLayer(d_model, nhead, dim_feedforward?, dropout?, activation?, layer_norm_eps?, batch_first?, norm_first?, opts?)`
PyTorch's decoder layer: self-attention, attention over the encoder's
`memory` (`multihead_attn`), the feed-forward block, with `norm1`-`norm3`
and `dropout1`-`dropout3`; arguments as the encoder layer's. `m(tgt,
memory, tgt_mask?, memory_mask?, tgt_key_padding_mask?,
memory_key_padding_mask?)`, the masks also by name in a table.

### `ember.nn.TransformerEncoder(encoder_layer, num_layers, norm?, enable_nested_tensor?, opts?)`
`num_layers` copies of `encoder_layer` (each with its own parameters, equal
to the layer's at construction, as PyTorch's deep copies) in `layers`, then
`norm` when given. `enable_nested_tensor` may only be false: ember computes
what PyTorch does without its nested-tensor fast path. `m(src, mask?, src_key_padding_mask?)` or `m(src, {mask
=, src_key_padding_mask =})`. State keys `layers.1.self_attn...`, or
PyTorch's `layers.0...` with `{torch_names = true}`.

### `ember.nn.TransformerDecoder(decoder_layer, num_layers, norm?, opts?)`
The decoder stack: `m(tgt, memory, tgt_mask?, memory_mask?,
tgt_key_padding_mask?, memory_key_padding_mask?)`, the masks also by name.

### `ember.nn.Transformer(d_model?, nhead?, num_encoder_layers?, num_decoder_layers?, dim_feedforward?, dropout?, activation?, custom_encoder?, custom_decoder?, layer_norm_eps?, batch_first?, norm_first?, opts?)`
PyTorch's encoder-decoder: defaults 512, 8, 6, 6, 2048, 0.1, `"relu"`, nil,
nil, 1e-5, false, false, also by name in a table; `encoder` and `decoder`
each end in a LayerNorm; every matrix is drawn xavier uniform. `m(src, tgt,
src_mask?, tgt_mask?, memory_mask?, src_key_padding_mask?,
tgt_key_padding_mask?, memory_key_padding_mask?)`, the masks also by name.
`nn.Transformer.generate_square_subsequent_mask(n, {dtype = "float32"}?)`
is PyTorch's `{n, n}` float mask, `-inf` above the diagonal and 0 elsewhere
(a float mask must have the scores' dtype; `nn.causal_mask(n)` is the bool
one).

### `ember.nn.RNN(input_size, hidden_size, num_layers?, bias?, batch_first?, dropout?, bidirectional?, opts?)`, `ember.nn.LSTM(input_size, hidden_size, num_layers?, bias?, batch_first?, dropout?, bidirectional?, opts?)`, `ember.nn.GRU(input_size, hidden_size, num_layers?, bias?, batch_first?, dropout?, bidirectional?, opts?)`
Recurrent layers as PyTorch's: `opts = {num_layers = 1, bias = true,
batch_first = false, dropout = 0, bidirectional = false}` (RNN also
`nonlinearity = "tanh" | "relu"`); the options may come positionally in
PyTorch's order (`LSTM(10, 20, 2)`), the options table after them. `m(input,
hx?)` returns `out, h_n` (LSTM: `out, {h_n, c_n}` from `hx = {h_0, c_0}`);
input `(L, N, H_in)`, `(N, L, H_in)` with `batch_first`, or unbatched.
Parameters `weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`
(`_reverse` for the backward direction), gates i, f, g, o (LSTM) and r, z,
n (GRU). Each step is one GEMM and one fused cell op. The LSTM's `proj_size`
(0) projects `h` to that width by `weight_hr_l0` `{proj_size, hidden_size}`,
as PyTorch's.

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

Assigning a floating point tensor to a field registers a parameter, a module
a child, in assignment order. A tensor of another dtype (a bool mask, int64
indices) stays a plain field: no parameter, no buffer, not in `state_dict`,
not converted by `:to()`. A floating point tensor that must not be a
parameter (an additive mask) is a buffer: `self:register_buffer("mask", m,
false)` keeps it out of `state_dict` too. Any constructor, `forward` (through
`m(...)`) and public method raises for an argument past those it takes.

### `Module:extend(name)`
A subclass named `name`; calling it creates an instance and runs `init`.

### `Module:new(...)`
Creates an instance and calls `init(...)` (what calling the class does).

### `Module:init(...)`
The constructor a subclass defines.

### `Module:forward(...)`
The computation a subclass defines; `m(x)` calls it.

### `Module:register_buffer(name, t, persistent?)`
Registers state that is converted by `:to()` but is not a parameter
(running stats); it is in `state_dict` unless `persistent` is `false`
(PyTorch's non-persistent buffer). `named_buffers` lists both kinds.

### `Module:register_parameter(name, t)`
`self[name] = t`, raising unless `t` is a floating point tensor (`nil`
removes the parameter).

### `Module:parameters()`, `Module:named_parameters(opts?)`
Every parameter of the tree (shared ones once, under their first name), in
registration order; the named form is a list of `{name, t}` that also
answers `list["fc.weight"]` and iterates as `for name, t in
m:named_parameters() do`. `opts = {torch_names = true}` gives PyTorch's
names (list entries from 0, as `state_dict`'s), so `t.grad` can be matched
with PyTorch's gradients by name; `{remove_duplicate = false}` lists a
shared tensor under each of its names (PyTorch 2's `remove_duplicate`).

### `Module:buffers()`, `Module:named_buffers(opts?)`
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

### `Module:state_dict(opts?)`
A table name -> tensor of the parameters and persistent buffers (sharing
storage), a shared tensor or module under each of its names as in PyTorch;
`opts = {torch_names = true}` for PyTorch's names. Save this, not
the module: `ember.save(path, m)` raises.

### `Module:load_state_dict(sd, strict?)`
Copies `sd` into the parameters and buffers after checking every shape (and,
with `strict`, the default, missing and unexpected keys); returns
`{missing_keys =, unexpected_keys =}`.

### `Module:to(...)`, `Module:float()`, `Module:double()`, `Module:half()`, `Module:bfloat16()`, `Module:cpu()`, `Module:cuda()`
Converts every parameter and buffer (and a parameter's `.grad`) in place: each
keeps its tensor object, which gets the converted data, so a `GradManager` or
optimizer made before the call goes on working. The arguments: a floating
point dtype, a device, both, a tensor (its dtype and device), or `{dtype =,
device =, non_blocking =, memory_format =}`. Dtype conversions leave integer
and bool buffers (`num_batches_tracked`) as they are, as PyTorch;
`memory_format` `"channels_last"` converts the 4-D ones (convolution
weights, to (O, kH, kW, C) strides) and leaves the rest, as PyTorch's
(`docs/nn.md`, "channels_last"); an integer dtype or an unknown option raises; a tensor tracked by a recording `GradManager`
raises. Every tensor is converted before any is swapped, so a conversion
that fails (out of memory) leaves the module as it was. Returns the module.

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
