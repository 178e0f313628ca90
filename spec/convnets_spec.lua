-- Real convnets' kernels (issue 30): depthwise convolutions on ember's direct
-- kernels (core/src/ops/conv_depthwise.c), 1x1 convolutions as plain
-- products, grouped ones and kernels with taps that only read padding
-- (core/src/ops/conv_taps.c), on each path, against PyTorch's values
-- (spec/fixtures/convnets/gen.py), against the im2col path and oneDNN,
-- gradcheck, and the same bits on 1 and 2 threads.
local H = require("helpers")
local ember = H.ember
local F = ember.nn.functional
local gradcheck = ember.autodiff.gradcheck

local FIX = ember.load("spec/fixtures/convnets/convs.safetensors")
-- as gen.py's CASES: N, C, H, W, out channels, kernel, stride, padding, dilation, groups
local CASES = {
  dw3 = { 2, 6, 4, 4, 6, 3, 1, 1, 1, 6 }, dw3s2 = { 2, 5, 7, 6, 5, 3, 2, 1, 1, 5 },
  dw5d2 = { 1, 4, 6, 5, 4, 5, 1, 3, 2, 4 }, dwmult = { 2, 3, 5, 6, 6, 3, 1, 0, 1, 3 },
  dwlarge = { 2, 6, 9, 11, 6, 3, 1, 1, 1, 6 },
  dwpad = { 1, 2, 3, 4, 2, 3, 3, 2, 1, 2 }, grouped = { 2, 8, 7, 7, 12, 3, 1, 1, 1, 4 },
  pw = { 3, 8, 5, 4, 6, 1, 1, 0, 1, 1 }, pw1x1 = { 5, 7, 1, 1, 9, 1, 1, 0, 1, 1 }, pws2 = { 2, 6, 5, 5, 4, 1, 2, 0, 1, 1 },
  dead1x1 = { 3, 8, 1, 1, 6, 3, 1, 1, 1, 1 }, dead2x2s2 = { 3, 5, 2, 2, 7, 3, 2, 1, 1, 1 },
  deaddil = { 2, 4, 2, 2, 5, 3, 1, 3, 3, 1 }, deadwide = { 2, 3, 3, 2, 4, 5, 2, 3, 1, 1 },
  deaddw = { 4, 6, 1, 1, 6, 3, 1, 1, 1, 6 },
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

local F64 = { dtype = "float64" }
local max_diff = H.max_diff

-- fn() (a list of tensors) gives the same bits on 1 and on 2 threads, seeded alike
local function same_bits_on_threads(fn)
  local function bits(threads)
    ember.set_num_threads(threads)
    ember.manual_seed(7)
    local out = {}
    for _, t in ipairs(fn()) do
      for _, v in ipairs(t:to("float64"):reshape({ -1 }):tolist()) do out[#out + 1] = v end
    end
    return out
  end
  local one, two = bits(1), bits(2)
  assert.are.equal(#one, #two)
  for i = 1, #one do if one[i] ~= two[i] then error(("value %d: %.9g on 1 thread, %.9g on 2"):format(i, one[i], two[i])) end end
end

-- gradcheck and gradgradcheck of f at inputs
local function gradchecks(f, inputs)
  assert.is_true(gradcheck(f, inputs))
  assert.is_true(ember.autodiff.gradgradcheck(f, inputs))
end

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
    local x, w, r = ember.randn({ 4, 32, 6, 6 }), ember.randn({ 32, 1, 3, 3 }), ember.randn({ 4, 32, 3, 3 })
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
    local x, w = ember.randn({ 2, 3, 4, 3 }, { dtype = "float64" }), ember.randn({ 6, 1, 3, 3 }, { dtype = "float64" })
    local b = ember.randn({ 6 }, { dtype = "float64" })
    for _, o in ipairs({ { padding = 1, groups = 3 }, { stride = 2, padding = 2, dilation = 2, groups = 3 } }) do
      assert.is_true(gradcheck(function(xx, ww, bb) return (F.conv2d(xx, ww, bb, o) ^ 2):sum() end, { x, w, b }))
      assert.is_true(gradcheck(function(xx, ww, bb) return (F.conv2d_relu(xx, ww, bb, o) ^ 2):sum() end, { x, w, b }))
    end
  end)

  it("pass gradcheck where taps only read padding (the live taps' kernel)", function()
    ember.manual_seed(6)
    for _, c in ipairs({ { { 2, 3, 1, 1 }, { 4, 3, 3, 3 }, { padding = 1 } },
      { { 2, 3, 2, 2 }, { 4, 3, 3, 3 }, { stride = 2, padding = 1 } } }) do
      local x, w, b = ember.randn(c[1], F64), ember.randn(c[2], F64), ember.randn({ 4 }, F64)
      assert.is_true(gradcheck(function(xx, ww, bb) return (F.conv2d(xx, ww, bb, c[3]) ^ 2):sum() end, { x, w, b }))
      assert.is_true(gradcheck(function(xx, ww, bb) return (F.conv2d_relu(xx, ww, bb, c[3]) ^ 2):sum() end, { x, w, b }))
    end
  end)

  it("give the same bits on 1 and 2 threads", function()
    for _, dt in ipairs({ "float32", "float64" }) do
      same_bits_on_threads(function()
        local x, w = ember.randn({ 16, 96, 4, 4 }, { dtype = dt }), ember.randn({ 96, 1, 3, 3 }, { dtype = dt })
        return run(x, w, ember.randn({ 16, 96, 4, 4 }, { dtype = dt }), { padding = 1, groups = 96 }, true, true)
      end)
    end
  end)

  it("raise naming conv2d on a bad geometry, as before", function()
    H.raises(function() F.conv2d(ember.randn({ 1, 4, 5, 5 }), ember.randn({ 4, 1, 7, 7 }), nil, { groups = 4 }) end,
      "conv2d", "smaller than")
    H.raises(function() ember.set_conv_kernels_enabled(1) end, "set_conv_kernels_enabled")
  end)
end)

describe("batch norm with its activation (batch_norm_act)", function()
  H.keep_thread_setting(before_each, after_each)

  -- y and the gradients of sum(y r) of F.batch_norm with the activation, or
  -- of F.batch_norm then F.relu / F.relu6
  local function bn_run(x, w, b, r, act, fused)
    x, w, b = x:clone(), w:clone(), b:clone()
    local gm = ember.autodiff.GradManager():attach({ x, w, b })
    gm:record()
    local y = fused and F.batch_norm(x, nil, nil, w, b, { training = true, activation = act })
      or F[act](F.batch_norm(x, nil, nil, w, b, { training = true }))
    gm:backward({ y }, { r })
    return { y, x.grad, w.grad, b.grad }
  end

  local function same_bits(a, b, what)
    for i = 1, #a do
      local p, q = a[i]:reshape({ -1 }):tolist(), b[i]:reshape({ -1 }):tolist()
      for k = 1, #p do
        local ok = p[k] == q[k] and (p[k] ~= 0 or 1 / p[k] == 1 / q[k]) or (p[k] ~= p[k] and q[k] ~= q[k])
        if not ok then error(("%s, result %d value %d: %.17g fused, %.17g composed"):format(what, i, k, p[k], q[k])) end
      end
    end
  end

  it("gives batch_norm's then the activation's values and gradients bit for bit", function()
    -- planes of 81 (the channel kernels) and of 4 and 1 (the column kernels)
    for _, shape in ipairs({ { 4, 6, 9, 9 }, { 8, 5, 2, 2 }, { 16, 7 } }) do
      for _, dt in ipairs({ "float64", "float32" }) do
        for _, act in ipairs({ "relu", "relu6" }) do
          ember.manual_seed(1)
          local C = shape[2]
          local x, w = ember.randn(shape, { dtype = dt }) * 3, ember.randn({ C }, { dtype = dt })
          local b, r = ember.randn({ C }, { dtype = dt }), ember.randn(shape, { dtype = dt })
          same_bits(bn_run(x, w, b, r, act, true), bn_run(x, w, b, r, act, false),
            ("%s %s %s"):format(dt, table.concat(shape, "x"), act))
        end
      end
    end
  end)

  it("keeps NaN and relu's -0, and gives hardtanh's gradient at the bounds", function()
    -- one channel, w 1, b 0: y is x's normalised value; pick x so that the
    -- normalised values include exactly 0, and a NaN channel
    local x = ember.tensor({ { { -1, 0, 1 } }, { { -1, 0, 1 } } }, { dtype = "float64" }):reshape({ 2, 1, 3 })
    local w, b = ember.ones({ 1 }, { dtype = "float64" }), ember.zeros({ 1 }, { dtype = "float64" })
    local r = ember.ones({ 2, 1, 3 }, { dtype = "float64" })
    for _, act in ipairs({ "relu", "relu6" }) do
      same_bits(bn_run(x, w, b, r, act, true), bn_run(x, w, b, r, act, false), act .. " at 0")
      -- b = 6 - the positive value: the largest lands on relu6's upper bound
      local b6 = ember.tensor({ 6 - 1 / math.sqrt(2 / 3 + 1e-5) }, { dtype = "float64" })
      same_bits(bn_run(x, w, b6, r, act, true), bn_run(x, w, b6, r, act, false), act .. " at 6")
      local xn = x:clone()
      xn[{ 1, 1, 1 }] = 0 / 0
      same_bits(bn_run(xn, w, b, r, act, true), bn_run(xn, w, b, r, act, false), act .. " with NaN")
    end
  end)

  it("passes gradcheck and gradgradcheck", function()
    ember.manual_seed(4)
    local x = ember.randn({ 3, 4, 3, 2 }, { dtype = "float64" }) * 2
    local w, b = ember.randn({ 4 }, { dtype = "float64" }), ember.randn({ 4 }, { dtype = "float64" }) + 1
    for _, act in ipairs({ "relu", "relu6" }) do
      local function f(xx, ww, bb)
        return (F.batch_norm(xx, nil, nil, ww, bb, { training = true, activation = act }) ^ 2):sum()
      end
      gradchecks(f, { x, w, b })
    end
  end)

  it("runs in nn.Sequential for BatchNorm then ReLU or ReLU6, as the modules one by one", function()
    local nn = ember.nn
    for _, Act in ipairs({ nn.ReLU, nn.ReLU6 }) do
      for _, mode in ipairs({ "train", "eval" }) do
        ember.manual_seed(2)
        local seq = nn.Sequential(nn.Conv2d(3, 8, 3, { padding = 1, bias = false }), nn.BatchNorm2d(8), Act())
        local twin = nn.Sequential(nn.Conv2d(3, 8, 3, { padding = 1, bias = false }), nn.BatchNorm2d(8), Act())
        twin:load_state_dict(seq:state_dict())
        seq[mode](seq)
        twin[mode](twin)
        local x = ember.randn({ 4, 3, 6, 6 }, { dtype = "float32" })
        local outs = {}
        for k, m in ipairs({ seq, twin }) do
          local gm = ember.autodiff.GradManager():attach(m:parameters())
          gm:record()
          local y = k == 1 and m(x) or m[3](m[2](m[1](x)))
          gm:backward((y * y):sum())
          outs[k] = { y, m[1].weight.grad, m[2].weight.grad, m[2].bias.grad, m[2].running_mean, m[2].running_var }
        end
        same_bits(outs[1], outs[2], mode)
      end
    end
  end)

  it("runs its composed form where the kernels do not (float16: as on a device)", function()
    ember.manual_seed(3)
    local x = (ember.randn({ 4, 3, 5, 5 }) * 3):to("float16")
    local w, b, r = ember.randn({ 3 }):to("float16"), ember.randn({ 3 }):to("float16"), ember.randn({ 4, 3, 5, 5 }):to("float16")
    for _, act in ipairs({ "relu", "relu6" }) do
      same_bits(bn_run(x, w, b, r, act, true), bn_run(x, w, b, r, act, false), "float16 " .. act)
      local rm, rv = ember.randn({ 3 }):to("float16"), (ember.rand({ 3 }) + 0.5):to("float16")
      local y = F.batch_norm(x, rm, rv, w, b, { training = false, activation = act })
      local scale = (rv + 1e-5):rsqrt() * w
      local want = F[act](x * scale:view({ 1, 3, 1, 1 }) + (-rm * scale + b):view({ 1, 3, 1, 1 }))
      assert.are.same(want:float():reshape({ -1 }):tolist(), y:float():reshape({ -1 }):tolist())
    end
  end)

  it("raises naming batch_norm on an unknown activation", function()
    H.raises(function() F.batch_norm(ember.randn({ 4, 3 }), nil, nil, nil, nil, { activation = "gelu" }) end,
      "batch_norm", "activation", "gelu")
  end)

  it("gives the same bits on 1 and 2 threads", function()
    same_bits_on_threads(function()
      local x, r = ember.randn({ 32, 96, 16, 16 }), ember.randn({ 32, 96, 16, 16 })
      return bn_run(x, ember.ones({ 96 }), ember.zeros({ 96 }), r, "relu6", true)
    end)
  end)
end)

describe("batch norm in eval mode (channel_affine)", function()
  local function stats(C, dt)
    ember.manual_seed(8)
    return ember.randn({ C }, { dtype = dt }), ember.rand({ C }, { dtype = dt }) + 0.5,
      ember.randn({ C }, { dtype = dt }), ember.randn({ C }, { dtype = dt })
  end

  it("is x scale + shift and the activation, bit for bit, and the textbook formula within rounding", function()
    for _, dt in ipairs({ "float64", "float32" }) do
      for _, shape in ipairs({ { 3, 5, 4, 6 }, { 7, 5 } }) do
        local rm, rv, w, b = stats(5, dt)
        local x = ember.randn(shape, { dtype = dt }) * 2
        local cs = { 1, 5 }
        for d = 3, #shape do cs[d] = 1 end
        local scale = (rv + 1e-5):rsqrt() * w
        local shift = -rm * scale + b
        local plain = x * scale:view(cs) + shift:view(cs)
        for _, act in ipairs({ false, "relu", "relu6" }) do
          local y = F.batch_norm(x, rm, rv, w, b, { training = false, activation = act or nil })
          local want = act and F[act](plain) or plain
          assert.are.same(want:reshape({ -1 }):tolist(), y:reshape({ -1 }):tolist())
        end
        local textbook = (x - rm:view(cs)) * (rv:view(cs) + 1e-5):rsqrt() * w:view(cs) + b:view(cs)
        local tol = dt == "float64" and 1e-12 or 1e-5
        assert(max_diff(textbook, plain) <= tol * (1 + textbook:abs():max():item()))
      end
    end
  end)

  it("passes gradcheck and gradgradcheck in x, weight and bias", function()
    local rm, rv, w, b = stats(4, "float64")
    local x = ember.randn({ 2, 4, 3, 3 }, F64) * 2
    for _, act in ipairs({ false, "relu", "relu6" }) do
      local function f(xx, ww, bb)
        return (F.batch_norm(xx, rm, rv, ww, bb, { training = false, activation = act or nil }) ^ 2):sum()
      end
      gradchecks(f, { x, w, b })
    end
  end)

  it("raises naming channel_affine on mismatched shapes (C API)", function()
    local ffi = require("ffi")
    local out = ffi.new("ember_tensor *[1]")
    local x, s = ember.randn({ 2, 3, 4 }), ember.randn({ 4 })
    assert.is_true(ember._C.ember_channel_affine(x._c, s._c, s._c, 0, 0, 0, out) < 0)
    assert.truthy(ffi.string(ember._C.ember_last_error()):find("channel_affine", 1, true))
    assert.is_true(ember._C.ember_channel_affine(x._c, ember.randn({ 3 })._c, ember.randn({ 3 })._c, 7, 0, 0, out) < 0)
    assert.truthy(ffi.string(ember._C.ember_last_error()):find("activation", 1, true))
  end)
end)

describe("bfloat16 convolutions", function()
  H.keep_thread_setting(before_each, after_each)

  -- y and the gradients of sum(y r) for bfloat16 operands, and the same
  -- products in float32 on those operands' exact values
  local function both(shape_x, shape_w, opts)
    ember.manual_seed(9)
    local x, w = ember.randn(shape_x):to("bfloat16"), ember.randn(shape_w):to("bfloat16")
    local y0 = F.conv2d(x:to("float32"), w:to("float32"), nil, opts)
    local r = ember.randn(y0:shape()):to("bfloat16")
    local kernels, dnnl = ember.conv_kernels_enabled(), ember.dnnl_enabled()   -- as they are
    local f32 = { x:to("float32"), w:to("float32"), r:to("float32") }
    return run(x, w, r, opts, kernels, dnnl), run(f32[1], f32[2], f32[3], opts, kernels, dnnl)
  end

  it("give the float32 products of their values, rounded to bfloat16 (oneDNN's bfloat16 kernels where the CPU has them)", function()
    for _, c in ipairs({ { { 8, 16, 10, 9 }, { 24, 16, 3, 3 }, { stride = 2, padding = 1 } },
      { { 4, 3, 16, 16 }, { 8, 3, 7, 7 }, { stride = 2, padding = 3 } },
      { { 6, 32, 8, 8 }, { 32, 1, 3, 3 }, { padding = 1, groups = 32 } } }) do
      local got, want = both(c[1], c[2], c[3])
      for i = 1, 3 do
        assert.are.equal("bfloat16", got[i].dtype)
        -- float32 sums in another order, then one rounding to 8 bits
        local d = max_diff(got[i], want[i]) / want[i]:abs():max():item()
        assert(d < 2 ^ -7, ("product %d off by %g"):format(i, d))
      end
    end
  end)

  it("give the same bits on 1 and 2 threads", function()
    same_bits_on_threads(function() return (both({ 16, 32, 12, 12 }, { 32, 32, 3, 3 }, { padding = 1 })) end)
  end)
end)

describe("random convolution geometries", function()
  -- y = conv2d(x, w) and the gradients of sum(y r), by the definition's loops
  local function naive(x, w, r, o)
    local X, Wt, R = x:tolist(), w:tolist(), r:tolist()
    local N, C, Hh, Ww = unpack(x:shape())
    local O, Cg, kH, kW = unpack(w:shape())
    local _, _, Ho, Wo = unpack(r:shape())
    local G, Og = C / Cg, O / (C / Cg)
    local Y, GX, GW = {}, {}, {}
    for n = 1, N do
      Y[n], GX[n] = {}, {}
      for c = 1, C do GX[n][c] = {}; for h = 1, Hh do GX[n][c][h] = {}; for q = 1, Ww do GX[n][c][h][q] = 0 end end end
    end
    for oc = 1, O do GW[oc] = {}; for c = 1, Cg do GW[oc][c] = {}; for i = 1, kH do GW[oc][c][i] = {}; for j = 1, kW do GW[oc][c][i][j] = 0 end end end end
    for n = 1, N do
      for oc = 1, O do
        Y[n][oc] = {}
        local g0 = math.floor((oc - 1) / Og) * Cg
        for oh = 1, Ho do
          Y[n][oc][oh] = {}
          for ow = 1, Wo do
            local s, rv = 0, R[n][oc][oh][ow]
            for c = 1, Cg do for i = 1, kH do for j = 1, kW do
              local ih = (oh - 1) * o.stride - o.padding + (i - 1) * o.dilation + 1
              local iw = (ow - 1) * o.stride - o.padding + (j - 1) * o.dilation + 1
              if ih >= 1 and ih <= Hh and iw >= 1 and iw <= Ww then
                local xv, wv = X[n][g0 + c][ih][iw], Wt[oc][c][i][j]
                s = s + xv * wv
                GX[n][g0 + c][ih][iw] = GX[n][g0 + c][ih][iw] + rv * wv
                GW[oc][c][i][j] = GW[oc][c][i][j] + rv * xv
              end
            end end end
            Y[n][oc][oh][ow] = s
          end
        end
      end
    end
    return { Y, GX, GW }
  end

  it("match the definition's loops on every path in float64, and in float32 (60 seeded draws)", function()
    ember.manual_seed(30)
    local rnd = ember.randint
    for case = 1, 60 do
      local function pick(lo, hi) return rnd(lo, hi + 1, { 1 }):item() end
      local k, s, d = pick(1, 4), pick(1, 3), pick(1, 2)
      local p = pick(0, math.floor(k / 2) + 1)
      local Cg, G, Og = pick(1, 3), pick(1, 3), pick(1, 2)
      if case % 3 == 0 then Cg = 1 end   -- depthwise, with a channel multiplier Og
      local H, W = pick(1, 6), pick(1, 6)
      local span = d * (k - 1) + 1
      if H + 2 * p >= span and W + 2 * p >= span then
        local o = { stride = s, padding = p, dilation = d, groups = G }
        local x = ember.randn({ 2, Cg * G, H, W }, F64)
        local w = ember.randn({ Og * G, Cg, k, k }, F64)
        local y0 = F.conv2d(x, w, nil, o)
        local r = ember.randn(y0:shape(), F64)
        local want = naive(x, w, r, o)
        for _, path in ipairs({ { true, true, "float64" }, { false, false, "float64" }, { true, true, "float32" } }) do
          local dt = path[3]
          local got = run(x:to(dt), w:to(dt), r:to(dt), o, path[1], path[2])
          for i = 1, 3 do
            local wt = ember.tensor(want[i], F64)
            local dd = max_diff(got[i], wt) / (1 + wt:abs():max():item())
            assert(dd < (dt == "float64" and 1e-12 or 1e-5), ("case %d (x %dx%d, w %s, stride %d, padding %d, dilation %d, groups %d): result %d "
              .. "off by %g"):format(case, H, W, table.concat(w:shape(), "x"), s, p, d, G, i, dd))
          end
        end
      end
    end
  end)
end)
