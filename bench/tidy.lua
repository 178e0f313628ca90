-- ember.tidy's cost and gain (docs/performance.md, "Memory"): CPU µs per
-- call, the minimum over rounds, of
--   add 1e4:  c = a + b over 1e4 float32 elements, the result dropped (the
--             GC gives it back), freed with c:free(), each add in its own
--             ember.tidy, and 100 adds in one ember.tidy;
--   relu 1e6: x:relu() over 1e6 float32 elements (4 MB results), dropped
--             and in a tidy, 100 calls a round;
--   tiny:     ((a * b) + a):sum() over 4 elements, plain and in a tidy, and
--             the same with backward (gm:record, gm:backward) as one step;
-- and PyTorch 1.13's same calls (bench/tidy_torch.py), run in alternating
-- rounds. Prints JSON, with the binding's GC counts (gc_steps, gc_sweeps,
-- gc_collections of ember.memory_stats) over the whole run.
-- luajit bench/tidy.lua [rounds]; another tree's ember (its lua/ beside its
-- build/): LUA_PATH="other/lua/?.lua;other/lua/?/init.lua;;" luajit bench/tidy.lua
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")

local rounds = tonumber(arg and arg[1]) or 7
local N = 3000
local a, b = ember.rand({ 10000 }), ember.rand({ 10000 })
local x, y = ember.rand({ 4 }), ember.rand({ 4 })
local big = ember.randn({ 1000000 })
local M = N / 30
local gx, gy = ember.rand({ 4 }), ember.rand({ 4 })
local gm = ember.autodiff.GradManager():attach({ gx, gy })

local function add_once() local _ = a + b end
local function add_100() for _ = 1, 100 do local _ = a + b end end
local function tiny() return ((x * y) + x):sum() end
local function tiny_step()
  gm:record()
  gm:backward(((gx * gy) + gx):sum())
end

local cases = {
  { "add 1e4, dropped", function() for _ = 1, N do local _ = a + b end end, N },
  { "add 1e4, c:free()", function() for _ = 1, N do local c = a + b; c:free() end end, N },
  { "add 1e4, one tidy each", function() for _ = 1, N do ember.tidy(add_once) end end, N },
  { "add 1e4, one tidy per 100", function() for _ = 1, N / 100 do ember.tidy(add_100) end end, N },
  { "relu 1e6, dropped", function() for _ = 1, M do local _ = big:relu() end end, M },
  { "relu 1e6, one tidy each", function() for _ = 1, M do ember.tidy(function() local _ = big:relu() end) end end, M },
  { "tiny, dropped", function() for _ = 1, N do tiny() end end, N },
  { "tiny, tidy", function() for _ = 1, N do ember.tidy(tiny) end end, N },
  { "tiny step with backward, dropped", function() for _ = 1, N do tiny_step() end end, N },
  { "tiny step with backward, tidy", function() for _ = 1, N do ember.tidy(tiny_step) end end, N },
}

local function torch_round()
  local p = io.popen("OMP_NUM_THREADS=" .. ember.get_num_threads() .. " /usr/bin/python3 bench/tidy_torch.py " .. N)
  local s = p:read("*a")
  p:close()
  local r = {}
  for k, v in s:gmatch('"([^"]+)": ([%d%.e%-]+)') do r[k] = tonumber(v) end
  return r
end

local best, torch_best = {}, {}
for _, c in ipairs(cases) do c[2]() end   -- warm up
for _ = 1, rounds do
  for _, c in ipairs(cases) do
    collectgarbage()
    local t0 = os.clock()
    c[2]()
    local us = (os.clock() - t0) / c[3] * 1e6
    best[c[1]] = math.min(best[c[1]] or math.huge, us)
  end
  for k, v in pairs(torch_round()) do torch_best[k] = math.min(torch_best[k] or math.huge, v) end
end

local f = io.popen("uptime"); local up = f:read("*l"); f:close()
local s = ember.memory_stats()
local out = { bench = "tidy", rounds = rounds, calls_per_round = N, load = up:match("load average: (.*)$"),
  ember_us = best, torch_us = torch_best, gc_steps = s.gc_steps, gc_sweeps = s.gc_sweeps,
  gc_collections = s.gc_collections }
print(require("ember.json").encode(out))
