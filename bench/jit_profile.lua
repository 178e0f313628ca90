-- bench/jit_profile.lua: where a replayed MLP training step's wall time goes
-- (the step of bench/jit_epoch.lua: MLP 784-256-128-10, cross-entropy, SGD
-- with momentum, batch 128). The plan runs one entry at a time
-- (plan:start, run:step(0)), each entry's wall time taken around it, and
-- under ember.profile, which names each entry's op and its time inside the
-- op; the batch gather (DataLoader's index_select over the training set) is
-- timed apart. Prints JSON: microseconds per step, whole and by entry (in
-- the plan's order: op, wall us, op us), the gap between entries, the
-- gather's us per batch, and the thread count; and the whole step against
-- the same plan with its optimizer updates run one by one
-- (EMBER_PLAN_NO_GROUP, alternating rounds; both models end with the same
-- bits).
--   luajit bench/jit_profile.lua [steps] [threads]
package.path = "./bench/?.lua;./spec/support/?.lua;" .. package.path
local B = require("common")
local Z = require("zoo")
local ember = require("ember")

local steps = tonumber(arg and arg[1]) or 200
if arg and tonumber(arg[2]) then ember.set_num_threads(tonumber(arg[2])) end

ember.manual_seed(0)
local model = Z.mlp({ 784, 256, 128, 10 }, true)
local step = Z.train_step(model, ember.optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 }))
local train = ember.data.fashion_mnist("train")
local loader = ember.data.DataLoader(train, { batch_size = 128, shuffle = true, seed = 0 })
local batches, gather = {}, {}
local it = loader:iter()
for i = 1, 40 do
  local t0 = B.now()
  local x, y = it()
  gather[i] = B.now() - t0
  batches[i] = { x, y }
end
step(batches[1][1], batches[1][2])
local plan = ember.jit.trace(step, batches[2])

-- the same step's plan with its updates run one by one (EMBER_PLAN_NO_GROUP),
-- on a model of its own that starts equal
local ffi = require("ffi")
ffi.cdef("int setenv(const char *, const char *, int); int unsetenv(const char *);")
ember.manual_seed(0)
local model2 = Z.mlp({ 784, 256, 128, 10 }, true)
local step2 = Z.train_step(model2, ember.optim.SGD(model2:parameters(), { lr = 0.01, momentum = 0.9 }))
step2(batches[1][1], batches[1][2])
ffi.C.setenv("EMBER_PLAN_NO_GROUP", "1", 1)
local plan2 = ember.jit.trace(step2, batches[2])
ffi.C.unsetenv("EMBER_PLAN_NO_GROUP")

-- the whole step, plan(x, y) back to back, rounds alternating the two plans
local function steps_of(pl)
  return function(n) for i = 1, n do pl(batches[i % 40 + 1][1], batches[i % 40 + 1][2]) end end
end
steps_of(plan)(20)
steps_of(plan2)(20)
local whole, whole_nogroup, ratio = B.time_pair(steps_of(plan), steps_of(plan2), math.ceil(steps / 5), 9)
local same = true
local sa, sb = model:state_dict(), model2:state_dict()
for k, v in pairs(sa) do same = same and ember.equal(v, sb[k]) end

-- entry by entry: wall per entry (median over the steps), op time from the profiler
local n = plan:stats().ops
local per = {}
for e = 1, n do per[e] = {} end
local report = ember.profile(function()
  for i = 1, steps do
    local b = batches[i % 40 + 1]
    local run = plan:start(b[1], b[2])
    local e = 0
    repeat
      local s = B.now()
      local done = run:step(0)
      e = e + 1
      per[e][i] = B.now() - s
    until done
    run:result()
  end
end)
-- each entry's op names: one more step, each entry under a profile of its own
local names = {}
do
  local b = batches[1]
  local run = plan:start(b[1], b[2])
  local e, done = 0, false
  repeat
    e = e + 1
    local r = ember.profile(function() done = run:step(0) end)
    local ks = {}
    for k in pairs(r.ops) do ks[#ks + 1] = k end
    table.sort(ks)
    names[e] = #ks > 0 and table.concat(ks, "+") or "(in place)"
  until done
  run:result()
end
local entries, sum = {}, 0
for e = 1, n do
  local m = B.median(per[e]) * 1e6
  entries[e] = ("%s %.1f"):format(names[e], m)
  sum = sum + m
end
local ops, opsum = {}, 0
for name, o in pairs(report.ops) do
  ops[#ops + 1] = ("%s %.1f x%g"):format(name, o.seconds / steps * 1e6, o.calls / steps)
  opsum = opsum + o.seconds / steps * 1e6
end
table.sort(ops)
print(B.json({ bench = "jit_profile", threads = ember.get_num_threads(), step_us = whole * 1e6,
  step_us_updates_one_by_one = whole_nogroup * 1e6, grouped_vs_one_by_one = ratio, same_bits = same,
  entries_wall_us = table.concat(entries, "; "), entries_sum_us = sum,
  ops_us = table.concat(ops, "; "), ops_sum_us = opsum, gather_us = B.median(gather) * 1e6,
  openblas_core = B.blas_core(ember) }))
