-- Real convnets' kernels (issue 30): depthwise convolutions on ember's direct
-- kernels (core/src/ops/conv_depthwise.c), 1x1 convolutions as plain
-- products and grouped ones, on each path, against PyTorch's values
-- (spec/fixtures/convnets/gen.py), against the im2col path and oneDNN,
-- gradcheck, and the same bits on 1 and 2 threads.
local H = require("helpers")
local ember = H.ember
local F = ember.nn.functional
local gradcheck = ember.autodiff.gradcheck

local FIX = ember.load("spec/fixtures/convnets/convs.safetensors")
-- as gen.py's CASES: N, C, H, W, out channels, kernel, stride, padding, dilation, groups
local CASES = {
  dw3 = { 2, 6, 9, 11, 6, 3, 1, 1, 1, 6 }, dw3s2 = { 2, 5, 10, 9, 5, 3, 2, 1, 1, 5 },
  dw5d2 = { 1, 4, 12, 10, 4, 5, 1, 3, 2, 4 }, dwmult = { 2, 3, 7, 8, 6, 3, 1, 0, 1, 3 },
  dwpad = { 1, 2, 3, 4, 2, 3, 3, 2, 1, 2 }, grouped = { 2, 8, 7, 7, 12, 3, 1, 1, 1, 4 },
  pw = { 3, 8, 5, 4, 6, 1, 1, 0, 1, 1 }, pw1x1 = { 5, 7, 1, 1, 9, 1, 1, 0, 1, 1 }, pws2 = { 2, 6, 5, 5, 4, 1, 2, 0, 1, 1 },
}
local function opts_of(c) return { stride = c[7], padding = c[8], dilation = c[9], groups = c[10] } end

-- y = conv2d(x, w) and the gradients of sum(y r), with the switches given
local function run(x, w, r, opts, kernels, dnnl)
  return H.with_switch(ember.set_dnnl_enabled, ember.dnnl_enabled, dnnl, function()
    return H.with_switch(ember.set_conv_kernels_enabled, ember.conv_kernels_enabled, kernels, function()
      x, w = x:detach(), w:detach()
      local gm = ember.autodiff.GradManager():attach({ x, w })
      gm:record()
      local y = F.conv2d(x, w, nil, opts)
      gm:backward({ y }, { r })
      return { y, x.grad, w.grad }
    end)
  end)
end

local function max_diff(a, b) return (a:to("float64") - b:to("float64")):abs():max():item() end

describe("depthwise convolutions", function()
  H.keep_thread_setting(before_each, after_each)

  for k, c in pairs(CASES) do
    it(k .. ": values and gradients as PyTorch's, in float64 and float32, on each path", function()
      local x, w, r = FIX[k .. ".x"], FIX[k .. ".w"], FIX[k .. ".r"]
      for _, dt in ipairs({ "float64", "float32" }) do
        local tol = dt == "float64" and 1e-12 or 1e-4
        for _, path in ipairs({ { true, true }, { false, true }, { true, false }, { false, false } }) do
          local got = run(x:to(dt), w:to(dt), r:to(dt), opts_of(c), path[1], path[2])
          for i, name in ipairs({ "y", "gx", "gw" }) do
            local want = FIX[k .. "." .. name]
            local d = max_diff(got[i], want) / (1 + want:abs():max():item())
            assert(d <= tol, ("%s %s %s (kernels %s, dnnl %s): off by %g"):format(k, dt, name,
              tostring(path[1]), tostring(path[2]), d))
          end
        end
      end
    end)
  end

  it("agree with the im2col path and oneDNN", function()
    local x, w, r = ember.randn({ 4, 32, 16, 16 }), ember.randn({ 32, 1, 3, 3 }), ember.randn({ 4, 32, 8, 8 })
    local opts = { stride = 2, padding = 1, groups = 32 }
    local direct = run(x, w, r, opts, true, true)
    for _, other in ipairs({ run(x, w, r, opts, false, false), run(x, w, r, opts, false, true) }) do
      for i = 1, 3 do assert(max_diff(direct[i], other[i]) < 1e-4 * (1 + other[i]:abs():max():item())) end
    end
    -- float64: the direct kernels and im2col sum the same products in different orders
    local x64, w64, r64 = x:to("float64"), w:to("float64"), r:to("float64")
    local d64, i64 = run(x64, w64, r64, opts, true, true), run(x64, w64, r64, opts, false, false)
    for i = 1, 3 do assert(max_diff(d64[i], i64[i]) < 1e-12 * (1 + i64[i]:abs():max():item())) end
  end)

  it("pass gradcheck, with a channel multiplier, stride and dilation", function()
    ember.manual_seed(3)
    local x, w = ember.randn({ 2, 3, 7, 6 }, { dtype = "float64" }), ember.randn({ 6, 1, 3, 3 }, { dtype = "float64" })
    local b = ember.randn({ 6 }, { dtype = "float64" })
    for _, o in ipairs({ { padding = 1, groups = 3 }, { stride = 2, padding = 2, dilation = 2, groups = 3 } }) do
      assert.is_true(gradcheck(function(xx, ww, bb) return (F.conv2d(xx, ww, bb, o) ^ 2):sum() end, { x, w, b }))
      assert.is_true(gradcheck(function(xx, ww, bb) return (F.conv2d_relu(xx, ww, bb, o) ^ 2):sum() end, { x, w, b }))
    end
  end)

  it("give the same bits on 1 and 2 threads", function()
    local function bits(threads)
      ember.set_num_threads(threads)
      ember.manual_seed(7)
      local out = {}
      for _, dt in ipairs({ "float32", "float64" }) do
        local x, w = ember.randn({ 8, 96, 16, 16 }, { dtype = dt }), ember.randn({ 96, 1, 3, 3 }, { dtype = dt })
        local r = ember.randn({ 8, 96, 16, 16 }, { dtype = dt })
        for _, t in ipairs(run(x, w, r, { padding = 1, groups = 96 }, true, true)) do
          for _, v in ipairs(t:reshape({ -1 }):tolist()) do out[#out + 1] = v end
        end
      end
      return out
    end
    local one, two = bits(1), bits(2)
    assert.are.equal(#one, #two)
    for i = 1, #one do if one[i] ~= two[i] then error(("value %d: %.9g on 1 thread, %.9g on 2"):format(i, one[i], two[i])) end end
  end)

  it("raise naming conv2d on a bad geometry, as before", function()
    H.raises(function() F.conv2d(ember.randn({ 1, 4, 5, 5 }), ember.randn({ 4, 1, 7, 7 }), nil, { groups = 4 }) end,
      "conv2d", "smaller than")
    H.raises(function() ember.set_conv_kernels_enabled(1) end, "set_conv_kernels_enabled")
  end)
end)
