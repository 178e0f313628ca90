-- bench/elem_ab.lua: ms per call of the memory-bound elementwise and
-- reduction cases of bench/ops_sweep.lua that stood at or above PyTorch
-- (issue 33), each call in ember.tidy (its result freed at once, as in
-- `ops_sweep.lua --tidy`). CPU time (os.clock, every thread counted) unless
-- --wall. Run it on two builds in alternation (EMBER_LIB=<other>/libember.so
-- for the other) to compare a change with its base on a loaded machine.
-- Prints JSON: per case the fastest of 3 batches of about 20 ms each.
-- From the repository root:
--   luajit bench/elem_ab.lua [--wall] [--only "add 2048x2048,sigmoid 1e6"]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")

local now, clock, wanted = B.ab_args(arg)
local function ms_per_call(fn) return B.best_ms(B.in_tidy(ember, fn), now) end

ember.manual_seed(0)
local r = ember.randn
local a, b, row = r({ 2048, 2048 }), r({ 2048, 2048 }), r({ 2048 })
local u, v = r({ 1000000 }), r({ 1000000 })
local x = r({ 1000000 })
local m = r({ 4096, 1024 })
local xr = r({ 1000000 })
local gm = ember.autodiff.GradManager():attach({ xr })
local cases = {
  { "add 2048x2048", function() return a + b end },
  { "add row-broadcast 2048x2048", function() return a + row end },
  { "add transposed 2048x2048", function() return a:t() + b:t() end },
  { "mul 1e6", function() return u * v end },
  { "sigmoid 1e6", function() return x:sigmoid() end },
  { "relu 1e6", function() return x:relu() end },
  { "relu+backward 1e6", function()
    xr.grad = nil
    gm:record()
    gm:backward(xr:relu():sum())
  end },
  { "sum all 4096x1024", function() return m:sum() end },
  { "sum dim2 4096x1024", function() return m:sum(2) end },
}
B.ab_print("elem_ab", ember, cases, wanted, clock, ms_per_call)
