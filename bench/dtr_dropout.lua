-- Dropout's keep mask (docs/dtr.md): drawn straight into a bool tensor
-- (ember_dropout_mask_gen, what F.dropout calls) against the composition it
-- replaced, rand_like(x):ge(p) (a float draw of x's bytes, then the
-- comparison); ms per mask, best of rounds taken in alternating pairs, and
-- the peak bytes each adds above x while it runs.
--   luajit bench/dtr_dropout.lua [numel [rounds]]   -- default 524288 (2 MiB of float32), 9
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local ffi = require("ffi")
local C = ember._C

local n = tonumber(arg and arg[1]) or 524288
local rounds = tonumber(arg and arg[2]) or 9
local p = 0.1
local x = ember.randn({ n })
local out = ffi.new("ember_tensor*[1]")

local ways = {
  bool_kernel = function()
    assert(C.ember_dropout_mask_gen(nil, x._c, p, out) == 0)
    return ember._wrap(out[0])
  end,
  rand_ge = function() return ember.rand_like(x):ge(p) end,
}

local function settle() collectgarbage(); collectgarbage() end

local best, peak = {}, {}
for _ = 1, rounds do
  for _, name in ipairs({ "bool_kernel", "rand_ge" }) do   -- alternating
    settle()
    local base = ember.memory_stats().bytes_in_use
    ember.reset_peak_memory()
    local t0 = B.now()
    local m = ways[name]()
    local ms = (B.now() - t0) * 1e3
    peak[name] = ember.memory_stats().peak_bytes - base
    best[name] = math.min(best[name] or math.huge, ms)
    m = nil
  end
end
print(B.json({ bench = "dtr_dropout_mask", numel = n, p = p, threads = ember.get_num_threads(),
  bool_kernel_ms = best.bool_kernel, rand_ge_ms = best.rand_ge, bool_kernel_peak_bytes = peak.bool_kernel,
  rand_ge_peak_bytes = peak.rand_ge }))
