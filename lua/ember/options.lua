-- What the public boundary checks before a function runs, for the
-- functions that do not check it themselves (most do, where they read their
-- arguments): init.lua's wrappers raise through errors.lua, naming the
-- call. spec/arguments_spec.lua walks every public name with an unknown
-- option and spec/bad_calls_spec.lua with bad arguments, so a gap shows
-- there.
local M = {}

-- name -> the position of its options table (as the caller counts its
-- arguments, no self) and the keys it takes: "ember.<name>: unknown option
-- 'k' (known: ...)", or "options must be a table".
M.OPTIONS = {
  ["ember.distributed.all_reduce"] = { 3, { "async" } },
  ["ember.distributed.broadcast"] = { 3, { "async" } },
  ["ember.distributed.all_gather"] = { 2, { "async" } },
  ["ember.distributed.make_allreduce_cb"] = { 2, { "bucket_mb" } },
  ["ember.jit.trace"] = { 3, { "train" } },
  ["ember.dtr.enable"] = { 1, { "budget", "min_size" } },
}

-- name -> the kinds of its leading arguments (no self), each a Lua type, or
-- "tensor", or "tensors" (a list of tensors); "?" after it allows nil:
-- "ember.<name>: expected a function as argument 1, got number".
M.ARGUMENTS = {
  ["ember.autodiff.gradcheck"] = { "function", "table" },
  ["ember.autodiff.gradgradcheck"] = { "function", "table" },
  ["ember.autodiff.grad"] = { "function" },
  ["ember.autodiff.jacobian"] = { "function" },
  ["ember.autodiff.hessian"] = { "function" },
  ["ember.autodiff.vjp"] = { "function" },
  ["ember.autodiff.jvp"] = { "function" },
  ["ember.autodiff.hvp"] = { "function" },
  ["ember.autodiff.vhp"] = { "function" },
  ["ember.autodiff.checkpoint"] = { "function" },
  ["ember.autodiff.register_grad_rule"] = { "string", "function?" },
  ["ember.autodiff.set_debug"] = { "boolean" },
  ["ember.autodiff.graph.register_multi_grad_hook"] = { "tensors", "function" },
  ["ember.set_grad_enabled"] = { "boolean" },
  ["ember.Module:train"] = { "boolean?" },
  ["ember.Tensor:register_hook"] = { "function" },
  ["ember.Tensor:register_post_accumulate_grad_hook"] = { "function" },
}

return M
