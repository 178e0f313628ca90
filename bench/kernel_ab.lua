-- bench/kernel_ab.lua: CPU time per call (os.clock, one thread with
-- EMBER_NUM_THREADS=1) of the kernels issue 33's one-thread sweep left above
-- PyTorch (gelu, max_pool2d 3x3 stride 2), each call in ember.tidy. Run it
-- from two checkouts in alternation to compare a change with its base on a
-- loaded machine. Prints JSON: ms per call, the fastest of 3 batches of
-- about 20 ms each. From the repository root: luajit bench/kernel_ab.lua
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional

-- CPU time per call, each call in a tidy that frees its result at once
local function ms_per_call(fn) return B.best_ms(B.in_tidy(ember, fn), os.clock) end

ember.manual_seed(1)
local x6, x4 = ember.randn({ 1000000 }), ember.randn({ 10000 })
local xg = ember.randn({ 1000000 })
local gm = ember.autodiff.GradManager():attach({ xg })
local function gelu_backward()
  xg.grad = nil
  gm:record()
  gm:backward(F.gelu(xg):sum())
end
local planes = ember.randn({ 32, 64, 56, 56 })
local cases = {
  { "gelu 1e6", function() return F.gelu(x6) end },
  { "gelu 1e4", function() return F.gelu(x4) end },
  { "gelu tanh 1e6", function() return F.gelu(x6, { approximate = "tanh" }) end },
  { "gelu+backward 1e6", gelu_backward },
  { "max_pool2d 3x3s2 32x64x56x56", function() return F.max_pool2d(planes, 3, 2) end },
}
local out = {}
for _, c in ipairs(cases) do
  out[#out + 1] = ('  {"case": "%s", "ms": %.4g}'):format(c[1], ms_per_call(c[2]))
end
print(('{"bench": "kernel_ab", "threads": %d, "clock": "cpu", "cases": [\n%s\n]}'):format(ember.get_num_threads(),
  table.concat(out, ",\n")))
