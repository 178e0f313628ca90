-- MobileNetV2's cost between kernels: its forward in train mode under a
-- recording GradManager (the training step's forward, no backward), its full
-- training step, and its batch-1 eval forward (no_grad), each timed as a
-- whole and under ember.profile, whose per-op times are the kernels: the
-- rest of the wall ("other": Lua, recording, wrapping, the GC) is what a
-- faster Lua side can cut. Prints one JSON object per case, ms per call:
-- wall, kernels (sum of the ops' self times), other and op calls.
--   luajit bench/mobilenetv2_overhead.lua [iters [threads]]
-- (iters 20 for each case, ten times that for the batch-1 forward; rough on
-- a loaded machine: compare builds in alternating runs)
package.path = "./bench/?.lua;./spec/support/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional
local MobileNetV2 = require("mobilenetv2")

local iters = tonumber(arg and arg[1]) or 20
if arg and arg[2] then ember.set_num_threads((assert(tonumber(arg[2]), "threads must be a number"))) end

ember.manual_seed(0)
local model = MobileNetV2(10)
local x, labels = ember.randn({ 32, 3, 32, 32 }), ember.randint(1, 11, { 32 })
local gm = ember.autodiff.GradManager():attach(model:parameters())
local opt = ember.optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })

local function fwd_train()
  gm:record()
  local y = model(x)
  gm:release()
  return y
end
local step = B.classifier_step(ember, model, opt, gm, x, labels)
local eval_model = MobileNetV2(10):eval()
local x1 = ember.randn({ 1, 3, 32, 32 })
local function infer() return eval_model(x1) end
local function fwd_infer() return ember.no_grad(infer) end

local function measure(name, fn, n)
  for _ = 1, 3 do fn() end
  collectgarbage()
  local t0 = os.clock()
  local wall = B.time(function(k) for _ = 1, k do fn() end end, n, 1)
  local cpu = os.clock() - t0
  local r = ember.profile(function() for _ = 1, n do fn() end end)
  local kernels, calls = 0, 0
  for _, v in pairs(r.ops) do kernels, calls = kernels + v.seconds, calls + v.calls end
  print(B.json({ bench = "mobilenetv2_overhead_" .. name, threads = ember.get_num_threads(),
    wall_ms = wall * 1e3, cpu_ms = cpu / n * 1e3, profiled_wall_ms = r.seconds / n * 1e3,
    kernels_ms = kernels / n * 1e3, other_ms = (r.seconds - kernels) / n * 1e3, op_calls = calls / n }))
end

measure("train_forward", fwd_train, iters)
measure("train_step", step, iters)
measure("infer_batch1", fwd_infer, iters * 10)
