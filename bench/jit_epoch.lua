-- bench/jit_epoch.lua: the MLP recipe's training epoch (Fashion-MNIST from
-- the Debian package, MLP 784-256-128-10, cross-entropy, SGD lr 0.1
-- momentum 0.9, batch 128 shuffled, as bench/train_mlp.lua) eagerly and
-- through plans (ember.jit.trace: one for the full batches, one for the
-- epoch's last, smaller batch), on two models that start equal, epochs
-- alternating eager, replayed (and, with "torch", PyTorch 1.13's epoch of
-- bench/torch_ref.py in a process of its own, its threads ember's: the
-- second epoch of two, as ember's epochs run in a warm process). The two
-- ember models see the same batches and end with the same bits, so the
-- same test accuracy. Prints JSON: seconds per epoch each way (medians, wall
-- and the process's CPU),
-- the ratios, test accuracies, and the most bytes a step held above what was
-- live before it each way.
--   luajit bench/jit_epoch.lua [epochs] [torch] [threads]
package.path = "./bench/?.lua;./spec/support/?.lua;" .. package.path
local B = require("common")
local Z = require("zoo")
local ember = require("ember")
local optim = ember.optim

local epochs = tonumber(arg and arg[1]) or 2
local with_torch = arg and arg[2] == "torch"
if arg and tonumber(arg[3]) then ember.set_num_threads(tonumber(arg[3])) end
local train, test   -- loaded after the peaks are measured (the loading's own memory would count)

local function make()
  ember.manual_seed(0)
  local model = Z.mlp({ 784, 256, 128, 10 }, true)
  local step = Z.train_step(model, optim.SGD(model:parameters(), { lr = 0.1, momentum = 0.9 }))
  return { model = model, step = step, plans = {}, steps = 0 }
end

-- one epoch, each step eager, or replayed from the plan of its batch size
-- (traced at the first batch of that size once the optimizer has its state)
local function epoch(m, e, replay)
  m.loader = m.loader or ember.data.DataLoader(train, { batch_size = 128, shuffle = true, seed = 0 })
  m.loader:set_epoch(e - 1)
  for x, y in m.loader:iter() do
    m.steps = m.steps + 1
    if not replay or m.steps == 1 then
      m.step(x, y)
    else
      local n = x:size(1)
      local plan = m.plans[n]
      if plan then plan(x, y) else m.plans[n] = ember.jit.trace(m.step, { x, y }) end
    end
  end
end

-- the most bytes one step holds above what was live before it, eager and
-- replayed (the plan's first run: its arena allocated in it), on models of
-- their own before the data is loaded (its loading would count)
local px, py = ember.rand({ 128, 1, 28, 28 }), ember.randint(1, 11, { 128 })
local pe, pr = make(), make()
pe.step(px, py)
pe.step(px, py)
pr.step(px, py)
local pplan = ember.jit.trace(pr.step, { px, py })
local eager_peak = Z.peak_bytes(function() pe.step(px, py) end)
local replay_peak = Z.peak_bytes(function() pplan(px, py) end)
train, test = ember.data.fashion_mnist("train"), ember.data.fashion_mnist("test")

-- the process's CPU seconds (every thread's, the team's spinning included):
-- on a loaded machine the wall time mostly measures the neighbours
local ffi = require("ffi")
local cts = ffi.new("struct ember_timespec")
local function cpu_now()
  ffi.C.clock_gettime(2, cts)   -- CLOCK_PROCESS_CPUTIME_ID
  return tonumber(cts.tv_sec) + tonumber(cts.tv_nsec) * 1e-9
end

local eager, replayed = make(), make()
local te, tp, tt, ce, cp = {}, {}, {}, {}, {}
local torch_acc, acc1
for e = 1, epochs do
  collectgarbage()
  local t0, c0 = B.now(), cpu_now()
  epoch(eager, e, false)
  te[e], ce[e] = B.now() - t0, cpu_now() - c0
  collectgarbage()
  t0, c0 = B.now(), cpu_now()
  epoch(replayed, e, true)
  tp[e], cp[e] = B.now() - t0, cpu_now() - c0
  if e == 1 then
    acc1 = { B.accuracy(ember, eager.model, test, 1000), B.accuracy(ember, replayed.model, test, 1000) }
  end
  if with_torch then
    -- two epochs, the second timed: the first runs in a fresh process (its first calls' setup, cold caches)
    local cmd = ("OMP_NUM_THREADS=%d OMP_WAIT_POLICY=passive /usr/bin/python3 bench/torch_ref.py mlp 2")
      :format(ember.get_num_threads())
    local p = assert(io.popen(cmd))
    local out = p:read("*a")
    p:close()
    tt[e] = tonumber(out:match('"epoch_seconds": %[[%d.e-]+, ([%d.e-]+)%]'))
    torch_acc = tonumber(out:match('"test_accuracy_epoch1": ([%d.e-]+)'))
  end
end
local acc_eager, acc_replay = B.accuracy(ember, eager.model, test, 1000), B.accuracy(ember, replayed.model, test, 1000)
local same = true
local sa, sb = eager.model:state_dict(), replayed.model:state_dict()
for k, v in pairs(sa) do same = same and ember.equal(v, sb[k]) end
local me, mp = B.median(te), B.median(tp)
local s = replayed.plans[128]:stats()
print(B.json({ bench = "jit_epoch", epochs = epochs, eager_s_per_epoch = me, replay_s_per_epoch = mp,
  replay_vs_eager = mp / me, eager_cpu_s_per_epoch = B.median(ce), replay_cpu_s_per_epoch = B.median(cp), test_accuracy_eager = acc_eager, test_accuracy_replay = acc_replay,
  test_accuracy_epoch1_eager = acc1[1], test_accuracy_epoch1_replay = acc1[2],
  same_bits = same, plan_ops = s.ops, plan_fused = s.fused, arena_bytes = s.arena_bytes,
  eager_step_peak_bytes = eager_peak, replay_step_peak_bytes = replay_peak,
  torch_s_per_epoch = with_torch and B.median(tt) or nil, torch_test_accuracy_epoch1 = torch_acc,
  replay_vs_torch = with_torch and mp / B.median(tt) or nil, eager_vs_torch = with_torch and me / B.median(tt) or nil,
  threads = ember.get_num_threads(), openblas_core = B.blas_core(ember) }))
