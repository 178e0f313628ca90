-- The kernels of one step of the CNN recipe (bench/train_cnn.lua, batch 64),
-- each timed alone: milliseconds per call (median of rounds) and, for the
-- GEMM-bound ones, GFLOP/s. Shows where a training step's time goes and how
-- far each convolution is from the BLAS rate.
--   luajit bench/cnn_ops.lua [reps]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local ffi = require("ffi")
local C = ember._C

local reps = tonumber(arg and arg[1]) or 20
ember.manual_seed(0)
local out1 = ffi.new("ember_tensor *[1]")
local out2 = ffi.new("ember_tensor *[1]")
local function i64(a, b) return ffi.new("int64_t[2]", a, b) end
local function i64x4(s) return ffi.new("int64_t[4]", s) end
local function check(rc) if rc ~= 0 then error(ffi.string(C.ember_last_error())) end end
local function take(p) return ember._wrap(p[0]) end

local N = 64
local x1 = ember.rand({ N, 1, 28, 28 })
local w1 = ember.randn({ 16, 1, 5, 5 })
local a1 = ember.randn({ N, 16, 28, 28 })
local x2 = ember.randn({ N, 16, 14, 14 })
local w2 = ember.randn({ 32, 16, 5, 5 })
local a2 = ember.randn({ N, 32, 14, 14 })
local g2 = ember.randn({ N, 32, 14, 14 })
local g1 = ember.randn({ N, 16, 28, 28 })
local one, pad2, k2 = i64(1, 1), i64(2, 2), i64(2, 2)

local b1, b2 = ember.randn({ 16 }), ember.randn({ 32 })
-- each convolution with its bias and ReLU, as nn.Conv2d{activation = "relu"} runs it
local function conv_relu(x, w, b) check(C.ember_conv2d_relu(x._c, w._c, b._c, one, pad2, one, 1, out1)); return take(out1) end
local function conv_bi(g, w, xs)
  check(C.ember_conv2d_backward_input(g._c, w._c, i64x4(xs), one, pad2, one, 1, out1)); return take(out1)
end
local function conv_bw(x, g, ws)
  check(C.ember_conv2d_backward_weight(x._c, g._c, i64x4(ws), one, pad2, one, 1, out1)); return take(out1)
end
local function pool(x)
  check(C.ember_max_pool2d(x._c, k2, k2, i64(0, 0), out1, out2)); return take(out1), take(out2)
end
local p1v, p1i = pool(a1)
local p2v, p2i = pool(a2)
local function pool_bw(g, idx, xs) check(C.ember_max_pool2d_backward(g._c, idx._c, i64x4(xs), out1)); return take(out1) end
local function relu_bw(g, y) check(C.ember_relu_backward(g._c, y._c, out1)); return take(out1) end

local flop1 = 2 * N * 16 * 28 * 28 * 25
local flop2 = 2 * N * 32 * 14 * 14 * 400
local cases = {
  { "conv1_relu_forward", function() conv_relu(x1, w1, b1) end, flop1 },
  { "conv1_backward_weight", function() conv_bw(x1, g1, { 16, 1, 5, 5 }) end, flop1 },
  { "conv2_relu_forward", function() conv_relu(x2, w2, b2) end, flop2 },
  { "conv2_backward_input", function() conv_bi(g2, w2, { N, 16, 14, 14 }) end, flop2 },
  { "conv2_backward_weight", function() conv_bw(x2, g2, { 32, 16, 5, 5 }) end, flop2 },
  { "relu1_backward", function() relu_bw(g1, a1) end },
  { "relu2_backward", function() relu_bw(g2, a2) end },
  { "bias1_backward", function() g1:sum({ 1, 3, 4 }) end },
  { "bias2_backward", function() g2:sum({ 1, 3, 4 }) end },
  { "maxpool1_forward", function() pool(a1) end },
  { "maxpool1_backward", function() pool_bw(p1v, p1i, { N, 16, 28, 28 }) end },
  { "maxpool2_forward", function() pool(a2) end },
  { "maxpool2_backward", function() pool_bw(p2v, p2i, { N, 32, 14, 14 }) end },
}
local res = { bench = "cnn_ops", batch = N, threads = ember.get_num_threads(), openblas_core = B.blas_core(ember) }
local total = 0
for _, c in ipairs(cases) do
  local f = c[2]
  for _ = 1, 3 do f() end
  local t = B.time(function(n) for _ = 1, n do f() end end, 5, reps)
  res[c[1] .. "_ms"] = t * 1e3
  if c[3] then res[c[1] .. "_gflops"] = c[3] / t * 1e-9 end
  total = total + t
end
res.total_ms = total * 1e3
print(B.json(res))
