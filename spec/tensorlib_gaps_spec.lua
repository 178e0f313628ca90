-- The tensor library's views (as_strided, diagonal), prod as a reduction,
-- and the gradients at the edges (cumprod with several zeros, logcumsumexp
-- at -inf, polygamma / trigamma): values worked out by hand, gradcheck and
-- gradgradcheck in float64. The PyTorch 1.13 values of the same functions are
-- cases of spec/fixtures/gen_tensorlib.py, run by tensorlib_spec.lua.
local H = require("helpers")
local ember = H.ember
local F64 = { dtype = "float64" }
local gradcheck, gradgradcheck = ember.autodiff.gradcheck, ember.autodiff.gradgradcheck

local function grid(r, c) return ember.arange(r * c, F64):reshape({ r, c }) end

describe("as_strided", function()
  it("is a view of the elements in row-major order", function()
    local a = grid(3, 4)
    local v = ember.as_strided(a, { 2, 2 }, { 4, 1 }, 5)
    H.same(v, { { 5, 6 }, { 9, 10 } })
    v:fill_(-1)
    H.same(a, { { 0, 1, 2, 3 }, { 4, -1, -1, 7 }, { 8, -1, -1, 11 } })
    -- repeated elements (stride 0) and the method form
    H.same(a:as_strided({ 2, 3 }, { 0, 1 }), { { 0, 1, 2 }, { 0, 1, 2 } })
    -- nothing reached: any offset in range of the checks
    H.shape_is(a:as_strided({ 0, 5 }, { 1, 1 }, 11), { 0, 5 })
  end)
  it("of a non-contiguous tensor is a view of its memory where the steps allow", function()
    local base = grid(4, 6)
    local n = base:narrow(2, 2, 3)   -- columns 2..4: strides {6, 1}
    local v = n:as_strided({ 2, 2 }, { 3, 1 }, 1)   -- n's elements 1, 2, 4, 5 (0-based)
    H.same(v, { { 2, 3 }, { 8, 9 } })
    v:zero_()
    H.same(base:narrow(1, 1, 2), { { 0, 1, 0, 0, 4, 5 }, { 6, 7, 0, 0, 10, 11 } })
    -- elements 0 and 2 of a row are 2 apart, but 2 to 4 crosses into the next row
    H.raises(function() n:as_strided({ 2, 2 }, { 2, 1 }) end, "ember.as_strided", "non-contiguous", "{4, 3}",
      "strides {6, 1}", "contiguous()")
  end)
  it("checks the geometry stays inside the tensor", function()
    local a = grid(3, 4)
    H.raises(function() a:as_strided({ 3, 3 }, { 4, 1 }, 2) end, "ember.as_strided", "size {3, 3}", "stride {4, 1}",
      "offset 2", "12 elements", "{3, 4}")
    H.raises(function() a:as_strided({ 2 }, { -1 }) end, "ember.as_strided", "stride[1] must be an integer >= 0")
    H.raises(function() a:as_strided({ 2, 2 }, { 1 }) end, "ember.as_strided", "size has 2 entries and stride 1")
    H.raises(function() a:as_strided({ 2 }, { 1 }, -1) end, "ember.as_strided", "offset must be an integer >= 0")
    H.raises(function() a:as_strided({ 2 }, { 1 }, 0.5) end, "ember.as_strided", "offset must be an integer")
    H.raises(function() a:as_strided({ 2 }, { 2 ^ 52 }) end, "ember.as_strided", "past the last")
    H.raises(function() a:as_strided({ 1.5 }, { 1 }) end, "ember.as_strided", "size[1]")
    H.raises(function() a:as_strided(2, { 1 }) end, "ember.as_strided", "size must be a table")
    H.raises(function() a:as_strided({ 2 }, { 1 }, 0, 1) end, "extra argument")
    H.same(a, grid(3, 4):tolist())   -- untouched
  end)
  it("differentiates (gradcheck, gradgradcheck), repeated elements included", function()
    local f = function(x) return x:as_strided({ 2, 3 }, { 1, 4 }, 1) * x:as_strided({ 2, 3 }, { 0, 1 }) end
    assert.is_true(gradcheck(f, { ember.randn({ 3, 4 }, F64) }))
    assert.is_true(gradgradcheck(f, { ember.randn({ 3, 4 }, F64) }))
    -- overlapping steps (1 and 1) have no gradient rule here, and say so
    local x = ember.randn({ 3, 4 }, F64)
    local v = x:reshape({ -1 }):tolist()
    H.same(x:as_strided({ 2, 2 }, { 1, 1 }), { { v[1], v[2] }, { v[2], v[3] } })
    local overlapping = ember.autodiff.grad(function(a) return a:as_strided({ 2, 2 }, { 1, 1 }):sum() end)
    H.raises(function() overlapping(x) end,
      "as_strided", "may overlap", "size {2, 2}", "stride {1, 1}")
  end)
end)

