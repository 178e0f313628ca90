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
    H.raises(function() ember.autodiff.grad(function(a) return a:as_strided({ 2, 2 }, { 1, 1 }):sum() end)(x) end,
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
