-- bench/op_cost.lua: a small op's cost outside its kernel, for counting
-- instructions per call with valgrind (load-independent, unlike wall-clock
-- time): `a + b` over 1e4 float32 elements, each add in its own ember.tidy
-- (as `ops_sweep.lua --tidy` runs it; mode "free": c:free() after each add
-- instead; mode "tiny": ((x * y) + x):sum() over 4 elements in a tidy).
-- 2000 warm-up calls, then N. Run it for two N and divide the difference of
-- the counts by the difference of the N:
--   valgrind --tool=callgrind luajit bench/op_cost.lua 2000 [tidy|free|tiny]
--   valgrind --tool=callgrind luajit bench/op_cost.lua 6000 [tidy|free|tiny]
-- (per call = (count(6000) - count(2000)) / 4000). Prints nothing.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local ember = require("ember")
local n = tonumber(arg and arg[1]) or 2000
local mode = arg and arg[2] or "tidy"
local a, b = ember.rand({ 10000 }), ember.rand({ 10000 })
local x, y = ember.rand({ 4 }), ember.rand({ 4 })
local function add() return a + b end
local function tiny() return ((x * y) + x):sum() end
local calls = {
  tidy = function(k) for _ = 1, k do ember.tidy(add) end end,
  free = function(k) for _ = 1, k do local c = a + b; c:free() end end,
  tiny = function(k) for _ = 1, k do ember.tidy(tiny) end end,
}
local run = calls[mode] or error("mode must be tidy, free or tiny, got " .. tostring(mode))
run(2000)
run(n)
