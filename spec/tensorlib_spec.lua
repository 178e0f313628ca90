-- The tensor library (cumsum ... histc) and ember.linalg: values and
-- gradients against PyTorch 1.13 (spec/fixtures/gen_tensorlib.py), gradcheck
-- and gradgradcheck in float64, dtypes, NaN, and bad input.
local H = require("helpers")
local ember = H.ember
local cases = dofile("spec/fixtures/tensorlib_torch.lua")
local F64 = { dtype = "float64" }
local unpack = table.unpack or unpack

describe("the tensor library against PyTorch", function()
  require("spec.support.torch_cases").run(cases, it)
end)

describe("gradcheck and gradgradcheck (float64)", function()
  local gradcheck, gradgradcheck = ember.autodiff.gradcheck, ember.autodiff.gradgradcheck
  local function randn(...) return ember.randn({ ... }, F64) end
  local function spd(n)
    local m = randn(n, n)
    return m:matmul(m:t()) + ember.eye(n, n, F64) * n
  end
  -- one zero per row: with two, first derivatives are exact but second ones
  -- miss the terms through the other zero (docs/tensorlib.md)
  local zeros_in = ember.tensor({ { 0.5, 0, 1.5, 0.7 }, { 0, 0.8, -0.6, 1.2 } }, F64)
  local checks = {
    { "cumsum", function(x) return x:cumsum(2) * x end, function() return { randn(2, 3) } end },
    { "cumprod", function(x) return x:cumprod(2) end, function() return { randn(2, 4) } end },
    { "cumprod with zeros", function(x) return x:cumprod(2) end, function() return { zeros_in:clone() } end, true },
    { "prod", function(x) return x:prod(1) end, function() return { randn(3, 2) } end },
    { "sort/topk/median", function(x)
        local v = x:sort(2, true)
        local t = x:topk(2)
        return v * v + 0, t * 3, (x:median(2)) end, function() return { randn(2, 4) } end },
    { "logcumsumexp", function(x) return x:logcumsumexp(1) end, function() return { randn(3, 2) } end },
    { "flip/roll/triu/diagonal", function(x)
        return x:flip(1):roll(1, 2):triu() * x, x:diagonal(1) end, function() return { randn(3, 3) } end },
    { "scatter", function(x, s)
        return x:scatter(2, ember.tensor({ { 2 }, { 1 } }, { dtype = "int64" }), s) end,
      function() return { randn(2, 3), randn(2, 1) } end },
    { "einsum", function(a, b) return ember.einsum("bij,bjk->bik", a, b) end,
      function() return { randn(2, 2, 3), randn(2, 3, 2) } end },
    { "cdist", function(a, b) return ember.cdist(a, b) end, function() return { randn(3, 2), randn(2, 2) } end },
    { "linalg.inv", function(a) return ember.linalg.inv(a) end, function() return { spd(3) + randn(3, 3) * 0.3 } end },
    { "linalg.det/slogdet", function(a)
        local _, l = ember.linalg.slogdet(a)
        return ember.linalg.det(a), l end, function() return { randn(2, 3, 3) + ember.eye(3, 3, F64) * 2 } end },
    { "linalg.solve", function(a, b) return ember.linalg.solve(a, b) end,
      function() return { randn(2, 3, 3) + ember.eye(3, 3, F64) * 3, randn(2, 3, 2) } end },
    { "linalg.cholesky", function(a)
        local s = (a + a:transpose(-1, -2)) * 0.5   -- a symmetric input, as the rule assumes
        return ember.linalg.cholesky(s) end, function() return { spd(3) } end },
    { "linalg.eigh", function(a)
        local w, v = ember.linalg.eigh((a + a:transpose(-1, -2)) * 0.5)   -- symmetric, as the rule assumes
        return w, v * v end, function() return { spd(3) + ember.diag(ember.tensor({ 0, 2, 4 }, F64)) } end },
    { "linalg.qr", function(a) return ember.linalg.qr(a) end, function() return { randn(4, 3) } end },
    { "linalg.svd tall, wide and square", function(a, b, c)
        local outs = {}
        for _, x in ipairs({ a, b, c }) do
          local u, s, vh = ember.linalg.svd(x, { full_matrices = false })
          outs[#outs + 1], outs[#outs + 2], outs[#outs + 3] = s, u:matmul(vh), u * u
        end
        return unpack(outs) end, function() return { randn(4, 3), randn(2, 3), randn(3, 3) } end },
    { "linalg.lstsq", function(a, b) return ember.linalg.lstsq(a, b).solution end,
      function() return { randn(4, 2), randn(4, 2) } end },
    { "lgamma", function(x) return ember.lgamma(x) end, function() return { ember.rand({ 2, 3 }, F64) * 4 + 0.2 } end },
    { "linalg.solve_triangular", function(a, b)
        local st = ember.linalg.solve_triangular
        return st(a, b, { upper = false }), st(a, b:transpose(-1, -2), { upper = true, left = false }),
          st(a, b, { upper = true, unitriangular = true }) end,
      function() return { randn(2, 3, 3) + ember.eye(3, 3, F64) * 3, randn(3, 2) } end },
  }
  for _, c in ipairs(checks) do
    it("gradcheck: " .. c[1], function()
      ember.manual_seed(11)
      assert.is_true(gradcheck(c[2], c[3]()))
    end)
    it("gradgradcheck: " .. c[1], function()
      ember.manual_seed(12)
      assert.is_true(gradgradcheck(c[2], c[3]()))
    end)
  end
end)

describe("the tensor library's dtypes and special values", function()
  it("cumsum and prod of integers and bools give int64", function()
    local i = ember.tensor({ 1, 2, 3 }, { dtype = "int32" })
    assert.are.equal("int64", i:cumsum(1).dtype)
    H.same(i:cumsum(1), { 1, 3, 6 })
    H.same(i:cumprod(1), { 1, 2, 6 })
    assert.are.equal("int64", i:prod().dtype)
    local b = ember.tensor({ true, false, true })
    H.same(b:cumsum(1), { 1, 1, 2 })
    assert.are.equal("int64", b:cumsum(1).dtype)
    H.same(ember.tensor({ 1, 2 }):cumsum(1, { dtype = "float64" }), { 1, 3 })
    assert.are.equal("float64", ember.tensor({ 1, 2 }):cumsum(1, { dtype = "float64" }).dtype)
    -- int64 beyond 2^53 stays exact
    local big = ember.tensor({ 2 ^ 53, 1 }, { dtype = "int64" })
    assert.are.equal(2 ^ 53 + 1, tonumber(big:cumsum(1)[2]:item()))
  end)
  it("sorts every dtype, stably, NaN last", function()
    for _, dt in ipairs({ "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8" }) do
      local v, i = ember.tensor({ 3, 1, 2, 1 }, { dtype = dt }):sort(1)
      H.same(v, { 1, 1, 2, 3 })
      H.same(i, { 2, 4, 3, 1 })
      assert.are.equal(dt, v.dtype)
    end
    local v, i = ember.tensor({ 2, 0 / 0, -1, 0 / 0 }, F64):sort(1)
    H.same(v, { -1, 2, 0 / 0, 0 / 0 })
    H.same(i, { 3, 1, 2, 4 })
    local vd, id = ember.tensor({ 2, 0 / 0, -1 }, F64):sort(1, true)
    H.same(vd, { 0 / 0, 2, -1 })
    H.same(id, { 2, 1, 3 })
    local bv = ember.tensor({ true, false, true }):sort(1)
    H.same(bv, { false, true, true })
    assert.are.equal(2 ^ 62 + 1, ember.tensor({ 2 ^ 62 + 1, 2 ^ 62 }, { dtype = "int64" }):sort(1)[2]:item())
    H.same(ember.tensor({ 2, 0 / 0, 1 }, F64):median(), 0 / 0)
  end)
  it("topk (its own heap kernel) is the front of sort's order, ties and NaN included", function()
    ember.manual_seed(5)
    local x = (ember.rand({ 3, 7, 5 }, F64) * 4):to("int64"):to("float64")   -- many ties
    x[2][3][1] = 0 / 0
    for _, largest in ipairs({ true, false }) do
      for d = 1, 3 do
        for _, k in ipairs({ 0, 1, 3, x:size(d) }) do
          local v, i = x:topk(k, { dim = d, largest = largest })
          local sv, si = x:sort(d, largest)
          H.same(v, sv:narrow(d, 1, k):tolist())
          H.same(i, si:narrow(d, 1, k):tolist())
        end
      end
    end
    -- int64 compared exactly: 2^60 + 1 (not a Lua number) beats 2^60
    local big = ember.tensor({ 5, 2 ^ 60, 7, 2 ^ 60 }, { dtype = "int64" }) + ember.tensor({ 0, 0, 0, 1 }, { dtype = "int64" })
    local _, ii = big:topk(2)
    H.same(ii, { 4, 2 })
    local _, si = big:sort(1, true)
    H.same(si, { 4, 2, 3, 1 })
  end)
  it("scans many rows of the last dim (eight side by side), forwards and reversed", function()
    ember.manual_seed(3)
    for _, dt in ipairs({ "float64", "float32", "int64" }) do
      local x = dt == "int64" and (ember.rand({ 19, 7 }, F64) * 10):to("int64") or ember.randn({ 19, 7 }, { dtype = dt })
      local rows = x:tolist()
      local want, wantp, back = {}, {}, {}
      for i, row in ipairs(rows) do
        local acc, accp, r, rp, b = 0, 1, {}, {}, {}
        for k, v in ipairs(row) do
          acc, accp = acc + v, accp * v
          r[k], rp[k] = acc, accp
        end
        acc = 0
        for k = #row, 1, -1 do
          acc = acc + row[k]
          b[k] = acc
        end
        want[i], wantp[i], back[i] = r, rp, b
      end
      local tol = dt == "float32" and 1e-5 or 1e-12
      H.same(x:cumsum(2), want, tol)
      H.same(x:cumprod(2), wantp, tol)
      if dt == "float64" then   -- the reversed scan is cumsum's gradient
        local g = ember.autodiff.grad(function(t) return (t:cumsum(2) * x):sum() end)(x:clone())
        H.same(g, back, 1e-12)
      end
    end
  end)
  it("searchsorted (binary search) against counting, batched, int64 exact", function()
    ember.manual_seed(9)
    local seq = ember.rand({ 3, 50 }, F64):sort(2)
    local v = ember.rand({ 3, 20 }, F64)
    v[1][1] = seq[1][5]:item()   -- an exact hit: left and right differ
    for _, right in ipairs({ false, true }) do
      local got = ember.searchsorted(seq, v, { right = right })
      local cmp = right and seq:unsqueeze(2):le(v:unsqueeze(3)) or seq:unsqueeze(2):lt(v:unsqueeze(3))
      H.same(got, (cmp:sum(3) + 1):tolist())
    end
    H.same(ember.searchsorted(ember.tensor({ 1, 3, 5 }), 4), 3)
    local big = ember.tensor({ 2 ^ 60, 2 ^ 60 }, { dtype = "int64" }) + ember.tensor({ 0, 2 }, { dtype = "int64" })
    local q = ember.tensor({ 2 ^ 60 }, { dtype = "int64" }) + 1
    H.same(ember.searchsorted(big, q), { 2 })
    H.raises(function() ember.searchsorted(seq, ember.rand({ 2, 3 })) end, "ember.searchsorted", "{2, 3}", "{3, 50}")
  end)
  it("mode of 3-D integer data along each dim against counting", function()
    ember.manual_seed(4)
    local x = (ember.rand({ 4, 9, 5 }, F64) * 3):to("int64")
    for d = 1, 3 do
      local v, i = x:mode(d, true)   -- keepdim: rows in the order of xs's
      local xs = x:transpose(d, 3):contiguous()
      local vs = v:transpose(d, 3):reshape({ -1 }):tolist()
      local is = i:transpose(d, 3):reshape({ -1 }):tolist()
      local rows = xs:reshape({ -1, x:size(d) }):tolist()
      for r, row in ipairs(rows) do
        local count, best, bestc = {}, nil, -1
        for _, e in ipairs(row) do count[e] = (count[e] or 0) + 1 end
        for e, c in pairs(count) do if c > bestc or (c == bestc and e < best) then best, bestc = e, c end end
        assert.are.equal(best, vs[r])
        local last = 0
        for k, e in ipairs(row) do if e == best then last = k end end
        assert.are.equal(last, is[r])
      end
    end
  end)
  it("logcumsumexp over a wide range and with -inf", function()
    H.same(ember.tensor({ -1000, 0, 1000, -1 / 0 }, F64):logcumsumexp(1), { -1000, 0, 1000, 1000 }, 1e-12)
    H.same(ember.tensor({ -1 / 0, -1 / 0, 2 }, F64):logcumsumexp(1), { -1 / 0, -1 / 0, 2 })
    H.same(ember.tensor({ 1, 1 }, F64):logcumsumexp(1), { 1, 1 + math.log(2) }, 1e-12)
  end)
  it("any, all, isnan, isinf, isfinite and the logical ops", function()
    local x = ember.tensor({ { 0, 1 / 0, 0 / 0 }, { -1 / 0, 0, 2 } }, F64)
    H.same(x:isnan(), { { false, false, true }, { false, false, false } })
    H.same(x:isinf(), { { false, true, false }, { true, false, false } })
    H.same(x:isfinite(), { { true, false, false }, { false, true, true } })
    H.same(ember.tensor({ 1, 2 }, { dtype = "int32" }):isfinite(), { true, true })
    H.same(x:any(2), { true, true })
    H.same(x:all(2), { false, false })
    H.same(x:eq(0):any(1), { true, true, false })
    assert.are.equal("bool", x:any().dtype)
    assert.is_true(ember.zeros({ 0 }):all():item())
    assert.is_false(ember.zeros({ 0 }):any():item())
    local a, b = ember.tensor({ 0, 1, 2, 0 }), ember.tensor({ 0, 0, 3, 5 })
    H.same(a:logical_and(b), { false, false, true, false })
    H.same(a:logical_or(b), { false, true, true, true })
    H.same(a:logical_xor(b), { false, true, false, true })
    H.same(a:logical_not(), { true, false, false, true })
    assert.is_true(ember.allclose(ember.tensor({ 1, 0 / 0 }, F64), ember.tensor({ 1 + 1e-9, 0 / 0 }, F64), { equal_nan = true }))
    assert.is_false(ember.allclose(ember.tensor({ 1, 0 / 0 }, F64), ember.tensor({ 1, 0 / 0 }, F64)))
    assert.is_false(ember.allclose(ember.tensor({ 1 }, F64), ember.tensor({ 1.001 }, F64)))
    assert.is_true(ember.allclose(ember.tensor({ 1 / 0 }, F64), ember.tensor({ 1 / 0 }, F64)))
    assert.is_true(ember.equal(ember.tensor({ 1, 2 }), ember.tensor({ 1, 2 })))
    assert.is_false(ember.equal(ember.tensor({ 1, 2 }), ember.tensor({ { 1, 2 } })))
  end)
  it("scatter with a larger src, index_fill and nonzero as a tuple", function()
    local x = ember.zeros({ 2, 3 })
    local s = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    H.same(x:scatter(2, ember.tensor({ { 3, 1 }, { 2, 3 } }, { dtype = "int64" }), s), { { 2, 0, 1 }, { 0, 4, 5 } })
    local r, c = ember.tensor({ { 0, 1 }, { 1, 0 } }):nonzero({ as_tuple = true })
    H.same(r, { 1, 2 })
    H.same(c, { 2, 1 })
    H.same(ember.tensor({ 1, 2, 3 }, { dtype = "int64" }):index_fill(1, ember.tensor({ 2 }, { dtype = "int64" }), 0), { 1, 0, 3 })
  end)
  it("runs composed functions on integer tensors", function()
    local i = ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "int64" })
    H.same(i:flip(1), { { 3, 4 }, { 1, 2 } })
    H.same(i:triu(), { { 1, 2 }, { 0, 4 } })
    assert.are.equal("int64", i:triu().dtype)
    H.same(i:trace(), 5)
    H.same(ember.bmm(i:unsqueeze(2), i:unsqueeze(3)), { { { 5 } }, { { 25 } } })
    H.same(ember.einsum("ij,jk->ik", i, i), { { 7, 10 }, { 15, 22 } })
  end)
