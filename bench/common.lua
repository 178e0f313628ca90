-- Shared helpers for the benchmarks: wall-clock timing and medians.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local ffi = require("ffi")
ffi.cdef [[
struct ember_timespec { long tv_sec; long tv_nsec; };
int clock_gettime(int clk, struct ember_timespec *ts);
]]
local ts = ffi.new("struct ember_timespec")
local M = {}

function M.now()
  ffi.C.clock_gettime(1, ts)   -- CLOCK_MONOTONIC: wall time (os.clock counts every thread)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- median over `reps` runs of seconds per iteration of fn(iters)
function M.time(fn, iters, reps)
  local t = {}
  for r = 1, reps or 7 do
    local t0 = M.now()
    fn(iters)
    t[r] = (M.now() - t0) / iters
  end
  return M.median(t)
end

-- ms per call of fn: one warm-up call, then the median of reps rounds of iters calls
function M.ms_per_call(fn, iters, reps)
  fn()
  return M.time(function(n) for _ = 1, n do fn() end end, iters, reps) * 1e3
end

-- ms per call of fn, the fastest of `batches` (default 3) batches of calls,
-- each sized to about `target` seconds (default 0.02) from a second call
-- after a warm-up; `now` is the clock (default M.now, wall time; os.clock
-- counts the CPU time of every thread, steadier on a loaded machine)
function M.best_ms(fn, now, target, batches)
  now = now or M.now
  fn()
  local t0 = now()
  fn()
  local iters = math.max(1, math.floor((target or 0.02) / math.max(now() - t0, 1e-7)))
  local best = math.huge
  for _ = 1, batches or 3 do
    t0 = now()
    for _ = 1, iters do fn() end
    best = math.min(best, (now() - t0) / iters)
  end
  return best * 1e3
end

-- fn called inside ember.tidy with its result dropped, so that the tidy
-- frees it at once (a result the tidy's function returns outlives the tidy
-- until the next GC). The function given the tidy is made once: a closure
-- made per call (LuaJIT cannot compile FNEW) sends each call to the
-- interpreter.
function M.in_tidy(ember, fn)
  local drop = function() fn() end
  return function() ember.tidy(drop) end
end

-- The A/B benches' arguments: --wall (wall time; CPU time otherwise) and
-- --only "case,case". Returns the clock, its name and the set of cases
-- wanted (nil: all).
function M.ab_args(args, usage)
  local now, clock, wanted = os.clock, "cpu", nil
  local i = 1
  while i <= #args do
    if args[i] == "--wall" then now, clock = M.now, "wall"; i = i + 1
    elseif args[i] == "--only" and args[i + 1] then
      wanted = {}
      for name in args[i + 1]:gmatch("[^,]+") do wanted[name] = true end
      i = i + 2
    else error("unknown argument " .. tostring(args[i]) .. " (expected " .. (usage or "--wall, --only list") .. ")") end
  end
  return now, clock, wanted
end

-- Two ways of doing the same work, timed in alternation so that a noisy
-- neighbour slows both alike: the medians of seconds per iteration of fa and
-- of fb, and the median of the per-round ratios fa / fb.
function M.time_pair(fa, fb, iters, reps)
  local ta, tb, ratio = {}, {}, {}
  for r = 1, reps or 7 do
    local t0 = M.now()
    fa(iters)
    local t1 = M.now()
    fb(iters)
    local t2 = M.now()
    ta[r], tb[r] = (t1 - t0) / iters, (t2 - t1) / iters
    ratio[r] = ta[r] / tb[r]
  end
  return M.median(ta), M.median(tb), M.median(ratio)
end

-- ember's step against a PyTorch script run as `cmd` (which prints JSON
-- with "seconds_per_step"), in alternating rounds of `iters` steps: the
-- medians of ember's and PyTorch's seconds per step and of the per-round
-- ratios. `step` runs once first to warm up.
function M.against_torch(step, cmd, iters, rounds)
  local function torch_round()
    local p = io.popen(cmd)
    local s = p:read("*a")
    p:close()
    local v = s:match('"seconds_per_step": ([%d%.e%-]+)')
    if not v then error(cmd .. " printed no time: " .. s) end
    return tonumber(v)
  end
  step()
  local te, tt, ratio = {}, {}, {}
  for r = 1, rounds do
    local t0 = M.now()
    for _ = 1, iters do step() end
    te[r] = (M.now() - t0) / iters
    tt[r] = torch_round()
    ratio[r] = te[r] / tt[r]
  end
  return te, tt, ratio
end

-- one training step of a classifier on a fixed batch: record, cross-entropy
-- backward, optimizer step, zero the gradients
function M.classifier_step(ember, model, opt, gm, x, y)
  local F = ember.nn.functional
  return function()
    gm:record()
    gm:backward(F.cross_entropy(model(x), y))
    opt:step()
    opt:zero_grad()
  end
end

-- peak resident set size of this process in MB (VmHWM from /proc)
function M.peak_rss_mb()
  local f = io.open("/proc/self/status", "r")
  if not f then return -1 end
  local s = f:read("*a")
  f:close()
  local kb = s:match("VmHWM:%s*(%d+)")
  return kb and tonumber(kb) / 1024 or -1
