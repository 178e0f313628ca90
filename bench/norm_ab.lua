-- bench/norm_ab.lua: ms per call of the cases of issue 33's sweep that
-- layer norm, softmax and cross-entropy run (bench/ops_sweep.lua's sizes,
-- each call in ember.tidy, its result freed at once), with CPU time
-- (os.clock, all threads counted; with EMBER_NUM_THREADS=1 the steadier
-- measure on a loaded machine) or, with --wall, wall time. Run it against another build in alternation
-- (EMBER_LIB=that/libember.so) to compare a change with its base. Prints
-- JSON: ms per call, the fastest of 3 batches of about 20 ms each.
-- From the repository root:
--   luajit bench/norm_ab.lua [--wall] [--only "softmax 256x1000,..."]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional
local GradManager = ember.autodiff.GradManager

local now, clock, wanted = B.ab_args(arg)

-- each call in a tidy that frees its result at once
local function ms_per_call(fn) return B.best_ms(B.in_tidy(ember, fn), now) end

-- a forward and the backward of its sum, gradients for x
local function with_backward(f, x)
  local gm = GradManager():attach({ x })
  return function()
    x.grad = nil
    gm:record()
    gm:backward(f(x):sum())
  end
end

ember.manual_seed(0)
local r = ember.randn
local s, ln = r({ 256, 1000 }), r({ 32, 128, 768 })
local lnw, lnb = r({ 768 }), r({ 768 })
local logits, labels = r({ 256, 1000 }), ember.randint(1, 1001, { 256 })
local cases = {
  { "softmax 256x1000", function() return s:softmax(2) end },
  { "log_softmax 256x1000", function() return s:log_softmax(2) end },
  { "softmax+backward 256x1000", with_backward(function(t) return t:softmax(2) end, r({ 256, 1000 })) },
  { "log_softmax+backward 256x1000", with_backward(function(t) return t:log_softmax(2) end, r({ 256, 1000 })) },
  { "softmax dim1 256x1000", function() return s:softmax(1) end },
  { "layer_norm 32x128x768", function() return F.layer_norm(ln, { 768 }) end },
  { "layer_norm+backward 32x128x768", with_backward(function(t) return F.layer_norm(t, { 768 }) end,
    r({ 32, 128, 768 })) },
  { "layer_norm affine+backward 32x128x768", (function()
    local x, w, b = r({ 32, 128, 768 }), lnw:clone(), lnb:clone()
    local gm = GradManager():attach({ x, w, b })
    return function()
      x.grad, w.grad, b.grad = nil, nil, nil
      gm:record()
      gm:backward(F.layer_norm(x, { 768 }, w, b):sum())
    end
  end)() },
  { "rms_norm 32x128x768", function() return F.rms_norm(ln, { 768 }, lnw) end },
  { "cross_entropy 256x1000", function() return F.cross_entropy(logits, labels) end },
  { "cross_entropy+backward 256x1000", with_backward(function(t) return F.cross_entropy(t, labels) end,
    r({ 256, 1000 })) },
}
B.ab_print("norm_ab", ember, cases, wanted, clock, ms_per_call)
