-- bench/mlp_step.lua: one training step of the MLP recipe (784-256-128-10,
-- batch 128, forward + backward of the cross-entropy, no optimizer), timed in
-- alternating rounds in one process against the same step with
--   - each Linear's bias and ReLU written out (F.linear, then relu) instead of
--     nn.Sequential's fused F.linear_relu, and
--   - every matrix product on OpenBLAS (ember.set_dnnl_matmul_enabled(false)).
-- Prints JSON: microseconds per step and the medians of the per-round ratios.
--   luajit bench/mlp_step.lua [threads]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local nn, F = ember.nn, ember.nn.functional

ember.set_num_threads(tonumber(arg and arg[1]) or ember.get_num_threads())
ember.manual_seed(0)
local model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
  nn.Linear(128, 10))
local l1, l2, l3 = model:get(2), model:get(4), model:get(6)
local function written_out(x)
  x = F.linear(x:flatten(2), l1.weight, l1.bias):relu()
  x = F.linear(x, l2.weight, l2.bias):relu()
  return F.linear(x, l3.weight, l3.bias)
end
local params = model:parameters()
local gm = ember.autodiff.GradManager():attach(params)
local x, y = ember.rand({ 128, 1, 28, 28 }), ember.randint(1, 11, { 128 })

-- n steps of forward f, with oneDNN's products on or off
local function steps(f, dnnl)
  return function(n)
    ember.set_dnnl_matmul_enabled(dnnl)
    for _ = 1, n do
      gm:record()
      gm:backward(F.cross_entropy(f(x), y))
      for _, p in ipairs(params) do p.grad = nil end
    end
  end
end

local out = {}
local t, tw, r = B.time_pair(steps(model, true), steps(written_out, true), 20, 9)
out.step_us, out.written_out_us, out.fused_vs_written_out = t * 1e6, tw * 1e6, r
local _, tb, rb = B.time_pair(steps(model, true), steps(model, false), 20, 9)
out.openblas_only_us, out.dnnl_vs_openblas = tb * 1e6, rb
out.threads = ember.get_num_threads()
out.openblas_core = B.blas_core(ember)
out.dnnl = ember.dnnl_info()
print(B.json(out))
