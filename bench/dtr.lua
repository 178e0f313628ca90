-- Training past memory (docs/dtr.md): a ResNet-18-style net (the model
-- zoo's, spec/support/zoo.lua) and a transformer block trained at their
-- unconstrained peak and under DTR budgets that leave 1/2, 1/3 and 1/4 of
-- the activations' peak (the bytes above the floor of parameters,
-- gradients, optimizer state and batch). Rounds run every setting in turn,
-- DTR off first, so a noisy neighbour slows all alike. Prints one JSON
-- object per model and setting: medians of seconds per step and of the
-- per-round ratio to DTR off, the peak bytes, evictions, recomputations
-- and seconds recomputing per step. cpu_s is the process's CPU seconds per
-- step (os.clock, all threads), steadier than wall time on a loaded machine.
--   luajit bench/dtr.lua [model [rounds [iters [batch]]]]
--   luajit bench/dtr.lua batch [model [_ [_ [batch]]]]   -- the largest batch in a fixed budget
-- EMBER_DTR_DEBUG=1 prints to stderr, at each setting's end, the evictions
-- and recomputations by op, and where a budget runs out, what holds the
-- bytes in use (docs/dtr.md, "Diagnostics")
-- P is the step's live peak (live_peak below: the garbage the Lua GC has
-- not yet collected left out, so it does not move with the collector's
-- pacing); peak_gc_bytes is the peak of a step as the collector paces it.
-- DTR_P_RESNET / DTR_P_TRANSFORMER=bytes set P instead of measuring it (to
-- compare builds at the same budgets in bytes)
-- (model "resnet", "transformer" or "all" (default); 3 rounds of 2 steps;
-- batch 32 of 64x64 images, width 16, for the ResNet, 8 sequences of 128
-- for the transformer block, d_model 128, 4 heads)
package.path = "./bench/?.lua;./spec/support/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local Z = require("zoo")
local nn, F = ember.nn, ember.nn.functional

local which = arg and arg[1] or "all"
local rounds = tonumber(arg and arg[2]) or 3
local iters = tonumber(arg and arg[3]) or 2
local batch_arg = tonumber(arg and arg[4])

local function settle()
  collectgarbage(); collectgarbage()
  return ember.memory_stats().bytes_in_use
end

local DEFAULT_BATCH = { resnet = 32, transformer = 8 }
local MODELS = {
  resnet = function(batch)
    local model = Z.ResNet18(16, 10)
    local x, y = ember.randn({ batch, 3, 64, 64 }), ember.randint(1, 11, { batch })
    return model, function(m) return F.cross_entropy(m(x), y) end, { batch = batch, size = 64, width = 16 },
      x:numel() * 4 + y:numel() * 8
  end,
  transformer = function(batch)
    local model = nn.TransformerEncoderLayer(128, 4, 512, 0.1, "gelu", 1e-5, true)
    local x = ember.randn({ batch, 128, 128 })
    return model, function(m) return (m(x) ^ 2):mean() end, { batch = batch, seq = 128, d_model = 128 },
      x:numel() * 4
  end,
}

-- a model of `name` at `batch`, its optimizer and manager, and one step of training
local function trainer(name, batch)
  ember.manual_seed(0)
  local model, loss_fn, shape, batch_bytes = MODELS[name](batch)
  -- what the floor holds (docs/dtr.md, "Out of memory"): the parameters,
  -- as many bytes of momentum once the optimizer has stepped, the batch
  local param_bytes = 0
  for _, p in ipairs(model:parameters()) do param_bytes = param_bytes + p:numel() * 4 end
  shape.parameter_bytes, shape.batch_bytes = param_bytes, batch_bytes
  local opt = ember.optim.SGD(model:parameters(), { lr = 1e-3, momentum = 0.9 })
  local gm = ember.autodiff.GradManager():attach(model:parameters())
  local function step()
    gm:record()
    gm:backward(loss_fn(model))
    opt:step()
    opt:zero_grad()
    settle()
  end
  return step, gm, shape
end

-- The live peak of one unconstrained step: every dead wrapper is collected
-- and its tensor released after each new wrapper (a full collection each:
-- 0.3 to 0.8 s for the step under load), so the peak of the bytes in use
-- is that of the tensors the step still holds, as a refcounted host
-- (PyTorch) would see it; it does not move with the collector's pacing, as
-- the peak of a step paced by the collector (peak_gc_bytes) does.
local function live_peak(step)
  settle()
  ember._set_wrap_hook(function() collectgarbage(); ember._sweep() end)
  ember.reset_peak_memory()
  local ok, err = pcall(step)
  ember._set_wrap_hook(nil)
  assert(ok, err)
  return ember.memory_stats().peak_bytes
end

