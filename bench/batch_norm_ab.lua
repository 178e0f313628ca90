-- bench/batch_norm_ab.lua: batch_norm's training forward alone (the op,
-- F.batch_norm without running statistics, weight 1 and bias 0), CPU time
-- per call (os.clock: on a loaded machine, time the process waits for a core
-- is not counted), the fastest of 5 batches of 5 calls, each in ember.tidy.
-- Shapes: 32 x 64 x 56 x 56 NCHW (the per-channel kernels) and
-- channels_last (the column kernels), and 256 x 96 x 4 x 4 (a MobileNet's
-- small planes: the column kernels on NCHW). Run it from two checkouts in
-- alternation to compare a change with its base. Prints JSON: ms per call.
--   T=threads luajit bench/batch_norm_ab.lua      (T: default 2)
package.path = "./bench/?.lua;" .. package.path
require("common")
local ember = require("ember")
local F = ember.nn.functional

ember.set_num_threads(tonumber(os.getenv("T") or 2))
ember.manual_seed(1)
local x = ember.randn({ 32, 64, 56, 56 })
local xc = x:contiguous({ memory_format = "channels_last" })
local xs = ember.randn({ 256, 96, 4, 4 })
local w, b = ember.ones({ 64 }), ember.zeros({ 64 })
local w96, b96 = ember.ones({ 96 }), ember.zeros({ 96 })
local train = { training = true }

local function ms_per_call(fn)
  local call = function() ember.tidy(fn) end
  for _ = 1, 2 do call() end
  local best = math.huge
  for _ = 1, 5 do
    local t0 = os.clock()
    for _ = 1, 5 do call() end
    best = math.min(best, (os.clock() - t0) / 5)
  end
  return best * 1e3
end

print(('{"bench": "batch_norm_ab", "threads": %d, "nchw_ms": %.3f, "channels_last_ms": %.3f, "small4x4_ms": %.3f}')
  :format(ember.get_num_threads(),
    ms_per_call(function() return F.batch_norm(x, nil, nil, w, b, train) end),
    ms_per_call(function() return F.batch_norm(xc, nil, nil, w, b, train) end),
    ms_per_call(function() return F.batch_norm(xs, nil, nil, w96, b96, train) end)))
