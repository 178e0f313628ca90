-- The kernels issue 26 changed so that relu keeps NaN, each timed alone:
-- milliseconds per call (median of rounds) for relu and relu_backward on 1M
-- floats, linear_relu and its bias adjoint at the MLP's first layer, and
-- conv2d_relu, conv2d_relu_max_pool2d (oneDNN's fused primitives, now after
-- a read of x, w and b) and max_pool2d at the CNN recipe's two layers
-- (batch 64). Compare builds by running it against each in alternation:
--   EMBER_LIB=<other build>/libember.so luajit bench/relu_nan.lua [reps]
--   luajit bench/relu_nan.lua [reps]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local ffi = require("ffi")
local C = ember._C
local F = ember.nn.functional

local reps = tonumber(arg and arg[1]) or 9
ember.manual_seed(0)
local out1 = ffi.new("ember_tensor *[1]")
local out2 = ffi.new("ember_tensor *[2]")
local function check(rc) if rc ~= 0 then error(ffi.string(C.ember_last_error())) end end

local v, g = ember.randn({ 1024 * 1024 }), ember.randn({ 1024 * 1024 })
local vr = v:relu()
local x, w, b = ember.randn({ 128, 784 }), ember.randn({ 256, 784 }), ember.randn({ 256 })
local ly = F.linear_relu(x, w, b)
local lg = ember.randn({ 128, 256 })
local N = 64
local x1, w1, b1 = ember.rand({ N, 1, 28, 28 }), ember.randn({ 16, 1, 5, 5 }), ember.randn({ 16 })
local x2, w2, b2 = ember.randn({ N, 16, 14, 14 }), ember.randn({ 32, 16, 5, 5 }), ember.randn({ 32 })
local a1 = F.conv2d_relu(x1, w1, b1, { padding = 2 })

local cases = {
  { "relu_1m", function() return v:relu() end },
  { "relu_backward_1m", function() check(C.ember_relu_backward(g._c, vr._c, out1)); return ember._wrap(out1[0]) end },
  { "linear_relu_128x784x256", function() return F.linear_relu(x, w, b) end },
  { "relu_bias_backward_128x256", function()
    check(C.ember_relu_bias_backward(lg._c, ly._c, out2, out2 + 1))
    return ember._wrap(out2[0]), ember._wrap(out2[1])
  end },
  { "conv1_relu_forward", function() return F.conv2d_relu(x1, w1, b1, { padding = 2 }) end },
  { "conv2_relu_forward", function() return F.conv2d_relu(x2, w2, b2, { padding = 2 }) end },
  { "conv1_relu_pool_forward", function() return F.conv2d_relu_max_pool2d(x1, w1, b1, { padding = 2 }, 2) end },
  { "conv2_relu_pool_forward", function() return F.conv2d_relu_max_pool2d(x2, w2, b2, { padding = 2 }, 2) end },
  { "maxpool1_forward", function() return F.max_pool2d(a1, 2) end },
}
local res = { bench = "relu_nan", lib = os.getenv("EMBER_LIB") or "build", threads = ember.get_num_threads(),
  dnnl = ember.dnnl_info() }
for _, c in ipairs(cases) do
  local f = c[2]
  for _ = 1, 3 do f() end
  res[c[1] .. "_ms"] = B.time(function(n) for _ = 1, n do f() end end, 10, reps) * 1e3
end
print(B.json(res))
