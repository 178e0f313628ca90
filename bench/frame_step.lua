-- bench/frame_step.lua: what ember.frame.step's yield points cost. A loop of
-- tiny adds (4 elements) timed plainly and inside a run resumed with an
-- unbounded budget (a clock read per op), and the check every yield point
-- makes when no run is active, alone (nanoseconds per op, best of 7 runs of
-- 200000). Then the MLP recipe's training step (784-256-128-10, batch 128,
-- Adam) in slices of 0.25 ms and 1 ms: slices per step and the slices'
-- median and longest ms, over 20 steps. Prints JSON.
--   luajit bench/frame_step.lua
package.path = "./bench/?.lua;./lua/?.lua;./lua/?/init.lua;" .. package.path
local ember = require("ember")

local a, b = ember.ones({ 4 }), ember.ones({ 4 })
local N = 200000
local function loop() for _ = 1, N do local _ = a + b end end
local function best_ns(f)
  local best = math.huge
  for _ = 1, 7 do
    local t0 = ember.clock()
    f()
    best = math.min(best, ember.clock() - t0)
  end
  return best / N * 1e9
end
loop()
local plain = best_ns(loop)
local in_run = best_ns(function() assert(ember.frame.step(loop):resume(math.huge)) end)
local slicer = ember._slicer   -- the check as the ops make it
local check = best_ns(function() for _ = 1, N do if slicer.active then slicer.point() end end end)

local nn = ember.nn
local B = require("common")
ember.manual_seed(0)
local model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
local opt = ember.optim.Adam(model:parameters(), { lr = 1e-3 })
local gm = ember.autodiff.GradManager():attach(model:parameters())
local x, y = ember.randn({ 128, 784 }), ember.randint(1, 11, { 128 })
local step = B.classifier_step(ember, model, opt, gm, x, y)
for _ = 1, 3 do step() end
local t0 = ember.clock()
for _ = 1, 20 do step() end
local one_call_ms = (ember.clock() - t0) / 20 * 1e3
local sliced = {}
for _, budget in ipairs({ 0.00025, 0.001 }) do
  local times, slices = {}, 0
  for _ = 1, 20 do
    local run = ember.frame.step(step)
    repeat
      local s0 = ember.clock()
      local done = run:resume(budget)
      times[#times + 1] = (ember.clock() - s0) * 1e3
      slices = slices + 1
    until done
  end
  table.sort(times)
  sliced[#sliced + 1] = ('{"budget_ms":%g,"slices_per_step":%.1f,"median_ms":%.3f,"longest_ms":%.3f}')
    :format(budget * 1e3, slices / 20, times[math.floor((#times + 1) / 2)], times[#times])
end
print(('{"bench":"frame_step","tiny_add_ns":%.1f,"tiny_add_in_run_ns":%.1f,"inactive_check_ns":%.2f,'
  .. '"inactive_check_share":%.5f,"mlp_step_one_call_ms":%.3f,"mlp_step_sliced":[%s]}')
  :format(plain, in_run, check, check / plain, one_call_ms, table.concat(sliced, ",")))
