-- Higher-order gradients through nested GradManagers.
--
-- A manager that starts recording first records the backward of one that
-- starts later, so the gradient the inner one produces is itself
-- differentiable. Shows d2/dx2 of x^3 (= 6x, 18 at x = 3), the composable
-- functional form grad(grad(f)), and a Hessian-vector product of a small
-- network's loss checked against finite differences of its gradient.
-- Runs in well under a second.
--   luajit examples/higher_order.lua
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local ember = require("ember")
local GradManager = ember.autodiff.GradManager
local F64 = { dtype = "float64" }

-- 1. two nested managers
local x = ember.tensor(3, F64)
local outer = GradManager():attach(x)
local inner = GradManager():attach(x)
outer:record()
inner:record()
local y = x * x * x
inner:backward(y)              -- x.grad = 3x^2 = 27, recorded by `outer`
local dy = x.grad
x.grad = nil
outer:backward(dy)             -- x.grad = 6x = 18
print(("x^3 at 3: first derivative %g, second derivative %g"):format(dy:item(), x.grad:item()))

-- 2. the functional form composes
local grad = ember.autodiff.grad
local d2 = grad(grad(function(t) return t * t * t end))
print(("grad(grad(x^3)) at 3 = %g"):format(d2(ember.tensor(3, F64)):item()))

-- 3. Hessian-vector product of a tiny tanh network, by double backward
ember.manual_seed(0)
local w = ember.randn({ 3, 3 }, F64)
local xin = ember.randn({ 4, 3 }, F64)
local function loss_of(wt) return (xin:matmul(wt):tanh() ^ 2):sum() end
local v = ember.randn({ 3, 3 }, F64)
local function gradient(wt)
  local g = GradManager():attach(wt)
  g:record()
  g:backward(loss_of(wt))
  local r = wt.grad
  wt.grad = nil
  return r
end
local hv_gm = GradManager():attach(w)
hv_gm:record()
local gw = gradient(w)
w.grad = nil
hv_gm:backward((gw * v):sum())   -- d/dw <grad L(w), v> = H v
local hv = w.grad
-- finite differences of the gradient along v
local eps = 1e-6
local gp = gradient((w + v * eps):detach())
local gn = gradient((w - v * eps):detach())
local fd = (gp - gn) / (2 * eps)
print("H v by double backward:", hv)
print(("max |H v - finite differences| = %.2e"):format((hv - fd):abs():max():item()))
