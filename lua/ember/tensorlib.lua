-- The everyday tensor library (issue 32, part A): scans, sorting, logic,
-- splitting, triangles and diagonals, scatter, products, einsum, counting,
-- and linear algebra (ember.linalg). cumsum, cumprod, sort and the LAPACK ops
-- are ops of the table (ops.def); everything else is composed from declared
-- ops, so it runs on every device and differentiates through them. Dims,
-- index arguments and index results are 1-based, as everywhere in ember.
-- The parts by concern are lua/ember/tensorlib/*.lua (scans and sorting,
-- logic, shape, products and counting); searching and linear algebra are here.
local ffi = require("ffi")

return function(ember, H)
  local C = ember._C
  local Tensor, check, fail, wrap, tensor_arg = H.Tensor, H.check, H.fail, H.wrap, H.tensor_arg
  local dim0, is_tensor, out1, out2, keep_alive = H.dim0, H.is_tensor, H.out1, H.out2, H.keep_alive
  local DTYPES, I32, I64 = H.DTYPES, H.I32, H.I64
  local errors = require("ember.errors")
  local floor, huge = math.floor, math.huge
  local unpack = table.unpack or unpack
  local sh = errors.shape

  local function is_int(x) return type(x) == "number" and x == floor(x) end
  local function is_float(t) local d = t.dtype return d == "float32" or d == "float64" or d == "float16" or d == "bfloat16" end

  -- ember.<name> and t:<name>() (method = true) taking at most nargs
  -- arguments: fn has exactly nargs parameters, and init.lua's wrappers
  -- (errors.arity_checked) raise for a value past them, counted as the
  -- caller counts ("ember.Tensor:sort: extra argument 3 (5): it takes 2
  -- (dim, descending)").
  local function def(name, nargs, fn, method)
    assert(errors.nparams(fn) == nargs, name .. ": fn must have exactly nargs parameters")
    ember[name] = fn
    if method then Tensor[name] = fn end
    return fn
  end

  -- an options table with only the keys allowed (a set); nil gives {}
  local options = errors.options

  local function need_tensor(op, x, n)
    if not is_tensor(x) then errors.argument(op, n, "a tensor", x) end
    tensor_arg(op, x, n)
    return x
  end
  local function need_bool(op, what, v)
    if v ~= nil and type(v) ~= "boolean" then fail(op, what .. " must be a boolean, got " .. type(v)) end
    return v == true
  end
  local function need_int(op, what, v, lo)
    if not is_int(v) or (lo and v < lo) then
      fail(op, ("%s must be an integer%s, got %s"):format(what, lo and (" >= " .. lo) or "", tostring(v)))
    end
    return v
  end
  -- a 1-based (or negative) dim as a positive 1-based one
  local function pdim(op, d, nd) return dim0(op, d, nd) + 1 end
  local function idx0(t) return keep_alive(t - 1)._c end   -- a 1-based index tensor for C
  local function like_opts(t, dtype) return { dtype = dtype or t.dtype, device = t.device } end
  local function arange_on(n, t) return ember.arange(n, { dtype = "int64", device = t.device }) end

  -- the helpers the parts share; scans adds with_dtype and sort_raw, logic
  -- bool_of, for the parts after them
  local L = { C = C, Tensor = Tensor, check = check, fail = fail, wrap = wrap,
    tensor_arg = tensor_arg, dim0 = dim0, is_tensor = is_tensor, out1 = out1, out2 = out2,
    errors = errors, floor = floor, huge = huge, unpack = unpack, sh = sh, is_int = is_int,
    is_float = is_float, def = def, options = options, need_tensor = need_tensor,
    need_bool = need_bool, need_int = need_int, pdim = pdim, idx0 = idx0, like_opts = like_opts,
    arange_on = arange_on }
  for _, part in ipairs({ "scans", "logic", "shape", "products" }) do
    require("ember.tensorlib." .. part)(ember, L)
  end

  ---------------------------------------------------------------- searching
  -- insertion points (1-based) that keep sorted_sequence's last dim sorted:
  -- before equal values, or after them with {right = true} (or side = "right")
  local function search(op, seq, v, right)
    if seq:dim() == 0 then fail(op, "the sorted sequence must have at least 1 dim") end
    local scalar = type(v) == "number"
    if scalar then v = ember.tensor({ v }, { dtype = seq.dtype, device = seq.device }) end
    need_tensor(op, v, 2)
    if seq:dim() > 1 then
      local ok = v:dim() == seq:dim()
      for d = 1, seq:dim() - 1 do ok = ok and v:size(d) == seq:size(d) end
      if not ok then
        fail(op, ("values of shape %s must match the leading dims of the sequence %s"):format(sh(v), sh(seq)))
      end
    end
    check(C.ember_searchsorted(seq._c, v._c, right and 1 or 0, out1))
    local r = wrap(out1[0]) + 1
    if scalar then r = r:reshape({}) end
    return r
  end
  def("searchsorted", 3, function(seq, v, opts)
    need_tensor("searchsorted", seq, 1)
    local o = options("searchsorted", opts, { right = true, side = true })
    local right = need_bool("searchsorted", "right", o.right)
    if o.side ~= nil then
      if o.side ~= "left" and o.side ~= "right" then
        fail("searchsorted", "side must be \"left\" or \"right\", got " .. tostring(o.side))
      end
      if o.right ~= nil and right ~= (o.side == "right") then fail("searchsorted", "right and side disagree") end
      right = o.side == "right"
    end
    return search("searchsorted", seq, v, right)
  end)
  -- the bucket (1-based) of each element among boundaries (1-D, sorted):
  -- bucket i holds boundaries[i-1] < x <= boundaries[i] ({right = true}:
  -- boundaries[i-1] <= x < boundaries[i]); n + 1 past the last
  def("bucketize", 3, function(t, boundaries, opts)
    if type(t) ~= "number" then need_tensor("bucketize", t, 1) end
    need_tensor("bucketize", boundaries, 2)
    if boundaries:dim() ~= 1 then fail("bucketize", "boundaries must be 1-D, got shape " .. sh(boundaries)) end
    local o = options("bucketize", opts, { right = true })
    return search("bucketize", boundaries, t, need_bool("bucketize", "right", o.right))
  end)

  ---------------------------------------------------------------- linear algebra (LAPACK)
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
  named("det", function(a)
    local s, l = linalg.slogdet(a)
    return s * l:exp()
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
  -- X with A X = B; B is (..., n, k), or (..., n) for vectors; batch dims broadcast
  named("solve", function(a, b)
    square("linalg.solve", a)
    need_tensor("linalg.solve", b, 2)
    local vec = b:dim() == 1 or b:dim() == a:dim() - 1
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
  named("cholesky", function(a)
    square("linalg.cholesky", a)
    check(C.ember_linalg_cholesky(a._c, out1))
    return wrap(out1[0])
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
  -- the reduced QR (Q (..., m, k), R (..., k, n), k = min(m, n)); mode
  -- "reduced" or "r" (R alone)
  named("qr", function(a, mode)
    need_tensor("linalg.qr", a, 1)
    if a:dim() < 2 then fail("linalg.qr", "expects a matrix or a batch of them (..., m, n), got shape " .. sh(a)) end
    if a.dtype ~= "float32" and a.dtype ~= "float64" then fail("linalg.qr", "expects float32 or float64, got " .. a.dtype) end
    mode = mode or "reduced"
    if mode ~= "reduced" and mode ~= "r" then
      fail("linalg.qr", "mode must be \"reduced\" or \"r\", got " .. tostring(mode)
        .. (mode == "complete" and " (the complete Q is not supported)" or ""))
    end
    check(C.ember_linalg_qr(a._c, out2, out2 + 1))
    local q, r = wrap(out2[0]), wrap(out2[1])
    if mode == "r" then return r end
    return q, r
  end)
  -- the SVD A = U diag(S) Vh as (U, S, Vh), S descending. Reduced only: for a
  -- non-square A PyTorch's default full_matrices = true raises, asking for
  -- {full_matrices = false}
  local function svd_raw(op, a)
    need_tensor(op, a, 1)
    if a:dim() < 2 then fail(op, "expects a matrix or a batch of them (..., m, n), got shape " .. sh(a)) end
    if a.dtype ~= "float32" and a.dtype ~= "float64" then fail(op, "expects float32 or float64, got " .. a.dtype) end
    local o3 = ffi.new("ember_tensor *[3]")
    check(C.ember_linalg_svd(a._c, o3, o3 + 1, o3 + 2))
    return wrap(o3[0]), wrap(o3[1]), wrap(o3[2])
  end
  named("svd", function(a, opts)
    local o = options("linalg.svd", opts, { full_matrices = true })
    local full = o.full_matrices == nil or need_bool("linalg.svd", "full_matrices", o.full_matrices)
    need_tensor("linalg.svd", a, 1)
    if full and a:dim() >= 2 and a:size(-1) ~= a:size(-2) then
      fail("linalg.svd", ("the full U and Vh of a non-square %s are not supported; pass {full_matrices = false} "
        .. "for the reduced SVD"):format(sh(a)))
    end
    return svd_raw("linalg.svd", a)
  end)
  named("svdvals", function(a)
    local _, sv = svd_raw("linalg.svdvals", a)
    return sv
  end)
  -- the least-squares solution of A X = B for a full-rank A (..., m, n),
  -- through QR: of A when m >= n, of A^T (the minimum-norm solution) when
  -- m < n. Returns {solution = X}, as PyTorch's result's field
  named("lstsq", function(a, b)
    need_tensor("linalg.lstsq", a, 1)
    need_tensor("linalg.lstsq", b, 2)
    if a:dim() < 2 then fail("linalg.lstsq", "A must be a matrix or a batch of them, got shape " .. sh(a)) end
    local vec = b:dim() == a:dim() - 1
    if vec then b = b:unsqueeze(-1) end
    if b:dim() < 2 or b:size(-2) ~= a:size(-2) then
      fail("linalg.lstsq", ("A of shape %s and B of shape %s do not fit (B: (..., m, k) or (..., m))"):format(sh(a), sh(b)))
    end
    if b.dtype ~= a.dtype then b = b:to(a.dtype) end
    local m, n = a:size(-2), a:size(-1)
    local x
    if m >= n then
      local q, r = linalg.qr(a)
      x = linalg.solve(r, q:transpose(-1, -2):matmul(b))
    else
      local q, r = linalg.qr(a:transpose(-1, -2))
      x = q:matmul(linalg.solve(r:transpose(-1, -2), b))
    end
    return { solution = vec and x:squeeze(-1) or x }
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
  ember.inverse, ember.det, ember.slogdet, ember.solve, ember.cholesky, ember.qr, ember.lstsq =
    linalg.inv, linalg.det, linalg.slogdet, linalg.solve, linalg.cholesky, linalg.qr, linalg.lstsq
  ember.eigh = linalg.eigh
  -- torch.svd: (U, S, V) with V, not Vh; reduced unless some = false (not supported for non-square)
  function ember.svd(a, some)
    if some ~= nil and type(some) ~= "boolean" then fail("svd", "some must be a boolean, got " .. type(some)) end
    need_tensor("svd", a, 1)
    if some == false and a:dim() >= 2 and a:size(-1) ~= a:size(-2) then
      fail("svd", "some = false (the full U and V) of a non-square " .. sh(a) .. " is not supported")
    end
    local u, sv, vh = svd_raw("svd", a)
    return u, sv, vh:transpose(-1, -2)
  end
  Tensor.svd = ember.svd
  Tensor.inverse, Tensor.det, Tensor.slogdet, Tensor.cholesky, Tensor.qr =
    linalg.inv, linalg.det, linalg.slogdet, linalg.cholesky, linalg.qr
end
