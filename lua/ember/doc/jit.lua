-- API reference: trace to a plan, replay (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.jit`: trace to a plan, replay in C
A function of tensors (a whole training step: forward, `gm:backward`,
optimizer step; or a module's forward) traced once into a plan, which
replays every op it ran in C, with no return to Lua per op, and gives the
same results to the bit as calling the function (docs/plans.md: what
traces, what raises, the figures).

### `ember.jit.trace(fn, example_inputs, opts?)`
Runs `fn(unpack(example_inputs))` once, eagerly, recording every op, and
returns a `Plan`. `fn` returns tensors (its results are the plan's). Lua
control flow, shapes and the numbers Lua computes are fixed at trace time;
tensors `fn` closes over (parameters, optimizer state, batch norm's running
statistics) are the live tensors, read and updated in place by each replay.
Raises at trace time, naming the call and the line, for what a plan cannot
replay: a value read in Lua (`:item()`, `:tolist()`), an optimizer's first
step (it makes the state later steps update: run one step eagerly first),
draws from a generator other than the default one. `opts.train = false`
traces a forward alone: under `no_grad`, a module in eval mode.

### `ember.jit.load(path)`
A `Plan` that `plan:save` wrote: its graph and weights, read and checked
(a truncated file, another format version, an unknown op, a slot read
before it is written or absurd sizes raise naming what; each op's
attributes are checked against its inputs before it runs). It runs on the
CPU; from C, `ember_plan_load` and `ember_plan_run` do the same.

## `ember.jit.Plan`: a traced function

### `Plan:stats()`
`{ops, fused, patterns, removed, hoisted, arena_bytes, peak_bytes, inputs,
outputs}`: the ops a replay runs, of them fused ones, of those the existing
fused ops the plan chose by pattern (`linear`, `add`, `relu` as
`linear_relu`), the ops dropped as dead, the ops of a forward's plan that
read only weights and constants (eval-mode batch norm's scale and shift: run
at the first replay, their results kept until a weight they read is written
in place), the bytes of the plan's arena (its CPU temporaries'
memory, planned by lifetime; a loaded plan's laid out by its first run, 0
until then), the most bytes of
temporaries a replay holds at once, and the counts of inputs and results.
`plan(...)` replays: inputs of another shape, dtype or device than the
example raise naming the input, as does a changed optimizer hyperparameter
(`lr`, ...) the trace baked in.

### `Plan:save(path, opts)`
Writes the plan to one safetensors file: the tensors it reads as entries,
the graph as JSON in the metadata (`"ember.plan"`) with the format version
(`"ember.plan.version"`: `"2"` for a file with an Adam update or an in-place
write, else `"1"`).
A forward's plan (traced with `train = false`: the MLP and CNN recipes'
forwards) or an SGD, Adam, AdamW or RMSprop training step's whose gradients end
cleared (`opt:zero_grad()`): a loaded step trains its own copies of the
weights and of the optimizer's state (Adam's moments and its step count,
saved as the step the next run takes and advanced by each run; RMSprop's
averages; docs/plans.md lists the ops a file may hold). A step that leaves
`.grad` fields set raises. `opts.names`, a table of name = tensor (a
module's `state_dict()`), names the plan's live tensors in the file; the
optimizer's state tensor `key` of a parameter named `N` is `N.key`
(`N.exp_avg`, `N.square_avg`, ...) unless `opts.names` names it; the others
are `w<slot>`, the constants `c<slot>`.

### `Plan:tensor(name)`
The plan's tensor of that name (a loaded plan's as its file names it): a
weight or an optimizer's state that a loaded training step's runs update in
place.

### `Plan:start(...)`
The same replay in slices for a host's frame loop: a `PlanRun`, nothing
run yet. One run of a plan is open at a time.

## `ember.jit.PlanRun`: a replay in slices

### `PlanRun:step(seconds)`
Runs ops for about `seconds` (at least one, past the budget by at most one
op); `true` once the plan has run to the end.

### `PlanRun:result()`
The plan's results (and `.grad` fields as a call leaves them), once `step`
has returned `true`.

### `PlanRun:cancel()`
Abandons the run; what it already wrote in place (parameters an update
reached) stays written.
]==]
