-- The cost of the checks issue 27 put on hot calls: a reduction's keepdim
-- flag (errors.boolean), F.relu's and F.softmax's tensor check, and the
-- plain x:add(y) and Linear call for reference; small tensors, so the checks
-- show. Prints JSON: microseconds per call. Run from the repository root:
--   LUA_PATH="./lua/?.lua;./lua/?/init.lua;;" luajit bench/call_checks.lua [calls [name]]
-- On a loaded machine times vary by 2x between runs; instruction counts do
-- not: run one name under valgrind --tool=callgrind at two call counts and
-- take (count at the larger - count at the smaller) / (the difference in
-- calls). 2026-11-27, loaded 2-core machine, callgrind, 2000 and 12000
-- calls, against the tree before issue 27's checks (3206899): x:sum(2, true)
-- 6534 -> 6395 instructions, F.relu 5351 -> 5427, F.softmax 6318 and 6509 ->
-- 6763 and 6336 (two runs each), x:add(y) 5478 -> 5520, a Linear module's
-- call 16572 -> 16287: within the spread between runs (about 200).
local ember = require("ember")
local F = ember.nn.functional
local n = tonumber(arg and arg[1]) or 200000
local x, y = ember.randn({ 4, 4 }), ember.randn({ 4, 4 })
local m = ember.nn.Linear(4, 4)
local function time(fn)
  fn()   -- warm
  local t0 = os.clock()
  for _ = 1, n do fn() end
  return (os.clock() - t0) / n * 1e6
end
local calls = {
  sum_keepdim = function() return x:sum(2, true) end,
  relu = function() return F.relu(x) end,
  softmax = function() return F.softmax(x, 2) end,
  add = function() return x:add(y) end,
  linear_module = function() return m(x) end,
}
local only = arg and arg[2]
local keys, parts = { "sum_keepdim", "relu", "softmax", "add", "linear_module" }, {}
for _, k in ipairs(keys) do
  if not only or only == k then parts[#parts + 1] = ('"%s_us": %.3f'):format(k, time(calls[k])) end
end
print("{" .. table.concat(parts, ", ") .. ', "calls": ' .. n .. "}")
