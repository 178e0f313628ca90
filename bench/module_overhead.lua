-- The Lua and recording cost of MobileNetV2's modules on tiny inputs (the
-- kernels next to nothing): microseconds per call of nn.Conv2d, a
-- Sequential of BatchNorm2d and ReLU6 (one fused op), the residual add and
-- a whole inverted residual block, in train mode under a recording
-- GradManager and in eval mode under no_grad. Prints one JSON object.
--   luajit bench/module_overhead.lua [iters]
package.path = "./bench/?.lua;./spec/support/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local nn = ember.nn

local iters = tonumber(arg and arg[1]) or 2000
ember.set_num_threads(1)
ember.manual_seed(0)
local x = ember.randn({ 2, 8, 2, 2 })
local conv = nn.Conv2d(8, 8, 1, { bias = false })
local bn_act = nn.Sequential(nn.BatchNorm2d(8), nn.ReLU6())
local block = require("zoo").InvertedResidual(8, 16, 8, 3, 1, false, nn.ReLU6)
local params = {}
for _, m in ipairs({ conv, bn_act, block }) do
  for _, p in ipairs(m:parameters()) do params[#params + 1] = p end
end
local gm = ember.autodiff.GradManager():attach(params)
local y = ember.randn({ 2, 8, 2, 2 })

local function us(fn)
  return B.time(function(n)
    for _ = 1, n do fn() end
  end, iters, 5) * 1e6
end
local function train(fn) return function() gm:record(); fn(); gm:release() end end
local function eval(fn) return function() ember.no_grad(fn) end end
local cases = {
  conv = function() return conv(x) end,
  bn_relu6 = function() return bn_act(x) end,
  add = function() return x + y end,
  block = function() return block(x) end,
  empty = function() end,
}
local out = { bench = "module_overhead", iters = iters }
for name, fn in pairs(cases) do out["train_" .. name .. "_us"] = us(train(fn)) end
for _, m in ipairs({ conv, bn_act, block }) do m:eval() end
for name, fn in pairs(cases) do out["eval_" .. name .. "_us"] = us(eval(fn)) end
print(B.json(out))
