-- The cost of the factories' argument checks (factories.lua: the shape
-- forms, the options' keys, the shape table's keys) on small calls:
-- ember.zeros({4}), ember.zeros(4), ember.zeros({4}, {dtype = "float64"})
-- and ember.tensor({1, 2}). Prints JSON: microseconds per call (os.clock).
-- Run from the repository root:
--   LUA_PATH="./lua/?.lua;./lua/?/init.lua;;" luajit bench/factory_overhead.lua [calls]
-- With a case name (zeros_table, zeros_sizes, zeros_opts, tensor) it only
-- makes that many calls of that case, for callgrind:
--   valgrind --tool=callgrind luajit bench/factory_overhead.lua 120000 zeros_table
-- Times on a loaded machine vary by 2x from run to run; instruction counts
-- do not: (count at 120000 calls - count at 20000) / 100000, against the
-- tree before the checks (1af781d), 2026-11-27, two runs each:
-- zeros({4}) 3508, 3494 -> 3635, 3605; zeros(4) 4038 -> 3562; zeros({4},
-- {dtype = "float64"}) 3601 -> 3865; tensor({1, 2}) 19508, 19379 -> 19960,
-- 19871 (the old ember.tensor in the new file: 20284, so the layout of the
-- module, not the one added test, moves that one). A loop over the keys of
-- the options (pairs, or while with next) made zeros({4}, opts) cost 9043
-- and a pairs loop over the shape table zeros({4}) 5469: each aborted the
-- JIT's trace on every call, hence the bounded walks in factories.lua.
local ember = require("ember")
local N = tonumber(arg and arg[1]) or 200000
local o64 = { dtype = "float64" }
local cases = {
  zeros_table = function() return ember.zeros({ 4 }) end,
  zeros_sizes = function() return ember.zeros(4) end,
  zeros_opts = function() return ember.zeros({ 4 }, o64) end,
  tensor = function() return ember.tensor({ 1, 2 }) end,
}
local only = arg and arg[2]
if only then
  local fn = assert(cases[only], "unknown case " .. only)
  for _ = 1, N do fn() end
  return
end
local function time(n, fn)
  for _ = 1, n / 10 do fn() end -- warm: past the JIT's trace attempts
  local t0 = os.clock()
  for _ = 1, n do fn() end
  return (os.clock() - t0) / n * 1e6
end
local out = {}
for _, name in ipairs({ "zeros_table", "zeros_sizes", "zeros_opts", "tensor" }) do out[name] = time(N, cases[name]) end
print(('{"calls": %d, "zeros_table_us": %.3f, "zeros_sizes_us": %.3f, "zeros_opts_us": %.3f, "tensor_us": %.3f}')
  :format(N, out.zeros_table, out.zeros_sizes, out.zeros_opts, out.tensor))
