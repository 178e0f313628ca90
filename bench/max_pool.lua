-- bench/max_pool.lua: max_pool2d on {32, 64, 56, 56} float32, forward only
-- (no positions wanted), forward with positions (return_indices, what a
-- recording keeps), both layouts, and forward+backward of the sum; each
-- call in ember.tidy, the fastest of 5 batches of calls sized to 50 ms after
-- a warm-up. Prints JSON: ms per call per case. Compare two builds in
-- alternation by running it from each tree (docs/performance.md).
--   luajit bench/max_pool.lua [--cpu]     (--cpu: CPU time of all threads, not wall time)
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional

local cpu = arg[1] == "--cpu"
if arg[1] and not cpu then error("unknown argument " .. arg[1] .. " (expected --cpu)") end
local now = cpu and os.clock or B.now

-- each call in a tidy that frees its result at once
local function ms_per_call(fn) return B.best_ms(B.in_tidy(ember, fn), now, 0.05, 5) end

ember.manual_seed(1)
local x = ember.randn({ 32, 64, 56, 56 })
local xcl = x:contiguous({ memory_format = "channels_last" })
local gm = ember.autodiff.GradManager():attach({ x })
local cases = {
  { "3x3s2", function() return F.max_pool2d(x, 3, 2) end },
  { "3x3s2 indices", function() return F.max_pool2d(x, 3, 2, 0, 1, false, true) end },
  { "3x3s2p1", function() return F.max_pool2d(x, 3, 2, 1) end },
  { "2x2", function() return F.max_pool2d(x, 2) end },
  { "2x2 indices", function() return F.max_pool2d(x, 2, 2, 0, 1, false, true) end },
  { "3x3s2 channels_last", function() return F.max_pool2d(xcl, 3, 2) end },
  { "3x3s2+backward", function()
    x.grad = nil
    gm:record()
    gm:backward(F.max_pool2d(x, 3, 2):sum())
  end },
}
local out = {}
for _, c in ipairs(cases) do
  out[#out + 1] = ('  {"case": "max_pool2d %s", "ms": %.4g}'):format(c[1], ms_per_call(c[2]))
end
print(('{"bench": "max_pool", "threads": %d, "clock": "%s", "cases": [\n%s\n]}'):format(
  ember.get_num_threads(), cpu and "cpu" or "wall", table.concat(out, ",\n")))