end

-- the median of a list of numbers
function M.median(list)
  local s = { unpack(list) }
  table.sort(s)
  return s[math.floor(#s / 2) + 1]
end

-- the OpenBLAS core in use ("SkylakeX", "Haswell", ...), from ember.blas_info()
function M.blas_core(ember)
  return ember.blas_info():match("%(core ([^)]+)%)") or ember.blas_info()
end

-- the training benchmarks' command line: epochs and seed (positional), then
-- the flags "det" (ember.set_deterministic(true)) and "profile" (the epochs
-- run under ember.profile, and the JSON says where their time went)
function M.train_args(args, default_epochs)
  local o = { epochs = tonumber(args[1]) or default_epochs, seed = tonumber(args[2]) or 0 }
  for i = 3, #args do o[args[i]] = true end
  return o
end

-- the training benchmarks' shared parts: one epoch (the batches' making and
-- the optimizer's step as sections of a profile), and test accuracy; with
-- tidy set (the flag "tidy") each step, the batch's making included, runs in
-- ember.tidy, so its temporaries go back at once instead of at the next GC
function M.train_epoch(ember, model, loader, gm, opt, tidy)
  local F, section = ember.nn.functional, ember.profile_section
  local function step() opt:step(); opt:zero_grad() end
  local batches = loader:iter()
  local function train()
    local x, y = section("data", batches)
    if x == nil then return false end
    gm:record()
    gm:backward(F.cross_entropy(model(x), y))
    section("optimizer", step)
    return true
  end
  if tidy then
    while ember.tidy(train) do end
  else
    while train() do end
  end
end

-- Runs epoch(e), then after(e) if given (untimed: a test), for e =
-- 1..epochs, under ember.profile when profile is set; returns each epoch's
-- seconds (and the most tensor bytes an epoch had in use above what was live
-- before it: times.peak_bytes) and, profiled, the JSON fields time_*_s: seconds per epoch in
-- GEMMs, convolutions, pooling, the other ops (elementwise), the optimizer,
-- the data and the rest (Lua, autograd)
function M.run_epochs(ember, epochs, profile, epoch, after)
  local times = {}
  local function all()
    times.peak_bytes = 0
    for e = 1, epochs do
      collectgarbage()
      local base = ember.memory_stats().bytes_in_use
      ember.reset_peak_memory()
      local t0 = M.now()
      epoch(e)
      times[e] = M.now() - t0
      times.peak_bytes = math.max(times.peak_bytes, ember.memory_stats().peak_bytes - base)
      if after then ember.profile_section("after", after, e) end
    end
  end
  if not profile then all(); return times, {} end
  local r = ember.profile(all)
  local fields = {}
  for _, k in ipairs({ "gemm", "conv", "pool", "elementwise", "other" }) do fields["time_" .. k .. "_s"] = r[k] / epochs end
  for _, k in ipairs({ "optimizer", "data" }) do fields["time_" .. k .. "_s"] = (r.sections[k] or 0) / epochs end
  return times, fields
end

function M.accuracy(ember, model, test, batch_size)
  local correct = 0
  ember.no_grad(function()
    for x, y in ember.data.DataLoader(test, { batch_size = batch_size }):iter() do
      local _, pred = model(x):max(2)
      correct = correct + pred:eq(y):sum():item()
    end
  end)
  return correct / #test
end

-- what every training bench reports (o: B.train_args's table; times: the
-- epochs' seconds; n: samples in an epoch)
function M.train_fields(ember, bench, o, times, n)
  local med = M.median(times)
  return { bench = bench, epochs = o.epochs, seconds_per_epoch = med, samples_per_s = n / med,
    peak_epoch_bytes = times.peak_bytes, tidy = o.tidy or false,
    peak_rss_mb = M.peak_rss_mb(), seed = o.seed, threads = ember.get_num_threads(), deterministic = o.det or false,
    openblas_core = M.blas_core(ember) }
end

-- the JSON text of tbl and then of each extra table's fields
function M.json(tbl, ...)
  for _, extra in ipairs({ ... }) do
    for k, v in pairs(extra) do tbl[k] = v end
  end
  local keys = {}
  for k in pairs(tbl) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = tbl[k]
    local s = type(v) == "number" and string.format("%.6g", v) or string.format("%q", tostring(v))
    parts[#parts + 1] = string.format("  %q: %s", k, s)
  end
  return "{\n" .. table.concat(parts, ",\n") .. "\n}"
end

-- The A/B benches' report: ms_per_call(fn) of each case { name, fn } that
-- wanted admits (nil: all), printed as JSON under the bench's name with the
-- thread count and the clock's name.
function M.ab_print(bench, ember, cases, wanted, clock, ms_per_call)
  local out = {}
  for _, c in ipairs(cases) do
    if not wanted or wanted[c[1]] then
      out[#out + 1] = ('  {"case": "%s", "ms": %.4g}'):format(c[1], ms_per_call(c[2]))
    end
  end
  print(('{"bench": "%s", "threads": %d, "clock": "%s", "cases": [\n%s\n]}'):format(bench, ember.get_num_threads(),
    clock, table.concat(out, ",\n")))
end

return M
