-- bench/jit_tiny.lua: bench/autograd.lua's tiny step, y = ((a*b)+a):sum()
-- over 4-element a and b, forward and backward with the gradients
-- accumulating into .grad, eagerly and through its plan (ember.jit.trace),
-- timed in alternating rounds in one process; then each against PyTorch's
-- eager step (bench/jit_torch.py tiny, the same step) in alternating
-- rounds. Prints JSON: microseconds per step, the medians of the per-round
-- ratios replay / eager, replay / PyTorch and eager / PyTorch.
--   luajit bench/jit_tiny.lua [torch]   ("torch": also the PyTorch rounds)
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")

ember.manual_seed(0)
local a, b = ember.rand({ 4 }), ember.rand({ 4 })
local gm = ember.autodiff.GradManager():attach({ a, b })
local function step()
  gm:record()
  gm:backward(((a * b) + a):sum())
end
step()   -- .grad exists: the steps accumulate into it, as PyTorch's do
local plan = ember.jit.trace(step, {})

local function eager(n) for _ = 1, n do step() end end
local function replay(n) for _ = 1, n do plan() end end
eager(1000)
replay(1000)
local te, tp, r = B.time_pair(eager, replay, 20000, 9)
local out = { eager_us = te * 1e6, replay_us = tp * 1e6, replay_vs_eager = 1 / r, ops = plan:stats().ops,
  fused = plan:stats().fused, threads = ember.get_num_threads() }
if arg and arg[1] == "torch" then
  local cmd = ("OMP_NUM_THREADS=%d OMP_WAIT_POLICY=passive /usr/bin/python3 bench/jit_torch.py tiny")
    :format(ember.get_num_threads())
  local _, tt, rr = B.against_torch(plan, cmd, 20000, 5)
  out.torch_us, out.replay_vs_torch = B.median(tt) * 1e6, B.median(rr)
  local _, _, re = B.against_torch(step, cmd, 20000, 5)
  out.eager_vs_torch = B.median(re)
end
print(B.json(out))
