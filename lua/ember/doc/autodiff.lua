-- API reference: ember.autodiff (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.autodiff`: gradients

MegEngine's GradManager over a tape recorded in C, custom rules in Lua,
higher-order gradients through nested managers, and PyTorch's functional
tools. Design and rules: docs/autodiff.md.

### `ember.no_grad(fn, ...)`, `ember.autodiff.no_grad(fn, ...)`
Runs `fn(...)` with nothing recorded and returns its results.

### `ember.enable_grad(fn, ...)`
Runs `fn(...)` with recording enabled (inside a `no_grad`) and returns its
results.

### `ember.set_grad_enabled(on)`
Turns recording on or off for the calling thread.

### `ember.is_grad_enabled()`
True unless recording is turned off (`no_grad`, `set_grad_enabled(false)`).

### `ember.autodiff.Function(name, fn)`, `ember.autodiff.Function{name =, forward =, backward =}`
A differentiable op defined in Lua. MegEngine's form: `fn(...)` returns the
outputs and a backward function taking one gradient per output. PyTorch's
form: `forward(ctx, ...)` and `backward(ctx, ...)`, with
`ctx:save_for_backward(...)`, `ctx.saved_tensors` and
`ctx.needs_input_grad`. Call the result like a function. `name` (1 to 48
bytes, default `"function"`) is what errors give verbatim, followed by the
node's name (`my_op (MyOpBackward)`).

### `ember.autodiff.Function_mt`
The metatable of the ops `Function` makes (for `getmetatable(f) ==` tests).

### `ember.autodiff.register_grad_rule(op, fn)`
Replaces the gradient rule of a built-in op (`"exp"`, `"matmul"`, ...) with
`fn(ctx, output_grads)` returning a list of input gradients; `nil` restores
the built-in rule.

### `ember.autodiff.FALLBACK`
Returned from a rule registered with `register_grad_rule`, makes that call
use the built-in rule.

### `ember.autodiff.group(managers)`
A group of GradManagers that record together (`:record()`, `:release()`,
`:scope(fn, ...)`) and do not record each other's backward.

### `ember.autodiff.stats()`
`{live_nodes, saved_tensors, bwd_cache_hits, bwd_cache_misses}`: what leak
checks read.

### `ember.autodiff.set_debug(on)`, `ember.autodiff.is_debug()`
Logs each executed backward node with its gradient shapes to stderr (also
`EMBER_DEBUG_AUTODIFF=1`); `is_debug` tells whether it is on.

### `ember.autodiff.detect_anomaly(fn, ...)`
Runs `fn(...)`; a NaN or inf made during backward raises, naming the node and
the `file:line` of its forward op.

### `ember.autodiff.gradcheck(fn, inputs, opts?)`
Compares `fn`'s gradients with central finite differences in float64;
returns true or raises `Jacobian mismatch` with the worst entry
(`opts = {eps, atol, rtol, raise = true}`).

### `ember.autodiff.gradgradcheck(fn, inputs, opts?)`
`gradcheck` of `fn`'s vector-Jacobian products: checks second derivatives.

### `ember.autodiff.checkpoint(fn, ...)`
Runs `fn(...)` without keeping its intermediates; backward runs it again.

### `ember.autodiff.grad(f, argnums?)`
A function returning df/dx of the scalar `f` for its first argument (or
those in `argnums`), leaving `.grad` alone. Nests: `grad(grad(f))`.

### `ember.autodiff.vjp(f, inputs, dy)`
`f`'s output and the vector-Jacobian products `dy^T J`, one per input.

### `ember.autodiff.jvp(f, inputs, v)`
`f`'s output and the Jacobian-vector product `J v`.

### `ember.autodiff.jacobian(f, inputs)`
The Jacobian: one tensor of shape `out ++ in` for one output and one input,
else `J[i][j]` for output i and input j.

### `ember.autodiff.hessian(f, inputs)`
The Hessian of a scalar `f` (`H[i][j]` for several inputs).

### `ember.autodiff.hvp(f, inputs, v)`, `ember.autodiff.vhp(f, inputs, v)`
A scalar `f`'s value and `H v` (or `v^T H`).

## `ember.autodiff.GradManager`: recording and backward

```lua
local gm = ember.autodiff.GradManager():attach(model:parameters())
gm:record(); local loss = f(x); gm:backward(loss)   -- .grad of each attached tensor
```

### `GradManager:new()`
A new manager with nothing attached (what `ember.autodiff.GradManager()`
calls).

### `GradManager:attach(tensors, callbacks?)`
Tracks a tensor or list (held weakly); callbacks `fn(t, grad)` run in turn
on its gradient before it is accumulated. Returns the manager.

### `GradManager:attached_tensors()`
The live attached tensors, in attach order.

### `GradManager:is_attached(t)`
True when `t` is attached.

### `GradManager:record()`
Starts recording; raises `already recording` when it is.

### `GradManager:is_recording()`
True between `record` and `backward`/`release`.

### `GradManager:release()`
Drops the recorded history without computing anything.

### `GradManager:scope(fn, ...)`
Records, runs `fn(...)`, and releases even when it raises; returns its
results.

### `GradManager:backward(y, dy?)`
Computes the gradients of `y` (a tensor or list; `dy` defaults to 1 for a
one-element `y`) for every attached tensor, accumulates them into `.grad`,
runs the after-backward callbacks and releases the history. When no `y` was
computed from an attached tensor during this recording (a loss made under
`no_grad` or before `record`, a module made after `attach`) it raises
`no attached tensor is reachable from y of shape ...`, naming the number of
attached tensors, ends the recording and leaves `.grad` as it was (PyTorch:
"element 0 of tensors does not require grad").

### `GradManager:backward_steps(y, dy?)`
A backward that runs in slices for a host's frame loop: returns a
`BackwardRun`; nothing runs until `run:step(seconds)`.

### `GradManager:register_after_backward_callback(fn)`
`fn()` runs after every backward, once the `.grad` fields are updated.

### `GradManager:register_before_backward_returns(fn)`
`fn(ok)` runs when the backward sweep is over, before `.grad` is written:
the flush point of callbacks that defer work (bucketed all-reduce).

## `ember.autodiff.BackwardRun`: backward in slices

### `BackwardRun:step(seconds)`
Runs backward nodes for about `seconds` (at least one); true once complete,
with `.grad`, callbacks and hooks as `gm:backward` leaves them.

### `BackwardRun:cancel()`
Abandons the run: every `.grad` stays as it was before it.

### `BackwardRun:is_done()`
True once the run completed, failed or was cancelled.

## `ember.frame`: a whole step in slices
A forward, or a whole training step (forward, `gm:backward`, optimizer
step), run a time budget at a time across a host's frames, with the same
results to the bit as one call (docs/frame_loop.md, "A whole step in
slices").

### `ember.frame.step(fn, ...)`
A `StepRun` of `fn(...)`; nothing runs until `run:resume(seconds)`. One
run may be open (made, neither done nor failed nor cancelled) at a time:
a second, or one made inside a running step, raises.

## `ember.frame.StepRun`: a step in slices

### `StepRun:resume(seconds)`
Runs the step until `seconds` are spent, pausing at the next yield point
(after an elementwise op, `matmul`, `F.linear`, a module's forward, a
backward node, a parameter's optimizer update): `false`; or until `fn`
returns: `true` and `fn`'s results. An error in the step is raised here
with the step's traceback, and ends the run as `cancel` does. Between
slices grad mode is off, so the frame's other ops are not recorded.

### `StepRun:is_done()`
True once the step has returned.

### `StepRun:results()`
The step's results, once it is done.

### `StepRun:cancel()`
Ends an open run where it stands: a paused backward is cancelled (every
`.grad` as it was), recordings the step started are released; parameters
an optimizer step has already updated stay updated.

### `StepRun:stats()`
`{state, slices, seconds, longest}`: `"open"`, `"done"`, `"failed"` or
`"cancelled"`, the slices run, their seconds in all and the longest one's.
]==]