describe("diagonal is a view", function()
  it("writes through it reach the base, of contiguous and strided tensors", function()
    local a = grid(3, 4)
    a:diagonal():fill_(-1)
    H.same(a, { { -1, 1, 2, 3 }, { 4, -1, 6, 7 }, { 8, 9, -1, 11 } })
    local t = grid(4, 3):t()   -- (3, 4), strides {1, 3}
    H.same(t:diagonal(1), { 3, 7, 11 })
    H.same(t:diagonal(-1), { 1, 5 })
    t:diagonal(1):mul_(10)
    H.same(t, { { 0, 30, 6, 9 }, { 1, 4, 70, 10 }, { 2, 5, 8, 110 } })
    local n = grid(4, 6):narrow(2, 2, 3)
    H.same(n:diagonal(), { 1, 8, 15 })
    H.same(n:diagonal(-1), { 7, 14, 21 })
    -- a batch: dims 2 and 3 of (2, 3, 3), and dims 1 and 3
    local b = ember.arange(18, F64):reshape({ 2, 3, 3 })
    H.same(b:diagonal(0, 2, 3), { { 0, 4, 8 }, { 9, 13, 17 } })
    H.same(b:diagonal(1, 1, 3), { { 1, 11 }, { 4, 14 }, { 7, 17 } })
    H.same(ember.diagonal(b, 0, -1, 1), { { 0, 10 }, { 3, 13 }, { 6, 16 } })
    H.shape_is(grid(2, 3):diagonal(5), { 0 })
  end)
  it("and diag, trace keep working", function()
    H.same(ember.diag(grid(3, 3), 1), { 1, 5 })
    local m = grid(2, 2)
    m:diag():fill_(9)   -- diag is a copy, as PyTorch's
    H.same(m, { { 0, 1 }, { 2, 3 } })
    H.same(ember.trace(grid(3, 3)), 12)
    H.same(ember.trace(grid(3, 3):t()), 12)
  end)
  it("carries the gradient, written through or read, and under recording of a strided input", function()
    local f = function(x) return x:t():diagonal(1) * x:diagonal(-1), x:narrow(2, 2, 2):diagonal() end
    assert.is_true(gradcheck(f, { ember.randn({ 3, 3 }, F64) }))
    assert.is_true(gradgradcheck(f, { ember.randn({ 3, 3 }, F64) }))
    -- a write through the diagonal of a recorded copy: d/dx sum(y) with y = x, diag(y) *= 3
    local x = ember.randn({ 3, 3 }, F64)
    local g = ember.autodiff.grad(function(a)
      local y = a * 1
      y:diagonal():mul_(3)
      return y:sum()
    end)(x)
    H.same(g, { { 3, 1, 1 }, { 1, 3, 1 }, { 1, 1, 3 } })
  end)
end)

