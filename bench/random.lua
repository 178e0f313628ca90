-- ns per element of ember.rand, ember.randn and F.dropout (float32) at 1e3,
-- 1e5 and 1e7 elements, on ember's threads. With EMBER_OLD_LIB set to another
-- build's libember.so (f5f2abb's, before the CPU's draws were vectorised),
-- the old and this build run in alternating rounds, each a process of its
-- own, and the JSON gives both and their ratio (old / new); with
-- EMBER_TORCH=1 it adds bench/random_torch.py (torch.rand, torch.randn,
-- F.dropout) in the same rounds. Run from the repository root:
--   EMBER_OLD_LIB=/path/to/old/libember.so EMBER_TORCH=1 luajit bench/random.lua [rounds]
-- (`luajit bench/random.lua --one` is one round of this process's build.)
local B = dofile("bench/common.lua")

local SIZES = { 1e3, 1e5, 1e7 }

local function one()
  local ember = require("ember")
  local F = ember.nn.functional
  local res = {}
  for _, n in ipairs(SIZES) do
    local x = ember.ones({ n })
    local iters = math.max(1, math.floor(3e6 / n))
    local ops = {
      rand = function() return ember.rand({ n }) end,
      randn = function() return ember.randn({ n }) end,
      dropout = function() return F.dropout(x, 0.1) end,
    }
    for name, f in pairs(ops) do
      f()
      res[("%s_%d"):format(name, n)] = B.time(function(k) for _ = 1, k do f() end end, iters, 5) / n * 1e9
    end
  end
  return res
end

if arg[1] == "--one" then
  print(B.json(one()))
  return
end

local function run(cmd)
  local p = io.popen(cmd)
  local s = p:read("*a")
  p:close()
  local t = {}
  for k, v in s:gmatch('"([%w_]+)": ([%d%.e%-+]+)') do t[k] = tonumber(v) end
  if not next(t) then error(cmd .. " printed no times: " .. s) end
  return t
end

local rounds = tonumber(arg[1]) or 3
local old, torch = os.getenv("EMBER_OLD_LIB"), os.getenv("EMBER_TORCH")
local samples = { new = {}, old = {}, torch = {} }
for _ = 1, rounds do
  samples.new[#samples.new + 1] = run("luajit bench/random.lua --one")
  if old then samples.old[#samples.old + 1] = run("EMBER_LIB=" .. old .. " luajit bench/random.lua --one") end
  if torch then samples.torch[#samples.torch + 1] = run("/usr/bin/python3 bench/random_torch.py") end
end
local out = {}
for which, list in pairs(samples) do
  if list[1] then
    for k in pairs(list[1]) do
      local v = {}
      for i, s in ipairs(list) do v[i] = s[k] end
      out[which .. "_ns_per_element_" .. k] = B.median(v)
    end
  end
end
if old then
  for k in pairs(samples.new[1]) do
    out["old_over_new_" .. k] = out["old_ns_per_element_" .. k] / out["new_ns_per_element_" .. k]
  end
end
local f = io.open("/proc/loadavg")
out.loadavg = f and f:read("*l") or "?"
if f then f:close() end
print(B.json(out))
