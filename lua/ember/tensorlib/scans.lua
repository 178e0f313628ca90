-- The tensor library's scans (cumsum, cumprod, logcumsumexp), polygamma,
-- and sorting (sort, argsort, topk, kthvalue, median, mode).
-- Part of the everyday tensor library: lua/ember/tensorlib.lua passes
-- the helpers the parts share as L. Dims, index arguments and index
-- results are 1-based, as everywhere in ember.
return function(ember, L)
  local C, check, fail, wrap, dim0, is_tensor = L.C, L.check, L.fail, L.wrap, L.dim0, L.is_tensor
  local out1, out2, floor, huge, sh, is_float = L.out1, L.out2, L.floor, L.huge, L.sh, L.is_float
  local def, options, need_tensor, need_bool = L.def, L.options, L.need_tensor, L.need_bool
  local need_int, pdim, like_opts, arange_on = L.need_int, L.pdim, L.like_opts, L.arange_on
  local Tensor = L.Tensor
  ---------------------------------------------------------------- scans
  local function with_dtype(op, t, opts)
    opts = options(op, opts, { dtype = true })
    if opts.dtype ~= nil then t = t:to(opts.dtype) end
    return t
  end
  -- a 0-d tensor scans as one element
  local function scan(op, t, dim, run)
    need_tensor(op, t, 1)
    if dim == nil then fail(op, "dim is required") end
    local nd = t:dim()
    if nd == 0 then
      pdim(op, dim, 1)
      return run(t:reshape({ 1 }), 0):reshape({})
    end
    return run(t, dim0(op, dim, nd))
  end
  def("cumsum", 3, function(t, dim, opts)
    return scan("cumsum", t, dim, function(a, d)
      a = with_dtype("cumsum", a, opts)
      check(C.ember_cumsum(a._c, d, 0, out1))
      return wrap(out1[0])
    end)
  end, true)
  def("cumprod", 3, function(t, dim, opts)
    return scan("cumprod", t, dim, function(a, d)
      a = with_dtype("cumprod", a, opts)
      check(C.ember_cumprod(a._c, d, out1))
      return wrap(out1[0])
    end)
  end, true)
  -- log(cumsum(exp(t))) along dim as a Hillis-Steele scan of logaddexp
  -- (log2(n) rounds of shifted pairs): exact for any range of values, and
  -- differentiable through the rounds
  local function logaddexp(a, b)
    local ge = a:ge(b)
    local m, d = ember.where(ge, a, b), ember.where(ge, b - a, a - b)
    -- both -inf (or both inf): d is NaN; the sum is m, and its gradient goes
    -- to a (no NaN reaches it through d); NaN inputs stay NaN
    d = ember.where(a:eq(b):logical_and(m:abs():eq(huge)), 0, d)
    return m + d:exp():log1p()
  end
  def("logcumsumexp", 2, function(t, dim)
    need_tensor("logcumsumexp", t, 1)
    if not is_float(t) then fail("logcumsumexp", "expects a floating-point tensor, got " .. t.dtype) end
    return scan("logcumsumexp", t, dim, function(a, d)
      local dd = d + 1
      local n = a:size(dd)
      local y, s = a, 1
      while s < n do
        y = ember.cat({ y:narrow(dd, 1, s), logaddexp(y:narrow(dd, s + 1, n - s), y:narrow(dd, 1, n - s)) }, dd)
        s = s * 2
      end
      return y == a and a:clone() or y
    end)
  end, true)

  -- the n-th derivative of digamma (PyTorch's torch.polygamma(n, t) and
  -- t.polygamma(n)); its gradient is polygamma(n + 1)
  function ember.polygamma(n, t)
    need_int("polygamma", "n", n, 0)
    if n >= 2 ^ 31 then fail("polygamma", "n must be below 2^31, got " .. n) end
    need_tensor("polygamma", t, 2)
    check(C.ember_polygamma(n, t._c, out1))
    return wrap(out1[0])
  end
  function Tensor.polygamma(t, n) return ember.polygamma(n, t) end

  ---------------------------------------------------------------- sorting
  -- sort(t, dim = -1, descending = false) or sort(t, {dim =, descending =, stable =});
  -- the sort is always stable
  local function sort_args(op, t, dim, descending)
    need_tensor(op, t, 1)
    if type(dim) == "table" then
      if descending ~= nil then fail(op, "takes an options table or (dim, descending), not both") end
      local o = options(op, dim, { dim = true, descending = true, stable = true })
      need_bool(op, "stable", o.stable)
      dim, descending = o.dim, o.descending
    end
    return dim or -1, need_bool(op, "descending", descending)
  end
  local function sort_raw(op, t, dim, desc)
    if t:dim() == 0 then
      pdim(op, dim, 1)
      return t:clone(), ember.ones({}, like_opts(t, "int64"))
    end
    check(C.ember_sort(t._c, dim0(op, dim, t:dim()), desc and 1 or 0, out2, out2 + 1))
    local v, i = wrap(out2[0]), wrap(out2[1])
    return v, i + 1
  end
  def("sort", 3, function(t, dim, descending)
    local d, desc = sort_args("sort", t, dim, descending)
    return sort_raw("sort", t, d, desc)
  end, true)
  def("argsort", 3, function(t, dim, descending)
    local d, desc = sort_args("argsort", t, dim, descending)
    local _, i = sort_raw("argsort", t, d, desc)
    return i
  end, true)
  -- the k largest (or smallest) along dim, in order
  def("topk", 3, function(t, k, opts)
    need_tensor("topk", t, 1)
    if type(opts) == "number" then opts = { dim = opts } end
    local o = options("topk", opts, { dim = true, largest = true, sorted = true })
    local largest = o.largest == nil or need_bool("topk", "largest", o.largest)
    need_bool("topk", "sorted", o.sorted)
    local nd = math.max(t:dim(), 1)
    local d = pdim("topk", o.dim or -1, nd)
    local n = t:dim() == 0 and 1 or t:size(d)
    need_int("topk", "k", k, 0)
    if k > n then fail("topk", ("k = %d is larger than dim %d of size %d (shape %s)"):format(k, d, n, sh(t))) end
    if t:dim() == 0 then return sort_raw("topk", t, d, largest) end
    check(C.ember_topk(t._c, k, d - 1, largest and 1 or 0, out2, out2 + 1))
    local v, i = wrap(out2[0]), wrap(out2[1])
    return v, i + 1
  end, true)
  local function kth_sorted(op, t, d, keepdim, pos)
    local v, i = sort_raw(op, t, d, false)
    if t:dim() == 0 then return v, i end
    if is_tensor(pos) then   -- a position per row (keepdim shape)
      v, i = v:gather(d, pos), i:gather(d, pos)
      if not keepdim then v, i = v:squeeze(d), i:squeeze(d) end
      return v, i
    end
    v, i = v:select(d, pos), i:select(d, pos)
    if keepdim then v, i = v:unsqueeze(d), i:unsqueeze(d) end
    return v, i
  end
  -- the k-th smallest along dim (k 1-based) and its index
  def("kthvalue", 4, function(t, k, dim, keepdim)
    need_tensor("kthvalue", t, 1)
    local nd = math.max(t:dim(), 1)
    local d = pdim("kthvalue", dim or -1, nd)
    local n = t:dim() == 0 and 1 or t:size(d)
    need_int("kthvalue", "k", k, 1)
    if k > n then fail("kthvalue", ("k = %d out of range for dim %d of size %d (shape %s)"):format(k, d, n, sh(t))) end
    return kth_sorted("kthvalue", t, d, need_bool("kthvalue", "keepdim", keepdim), k)
  end, true)
  -- the lower median (of all elements: a 0-d value; along dim: values and
  -- indices); a row with NaN gives NaN, as PyTorch's
  def("median", 3, function(t, dim, keepdim)
    need_tensor("median", t, 1)
    local all = dim == nil
    if all then
      if keepdim ~= nil then fail("median", "keepdim needs a dim") end
      if t:numel() == 0 then fail("median", "of an empty tensor") end
      t = t:reshape({ -1 })
    end
    local nd = math.max(t:dim(), 1)
    local d = pdim("median", all and 1 or dim, nd)
    local n = t:dim() == 0 and 1 or t:size(d)
    if n == 0 then fail("median", ("dim %d of shape %s is empty"):format(d, sh(t))) end
    keepdim = need_bool("median", "keepdim", keepdim)
    local pos = floor((n - 1) / 2) + 1
    if is_float(t) and t:dim() > 0 then
      -- sort puts NaN last: a row with NaN takes its first NaN
      local nans = t:ne(t):sum(d, true)
      pos = ember.where(nans:gt(0), (nans * -1) + (n + 1), pos)
    end
    local v, i = kth_sorted("median", t, d, keepdim or all, pos)
    if all then return v:reshape({}) end
    return v, i
  end, true)
  -- the most frequent value along dim (ties: the smallest) and the index of
  -- its last occurrence
  def("mode", 3, function(t, dim, keepdim)
    need_tensor("mode", t, 1)
    local nd = math.max(t:dim(), 1)
    local d = pdim("mode", dim or -1, nd)
    keepdim = need_bool("mode", "keepdim", keepdim)
    if t:dim() == 0 then return t:clone(), ember.ones({}, like_opts(t, "int64")) end
    local n = t:size(d)
    if n == 0 then fail("mode", ("dim %d of shape %s is empty"):format(d, sh(t))) end
    local x = t:detach():transpose(d, -1):contiguous()
    local s, _ = sort_raw("mode", x, -1, false)
    -- each sorted value's count: its run's end minus its start (binary searches)
    local flat = s:dim() == 1 and s or s:reshape({ -1, n })
    local counts = (ember.searchsorted(flat, flat, { right = true }) - ember.searchsorted(flat, flat)):reshape(s:shape())
    local _, j = counts:max(-1, true)             -- first of the largest counts: the smallest value
    local val = s:gather(-1, j)                   -- (..., 1)
    -- the last position holding that value
    local hit = x:eq(val)
    local pos = ember.where(hit, arange_on(n, t) + 1, 0):max(-1, true)
    local v = t:transpose(d, -1):gather(-1, pos)
    v, pos = v:transpose(d, -1), pos:transpose(d, -1)
    if not keepdim then v, pos = v:squeeze(d), pos:squeeze(d) end
    return v, pos
  end, true)
  L.with_dtype = with_dtype
  L.sort_raw = sort_raw
end
