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
`opts = {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true}`.

### `ember.nn.MaxPool2d(kernel, opts?)`, `ember.nn.AvgPool2d(kernel, opts?)`
Max or average pooling over `(N, C, H, W)`; `opts = {stride = kernel,
padding = 0}` (average pooling counts padding as zeros).

### `ember.nn.BatchNorm1d(num_features, opts?)`, `ember.nn.BatchNorm2d(num_features, opts?)`
Batch normalisation over `(N, C)`/`(N, C, L)` or `(N, C, H, W)` with running
statistics for `eval()`; `opts = {eps = 1e-5, momentum = 0.1, affine = true,
track_running_stats = true}`.

### `ember.nn.LayerNorm(normalized_shape, opts?)`
Normalises over the last dims `normalized_shape`; `opts = {eps = 1e-5,
elementwise_affine = true}`.

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
`seq:add(m)`, `seq:get(i)`, `#seq`.

### `ember.nn.ModuleList(list?)`
A list of modules registered as children; `:append(m)`, `:get(i)`,
`:iter()`.

### `ember.nn.MultiheadAttention(embed_dim, num_heads, opts?)`
Multi-head attention; `forward(q, k, v, {attn_mask, is_causal,
key_padding_mask, need_weights = true})` returns the output and the
head-averaged weights. `opts = {bias = true, dropout = 0, batch_first =
false}`; parameters named as PyTorch's.

### `ember.nn.causal_mask(L)`
The `{L, L}` bool mask that is true above the diagonal (positions that may
not be attended to).

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
]==]
