-- API reference: ember.optim (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.optim`: optimizers

PyTorch's update rules, in place under `no_grad`, fused into one C pass for
contiguous float32/float64 parameters. `params` is a list of tensors
(`model:parameters()`), one tensor, or a list of groups
`{ {params = {...}, lr = ...}, ... }`. Details and formulas: docs/optim.md.

### `ember.optim.SGD(params, opts?)`
`opts = {lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0,
nesterov = false, maximize = false}`.

### `ember.optim.Adam(params, opts?)`
`opts = {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0,
amsgrad = false, maximize = false}`.

### `ember.optim.AdamW(params, opts?)`
Adam with decoupled weight decay (`weight_decay = 1e-2`).

### `ember.optim.clip_grad_norm(params, max_norm, norm_type?)`
Scales every `.grad` in place so that their joint `norm_type`-norm (2) is at
most `max_norm`; returns the norm before clipping as a number.

### `ember.optim.clip_grad_value(params, clip_value)`
Clamps every `.grad` in place to `[-clip_value, clip_value]`.

### `ember.optim.clip_grad_norm_(...)`, `ember.optim.clip_grad_value_(...)`
The same functions under PyTorch's names.

## `ember.optim.Optimizer`: what every optimizer does

`opt.param_groups` (each `{params =, lr =, ...}`), `opt.defaults` and
`opt.state[p]` are plain tables.

### `Optimizer:step(closure?)`
Updates every parameter that has a `.grad` (calling `closure()` first when
given, and returning its result).

### `Optimizer:zero_grad(set_to_none?)`
Sets every `.grad` to nil (or zeroes it in place with `false`).

### `Optimizer:add_param_group(group)`
Adds a group `{params = {...}, lr = ...}`; missing options take the defaults.

### `Optimizer:state_dict()`
`{state =, param_groups =}` with parameters numbered 1..n and cloned state.

### `Optimizer:load_state_dict(s)`
Restores a `state_dict`, checking groups, sizes and shapes before changing
anything.

## `ember.optim.lr_scheduler`: learning-rate schedules

Call `sched:step()` after `opt:step()`, once per epoch (or iteration).

### `ember.optim.lr_scheduler.StepLR(opt, {step_size, gamma = 0.1, last_epoch = -1})`
`lr = base_lr * gamma ^ floor(epoch / step_size)`.

### `ember.optim.lr_scheduler.CosineAnnealingLR(opt, {T_max, eta_min = 0, last_epoch = -1})`
`lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2`.

### `ember.optim.lr_scheduler.LRScheduler`
The base class of the schedulers (methods below).

### `LRScheduler:step(epoch?)`
Advances the epoch by one (or to `epoch`) and sets every group's `lr`.

### `LRScheduler:get_last_lr()`
The lrs last set, one per group.

### `LRScheduler:state_dict()`, `LRScheduler:load_state_dict(s)`
Saves and restores the epoch, base lrs and options.
]==]
