-- The batch_norm op (F.batch_norm in training, nn.BatchNorm*d) and its
-- adjoint: values and statistics against a per-channel loop in Lua (the
-- independent method), the fused CPU kernels against the composed path (the
-- same op on strided inputs), gradients by finite differences to second
-- order, the statistics' own gradient, and bad input.
local H = require("helpers")
local ember = H.ember
local ffi = require("ffi")
local F = ember.nn.functional
local C = ember._C
local F64 = { dtype = "float64" }

-- per channel: mean, biased var and y, from nested loops over x as a flat
-- (N, C, S) list
local function reference(x, w, b, eps)
  local shape = x:shape()
  local N, Cn = shape[1], shape[2]
  local S = x:numel() / (N * Cn)
  local flat = x:contiguous():view(-1):tolist()
  local W, B = w:tolist(), b:tolist()
  local y, mean, var = {}, {}, {}
  for c = 1, Cn do
    local s, M = 0, N * S
    for n = 0, N - 1 do for i = 1, S do s = s + flat[(n * Cn + c - 1) * S + i] end end
    mean[c] = s / M
    local v = 0
    for n = 0, N - 1 do for i = 1, S do v = v + (flat[(n * Cn + c - 1) * S + i] - mean[c]) ^ 2 end end
    var[c] = v / M
    for n = 0, N - 1 do
      for i = 1, S do
        local k = (n * Cn + c - 1) * S + i
        y[k] = (flat[k] - mean[c]) / math.sqrt(var[c] + eps) * W[c] + B[c]
      end
    end
  end
  return y, mean, var
end

local out2 = ffi.new("ember_tensor*[2]")
local check = H.check_rc
local function bn(x, w, b, eps)
  check(C.ember_batch_norm(x._c, w._c, b._c, eps or 1e-5, out2, out2 + 1))
  return ember._wrap(out2[0]), ember._wrap(out2[1])
end

local max_diff = H.max_diff