describe("prod", function()
  it("multiplies every element, or along a dim, with keepdim", function()
    local x = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, F64)
    H.same(x:prod(), 720)
    H.shape_is(x:prod(), {})
    H.same(x:prod(1), { 4, 10, 18 })
    H.same(x:prod(2), { 6, 120 })
    H.same(x:prod(-1, true), { { 6 }, { 120 } })
    H.same(ember.prod(x, 1, true), { { 4, 10, 18 } })
    H.same(ember.arange(24, F64):reshape({ 2, 3, 4 }):add(1):prod(2),
      { { 1 * 5 * 9, 2 * 6 * 10, 3 * 7 * 11, 4 * 8 * 12 },
        { 13 * 17 * 21, 14 * 18 * 22, 15 * 19 * 23, 16 * 20 * 24 } })
    -- a 0-d tensor, empty products, a strided input
    H.same(ember.tensor(3.5, F64):prod(1), 3.5)
    H.shape_is(ember.tensor(3.5, F64):prod(1, true), {})
    H.same(ember.zeros({ 0 }, F64):prod(), 1)
    H.same(ember.zeros({ 2, 0 }, F64):prod(2), { 1, 1 })
    H.shape_is(ember.zeros({ 2, 0 }, F64):prod(1), { 0 })
    H.same(x:t():prod(2), { 4, 10, 18 })
    -- NaN and inf propagate as in the sequential product
    H.same(ember.tensor({ 2, 0 / 0, 3 }, F64):prod(), 0 / 0)
    H.same(ember.tensor({ 0, 1 / 0 }, F64):prod(), 0 / 0)
    H.same(ember.tensor({ -2, 1 / 0 }, F64):prod(), -1 / 0)
  end)
  it("takes every dtype: floats keep theirs, integers and bools give int64 (wrapping)", function()
    for _, dt in ipairs({ "float32", "float16", "bfloat16" }) do
      local r = ember.tensor({ 1.5, 2, -3 }, { dtype = dt }):prod()
      assert.are.equal(dt, r.dtype)
      H.same(r, -9)
    end
    for _, dt in ipairs({ "int32", "int64", "uint8" }) do
      local r = ember.tensor({ { 3, 4 }, { 5, 6 } }, { dtype = dt }):prod(1)
      assert.are.equal("int64", r.dtype)
      H.same(r, { 15, 24 })
    end
    local b = ember.tensor({ { true, true }, { true, false } }, { dtype = "bool" })
    H.same(b:prod(2), { 1, 0 })
    assert.are.equal("int64", b:prod().dtype)
    -- 2^62 * 4 wraps to 0 in int64, as PyTorch's
    H.same(ember.tensor({ 2 ^ 62, 4 }, { dtype = "int64" }):prod(), 0)
    H.same(ember.tensor({ 3, 5 }, { dtype = "int32" }):prod({ dtype = "float64" }), 15)
    assert.are.equal("float64", ember.tensor({ 3, 5 }, { dtype = "int32" }):prod({ dtype = "float64" }).dtype)
  end)
  it("agrees with cumprod's last element on the threaded paths (long rows, columns, many rows)", function()
    ember.manual_seed(3)
    local function close_to_one(...) return (ember.rand({ ... }, F64) * 0.02 + 0.99) end
    local long = close_to_one(100003)                       -- one row of 7 blocks
    H.same(long:prod(), long:cumprod(1)[100003]:item(), 1e-9)
    local wide = close_to_one(3, 700, 300)                  -- columns: inner 300 (two tiles)
    H.same(wide:prod(2), wide:cumprod(2):select(2, 700):tolist(), 1e-11)
    local rows = close_to_one(3000, 50)                     -- many short rows
    H.same(rows:prod(2), rows:cumprod(2):select(2, 50):tolist(), 1e-12)
    local f32 = close_to_one(1000, 1000):to("float32")
    H.same(f32:prod(1), f32:double():cumprod(1):select(1, 1000):tolist(), 1e-5)
  end)
  it("raises naming the call", function()
    local x = ember.randn({ 2, 3 })
    H.raises(function() x:prod(3) end, "ember.prod", "dim 3 out of range")
    H.raises(function() x:prod(nil, true) end, "ember.prod", "keepdim needs a dim")
    H.raises(function() x:prod(1, "yes") end, "ember.prod", "keepdim must be a boolean")
    H.raises(function() x:prod(1, false, { dtyp = "float64" }) end, "ember.prod", "unknown option 'dtyp'")
  end)
  it("has PyTorch's gradient: g y / x, the product of the others at a lone zero, 0 with two", function()
    local grad = ember.autodiff.grad
    local x = ember.tensor({ { 2, 3, 4 }, { 0, 5, 6 }, { 0, 7, 0 } }, F64)
    H.same(grad(function(a) return a:prod(2):sum() end)(x), { { 12, 8, 6 }, { 30, 0, 0 }, { 0, 0, 0 } })
    H.same(grad(function(a) return (a:prod(1, true) * ember.tensor({ { 1, 2, 3 } }, F64)):sum() end)(x),
      { { 0, 2 * 5 * 7, 0 }, { 0, 2 * 3 * 7, 0 }, { 0, 2 * 3 * 5, 3 * 4 * 6 } })
    H.same(grad(function(a) return a:prod() end)(ember.tensor({ 2, 0, 5 }, F64)), { 0, 10, 0 })
    H.same(grad(function(a) return a:prod() end)(ember.tensor({ 2, 3, 5 }, F64)), { 15, 10, 6 })
  end)
  it("differentiates twice with any number of zeros (gradcheck, gradgradcheck)", function()
    local rows = ember.tensor({ { 0.5, -1.2, 0.8, 1.3 }, { 0, 0.7, -0.9, 1.1 }, { 0, 1.4, 0, 0.6 },
      { 0, 0, 0.9, 0 } }, F64)
    for _, f in ipairs({ function(a) return a:prod(2) end, function(a) return a:prod(1, true) end,
      function(a) return a:narrow(1, 3, 2):prod() end, function(a) return a:narrow(1, 1, 1):prod() end }) do
      assert.is_true(gradcheck(f, { rows:clone() }))
      assert.is_true(gradgradcheck(f, { rows:clone() }))
    end
  end)
