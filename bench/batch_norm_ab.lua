-- bench/batch_norm_ab.lua: batch_norm's training forward alone (the op,
-- F.batch_norm without running statistics, weight 1 and bias 0), CPU time
-- per call (os.clock: on a loaded machine, time the process waits for a core
-- is not counted), the fastest of 5 batches of 5 calls, each in ember.tidy.
-- Shapes: 32 x 64 x 56 x 56 NCHW (the per-channel kernels) and
-- channels_last (the column kernels), and a MobileNet's small planes at
-- batch 32: 96 x 16 x 16 and 144 x 8 x 8 (the per-channel kernels), 96 x 4 x 4
-- (the column kernels on NCHW). Run it with two builds in alternation
-- (EMBER_LIB=path/libember.so) to compare a change with its base. Prints
-- JSON: ms per call.
--   T=threads luajit bench/batch_norm_ab.lua      (T: default 2)
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional

ember.set_num_threads(tonumber(os.getenv("T") or 2))
ember.manual_seed(1)
local x = ember.randn({ 32, 64, 56, 56 })
local xc = x:contiguous({ memory_format = "channels_last" })
local w, b = ember.ones({ 64 }), ember.zeros({ 64 })
local train = { training = true }
local small = {}   -- name, x, w, b
for _, s in ipairs({ { 96, 16 }, { 144, 8 }, { 96, 4 } }) do
  small[#small + 1] = { ("c%d_%dx%d_ms"):format(s[1], s[2], s[2]), ember.randn({ 32, s[1], s[2], s[2] }),
    ember.ones({ s[1] }), ember.zeros({ s[1] }) }
end

-- CPU time per call, each call in a tidy that frees its result at once:
-- the fastest of 5 batches of about 20 ms
local function ms_per_call(fn) return B.best_ms(B.in_tidy(ember, fn), os.clock, 0.02, 5) end

local fields = {
  ('"bench": "batch_norm_ab", "threads": %d'):format(ember.get_num_threads()),
  ('"nchw_ms": %.4f'):format(ms_per_call(function() return F.batch_norm(x, nil, nil, w, b, train) end)),
  ('"channels_last_ms": %.4f'):format(ms_per_call(function() return F.batch_norm(xc, nil, nil, w, b, train) end)),
}
for _, c in ipairs(small) do
  local ms = ms_per_call(function() return F.batch_norm(c[2], nil, nil, c[3], c[4], train) end)
  fields[#fields + 1] = ('"%s": %.4f'):format(c[1], ms)
end
print("{" .. table.concat(fields, ", ") .. "}")
