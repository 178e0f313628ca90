-- bench/jit_tiny.lua: the tiny step ((a*b)+a):sum() forward and backward
-- (a 16-element a attached to a manager), eager against its plan
-- (ember.jit.trace), timed in alternating rounds in one process. Prints
-- JSON: microseconds per step each way and the median of the per-round
-- ratios replay / eager.
--   luajit bench/jit_tiny.lua [iters]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")

local iters = tonumber(arg and arg[1]) or 2000
ember.manual_seed(0)
local a, b = ember.randn({ 16 }), ember.randn({ 16 })
local gm = ember.autodiff.GradManager():attach({ a })
local function step(x)
  gm:record()
  local l = ((a * x) + a):sum()
  gm:backward(l)
  return l
end
a.grad = nil
local plan = ember.jit.trace(step, { b })

-- a.grad is nil before each step (the plan sets it as the step does)
local function eager(n) for _ = 1, n do a.grad = nil; step(b) end end
local function replay(n) for _ = 1, n do a.grad = nil; plan(b) end end
eager(100)
replay(100)
local te, tp, r = B.time_pair(eager, replay, iters, 9)
print(B.json({ eager_us = te * 1e6, replay_us = tp * 1e6, replay_vs_eager = 1 / r, ops = plan:stats().ops,
  threads = ember.get_num_threads() }))
