-- bench/elementwise_kernels.lua: the CPU's elementwise kernels (binary ops on
-- float32, float64 and the integers, contiguous, broadcast, with a scalar,
-- tiny; the generic float16 and bool path; gelu and clamp) and the fused
-- Adam, SGD and LSTM steps, on one thread, as seconds per call.
--   luajit bench/elementwise_kernels.lua
--     this checkout's libember: one JSON object, case -> seconds per call
--   luajit bench/elementwise_kernels.lua BEFORE.so AFTER.so [rounds [only]]
--     two builds compared: runs of this script with EMBER_LIB set to each, in
--     alternating pairs (BEFORE then AFTER, then AFTER then BEFORE, ...) so
--     that a noisy neighbour, or a trend in the load, slows both alike; per
--     case the median seconds of each and the median of the per-round
--     ratios AFTER / BEFORE (below 1: AFTER is faster), as JSON.
--     `only` (or $EMBER_BENCH_ONLY), words separated by commas, keeps the
--     cases whose names contain one of them.
-- Run from the repository root.
package.path = "./bench/?.lua;" .. package.path
local B = require("common")

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function json_object(keys, value_of)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = ("  %q: %s"):format(k, value_of(k)) end
  return "{\n" .. table.concat(parts, ",\n") .. "\n}"
end

if arg[1] then   -- compare two libraries
  local before, after, rounds, only = arg[1], arg[2], tonumber(arg[3] or 5), arg[4]
  assert(after, "usage: luajit bench/elementwise_kernels.lua [BEFORE.so AFTER.so [rounds]]")
  local function run(lib)
    local h = assert(io.popen("EMBER_LIB=" .. quote(lib) .. (only and " EMBER_BENCH_ONLY=" .. quote(only) or "")
      .. " luajit bench/elementwise_kernels.lua"))
    local out = h:read("*a")
    h:close()
    local t, keys = {}, {}
    for k, v in out:gmatch('"([^"]+)": ([%d%.eE%-]+)') do
      t[k] = tonumber(v)
      keys[#keys + 1] = k
    end
    assert(#keys > 0, "no timings from " .. lib .. ": " .. out)
    return t, keys
  end
  local tb, ta, ratio, keys = {}, {}, {}, nil
  for r = 1, rounds do
    local a, b, k
    if r % 2 == 1 then
      b, k = run(before)
      a = run(after)
    else
      a, k = run(after)
      b = run(before)
    end
    keys = keys or k
    for _, name in ipairs(keys) do
      tb[name], ta[name], ratio[name] = tb[name] or {}, ta[name] or {}, ratio[name] or {}
      tb[name][r], ta[name][r], ratio[name][r] = b[name], a[name], a[name] / b[name]
    end
  end
  print(json_object(keys, function(k)
    return ('{"before": %.4g, "after": %.4g, "ratio": %.3f}'):format(B.median(tb[k]), B.median(ta[k]),
      B.median(ratio[k]))
  end))
  return
end

local ember = require("ember")
local F = ember.nn.functional
local C = ember._C
ember.set_num_threads(1)
ember.manual_seed(1)

local N = 1000000
local cases, order = {}, {}
local only = os.getenv("EMBER_BENCH_ONLY")
local function wanted(name)
  if not only then return true end
  for word in only:gmatch("[^,]+") do
    if name:find(word, 1, true) then return true end
  end
  return false
end
local function case(name, fn)
  if not wanted(name) then return end
  cases[name] = fn
  order[#order + 1] = name
end

local x32, y32 = ember.randn({ 1000, 1000 }), ember.randn({ 1000, 1000 }) + 3
local x64, y64 = x32:to("float64"), y32:to("float64")
local i32, j32 = (x32 * 100):to("int32"), (y32 * 100):to("int32")
local i64, j64 = i32:to("int64"), j32:to("int64")
local row32, col32, s32 = ember.randn({ 1000 }), ember.randn({ 1000, 1 }), ember.tensor(1.5)
local rowi = (row32 * 100):to("int32")
local e32 = x32:abs() + 0.5
local t32 = x32:t()
local tiny_a, tiny_b = ember.randn({ 64 }), ember.randn({ 64 })
local h16, g16 = x32:to("float16"), y32:to("float16")
local b8, c8 = x32:gt(0), y32:gt(3)

for _, op in ipairs({ "add", "mul", "div", "maximum", "lt" }) do
  case(op .. " float32", function() return ember[op](x32, y32) end)
  case(op .. " float64", function() return ember[op](x64, y64) end)
end
case("pow float32 (x^2.5)", function() return ember.pow(e32, 2.5) end)
case("pow float32 (x^2)", function() return ember.pow(x32, 2) end)
for _, op in ipairs({ "add", "mul", "maximum", "eq" }) do
  case(op .. " int32", function() return ember[op](i32, j32) end)
end
case("add int64", function() return ember.add(i64, j64) end)
case("pow int32 (x^3)", function() return ember.pow(i32, 3) end)
case("add float32 broadcast row", function() return ember.add(x32, row32) end)
case("add float32 broadcast outer", function() return ember.add(col32, row32) end)
case("mul float32 scalar", function() return ember.mul(x32, s32) end)
case("add float32 transposed", function() return ember.add(t32, y32) end)
case("add int32 broadcast row", function() return ember.add(i32, rowi) end)
case("add float32 64 elements", function() return ember.add(tiny_a, tiny_b) end)
case("add float16", function() return ember.add(h16, g16) end)
case("add bool", function() return ember.add(b8, c8) end)
case("gelu float32", function() return F.gelu(x32) end)
case("clamp float32", function() return x32:clamp(-0.5, 0.5) end)

-- the fused steps on 1M parameters
local p, g = ember.randn({ N }), ember.randn({ N })
local m, v, buf = ember.zeros({ N }), ember.zeros({ N }), ember.zeros({ N })
local p64, g64, m64, v64 = p:to("float64"), g:to("float64"), m:to("float64"), v:to("float64")
local function ok(rc) assert(rc >= 0, "fused step failed") end
case("adam step float32", function()
  ok(C.ember_adam_step_(p._c, g._c, m._c, v._c, nil, 1e-3, 0.9, 0.999, 1e-8, 0, 0, 0, 10))
end)
case("adamw step float64", function()
  ok(C.ember_adam_step_(p64._c, g64._c, m64._c, v64._c, nil, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 0, 10))
end)
case("sgd momentum step float32", function()
  ok(C.ember_sgd_step_(p._c, g._c, buf._c, 1e-3, 0.9, 0, 0, 0, 0, 0))
end)
local gi, gh, st = ember.randn({ 256, 4 * 256 }), ember.randn({ 256, 4 * 256 }), ember.randn({ 256, 256 })
case("lstm cell float32 (256 x 256)", function() return F.lstm_cell(gi, gh, st) end)

local result = {}
for _, name in ipairs(order) do
  local fn = cases[name]
  fn()
  local t0 = B.now()
  local iters = 0
  repeat   -- about 20 ms a repetition
    fn()
    iters = iters + 1
  until B.now() - t0 > 0.02 or iters >= 10000
  collectgarbage()
  result[name] = B.time(function(n) for _ = 1, n do fn() end collectgarbage("step") end, iters, 5)
end
print(json_object(order, function(k) return ("%.4g"):format(result[k]) end))
