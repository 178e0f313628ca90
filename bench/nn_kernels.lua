-- bench/nn_kernels.lua: the fused nn kernels against the compositions of
-- recorded ops they replace, timed in alternation (common.time_pair), ms
-- per call: layer norm at {32, 128, 768} forward and forward + backward.
-- Each case prints the kernel's ms, the composition's (baseline_ms) and
-- their ratio. bench/nn_kernels_torch.py times the same calls in PyTorch.
-- From the repository root:
--   luajit bench/nn_kernels.lua [reps]
package.path = "./bench/?.lua;" .. package.path
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

print(json.encode(out))
