-- bench/nn_kernels.lua: the fused nn kernels against the compositions of
-- recorded ops they replace, timed in alternation (common.time_pair), ms
-- per call: layer norm at {32, 128, 768} forward and forward + backward;
-- softmax's and log_softmax's backward alone (the adjoint op against the
-- four ops the rules composed) at {4096, 1024} along the last dim and at
-- {64, 256, 64} along the middle one; cross-entropy of {4096, 1000} logits
-- forward and forward + backward, plain and with label smoothing 0.1 and
-- ignore_index (the composition F.cross_entropy ran before as the baseline);
-- gelu's forward + backward at {4096, 1024}, both forms, the adjoint op
-- against the slope composed as the rule did before; max and average
-- pooling 3x3 stride 2 padding 1 of {32, 64, 56, 56}, forward and forward +
-- backward (ms only: time another build's with EMBER_LIB=path/libember.so).
-- Each case prints the kernel's ms, the composition's (baseline_ms) and
-- their ratio. bench/nn_kernels_torch.py times the same calls in PyTorch.
-- From the repository root:
--   luajit bench/nn_kernels.lua [reps]
package.path = "./bench/?.lua;./spec/support/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional
local GradManager = ember.autodiff.GradManager
local json = require("ember.json")

local reps = tonumber(arg and arg[1]) or 7
local out = { bench = "nn_kernels", reps = reps, threads = ember.get_num_threads() }
ember.manual_seed(0)

local function pair(name, fa, fb, iters)
  local function loop(f) return function(n) for _ = 1, n do f() end end end
  fa()
  fb()
  local ta, tb, ratio = B.time_pair(loop(fa), loop(fb), iters or 5, reps)
  out[name] = { ms = ta * 1e3, baseline_ms = tb * 1e3, ratio = ratio }
end

-- forward + backward of f over the tensors ps against a fixed cotangent
local function fwd_bwd(f, ps, cot)
  local gm = GradManager():attach(ps)
  return function()
    gm:record()
    gm:backward((f() * cot):sum())
    for _, p in ipairs(ps) do p.grad = nil end
  end
end

---------------------------------------------------------------- layer norm
local function ln_composed(x, w, b)
  local mean = x:mean(-1, true)
  local xc = x - mean
  return xc * ((xc * xc):mean(-1, true) + 1e-5):rsqrt() * w + b
end
local x = ember.randn({ 32, 128, 768 })
local w, b = ember.randn({ 768 }), ember.randn({ 768 })
local cot = ember.randn({ 32, 128, 768 })
pair("layer_norm_fwd", function() return F.layer_norm(x, 768, w, b) end, function() return ln_composed(x, w, b) end)
pair("layer_norm_fwd_bwd", fwd_bwd(function() return F.layer_norm(x, 768, w, b) end, { x, w, b }, cot),
  fwd_bwd(function() return ln_composed(x, w, b) end, { x, w, b }, cot))

---------------------------------------------------------------- softmax backward
local out1 = require("ffi").new("ember_tensor*[1]")
local C = ember._C
local function adjoint(log, g, y, dim)
  assert((log and C.ember_log_softmax_backward or C.ember_softmax_backward)(g._c, y._c, dim - 1, out1) == 0)
  return ember._wrap(out1[0])
end
local composed = require("composed").softmax_backward
for _, case in ipairs({ { "rows", { 4096, 1024 }, 2 }, { "mid", { 64, 256, 64 }, 2 } }) do
  local sx, sg = ember.randn(case[2]), ember.randn(case[2])
  for _, log in ipairs({ false, true }) do
    local y = log and sx:log_softmax(case[3]) or sx:softmax(case[3])
    pair((log and "log_softmax" or "softmax") .. "_bwd_" .. case[1], function() return adjoint(log, sg, y, case[3]) end,
      function() return composed(log, sg, y, case[3]) end)
  end
end

---------------------------------------------------------------- cross-entropy
-- the composition F.cross_entropy ran before: range checks through :item(),
-- log_softmax, gather, the smoothing's sum and the mean over the weights
local function ce_composed(lx, labels, o)
  local Cn = lx:size(2)
  local lab = labels:to("int64")
  local lo, hi = lab:min():item(), lab:max():item()
  local mask
  if o.ignore_index >= lo and o.ignore_index <= hi then
    mask = lab:ne(o.ignore_index)
    lab = ember.where(mask, lab, 1)
    lo, hi = lab:min():item(), lab:max():item()
  end
  assert(lo >= 1 and hi <= Cn)
  local w = mask and mask:to(lx.dtype)
  local logp = lx:log_softmax(2)
  local rows = -logp:gather(2, lab:view(-1, 1)):view(-1)
  if w then rows = rows * w end
  if o.label_smoothing > 0 then
    local smooth = -logp:sum(2)
    if w then smooth = smooth * w end
    rows = rows * (1 - o.label_smoothing) + smooth * (o.label_smoothing / Cn)
  end
  return w and rows:sum() / w:sum() or rows:mean()
end
local lx = ember.randn({ 4096, 1000 })
local labels = ember.randint(1, 1001, { 4096 }, { dtype = "int64" })
local one = ember.tensor(1)
for _, case in ipairs({ { "", { ignore_index = -100, label_smoothing = 0 } },
  { "_smooth_ignore", { ignore_index = 7, label_smoothing = 0.1 } } }) do
  local o = case[2]
  pair("cross_entropy_fwd" .. case[1], function() return F.cross_entropy(lx, labels, o) end,
    function() return ce_composed(lx, labels, o) end)
  pair("cross_entropy_fwd_bwd" .. case[1], fwd_bwd(function() return F.cross_entropy(lx, labels, o) end, { lx }, one),
    fwd_bwd(function() return ce_composed(lx, labels, o) end, { lx }, one))
end

---------------------------------------------------------------- gelu
-- gelu with the backward the rule composed before, as a Function
local slope = require("composed").gelu_slope
local gx = ember.randn({ 4096, 1024 })
local gcot = ember.randn({ 4096, 1024 })
for _, form in ipairs({ "none", "tanh" }) do
  local o = { approximate = form }
  local composed = ember.autodiff.Function("gelu_composed", function(a)
    return a:gelu(o), function(g) return g * slope(a, form == "tanh") end
  end)
  pair("gelu_" .. form .. "_fwd_bwd", fwd_bwd(function() return gx:gelu(o) end, { gx }, gcot),
    fwd_bwd(function() return composed(gx) end, { gx }, gcot))
end

---------------------------------------------------------------- pooling
local function alone(name, f, iters)
  local function loop(n) for _ = 1, n do f() end end
  f()
  out[name] = { ms = B.time(loop, iters or 3, reps) * 1e3 }
end
local px = ember.randn({ 32, 64, 56, 56 })
local pcot = ember.randn({ 32, 64, 28, 28 })
alone("max_pool2d_3x3s2_fwd", function() return F.max_pool2d(px, 3, 2, 1) end)
alone("max_pool2d_3x3s2_fwd_bwd", fwd_bwd(function() return F.max_pool2d(px, 3, 2, 1) end, { px }, pcot))
alone("avg_pool2d_3x3s2_fwd", function() return F.avg_pool2d(px, 3, 2, 1) end)
alone("avg_pool2d_3x3s2_fwd_bwd", fwd_bwd(function() return F.avg_pool2d(px, 3, 2, 1) end, { px }, pcot))

print(json.encode(out))
