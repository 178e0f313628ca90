-- API reference: ember.amp (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.amp`: mixed precision

PyTorch's automatic mixed precision: `ember.autocast` runs matrix products
and convolutions in a 16-bit float dtype and softmax, reductions, norms and
losses in float32; `GradScaler` scales a float16 loss and skips the steps
whose gradients overflowed. The lists, the costs and a worked loop:
docs/nn.md ("Mixed precision").

```lua
local scaler = ember.amp.GradScaler()
gm:record()
local loss = ember.autocast("bfloat16", function() return F.cross_entropy(model(x), y) end)
gm:backward(scaler:scale(loss))
scaler:step(opt); scaler:update(); opt:zero_grad()
```

### `ember.autocast(dtype, fn, ...)`, `ember.amp.autocast(dtype, fn, ...)`
Runs `fn(...)` with autocast to `dtype` (`"bfloat16"` or `"float16"`) and
returns its results. Inside, matmul, linear, conv1d, conv2d, conv2d_relu,
conv2d_relu_max_pool2d, conv_transpose2d, conv3d and conv_transpose1d cast their float32 (and other 16-bit) tensor arguments to
`dtype` and give `dtype`; softmax, log_softmax, sum, norm, logsumexp, the
norm layers, the losses and the fused LSTM/GRU cells cast 16-bit arguments
to float32 and give float32;
every other op runs in its inputs' dtype (binary ops promote). float64 is
never cast. The casts are recorded, so float32 parameters get float32
gradients. `dtype` may be `false` (autocast off inside `fn`, as
`enabled=False`) or `{dtype =, enabled =, cache_enabled =}`; scopes nest
and are left on an error. As PyTorch's cast cache, a parameter that a
recording tracks is cast once per dtype within the outermost scope however
many ops use it (an RNN's weights, used at every step), recast after an
in-place write or when recording state changes; `cache_enabled = false`
casts at every use.

### `ember.is_autocast_enabled()`, `ember.amp.is_autocast_enabled()`
True inside an enabled `autocast` scope.

### `ember.get_autocast_dtype()`, `ember.amp.get_autocast_dtype()`
The innermost enabled scope's dtype, or nil outside one.

## `ember.amp.GradScaler`: loss scaling

`ember.amp.GradScaler(opts?)` makes a scaler with PyTorch's options and defaults: `init_scale = 65536`,
`growth_factor = 2`, `backoff_factor = 0.5`, `growth_interval = 2000`,
`enabled = true` (disabled, every method passes through). The scale is
held as a float32 number.

### `GradScaler:scale(outputs)`
`outputs` (a tensor or a list of tensors) times the scale, a 0-d float32
factor (a 0-d float16 loss is scaled in float32).

### `GradScaler:unscale_(optimizer)`
Divides the gradient of every parameter of `optimizer` by the scale, in
place, and notes whether one held an inf or a NaN. At most once per
optimizer between updates (before clipping gradients, say); float16
gradients are refused, as in PyTorch (keep the parameters in float32).

### `GradScaler:step(optimizer, ...)`
Unscales (unless `unscale_` did) and calls `optimizer:step(...)`, returning
its result, unless a gradient held an inf or a NaN: then the step is
skipped (parameters and optimizer state untouched) and nothing returned.

### `GradScaler:update(new_scale?)`
Sets the scale for the next iteration: `new_scale`, or the rule: an inf or
NaN this iteration multiplies the scale by `backoff_factor` and restarts the
count; `growth_interval` iterations in a row without one multiply it by
`growth_factor` (kept when that would overflow float32).

### `GradScaler:get_scale()`, `GradScaler:get_growth_factor()`, `GradScaler:get_backoff_factor()`, `GradScaler:get_growth_interval()`
The current scale (1 when disabled) and the options.

### `GradScaler:is_enabled()`
Whether the scaler scales.

### `GradScaler:state_dict()`, `GradScaler:load_state_dict(sd)`
The state under PyTorch's keys: `scale`, `growth_factor`, `backoff_factor`,
`growth_interval`, `_growth_tracker` (empty when disabled); loading checks
each value.
]==]
