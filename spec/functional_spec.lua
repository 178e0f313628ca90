-- ember.nn.functional: values against hand computations and a naive Lua
-- reference, float64 gradchecks (first and second order), and bad input.
local H = require("helpers")
local ember = H.ember
local F = ember.nn.functional
local gradcheck = ember.autodiff.gradcheck
local F64 = { dtype = "float64" }

local function randn(shape) return ember.randn(shape, F64) end

-- direct-definition convolution over nested tables (the independent method)
local function naive_conv(x, w, b, o)
  o = o or {}
  local st, pd, dl, G = o.stride or 1, o.padding or 0, o.dilation or 1, o.groups or 1
  local ph, pw = pd, pd
  if type(pd) == "table" then ph, pw = pd[1], pd[2] end
  local X, Wt = x:tolist(), w:tolist()
  local N, Cn, Hh, Ww = x:size(1), x:size(2), x:size(3), x:size(4)
  local O, Cg, kH, kW = w:size(1), w:size(2), w:size(3), w:size(4)
  local Ho = math.floor((Hh + 2 * ph - dl * (kH - 1) - 1) / st) + 1
  local Wo = math.floor((Ww + 2 * pw - dl * (kW - 1) - 1) / st) + 1
  local Og = O / G
  local out = {}
  for n = 1, N do
    out[n] = {}
    for oc = 1, O do
      local g = math.floor((oc - 1) / Og)
      out[n][oc] = {}
      for oh = 1, Ho do
        out[n][oc][oh] = {}
        for ow = 1, Wo do
          local s = b and b:tolist()[oc] or 0
          for c = 1, Cg do
            for i = 1, kH do
              for j = 1, kW do
                local ih = (oh - 1) * st - ph + (i - 1) * dl + 1
                local iw = (ow - 1) * st - pw + (j - 1) * dl + 1
                if ih >= 1 and ih <= Hh and iw >= 1 and iw <= Ww then
                  s = s + X[n][g * Cg + c][ih][iw] * Wt[oc][c][i][j]
                end
              end
            end
          end
          out[n][oc][oh][ow] = s
        end
      end
    end
  end
  assert(Cn == Cg * G)
  return out
end

describe("F.linear", function()
  local w = ember.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, F64)   -- (out 3, in 2)

  it("computes x W^T + b for 1-D, 2-D and batched inputs", function()
    H.same(F.linear(ember.tensor({ 1, -1 }, F64), w), { -1, -1, -1 }, 0, { 3 })
    H.same(F.linear(ember.tensor({ { 1, 0 }, { 0, 2 } }, F64), w, ember.tensor({ 1, 1, 1 }, F64)),
      { { 2, 4, 6 }, { 5, 9, 13 } }, 0)
    local x3 = ember.tensor({ { { 1, 1 } }, { { 2, 0 } } }, F64)   -- (2, 1, 2)
    H.same(F.linear(x3, w), { { { 3, 7, 11 } }, { { 2, 6, 10 } } }, 0, { 2, 1, 3 })
    -- a transposed (non-contiguous) weight gives the same
    H.same(F.linear(ember.tensor({ { 1, 0 } }, F64), w:t():contiguous():t()), { { 1, 3, 5 } }, 0)
  end)

  it("gives the weight gradient in the weight's own layout, and passes gradcheck to second order", function()
    ember.manual_seed(12)
    local x, ww = randn({ 2, 3, 2 }), w:clone()
    local gm = ember.autodiff.GradManager():attach({ ww })
    gm:record()
    gm:backward(F.linear(x, ww):sum())
    assert.is_true(ww.grad:is_contiguous())
    -- d/dW sum(x W^T) = column sums of x, for every output row
    local xs = x:reshape(-1, 2):sum(1):tolist()
    H.same(ww.grad, { xs, xs, xs }, 1e-12)
    assert.is_true(gradcheck(function(a, b) return (F.linear(a, b) ^ 2):sum() end, { randn({ 2, 3, 2 }), randn({ 4, 2 }) }))
    assert.is_true(gradcheck(function(a) return (F.linear(a, w) ^ 2):sum() end, { randn({ 2 }) }))
    local grad = ember.autodiff.grad
    assert.is_true(gradcheck(function(a, b) return ember.enable_grad(function()
      local ga, gb = grad(function(u, v) return (F.linear(u, v) ^ 3):sum() end, { 1, 2 })(a, b)
      return (ga * ga):sum() + (gb * gb):sum()
    end) end, { randn({ 3, 2 }), randn({ 2, 2 }) }))
  end)

  it("names both shapes on a mismatch", function()
    local ok, err = pcall(F.linear, ember.zeros({ 4, 3 }, F64), w)
    assert.is_false(ok)
    assert.truthy(err:find("{4, 3}", 1, true) and err:find("{3, 2}", 1, true), err)
  end)
end)