-- The largest batch (the default one times 1, 1.5, 2, 3, 4, ...) that trains
-- in a fixed number of bytes, the unconstrained peak at the default batch:
-- without DTR, the batches whose own peak (the second step's, the garbage
-- collected after each step as in bench()) fits; with DTR, those that train
-- two steps under a budget of that many bytes.
local function largest_batch(name)
  local b0 = batch_arg or DEFAULT_BATCH[name]
  -- the peak of batch b's second step (the live peak without DTR), over the
  -- bytes in use before its model was made
  local function peak_of(b, budget)
    local base = settle()
    local step, gm = trainer(name, b)
    if budget then ember.dtr.enable({ budget = base + budget }) end
    local ok, err = pcall(function()
      step()
      ember.reset_peak_memory()
      if budget then step() else live_peak(step) end
    end)
    if ember.dtr.is_enabled() then ember.dtr.disable() end
    if not ok and gm:is_recording() then gm:release() end
    local peak = ember.memory_stats().peak_bytes - base
    step, gm = nil, nil
    settle()
    return ok and peak or nil, err
  end
  local bytes = assert(peak_of(b0))
  local found = {}
  for _, mode in ipairs({ "plain", "dtr" }) do
    for _, mult in ipairs({ 1, 1.5, 2, 3, 4, 6, 8 }) do
      local b = math.floor(b0 * mult)
      local peak = peak_of(b, mode == "dtr" and bytes or nil)
      if not peak or peak > bytes then break end
      found[mode] = b
    end
  end
  print(B.json({ bench = "dtr_" .. name .. "_largest_batch", bytes = bytes, default_batch = b0,
    without_dtr = found.plain or 0, with_dtr = found.dtr or 0 }))
end

local function bench(name)
  local step, gm, shape = trainer(name, batch_arg or DEFAULT_BATCH[name])
  step()   -- the optimizer's state
  local floor = settle()
  ember.reset_peak_memory()
  step()
  local P_gc = ember.memory_stats().peak_bytes   -- the unconstrained peak as the collector's pacing leaves it
  local P_live = live_peak(step)                 -- and as the step's live tensors alone reach it
  local P = P_live
  -- DTR_P_<MODEL>=bytes: budgets from this P instead (to compare builds
  -- whose collector leaves different garbage in the measured peak)
  local P_env = os.getenv("DTR_P_" .. name:upper())
  if P_env then P = assert(tonumber(P_env), "DTR_P_" .. name:upper() .. " must be a number of bytes") end
  local settings = { { "off" }, { "P", 1 }, { "P/2", 1 / 2 }, { "P/3", 1 / 3 }, { "P/4", 1 / 4 } }
  local times, ratios, cpus, cpu_ratios, stats = {}, {}, {}, {}, {}
  for _ = 1, rounds do
    local off, cpu_off
    for _, s in ipairs(settings) do
      local label, frac = s[1], s[2]
      if frac then ember.dtr.enable({ budget = math.floor(floor + frac * (P - floor)) }) end
      ember.reset_peak_memory()
      local gc0 = ember.memory_stats().gc_collections
      local t0, c0 = B.now(), os.clock()
      local ok, err = pcall(function() for _ = 1, iters do step() end end)
      if not ok then gm:release() end   -- the step's recording ends with it
      local dt, dc = (B.now() - t0) / iters, (os.clock() - c0) / iters
      local st = frac and ember.dtr.stats() or { peak_bytes = ember.memory_stats().peak_bytes }
      st.collections = ember.memory_stats().gc_collections - gc0   -- the binding's full ones (DTR asking; not settle()'s)
      if frac then ember.dtr.disable() end
      settle()
      if not ok then
        stats[label] = { error = tostring(err):match("out of memory[^\n]*") or tostring(err) }
      else
        off, cpu_off = off or dt, cpu_off or dc
        for _, t in ipairs({ times, ratios, cpus, cpu_ratios }) do t[label] = t[label] or {} end
        table.insert(times[label], dt)
        table.insert(ratios[label], dt / off)
        table.insert(cpus[label], dc)
        table.insert(cpu_ratios[label], dc / cpu_off)
        stats[label] = st
      end
    end
  end
  for _, s in ipairs(settings) do
    local label, st = s[1], stats[s[1]]
    local row = { bench = "dtr_" .. name, setting = label, floor_bytes = floor, peak_unconstrained_bytes = P,
      peak_live_bytes = P_live, peak_gc_bytes = P_gc, threads = ember.get_num_threads() }
    if s[2] then row.budget_bytes = math.floor(floor + s[2] * (P - floor)) end
    if st.error then
      row.error = st.error
    else
      row.step_s = B.median(times[label])
      row.ratio_to_off = B.median(ratios[label])
      row.cpu_s = B.median(cpus[label])
      row.cpu_ratio_to_off = B.median(cpu_ratios[label])
      row.peak_bytes = st.peak_bytes
      row.gc_collections_per_step = st.collections / iters
      if s[2] then
        row.evictions_per_step = st.evictions / iters
        row.recomputes_per_step = st.recomputes / iters
        row.recompute_s_per_step = st.recompute_s / iters
      end
    end
    print(B.json(row, shape))
  end
end

local batch_mode = which == "batch"
if batch_mode then which = arg[2] or "all" end
for _, name in ipairs(which == "all" and { "resnet", "transformer" } or { which }) do
  assert(MODELS[name], "model must be resnet, transformer or all")
  if batch_mode then largest_batch(name) else bench(name) end
end
