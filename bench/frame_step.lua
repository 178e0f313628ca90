-- bench/frame_step.lua: what ember.frame.step's yield points cost. A loop of
-- tiny adds (4 elements) timed plainly and inside a run resumed with an
-- unbounded budget (a clock read per op), and the check every yield point
-- makes when no run is active, alone. Prints JSON, nanoseconds per op (best
-- of 7 runs of 200000).
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
print(('{"bench":"frame_step","tiny_add_ns":%.1f,"tiny_add_in_run_ns":%.1f,"inactive_check_ns":%.2f,'
  .. '"inactive_check_share":%.5f}'):format(plain, in_run, check, check / plain))
