-- bench/hugepages.lua: large blocks on 2 MiB huge pages (EMBER_HUGEPAGES=1,
-- the default where Linux's transparent huge pages serve) against 4 KiB pages
-- (EMBER_HUGEPAGES=0), in alternating child processes (the switch is read
-- once per process), on one thread, CPU time. Cases: index_select of 4096
-- random 1 KiB rows from tables of 4 to 32 MiB (the TLB-bound case; the
-- 4 MiB table is under the 8 MiB threshold, a control), an add
-- and a row-broadcast add of 2048x2048, a sum of 4096x1024. Prints JSON: per
-- case the medians over the rounds of ms per call with huge pages and
-- without, and of the per-round ratio huge / 4 KiB (below 1: huge pages faster).
--   luajit bench/hugepages.lua [rounds]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")

local cases = {}
local order = {}
local function case(name, fn)
  cases[name] = fn
  order[#order + 1] = name
end

if os.getenv("HUGEPAGES_BENCH_CHILD") then
  local ember = require("ember")
  ember.set_num_threads(1)
  ember.manual_seed(0)
  for _, mib in ipairs({ 4, 8, 16, 32 }) do
    local w = ember.randn({ mib * 1024 - 64, 256 })   -- in the class of mib MiB
    local idx = ember.randint(0, mib * 1024 - 64, { 4096 })
    case(("index_select 4096 of %d MiB"):format(mib), function() return w:index_select(1, idx) end)
  end
  local a, b, row = ember.randn({ 2048, 2048 }), ember.randn({ 2048, 2048 }), ember.randn({ 2048 })
  case("add 2048x2048", function() return a + b end)
  case("add row-broadcast 2048x2048", function() return a + row end)
  local m = ember.randn({ 4096, 1024 })
  case("sum 4096x1024", function() return m:sum() end)
  for _, name in ipairs(order) do
    io.write(("%s=%.6g\n"):format(name, B.best_ms(B.in_tidy(ember, cases[name]), os.clock, 0.05, 5)))
  end
  io.write(("huge_bytes=%d\n"):format(ember.memory_stats().huge_bytes))
  return
end

local rounds = tonumber(arg and arg[1] or 3) or error("usage: luajit bench/hugepages.lua [rounds]")
local function child(on)
  local p = assert(io.popen(("HUGEPAGES_BENCH_CHILD=1 EMBER_NUM_THREADS=1 EMBER_HUGEPAGES=%d luajit bench/hugepages.lua"):format(on)))
  local s = p:read("*a")
  p:close()
  local t = {}
  for k, v in s:gmatch("([^\n=]+)=([^\n]+)") do t[k] = tonumber(v) end
  assert(t.huge_bytes, "the child printed: " .. s)
  return t
end
local on, off, ratio, names = {}, {}, {}, nil
for rd = 1, rounds do
  local t1, t0
  if rd % 2 == 1 then t1 = child(1); t0 = child(0) else t0 = child(0); t1 = child(1) end
  assert(t0.huge_bytes == 0, "EMBER_HUGEPAGES=0 still used huge pages")
  if not names then
    names = {}
    for k in pairs(t1) do if k ~= "huge_bytes" then names[#names + 1] = k end end
    table.sort(names)
  end
  for _, k in ipairs(names) do
    on[k], off[k], ratio[k] = on[k] or {}, off[k] or {}, ratio[k] or {}
    on[k][rd], off[k][rd], ratio[k][rd] = t1[k], t0[k], t1[k] / t0[k]
  end
  io.stderr:write(("round %d of %d (huge_bytes %d)\n"):format(rd, rounds, t1.huge_bytes))
end
local f = io.open("/proc/loadavg")
local load = f and f:read("*l"):match("^(%S+)") or "?"
if f then f:close() end
local out = { ('{"bench": "hugepages", "rounds": %d, "clock": "cpu", "threads": 1, "load": "%s", "cases": ['):format(rounds, load) }
for i, k in ipairs(names) do
  out[#out + 1] = ('%s\n  {"case": "%s", "huge_ms": %.4g, "small_pages_ms": %.4g, "ratio": %.3f}'):format(
    i > 1 and "," or "", k, B.median(on[k]), B.median(off[k]), B.median(ratio[k]))
end
out[#out + 1] = "\n]}"
print(table.concat(out))
