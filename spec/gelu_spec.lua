-- gelu's float32 kernels against float64 (ops/elementwise.c, formulas.h):
-- the exact form's float32 kernel evaluates erf as a rational x P(x^2) /
-- Q(x^2) in plain multiplies and adds (no exp), within a stated bound of the
-- float64 gelu of the same float32 inputs; float64 keeps libm's erf.
local H = require("spec.helpers")
local ember = H.ember
local F = ember.nn.functional

-- the error of y in units in the last place of the float32 nearest to ref
local function ulps(y, ref)
  local _, e = math.frexp(ref)
  return math.abs(y - ref) / math.ldexp(1, e - 24)
end

-- a dense grid over [-12, 12] (float32 gelu is 0 or x beyond) and the tails
local function grid()
  local t, n = {}, 240001
  for i = 1, n do t[i] = -12 + 24 * (i - 1) / (n - 1) end
  for _, v in ipairs({ 1e-30, 1e-10, 1e-4, 20, 100, 1e4, 1e30, 3.4e38 }) do
    t[#t + 1] = v
    t[#t + 1] = -v
  end
  return t
end

describe("gelu in float32, the exact form", function()
  local x = ember.tensor(grid(), { dtype = "float32" })
  local xs = x:to("float64"):tolist()
  local ref = F.gelu(x:to("float64")):tolist()   -- libm's erf, in double
  local y = F.gelu(x):to("float64"):tolist()

  it("is within 6 ulp of the float64 gelu for x >= -1, within 2.7e-7 |x| everywhere", function()
    -- (below -1, 1 + erf(x / sqrt 2) cancels: the error is absolute, as in
    -- PyTorch's kernel, 2.5e-7 |x| and 9.5 ulp above -1 on this grid)
    local worst_ulp, worst_abs = 0, 0
    for i = 1, #xs do
      local a = math.abs(y[i] - ref[i])
      if xs[i] ~= 0 then worst_abs = math.max(worst_abs, a / math.abs(xs[i])) end
      if xs[i] >= -1 and ref[i] ~= 0 then worst_ulp = math.max(worst_ulp, ulps(y[i], ref[i])) end
    end
    assert.is_true(worst_ulp <= 6, "worst ulp " .. worst_ulp)
    assert.is_true(worst_abs <= 2.7e-7, "worst |error| / |x| " .. worst_abs)
  end)

  it("is exact at the ends: x beyond 5.7 gives x, below -12 a zero of x's sign", function()
    for i = 1, #xs do
      if xs[i] >= 5.7 then assert.are.equal(xs[i], y[i]) end
      if xs[i] < -12 then
        assert.are.equal(0, y[i])
        assert.are.equal(-math.huge, 1 / y[i])
      end
    end
  end)

  it("keeps -0, inf and NaN as the float64 form does", function()
    local s = ember.tensor({ H.neg_zero, 0, math.huge, -math.huge, 0 / 0 }, { dtype = "float32" })
    local r = F.gelu(s):to("float64"):tolist()
    local r64 = F.gelu(s:to("float64")):tolist()
    assert.are.equal(-math.huge, 1 / r[1])
    assert.are.equal(math.huge, 1 / r[2])
    assert.are.equal(math.huge, r[3])
    for i = 4, 5 do
      assert.is_true(r[i] ~= r[i] and r64[i] ~= r64[i])   -- -inf (1 + erf = 0) and NaN
    end
  end)

  it("gives the same bits strided and contiguous, at every length", function()
    for _, n in ipairs({ 1, 7, 16, 33, 1000 }) do
      local a = ember.randn({ n, 2 }):mul(3)
      local strided = F.gelu(a:t()[1]):tolist()   -- stride 2
      local dense = F.gelu(a:t()[1]:contiguous()):tolist()
      assert.are.same(dense, strided)
    end
  end)
end)

describe("gelu in float64", function()
  it("is libm's erf: Phi at the quartiles' points to 1e-15", function()
    -- Phi(-1) = 0.15865525393145705, Phi(0.5) = 0.69146246127401310, Phi(3) = 0.99865010196836990
    local x = ember.tensor({ -1, 0.5, 3 }, { dtype = "float64" })
    H.same(F.gelu(x), { -0.15865525393145705, 0.5 * 0.6914624612740131, 3 * 0.9986501019683699 }, 1e-15)
  end)
end)
