-- ember.linalg's modes and functions beyond the basic factorisations (issue
-- 32): det's gradient at singular matrices, qr's complete and r modes and the
-- wide QR's gradient, svd's full_matrices, lstsq's drivers, pinv,
-- matrix_rank, matrix_power, cross, vector_norm, matrix_norm and solve's
-- batch rules: values and gradients against PyTorch 1.13
-- (spec/fixtures/linalg/gen.py), gradcheck and gradgradcheck in float64, the
-- factors' properties, and bad input.
local H = require("helpers")
local ember = H.ember
local L = ember.linalg
local F64 = { dtype = "float64" }
-- H.same for two tensors
local function close(got, want, tol) H.same(got, want:tolist(), tol) end

describe("ember.linalg against PyTorch", function()
  require("spec.support.torch_cases").run(dofile("spec/fixtures/linalg/linalg_torch.lua"), it)
end)

describe("ember.linalg gradcheck and gradgradcheck (float64)", function()
  local gradcheck, gradgradcheck = ember.autodiff.gradcheck, ember.autodiff.gradgradcheck
  local function randn(...) return ember.randn({ ... }, F64) end
  local sing = ember.tensor({ { 1, 2, 3 }, { 2, 4, 6 }, { 1, 0, 1 } }, F64)
  local checks = {
    { "det", function(a) return L.det(a) end, function() return { randn(2, 3, 3) } end, true },
    -- at det A = 0 the rule goes through the SVD; second derivatives there
    -- are not checked by differences, which step into det != 0 and its
    -- ill-conditioned solve
    { "det at singular matrices, batched with a regular one", function(a) return L.det(a) end,
      function() return { ember.stack({ sing, randn(3, 3), ember.zeros({ 3, 3 }, F64) }) } end, false },
    { "qr wide", function(a) return L.qr(a) end, function() return { randn(2, 3, 5) } end, true },
    { "qr complete, wide", function(a) return L.qr(a, "complete") end, function() return { randn(2, 4) } end, true },
    { "svd full_matrices", function(a, b)
        local outs = {}
        for _, x in ipairs({ a, b }) do
          local u, s, vh = L.svd(x)
          local k = s:size(-1)
          outs[#outs + 1], outs[#outs + 2] = s, u:narrow(-1, 1, k):matmul(vh:narrow(-2, 1, k))
        end
        return unpack(outs) end, function() return { randn(4, 2), randn(2, 3) } end, true },
    { "lstsq tall and wide, every driver", function(a, b, c, d)
        local r = {}
        for _, drv in ipairs({ "gels", "gelsy", "gelsd", "gelss" }) do
          r[#r + 1] = L.lstsq(a, b, { driver = drv }).solution
        end
        r[#r + 1] = L.lstsq(a, b, { driver = "gelsd" }).residuals
        r[#r + 1] = L.lstsq(c, d, { driver = "gelsd" }).solution
        return unpack(r) end, function() return { randn(5, 3), randn(5, 2), randn(2, 4), randn(2) } end, true },
    { "pinv", function(a, b) return L.pinv(a), L.pinv(b) end, function() return { randn(3, 4), randn(2, 4, 2) } end, true },
    { "pinverse dropping a nonzero singular value", function(a) return a:pinverse(0.3) end,
      function() return { ember.tensor({ { 3, 0, 0 }, { 0, 0.5, 0 } }, F64) + randn(2, 3) * 0.05 } end, true },
    { "matrix_power", function(a) return L.matrix_power(a, 3), L.matrix_power(a, -2) end,
      function() return { randn(3, 3) + ember.eye(3, 3, F64) * 3 } end, true },
    { "cross", function(a, b) return L.cross(a, b) end, function() return { randn(2, 3), randn(2, 3) } end, true },
    { "vector_norm and matrix_norm", function(a)
        return L.vector_norm(a, 3, { 1, 3 }), L.matrix_norm(a, "nuc"), L.matrix_norm(a, 2), L.matrix_norm(a, -1)
      end, function() return { randn(2, 3, 4) } end, true },
    { "cond, every ord", function(a)
        local r = {}
        for _, p in ipairs({ 2, -2, "fro", "nuc", 1, -1, "inf", "-inf" }) do r[#r + 1] = L.cond(a, p) end
        return unpack(r) end, function() return { randn(3, 3) + ember.eye(3, 3, F64) * 2 } end, false },
    { "matrix_exp", function(a) return L.matrix_exp(a) end, function() return { randn(2, 3, 3) } end, true },
    { "multi_dot and vecdot", function(a, b, c) return L.multi_dot({ a, b, c }), L.vecdot(b, c:t()) end,
      function() return { randn(3), randn(3, 4), randn(4, 3) } end, true },
    { "solve left = false, cholesky upper", function(a, b, c)
        return L.solve(a, b, { left = false }), L.cholesky((c + c:t()) * 0.5, { upper = true }) end,
      function() return { randn(3, 3) + ember.eye(3, 3, F64) * 3, randn(2, 3), randn(3, 3) * 0.3 + ember.eye(3, 3, F64) * 2 } end, true },
    { "tensorinv, tensorsolve, vander", function(a, b, x)
        return L.tensorinv(a), L.tensorsolve(a, b), L.vander(x) end,
      function() return { randn(2, 3, 6) + ember.eye(6, 6, F64):reshape({ 2, 3, 6 }) * 3, randn(2, 3), randn(2, 3) } end, true },
    { "lu square, wide and tall", function(a, b, c)
        local r = {}
        for _, x in ipairs({ a, b, c }) do
          local _, l, u = ember.linalg.lu(x)
          r[#r + 1], r[#r + 2] = l, u
        end
        return unpack(r) end, function() return { randn(2, 3, 3), randn(3, 5), randn(5, 3) } end, true },
    { "lu_factor and lu_solve, every mode", function(a, b)
        local lu, piv = L.lu_factor(a)
        local bt = b:transpose(-1, -2)
        return L.lu_solve(lu, piv, b), L.lu_solve(lu, piv, b, { adjoint = true }), L.lu_solve(lu, piv, bt, { left = false }),
          L.lu_solve(lu, piv, bt, { left = false, adjoint = true }) end,
      function() return { randn(2, 3, 3) + ember.eye(3, 3, F64) * 2, randn(2, 3, 2) } end, true },
    { "cholesky_ex and inv_ex", function(a)
        local s = (a + a:t()) * 0.5
        return (L.cholesky_ex(s)), (L.inv_ex(a)) end,
      function() return { randn(3, 3) * 0.3 + ember.eye(3, 3, F64) * 2 } end, true },
    { "householder_product", function(a, t) return L.householder_product(a, t) end,
      function() return { randn(2, 4, 3), randn(2, 3) } end, true },
    { "solve with broadcast batches and a vector B", function(a, b, c)
        return L.solve(a, b), L.solve(a, c) end,
      function() return { randn(2, 3, 3) + ember.eye(3, 3, F64) * 3, randn(3, 2), randn(2, 3) } end, true },
  }
  for _, c in ipairs(checks) do
    it("gradcheck: " .. c[1], function()
      ember.manual_seed(21)
      assert.is_true(gradcheck(c[2], c[3]()))
    end)
    if c[4] then
      it("gradgradcheck: " .. c[1], function()
        ember.manual_seed(22)
        assert.is_true(gradgradcheck(c[2], c[3]()))
      end)
    end
  end
end)

describe("ember.linalg's factors and values", function()
  local function randn(...) return ember.randn({ ... }, F64) end
  local function eye(n) return ember.eye(n, n, F64) end
  local function t(x) return x:transpose(-1, -2) end
  it("det's gradient at a singular matrix is the adjugate's transpose (by cofactors)", function()
    local a = ember.tensor({ { 1, 2, 3 }, { 2, 4, 6 }, { 1, 0, 1 } }, F64)
    H.same(L.det(a), 0)
    -- cofactor C_ij = (-1)^(i+j) det(minor_ij), worked out by hand
    local want = { { 4, 4, -4 }, { -2, -2, 2 }, { 0, 0, 0 } }
    H.same(ember.autodiff.grad(function(x) return L.det(x) end)(a), want, 1e-12)
    -- rank n - 2: every cofactor is zero
    local b = ember.tensor({ { 1, 2, 0 }, { 2, 4, 0 }, { 3, 6, 0 } }, F64)
    close(ember.autodiff.grad(function(x) return L.det(x) end)(b), ember.zeros({ 3, 3 }, F64), 1e-12)
    -- float32 too, and det of a 2 x 2 by hand
    H.same(L.det(ember.tensor({ { 3, 1 }, { 4, 2 } })), 2, 1e-6)
    H.same(ember.autodiff.grad(function(x) return L.det(x) end)(ember.tensor({ { 1, 2 }, { 2, 4 } })),
      { { 4, -2 }, { -2, 1 } }, 1e-6)
  end)
  it("qr complete gives an orthogonal Q (m x m) and R (m x n)", function()
    for _, a in ipairs({ randn(2, 5, 3), randn(3, 5), randn(4, 4) }) do
      local q, r = L.qr(a, "complete")
      local m, n = a:size(-2), a:size(-1)
      assert.are.same({ m, m }, { q:size(-2), q:size(-1) })
      assert.are.same({ m, n }, { r:size(-2), r:size(-1) })
      close(q:matmul(r), a, 1e-12)
      close(t(q):matmul(q), eye(m):expand(q:shape()), 1e-12)
      close(r:tril(-1), ember.zeros(r:shape(), F64))
    end
    -- an m x 0 matrix: Q the identity
    local q, r = L.qr(ember.zeros({ 3, 0 }, F64), "complete")
    close(q, eye(3))
    assert.are.same({ 3, 0 }, r:shape())
  end)
  it("svd full_matrices gives orthogonal U (m x m) and Vh (n x n)", function()
    for _, a in ipairs({ randn(2, 5, 3), randn(3, 5) }) do
      local u, s, vh = L.svd(a)
      local m, n, k = a:size(-2), a:size(-1), s:size(-1)
      assert.are.same({ m, m, n, n }, { u:size(-2), u:size(-1), vh:size(-2), vh:size(-1) })
      close(t(u):matmul(u), eye(m):expand(u:shape()), 1e-12)
      close(vh:matmul(t(vh)), eye(n):expand(vh:shape()), 1e-12)
      close((u:narrow(-1, 1, k) * s:unsqueeze(-2)):matmul(vh:narrow(-2, 1, k)), a, 1e-12)
    end
    local u, s, vh = L.svd(ember.zeros({ 2, 0 }, F64))
    close(u, eye(2))
    assert.are.same({ { 0 }, { 0, 0 } }, { s:shape(), vh:shape() })
  end)
  it("lstsq finds the minimum-norm solution of a rank-deficient system with every rank-revealing driver", function()
    local a = randn(6, 2):matmul(randn(2, 4))   -- rank 2
    local b = randn(6, 3)
    local want = L.pinv(a):matmul(b)
    for _, drv in ipairs({ "gelsy", "gelsd", "gelss" }) do
      local r = L.lstsq(a, b, { driver = drv })
      close(r.solution, want, 1e-10)
      H.same(r.rank, 2)
      assert.are.same({ 0 }, r.residuals:shape())   -- not full rank: no residuals
    end
    -- the normal equations hold at a full-rank least-squares solution
    local c = randn(6, 4)
    local x = L.lstsq(c, b).solution
    close(t(c):matmul(c:matmul(x) - b), ember.zeros({ 4, 3 }, F64), 1e-12)
    local r = L.lstsq(c, b, { driver = "gelsd" })
    close(r.residuals, (c:matmul(x) - b):pow(2):sum(1), 1e-12)
  end)
  it("float32 factors and solutions agree with float64 ones", function()
    local a, b = randn(2, 5, 3), randn(2, 5, 2)
    local a32, b32 = a:to("float32"), b:to("float32")
    local function near(x32, x64) close(x32:to("float64"), x64, 1e-4) end
    for _, drv in ipairs({ "gels", "gelsy", "gelsd", "gelss" }) do
      local r = L.lstsq(a32, b32, { driver = drv })
      assert.are.equal("float32", r.solution.dtype)
      near(r.solution, L.lstsq(a, b, { driver = drv }).solution)
    end
    local q, r = L.qr(a32, "complete")
    near(q:matmul(r), a)
    local u, s, vh = L.svd(a32:transpose(-1, -2))
    near(s, L.svdvals(a))
    near((u * s:unsqueeze(-2)):matmul(vh:narrow(-2, 1, 3)), t(a))
    near(L.pinv(a32), L.pinv(a))
    near(L.det(a32:narrow(-2, 1, 3)), L.det(a:narrow(-2, 1, 3)))
    near(L.matrix_exp(a32:narrow(-2, 1, 3) * 0.3), L.matrix_exp(a:narrow(-2, 1, 3) * 0.3))
  end)
  it("matrix_rank, pinv's Penrose conditions, matrix_power and cross by hand", function()
    H.same(L.matrix_rank(ember.tensor({ { 1, 2 }, { 2, 4 } }, F64)), 1)
    H.same(L.matrix_rank(ember.zeros({ 2, 3, 0 }, F64)), { 0, 0 })
    local a = randn(5, 2):matmul(randn(2, 3))
    local p = L.pinv(a)
    close(a:matmul(p):matmul(a), a, 1e-12)
    close(p:matmul(a):matmul(p), p, 1e-12)
    H.same(L.matrix_power(ember.tensor({ { 1, 1 }, { 0, 1 } }, F64), 5), { { 1, 5 }, { 0, 1 } })
    H.same(L.matrix_power(ember.tensor({ { 2, 0 }, { 0, 4 } }, F64), -1), { { 0.5, 0 }, { 0, 0.25 } })
    H.same(L.cross(ember.tensor({ 1, 0, 0 }, F64), ember.tensor({ 0, 1, 0 }, F64)), { 0, 0, 1 })
    H.same(L.vector_norm(ember.tensor({ { 3, 0 }, { 0, -4 } }, F64), 0, { 1, 2 }), 2)
  end)
end)

describe("ember.linalg's errors", function()
  local x = ember.randn({ 4, 2 }, F64)
  local function backward(f)
    local w = x:clone()
    w.requires_grad = true
    local gm = ember.autodiff.GradManager():attach({ w })
    gm:record()
    local outs = { f(w) }
    local loss = outs[1]:sum()
    for i = 2, #outs do loss = loss + outs[i]:sum() end
    gm:backward(loss)
    return w.grad
  end
  it("qr's and svd's modes without a gradient raise PyTorch's error in backward", function()
    H.raises(function() backward(function(w) return L.qr(w, "complete") end) end,
      "not differentiable when mode='complete' and nrows > ncols", "4 x 2")
    H.raises(function() backward(function(w) return L.qr(w, "r") end) end, "depends on Q", "mode='r'")
    -- complete of a wide matrix is the reduced one: it has a gradient
    assert.is_not_nil(backward(function(w) return L.qr(w:t(), "complete") end))
    H.raises(function() L.qr(x, "full") end, "ember.linalg.qr", "mode", "full")
  end)
  it("lstsq names bad options and a rank-deficient A under gels", function()
    local b = ember.randn({ 4, 1 }, F64)
    H.raises(function() L.lstsq(x, b, { driver = "gelsx" }) end, "ember.linalg.lstsq", "driver", "gelsx")
    H.raises(function() L.lstsq(x, b, { rcond = 0 / 0 }) end, "ember.linalg.lstsq", "rcond")
    H.raises(function() L.lstsq(x, b, { rconf = 1 }) end, "ember.linalg.lstsq", "rconf")
    -- a zero column leaves an exact 0 on R's diagonal on every BLAS kernel (a matrix of
    -- ones leaves a rounding residue with OpenBLAS's SkylakeX kernels, and gels solves it)
    local low = ember.ones({ 2, 4, 2 }, F64)
    low:narrow(3, 2, 1):fill_(0)
    H.raises(function() L.lstsq(low, ember.ones({ 2, 4, 1 }, F64), { driver = "gels" }) end,
      "ember.linalg.lstsq", "batch element {1}", "full rank")
    H.raises(function() L.lstsq(x, ember.ones({ 3, 1 }, F64)) end, "ember.linalg.lstsq", "{4, 2}", "{3, 1}")
    local bad = ember.ones({ 2, 4, 2 }, F64)
    bad[2][3][1] = 0 / 0
    for _, drv in ipairs({ "gelsd", "gelss" }) do
      H.raises(function() L.lstsq(bad, ember.ones({ 2, 4, 1 }, F64), { driver = drv }) end,
        "ember.linalg.lstsq", "batch element {2}", "NaN or infinity")
    end
    -- gelsy, as PyTorch's, carries NaN through
    assert.is_true(L.lstsq(bad, ember.ones({ 2, 4, 1 }, F64)).solution[2]:isnan():all():item())
  end)
  it("pinv, matrix_rank, matrix_power, cross and the norms name their bad arguments", function()
    H.raises(function() L.pinv(x, { atol = -1 }) end, "ember.linalg.pinv", "atol")
    H.raises(function() L.pinv(x, { hermitian = true }) end, "ember.linalg.pinv", "square")
    H.raises(function() L.matrix_rank(x, { tol = 1 }) end, "ember.linalg.matrix_rank", "tol")
    H.raises(function() L.matrix_power(x, 2) end, "ember.linalg.matrix_power", "square")
    H.raises(function() L.matrix_power(ember.eye(2, 2, F64), 1.5) end, "ember.linalg.matrix_power", "integer", "1.5")
    H.raises(function() L.matrix_power(ember.zeros({ 2, 2 }, F64), -1) end, "ember.linalg.inv", "singular")
    H.raises(function() L.cross(x, x) end, "ember.linalg.cross", "size 3")
    H.raises(function() L.cross(ember.ones({ 3 }), ember.ones({ 1, 3 })) end, "ember.linalg.cross", "number of dims")
    H.raises(function() L.vector_norm(x, "fro") end, "ember.linalg.vector_norm", "ord")
    H.raises(function() L.matrix_norm(x, 2, 1) end, "ember.linalg.matrix_norm", "two dims")
    H.raises(function() L.matrix_norm(x, 3) end, "ember.linalg.norm", "not supported")
    H.raises(function() L.solve(ember.eye(2, 2, F64), ember.ones({ 2, 1 }, F64), { right = true }) end, "ember.linalg.solve", "right")
    H.raises(function() L.cholesky(ember.eye(2, 2, F64), { upper = 1 }) end, "ember.linalg.cholesky", "upper", "boolean")
    H.raises(function() L.cond(x, "fro") end, "ember.linalg.cond", "square")
    H.raises(function() L.multi_dot({ x }) end, "ember.linalg.multi_dot", "at least 2")
    H.raises(function() L.multi_dot({ x, x }) end, "ember.linalg.multi_dot", "tensor 2", "{4, 2}")
    H.raises(function() L.multi_dot({ x, ember.ones({ 2 }, F64), x }) end, "ember.linalg.multi_dot", "tensor 2", "2-D")
    H.raises(function() L.matrix_exp(x) end, "ember.linalg.matrix_exp", "square")
    H.raises(function() L.tensorinv(ember.ones({ 2, 3 }, F64)) end, "ember.linalg.tensorinv", "{2, 3} (6)", "rest (1)")
    H.raises(function() L.tensorinv(x, 3) end, "ember.linalg.tensorinv", "ind", "[1, 2]")
    H.raises(function() L.tensorsolve(ember.ones({ 2, 3 }, F64), ember.ones({ 2 }, F64)) end, "ember.linalg.tensorsolve", "{2, 3}", "{2}")
    H.raises(function() L.vander(x, { n = 2 }) end, "ember.linalg.vander", "unknown option 'n'")
    H.raises(function() L.vander(x, { N = -1 }) end, "ember.linalg.vander", "N", "-1")
    H.raises(function() L.lu_factor(ember.stack({ ember.eye(2, 2, F64), ember.ones({ 2, 2 }, F64) })) end,
      "ember.linalg.lu_factor", "U[2,2]", "batch element {2}", "{2, 2, 2}")
    H.raises(function() L.lu(x, { pivot = false }) end, "ember.linalg.lu_factor_ex", "without pivoting")
    H.raises(function() L.lu_solve(ember.eye(2, 2, F64), ember.ones({ 2 }, { dtype = "int64" }), ember.ones({ 2, 1 }, F64)) end,
      "ember.linalg.lu_solve", "int32")
    H.raises(function() L.lu_solve(ember.eye(2, 2, F64), ember.ones({ 2 }, { dtype = "int32" }), ember.ones({ 3, 1 }, F64)) end,
      "ember.linalg.lu_solve", "{3, 1}")
    H.raises(function() L.lu_solve(ember.eye(2, 2, F64), ember.full({ 2 }, 5, { dtype = "int32" }), ember.ones({ 2, 1 }, F64)) end,
      "ember.linalg.lu_solve", "pivot 1 is 5")
    -- inv_ex and solve_ex report a singular matrix in info, NaN in its result
    local two = ember.stack({ ember.eye(2, 2, F64) * 2, ember.ones({ 2, 2 }, F64) })
    local inv, info = L.inv_ex(two)
    H.same(info, { 0, 2 })
    H.same(inv[1], { { 0.5, 0 }, { 0, 0.5 } })
    assert.is_true(inv[2]:isnan():all():item())
    local sol, info2 = L.solve_ex(two, ember.ones({ 3, 2, 2, 1 }, F64))
    H.same(info2, { 0, 2 })
    assert.are.same({ 3, 2, 2, 1 }, sol:shape())
    assert.is_true(sol:narrow(2, 2, 1):isnan():all():item())
    H.same(sol:narrow(2, 1, 1), ember.full({ 3, 1, 2, 1 }, 0.5, F64):tolist())
    H.raises(function() L.inv_ex(two, { check_errors = true }) end, "ember.linalg.inv", "batch element {2}", "singular")
    H.raises(function() L.inv_ex(two, { check = true }) end, "ember.linalg.inv_ex", "unknown option 'check'")
    H.raises(function() L.householder_product(x:t(), ember.ones({ 2 }, F64)) end,
      "ember.linalg.householder_product", "m >= n", "{2, 4}")
    H.raises(function() L.householder_product(x, ember.ones({ 3 }, F64)) end,
      "ember.linalg.householder_product", "k <= n", "{3}")
    local l, cinfo = L.cholesky_ex(ember.stack({ ember.eye(2, 2, F64) * 4, -ember.eye(2, 2, F64) }))
    H.same(cinfo, { 0, 1 })
    H.same(l[1], { { 2, 0 }, { 0, 2 } })
    assert.is_true(l[2]:isnan():all():item())
    H.raises(function() L.cholesky_ex(-ember.eye(2, 2, F64), { check_errors = true }) end, "ember.linalg.cholesky", "not positive-definite")
    H.raises(function() L.cholesky_ex(x) end, "ember.linalg.cholesky_ex", "square")
    -- lu of a singular matrix works (no raise), as PyTorch's
    local p, l, u = L.lu(ember.ones({ 2, 2 }, F64))
    close(p:matmul(l):matmul(u), ember.ones({ 2, 2 }, F64))
    -- still usable afterwards
    H.same(L.det(ember.eye(2, 2, F64)), 1)
  end)
end)