describe("F.linear_relu", function()
  local w = ember.tensor({ { 1, 2 }, { 3, -4 }, { -5, 6 } }, F64)   -- (out 3, in 2)
  local b = ember.tensor({ 1, -20, 0.5 }, F64)

  it("computes relu(x W^T + b) by hand, in one op on the CPU and through the composed ops elsewhere", function()
    -- x W^T = {1, 3, -5}, {4, -8, 12} and {3, -1, 1}
    local x = ember.tensor({ { 1, 0 }, { 0, 2 }, { 1, 1 } }, F64)
    H.same(F.linear_relu(x, w, b), { { 2, 0, 0 }, { 5, 0, 12.5 }, { 4, 0, 1.5 } }, 0)
    H.same(F.linear(x, w, b), { { 2, -17, -4.5 }, { 5, -28, 12.5 }, { 4, -21, 1.5 } }, 0)
    -- float32; batched and transposed inputs; a 1-D input; a transposed weight
    H.same(F.linear_relu(x:float(), w:float(), b:float()), { { 2, 0, 0 }, { 5, 0, 12.5 }, { 4, 0, 1.5 } }, 0)
    H.same(F.linear_relu(x:view(3, 1, 2), w, b), { { { 2, 0, 0 } }, { { 5, 0, 12.5 } }, { { 4, 0, 1.5 } } }, 0)
    H.same(F.linear_relu(x:t():contiguous():t(), w:t():contiguous():t(), b), { { 2, 0, 0 }, { 5, 0, 12.5 }, { 4, 0, 1.5 } }, 0)
    H.same(F.linear_relu(ember.tensor({ 0, 2 }, F64), w, b), { 5, 0, 12.5 }, 0, { 3 })
    -- a weight with no unit stride (every other element of a wider one; an
    -- expanded one): copied for the product, which read past it before
    local wide = ember.zeros({ 3, 2, 2 }, F64)
    wide:select(3, 1):copy_(w)
    H.same(F.linear_relu(x, wide:select(3, 1), b), { { 2, 0, 0 }, { 5, 0, 12.5 }, { 4, 0, 1.5 } }, 0)
    H.same(F.linear_relu(x, ember.tensor({ { 1, -1 } }, F64):expand(3, 2), b), { { 2, 0, 1.5 }, { 0, 0, 0 }, { 1, 0, 0.5 } }, 0)
    -- mixed dtypes, a broadcast bias and none go through linear, add and relu
    H.same(F.linear_relu(x:float(), w, b), { { 2, 0, 0 }, { 5, 0, 12.5 }, { 4, 0, 1.5 } }, 0)
    H.same(F.linear_relu(x, w, b:view(1, 3)), { { 2, 0, 0 }, { 5, 0, 12.5 }, { 4, 0, 1.5 } }, 0)
    H.same(F.linear_relu(x, w), { { 1, 3, 0 }, { 4, 0, 12 }, { 3, 0, 1 } }, 0)
    local ok, err = pcall(F.linear_relu, x, w, ember.zeros({ 4 }, F64))
    assert.is_false(ok)
    assert.truthy(err:find("{3, 2}", 1, true) and err:find("{4}", 1, true), err)
    -- a NaN stays NaN, as in relu itself and PyTorch (it was 0 before issue 26)
    local r = F.linear_relu(ember.tensor({ { 0 / 0, 0 } }, F64), ember.tensor({ { 1, 0 } }, F64), ember.zeros({ 1 }, F64))
    assert.is_true(r:item() ~= r:item())
    assert.is_true(ember.tensor({ { 0 / 0 } }, F64):relu():item() ~= 0)
  end)

  it("agrees with linear, add and relu at the MLP's shapes in float32", function()
    ember.manual_seed(4)
    local x, w1, b1 = ember.randn({ 128, 784 }), ember.randn({ 256, 784 }), ember.randn({ 256 })
    local want = (x:matmul(w1:t()) + b1):relu()
    local d = (F.linear_relu(x, w1, b1) - want):abs():max():item()
    assert(d < 1e-3, "max difference " .. d)
  end)

  it("passes gradcheck, to second order, in all three inputs", function()
    ember.manual_seed(13)
    local function op(fn) return function(a, ww, bb) return (fn(a, ww, bb) ^ 2):sum() end end
    local x, ww, bb = randn({ 2, 3, 2 }), randn({ 4, 2 }), randn({ 4 })
    -- away from relu's kink, where finite differences would straddle it
    assert(F.linear(x, ww, bb):abs():min():item() > 1e-3)
    assert.is_true(gradcheck(op(F.linear_relu), { x, ww, bb }))
    local grad = ember.autodiff.grad
    assert.is_true(gradcheck(function(a, ww, bb) return ember.enable_grad(function()
      local ga, gw, gb = grad(function(u, v, c) return (F.linear_relu(u, v, c) ^ 3):sum() end, { 1, 2, 3 })(a, ww, bb)
      return (ga * ga):sum() + (gw * gw):sum() + (gb * gb):sum()
    end) end, { randn({ 3, 2 }), randn({ 2, 2 }), ember.tensor({ 3, 3 }, F64) }))
  end)

  it("gives the gradients linear, add and relu give", function()
    ember.manual_seed(14)
    local x, ww, bb = randn({ 5, 3 }), randn({ 4, 3 }), randn({ 4 })
    local gy = randn({ 5, 4 })
    local function grads(fn)
      local a, v, c = x:clone(), ww:clone(), bb:clone()
      local gm = ember.autodiff.GradManager():attach({ a, v, c })
      gm:record()
      gm:backward((fn(a, v, c) * gy):sum())
      return { a.grad, v.grad, c.grad }
    end
    local fused = grads(F.linear_relu)
    local composed = grads(function(a, v, c) return (a:matmul(v:t()) + c):relu() end)
    for k = 1, 3 do H.same(fused[k], composed[k]:tolist(), 1e-12) end
  end)

  it("has an adjoint giving relu_backward and its column sums in one pass", function()
    local ffi = require("ffi")
    local C = ember._C
    local out = ffi.new("ember_tensor *[2]")
    local function adjoint(g, y)
      if C.ember_relu_bias_backward(g._c, y._c, out, out + 1) ~= 0 then error(ffi.string(C.ember_last_error())) end
      return ember._wrap(out[0]), ember._wrap(out[1])
    end
    -- by hand: y's sign picks g's entries (NaN where cut gives 0; a NaN y passes
    -- g, as PyTorch's threshold_backward: it gave 0 before issue 26), then column sums
    local g = ember.tensor({ { 1, 2, 0 / 0 }, { 4, 5, 6 } }, F64)
    local y = ember.tensor({ { 1, 0, -1 }, { 2, 3, 0 / 0 } }, F64)
    local gz, gb = adjoint(g, y)
    H.same(gz, { { 1, 0, 0 }, { 4, 5, 6 } }, 0)
    H.same(gb, { 5, 5, 6 }, 0, { 3 })
    -- float32, batched; and transposed operands through relu_backward and sum_to
    ember.manual_seed(16)
    local g3, y3 = ember.randn({ 2, 5, 4 }), ember.randn({ 2, 5, 4 })
    local z3, b3 = adjoint(g3, y3)
    local want = (g3 * y3:gt(0):float())
    H.same(z3, want:tolist(), 0)
    H.same(b3, want:sum(1):sum(1):tolist(), 1e-5)
    local gt, yt = randn({ 4, 3 }):t(), randn({ 4, 3 }):t()
    local zt, bt = adjoint(gt, yt)
    H.same(zt, (gt * yt:gt(0):double()):tolist(), 0)
    H.same(bt, (gt * yt:gt(0):double()):sum(1):tolist(), 1e-12)
    assert.has_error(function() adjoint(ember.zeros({ 2, 3 }), ember.zeros({ 3, 2 })) end)
  end)

  it("runs a Linear and ReLU pair of nn.Sequential as one op, with the same values", function()
    ember.manual_seed(15)
    local seq = ember.nn.Sequential(ember.nn.Linear(3, 4, { dtype = "float64" }), ember.nn.ReLU(),
      ember.nn.Linear(4, 2, { dtype = "float64" }))
    local l1, l2 = seq:get(1), seq:get(3)
    local x = randn({ 6, 3 })
    local want = F.linear(F.linear(x, l1.weight, l1.bias):relu(), l2.weight, l2.bias)
    H.same(seq(x), want:tolist(), 1e-12)
    local ok, err = pcall(seq, randn({ 6, 5 }))
    assert.is_false(ok)
    assert.truthy(err:find("ember.nn.Linear", 1, true), err)
  end)
end)

describe("F.conv2d", function()
  it("computes a 2x2 box sum by hand", function()
    local x = ember.arange(16, F64):view(1, 1, 4, 4)
    local w = ember.ones({ 1, 1, 2, 2 }, F64)
    H.same(F.conv2d(x, w), { { { { 10, 14, 18 }, { 26, 30, 34 }, { 42, 46, 50 } } } }, 0, { 1, 1, 3, 3 })
    -- stride 2, padding 1: corners see one or two elements
    H.same(F.conv2d(x, w, nil, { stride = 2, padding = 1 }),
      { { { { 0, 3, 3 }, { 12, 30, 18 }, { 12, 27, 15 } } } }, 0)
    -- bias, and the options table in third position
    H.same(F.conv2d(x, w, ember.tensor({ 1 }, F64), { stride = 2 }), { { { { 11, 19 }, { 43, 51 } } } }, 0)
    H.same(F.conv2d(x, w, { stride = 2 }), { { { { 10, 18 }, { 42, 50 } } } }, 0)
  end)

  it("with its bias and ReLU fused (conv2d_relu), by hand", function()
    local x = ember.arange(16, F64):view(1, 1, 4, 4)
    local w = ember.tensor({ { { { 1, -1 }, { 1, -1 } } }, { { { -1, -1 }, { 1, 1 } } } }, F64)
    -- conv2d gives -2 everywhere in channel 1 and 8 in channel 2; the biases 3 and -9
    H.same(F.conv2d_relu(x, w, ember.tensor({ 3, -9 }, F64), { stride = 2 }),
      { { { { 1, 1 }, { 1, 1 } }, { { 0, 0 }, { 0, 0 } } } }, 0)
  end)

  it("with its bias, ReLU and 2x2 max pooling fused (conv2d_relu_max_pool2d), by hand", function()
    -- x = 0 .. 35 in a 6x6 plane; a 1x1 convolution makes relu(x - 10) and
    -- relu(20 - x): each 2x2 window's maximum sits at its largest x in the
    -- first channel and at its smallest in the second (or, all zero, at the
    -- window's first position); the gradients of the sum go to those
    -- positions where the maximum is positive
    for _, dt in ipairs({ "float32", "float64" }) do
      local o = { dtype = dt }
      local x = ember.arange(36, o):view(1, 1, 6, 6)
      local w, b = ember.tensor({ 1, -1 }, o):view(2, 1, 1, 1), ember.tensor({ -10, 20 }, o)
      local want = { { { 0, 0, 1 }, { 9, 11, 13 }, { 21, 23, 25 } }, { { 20, 18, 16 }, { 8, 6, 4 }, { 0, 0, 0 } } }
      H.same(F.conv2d_relu_max_pool2d(x, w, b, {}, 2), { want }, 0, { 1, 2, 3, 3 })
      local _, g = ember.autodiff.vjp(function(x_, w_, b_) return F.conv2d_relu_max_pool2d(x_, w_, b_, {}, 2):sum() end,
        { x, w, b })
      local gx = {}
      for i = 0, 35 do gx[i + 1] = 0 end
      for _, k in ipairs({ 11, 19, 21, 23, 31, 33, 35 }) do gx[k + 1] = 1 end
      for _, k in ipairs({ 0, 2, 4, 12, 14, 16 }) do gx[k + 1] = -1 end
      H.same(g[1]:view(36), gx, 0)
      H.same(g[2]:view(2), { 11 + 19 + 21 + 23 + 31 + 33 + 35, 0 + 2 + 4 + 12 + 14 + 16 }, 0)
      H.same(g[3], { 7, 6 }, 0)
    end
  end)

  for _, o in ipairs({
    {}, { stride = 2 }, { padding = 2 }, { dilation = 2 }, { groups = 2 },
    { stride = { 2, 1 }, padding = { 1, 0 }, dilation = { 1, 2 } }, { groups = 4, padding = 1 },
  }) do
    local label = {}
    for k, v in pairs(o) do label[#label + 1] = k .. "=" .. (type(v) == "table" and table.concat(v, "x") or v) end
    it("matches the direct definition (" .. table.concat(label, ", ") .. ")", function()
      ember.manual_seed(3)
      local G = o.groups or 1
      local x, w, b = randn({ 2, 4, 6, 5 }), randn({ 4, 4 / G, 3, 2 }), randn({ 4 })
      local so = { stride = o.stride, padding = o.padding, dilation = o.dilation, groups = o.groups }
      if type(o.stride) == "table" then   -- per-axis options: checked against one entry below
        assert.are.same({ 2, 4, 3, 3 }, F.conv2d(x, w, b, so):shape())
        return
      end
      local ref = naive_conv(x, w, b, so)
      H.same(F.conv2d(x, w, b, so), ref, 1e-10)
      -- non-contiguous input and weight give the same result
      H.same(F.conv2d(H.noncontig(x), H.noncontig(w), b, so), ref, 1e-10)
      -- float32 agrees to float32 rounding
      H.same(F.conv2d(x:float(), w:float(), b:float(), so), ref, 1e-4)
    end)
  end

  -- unit strides with an output as wide as the input take the plane-shift
  -- unfolding (one shifted copy per plane and a fix-up of the padding)
  for _, c in ipairs({
    { x = { 2, 3, 6, 5 }, w = { 4, 3, 3, 3 }, o = { padding = 1 } },
    { x = { 2, 3, 6, 5 }, w = { 4, 3, 5, 5 }, o = { padding = 2 } },
    { x = { 1, 2, 5, 7 }, w = { 2, 2, 3, 3 }, o = { padding = 2, dilation = 2 } },
    { x = { 2, 2, 1, 4 }, w = { 3, 2, 5, 3 }, o = { padding = { 2, 1 } } },   -- padding taller than the output
    { x = { 1, 2, 4, 1 }, w = { 2, 2, 3, 3 }, o = { padding = { 0, 1 } } },   -- one column
    { x = { 2, 4, 4, 4 }, w = { 4, 2, 3, 3 }, o = { padding = 1, groups = 2 } },
  }) do
    local label = table.concat(c.x, "x") .. " * " .. table.concat(c.w, "x")
    it("matches the direct definition and gradcheck for a 'same' convolution (" .. label .. ")", function()
      ember.manual_seed(31)
      local x, w = randn(c.x), randn(c.w)
      local o = c.o
      local y = F.conv2d(x, w, nil, o)
      assert.are.equal(c.x[4], y:size(4))
      H.same(y, naive_conv(x, w, nil, o), 1e-10)
      H.same(F.conv2d(x:float(), w:float(), nil, o), y:tolist(), 1e-4)
      assert.is_true(gradcheck(function(a, b) return (F.conv2d(a, b, nil, o) ^ 2):sum() end, { x, w }))
      -- float32 gradients agree with float64 ones to float32 rounding
      local function grads(dt)
        local xa, wa = x:to(dt), w:to(dt)
        local gm = ember.autodiff.GradManager():attach({ xa, wa })
        gm:record()
        gm:backward((F.conv2d(xa, wa, nil, o) ^ 2):sum())
        return xa.grad, wa.grad
      end
      local gx, gw = grads("float64")
      local fx, fw = grads("float32")
      H.same(fx, gx:tolist(), 1e-3)
      H.same(fw, gw:tolist(), 1e-3)
    end)
  end

  it("handles per-axis options", function()
    ember.manual_seed(4)
    local x, w = randn({ 1, 2, 7, 6 }), randn({ 3, 2, 3, 2 })
    local y = F.conv2d(x, w, nil, { stride = { 2, 1 }, padding = { 1, 0 }, dilation = { 1, 2 } })
    assert.are.same({ 1, 3, 4, 4 }, y:shape())
    -- (oh, ow) = (2, 3): rows 2*1-1+{0, 1, 2} = 1..3 (0-based), cols 2 + {0, 2}
    local X, Wt, s = x:tolist(), w:tolist(), 0
    for c = 1, 2 do for i = 1, 3 do for j = 1, 2 do
      s = s + X[1][c][1 + i][3 + (j - 1) * 2] * Wt[2][c][i][j]
    end end end
    assert.is_true(math.abs(y:tolist()[1][2][2][3] - s) < 1e-10)
  end)

  it("keeps float16 and bfloat16 inputs in their dtype", function()
    local x = ember.ones({ 1, 1, 3, 3 }, { dtype = "float16" })
    local y = F.conv2d(x, ember.ones({ 1, 1, 2, 2 }, { dtype = "float16" }))
    assert.are.equal("float16", y.dtype)
    H.same(y, { { { { 4, 4 }, { 4, 4 } } } })
  end)

  it("passes float64 gradcheck, with groups, stride, padding and dilation", function()
    ember.manual_seed(5)
    assert.is_true(gradcheck(function(x, w, b)
      return (F.conv2d(x, w, b, { stride = 2, padding = 1, dilation = 1, groups = 2 }) ^ 2):sum()
    end, { randn({ 2, 4, 5, 5 }), randn({ 2, 2, 3, 3 }), randn({ 2 }) }))
    assert.is_true(gradcheck(function(x, w)
      return (F.conv2d(x, w, nil, { dilation = 2, padding = 2 }) * 1.5):sum()
    end, { H.noncontig(randn({ 1, 2, 5, 4 })), randn({ 3, 2, 2, 3 }) }))
    -- 1x1 kernels take the path without unfolding
    assert.is_true(gradcheck(function(x, w) return (F.conv2d(x, w) ^ 2):sum() end,
      { randn({ 1, 3, 2, 2 }), randn({ 2, 3, 1, 1 }) }))
  end)

  it("has second derivatives (its adjoints are differentiable)", function()
    ember.manual_seed(6)
    local grad = ember.autodiff.grad
    -- gradcheck differences under no_grad; the inner gradient needs recording on
    assert.is_true(gradcheck(function(x, w) return ember.enable_grad(function()
      local gx, gw = grad(function(a, b) return (F.conv2d(a, b, nil, { padding = 1 }) ^ 2):sum() end, { 1, 2 })(x, w)
      return (gx * gx):sum() + (gw * gw):sum()
    end) end, { randn({ 1, 2, 3, 3 }), randn({ 2, 2, 2, 2 }) }))
  end)

  it("names the shapes on bad input", function()
    local x, w = ember.zeros({ 1, 3, 4, 4 }), ember.zeros({ 2, 2, 3, 3 })
    local ok, err = pcall(F.conv2d, x, w)
    assert.is_false(ok)
    assert.truthy(err:find("conv2d", 1, true) and err:find("{1, 3, 4, 4}", 1, true) and err:find("{2, 2, 3, 3}", 1, true))
    ok, err = pcall(F.conv2d, ember.zeros({ 3, 4, 4 }), w)
    assert.truthy(err:find("4-D", 1, true))
    ok, err = pcall(F.conv2d, ember.zeros({ 1, 2, 2, 2 }), w)
    assert.truthy(err:find("smaller than", 1, true))
    ok, err = pcall(F.conv2d, ember.zeros({ 1, 2, 4, 4 }), w, nil, { stride = 0 })
    assert.truthy(err:find("stride", 1, true))
    ok, err = pcall(F.conv2d, ember.zeros({ 1, 4, 4, 4 }), ember.zeros({ 3, 2, 1, 1 }), nil, { groups = 2 })
    assert.truthy(err:find("groups", 1, true))
    ok, err = pcall(F.conv2d, ember.zeros({ 1, 2, 4, 4 }, F64), w)
    assert.truthy(err:find("dtype", 1, true))
    ok, err = pcall(F.conv2d, ember.zeros({ 1, 2, 4, 4 }, { dtype = "int64" }), w:long())
    assert.truthy(err:find("floating", 1, true))
    ok, err = pcall(F.conv2d, ember.zeros({ 1, 2, 4, 4 }), w, nil, { bogus = 1 })
    assert.truthy(err:find("unknown option 'bogus'", 1, true))
    assert.are.same({ 1, 2, 2, 2 }, F.conv2d(ember.zeros({ 1, 2, 4, 4 }), w):shape())
  end)
end)

describe("F.max_pool2d and F.avg_pool2d", function()
  -- n values drawn from {-1, 0, 1, 2, NaN} by a fixed LCG: ties and NaNs everywhere
  local function pool_values(n, seed)
    local vals = {}
    for i = 1, n do
      seed = (seed * 1103515245 + 12345) % 2147483648
      local r = seed % 5
      vals[i] = r == 4 and 0 / 0 or r - 1
    end
    return vals
  end

  -- the maximum of 2x2 window (oh, ow) of the plane at 0-based offset base in
  -- vals, and its flat position: the first in window order, or the last NaN
  -- (PyTorch's max_pool2d: `val > maxval || isnan(val)`; before issue 26
  -- ember kept the first NaN)
  local function window_max(vals, base, Ww, oh, ow)
    local best, at
    for _, o in ipairs({ { 0, 0 }, { 0, 1 }, { 1, 0 }, { 1, 1 } }) do
      local pos = (2 * oh + o[1]) * Ww + 2 * ow + o[2]
      local v = vals[base + pos + 1]
      if best == nil or v > best or v ~= v then best, at = v, pos end
    end
    return best, at
  end

  local x = ember.tensor({ { { { 1, 5, 2, 0 }, { 3, 4, 8, 1 }, { 0, 2, 7, 6 }, { 9, 1, 3, 4 } } } }, F64)

  it("pool 2x2 windows by hand", function()
    H.same(F.max_pool2d(x, 2), { { { { 5, 8 }, { 9, 7 } } } }, 0)
    H.same(F.avg_pool2d(x, 2), { { { { 13 / 4, 11 / 4 }, { 12 / 4, 20 / 4 } } } }, 1e-12)
    local y, idx = F.max_pool2d(x, 2, nil, true)
    -- flat positions h * W + w (0-based) inside the plane
    H.same(idx, { { { { 1, 6 }, { 12, 10 } } } }, 0)
    assert.are.equal("int64", idx.dtype)
    assert.are.same({ 1, 1, 2, 2 }, y:shape())
  end)

  it("take stride and padding (padding counts as zero for averages)", function()
    H.same(F.max_pool2d(x, 3, { stride = 1 }), { { { { 8, 8 }, { 9, 8 } } } }, 0)
    H.same(F.max_pool2d(x, 2, { stride = 2, padding = 1 }), { { { { 1, 5, 0 }, { 3, 8, 6 }, { 9, 3, 4 } } } }, 0)
    H.same(F.avg_pool2d(x, 2, { stride = 2, padding = 1 }),
      { { { { 1 / 4, 7 / 4, 0 }, { 3 / 4, 21 / 4, 7 / 4 }, { 9 / 4, 4 / 4, 4 / 4 } } } }, 1e-12)
    H.same(F.avg_pool2d(H.noncontig(x), { 1, 2 }), { { { { 3, 1 }, { 3.5, 4.5 }, { 1, 6.5 }, { 5, 3.5 } } } }, 1e-12)
  end)

  it("propagate NaN through max", function()
    local y = F.max_pool2d(ember.tensor({ { { { 1, 0 / 0 }, { 2, 3 } } } }), 2)
    assert.is_true(y:item() ~= y:item())
  end)

  it("2x2 max pooling keeps the first maximum of each window, or the last NaN (against loops)", function()
    -- wide rows (Wo = 9: vector steps, the last one overlapping), odd H and W, ties and
    -- NaNs everywhere; float32 takes the 2x2 kernel, float64 the general one
    local N, Cc, Hh, Ww = 2, 3, 7, 19
    local vals = pool_values(N * Cc * Hh * Ww, 7)
    local Ho, Wo = math.floor(Hh / 2), math.floor(Ww / 2)
    for _, dt in ipairs({ "float32", "float64" }) do
      local x = ember.tensor(vals, { dtype = dt }):view(N, Cc, Hh, Ww)
      local y, idx = F.max_pool2d(x, 2, nil, true)
      local Y, I = y:reshape(-1):tolist(), idx:reshape(-1):tolist()
      local k = 0
      for q = 0, N * Cc - 1 do
        for oh = 0, Ho - 1 do
          for ow = 0, Wo - 1 do
            local best, at = window_max(vals, q * Hh * Ww, Ww, oh, ow)
            k = k + 1
            assert.are.equal(at, I[k], dt .. " index of window " .. k)
            if best ~= best then assert.is_true(Y[k] ~= Y[k]) else assert.are.equal(best, Y[k]) end
          end
        end
      end
    end
  end)

  it("pass float64 gradcheck", function()
    ember.manual_seed(8)
    -- distinct values keep the max away from ties
    local a = rawget(ember, "randperm") and ember.randperm(2 * 3 * 5 * 5):double():view(2, 3, 5, 5)
      or (ember.arange(150, F64):view(2, 3, 5, 5) * 0.37):sin() * 10
    assert.is_true(gradcheck(function(t) return (F.max_pool2d(t, 2, { stride = 1 }) ^ 2):sum() end, { a }))
    assert.is_true(gradcheck(function(t) return (F.max_pool2d(t, 3, { stride = 2, padding = 1 }) * 2):sum() end,
      { H.noncontig(a) }))
    assert.is_true(gradcheck(function(t) return (F.avg_pool2d(t, 3, { stride = 2, padding = 1 }) ^ 2):sum() end,
      { randn({ 1, 2, 5, 4 }) }))
  end)

  it("2x2 max pooling's gradient goes to each window's maximum (against loops), any index works", function()
    -- even planes tiled by windows (Wo = 9: vector steps, the last one
    -- overlapping), ties and NaNs; the weights w make each window's share distinct
    local grad, ffi, C = ember.autodiff.grad, require("ffi"), ember._C
    local N, Cc, Hh, Ww = 2, 3, 6, 18
    local vals = pool_values(N * Cc * Hh * Ww, 11)
    local Ho, Wo = Hh / 2, Ww / 2
    local wv = {}
    for i = 1, N * Cc * Ho * Wo do wv[i] = i end
    local want = {}
    for i = 1, #vals do want[i] = 0 end
    for q = 0, N * Cc - 1 do
      for oh = 0, Ho - 1 do
        for ow = 0, Wo - 1 do
          local _, at = window_max(vals, q * Hh * Ww, Ww, oh, ow)
          want[q * Hh * Ww + at + 1] = wv[(q * Ho + oh) * Wo + ow + 1]
        end
      end
    end
    local x = ember.tensor(vals):view(N, Cc, Hh, Ww)
    local w = ember.tensor(wv):view(N, Cc, Ho, Wo)
    H.same(grad(function(u) return (F.max_pool2d(u, 2) * w):sum() end)(x):reshape(-1), want, 0)

    -- indices need not be window maxima: one plane points two outputs at one
    -- input (they add up), others stay in their windows; one outside its plane is an error
    local g = ember.ones({ 1, 2, 2, 4 })
    local idx = ember.tensor({ 0, 2, 4, 6, 16, 18, 20, 22, 9, 9, 3, 14, 17, 19, 21, 23 },
      { dtype = "int64" }):view(1, 2, 2, 4)
    local out = ffi.new("ember_tensor *[1]")
    local xs = ffi.new("int64_t[4]", { 1, 2, 4, 8 })
    assert.are.equal(0, C.ember_max_pool2d_backward(g._c, idx._c, xs, out))
    local gx = ember._wrap(out[0]):reshape(-1):tolist()
    local plane2 = {}
    for i = 1, 32 do plane2[i] = 0 end
    plane2[10], plane2[4], plane2[15] = 2, 1, 1
    for _, k in ipairs({ 17, 19, 21, 23 }) do plane2[k + 1] = 1 end
    for i = 1, 32 do
      local first = (i - 1) % 2 == 0 and ((i - 1) % 16) < 8 and 1 or 0
      assert.are.equal(first, gx[i], "plane 1 at " .. i)
      assert.are.equal(plane2[i], gx[32 + i], "plane 2 at " .. i)
    end
    local bad = ember.tensor({ 0, 2, 4, 6, 16, 18, 20, 22, 9, 9, 3, 14, 17, 19, 21, 32 },
      { dtype = "int64" }):view(1, 2, 2, 4)
    assert.are_not.equal(0, C.ember_max_pool2d_backward(g._c, bad._c, xs, out))
    assert.matches("index 32 is outside a 4 x 8 plane", ffi.string(C.ember_last_error()), 1, true)
  end)

  it("have second derivatives", function()
    local grad = ember.autodiff.grad
    local a = (ember.arange(32, F64):view(1, 2, 4, 4) * 0.71):sin()
    assert.is_true(gradcheck(function(t) return ember.enable_grad(function()
      local g = grad(function(u) return (F.max_pool2d(u, 2) ^ 3):sum() end)(t)
      return (g * t):sum()
    end) end, { a }))
    assert.is_true(gradcheck(function(t) return ember.enable_grad(function()
      local g = grad(function(u) return (F.avg_pool2d(u, 2) ^ 3):sum() end)(t)
      return (g * t):sum()
    end) end, { a }))
  end)

  it("name the problem on bad input", function()
    local ok, err = pcall(F.max_pool2d, ember.zeros({ 4, 4 }), 2)
    assert.truthy(err:find("max_pool2d", 1, true) and err:find("4-D", 1, true))
    ok, err = pcall(F.avg_pool2d, ember.zeros({ 1, 1, 4, 4 }), 2, { padding = 2 })
    assert.truthy(err:find("at most half", 1, true))
    ok, err = pcall(F.max_pool2d, ember.zeros({ 1, 1, 1, 1 }), 2)
    assert.truthy(err:find("smaller than", 1, true))
    ok, err = pcall(F.max_pool2d, ember.zeros({ 1, 1, 4, 4 }), "2")
    assert.is_false(ok)
  end)
end)

describe("activations, normalisation and embedding", function()
  it("relu, gelu, softmax and log_softmax", function()
    local x = ember.tensor({ -1, 0, 2 }, F64)
    H.same(F.relu(x), { 0, 0, 2 }, 0)
    -- gelu(x) = x Phi(x): Phi(-1) = 0.158655254, Phi(2) = 0.977249868
    H.same(F.gelu(x), { -0.158655254, 0, 1.954499736 }, 1e-8)
    local e = { math.exp(-1), 1, math.exp(2) }
    local z = e[1] + e[2] + e[3]
    H.same(F.softmax(x, 1), { e[1] / z, e[2] / z, e[3] / z }, 1e-12)
    H.same(F.log_softmax(x, 1), { -1 - math.log(z), -math.log(z), 2 - math.log(z) }, 1e-12)
  end)

  it("dropout is seeded, scales by 1/(1-p) and is the identity in eval", function()
    local x = ember.ones({ 1000 }, F64)
    ember.manual_seed(11)
    local a = F.dropout(x, 0.25)
    ember.manual_seed(11)
    local b = F.dropout(x, 0.25)
    H.same(a, b:tolist(), 0)
    local kept = a:gt(0):sum():item()
    assert.is_true(kept > 700 and kept < 800)
    H.same(a:max(), 1 / 0.75, 1e-12)
    assert.are.equal(x, F.dropout(x, 0.25, false))
    assert.has_error(function() F.dropout(x, 1.5) end)
  end)

  it("layer_norm by hand and by gradcheck", function()
    local x = ember.tensor({ { 1, 2, 3 }, { 2, 2, 2 } }, F64)
    -- row 1: mean 2, var 2/3
    local s = 1 / math.sqrt(2 / 3 + 1e-5)
    H.same(F.layer_norm(x, { 3 }), { { -s, 0, s }, { 0, 0, 0 } }, 1e-9)
    local w, b = ember.tensor({ 1, 2, 3 }, F64), ember.tensor({ 0, 1, 0 }, F64)
    H.same(F.layer_norm(x, 3, w, b), { { -s, 1, 3 * s }, { 0, 1, 0 } }, 1e-9)
    ember.manual_seed(9)
    assert.is_true(gradcheck(function(t, ww, bb) return (F.layer_norm(t, { 2, 3 }, ww, bb) ^ 2 * t):sum() end,
      { randn({ 2, 2, 3 }), randn({ 2, 3 }), randn({ 2, 3 }) }))
    assert.has_error(function() F.layer_norm(x, { 4 }) end,
      "ember.nn.functional.layer_norm: input {2, 3} does not end with normalized_shape {4}")
  end)

  it("batch_norm uses batch statistics in training and updates the running ones", function()
    local x = ember.tensor({ { 1, 10 }, { 3, 20 } }, F64)   -- (N = 2, C = 2)
    local rm, rv = ember.zeros({ 2 }, F64), ember.ones({ 2 }, F64)
    local y = F.batch_norm(x, rm, rv, nil, nil, { training = true, momentum = 0.1 })
    local a = 1 / math.sqrt(1 + 1e-5)       -- channel 1: mean 2, biased var 1
    local b = 5 / math.sqrt(25 + 1e-5)      -- channel 2: mean 15, biased var 25
    H.same(y, { { -a, -b }, { a, b } }, 1e-9)
    H.same(rm, { 0.2, 1.5 }, 1e-12)
    H.same(rv, { 0.9 + 0.1 * 2, 0.9 + 0.1 * 50 }, 1e-12)   -- unbiased variances 2 and 50
    local e = F.batch_norm(x, rm, rv, nil, nil, { training = false })
    H.same(e, { { (1 - 0.2) / math.sqrt(1.1 + 1e-5), (10 - 1.5) / math.sqrt(5.9 + 1e-5) },
      { (3 - 0.2) / math.sqrt(1.1 + 1e-5), (20 - 1.5) / math.sqrt(5.9 + 1e-5) } }, 1e-9)
    ember.manual_seed(10)
    assert.is_true(gradcheck(function(t, w, bb)
      return (F.batch_norm(t, nil, nil, w, bb, { training = true }) ^ 3):sum()
    end, { randn({ 3, 2, 2, 2 }), randn({ 2 }), randn({ 2 }) }))
  end)

  it("embedding looks up 1-based rows", function()
    local w = ember.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, F64)
    local idx = ember.tensor({ { 3, 1 }, { 2, 2 } }, { dtype = "int64" })
    H.same(F.embedding(idx, w), { { { 5, 6 }, { 1, 2 } }, { { 3, 4 }, { 3, 4 } } }, 0, { 2, 2, 2 })
    assert.is_true(gradcheck(function(ww) return (F.embedding(idx, ww) ^ 2):sum() end, { w }))
    assert.has_error(function() F.embedding(ember.tensor({ 1.5 }), w) end,
      "ember.nn.functional.embedding: indices must be int64 or int32, got float32")
  end)
end)

describe("losses", function()
  local logits = ember.tensor({ { 1, 2, 3 }, { 1, 0, 0 } }, F64)
  local labels = ember.tensor({ 3, 1 }, { dtype = "int64" })
  local l1 = math.log(math.exp(1) + math.exp(2) + math.exp(3)) - 3
  local l2 = math.log(math.exp(1) + 2) - 1

  it("cross_entropy takes 1-based labels and reduces by mean", function()
    H.same(F.cross_entropy(logits, labels), (l1 + l2) / 2, 1e-12)
    H.same(F.cross_entropy(logits, labels, { reduction = "sum" }), l1 + l2, 1e-12)
    H.same(F.cross_entropy(logits, labels, { reduction = "none" }), { l1, l2 }, 1e-12)
    H.same(F.cross_entropy(logits, labels:int()), (l1 + l2) / 2, 1e-12)
    -- a class dim followed by spatial dims: (N, C, L)
    local x3 = logits:view(1, 2, 3):transpose(2, 3)   -- (1, 3, 2): two positions
    H.same(F.cross_entropy(x3, labels:view(1, 2), { reduction = "none" }), { { l1, l2 } }, 1e-12)
    -- ignore_index and class weights as in PyTorch
    H.same(F.cross_entropy(logits, ember.tensor({ 3, -100 }, { dtype = "int64" }), { ignore_index = -100 }), l1, 1e-12)
    local w = ember.tensor({ 2, 1, 0.5 }, F64)
    H.same(F.cross_entropy(logits, labels, { weight = w }), (0.5 * l1 + 2 * l2) / 2.5, 1e-12)
    -- label smoothing 0.1: (1 - 0.1) nll + 0.1 mean(-log p)
    local lp1 = { 1 - 3 - l1, 2 - 3 - l1, -l1 }
    local lp2 = { -l2, -1 - l2, -1 - l2 }
    local s1 = 0.9 * l1 - 0.1 * (lp1[1] + lp1[2] + lp1[3]) / 3
    local s2 = 0.9 * l2 - 0.1 * (lp2[1] + lp2[2] + lp2[3]) / 3
    H.same(F.cross_entropy(logits, labels, { label_smoothing = 0.1 }), (s1 + s2) / 2, 1e-12)
  end)

  it("cross_entropy gradient is softmax minus one-hot", function()
    assert.is_true(gradcheck(function(x) return F.cross_entropy(x, labels) end, { logits:clone() }))
    local gm = ember.autodiff.GradManager()
    local x = logits:clone()
    gm:attach({ x })
    gm:record()
    local loss = F.cross_entropy(x, labels, { reduction = "sum" })
    gm:backward(loss)
    local p = x:softmax(2):tolist()
    H.same(x.grad, { { p[1][1], p[1][2], p[1][3] - 1 }, { p[2][1] - 1, p[2][2], p[2][3] } }, 1e-12)
  end)

  it("names a label out of range", function()
    assert.has_error(function() F.cross_entropy(logits, ember.tensor({ 3, 0 }, { dtype = "int64" })) end,
      "ember.nn.functional.cross_entropy: label 0 is out of range 1..3 (labels are 1-based class indices)")
    assert.has_error(function() F.cross_entropy(logits, ember.tensor({ 4, 1 }, { dtype = "int64" })) end,
      "ember.nn.functional.cross_entropy: label 4 is out of range 1..3 (labels are 1-based class indices)")
    local ok, err = pcall(F.cross_entropy, logits, ember.tensor({ 1, 2, 3 }, { dtype = "int64" }))
    assert.truthy(err:find("{2, 3}", 1, true) and err:find("{3}", 1, true))
    ok, err = pcall(F.cross_entropy, logits, ember.tensor({ 1, 2 }))
    assert.truthy(err:find("int64", 1, true))
  end)

  it("nll_loss and mse_loss", function()
    local lp = logits:log_softmax(2)
    H.same(F.nll_loss(lp, labels), (l1 + l2) / 2, 1e-12)
    local a, b = ember.tensor({ 1, 2, 4 }, F64), ember.tensor({ 0, 2, 1 }, F64)
    H.same(F.mse_loss(a, b), 10 / 3, 1e-12)
    H.same(F.mse_loss(a, b, { reduction = "sum" }), 10, 1e-12)
    H.same(F.mse_loss(a, b, { reduction = "none" }), { 1, 0, 9 }, 1e-12)
    assert.has_error(function() F.mse_loss(a, b, { reduction = "avg" }) end)
  end)

  it("scaled dot-product attention with a causal mask", function()
    local q = ember.tensor({ { 1, 0 }, { 0, 1 } }, F64)
    local out, attn = F.scaled_dot_product_attention(q, q, ember.tensor({ { 1, 2 }, { 3, 4 } }, F64), { is_causal = true })
    local e = math.exp(-1 / math.sqrt(2))    -- row 2 scores: 0 and 1/sqrt(2)
    local p = 1 / (1 + e)
    H.same(attn, { { 1, 0 }, { 1 - p, p } }, 1e-12)
    H.same(out, { { 1, 2 }, { (1 - p) * 1 + p * 3, (1 - p) * 2 + p * 4 } }, 1e-12)
  end)
end)