end)

describe("gradients at the edges", function()
  it("cumprod differentiates twice with two and more zeros in a row", function()
    local x = ember.tensor({ { 0.5, 0, 1.5, 0, 0.7, -1.1 }, { 0, 0.8, 0, -0.6, 0, 1.2 },
      { 1.3, 0.4, -0.9, 0.6, 1.1, 0.2 } }, F64)
    for _, d in ipairs({ 1, 2 }) do
      local f = function(a) return a:cumprod(d) end
      assert.is_true(gradcheck(f, { x:clone() }))
      assert.is_true(gradgradcheck(f, { x:clone() }))
    end
    -- the mixed second derivative of y_3 = x1 x2 x3 in x1 and x3 at x = {0, 2, 0}: x2 = 2
    local h = ember.autodiff.grad(function(a)
      local g = ember.autodiff.grad(function(b) return b:cumprod(1)[3] end)(a)
      return g[1]
    end)(ember.tensor({ 0, 2, 0 }, F64))
    H.same(h, { 0, 0, 2 })
  end)
  it("logcumsumexp's gradient at -inf inputs is finite: 0 after a finite value, as PyTorch's", function()
    local inf = 1 / 0
    local x = ember.tensor({ { 1, -inf, -inf, 3 }, { 0.5, -inf, 2, -inf } }, F64)
    local w = ember.tensor({ { 0.3, -0.7, 1.1, 0.4 }, { -0.2, 0.9, 0.6, -1.3 } }, F64)
    local g = ember.autodiff.grad(function(a) return (a:logcumsumexp(2) * w):sum() end)(x)
    -- a second method: d/dx_i sum_j w_j y_j = sum_{j >= i} w_j exp(x_i - y_j)
    local y, xs, ws = x:logcumsumexp(2):tolist(), x:tolist(), w:tolist()
    local want = {}
    for r = 1, 2 do
      want[r] = {}
      for i = 1, 4 do
        local acc = 0
        for j = i, 4 do acc = acc + ws[r][j] * math.exp(xs[r][i] - y[r][j]) end
        want[r][i] = acc
      end
    end
    H.same(g, want, 1e-12)
    H.same(g:select(1, 1):narrow(1, 2, 2), { 0, 0 })
    -- where the running result is still -inf each step's gradient goes to
    -- its newest element (PyTorch's is NaN there); inf and NaN stay in the values
    local w3 = ember.tensor({ 0.3, -0.7, 1.1 }, F64)
    H.same(ember.autodiff.grad(function(a) return (a:logcumsumexp(1) * w3):sum() end)(
      ember.tensor({ -inf, -inf, 2 }, F64)), { 0.3, -0.7, 1.1 })
    H.same(ember.tensor({ inf, inf, 1, 0 / 0, 2 }, F64):logcumsumexp(1), { inf, inf, inf, 0 / 0, 0 / 0 })
    H.same(ember.tensor({ 1, 1 }, F64):logcumsumexp(1), { 1, 1 + math.log(2) }, 1e-15)
    assert.is_true(gradcheck(function(a) return a:logcumsumexp(2) end, { x:clone() }))
    assert.is_true(gradgradcheck(function(a) return a:logcumsumexp(2) end, { ember.randn({ 2, 5 }, F64) }))
  end)
end)

describe("polygamma", function()
  local zeta3, pi = 1.2020569031595942854, math.pi
  it("has the values of digamma's derivatives", function()
    local x = ember.tensor({ 1, 0.5, 2 }, F64)
    -- psi2(1) = -2 zeta(3), psi2(1/2) = -14 zeta(3), psi2(2) = psi2(1) + 2
    H.same(ember.polygamma(2, x), { -2 * zeta3, -14 * zeta3, -2 * zeta3 + 2 }, 1e-14)
    -- psi3(1) = pi^4 / 15, psi3(1/2) = pi^4, psi3(2) = psi3(1) - 6
    H.same(x:polygamma(3), { pi ^ 4 / 15, pi ^ 4, pi ^ 4 / 15 - 6 }, 1e-14)
    H.same(ember.polygamma(0, x), x:digamma():tolist(), 0)
    H.same(ember.polygamma(1, x), x:trigamma():tolist(), 0)
    -- reflection: psi2(1 - x) - psi2(x) = pi d^2/dx^2 cot(pi x) = 2 pi^3 cot(pi x) / sin^2(pi x)
    local v = 0.3
    local function psi2(t) return ember.polygamma(2, ember.tensor({ t }, F64)):item() end
    local lhs = psi2(1 - v) - psi2(v)
    local c, sn = math.cos(pi * v), math.sin(pi * v)
    H.same(ember.tensor({ lhs }, F64), { 2 * pi ^ 3 * c / sn ^ 3 }, 1e-12)
    -- a large order and a large x: psi_n(x) ~ (-1)^(n+1) (n-1)! / x^n
    H.same(ember.polygamma(5, ember.tensor({ 1e6 }, F64)), { 24 / 1e24 }, 1e-5)
  end)
  it("at the edges, in every dtype", function()
    local inf = 1 / 0
    H.same(ember.polygamma(2, ember.tensor({ 0, -1, -inf, inf, 0 / 0 }, F64)), { -inf, -inf, -inf, 0, 0 / 0 })
    H.same(ember.polygamma(3, ember.tensor({ 0, -2 }, F64)), { inf, inf })
    local i = ember.tensor({ 1, 2 }, { dtype = "int64" })
    assert.are.equal("float32", ember.polygamma(2, i).dtype)
    H.same(ember.polygamma(2, i), { -2 * zeta3, -2 * zeta3 + 2 }, 1e-6)
    assert.are.equal("float16", ember.polygamma(2, ember.tensor({ 1 }, { dtype = "float16" })).dtype)
    H.same(ember.polygamma(2, ember.tensor({ { 1, 2 }, { 3, 4 } }, F64):t()),
      ember.polygamma(2, ember.tensor({ { 1, 3 }, { 2, 4 } }, F64)):tolist(), 0)
    H.raises(function() ember.polygamma(-1, i) end, "ember.polygamma", "n must be an integer >= 0")
    H.raises(function() ember.polygamma(1.5, i) end, "ember.polygamma", "n must be an integer")
    H.raises(function() ember.polygamma(0 / 0, i) end, "ember.polygamma", "n must be an integer")
    H.raises(function() ember.polygamma(2 ^ 40, i) end, "ember.polygamma", "below 2^31")
    H.raises(function() ember.polygamma(2, 3) end, "ember.polygamma", "argument 2")
    H.raises(function() ember.polygamma(2, i, 1) end, "extra argument")
  end)
  it("differentiates to the next order, trigamma too (gradcheck, gradgradcheck)", function()
    local x = ember.tensor({ 0.4, 1.7, 3.2, -0.6, 9.5 }, F64)
    for _, f in ipairs({ function(a) return a:trigamma() end, function(a) return ember.polygamma(2, a) end,
      function(a) return a:polygamma(4) end }) do
      assert.is_true(gradcheck(f, { x:clone() }))
      assert.is_true(gradgradcheck(f, { x:clone() }))
    end
  end)
end)
