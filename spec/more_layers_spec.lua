-- ember.nn's activations, pooling options and 1-D/3-D pooling, adaptive
-- pooling, conv3d, conv_transpose1d, pixel (un)shuffle and embedding's
-- padding_idx and max_norm (activation.lua, pool.lua, conv3d.lua, shape.lua)
-- against PyTorch 1.13 (spec/fixtures/more_layers_torch.lua, written by
-- gen_more_layers.py): values, indices and gradients in float64; gradcheck
-- and gradgradcheck; the modules; NaN; bad arguments.
local H = require("helpers")
local ember = H.ember
local nn, F = ember.nn, ember.nn.functional
local GradManager = ember.autodiff.GradManager
local CASES = dofile("spec/fixtures/more_layers_torch.lua")

local F64 = { dtype = "float64" }
local function randn(shape) return ember.randn(shape, F64) end

local function args(c) return unpack(c.pos, 1, table.maxn(c.pos)) end
local CONVS = { conv3d = true, conv_transpose1d = true }

local function run(c)
  local t, attach = {}, {}
  for name, v in pairs(c.tensors) do
    local int = name == "i"
    t[name] = ember.tensor(v, { dtype = int and "int64" or "float64" })
    if c.grads[name] then attach[#attach + 1] = t[name] end
  end
  local gm = GradManager()
  gm:attach(attach)
  gm:record()
  local out, idx
  if c.fn == "prelu" then out = F.prelu(t.x, t.w)
  elseif c.fn == "embedding" then out = F.embedding(t.i, t.w, args(c))
  elseif CONVS[c.fn] then out = F[c.fn](t.x, t.w, t.b, args(c))
  else out, idx = F[c.fn](t.x, args(c)) end
  gm:backward((out * ember.tensor(c.cot, F64)):sum())
  return out, idx, t
end

describe("more layers against PyTorch 1.13 in float64", function()
  for _, c in ipairs(CASES) do
    it(c.name, function()
      local out, idx, t = run(c)
      H.same(out, c.out, 1e-10, c.shape)
      if c.indices then
        assert.is_not_nil(idx)
        assert.are.equal("int64", idx.dtype)
        H.same(idx, c.indices, 0)
      end
      for name, g in pairs(c.grads) do H.same(t[name].grad, g, 1e-10) end
      for name, v in pairs(c.after or {}) do H.same(t[name], v, 1e-10) end
    end)
  end
end)

describe("second derivatives and finite differences", function()
  local check = H.gradchecks
  -- values away from every kink (0, the hardtanh bounds, +-3)
  local function smooth(shape)
    local x = randn(shape)
    return x + ember.where(x:abs():lt(0.2), 0.5, 0)
  end

  it("the smooth activations", function()
    local x = smooth({ 2, 3, 4 })
    for _, f in ipairs({ F.elu, F.selu, F.celu, F.softplus, F.softsign, F.mish, F.logsigmoid, F.leaky_relu,
      F.hardswish }) do
      check(function(t) return f(t) end, { x })
    end
    check(function(t) return F.softplus(t, 2, 1) end, { x })
    check(function(t) return F.glu(t, 3) end, { x })
    check(function(t, w) return F.prelu(t, w) end, { x, ember.tensor({ 0.1, -0.2, 0.3 }, F64) })
  end)

  it("pooling with ceil_mode, count_include_pad, dilation and adaptive windows", function()
    local x = randn({ 1, 2, 5, 6 })
    check(function(t) return F.avg_pool2d(t, 3, 2, 1, true, false) end, { x })
    check(function(t) return F.max_pool2d(t, 2, 2, 1, 1, true) end, { x })
    check(function(t) return F.max_pool1d(t, 3, 1, 0, 2) end, { randn({ 1, 2, 7 }) })
    check(function(t) return F.avg_pool3d(t, 2, 1, 1, true, false) end, { randn({ 1, 1, 3, 3, 2 }) })
    check(function(t) return F.adaptive_max_pool2d(t, { 2, 4 }) end, { x })
    check(function(t) return F.adaptive_avg_pool3d(t, { 2, 2, 3 }) end, { randn({ 1, 1, 3, 4, 5 }) })
  end)

  -- (embedding's padding_idx is no derivative: its row's gradient is 0 by design, as PyTorch's)
  it("pixel_shuffle and pixel_unshuffle", function()
    check(function(t) return F.pixel_shuffle(t, 2) end, { randn({ 1, 8, 2, 3 }) })
    check(function(t) return F.pixel_unshuffle(t, 2) end, { randn({ 1, 2, 4, 2 }) })
  end)

  it("conv3d and conv_transpose1d", function()
    check(function(x, w, b) return F.conv3d(x, w, b, 2, 1, 1, 2) end,
      { randn({ 1, 2, 3, 4, 3 }), randn({ 2, 1, 2, 2, 2 }), randn({ 2 }) })
    check(function(x, w, b) return F.conv_transpose1d(x, w, b, 2, 1, 1) end,
      { randn({ 1, 2, 4 }), randn({ 2, 3, 3 }), randn({ 3 }) })
  end)
end)

describe("activations", function()
  it("propagate NaN and take inplace as PyTorch", function()
    local nan = 0 / 0
    local x = ember.tensor({ nan, -1, 2 }, F64)
    for _, name in ipairs({ "leaky_relu", "elu", "selu", "celu", "relu6", "hardtanh", "hardswish", "hardsigmoid",
      "softplus", "softsign", "mish", "logsigmoid" }) do
      local y = F[name](x)
      assert.is_true(y:tolist()[1] ~= y:tolist()[1], name)
    end
    local y = ember.tensor({ -2, 3 }, F64)
    local r = F.leaky_relu(y, 0.5, true)
    assert.are.equal(y, r)
    H.same(y, { -1, 3 }, 0)
    F.relu6(y, { inplace = true })
    H.same(y, { 0, 3 }, 0)
    -- recorded: the gradient flows through the write, d/dx elu(2x) = 2 exp(2x) for x < 0
    local x0 = ember.tensor({ -0.5, 1 }, F64)
    local gm = GradManager()
    gm:attach({ x0 })
    gm:record()
    local t = x0 * 2
    assert.are.equal(t, F.elu(t, 1, true))
    gm:backward(t:sum())
    H.same(x0.grad, { 2 * math.exp(-1), 2 }, 1e-15)
  end)

  it("keep float32 and read non-contiguous inputs", function()
    local x32 = H.noncontig(ember.randn({ 3, 4 }))
    local x64 = x32:to("float64")
    for _, name in ipairs({ "leaky_relu", "elu", "selu", "celu", "relu6", "hardtanh", "hardswish", "hardsigmoid",
      "softplus", "softsign", "mish", "logsigmoid", "glu" }) do
      local y = F[name](x32)
      assert.are.equal("float32", y.dtype, name)
      H.same(y, F[name](x64):tolist(), 1e-6)
    end
  end)

  it("mish is an op of its own, with second derivatives", function()
    local v = { -800, -30, -2, -0.5, 0, 0.5, 3, 30, 800 }
    local x = ember.tensor(v, F64)
    local want = {}
    -- log(1 + e), by its series where 1 + e would round
    local function log1p(e) return e < 1e-4 and e - e * e / 2 + e * e * e / 3 or math.log(1 + e) end
    for i, t in ipairs(v) do
      local sp = t > 36 and t or log1p(math.exp(t))   -- log1p(e^t) = t to double precision past 37
      want[i] = t * math.tanh(sp)
    end
    H.same(x:mish(), want, 1e-15)
    H.same(ember.mish(x), want, 1e-15)
    local y = x:clone()
    y:mish_()
    H.same(y, want, 1e-15)
    H.same(x:to("float32"):mish(), want, 1e-6)
    local nan = ember.tensor({ 0 / 0 }, F64)
    assert.is_true(nan:mish():item() ~= nan:mish():item())
    -- integers promote to float32, as the other float ops
    assert.are.equal("float32", ember.tensor({ 1, -2 }, { dtype = "int64" }):mish().dtype)
    local z = randn({ 2, 5 }) * 3
    H.gradchecks(function(t) return t:mish() end, { z })
    -- the rule far out: 1 past the overflow of e^x, 0 below it
    local far = ember.tensor({ -800, 800 }, F64)
    local gm = GradManager()
    gm:attach({ far })
    gm:record()
    gm:backward(far:mish():sum())
    H.same(far.grad, { 0, 1 }, 0)
  end)

  it("hardtanh's gradient is 0 at its bounds and hardswish's -0.5 at -3, as PyTorch's", function()
    local x = ember.tensor({ -1, 1, -3, 3 }, F64)
    local gm = GradManager()
    gm:attach({ x })
    gm:record()
    gm:backward((F.hardtanh(x:narrow(1, 1, 2)) + F.hardswish(x:narrow(1, 3, 2))):sum())
    H.same(x.grad, { 0, 0, -0.5, 1.5 }, 0)
  end)

  it("modules keep their arguments and PReLU its slopes", function()
    local m = nn.Hardtanh(-2, 2)
    assert.are.equal(-2, m.min_val)
    H.same(m(ember.tensor({ -3, 1, 5 }, F64)), { -2, 1, 2 }, 0)
    assert.are.equal(0.01, nn.LeakyReLU().negative_slope)
    H.same(nn.Softplus({ beta = 2 })(ember.tensor({ 0 }, F64)), { math.log(2) / 2 }, 1e-15)
    local p = nn.PReLU(3, 0.1, { dtype = "float64" })
    H.same(p.weight, { 0.1, 0.1, 0.1 }, 0)
    assert.are.equal(1, #p:parameters())
    H.same(p(ember.tensor({ { -1, -2, 3 } }, F64)), { { -0.1, -0.2, 3 } }, 1e-15)
    H.same(nn.GLU(1)(ember.tensor({ 1, 0 }, F64)), { 0.5 }, 1e-15)
  end)

  it("name bad arguments", function()
    local x = randn({ 2, 4 })
    H.raises(function() F.elu(x, { alpha = 1, inplac = true }) end, "elu", "unknown option 'inplac'")
    H.raises(function() F.leaky_relu(x, 0.1, false, 3) end, "ember.nn.functional.leaky_relu: extra argument 4 (3): it takes 3 (input, negative_slope, inplace), then an options table")
    H.raises(function() F.leaky_relu(x, 0.1, { negative_slope = 0.2 }) end, "negative_slope is given twice")
    H.raises(function() F.hardtanh(x, 1, -1) end, "max_val")
    H.raises(function() F.softplus(x, "2") end, "beta must be a number")
    H.raises(function() F.glu(ember.randn({ 3, 3 })) end, "glu", "odd size 3")
    H.raises(function() F.prelu(randn({ 2, 4 }), ember.ones({ 3 }, F64)) end, "prelu", "3 slopes")
    H.raises(function() F.celu(x, 0) end, "alpha must not be 0")
    H.raises(function() F.elu(ember.tensor({ 1, 2 }, { dtype = "int64" })) end, "floating point")
    H.raises(function() nn.ELU({ alfa = 1 }) end, "ember.nn.ELU", "unknown option 'alfa'")
  end)
end)

describe("pooling", function()
  it("keeps the C kernels' answers and the old forms", function()
    local x = randn({ 1, 2, 6, 6 })
    local y1, i1 = F.max_pool2d(x, 2, nil, true)
    local y2, i2 = F.max_pool2d(x, 2, { return_indices = true })
    H.same(y1, y2:tolist(), 0)
    H.same(i1, i2:tolist(), 0)
    H.same(nn.MaxPool2d(3, 2, 1)(x), F.max_pool2d(x, 3, { stride = 2, padding = 1 }):tolist(), 0)
    H.same(nn.AvgPool2d(2, { stride = 1 })(x), F.avg_pool2d(x, 2, 1):tolist(), 0)
  end)

  it("the composed and the C paths agree", function()
    local x = randn({ 2, 3, 7, 5 })
    -- dilation 1 for the kernel, a dilation the kernel does not reach for the composition
    H.same(F.max_pool2d(x, { 1, 3 }, 2, 0, { 2, 1 }), F.max_pool2d(x, { 1, 3 }, 2):tolist(), 0)
    H.same(F.avg_pool2d(x, 3, 2, 1, false, true, 9), F.avg_pool2d(x, 3, 2, 1):tolist(), 1e-14)
  end)

  it("ceil_mode's last window starts inside the input or the left padding", function()
    -- L = 5, k = 2, s = 2, p = 1: (5 + 2 - 2 + 1) / 2 + 1 = 4 windows, the 4th would start at 6 > 5 + 1 - 1
    assert.is_true(H.shape_is(F.max_pool1d(randn({ 1, 1, 5 }), 2, 2, 1, 1, true), { 1, 1, 3 }))
    assert.is_true(H.shape_is(F.max_pool1d(randn({ 1, 1, 6 }), 2, 2, 0, 1, true), { 1, 1, 3 }))
    assert.is_true(H.shape_is(F.max_pool1d(randn({ 1, 1, 7 }), 2, 2, 0, 1, true), { 1, 1, 4 }))
  end)

  it("propagates NaN", function()
    local x = randn({ 1, 1, 5, 5 })
    x[{ 1, 1, 1, 1 }] = 0 / 0
    for _, y in ipairs({ F.max_pool2d(x, 2, 2, 0, 1, true), F.max_pool2d(x, 3, 1, 0, 2),
      F.adaptive_max_pool2d(x, 2), F.max_pool3d(x:unsqueeze(3), { 1, 2, 2 }) }) do
      local v = y:reshape(-1):tolist()[1]
      assert.is_true(v ~= v)
    end
  end)

  it("modules: MaxPool's return_indices, AdaptiveMaxPool, the batch-free form", function()
    local x = randn({ 2, 5, 5 })
    local y, idx = nn.MaxPool2d(2, nil, 0, 1, true, true)(x)
    assert.is_true(H.shape_is(y, { 2, 3, 3 }))
    assert.is_true(H.shape_is(idx, { 2, 3, 3 }))
    local m = nn.MaxPool1d(3, { ceil_mode = true })
    assert.are.equal(3, m.stride)
    assert.is_true(H.shape_is(nn.AdaptiveMaxPool3d({ 2, nil, 1 })(randn({ 1, 3, 4, 5 })), { 1, 2, 4, 1 }))
    assert.is_true(H.shape_is(nn.AdaptiveAvgPool1d(3)(randn({ 2, 7 })), { 2, 3 }))
    assert.is_true(H.shape_is(nn.AvgPool3d(2)(randn({ 1, 1, 4, 4, 4 })), { 1, 1, 2, 2, 2 }))
  end)

  it("a MaxPool2d with ceil_mode, dilation or indices after a Conv2d-ReLU in a Sequential runs as itself", function()
    local conv = nn.Conv2d(1, 2, 1, { activation = "relu", dtype = "float64" })
    local x = randn({ 1, 1, 5, 5 })
    local y = nn.Sequential(conv, nn.MaxPool2d(2, { ceil_mode = true }))(x)
    assert.is_true(H.shape_is(y, { 1, 2, 3, 3 }))
    H.same(y, F.max_pool2d(conv(x), 2, 2, 0, 1, true):tolist(), 0)
    y = nn.Sequential(conv, nn.MaxPool2d(2, { dilation = 2 }))(x)
    assert.is_true(H.shape_is(y, { 1, 2, 2, 2 }))
    local v, i = nn.Sequential(conv, nn.MaxPool2d(2, { return_indices = true }))(x)
    assert.is_true(H.shape_is(v, { 1, 2, 2, 2 }))
    assert.is_nil(i)   -- Sequential passes one value on, as PyTorch's
  end)

  it("name bad arguments", function()
    local x = randn({ 1, 1, 4, 4 })
    H.raises(function() F.max_pool2d(x, 2, { ceilmode = true }) end, "max_pool2d", "unknown option 'ceilmode'")
    H.raises(function() F.max_pool2d(x, 3, 1, 2) end, "at most half")
    H.raises(function() F.avg_pool1d(x, 2) end, "avg_pool1d", "3-D (N, C, L)")
    H.raises(function() F.avg_pool2d(x, 2, 2, 0, false, true, 0) end, "divisor_override")
    H.raises(function() F.avg_pool1d(randn({ 1, 1, 4 }), 2, 2, 0, false, true, 3) end, "avg_pool1d: extra argument 7 (3)")
    H.raises(function() F.max_pool3d(randn({ 1, 1, 1, 4, 4 }), 2) end, "smaller than")
    H.raises(function() F.adaptive_max_pool2d(x, 0) end, "output_size")
    H.raises(function() nn.MaxPool2d(2, { strides = 1 }) end, "ember.nn.MaxPool2d", "unknown option 'strides'")
    H.raises(function() F.max_pool2d(x, math.huge) end, "kernel_size must be an integer")
    H.raises(function() F.avg_pool2d(x, 2, 0 / 0) end, "stride must be an integer")
    H.raises(function() nn.MaxPool1d(2)(randn({ 1, 4 }), 3) end, "ember.nn.MaxPool1d:forward: extra argument 2 (3): it takes 1 (x)")
    -- {nil, 3} is an output size (nil keeps the height), not an options table
    assert.is_true(H.shape_is(F.adaptive_max_pool2d(x, { nil, 3 }), { 1, 1, 4, 3 }))
  end)
end)

describe("conv3d, conv_transpose1d and the shape layers", function()
  it("modules have PyTorch's parameter shapes and options", function()
    local c = nn.Conv3d(4, 6, { 3, 1, 2 }, 2, 1, 1, 2, false, { dtype = "float64" })
    assert.is_true(H.shape_is(c.weight, { 6, 2, 3, 1, 2 }))
    assert.is_nil(c.bias)
    assert.is_true(H.shape_is(c(randn({ 1, 4, 5, 5, 5 })), { 1, 6, 3, 4, 3 }))
    local t = nn.ConvTranspose1d(4, 6, 3, { stride = 2, output_padding = 1, groups = 2, dtype = "float64" })
    assert.is_true(H.shape_is(t.weight, { 4, 3, 3 }))
    assert.is_true(H.shape_is(t(randn({ 2, 4, 5 })), { 2, 6, 12 }))
    assert.is_true(H.shape_is(t(randn({ 4, 5 })), { 6, 12 }))
    H.raises(function() nn.Conv3d(4, 6, 3, { padding_mode = "zeros" }) end, "unknown option 'padding_mode'")
    H.raises(function() F.conv3d(randn({ 1, 3, 4, 4, 4 }), randn({ 2, 2, 2, 2, 2 })) end, "conv3d", "3 channels")
    H.raises(function() F.conv_transpose1d(randn({ 1, 2, 4 }), randn({ 2, 1, 3 }), nil, 1, 0, 1) end,
      "output_padding")
    H.raises(function() F.conv_transpose1d(randn({ 1, 3, 4 }), randn({ 2, 1, 3 })) end,
      "conv_transpose1d", "3 channels")
    H.raises(function() F.conv3d(randn({ 1, 2, 4, 4, 4 }), randn({ 2, 2, 2, 2, 2 }), nil, { padding = "same" }) end,
      "padding must be")
  end)

  it("conv3d and conv_transpose1d cast to autocast's dtype, as the other convolutions", function()
    local y = ember.autocast("bfloat16", function() return F.conv3d(ember.randn({ 1, 2, 3, 3, 3 }), ember.randn({ 2, 2, 2, 2, 2 })) end)
    assert.are.equal("bfloat16", y.dtype)
    y = ember.autocast("bfloat16", function() return F.conv_transpose1d(ember.randn({ 1, 2, 4 }), ember.randn({ 2, 3, 3 })) end)
    assert.are.equal("bfloat16", y.dtype)
  end)

  it("PixelShuffle inverts PixelUnshuffle, Unflatten, channel dropout", function()
    local x = randn({ 2, 8, 4, 6 })
    H.same(nn.PixelShuffle(2)(nn.PixelUnshuffle(2)(x)), x:tolist(), 0)
    assert.is_true(H.shape_is(nn.Unflatten(2, { 2, -1 })(x), { 2, 2, 4, 4, 6 }))
    H.raises(function() nn.Unflatten(2, { 3, 3 })(x) end, "Unflatten", "does not fit")
    ember.manual_seed(3)
    local y = F.dropout2d(ember.ones({ 4, 16, 3, 3 }, F64), 0.5)
    -- each channel all zeros or all 2, about half of them zeros
    local zeros = 0
    for _, plane in ipairs(y:reshape(64, 9):tolist()) do
      for j = 2, 9 do assert.are.equal(plane[1], plane[j]) end
      assert.is_true(plane[1] == 0 or plane[1] == 2)
      if plane[1] == 0 then zeros = zeros + 1 end
    end
    assert.is_true(zeros > 16 and zeros < 48)
    H.raises(function() F.dropout2d(randn({ 3, 4, 5 })) end, "dropout2d", "ambiguous")
    local u = F.dropout1d(ember.ones({ 8, 5 }, F64), 0.5)   -- (C, L): one draw per row
    for _, row in ipairs(u:tolist()) do
      for j = 2, 5 do assert.are.equal(row[1], row[j]) end
    end
    local d = nn.Dropout1d(0.3)
    d:eval()
    H.same(d(x:reshape(2, 8, 24)), x:reshape(2, 8, 24):tolist(), 0)
    H.raises(function() F.dropout2d(x, 1.5) end, "dropout2d", "p must be")
  end)

  it("Embedding: padding_idx's row starts at zero and takes no gradient; max_norm", function()
    local e = nn.Embedding(5, 3, 2, { dtype = "float64" })
    H.same(e.weight[2], { 0, 0, 0 }, 0)
    local gm = GradManager()
    gm:attach(e:parameters())
    gm:record()
    gm:backward(e(ember.tensor({ 1, 2, 2, 4 }, { dtype = "int64" })):sum())
    H.same(e.weight.grad, { { 1, 1, 1 }, { 0, 0, 0 }, { 0, 0, 0 }, { 1, 1, 1 }, { 0, 0, 0 } }, 0)
    local m = nn.Embedding(3, 2, { max_norm = 1, dtype = "float64" })
    ember.no_grad(function() m.weight:copy_(ember.tensor({ { 3, 4 }, { 0.3, 0.4 }, { 6, 8 } }, F64)) end)
    m(ember.tensor({ 1, 2, 1 }, { dtype = "int64" }))
    H.same(m.weight, { { 0.6 / (1 + 2e-8), 0.8 / (1 + 2e-8) }, { 0.3, 0.4 }, { 6, 8 } }, 1e-12)
    H.raises(function() nn.Embedding(3, 2, 4) end, "padding_idx")
    H.raises(function() nn.Embedding(3, 2, { sparse = true }) end, "sparse")
    H.raises(function() nn.Embedding(3, 2, nil, -1) end, "max_norm must be a number >= 0")
    H.raises(function() nn.Embedding(3, 2, { norm_type = "l2" }) end, "norm_type must be a number")
    H.raises(function() nn.Embedding(3, 2, { padding = 1 }) end, "unknown option 'padding'")
    H.raises(function() F.embedding(ember.tensor({ 1 }, { dtype = "int64" }), randn({ 2, 2 }), { maxnorm = 1 }) end,
      "unknown option 'maxnorm'")
  end)
end)

describe("LSTM proj_size against PyTorch 1.13 in float64", function()
  for _, c in ipairs(dofile("spec/fixtures/lstm_proj_torch.lua")) do
    it(c.name, function()
      local opts = { dtype = "float64" }
      for k, v in pairs(c.opts) do opts[k] = v end
      local m = nn.LSTM(c.input_size, c.hidden_size, opts)
      -- PyTorch's parameter names, in PyTorch's order, with its shapes
      local names = {}
      for name in m:named_parameters() do names[#names + 1] = name end
      assert.are.same(c.names, names)
      local sd = {}
      for k, v in pairs(c.state) do sd[k] = ember.tensor(v, F64) end
      m:load_state_dict(sd)
      local x, h0, c0 = ember.tensor(c.x, F64), ember.tensor(c.h0, F64), ember.tensor(c.c0, F64)
      local gm = GradManager()
      local attach = { x, h0, c0 }
      for _, p in ipairs(m:parameters()) do attach[#attach + 1] = p end
      gm:attach(attach)
      gm:record()
      local out, state = m(x, { h0, c0 })
      local cot = function(i) return ember.tensor(c.cots[i], F64) end
      gm:backward((out * cot(1)):sum() + (state[1] * cot(2)):sum() + (state[2] * cot(3)):sum())
      H.same(out, c.out, 1e-10)
      H.same(state[1], c.hn, 1e-10)
      H.same(state[2], c.cn, 1e-10)
      H.same(x.grad, c.gx, 1e-10)
      H.same(h0.grad, c.gh0, 1e-10)
      H.same(c0.grad, c.gc0, 1e-10)
      for name, p in m:named_parameters() do H.same(p.grad, c.grads[name], 1e-10) end
    end)
  end

  it("checks proj_size and the states' shapes", function()
    H.raises(function() nn.LSTM(3, 4, { proj_size = 4 }) end, "proj_size 4 must be smaller than hidden_size 4")
    H.raises(function() nn.GRU(3, 4, { proj_size = 2 }) end, "only supported for LSTM")
    local m = nn.LSTM(3, 4, { proj_size = 2, dtype = "float64" })
    local out, state = m(randn({ 5, 3 }))
    assert.is_true(H.shape_is(out, { 5, 2 }))
    assert.is_true(H.shape_is(state[1], { 1, 2 }))
    assert.is_true(H.shape_is(state[2], { 1, 4 }))
    H.raises(function() m(randn({ 5, 1, 3 }), { randn({ 1, 1, 4 }), randn({ 1, 1, 4 }) }) end, "h_0", "{1, 1, 2}")
  end)
end)
