-- API reference: ember.optim (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.optim`: optimizers

PyTorch 1.13's update rules, in place under `no_grad` (SGD, Adam and AdamW
fused into one C pass for contiguous float32/float64 parameters). `params` is a list of tensors
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

### `ember.optim.RMSprop(params, opts?)`
`opts = {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum =
0, centered = false, maximize = false}`.

### `ember.optim.Adagrad(params, opts?)`
`opts = {lr = 1e-2, lr_decay = 0, weight_decay = 0,
initial_accumulator_value = 0, eps = 1e-10, maximize = false}`.

### `ember.optim.Adamax(params, opts?)`
Adam with the infinity norm; `opts = {lr = 2e-3, betas = {0.9, 0.999}, eps =
1e-8, weight_decay = 0, maximize = false}`.

### `ember.optim.NAdam(params, opts?)`
Adam with Nesterov momentum; `opts = {lr = 2e-3, betas = {0.9, 0.999}, eps =
1e-8, weight_decay = 0, momentum_decay = 4e-3}` (no `maximize`, as in 1.13).
The momentum product is PyTorch 2.0's (1.13 counts `mu_t` twice).

### `ember.optim.LBFGS(params, opts?)`
PyTorch's L-BFGS, step for step, over all the parameters as one vector (one
parameter group); `opts = {lr = 1, max_iter = 20, max_eval = floor(max_iter *
5 / 4), tolerance_grad = 1e-7, tolerance_change = 1e-9, history_size = 100,
line_search_fn = nil}` (or `"strong_wolfe"`). `opt:step(closure)` needs the
closure, which zeroes the gradients, fills every `.grad` and returns the
loss; it returns the first evaluation's loss.

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

### `ember.optim.lr_scheduler.LinearLR(opt, {start_factor = 1/3, end_factor = 1, total_iters = 5, last_epoch = -1})`
`lr = base_lr * (start_factor + (end_factor - start_factor) * min(epoch,
total_iters) / total_iters)`; both factors in [0, 1].

### `ember.optim.lr_scheduler.OneCycleLR(opt, {max_lr, total_steps, epochs, steps_per_epoch, pct_start = 0.3, anneal_strategy = "cos", cycle_momentum = true, base_momentum = 0.85, max_momentum = 0.95, div_factor = 25, final_div_factor = 1e4, three_phase = false, last_epoch = -1})`
Smith's 1cycle, stepped per batch: sets `initial_lr = max_lr / div_factor`,
rises to `max_lr` by step `pct_start * total_steps - 1`, then anneals
(`"cos"` or `"linear"`) to `initial_lr / final_div_factor` at `total_steps -
1` (`total_steps` defaults to `epochs * steps_per_epoch`); `three_phase`
comes back to `initial_lr` first. With `cycle_momentum` the `momentum` (or
`betas[1]`) moves the other way between `max_momentum` and `base_momentum`.
`max_lr` and the momenta may be lists, one per group; a step past
`total_steps` raises and changes nothing.

### `ember.optim.lr_scheduler.ExponentialLR(opt, {gamma, last_epoch = -1})`
`lr = initial_lr * gamma ^ epoch`.

### `ember.optim.lr_scheduler.MultiStepLR(opt, {milestones, gamma = 0.1, last_epoch = -1})`
`lr = initial_lr * gamma ^ k`, `k` the number of milestones (a list of
epochs; a repeated one counts twice) at or before the epoch.

### `ember.optim.lr_scheduler.PolynomialLR(opt, {total_iters = 5, power = 1, last_epoch = -1})`
`lr = initial_lr * (1 - min(epoch, total_iters) / total_iters) ^ power`.

### `ember.optim.lr_scheduler.LambdaLR(opt, {lr_lambda, last_epoch = -1})`
`lr = initial_lr * lr_lambda(epoch)`; `lr_lambda` is a function or a list
of them, one per group, returning a finite number. `state_dict` leaves the
functions out (as PyTorch's leaves lambdas out): a loaded state keeps the
scheduler's own.

### `ember.optim.lr_scheduler.MultiplicativeLR(opt, {lr_lambda, last_epoch = -1})`
`lr = initial_lr * lr_lambda(1) * ... * lr_lambda(epoch)`: PyTorch's
`lr *= lr_lambda(epoch)` at each step, also after `step(epoch)` jumps.

### `ember.optim.lr_scheduler.CyclicLR(opt, {base_lr, max_lr, step_size_up = 2000, step_size_down, mode = "triangular", gamma = 1, scale_fn, scale_mode = "cycle", cycle_momentum = true, base_momentum = 0.8, max_momentum = 0.9, last_epoch = -1})`
Smith's cyclical lr, stepped every batch: from `base_lr` up to `max_lr` in
`step_size_up` steps and back down in `step_size_down` (default the same),
the height scaled by `mode` (`"triangular"`: 1, `"triangular2"`: halved each
cycle, `"exp_range"`: `gamma ^ step`) or by `scale_fn(cycle or step)` with
`scale_mode`. With `cycle_momentum` (the optimizer needs a `momentum`
option) the momentum moves the other way between `max_momentum` and
`base_momentum`. The lrs and momenta may be lists, one per group; as
PyTorch's, construction sets each group's lr to `base_lr`.

### `ember.optim.lr_scheduler.SequentialLR(opt, schedulers, milestones)`
`schedulers[1]` (each made on `opt`) sets the lrs until epoch
`milestones[1]`, where `schedulers[2]` starts at its own epoch 0, and so on;
`#milestones == #schedulers - 1`, increasing. As in PyTorch it resets every
lr to `initial_lr` and undoes the first step the others took; no `last_epoch`.

### `ember.optim.lr_scheduler.ReduceLROnPlateau(opt, {mode = "min", factor = 0.1, patience = 10, threshold = 1e-4, threshold_mode = "rel", cooldown = 0, min_lr = 0, eps = 1e-8})`
`sched:step(metric)` (a number or a one-element tensor; no epoch argument):
after more than `patience` epochs in a row that do not beat the best metric
by `threshold` (`"rel"` or `"abs"`), each group's `lr = max(lr * factor,
min_lr)` (kept when that lowers it by at most `eps`), then `cooldown` epochs
uncounted. It scales the current lr; `min_lr` may be a list, one per group.

### `ember.optim.lr_scheduler.LRScheduler`
The base class of the schedulers (methods below).

### `LRScheduler:step(epoch?)`
Advances the epoch by one (or to `epoch`) and sets every group's `lr`.

### `LRScheduler:get_last_lr()`
The lrs last set, one per group.

### `LRScheduler:state_dict()`, `LRScheduler:load_state_dict(s)`
Saves and restores the epoch, base lrs and options.
]==]
