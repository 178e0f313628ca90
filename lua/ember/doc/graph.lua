-- API reference: ember.autodiff.graph (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.autodiff.graph`: inspecting the graph, hooks

PyTorch's `torch.autograd.graph`. Helpers that take a function run it with
their setting active, restore the setting even when it raises, and return its
results; every `register_*` returns a handle whose `:remove()` may be called
any number of times.

### `ember.autodiff.graph.get_gradient_edge(t)`
`{node =, output_nr =}`: where `t`'s gradient enters the graph.

### `ember.autodiff.graph.increment_version(t)`
Bumps `t`'s version counter as an in-place write would.

### `ember.autodiff.graph.saved_tensors_hooks(pack, unpack, fn, ...)`
Runs `fn(...)` with `pack(t)` applied to every tensor an op saves for
backward and `unpack(x)` applied when backward needs it.

### `ember.autodiff.graph.save_on_cpu(opts?, fn, ...)`
Runs `fn(...)` with saved tensors kept in host memory
(`opts = {pin_memory = false}`; with `pin_memory`, in pinned memory, copied
back to the device without waiting).

### `ember.autodiff.graph.disable_saved_tensors_hooks(message, fn, ...)`
Runs `fn(...)`; registering saved-tensor hooks inside it raises `message`.

### `ember.autodiff.graph.allow_mutation_on_saved_tensors(fn, ...)`
Runs `fn(...)`; tensors saved for backward and then modified in place are
cloned first, so backward uses the values as they were.

### `ember.autodiff.graph.register_multi_grad_hook(tensors, fn, opts?)`
`fn(grads)` once per backward with the gradients of all `tensors` (mode
`"all"`, the default), or `fn(grad)` with the first one computed (mode
`"any"`).

## `ember.autodiff.graph.Node`: a backward node

What `t:grad_fn()` returns inside a recording.

### `Node:name()`
The node's name (`"MulBackward"`, `"AccumulateGrad"`; a `Function` named
`my_op` makes `"MyOpBackward"`). Errors name a node by the op's own name
first: `mul (MulBackward)`, `my_op (MyOpBackward)`.

### `Node:next_functions()`
One `{node =, output_nr =}` per input (`node` nil for an untracked one).

### `Node:metadata()`
A Lua table kept with the node for the user to fill.

### `Node:register_hook(fn)`
`fn(grad_inputs, grad_outputs)` after the node runs; may return new
`grad_inputs`.

### `Node:register_prehook(fn)`
`fn(grad_outputs)` before the node runs; may return new `grad_outputs`.
]==]
