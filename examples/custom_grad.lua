-- Custom gradient rules written in Lua, registered in ember's C rule registry.
--
-- Shows the three ways to give an op its gradient: a Function in
-- MegEngine's shape (forward returns the result and its backward closure), a
-- Function in PyTorch's shape (ctx:save_for_backward), and replacing the
-- rule of a built-in op with register_grad_rule. Each gradient is checked
-- against central finite differences with ember.autodiff.gradcheck.
-- Runs in well under a second.
--   luajit examples/custom_grad.lua
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local ember = require("ember")
local autodiff = ember.autodiff
local F64 = { dtype = "float64" }

-- 1. softplus(x) = log(1 + e^x), with its derivative sigmoid(x) written by hand
local Softplus = autodiff.Function("softplus", function(x)
  local y = (x:exp() + 1):log()
  return y, function(dy) return dy * x:sigmoid() end
end)

-- 2. a clipped identity ("straight-through" gradient), PyTorch-style with ctx
local ClipST = autodiff.Function{
  name = "clip_straight_through",
  forward = function(ctx, x, lo, hi)
    ctx:save_for_backward(x)
    ctx.lo, ctx.hi = lo, hi
    return x:clamp(lo, hi)
  end,
  backward = function(ctx, dy)
    local x = ctx.saved_tensors[1]
    -- pass the gradient through inside a widened band, zero far outside it
    local inside = x:ge(ctx.lo - 1):to(dy.dtype) * x:le(ctx.hi + 1):to(dy.dtype)
    return dy * inside
  end,
}

local x = ember.tensor({ -3, -0.5, 0, 0.7, 2.5 }, F64)
local gm = autodiff.GradManager():attach(x)
gm:record()
local y = Softplus(x):sum()
gm:backward(y)
print("softplus'(x)      =", x.grad)
print("sigmoid(x)        =", x:sigmoid())
x.grad = nil
print("gradcheck softplus:", autodiff.gradcheck(function(t) return Softplus(t):sum() end, { x }))

x.grad = nil
gm:record()
gm:backward(ClipST(x, -1, 1):sum())
print("straight-through gradient (1 within [-2, 2]):", x.grad)
x.grad = nil

-- 3. replace the built-in rule of exp, count the calls, then restore it
local calls = 0
autodiff.register_grad_rule("exp", function(ctx, grads)
  calls = calls + 1
  return { grads[1] * ctx.outputs[1] }
end)
gm:record()
gm:backward(x:exp():sum())
autodiff.register_grad_rule("exp", nil)
print(("exp'(x) = exp(x) through the Lua rule (%d call): %s"):format(calls, tostring(x.grad)))