end)

describe("lgamma, digamma, trigamma", function()
  local F32 = { dtype = "float32" }
  it("float32 within a few ulp of float64, poles and infinities as PyTorch's, in place, integers in float32", function()
    local v = { 1e-3, 0.1, 0.5, 1, 2.5, 5.99, 6, 40, -0.5, -2.7 }
    for _, name in ipairs({ "lgamma", "digamma", "trigamma" }) do
      -- against float64 of the same (float32-rounded) points
      local x = ember.tensor(v, F32)
      local f, d = x[name](x):tolist(), ember[name](x:double()):tolist()
      for i = 1, #v do
        assert.is_true(math.abs(f[i] - d[i]) <= 4e-7 * math.abs(d[i]) + 1e-7, name .. "(" .. v[i] .. "): " .. f[i] .. " vs " .. d[i])
      end
    end
    local edge = ember.tensor({ 0, -1, -3, math.huge, -math.huge, 0 / 0 }, F64)
    H.same(edge:lgamma(), { math.huge, math.huge, math.huge, math.huge, math.huge, 0 / 0 }, 0)
    H.same(edge:digamma(), { -math.huge, 0 / 0, 0 / 0, math.huge, 0 / 0, 0 / 0 }, 0)
    H.same(edge:trigamma(), { math.huge, math.huge, math.huge, 0, math.huge, 0 / 0 }, 0)
    -- digamma(1) = -Euler's gamma; trigamma(1) = pi^2 / 6; lgamma(0.5) = log(sqrt(pi))
    H.same(ember.tensor({ 1 }, F64):digamma(), { -0.57721566490153286 }, 1e-14)
    H.same(ember.trigamma(ember.tensor({ 1 }, F64)), { math.pi ^ 2 / 6 }, 1e-14)
    local w = ember.tensor({ 0.5, 3 }, F64)
    assert.is_true(rawequal(w, w:lgamma_()))
    H.same(w, { 0.5 * math.log(math.pi), math.log(2) }, 1e-15)
    local i = ember.tensor({ 1, 2, 3 }, { dtype = "int64" })
    assert.are.equal("float32", i:digamma().dtype)
    H.same(ember.lgamma(i), { 0, 0, math.log(2) }, 1e-7)
    -- strided input
    local m = ember.tensor({ { 1, 2 }, { 3, 4 } }, F64):t()
    H.same(m:lgamma(), { { 0, math.log(2) }, { 0, math.log(6) } }, 1e-15)
  end)
  it("digamma's gradient is trigamma, trigamma's polygamma(2) (gradcheck, gradgradcheck)", function()
    assert.is_true(ember.autodiff.gradcheck(function(x) return x:digamma() end, { ember.rand({ 5 }, F64) * 3 + 0.3 }))
    assert.is_true(ember.autodiff.gradgradcheck(function(x) return x:digamma() end, { ember.rand({ 5 }, F64) * 3 + 0.3 }))
    local x = ember.tensor({ 1.5, 2.5 }, F64)
    H.same(ember.autodiff.grad(function(a) return a:lgamma():sum() end)(x), x:digamma():tolist(), 1e-15)
    H.same(ember.autodiff.grad(function(a) return a:digamma():sum() end)(x), x:trigamma():tolist(), 1e-15)
    H.same(ember.autodiff.grad(function(a) return a:trigamma():sum() end)(x), ember.polygamma(2, x):tolist(), 1e-15)
  end)
end)

