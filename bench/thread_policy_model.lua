-- The training steps bench/thread_policy.lua and the busy host
-- (examples/embed/busy_host.c) time: small, medium and large MLP steps,
-- alternating the thread settings 1, 2 and auto (the default) round by
-- round so that the machine's load changes touch all three alike.
--   setup(size, rounds, steps)  then  tick() until it returns 1;  report() the JSON
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

-- the setting timed now: rounds alternate the orders 1, 2, auto and 1, auto, 2,
-- so that over two rounds each setting follows each of the others once (a
-- round inherits what the one before left: 2's workers spinning on after it,
-- and in the busy host beside a neighbour which core the main thread got,
-- which lasts for seconds: docs/frame_loop.md, "Measured")
local ORDERS = { { 1, 2, "auto" }, { 1, "auto", 2 } }
local function current() return ORDERS[(S.round - 1) % #ORDERS + 1][S.mode] end


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
  S.round, S.mode, S.i = 1, 1, 0
  S.times = { [1] = {}, [2] = {}, auto = {} }   -- per mode: one median per round
  S.sum = { [1] = 0, [2] = 0, auto = 0 }        -- per mode: every timed step's time, and their count
  S.n = { [1] = 0, [2] = 0, auto = 0 }
  S.cur, S.cur_wait = {}, {}
  S.waits = { [1] = {}, [2] = {}, auto = {} }   -- per mode: each round's median wait for a core
  for _, m in ipairs(MODES) do   -- warm up each setting
    ember.set_num_threads(m)
    for _ = 1, 2 do S.step() end
  end
  ember.set_num_threads(current())
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

-- one step of the schedule; 1 when every round is done
function tick()
  local w0, t0 = waited_ns(), ember.clock()
  S.step()
  S.cur[#S.cur + 1] = ember.clock() - t0
  local w1 = w0 and waited_ns()
  if w1 then S.cur_wait[#S.cur_wait + 1] = (w1 - w0) * 1e-9 end
  S.i = S.i + 1
  if S.i >= S.steps then
    local m = current()
    local r = S.times[m]
    r[#r + 1] = median(S.cur)
    if #S.cur_wait > 0 then S.waits[m][#S.waits[m] + 1] = median(S.cur_wait) / r[#r] end
    for _, t in ipairs(S.cur) do S.sum[m], S.n[m] = S.sum[m] + t, S.n[m] + 1 end
    S.cur, S.cur_wait, S.i = {}, {}, 0
    S.mode = S.mode + 1
    if S.mode > #MODES then S.mode, S.round = 1, S.round + 1 end
    if S.round > S.rounds then return ember.tensor(1) end
    ember.set_num_threads(current())
    S.step()   -- one step to settle the new setting, untimed
  end
  return ember.tensor(0)
end

-- {"size":..., "ms":{"1":..,"2":..,"auto":..}, "rounds":..., "auto_over_best":.., "auto_stats":{...},
--  "mean_ms":{...}, "auto_mean_over_best":..}: medians of the rounds' medians, what auto decided
--  (thread_stats: the arm that won, the large jobs timed under each arm, the trials, those put off
--  as the cores were crowded),
--  and means over every timed step (which a trial of a slow arm reaches); where Linux says how
--  long the calling thread waited for a core, "wait_share": per setting, each round's median
--  wait a step over its median step time, in the order run (about 0.5 when the host's main thread shared
--  its core with another busy thread through the round, 0 when it had one to itself)
function report(place)
  local ms, mean = {}, {}
  for _, m in ipairs(MODES) do
    ms[tostring(m)] = median(S.times[m]) * 1e3
    mean[tostring(m)] = S.sum[m] / S.n[m] * 1e3
  end
  local best_mean = math.min(mean["1"], mean["2"])
  local best = math.min(ms["1"], ms["2"])
  local st = ember.thread_stats()
  local shares = {}
  for _, m in ipairs(MODES) do
    local v = {}
    for i, w in ipairs(S.waits[m]) do v[i] = ("%.2f"):format(w) end
    shares[#shares + 1] = ('"%s":[%s]'):format(tostring(m), table.concat(v, ","))
  end
  local wait = #S.waits.auto > 0 and (',"wait_share":{%s}'):format(table.concat(shares, ",")) or ""
  return ('{"place":"%s","size":"%s","rounds":%d,"steps_per_round":%d,"ms":{"1":%.4f,"2":%.4f,"auto":%.4f},'
    .. '"auto_over_best":%.3f,"auto_stats":{"jobs_parallel":%d,"jobs_inline_small":%d,"jobs_inline_busy":%d,'
    .. '"late_jobs":%d,"arm":"%s","jobs_sampled":%d,"jobs_team":%d,"trials":%d,"trials_won":%d,'
    .. '"trials_stopped":%d,"team_cuts":%d,"trials_postponed":%d,"crowded":%s},'
    .. '"mean_ms":{"1":%.4f,"2":%.4f,"auto":%.4f},"auto_mean_over_best":%.3f%s}')
    :format(place, S.size, S.rounds, S.steps, ms["1"], ms["2"], ms.auto, ms.auto / best,
    st.jobs_parallel, st.jobs_inline_small, st.jobs_inline_busy, st.late_jobs, st.arm, st.jobs_sampled,
    st.jobs_team, st.trials, st.trials_won, st.trials_stopped, st.team_cuts, st.trials_postponed,
    tostring(st.crowded), mean["1"], mean["2"], mean.auto,
    mean.auto / best_mean, wait)
end