describe("batch_norm", function()
  for _, case in ipairs({ { "float64", { 4, 3, 5, 6 }, 1e-12 }, { "float32", { 8, 5, 7, 9 }, 2e-6 },
    { "float64", { 6, 4 }, 1e-12 }, { "float32", { 3, 2, 4, 3, 5 }, 2e-6 }, { "float32", { 2, 3, 37 }, 2e-6 } }) do
    local dt, shape, tol = case[1], case[2], case[3]
    it(("gives the per-channel loop's y, mean and biased variance (%s, {%s})"):format(dt, table.concat(shape, ", ")),
      function()
        ember.manual_seed(#shape)
        local x = (ember.randn(shape, F64) * 3 + 1.5):to(dt)
        local w, b = ember.randn({ shape[2] }, F64):to(dt), ember.randn({ shape[2] }, F64):to(dt)
        local y, stats = bn(x, w, b, 1e-5)
        local ry, rm, rv = reference(x:to("float64"), w:to("float64"), b:to("float64"), 1e-5)
        assert.are.same(shape, y:shape())
        assert.are.same({ 2, shape[2] }, stats:shape())
        assert.are.equal(dt, y.dtype)
        assert.is_true(max_diff(y:contiguous():view(-1), ember.tensor(ry, F64)) <= tol * 10)
        assert.is_true(max_diff(stats[1], ember.tensor(rm, F64)) <= tol * 10)
        assert.is_true(max_diff(stats[2], ember.tensor(rv, F64)) <= tol * 100)
      end)
  end

  it("agrees between the fused kernels, strided operands and the composed path", function()
    ember.manual_seed(3)
    for _, dt in ipairs({ "float32", "float64" }) do
      local tol = dt == "float32" and 1e-5 or 1e-12
      local x = ember.randn({ 6, 4, 5, 3 }, F64):to(dt):transpose(3, 4)   -- (6, 4, 3, 5), strided
      assert.is_false(x:is_contiguous())
      -- w and b hold float32 values, so that the float32 and float64 copies are equal
      local w, b = ember.randn({ 4 }):to(dt), ember.randn({ 4 }):to(dt)
      local g = ember.randn({ 6, 4, 5, 3 }, F64):to(dt):transpose(3, 4)
      local function both(xx, ww, bb, gg)
        local y, st = bn(xx, ww, bb)
        check(C.ember_batch_norm_backward(gg._c, xx._c, ww._c, st._c, 1e-5, out2, out2 + 1))
        return { y, st, ember._wrap(out2[0]), ember._wrap(out2[1]) }
      end
      local fused = both(x:contiguous(), w, b, g:contiguous())
      local strided = both(x, w, b, g)
      -- weights of another dtype take the composed path (float32 ones keep a float64 x's dtype)
      local other = dt == "float32" and "float64" or "float32"
      local composed = both(x, w:to(other), b:to(other), g)
      for i = 1, 4 do
        assert.is_true(max_diff(fused[i], strided[i]) <= tol * 10, "strided " .. i)
        assert.is_true(max_diff(fused[i], composed[i]) <= tol * 100, "composed " .. i)
      end
    end
  end)

  -- float32's statistics in one pass (runs of about 4096 values, or 65536 in
  -- the column kernels, combined pairwise) against float64's two passes over
  -- the same values: channels of over 131072 values in runs cut inside a
  -- sample and of several samples, and a smaller one (two passes); runs of
  -- rows in the column kernels (S < 32: (N, C), channels_last) and one run
  -- there (its two passes); a mean large beside the spread, where a sum of
  -- squares would cancel
  for _, case in ipairs({ { { 2, 2, 300, 300 }, false }, { { 40, 2, 4111 }, false }, { { 300, 2, 500 }, false },
    { { 3, 2, 65, 70 }, false },
    { { 30000, 3 }, false }, { { 64, 4, 30, 30 }, true }, { { 40, 24, 7, 9 }, true } }) do
    local shape, cl = case[1], case[2]
    it(("float32's one-pass statistics agree with float64's two passes ({%s}%s)"):format(table.concat(shape, ", "),
      cl and ", channels_last" or ""), function()
      ember.manual_seed(#shape + 20)
      for _, spread in ipairs({ { 50, 2 }, { 3000, 0.1 } }) do
        local x = (ember.randn(shape, F64) * spread[2] + spread[1]):to("float32")
        if cl then x = x:contiguous({ memory_format = "channels_last" }) end
        local w, b = ember.randn({ shape[2] }), ember.randn({ shape[2] })
        local y, stats = bn(x, w, b)
        local y64, stats64 = bn(x:to("float64"), w:to("float64"), b:to("float64"))
        local var = spread[2] ^ 2
        assert.is_true(max_diff(stats[1], stats64[1]) <= spread[1] * 2 ^ -23, "mean")
        assert.is_true(max_diff(stats[2], stats64[2]) <= var * 1e-5, "variance")
        -- y's float32 shift b - mean scale rounds at mean / spread
        assert.is_true(max_diff(y, y64) <= 1e-5 * (1 + spread[1] / spread[2]), "y")
      end
    end)
  end

  it("backward gives x's, w's and b's gradients: finite differences, first and second order", function()
    ember.manual_seed(11)
    local x, w, b = ember.randn({ 3, 2, 2, 3 }, F64), ember.randn({ 2 }, F64), ember.randn({ 2 }, F64)
    local r = ember.randn({ 3, 2, 2, 3 }, F64)
    local function f(x_, w_, b_) return F.batch_norm(x_, nil, nil, w_, b_, { training = true }) end
    assert.is_true(ember.autodiff.gradcheck(function(...) return (f(...) ^ 3 * r):sum() end, { x, w, b }))
    assert.is_true(ember.autodiff.gradgradcheck(f, { x, w, b }))
  end)

  it("backward through the statistics output adds their gradient", function()
    ember.manual_seed(12)
    local x, w, b = ember.randn({ 4, 3, 5 }, F64), ember.randn({ 3 }, F64), ember.randn({ 3 }, F64)
    local cm, cv = ember.randn({ 3 }, F64), ember.randn({ 3 }, F64)
    local function loss(x_, w_, b_)
      local y, stats = bn(x_, w_, b_)
      return (y * y):sum() + (stats[1] * cm):sum() + (stats[2] * cv):sum()
    end
    assert.is_true(ember.autodiff.gradcheck(loss, { x, w, b }))
    -- and the statistics alone (y unused: its gradient is the engine's zeros)
    assert.is_true(ember.autodiff.gradcheck(function(x_)
      local _, stats = bn(x_, w, b)
      return (stats[2] * cv):sum()
    end, { x }))
  end)

  it("trains nn.BatchNorm2d: the fused path's step equals the composed path's", function()
    ember.manual_seed(13)
    local x = ember.randn({ 8, 3, 4, 4 })
    local function grads(input)
      local m = ember.nn.BatchNorm2d(3)
      local params = m:parameters()
      local gm = ember.autodiff.GradManager():attach(params)
      gm:record()
      local y = m(input)
      gm:backward((y * y * y):mean())
      return y, params[1].grad, params[2].grad, m.running_mean, m.running_var
    end
    local a = { grads(x) }
    local b = { grads(x:transpose(3, 4):contiguous():transpose(3, 4)) }   -- same values, strided: composed
    for i = 1, 5 do assert.is_true(max_diff(a[i], b[i]) <= 1e-5, "result " .. i) end
  end)

  it("refuses bad shapes, dtypes and eps with the op's name and the shapes", function()
    local x = ember.randn({ 4, 3, 2 })
    local w3, w4 = ember.randn({ 3 }), ember.randn({ 4 })
    assert.has_error(function() bn(x, w4, w3) end,
      "batch_norm: weight {4} and bias {3} must be {3} for input {4, 3, 2}")
    assert.has_error(function() bn(ember.randn({ 3 }), w3, w3) end,
      "batch_norm: input must have at least 2 dims (N, C, ...), got {3}")
    assert.has_error(function() bn(ember.ones({ 4, 3 }, { dtype = "int32" }), w3, w3) end,
      "batch_norm: expected floating tensors, got input int32, weight float32 and bias float32")
    assert.has_error(function() bn(x, w3, w3, -1) end, "batch_norm: eps must be >= 0, got -1")
    assert.has_error(function() bn(ember.randn({ 0, 3 }), w3, w3) end,
      "batch_norm: input {0, 3} has no values per channel")
    local _, stats = bn(x, w3, w3)
    assert.has_error(function()
      check(C.ember_batch_norm_backward(ember.randn({ 4, 3 })._c, x._c, w3._c, stats._c, 1e-5, out2, out2 + 1))
    end, "batch_norm_backward: gradient {4, 3}, input {4, 3, 2} and stats {2, 3} do not match " ..
      "(the gradient as the input, stats {2, 3})")
    -- everything still works afterwards
    local y = bn(x, w3, w3)
    assert.are.same({ 4, 3, 2 }, y:shape())
  end)
end)
