-- float32 products with a side of 10 or 12 or fewer (core/src/ops/gemm_skinny.c:
-- a classifier's last layer, forward and weight gradient, on AVX-512 CPUs)
-- against the same products in float64, which go to BLAS; on other CPUs
-- the libraries run them and the same checks hold.
local H = require("helpers")
local ember = H.ember
local F = ember.nn.functional

-- the largest difference from the float64 product, over the largest |value|
local function rel_err(got, a, b)
  local want = a:to("float64"):matmul(b:to("float64"))
  assert.are.same(want:shape(), got:shape())
  return (got:to("float64") - want):abs():max():item() / math.max(1, want:abs():max():item())
end

describe("skinny float32 products", function()
  it("x w^T with 10 or fewer columns (dot products), K around multiples of 16", function()
    ember.manual_seed(11)
    for _, M in ipairs({ 1, 3, 64, 130 }) do
      for _, N in ipairs({ 1, 3, 4, 5, 10 }) do
        for _, K in ipairs({ 256, 257, 271, 1568, 4099 }) do
          local x, w = ember.randn({ M, K }), ember.randn({ N, K })
          local e = rel_err(x:matmul(w:t()), x, w:t())
          assert(e < 2e-6, ("%dx%d by (%dx%d)^T: %g"):format(M, K, N, K, e))
        end
      end
    end
  end)

  it("g^T x with 12 or fewer rows (rows of x), N around multiples of 16", function()
    ember.manual_seed(12)
    for _, M in ipairs({ 1, 3, 4, 10, 12 }) do
      for _, N in ipairs({ 1024, 1025, 1568, 2047 }) do
        for _, K in ipairs({ 48, 64, 255 }) do
          local g, x = ember.randn({ K, M }), ember.randn({ K, N })
          local e = rel_err(g:t():matmul(x), g:t(), x)
          assert(e < 2e-6, ("(%dx%d)^T by %dx%d: %g"):format(K, M, K, N, e))
        end
      end
    end
  end)

  it("the 10-class layer's three products, and linear_relu's product into its bias", function()
    ember.manual_seed(13)
    local x, w, b = ember.randn({ 64, 1568 }), ember.randn({ 10, 1568 }), ember.randn({ 10 })
    local function f(x_, w_, b_) return F.linear(x_, w_, b_) end
    local d = { x:to("float64"), w:to("float64"), b:to("float64") }
    local dy = ember.randn({ 64, 10 })
    local y, g = ember.autodiff.vjp(f, { x, w, b }, dy)
    local y64, g64 = ember.autodiff.vjp(f, d, dy:to("float64"))
    local function close(a, want) return (a:to("float64") - want):abs():max():item() / want:abs():max():item() end
    assert(close(y, y64) < 2e-6)
    for k = 1, 3 do assert(close(g[k], g64[k]) < 2e-6, "gradient " .. k) end
    assert(close(F.linear_relu(x, w, b), F.linear(d[1], d[2], d[3]):relu()) < 2e-6)
  end)

  it("give the same bits on one thread and on two", function()
    ember.manual_seed(14)
    local x, w, g = ember.randn({ 64, 1568 }), ember.randn({ 10, 1568 }), ember.randn({ 64, 10 })
    local n = ember.get_num_threads()
    local function all() return { x:matmul(w:t()), g:t():matmul(x) } end
    local two = all()
    ember.set_num_threads(1)
    local ok, one = pcall(all)
    ember.set_num_threads(n)
    assert(ok, one)
    for k = 1, 2 do assert.are.equal(0, (one[k] - two[k]):abs():max():item()) end
  end)
end)
