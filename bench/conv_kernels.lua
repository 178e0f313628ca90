-- Which kernel runs which convolution (docs/nn.md, "Kernels"): each of a
-- few convolutions from bench/convnets.lua's two networks (MobileNetV2's
-- depthwise and 1x1 layers, ResNet-18's 1x1 downsampling and a grouped
-- 3x3), its forward and both adjoints, timed on ember's direct kernels
-- ("direct", where they apply), oneDNN ("dnnl") and im2col + GEMM
-- ("im2col"), the three in alternation. Prints one JSON object per
-- convolution and product: milliseconds per call, the least over rounds
-- of 3 calls (on a shared machine the least is the one least disturbed).
--   luajit bench/conv_kernels.lua [reps [threads [match]]]
-- (match: only the convolutions whose name contains it)
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local ffi = require("ffi")
local C = ember._C

local reps = tonumber(arg and arg[1]) or 10
if arg and arg[2] then ember.set_num_threads((assert(tonumber(arg[2]), "threads must be a number"))) end
ember.manual_seed(0)
local out = ffi.new("ember_tensor *[1]")
local function pair(a) return ffi.new("int64_t[2]", a, a) end
local function check(rc) if rc ~= 0 then error(ffi.string(C.ember_last_error())) end end

-- name, N, C, H, W, O, kernel, stride, padding, groups
local CASES = {
  { "mbv2 dw 96@16x16 s2", 32, 96, 16, 16, 96, 3, 2, 1, 96 },
  { "mbv2 dw 144@8x8 s1", 32, 144, 8, 8, 144, 3, 1, 1, 144 },
  { "mbv2 dw 384@2x2 s1", 32, 384, 2, 2, 384, 3, 1, 1, 384 },
  { "mbv2 dw 192@4x4 s1", 32, 192, 4, 4, 192, 3, 1, 1, 192 },
  { "mbv2 dw 32@16x16 s1, batch 1", 1, 32, 16, 16, 32, 3, 1, 1, 32 },
  { "mbv2 1x1 16->96 @16x16", 32, 16, 16, 16, 96, 1, 1, 0, 1 },
  { "mbv2 1x1 144->32 @4x4", 32, 144, 4, 4, 32, 1, 1, 0, 1 },
  { "mbv2 1x1 64->384 @2x2", 32, 64, 2, 2, 384, 1, 1, 0, 1 },
  { "mbv2 1x1 24->144 @8x8", 32, 24, 8, 8, 144, 1, 1, 0, 1 },
  { "mbv2 1x1 320->1280 @1x1", 32, 320, 1, 1, 1280, 1, 1, 0, 1 },
  { "resnet 1x1 s2 64->128 @8x8", 32, 64, 8, 8, 128, 1, 2, 0, 1 },
  { "grouped 3x3 64->64 g8 @16x16", 32, 64, 16, 16, 64, 3, 1, 1, 8 },
  { "resnet 3x3 256->256 @2x2", 32, 256, 2, 2, 256, 3, 1, 1, 1 },
  { "resnet 3x3 512->512 @1x1", 32, 512, 1, 1, 512, 3, 1, 1, 1 },
  { "resnet 3x3 128->128 @4x4", 32, 128, 4, 4, 128, 3, 1, 1, 1 },
}

local PATHS = {
  direct = { kernels = true, dnnl = false }, dnnl = { kernels = false, dnnl = true },
  im2col = { kernels = false, dnnl = false },
}

for _, c in ipairs(CASES) do if not (arg and arg[3]) or c[1]:find(arg[3], 1, true) then
  local name, N, Cin, H, W, O, k, s, p, g = unpack(c)
  local st, pd, dl = pair(s), pair(p), pair(1)
  local x, w = ember.randn({ N, Cin, H, W }), ember.randn({ O, Cin / g, k, k })
  local Ho, Wo = math.floor((H + 2 * p - k) / s) + 1, math.floor((W + 2 * p - k) / s) + 1
  local gy = ember.randn({ N, O, Ho, Wo })
  local xs, ws = ffi.new("int64_t[4]", N, Cin, H, W), ffi.new("int64_t[4]", O, Cin / g, k, k)
  local products = {
    forward = function() check(C.ember_conv2d(x._c, w._c, st, pd, dl, g, out)); C.ember_tensor_release(out[0]) end,
    backward_input = function()
      check(C.ember_conv2d_backward_input(gy._c, w._c, xs, st, pd, dl, g, out)); C.ember_tensor_release(out[0]) end,
    backward_weight = function()
      check(C.ember_conv2d_backward_weight(x._c, gy._c, ws, st, pd, dl, g, out)); C.ember_tensor_release(out[0]) end,
  }
  for _, prod in ipairs({ "forward", "backward_input", "backward_weight" }) do
    local t = {}
    for _ = 1, reps do
      for path, sw in pairs(PATHS) do
        ember.set_conv_kernels_enabled(sw.kernels)
        ember.set_dnnl_enabled(sw.dnnl)
        products[prod]()   -- a primitive's making is not timed
        local t0 = B.now()
        for _ = 1, 3 do products[prod]() end
        t[path] = t[path] or {}
        t[path][#t[path] + 1] = (B.now() - t0) / 3 * 1e3
      end
    end
    local row = { bench = "conv_kernels", case = name, product = prod, threads = ember.get_num_threads() }
    for path, list in pairs(t) do row[path .. "_ms"] = math.min(unpack(list)) end
    print(B.json(row))
  end
end end
ember.set_conv_kernels_enabled(true)
ember.set_dnnl_enabled(true)
