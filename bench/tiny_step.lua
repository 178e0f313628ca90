-- bench/tiny_step.lua: the tiny step y = ((a*b)+a):sum() forward + backward
-- under a GradManager, for counting instructions and cache misses per step
-- with valgrind (load-independent, unlike wall-clock time): 2000 warm-up
-- steps, then N. Run it for two N and divide the difference of the counts by
-- the difference of the N:
--   valgrind --tool=cachegrind --cache-sim=yes luajit bench/tiny_step.lua 2000
--   valgrind --tool=cachegrind --cache-sim=yes luajit bench/tiny_step.lua 6000
-- (per step = (count(6000) - count(2000)) / 4000). Prints nothing.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local ember = require("ember")
local n = tonumber(arg and arg[1]) or 2000
local a, b = ember.rand({ 4 }), ember.rand({ 4 })
local gm = ember.autodiff.GradManager():attach({ a, b })
local function steps(k)
  for _ = 1, k do
    gm:record()
    gm:backward(((a * b) + a):sum())
  end
end
steps(2000)
steps(n)
