-- ember.linalg: linear algebra through LAPACK (issue 32): the LAPACK ops of
-- the table (ops.def's LINALG_*) and what is composed from them. Loaded by
-- tensorlib.lua with its argument helpers.
local ffi = require("ffi")

return function(ember, H, T)
  local C = ember._C
  local Tensor, check, fail, wrap, out1, out2 = H.Tensor, H.check, H.fail, H.wrap, H.out1, H.out2
  local errors = require("ember.errors")
  local huge = math.huge
  local sh = errors.shape
  local options, need_tensor, need_bool, pdim, is_float = T.options, T.need_tensor, T.need_bool, T.pdim, T.is_float
  local linalg = {}
  ember.linalg = linalg
  local function square(op, a)
    need_tensor(op, a, 1)
    if a:dim() < 2 or a:size(-1) ~= a:size(-2) then
      fail(op, "expects a square matrix or a batch of them (..., n, n), got shape " .. sh(a))
    end
    if a.dtype ~= "float32" and a.dtype ~= "float64" then
      fail(op, "expects float32 or float64, got " .. a.dtype)
    end
  end
  -- a matrix or a batch of them (..., m, n), float32 or float64
  local function matrix(op, a)
    need_tensor(op, a, 1)
    if a:dim() < 2 then fail(op, "expects a matrix or a batch of them (..., m, n), got shape " .. sh(a)) end
    if a.dtype ~= "float32" and a.dtype ~= "float64" then fail(op, "expects float32 or float64, got " .. a.dtype) end
  end
  -- the C messages read "linalg.<op>: ...", raised as "ember.linalg.<op>: ..."
  local function named(op, fn) linalg[op] = fn end
  named("inv", function(a)
    square("linalg.inv", a)
    check(C.ember_linalg_inv(a._c, out1))
    return wrap(out1[0])
  end)
  named("slogdet", function(a)
    square("linalg.slogdet", a)
    check(C.ember_linalg_slogdet(a._c, out2, out2 + 1))
    return wrap(out2[0]), wrap(out2[1])
  end)
  -- the product of the LU pivots; its gradient (adjugate^T) holds at
  -- singular matrices too
  named("det", function(a)
    square("linalg.det", a)
    check(C.ember_linalg_det(a._c, out1))
    return wrap(out1[0])
  end)
  -- A (..., n, n) and B (..., n, k) expanded to one batch shape
  local function broadcast_batch(op, a, b)
    local ab, bb = a:shape(), b:shape()
    local nb = math.max(#ab, #bb) - 2
    local sa, sb = {}, {}
    for i = 1, nb do
      local x = ab[#ab - 2 - nb + i] or 1
      local y = bb[#bb - 2 - nb + i] or 1
      if x ~= y and x ~= 1 and y ~= 1 then
        fail(op, ("batch dims of A %s and B %s do not broadcast"):format(sh(a), sh(b)))
      end
      sa[i], sb[i] = math.max(x, y), math.max(x, y)
    end
    sa[#sa + 1], sa[#sa + 2] = a:size(-2), a:size(-1)
    sb[#sb + 1], sb[#sb + 2] = b:size(-2), b:size(-1)
    if #ab ~= #sa then a = a:reshape(a:shape()) end
    return a:expand(sa), b:expand(sb)
  end
  -- whether B of solve(A, B) is a vector: 1-D, or A's shape without its
  -- last dim (PyTorch's rule)
  local function vector_rhs(a, b)
    if b:dim() == 1 then return true end
    if b:dim() ~= a:dim() - 1 then return false end
    for d = 1, b:dim() do
      if b:size(d) ~= a:size(d) then return false end
    end
    return true
  end
  -- X with A X = B (X A = B with {left = false}); B is (..., n, k), or
  -- (..., n) for vectors; batch dims broadcast
  named("solve", function(a, b, opts)
    square("linalg.solve", a)
    need_tensor("linalg.solve", b, 2)
    local o = options("linalg.solve", opts, { left = true })
    if o.left ~= nil and not need_bool("linalg.solve", "left", o.left) then
      -- X A = B is A^T X^T = B^T
      if b:dim() < 2 then fail("linalg.solve", "with left = false B must be (..., k, n), got shape " .. sh(b)) end
      return linalg.solve(a:transpose(-1, -2), b:transpose(-1, -2)):transpose(-1, -2)
    end
    local vec = vector_rhs(a, b)
    if vec then b = b:unsqueeze(-1) end
    if b:dim() < 2 or b:size(-2) ~= a:size(-1) then
      fail("linalg.solve", ("A of shape %s and B of shape %s do not fit"):format(sh(a), sh(b)))
    end
    if b.dtype ~= a.dtype then b = b:to(a.dtype) end
    a, b = broadcast_batch("linalg.solve", a, b)
    check(C.ember_linalg_solve(a._c, b._c, out1))
    local x = wrap(out1[0])
    return vec and x:squeeze(-1) or x
  end)
  -- L lower with A = L L^T, or with {upper = true} U = L^T (A = U^T U)
  named("cholesky", function(a, opts)
    square("linalg.cholesky", a)
    local o = options("linalg.cholesky", opts, { upper = true })
    check(C.ember_linalg_cholesky(a._c, out1))
    local l = wrap(out1[0])
    return need_bool("linalg.cholesky", "upper", o.upper) and l:transpose(-1, -2) or l
  end)
  -- X with A X = B (X A = B with {left = false}) for a triangular A: its
  -- lower triangle is read, or the upper one with {upper = true} (required,
  -- as PyTorch's), and with {unitriangular = true} its diagonal is taken as
  -- ones. LAPACK's trtrs; A's gradient lies in the triangle read, as
  -- PyTorch's. B (..., n, k) ((..., k, n) for left = false), batch dims
  -- broadcast
  named("solve_triangular", function(a, b, opts, ...)
    local op = "linalg.solve_triangular"
    if select("#", ...) > 0 then
      errors.extra_argument("ember." .. op, 4, (...), { "A", "B", "opts" })
    end
    square(op, a)
    need_tensor(op, b, 2)
    local o = options(op, opts, { upper = true, left = true, unitriangular = true })
    if o.upper == nil then fail(op, "upper is required: {upper = true} or {upper = false}") end
    local upper = need_bool(op, "upper", o.upper)
    local left = o.left == nil or need_bool(op, "left", o.left)
    local unit = need_bool(op, "unitriangular", o.unitriangular)
    local n = a:size(-1)
    if b:dim() < 2 or (left and b:size(-2) or b:size(-1)) ~= n then
      fail(op, ("A of shape %s and B of shape %s do not fit (B: (..., %s))"):format(sh(a), sh(b),
        left and (n .. ", k") or ("k, " .. n)))
    end
    if b.dtype ~= a.dtype then
      fail(op, ("A is %s and B is %s: they must have the same dtype"):format(a.dtype, b.dtype))
    end
    if not left then
      -- X A = B is A^T X^T = B^T, the other triangle of A^T
      a, b, upper = a:transpose(-1, -2), b:transpose(-1, -2), not upper
    end
    a, b = broadcast_batch(op, a, b)
    check(C.ember_linalg_solve_triangular(a._c, b._c, upper and 1 or 0, unit and 1 or 0, out1))
    local x = wrap(out1[0])
    return left and x or x:transpose(-1, -2)
  end)
  -- eigenvalues (ascending) and eigenvectors (columns) of a symmetric matrix:
  -- its lower triangle is read, or the upper one with UPLO = "U"
  named("eigh", function(a, uplo)
    square("linalg.eigh", a)
    if uplo ~= nil and uplo ~= "L" and uplo ~= "U" then
      fail("linalg.eigh", "UPLO must be \"L\" or \"U\", got " .. tostring(uplo))
    end
    if uplo == "U" then a = a:transpose(-1, -2) end
    check(C.ember_linalg_eigh(a._c, out2, out2 + 1))
    return wrap(out2[0]), wrap(out2[1])
  end)
  named("eigvalsh", function(a, uplo)
    local w = linalg.eigh(a, uplo)
    return w
  end)
  -- QR: mode "reduced" (Q (..., m, k), R (..., k, n), k = min(m, n)),
  -- "complete" (Q (..., m, m), R (..., m, n)) or "r" (R alone, no gradient,
  -- as PyTorch's)
  local QR_MODES = { reduced = 0, complete = 1, r = 2 }
  named("qr", function(a, mode)
    matrix("linalg.qr", a)
    mode = mode or "reduced"
    if QR_MODES[mode] == nil then
      fail("linalg.qr", "mode must be \"reduced\", \"complete\" or \"r\", got " .. tostring(mode))
    end
    check(C.ember_linalg_qr_mode(a._c, QR_MODES[mode], out2, out2 + 1))
    local q, r = wrap(out2[0]), wrap(out2[1])
    if mode == "r" then return r end
    return q, r
  end)
  -- the SVD A = U diag(S) Vh as (U, S, Vh), S descending: the full U (..., m,
  -- m) and Vh (..., n, n) (full_matrices, PyTorch's default) or the reduced
  -- ones (k = min(m, n) columns of U, rows of Vh)
  local function svd_raw(op, a, full)
    matrix(op, a)
    local o3 = ffi.new("ember_tensor *[3]")
    check(C.ember_linalg_svd_full(a._c, full and 1 or 0, o3, o3 + 1, o3 + 2))
    return wrap(o3[0]), wrap(o3[1]), wrap(o3[2])
  end
  named("svd", function(a, opts)
    local o = options("linalg.svd", opts, { full_matrices = true })
    local full = o.full_matrices == nil or need_bool("linalg.svd", "full_matrices", o.full_matrices)
    return svd_raw("linalg.svd", a, full)
  end)
  named("svdvals", function(a)
    local _, sv = svd_raw("linalg.svdvals", a, false)
    return sv
  end)
  -- the cutoff of pinv and matrix_rank: max(atol, rtol * the largest
  -- singular value), rtol eps * max(m, n) when neither is given and 0 when
  -- only atol is, as PyTorch's
  local EPS = { float32 = 1.1920928955078125e-07, float64 = 2.220446049250313e-16 }
  local function tolerances(op, a, opts)
    local o = options(op, opts, { atol = true, rtol = true, hermitian = true })
    for _, k in ipairs({ "atol", "rtol" }) do
      if o[k] ~= nil and (type(o[k]) ~= "number" or o[k] ~= o[k] or o[k] < 0) then
        fail(op, k .. " must be a number >= 0, got " .. tostring(o[k]))
      end
    end
    local herm = need_bool(op, "hermitian", o.hermitian)
    local atol, rtol = o.atol or 0, o.rtol
    if rtol == nil then rtol = (o.atol ~= nil and o.atol > 0) and 0 or EPS[a.dtype] * math.max(a:size(-1), a:size(-2)) end
    return atol, rtol, herm
  end
  -- the singular values (or |eigenvalues|, hermitian) of a, and U, Vh with
  -- pinv = Vh^T diag(1/S) U^T
  local function spectrum(a, herm)
    if not herm then return linalg.svd(a, { full_matrices = false }) end
    local w, v = linalg.eigh(a)
    return v * w:sign():unsqueeze(-2), w:abs(), v:transpose(-1, -2)
  end
  -- the Moore-Penrose pseudo-inverse (..., n, m) through the SVD (through eigh
  -- with {hermitian = true}): singular values at or below the cutoff count as
  -- zero; differentiable where the rank is constant and the kept singular
  -- values are distinct
  named("pinv", function(a, opts)
    matrix("linalg.pinv", a)
    local atol, rtol, herm = tolerances("linalg.pinv", a, opts)
    if herm then square("linalg.pinv", a) end
    local u, sv, vh = spectrum(a, herm)
    if sv:numel() == 0 then return ember.zeros(a:transpose(-1, -2):shape(), { dtype = a.dtype, device = a.device }) end
    local cut = (sv:detach():max(-1, true) * rtol):clamp(atol)
    local keep = sv:gt(cut)
    local inv = ember.where(keep, 1 / ember.where(keep, sv, 1), 0)
    return (vh:transpose(-1, -2) * inv:unsqueeze(-2)):matmul(u:transpose(-1, -2))
  end)
  -- the number of singular values above the cutoff (int64, batch shape)
  named("matrix_rank", function(a, opts)
    matrix("linalg.matrix_rank", a)
    local atol, rtol, herm = tolerances("linalg.matrix_rank", a, opts)
    if herm then square("linalg.matrix_rank", a) end
    local sv = herm and linalg.eigvalsh(a):abs() or linalg.svdvals(a)
    if sv:size(-1) == 0 then return ember.zeros(sv:shape(), { dtype = "int64", device = a.device }):sum(-1) end
    sv = sv:detach()
    local cut = (sv:max(-1, true) * rtol):clamp(atol)
    return sv:gt(cut):to("int64"):sum(-1)
  end)
  -- least squares: X minimising ||A X - B|| per batch element, A (..., m, n),
  -- B (..., m, k) or (..., m); batch dims broadcast. opts: rcond (the
  -- singular values below rcond times the largest count as zero; default eps
  -- * max(m, n)) and driver ("gelsy", the default, "gels" for full-rank A,
  -- "gelsd", "gelss"). Returns {solution =, residuals =, rank =,
  -- singular_values =} as PyTorch's: residuals (the squared residual norm per
  -- column) when m > n and every A has full rank (not with gelsy), else empty;
  -- rank (int64) except with gels; singular_values with gelsd and gelss. The
  -- solution differentiates as pinv(A) B, PyTorch's rule
  local DRIVERS = { gels = 0, gelsy = 1, gelsd = 2, gelss = 3 }
  named("lstsq", function(a, b, opts)
    local op = "linalg.lstsq"
    matrix(op, a)
    need_tensor(op, b, 2)
    local o = options(op, opts, { rcond = true, driver = true })
    local driver = o.driver or "gelsy"
    if DRIVERS[driver] == nil then
      fail(op, "driver must be \"gels\", \"gelsy\", \"gelsd\" or \"gelss\", got " .. tostring(driver))
    end
    if o.rcond ~= nil and (type(o.rcond) ~= "number" or o.rcond ~= o.rcond) then
      fail(op, "rcond must be a number, got " .. tostring(o.rcond))
    end
    local vec = b:dim() == a:dim() - 1
    if vec then b = b:unsqueeze(-1) end
    if b:dim() < 2 or b:size(-2) ~= a:size(-2) then
      fail(op, ("A of shape %s and B of shape %s do not fit (B: (..., m, k) or (..., m))"):format(sh(a), sh(b)))
    end
    if b.dtype ~= a.dtype then b = b:to(a.dtype) end
    local m, n = a:size(-2), a:size(-1)
    local rcond = o.rcond or EPS[a.dtype] * math.max(m, n)
    local ab, bb = broadcast_batch(op, a, b)
    local o3 = ffi.new("ember_tensor *[3]")
    local ad, bd = ab:detach(), bb:detach()   -- held in locals: the call must not outlive them
    check(C.ember_linalg_lstsq(ad._c, bd._c, DRIVERS[driver], rcond, o3, o3 + 1, o3 + 2))
    local x, rank, sv = wrap(o3[0]), wrap(o3[1]), wrap(o3[2])
    if ember.is_grad_enabled and ember.is_grad_enabled() and (C.ember_is_tracked(a._c) ~= 0 or C.ember_is_tracked(b._c) ~= 0) then
      local y = linalg.pinv(ab):matmul(bb)   -- X's value, pinv(A) B's gradient
      x = x + (y - y:detach())
    end
    local like = { dtype = a.dtype, device = a.device }
    local empty = ember.zeros({ 0 }, like)
    local res = empty
    local full = driver ~= "gelsy" and m > n and (driver == "gels" or rank:eq(n):all():item())
    if full then
      res = (ab:matmul(x) - bb):pow(2):sum(-2)
    end
    return {
      solution = vec and x:squeeze(-1) or x,
      residuals = res,
      rank = driver == "gels" and ember.zeros({ 0 }, { dtype = "int64", device = a.device }) or rank,
      singular_values = (driver == "gelsd" or driver == "gelss") and sv or empty,
    }
  end)
  -- A^n for an integer n: repeated squaring; n = 0 the identity, n < 0 the
  -- inverse's power
  named("matrix_power", function(a, k)
    square("linalg.matrix_power", a)
    if type(k) ~= "number" or k ~= math.floor(k) or k ~= k or math.abs(k) >= 2 ^ 53 then
      fail("linalg.matrix_power", "n must be an integer, got " .. tostring(k))
    end
    if k == 0 then
      return ember.eye(a:size(-1), a:size(-1), { dtype = a.dtype, device = a.device }):expand(a:shape()):clone()
    end
    if k < 0 then a, k = linalg.inv(a), -k end
    local r, p = nil, a
    while true do
      if k % 2 == 1 then r = r and r:matmul(p) or p end
      k = math.floor(k / 2)
      if k == 0 then break end
      p = p:matmul(p)
    end
    return r
  end)
  -- the cross product of 3-vectors along dim (default: the last dim of size
  -- 3, as linalg.cross's -1), batch dims broadcast
  named("cross", function(x, y, dim)
    need_tensor("linalg.cross", x, 1)
    need_tensor("linalg.cross", y, 2)
    if x:dim() ~= y:dim() then
      fail("linalg.cross", ("x of shape %s and y of shape %s must have the same number of dims"):format(sh(x), sh(y)))
    end
    local d = pdim("linalg.cross", dim == nil and -1 or dim, x:dim())
    if x:size(d) ~= 3 or y:size(d) ~= 3 then
      fail("linalg.cross", ("dim %d of x %s and y %s must have size 3"):format(d, sh(x), sh(y)))
    end
    local function c(t, i) return t:narrow(d, i, 1) end
    return ember.cat({ c(x, 2) * c(y, 3) - c(x, 3) * c(y, 2), c(x, 3) * c(y, 1) - c(x, 1) * c(y, 3),
      c(x, 1) * c(y, 2) - c(x, 2) * c(y, 1) }, d)
  end)
  -- vector norms (ord a number, "inf", "-inf"), or for 2-D input / two dims
  -- the matrix norms "fro", 1, -1, "inf", "-inf"
  named("norm", function(a, ord, dim, keepdim)
    need_tensor("linalg.norm", a, 1)
    if not is_float(a) then fail("linalg.norm", "expects a floating-point tensor, got " .. a.dtype) end
    keepdim = need_bool("linalg.norm", "keepdim", keepdim)
    if ord == "inf" then ord = huge elseif ord == "-inf" then ord = -huge end
    local matrix = (type(dim) == "table" and #dim == 2) or (dim == nil and ord ~= nil and a:dim() == 2)
    if not matrix then
      if ord ~= nil and type(ord) ~= "number" then
        fail("linalg.norm", "a vector norm's ord must be a number, got " .. tostring(ord))
      end
      if dim == nil then
        local r = a:reshape({ -1 }):norm(ord == nil and 2 or (ord == huge and "inf" or ord), 1)
        if keepdim then
          local s = {}
          for i = 1, a:dim() do s[i] = 1 end
          r = r:reshape(s)
        end
        return r
      end
      return a:norm(ord == nil and 2 or ord, dim, keepdim)
    end
    local d1, d2
    if dim == nil then d1, d2 = 1, 2 else d1, d2 = pdim("linalg.norm", dim[1], a:dim()), pdim("linalg.norm", dim[2], a:dim()) end
    if ord == nil or ord == "fro" then return a:norm(2, { d1, d2 }, keepdim) end
    local x = a:abs()
    local r
    if ord == 1 or ord == -1 then
      local s = x:sum(d1, true)
      r = ord == 1 and s:max(d2, true) or s:min(d2, true)
    elseif ord == huge or ord == -huge then
      local s = x:sum(d2, true)
      r = ord == huge and s:max(d1, true) or s:min(d1, true)
    elseif ord == 2 or ord == -2 or ord == "nuc" then
      -- from the singular values of the plane of d1, d2 moved last
      local perm = {}
      for d = 1, a:dim() do if d ~= d1 and d ~= d2 then perm[#perm + 1] = d end end
      perm[#perm + 1], perm[#perm + 2] = d1, d2
      local sv = linalg.svdvals(a:permute(perm))
      local v = ord == "nuc" and sv:sum(-1) or (ord == 2 and sv:max(-1) or sv:min(-1))
      -- back to keepdim's shape: size 1 at d1 and d2
      local shape = a:shape()
      shape[d1], shape[d2] = 1, 1
      r = v:reshape(shape)
    else
      fail("linalg.norm", "matrix norm ord " .. tostring(ord) .. " is not supported (supported: \"fro\", \"nuc\", 1, -1, 2, -2, \"inf\", \"-inf\")")
    end
    if not keepdim then
      local hi, lo = math.max(d1, d2), math.min(d1, d2)
      r = r:squeeze(hi):squeeze(lo)
    end
    return r
  end)
  local function numel_of(shape, i, j)
    local p = 1
    for d = i, j do p = p * shape[d] end
    return p
  end
  -- the inverse of A seen as a map from its last dims to its first ind
  -- (default 2): A^-1 of shape (A's dims after ind, then its first ind)
  named("tensorinv", function(a, ind)
    need_tensor("linalg.tensorinv", a, 1)
    ind = ind == nil and 2 or ind
    if type(ind) ~= "number" or ind ~= math.floor(ind) or ind < 1 or ind > a:dim() then
      fail("linalg.tensorinv", ("ind must be an integer in [1, %d], got %s"):format(a:dim(), tostring(ind)))
    end
    local shape = a:shape()
    local p, q = numel_of(shape, 1, ind), numel_of(shape, ind + 1, #shape)
    if p ~= q then
      fail("linalg.tensorinv", ("the product of the first %d dims of %s (%d) must equal that of the rest (%d)"):format(
        ind, sh(a), p, q))
    end
    local out = {}
    for d = ind + 1, #shape do out[#out + 1] = shape[d] end
    for d = 1, ind do out[#out + 1] = shape[d] end
    return linalg.inv(a:reshape({ p, p })):reshape(out)
  end)
  -- X with tensordot(A, X, X:dim()) = B: A's shape is B's followed by X's
  -- (after moving the dims listed in dims, 1-based, to the end)
  named("tensorsolve", function(a, b, dims)
    need_tensor("linalg.tensorsolve", a, 1)
    need_tensor("linalg.tensorsolve", b, 2)
    if dims ~= nil then
      if type(dims) ~= "table" then fail("linalg.tensorsolve", "dims must be a list of dims, got " .. tostring(dims)) end
      local moved, perm = {}, {}
      for i, d in ipairs(dims) do moved[pdim("linalg.tensorsolve", d, a:dim())] = i end
      for d = 1, a:dim() do if not moved[d] then perm[#perm + 1] = d end end
      for _, d in ipairs(dims) do perm[#perm + 1] = pdim("linalg.tensorsolve", d, a:dim()) end
      a = a:permute(perm)
    end
    local shape, nb = a:shape(), b:dim()
    local ok = a:dim() >= nb
    for d = 1, nb do ok = ok and shape[d] == b:size(d) end
    local p, q = numel_of(shape, 1, nb), numel_of(shape, nb + 1, #shape)
    if not ok or p ~= q then
      fail("linalg.tensorsolve", ("A of shape %s must be B's shape %s followed by dims of as many elements"):format(
        sh(a), sh(b)))
    end
    local xs = {}
    for d = nb + 1, #shape do xs[#xs + 1] = shape[d] end
    return linalg.solve(a:reshape({ p, q }), b:reshape({ p })):reshape(xs)
  end)
  -- the Vandermonde matrix (..., n, N) of x (..., n): columns x^0 .. x^(N-1)
  -- (N defaults to n)
  named("vander", function(x, opts)
    need_tensor("linalg.vander", x, 1)
    local o = options("linalg.vander", opts, { N = true })
    if x:dim() < 1 then fail("linalg.vander", "expects at least 1 dim, got shape " .. sh(x)) end
    local n = o.N == nil and x:size(-1) or o.N
    if type(n) ~= "number" or n ~= math.floor(n) or n < 0 then
      fail("linalg.vander", "N must be an integer >= 0, got " .. tostring(n))
    end
    local col = x:unsqueeze(-1)
    local shape = col:shape()
    shape[#shape] = 1
    local one = ember.ones(shape, { dtype = x.dtype, device = x.device })
    if n <= 1 then return one:narrow(-1, 1, n) end
    shape[#shape] = n - 1
    return ember.cat({ one, col:expand(shape):cumprod(-1) }, -1)
  end)
  -- LU with partial pivoting, A = P L U: the packed LU (..., m, n), the
  -- int32 1-based pivots (..., k) and the int32 info (...) (0, or i where
  -- U[i, i] = 0); pivot = false raises, as PyTorch's on the CPU
  named("lu_factor_ex", function(a, opts)
    local op = "linalg.lu_factor_ex"
    matrix(op, a)
    local o = options(op, opts, { pivot = true, check_errors = true })
    if o.pivot ~= nil and not need_bool(op, "pivot", o.pivot) then fail(op, "LU without pivoting is not implemented") end
    local o3 = ffi.new("ember_tensor *[3]")
    check(C.ember_linalg_lu_factor(a._c, o3, o3 + 1, o3 + 2))
    local lu, piv, info = wrap(o3[0]), wrap(o3[1]), wrap(o3[2])
    if need_bool(op, "check_errors", o.check_errors) then
      local bad = info:reshape({ -1 }):tolist()
      for b, v in ipairs(bad) do
        if v < 0 then fail(op, ("LAPACK's getrf failed (info %d) at batch element %d"):format(v, b)) end
      end
    end
    return lu, piv, info
  end)
  -- (LU, pivots) of lu_factor_ex; a zero on U's diagonal raises (lu_solve
  -- would divide by it), naming the batch element
  named("lu_factor", function(a, opts)
    local op = "linalg.lu_factor"
    matrix(op, a)
    local o = options(op, opts, { pivot = true })
    local lu, piv, info = linalg.lu_factor_ex(a, { pivot = o.pivot })
    local flat = info:reshape({ -1 }):tolist()
    for b, v in ipairs(flat) do
      if v > 0 then
        -- the batch element as 1-based indices, as the C ops name it
        local idx, rest = {}, b - 1
        for d = a:dim() - 2, 1, -1 do idx[d], rest = rest % a:size(d) + 1, math.floor(rest / a:size(d)) end
        fail(op, ("U[%d,%d] of the matrix%s of shape %s is zero and using it in lu_solve would divide by zero; "
          .. "linalg.lu or linalg.lu_factor_ex factor it all the same"):format(v, v,
          a:dim() > 2 and (" at batch element {" .. table.concat(idx, ", ") .. "}") or "", sh(a)))
      end
    end
    return lu, piv
  end)
  -- P (..., m, m), L (..., m, k) and U (..., k, n) of a packed LU and its
  -- pivots: L and U differentiate back to LU, P is a constant
  local function lu_unpack(op, lu, piv)
    need_tensor(op, lu, 1)
    need_tensor(op, piv, 2)
    local m, n = lu:size(-2), lu:size(-1)
    local k = math.min(m, n)
    if piv.dtype ~= "int32" or piv:dim() ~= lu:dim() - 1 or piv:size(-1) ~= k then
      fail(op, ("pivots must be int32 of shape (..., %d) for LU %s, got %s %s"):format(k, sh(lu), piv.dtype, sh(piv)))
    end
    local like = { dtype = lu.dtype, device = lu.device }
    local l = lu:tril(-1):narrow(-1, 1, k) + ember.eye(m, k, like)
    local u = lu:narrow(-2, 1, k):triu()
    local pv, vals = piv:reshape({ -1 }):tolist(), {}
    local nb = k > 0 and #pv / k or lu:numel() / math.max(m * n, 1)
    for b = 0, nb - 1 do
      local perm = {}
      for j = 1, m do perm[j] = j end
      for i = 1, k do
        local r = pv[b * k + i]
        if r < 1 or r > m then fail(op, ("pivot %d is %d, outside 1..%d"):format(i, r, m)) end
        perm[i], perm[r] = perm[r], perm[i]
      end
      local base = b * m * m
      for q = 1, m * m do vals[base + q] = 0 end
      for j = 1, m do vals[base + (perm[j] - 1) * m + j] = 1 end
    end
    local pshape = lu:shape()
    pshape[#pshape] = m
    local p = ember.tensor(#vals > 0 and vals or { 0 }, like):narrow(1, 1, #vals):reshape(pshape)
    return p, l, u
  end
  function ember.lu_unpack(lu, pivots) return lu_unpack("lu_unpack", lu, pivots) end
  -- A = P L U: P (..., m, m), L (..., m, k) unit lower, U (..., k, n);
  -- differentiable as PyTorch's
  named("lu", function(a, opts)
    local op = "linalg.lu"
    matrix(op, a)
    local o = options(op, opts, { pivot = true })
    local lu, piv = linalg.lu_factor_ex(a, { pivot = o.pivot })
    return lu_unpack(op, lu, piv)
  end)
  -- X with A X = B (X A = B with {left = false}; A^T for {adjoint = true})
  -- from lu_factor's LU and pivots of a square A; differentiable in LU and B
  named("lu_solve", function(lu, piv, b, opts)
    local op = "linalg.lu_solve"
    matrix(op, lu)
    need_tensor(op, b, 3)
    local o = options(op, opts, { left = true, adjoint = true })
    local left = o.left == nil or need_bool(op, "left", o.left)
    local adj = need_bool(op, "adjoint", o.adjoint)
    if lu:size(-1) ~= lu:size(-2) then fail(op, "expects the LU of a square matrix, got shape " .. sh(lu)) end
    local n = lu:size(-1)
    if b:dim() < 2 or (left and b:size(-2) or b:size(-1)) ~= n then
      fail(op, ("LU of shape %s and B of shape %s do not fit (B: (..., %s))"):format(sh(lu), sh(b),
        left and (n .. ", k") or ("k, " .. n)))
    end
    local p, l, u = lu_unpack(op, lu, piv)
    local st, pt = linalg.solve_triangular, p:transpose(-1, -2)
    if left and not adj then   -- U^-1 L^-1 P^T B
      return st(u, st(l, pt:matmul(b), { upper = false, unitriangular = true }), { upper = true })
    elseif left then           -- A^T X = B: P L^-T U^-T B
      local lt, ut = l:transpose(-1, -2), u:transpose(-1, -2)
      return p:matmul(st(lt, st(ut, b, { upper = false }), { upper = true, unitriangular = true }))
    elseif not adj then        -- X P L U = B: B U^-1 L^-1 P^T
      return st(l, st(u, b, { upper = true, left = false }), { upper = false, unitriangular = true, left = false }):matmul(pt)
    end
    -- X A^T = B: X U^T L^T P^T = B, X = B P L^-T U^-T
    local lt, ut = l:transpose(-1, -2), u:transpose(-1, -2)
    return st(ut, st(lt, b:matmul(p), { upper = true, unitriangular = true, left = false }), { upper = false, left = false })
  end)
  -- the _ex forms: run(a) with each matrix that find_info flags (int32
  -- info (...) > 0) replaced by I and its result made NaN, and the info;
  -- {check_errors = true} runs run(a) itself, which raises
  local function ex(op, a, opts, trailing, run, find_info)
    square(op, a)
    local o = options(op, opts, { check_errors = true })
    local batch = a:shape()
    batch[#batch], batch[#batch - 1] = nil, nil
    if need_bool(op, "check_errors", o.check_errors) then
      return run(a), ember.zeros(batch, { dtype = "int32", device = a.device })
    end
    local info = find_info(a:detach())
    local bad = info:gt(0)
    local n = a:size(-1)
    local r = run(ember.where(bad:unsqueeze(-1):unsqueeze(-1), ember.eye(n, n, { dtype = a.dtype, device = a.device }), a))
    for _ = 1, trailing do bad = bad:unsqueeze(-1) end   -- over r's matrix (or vector) dims
    return ember.where(bad, 0 / 0, r), info
  end
  -- inv and solve that report a singular matrix in info (i > 0: U[i, i]
  -- of its LU is zero) instead of raising
  local function lu_info(a) return select(3, linalg.lu_factor_ex(a)) end
  named("inv_ex", function(a, opts) return ex("linalg.inv_ex", a, opts, 2, linalg.inv, lu_info) end)
  -- cholesky that reports a matrix that is not positive-definite in info
  -- (the order of its first leading minor that is not), with NaN for its L
  named("cholesky_ex", function(a, opts)
    local o = options("linalg.cholesky_ex", opts, { upper = true, check_errors = true })
    return ex("linalg.cholesky_ex", a, { check_errors = o.check_errors }, 2, function(x)
      return linalg.cholesky(x, { upper = o.upper })
    end, function(x)
      check(C.ember_linalg_cholesky_info(x._c, out1))
      return wrap(out1[0])
    end)
  end)
  named("solve_ex", function(a, b, opts)
    square("linalg.solve_ex", a)
    need_tensor("linalg.solve_ex", b, 2)
    return ex("linalg.solve_ex", a, opts, vector_rhs(a, b) and 1 or 2, function(x) return linalg.solve(x, b) end, lu_info)
  end)
  -- the first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i
  -- column i of A (..., m, n) below the diagonal and 1 on it (LAPACK's
  -- reflectors, as geqrf leaves them); tau (..., k), k <= n <= m
  named("householder_product", function(a, tau)
    local op = "linalg.householder_product"
    matrix(op, a)
    need_tensor(op, tau, 2)
    local m, n = a:size(-2), a:size(-1)
    local k = tau:dim() >= 1 and tau:size(-1) or -1
    if n > m or k > n or k < 0 or tau:dim() ~= a:dim() - 1 then
      fail(op, ("A (..., m, n) with m >= n and tau (..., k) with k <= n expected, got %s and %s"):format(sh(a), sh(tau)))
    end
    local like = { dtype = a.dtype, device = a.device }
    local below = ember.ones({ m, n }, like):tril(-1)
    local vs = a * below + ember.eye(m, n, like)   -- the reflectors as columns
    local shape = a:shape()
    shape[#shape] = m
    local q = ember.eye(m, m, like):expand(shape)
    for i = 1, k do
      local v = vs:narrow(-1, i, 1)   -- (..., m, 1)
      q = q - q:matmul(v):matmul(v:transpose(-1, -2)) * tau:narrow(-1, i, 1):unsqueeze(-1)
    end
    return q:narrow(-1, 1, n)
  end)
  -- the condition number: S_max / S_min for p = nil, 2 (S_min / S_max for
  -- -2), else norm(A, p) norm(inv(A), p) (a square A) for "fro", "nuc",
  -- 1, -1, "inf", "-inf"
  named("cond", function(a, p)
    need_tensor("linalg.cond", a, 1)
    if a:dim() < 2 then fail("linalg.cond", "expects a matrix or a batch of them, got shape " .. sh(a)) end
    if p == nil or p == 2 or p == -2 then
      local sv = linalg.svdvals(a)
      local hi, lo = sv:narrow(-1, 1, 1):squeeze(-1), sv:narrow(-1, sv:size(-1), 1):squeeze(-1)
      return p == -2 and lo / hi or hi / lo
    end
    square("linalg.cond", a)
    return linalg.matrix_norm(a, p) * linalg.matrix_norm(linalg.inv(a), p)
  end)
  -- the product of a list of matrices, the first and last of which may be
  -- vectors (a row and a column), left to right
  named("multi_dot", function(list)
    if type(list) ~= "table" or #list < 2 then
      fail("linalg.multi_dot", "expects a list of at least 2 tensors, got " .. tostring(type(list) == "table" and #list or list))
    end
    local n = #list
    for i, t in ipairs(list) do
      need_tensor("linalg.multi_dot", t, i)
      local ok = t:dim() == 2 or (t:dim() == 1 and (i == 1 or i == n))
      if not ok then
        fail("linalg.multi_dot", ("tensor %d must be 2-D (the first and last may be 1-D), got shape %s"):format(i, sh(t)))
      end
    end
    local first, last = list[1]:dim() == 1, list[n]:dim() == 1
    local r = first and list[1]:unsqueeze(1) or list[1]
    for i = 2, n do
      local t = list[i]
      if i == n and last then t = t:unsqueeze(2) end
      if r:size(2) ~= t:size(1) then
        fail("linalg.multi_dot", ("tensor %d of shape %s does not follow the product so far %s"):format(i, sh(list[i]), sh(r)))
      end
      r = r:matmul(t)
    end
    if first then r = r:squeeze(1) end
    if last then r = r:squeeze(-1) end
    return r
  end)
  -- sum(x * y) along dim (default -1), batch dims broadcast
  named("vecdot", function(x, y, dim)
    need_tensor("linalg.vecdot", x, 1)
    need_tensor("linalg.vecdot", y, 2)
    local p = x * y
    return p:sum(pdim("linalg.vecdot", dim == nil and -1 or dim, p:dim()))
  end)
  -- the diagonals of the last two dims (offset > 0 above the main one)
  named("diagonal", function(a, offset)
    need_tensor("linalg.diagonal", a, 1)
    return ember.diagonal(a, offset or 0, -2, -1)
  end)
  -- exp(A) by scaling and squaring: a Taylor series of degree 18 of A / 2^s,
  -- ||A / 2^s||_1 <= 1/2 (s the largest over the batch), squared s times;
  -- composed of matmuls, so differentiable to any order
  named("matrix_exp", function(a)
    square("linalg.matrix_exp", a)
    local n = a:size(-1)
    local I = ember.eye(n, n, { dtype = a.dtype, device = a.device }):expand(a:shape())
    if a:numel() == 0 then return I:clone() end
    local norm1 = a:detach():abs():sum(-2):max():item()
    -- (a NaN or infinite A: no squaring, the series carries them through)
    local sq = (norm1 > 0.5 and norm1 < huge) and math.ceil(math.log(norm1 / 0.5) / math.log(2)) or 0
    local x = sq > 0 and a / 2 ^ sq or a
    local term, r = I, I
    for k = 1, 18 do
      term = term:matmul(x) / k
      r = r + term
    end
    for _ = 1, sq do r = r:matmul(r) end
    return r
  end)
  -- linalg.vector_norm(x, ord?, dim?, keepdim?): x (or each slice over dim,
  -- a dim or a list of them; all dims when nil) as one vector; ord a number
  -- (0 counts the nonzeros, negative ones are sum(|x|^ord)^(1/ord)) or
  -- "inf"/"-inf"
  named("vector_norm", function(a, ord, dim, keepdim)
    local op = "linalg.vector_norm"
    need_tensor(op, a, 1)
    if not is_float(a) then fail(op, "expects a floating-point tensor, got " .. a.dtype) end
    if ord ~= nil and type(ord) ~= "number" and ord ~= "inf" and ord ~= "-inf" then
      fail(op, "ord must be a number, \"inf\" or \"-inf\", got " .. tostring(ord))
    end
    keepdim = need_bool(op, "keepdim", keepdim)
    local ds = {}
    if dim == nil then
      for d = 1, a:dim() do ds[d] = d end
    else
      for i, d in ipairs(type(dim) == "table" and dim or { dim }) do ds[i] = pdim(op, d, a:dim()) end
    end
    if #ds == 0 then   -- a 0-d tensor
      local r = linalg.vector_norm(a:reshape({ 1 }), ord, 1)
      return r
    end
    local o = ord == "-inf" and -huge or (ord == "inf" and huge or (ord or 2))
    if o == 0 then return a:ne(0):to(a.dtype):sum(ds, keepdim) end
    if o > 0 then return a:norm(o == huge and "inf" or o, ds, keepdim) end
    local x = a:abs()
    if o > -huge then return x:pow(o):sum(ds, keepdim):pow(1 / o) end
    table.sort(ds, function(p, q) return p > q end)
    for _, d in ipairs(ds) do x = (x:min(d, true)) end
    if not keepdim then for _, d in ipairs(ds) do x = x:squeeze(d) end end
    return x
  end)
  -- linalg.matrix_norm(A, ord?, dim?, keepdim?): ord "fro" (default), "nuc",
  -- 1, -1, 2, -2, "inf", "-inf" over the dims {-2, -1} (or dim, two dims)
  named("matrix_norm", function(a, ord, dim, keepdim)
    need_tensor("linalg.matrix_norm", a, 1)
    if a:dim() < 2 then fail("linalg.matrix_norm", "expects a matrix or a batch of them, got shape " .. sh(a)) end
    if dim ~= nil and (type(dim) ~= "table" or #dim ~= 2) then
      fail("linalg.matrix_norm", "dim must be a list of two dims, got " .. tostring(dim))
    end
    return linalg.norm(a, ord or "fro", dim or { -2, -1 }, keepdim)
  end)
  ember.inverse, ember.det, ember.slogdet, ember.solve, ember.cholesky, ember.qr, ember.lstsq =
    linalg.inv, linalg.det, linalg.slogdet, linalg.solve, linalg.cholesky, linalg.qr, linalg.lstsq
  ember.eigh = linalg.eigh
  ember.matrix_power, Tensor.matrix_power = linalg.matrix_power, linalg.matrix_power
  -- torch.pinverse: the cutoff rcond relative to the largest singular value
  function ember.pinverse(a, rcond)
    if rcond ~= nil and (type(rcond) ~= "number" or rcond ~= rcond or rcond < 0) then
      fail("pinverse", "rcond must be a number >= 0, got " .. tostring(rcond))
    end
    return linalg.pinv(a, { rtol = rcond or 1e-15 })
  end
  Tensor.pinverse = ember.pinverse
  -- torch.svd: (U, S, V) with V, not Vh; reduced unless some = false
  function ember.svd(a, some)
    if some ~= nil and type(some) ~= "boolean" then fail("svd", "some must be a boolean, got " .. type(some)) end
    local u, sv, vh = svd_raw("svd", a, some == false)
    return u, sv, vh:transpose(-1, -2)
  end
  Tensor.svd = ember.svd
  Tensor.inverse, Tensor.det, Tensor.slogdet, Tensor.cholesky, Tensor.qr =
    linalg.inv, linalg.det, linalg.slogdet, linalg.cholesky, linalg.qr
end
