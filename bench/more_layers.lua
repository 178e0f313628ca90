-- The composed layers of nn/activation.lua, pool.lua and conv3d.lua, each
-- forward + backward timed against the op it is measured by, in alternation
-- (common.time_pair): an activation against relu (one C op) on the same
-- float32 tensor; pooling with ceil_mode's extra window or
-- count_include_pad = false against the C kernel's plain pooling of the same
-- input; 3-D max pooling (the C kernel's planes, then the depth taps; with
-- indices, fully composed) against the 2-D pooling of its planes; conv3d
-- against conv2d with the same multiply-adds. Prints one JSON object: milliseconds per call and the ratios.
--   luajit bench/more_layers.lua [reps]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local json = require("ember.json")
local F = ember.nn.functional
local GradManager = ember.autodiff.GradManager

local reps = tonumber(arg and arg[1]) or 5
ember.manual_seed(0)

-- forward and backward of f(x) (and the parameters ps) summed against a fixed cotangent
local function step_of(f, x, ps)
  local cot
  return function(iters)
    for _ = 1, iters do
      local gm = GradManager()
      local all = { x }
      for _, p in ipairs(ps or {}) do all[#all + 1] = p end
      gm:attach(all)
      gm:record()
      local y = f(x)
      cot = cot or ember.randn(y:shape())
      gm:backward((y * cot):sum())
    end
  end
end

local results = { reps = reps, threads = ember.get_num_threads(), blas = B.blas_core(ember) }
local function pair(name, fa, fb, iters)
  local ta, tb, ratio = B.time_pair(fa, fb, iters, reps)
  results[name] = { ms = ta * 1e3, baseline_ms = tb * 1e3, ratio = ratio }
end

local x = ember.randn({ 64, 64, 32, 32 })   -- 4M floats
local relu = step_of(function(t) return t:relu() end, x)
for _, name in ipairs({ "leaky_relu", "elu", "hardswish", "softplus", "mish", "logsigmoid" }) do
  pair(name .. "_vs_relu", step_of(F[name], x), relu, 1)
end

local p = ember.randn({ 32, 32, 33, 33 })
pair("max_pool2d_ceil_vs_C", step_of(function(t) return F.max_pool2d(t, 2, 2, 0, 1, true) end, p),
  step_of(function(t) return F.max_pool2d(t, 2, 2) end, p), 1)
local p3 = ember.randn({ 8, 16, 16, 32, 32 })
pair("max_pool3d_k3_s2_p1_vs_2d_planes", step_of(function(t) return F.max_pool3d(t, 3, 2, 1) end, p3),
  step_of(function(t) return F.max_pool2d(t:view(8, 256, 32, 32), 3, 2, 1) end, p3), 1)
pair("max_pool3d_k3_s2_p1_indices_vs_2d_planes", step_of(function(t) return F.max_pool3d(t, 3, 2, 1, 1, false, true) end, p3),
  step_of(function(t) return F.max_pool2d(t:view(8, 256, 32, 32), 3, 2, 1) end, p3), 1)
pair("avg_pool2d_no_pad_count_vs_C", step_of(function(t) return F.avg_pool2d(t, 3, 2, 1, false, false) end, p),
  step_of(function(t) return F.avg_pool2d(t, 3, 2, 1) end, p), 1)

-- conv3d (N 4, C 16 -> 32, 16^3, k 3, padding 1) against conv2d over 4 * 16 planes with 3x the input channels
local x3, w3 = ember.randn({ 4, 16, 16, 16, 16 }), ember.randn({ 32, 16, 3, 3, 3 })
local x2, w2 = ember.randn({ 64, 48, 16, 16 }), ember.randn({ 32, 48, 3, 3 })
pair("conv3d_vs_conv2d_same_macs", step_of(function(t) return F.conv3d(t, w3, nil, 1, 1) end, x3, { w3 }),
  step_of(function(t) return F.conv2d(t, w2, nil, { padding = 1 }) end, x2, { w2 }), 1)

print(json.encode(results))
