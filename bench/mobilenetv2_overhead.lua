-- MobileNetV2's cost between kernels: its forward in train mode under a
-- recording GradManager (the training step's forward, no backward), its full
-- training step, and its batch-1 eval forward (no_grad), each timed as a
-- whole and under ember.profile, whose per-op times are the kernels: the
-- rest of the wall ("other": Lua, recording, wrapping, the GC) is what a
-- faster Lua side can cut. Prints one JSON object per case, ms per call:
-- wall, kernels (sum of the ops' self times), other and op calls, and
-- what the collector did per call: gc_ms (CPU time inside the binding's
-- paced GC steps and collections: lua/ember/tensor.lua calls the global
-- collectgarbage, timed here), gc_steps, gc_sweeps (cycles ended) and
-- gc_collections, and the allocator's cache_hits, cache_misses and
-- cache_evictions (ember.memory_stats).
--   luajit bench/mobilenetv2_overhead.lua [iters [threads [batch]]]
-- (iters 20 for each case, ten times that for the batch-1 forward; batch of
-- the training cases 32; rough on a loaded machine: compare builds in
-- alternating runs)
package.path = "./bench/?.lua;./spec/support/?.lua;" .. package.path
local gc_clock = { seconds = 0 }
do
  local collectgarbage, clock = collectgarbage, os.clock
  _G.collectgarbage = function(what, arg)   -- "count", "isrunning", ... pass untimed
    if what ~= nil and what ~= "step" and what ~= "collect" then return collectgarbage(what, arg) end
    local t0 = clock()
    local r = collectgarbage(what, arg)
    gc_clock.seconds = gc_clock.seconds + clock() - t0
    return r
  end
end
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional
local MobileNetV2 = require("mobilenetv2")

local iters = tonumber(arg and arg[1]) or 20
if arg and arg[2] then ember.set_num_threads((assert(tonumber(arg[2]), "threads must be a number"))) end

ember.manual_seed(0)
local model = MobileNetV2(10)
local batch = tonumber(arg and arg[3]) or 32
local x, labels = ember.randn({ batch, 3, 32, 32 }), ember.randint(1, 11, { batch })
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
  local s0, gc0, t0 = ember.memory_stats(), gc_clock.seconds, os.clock()
  local wall = B.time(function(k) for _ = 1, k do fn() end end, n, 1)
  local cpu, s1 = os.clock() - t0, ember.memory_stats()
  local gc = gc_clock.seconds - gc0
  local function per_call(k) return (s1[k] - s0[k]) / n end
  local r = ember.profile(function() for _ = 1, n do fn() end end)
  local kernels, calls = 0, 0
  for _, v in pairs(r.ops) do kernels, calls = kernels + v.seconds, calls + v.calls end
  print(B.json({ bench = "mobilenetv2_overhead_" .. name, threads = ember.get_num_threads(),
    wall_ms = wall * 1e3, cpu_ms = cpu / n * 1e3, profiled_wall_ms = r.seconds / n * 1e3,
    kernels_ms = kernels / n * 1e3, other_ms = (r.seconds - kernels) / n * 1e3, op_calls = calls / n,
    gc_ms = gc / n * 1e3, gc_steps = per_call("gc_steps"), gc_sweeps = per_call("gc_sweeps"),
    gc_collections = per_call("gc_collections"), cache_hits = per_call("cache_hits"),
    cache_misses = per_call("cache_misses"), cache_evictions = per_call("cache_evictions"),
    batch = name == "infer_batch1" and 1 or batch }))
end

measure("train_forward", fwd_train, iters)
measure("train_step", step, iters)
measure("infer_batch1", fwd_infer, iters * 10)
