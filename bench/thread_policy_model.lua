-- The training steps bench/thread_policy.lua and the busy host
-- (examples/embed/busy_host.c) time: small, medium and large MLP steps,
-- the thread settings 1, 2 and auto (the default) alternated step by step,
-- so that every setting draws from the same load and, in the busy host
-- beside a neighbour, the same placements of three busy threads on two
-- cores (one lasts about seven large steps; docs/frame_loop.md, "Measured").
--   setup(size, rounds, steps)  then  tick() until it returns 1;  report() the JSON
-- Each setting is timed rounds * steps times; one tick runs one step.
local ember = require("ember")
local nn, F = ember.nn, ember.nn.functional

local SIZES = {
  small = { batch = 32, widths = { 32, 64, 64, 10 } },            -- about 0.1 ms a step on one core
  medium = { batch = 128, widths = { 784, 256, 128, 10 } },       -- the MLP recipe's step
  large = { batch = 256, widths = { 784, 1024, 1024, 10 } },
}
local MODES = { 1, 2, "auto" }

local S = {}

-- The time the calling thread waited for a core, ns (the second field of
-- Linux's /proc/thread-self/schedstat), or nil where it cannot be read: in
-- the busy host beside a neighbour, three busy threads share two cores,
-- and whether the host's main thread has one to itself decides a step's
-- time (docs/frame_loop.md, "Measured")
local function waited_ns()
  local f = io.open("/proc/thread-self/schedstat")
  if not f then return nil end
  local _, wait = f:read("*n", "*n")
  f:close()
  return wait
end


-- The order: triples of steps, one per setting, alternating the orders
-- 1, 2, auto and 1, auto, 2, so that each setting follows each of the
-- others as often (a step inherits what the one before left: 2's workers
-- spinning on after it, and the placement a team's jobs draw again).
-- After each switch one step of the new setting runs untimed: it wakes
-- (or parks) the workers and lets auto take a load sample and re-arm its
-- back-off, which set_num_threads("auto") resets; what auto's measured
-- choice learned stays across the switches (core/src/parallel.c), and the
-- fixed settings' steps add nothing to it, so auto's timed steps are those
-- of a run under auto with pauses in it.
local ORDERS = { { 1, 2, "auto" }, { 1, "auto", 2 } }
local function setting(k)   -- the k-th timed step's setting (k from 0)
  local t = math.floor(k / 3)
  return ORDERS[t % #ORDERS + 1][k % 3 + 1]
end

function setup(size, rounds, steps)
  local spec = assert(SIZES[size], "size must be small, medium or large")
  ember.manual_seed(0)
  local layers = {}
  for i = 1, #spec.widths - 1 do
    layers[#layers + 1] = nn.Linear(spec.widths[i], spec.widths[i + 1])
    if i < #spec.widths - 1 then layers[#layers + 1] = nn.ReLU() end
  end
  S.model = nn.Sequential(unpack(layers))
  S.opt = ember.optim.Adam(S.model:parameters(), { lr = 1e-3 })
  S.gm = ember.autodiff.GradManager():attach(S.model:parameters())
  S.x = ember.randn({ spec.batch, spec.widths[1] })
  S.y = ember.randint(1, spec.widths[#spec.widths] + 1, { spec.batch })
  S.size, S.rounds, S.steps = size, rounds, steps
  S.total = 3 * rounds * steps   -- timed steps, all settings
  S.k = 0                        -- timed steps done
  S.on = nil                     -- the setting now in force
  S.ms = { [1] = {}, [2] = {}, auto = {} }      -- per setting: each timed step's time (ms), in order
  S.share = { [1] = {}, [2] = {}, auto = {} }   -- and its wait for a core over its time (where Linux says)
  for _, m in ipairs(MODES) do   -- warm up each setting
    ember.set_num_threads(m)
    for _ = 1, 2 do S.step() end
  end
end

function S.step()
  S.gm:record()
  local loss = F.cross_entropy(S.model(S.x), S.y)
  S.gm:backward(loss)
  S.opt:step()
  S.opt:zero_grad()
end

local function median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  local n = #s
  if n == 0 then return nil end
  return n % 2 == 1 and s[(n + 1) / 2] or (s[n / 2] + s[n / 2 + 1]) / 2
end

local function mean(t)
  local sum = 0
  for _, v in ipairs(t) do sum = sum + v end
  return sum / #t
end

-- one step of the schedule (a timed one, or the untimed one after a
-- switch); 1 when every timed step is done
function tick()
  local m = setting(S.k)
  if S.on ~= m then   -- a switch: this tick's step settles the new setting
    ember.set_num_threads(m)
    S.on = m
    S.step()
    return ember.tensor(0)
  end
  local w0, t0 = waited_ns(), ember.clock()
  S.step()
  local t = ember.clock() - t0
  local w1 = w0 and waited_ns()
  local ms = S.ms[m]
  ms[#ms + 1] = t * 1e3
  if w1 then S.share[m][#ms] = (w1 - w0) * 1e-9 / t end
  S.k = S.k + 1
  return ember.tensor(S.k >= S.total and 1 or 0)
end

local SHARED = 0.25   -- a step that waited this share of its time for a core shared one

-- {"place", "size", "rounds", "steps_per_round", "timed_steps" (per setting),
--  "ms": per setting the median over its timed steps (ms), "auto_over_best": auto's
--  over the better of 1 and 2, "paired": the medians over the triples of auto's step
--  over 1's and over 2's in the same triple, "auto_stats": what auto decided
--  (thread_stats: the arm that won, the large jobs timed under each arm, the
--  trials, those put off as the cores were crowded), "mean_ms" and
--  "auto_mean_over_best": the same from the mean step;
--  where Linux says how long the calling thread waited for a core, "shared": per
--  setting the timed steps that waited over a quarter of their time (in the busy
--  host beside a neighbour: the host's main thread shared its core), and
--  "ms_own"/"ms_shared" the medians of the steps that did not and did; and with
--  at most 100 timed steps a setting, "trace": per setting each step's
--  [ms, wait share] in the order run}
function report(place)
  local ms, mn = {}, {}
  for _, m in ipairs(MODES) do
    ms[tostring(m)] = median(S.ms[m])
    mn[tostring(m)] = mean(S.ms[m])
  end
  local best = math.min(ms["1"], ms["2"])
  local best_mean = math.min(mn["1"], mn["2"])
  local r1, r2 = {}, {}
  for i = 1, #S.ms.auto do
    r1[i] = S.ms.auto[i] / S.ms[1][i]
    r2[i] = S.ms.auto[i] / S.ms[2][i]
  end
  local st = ember.thread_stats()
  local wait = ""
  if #S.share.auto == #S.ms.auto then
    local shared, own_ms, shared_ms, trace = {}, {}, {}, {}
    for _, m in ipairs(MODES) do
      local own, sh, n, steps = {}, {}, 0, {}
      for i, w in ipairs(S.share[m]) do
        if w > SHARED then n, sh[#sh + 1] = n + 1, S.ms[m][i] else own[#own + 1] = S.ms[m][i] end
        steps[i] = ("[%.3f,%.2f]"):format(S.ms[m][i], w)
      end
      local key = ('"%s":'):format(tostring(m))
      shared[#shared + 1] = key .. n
      own_ms[#own_ms + 1] = key .. (own[1] and ("%.4f"):format(median(own)) or "null")
      shared_ms[#shared_ms + 1] = key .. (sh[1] and ("%.4f"):format(median(sh)) or "null")
      trace[#trace + 1] = key .. "[" .. table.concat(steps, ",") .. "]"
    end
    wait = (',"shared":{%s},"ms_own":{%s},"ms_shared":{%s}'):format(table.concat(shared, ","),
      table.concat(own_ms, ","), table.concat(shared_ms, ","))
    if #S.ms.auto <= 100 then wait = wait .. (',"trace":{%s}'):format(table.concat(trace, ",")) end
  end
  return ('{"place":"%s","size":"%s","rounds":%d,"steps_per_round":%d,"timed_steps":%d,'
    .. '"ms":{"1":%.4f,"2":%.4f,"auto":%.4f},"auto_over_best":%.3f,"paired":{"auto/1":%.3f,"auto/2":%.3f},'
    .. '"auto_stats":{"jobs_parallel":%d,"jobs_inline_small":%d,"jobs_inline_busy":%d,'
    .. '"late_jobs":%d,"arm":"%s","jobs_sampled":%d,"jobs_team":%d,"trials":%d,"trials_won":%d,'
    .. '"trials_stopped":%d,"team_cuts":%d,"trials_postponed":%d,"crowded":%s},'
    .. '"mean_ms":{"1":%.4f,"2":%.4f,"auto":%.4f},"auto_mean_over_best":%.3f%s}')
    :format(place, S.size, S.rounds, S.steps, #S.ms.auto, ms["1"], ms["2"], ms.auto, ms.auto / best,
    median(r1), median(r2),
    st.jobs_parallel, st.jobs_inline_small, st.jobs_inline_busy, st.late_jobs, st.arm, st.jobs_sampled,
    st.jobs_team, st.trials, st.trials_won, st.trials_stopped, st.team_cuts, st.trials_postponed,
    tostring(st.crowded), mn["1"], mn["2"], mn.auto, mn.auto / best_mean, wait)
end