describe("the tensor library's errors", function()
  local x = ember.randn({ 2, 3 })
  it("names the call, the shapes and the dims", function()
    H.raises(function() x:cumsum() end, "ember.cumsum", "dim is required")
    H.raises(function() x:cumsum(3) end, "ember.cumsum", "dim 3 out of range")
    H.raises(function() x:cumsum(1, { dtyp = "float64" }) end, "ember.cumsum", "unknown option 'dtyp'")
    H.raises(function() x:cumsum(1, nil, 5) end, "ember.Tensor:cumsum: extra argument 3 (5): it takes 2 (dim, opts)")
    H.raises(function() ember.cumsum(x, 1, nil, 5) end, "ember.cumsum: extra argument 4 (5): it takes 3 (t, dim, opts)")
    H.raises(function() x:isclose(x, 1e-5, 1e-8, false, 1) end, "ember.Tensor:isclose: extra argument 5 (1)")
    H.raises(function() x["repeat"](x, { 1, 2 }, 3) end, "ember.Tensor:repeat: extra argument 2 (3): it takes 1 (sizes)")
    H.raises(function() x["repeat"](x, 1, nil, 2) end, "ember.repeat", "size 2 must be an integer")
    H.raises(function() x:sort(1, "yes") end, "ember.sort", "descending must be a boolean")
    H.raises(function() x:topk(4) end, "ember.topk", "k = 4", "size 3", "{2, 3}")
    H.raises(function() x:kthvalue(0) end, "ember.kthvalue", "k must be an integer >= 1")
    H.raises(function() x:split({ 1, 1 }, 2) end, "ember.split", "sum to 2", "{2, 3}")
    H.raises(function() x:roll({ 1, 2 }, { 1 }) end, "ember.roll", "same length")
    H.raises(function() x:flip({ 1, 1 }) end, "ember.flip", "appears twice")
    H.raises(function() x:triu(0.5) end, "ember.triu", "diagonal must be an integer")
    H.raises(function() ember.randn({ 3 }):tril() end, "ember.tril", "at least 2 dims", "{3}")
    H.raises(function() ember.bmm(x, x) end, "ember.bmm", "batch1 must be 3-D", "{2, 3}")
    H.raises(function() ember.bmm(ember.randn({ 2, 2, 3 }), ember.randn({ 2, 2, 3 })) end, "ember.bmm", "{2, 2, 3}")
    H.raises(function() ember.einsum("ij,jk->ik", x, x) end, "ember.einsum", "label 'j' has sizes 3 and 2")
    H.raises(function() ember.einsum("ij->ik", x) end, "ember.einsum", "output label 'k'")
    H.raises(function() ember.einsum("ijk", x) end, "ember.einsum", "operand 1 has 2 dims")
    H.raises(function() x:scatter(2, ember.tensor({ { 1, 1 } }, { dtype = "int64" }), 1.0) end,
      "ember.scatter", "more than once")
    H.raises(function() x:scatter(2, ember.tensor({ 1 }, { dtype = "int64" }), 1.0) end, "ember.scatter", "{1}", "{2, 3}")
    H.raises(function() x:scatter(2, ember.tensor({ { 1 } }, { dtype = "int64" }), 1.0, { reduce = "multiply" }) end,
      "ember.scatter", "reduce")
    H.raises(function() ember.bincount(ember.tensor({ 0, 1 }, { dtype = "int64" })) end, "ember.bincount", "1-based", "got 0")
    H.raises(function() ember.histc(x, 0) end, "ember.histc", "bins must be an integer >= 1")
    H.raises(function() ember.unique(x, { dim = 3 }) end, "ember.unique", "dim 3 out of range")
    H.raises(function() ember.meshgrid(x) end, "ember.meshgrid", "0-d or 1-D", "{2, 3}")
    H.raises(function() ember.allclose(x, x, -1) end, "ember.allclose", "rtol")
  end)
  it("linalg names the singular or non-positive-definite batch element", function()
    local a = ember.eye(2, 2, F64):expand({ 3, 2, 2 }):contiguous()
    a[2]:zero_()
    H.raises(function() ember.linalg.inv(a) end, "ember.linalg.inv", "batch element {2}", "{3, 2, 2}", "singular")
    H.raises(function() ember.linalg.solve(a, ember.ones({ 3, 2, 1 }, F64)) end, "ember.linalg.solve", "batch element {2}")
    H.raises(function() ember.linalg.cholesky(-ember.eye(2, 2, F64)) end, "ember.linalg.cholesky", "not positive-definite")
    H.raises(function() ember.linalg.inv(ember.randn({ 2, 3 })) end, "ember.linalg.inv", "square", "{2, 3}")
    H.raises(function() ember.linalg.inv(ember.ones({ 2, 2 }, { dtype = "int64" })) end, "ember.linalg.inv", "float32 or float64")
    H.raises(function() ember.linalg.solve(ember.eye(2, 2, F64), ember.ones({ 3 }, F64)) end, "ember.linalg.solve", "{2, 2}", "{3, 1}")
    H.raises(function() ember.linalg.norm(x, 3) end, "ember.linalg.norm", "not supported")
    local st, I2 = ember.linalg.solve_triangular, ember.eye(2, 2, F64)
    H.raises(function() st(I2, ember.ones({ 2, 1 }, F64)) end, "ember.linalg.solve_triangular", "upper is required")
    H.raises(function() st(I2, ember.ones({ 2, 1 }, F64), { upper = 1 }) end, "upper must be a boolean")
    H.raises(function() st(I2, ember.ones({ 2, 1 }, F64), { upper = true, lower = true }) end, "unknown option", "lower")
    H.raises(function() st(I2, ember.ones({ 3, 1 }, F64), { upper = true }) end, "{2, 2}", "{3, 1}", "do not fit")
    H.raises(function() st(I2, ember.ones({ 2 }, F64), { upper = true }) end, "do not fit")
    H.raises(function() st(I2, ember.ones({ 2, 1 }), { upper = true }) end, "float64", "float32", "same dtype")
    H.raises(function() st(I2, ember.ones({ 2, 1 }, F64), { upper = true }, 4) end, "extra argument 4 (4): it takes 3 (A, B, opts)")
    H.raises(function() st(ember.tensor({ { { 1, 0 }, { 0, 1 } }, { { 1, 0 }, { 2, 0 } } }, F64), ember.ones({ 2, 1 }, F64),
      { upper = false }) end, "ember.linalg.solve_triangular", "batch element {2}", "singular")
    -- float32 as float64, batched and strided (a transposed A)
    local A = (ember.randn({ 3, 4, 4 }, F64) * 0.3 + ember.eye(4, 4, F64) * 2):transpose(-1, -2)
    local B = ember.randn({ 4, 2 }, F64)
    local x64 = st(A, B, { upper = true })
    H.same(x64:to("float32"):reshape({ -1 }), st(A:to("float32"), B:to("float32"), { upper = true }):double():reshape({ -1 }):tolist(), 1e-5)
    H.same(A:triu():matmul(x64), B:expand({ 3, 4, 2 }):tolist(), 1e-12)
    -- unitriangular reads no diagonal: a zero there is not singular
    H.same(ember.linalg.solve_triangular(ember.tensor({ { 0, 0 }, { 2, 0 } }, F64), ember.ones({ 2, 1 }, F64),
      { upper = false, unitriangular = true }),
      { { 1 }, { -1 } }, 1e-15)
    H.raises(function() ember.linalg.svd(x, { full = false }) end, "ember.linalg.svd", "unknown option 'full'")
    H.raises(function() ember.linalg.svdvals(ember.ones({ 2, 2 }, { dtype = "int32" })) end, "ember.linalg.svdvals", "float32 or float64")
    H.raises(function() ember.linalg.eigh(x) end, "ember.linalg.eigh", "square", "{2, 3}")
    H.raises(function() ember.linalg.eigh(ember.eye(2), "X") end, "ember.linalg.eigh", "UPLO")
    H.raises(function() ember.linalg.qr(ember.randn({ 3 })) end, "ember.linalg.qr", "{3}")
    H.raises(function() ember.linalg.qr(x, "full") end, "ember.linalg.qr", "mode", "full")
    H.raises(function() ember.linalg.lstsq(x, ember.ones({ 3 })) end, "ember.linalg.lstsq", "{2, 3}", "{3, 1}")
    -- a singular matrix's determinant is 0, its slogdet (0, -inf)
    local s, l = ember.linalg.slogdet(ember.zeros({ 2, 2 }, F64))
    H.same(s, 0)
    H.same(l, -1 / 0)
    H.same(ember.linalg.det(ember.zeros({ 2, 2 }, F64)), 0)
    -- float32 works too
    H.same(ember.linalg.inv(ember.tensor({ { 2, 0 }, { 0, 4 } })), { { 0.5, 0 }, { 0, 0.25 } })
    assert.are.equal("float32", ember.linalg.cholesky(ember.eye(2)).dtype)
  end)
  it("leaves the tensors usable after an error", function()
    pcall(function() x:topk(9) end)
    H.same(x:topk(1):shape()[2] and ember.tensor({ x:size(2) }), { 3 })
  end)
end)
