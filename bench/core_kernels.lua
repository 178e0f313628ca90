-- bench/core_kernels.lua: milliseconds per call (median of rounds) of the CPU
-- kernels whose code was moved or restructured: matrix products, conv2d
-- forward + backward (oneDNN's and conv.c's im2col path), pooling, batch
-- norm, the dim-reductions and softmax. Compares two builds run in alternation:
--   for i in 1 2 3; do
--     EMBER_LIB=/path/to/old/libember.so luajit bench/core_kernels.lua > old.$i.json
--     luajit bench/core_kernels.lua > new.$i.json
--   done
-- Arguments: [group] [reps]; group is all (default), gemm, conv, conv_pool, pool, norm or reduce.
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional

local group = arg and arg[1] or "all"
local reps = tonumber(arg and arg[2]) or 9
ember.manual_seed(0)
local res = {}

local function bench(name, fn, iters) res[name] = B.ms_per_call(fn, iters, reps) end

-- forward and backward of f(inputs...) with a GradManager, as a training step does
local function fwd_bwd(f, inputs)
  local gm = ember.autodiff.GradManager()
  gm:attach(inputs)
  local g
  return function()
    gm:record()
    local y = f(unpack(inputs))
    g = g or ember.ones(y:shape(), { dtype = y.dtype })
    gm:backward((y * g):sum())
    gm:release()
    for _, t in ipairs(inputs) do t.grad = nil end
  end
end

local function want(g) return group == "all" or group == g end

if want("gemm") then
  for _, s in ipairs({ { 64, 1568, 10 }, { 64, 784, 128 }, { 256, 256, 256 }, { 512, 512, 512 }, { 1000, 256, 10 } }) do
    local a, b = ember.randn({ s[1], s[2] }), ember.randn({ s[2], s[3] })
    bench("matmul_" .. table.concat(s, "x"), function() return a:matmul(b) end, 20)
  end
  local a, b = ember.randn({ 256, 256 }, { dtype = "float64" }), ember.randn({ 256, 256 }, { dtype = "float64" })
  bench("matmul_f64_256", function() return a:matmul(b) end, 20)
end

if want("conv") then
  local x, w, b = ember.randn({ 64, 16, 14, 14 }), ember.randn({ 32, 16, 5, 5 }), ember.randn({ 32 })
  local conv = function(x_, w_, b_) return F.conv2d(x_, w_, b_, { padding = 2 }) end
  for _, dnnl in ipairs({ true, false }) do
    ember.set_dnnl_enabled(dnnl)
    bench("conv_fwd_bwd_" .. (dnnl and "dnnl" or "im2col"), fwd_bwd(conv, { x, w, b }), 5)
  end
  ember.set_dnnl_enabled(true)
  local xd, wd, bd = x:to("float64"), w:to("float64"), b:to("float64")
  bench("conv_fwd_bwd_f64", fwd_bwd(conv, { xd, wd, bd }), 3)
end

if want("pool") or want("conv_pool") then
  -- conv2d_relu_max_pool2d's forward: oneDNN's convolution, then conv_dnnl.c's pooling
  local xr, wr, br = ember.randn({ 64, 16, 28, 28 }), ember.randn({ 32, 16, 3, 3 }), ember.randn({ 32 })
  bench("conv_relu_pool_fwd", function() return F.conv2d_relu_max_pool2d(xr, wr, br, { padding = 1 }, 2) end, 10)
end

if want("pool") then
  local x = ember.randn({ 64, 32, 28, 28 })
  for _, dnnl in ipairs({ true, false }) do
    ember.set_dnnl_enabled(dnnl)
    local tag = dnnl and "dnnl" or "plain"
    bench("max_pool2_fwd_bwd_" .. tag, fwd_bwd(function(t) return F.max_pool2d(t, 2) end, { x }), 10)
    bench("avg_pool3s2_fwd_bwd_" .. tag,
      fwd_bwd(function(t) return F.avg_pool2d(t, 3, { stride = 2, padding = 1 }) end, { x }), 10)
  end
  ember.set_dnnl_enabled(true)
end

if want("norm") then
  local x, w, b = ember.randn({ 64, 32, 28, 28 }), ember.randn({ 32 }), ember.randn({ 32 })
  local rm, rv = ember.zeros({ 32 }), ember.ones({ 32 })
  bench("batch_norm_fwd_bwd",
    fwd_bwd(function(x_, w_, b_) return F.batch_norm(x_, rm, rv, w_, b_, { training = true }) end, { x, w, b }), 10)
  bench("batch_norm_eval", function() return F.batch_norm(x, rm, rv, w, b, { training = false }) end, 20)
end

if want("reduce") then
  local r = ember.randn({ 256, 512, 16 })
  for d = 1, 3 do
    bench("sum_dim" .. d, function() return r:sum(d) end, 20)
    bench("argmax_dim" .. d, function() return r:argmax(d) end, 20)
    bench("max_dim" .. d, function() return r:max(d) end, 20)
    bench("var_dim" .. d, function() return r:var(d) end, 20)
    bench("softmax_dim" .. d, function() return r:softmax(d) end, 10)
    bench("log_softmax_dim" .. d, function() return r:log_softmax(d) end, 10)
  end
  bench("sum_all", function() return r:sum() end, 20)
end

print(B.json(res))
