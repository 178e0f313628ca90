-- bench/jit_mlp.lua: the MLP recipe's training step (784-256-128-10, batch
-- 128, cross-entropy, SGD with momentum 0.9, zero_grad) eagerly against its
-- plan (ember.jit.trace), over an epoch's worth of batches of random data
-- shaped as Fashion-MNIST's, timed in alternating rounds in one process on
-- two identical models. Prints JSON: milliseconds per step each way, the
-- median of the per-round ratios replay / eager, the plan's stats and the
-- bytes one step holds at its peak each way.
-- With "torch", also each against PyTorch 1.13's eager step in alternating
-- rounds (bench/jit_torch.py mlp).
--   luajit bench/jit_mlp.lua [steps_per_round] [torch]
package.path = "./bench/?.lua;./spec/support/?.lua;" .. package.path
local B = require("common")
local Z = require("zoo")
local ember = require("ember")
local optim = ember.optim

local iters = tonumber(arg and arg[1]) or 40
local function make()
  ember.manual_seed(0)
  local model = Z.mlp({ 784, 256, 128, 10 }, true)
  return Z.train_step(model, optim.SGD(model:parameters(), { lr = 0.1, momentum = 0.9 }))
end
local xs, ys = {}, {}
for i = 1, 16 do xs[i], ys[i] = ember.rand({ 128, 1, 28, 28 }), ember.randint(1, 11, { 128 }) end
local eager_step, traced_step = make(), make()
eager_step(xs[1], ys[1])
traced_step(xs[1], ys[1])
local plan = ember.jit.trace(traced_step, { xs[2], ys[2] })
local k = 0
local torch_ms, replay_vs_torch, eager_vs_torch
local function eager(n) for _ = 1, n do k = k % 16 + 1; eager_step(xs[k], ys[k]) end end
local function replay(n) for _ = 1, n do k = k % 16 + 1; plan(xs[k], ys[k]) end end
eager(5)
replay(5)
local te, tp, r = B.time_pair(eager, replay, iters, 7)
if arg and arg[2] == "torch" then   -- against PyTorch's eager step (bench/jit_torch.py mlp)
  local cmd = ("OMP_NUM_THREADS=%d OMP_WAIT_POLICY=passive /usr/bin/python3 bench/jit_torch.py mlp")
    :format(ember.get_num_threads())
  local _, tt, rr = B.against_torch(function() replay(1) end, cmd, iters, 5)
  torch_ms, replay_vs_torch = B.median(tt) * 1e3, B.median(rr)
  local _, _, re = B.against_torch(function() eager(1) end, cmd, iters, 5)
  eager_vs_torch = B.median(re)
end
local s = plan:stats()
-- the bytes a step holds at its peak above what was in use before it
local eager_peak, replay_peak = Z.peak_bytes(function() eager(1) end), Z.peak_bytes(function() replay(1) end)
print(B.json({ eager_ms = te * 1e3, replay_ms = tp * 1e3, replay_vs_eager = 1 / r, ops = s.ops,
  removed = s.removed, plan_peak_bytes = s.peak_bytes, eager_step_peak_bytes = eager_peak,
  replay_step_peak_bytes = replay_peak, steps_per_epoch = 469, threads = ember.get_num_threads(),
  torch_ms = torch_ms, replay_vs_torch = replay_vs_torch, eager_vs_torch = eager_vs_torch }))
