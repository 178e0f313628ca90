-- The cost of the argument-count checks (errors.arity_checked) on small
-- calls: x:add(y) on 4 elements, F.linear and a Linear module on {1, 4}.
-- Prints JSON: seconds per million calls. Run from the repository root:
--   LUA_PATH="./lua/?.lua;./lua/?/init.lua;;" luajit bench/arity_overhead.lua
-- On a loaded machine the times vary by 2x from run to run; instruction
-- counts do not: under valgrind --tool=callgrind, (count at 220000 calls -
-- count at 20000) / 200000, against the tree before the checks (f23a22b),
-- 2026-11-27: x + y (4 elements, no wrapper) 2857 -> 2936 instructions,
-- x:add(y) 2868 -> 2995, F.linear on {1, 4} 8445 -> 8426, a Linear module's
-- call 13706 -> 14215. The small ops' part is mostly the Lua heap the
-- wrappers add (0.99 -> 1.29 MB after require; every collection ember forces
-- walks it); a first version, with a prototype and a cached parameter list
-- for each of the ~780 wrappers (1.41 MB), cost 3060 / 3224 / 8387.
local ember = require("ember")
local nn, F = ember.nn, ember.nn.functional
local x, y = ember.randn({ 4 }), ember.randn({ 4 })
local m = nn.Linear(4, 4)
local xb = ember.randn({ 1, 4 })
local function time(n, fn)
  fn() -- warm
  local t0 = os.clock()
  for _ = 1, n do fn() end
  return (os.clock() - t0) / n * 1e6
end
local N = 200000
local out = {
  add = time(N, function() return x:add(y) end),
  linear = time(N / 4, function() return F.linear(xb, m.weight, m.bias) end),
  module = time(N / 4, function() return m(xb) end),
}
print(('{"add_s_per_M": %.3f, "F_linear_s_per_M": %.3f, "Linear_module_s_per_M": %.3f}'):format(out.add,
  out.linear, out.module))
