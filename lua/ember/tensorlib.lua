-- The everyday tensor library (issue 32, part A): scans, sorting, logic,
-- splitting, triangles and diagonals, scatter, products, einsum, counting,
-- and linear algebra (ember.linalg). cumsum, cumprod, sort and the LAPACK ops
-- are ops of the table (ops.def); everything else is composed from declared
-- ops, so it runs on every device and differentiates through them. Dims,
-- index arguments and index results are 1-based, as everywhere in ember.
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
    if v ~= nil and type(v) ~= "boolean" then fail(op, what .. " must be a boolean, got " .. errors.show(v)) end
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
    -- both -inf: d is NaN; the sum is -inf
    local r = m + d:exp():log1p()
    return ember.where(m:eq(-huge), m, r)
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

  ---------------------------------------------------------------- logic
  local function bool_of(t) return t.dtype == "bool" and t or t:ne(0) end
  -- any / all of every element (0-d) or along dim
  local function any_all(op, is_any)
    return function(t, dim, keepdim)
      need_tensor(op, t, 1)
      keepdim = need_bool(op, "keepdim", keepdim)
      if dim == nil and keepdim then fail(op, "keepdim needs a dim") end
      local m = is_any and bool_of(t) or bool_of(t):logical_not()
      local c = dim == nil and m:sum() or m:sum(pdim(op, dim, math.max(t:dim(), 1)), keepdim)
      return is_any and c:gt(0) or c:eq(0)
    end
  end
  def("any", 3, any_all("any", true), true)
  def("all", 3, any_all("all", false), true)
  def("isnan", 1, function(t)
    need_tensor("isnan", t, 1)
    if not is_float(t) then return ember.zeros(t:shape(), like_opts(t, "bool")) end
    return t:ne(t)
  end, true)
  def("isinf", 1, function(t)
    need_tensor("isinf", t, 1)
    if not is_float(t) then return ember.zeros(t:shape(), like_opts(t, "bool")) end
    return t:abs():eq(huge)
  end, true)
  def("isfinite", 1, function(t)
    need_tensor("isfinite", t, 1)
    if not is_float(t) then return ember.ones(t:shape(), like_opts(t, "bool")) end
    return (t - t):eq(0)
  end, true)
  local function logical(op, f)
    return function(a, b)
      need_tensor(op, a, 1)
      need_tensor(op, b, 2)
      return (f(bool_of(a), bool_of(b)))   -- not a tail call: an error names this op (errors.lua)
    end
  end
  def("logical_and", 2, logical("logical_and", function(a, b) return a:mul(b) end), true)
  def("logical_or", 2, logical("logical_or", function(a, b) return ember.maximum(a, b) end), true)
  def("logical_xor", 2, logical("logical_xor", function(a, b) return a:ne(b) end), true)
  def("logical_not", 1, function(t)
    need_tensor("logical_not", t, 1)
    return t:eq(0)
  end, true)
  -- |a - b| <= atol + rtol |b| elementwise (bool); NaNs equal when equal_nan
  local function isclose(op, a, b, rtol, atol, equal_nan)
    need_tensor(op, a, 1)
    need_tensor(op, b, 2)
    if type(rtol) == "table" then
      if atol ~= nil or equal_nan ~= nil then fail(op, "takes an options table or (rtol, atol, equal_nan), not both") end
      local o = options(op, rtol, { rtol = true, atol = true, equal_nan = true })
      rtol, atol, equal_nan = o.rtol, o.atol, o.equal_nan
    end
    rtol, atol = rtol or 1e-5, atol or 1e-8
    if type(rtol) ~= "number" or not (rtol >= 0) then fail(op, "rtol must be a number >= 0, got " .. tostring(rtol)) end
    if type(atol) ~= "number" or not (atol >= 0) then fail(op, "atol must be a number >= 0, got " .. tostring(atol)) end
    equal_nan = need_bool(op, "equal_nan", equal_nan)
    local close = a:eq(b)
    if is_float(a) or is_float(b) then
      local af, bf = a, b
      if not is_float(af) then af = af:to(bf.dtype) end
      if not is_float(bf) then bf = bf:to(af.dtype) end
      local diff = (af - bf):abs()
      close = close:logical_or(diff:le(bf:abs() * rtol + atol):logical_and(diff:ne(huge)))
      if equal_nan then close = close:logical_or(af:ne(af):logical_and(bf:ne(bf))) end
    end
    return close
  end
  def("isclose", 5, function(a, b, rtol, atol, equal_nan)
    return isclose("isclose", a, b, rtol, atol, equal_nan)
  end, true)
  def("allclose", 5, function(a, b, rtol, atol, equal_nan)
    local c = isclose("allclose", a, b, rtol, atol, equal_nan)
    return c:numel() == 0 or c:all():item() == true or c:all():item() == 1
  end, true)
  -- same shape and the same values (a Lua boolean)
  def("equal", 2, function(a, b)
    need_tensor("equal", a, 1)
    need_tensor("equal", b, 2)
    if not errors.same_shape(a, b) then return false end
    if a:numel() == 0 then return true end
    local r = a:eq(b):all():item()
    return r == true or r == 1
  end, true)

  ---------------------------------------------------------------- splitting and arranging
  -- `chunks` pieces of ceil(n / chunks) along dim (the last may be smaller, and
  -- fewer come back when n is small), as views
  def("chunk", 3, function(t, chunks, dim)
    need_tensor("chunk", t, 1)
    need_int("chunk", "chunks", chunks, 1)
    if t:dim() == 0 then fail("chunk", "expects a tensor with at least 1 dim, got a 0-d tensor") end
    local d = pdim("chunk", dim or 1, t:dim())
    local n = t:size(d)
    local size = math.max(math.ceil(n / chunks), n == 0 and 0 or 1)
    if n == 0 then
      local r = {}
      for i = 1, chunks do r[i] = t:narrow(d, 1, 0) end
      return r
    end
    return ember.split(t, size, d)
  end, true)
  -- pieces of split_size along dim (the last smaller), or of the listed sizes
  def("split", 3, function(t, size, dim)
    need_tensor("split", t, 1)
    if t:dim() == 0 then fail("split", "expects a tensor with at least 1 dim, got a 0-d tensor") end
    local d = pdim("split", dim or 1, t:dim())
    local n, r, start = t:size(d), {}, 1
    if type(size) == "table" then
      local total = 0
      for i = 1, #size do
        need_int("split", "section size " .. i, size[i], 0)
        total = total + size[i]
      end
      if total ~= n then
        fail("split", ("section sizes {%s} sum to %d, not the %d of dim %d (shape %s)")
          :format(table.concat(size, ", "), total, n, d, sh(t)))
      end
      for i = 1, #size do
        r[i] = t:narrow(d, start, size[i])
        start = start + size[i]
      end
      return r
    end
    need_int("split", "split_size", size, 1)
    if n == 0 then return { t:narrow(d, 1, 0) } end
    while start <= n do
      local len = math.min(size, n - start + 1)
      r[#r + 1] = t:narrow(d, start, len)
      start = start + len
    end
    return r
  end, true)
  local function dims_list(op, t, dims)
    if type(dims) == "number" then dims = { dims } end
    if type(dims) ~= "table" or is_tensor(dims) then fail(op, "dims must be a number or a list, got " .. type(dims)) end
    local r, seen = {}, {}
    for i = 1, #dims do
      local d = pdim(op, dims[i], t:dim())
      if seen[d] then fail(op, "dim " .. d .. " appears twice") end
      seen[d] = true
      r[i] = d
    end
    return r
  end
  -- reversed along dims (a copy, as PyTorch's)
  def("flip", 2, function(t, dims)
    need_tensor("flip", t, 1)
    if dims == nil then fail("flip", "dims is required") end
    local r = t
    for _, d in ipairs(dims_list("flip", t, dims)) do
      local n = t:size(d)
      r = r:index_select(d, arange_on(n, t) * -1 + n)
    end
    return r == t and t:clone() or r
  end, true)
  def("fliplr", 1, function(t) return ember.flip(t, 2) end, true)
  def("flipud", 1, function(t) return ember.flip(t, 1) end, true)
  -- elements shifted by shifts along dims, wrapping around (no dims: the
  -- flattened tensor)
  def("roll", 3, function(t, shifts, dims)
    need_tensor("roll", t, 1)
    if dims == nil then
      if type(shifts) ~= "number" then fail("roll", "without dims, shifts must be one integer") end
      return ember.roll(t:reshape({ -1 }), shifts, 1):reshape(t:shape())
    end
    if type(shifts) == "number" then shifts = { shifts } end
    local ds = dims_list("roll", t, dims)
    if type(shifts) ~= "table" or #shifts ~= #ds then
      fail("roll", ("shifts and dims must have the same length, got %d and %d")
        :format(type(shifts) == "table" and #shifts or 0, #ds))
    end
    local r = t
    for i, d in ipairs(ds) do
      local n = t:size(d)
      need_int("roll", "shift", shifts[i])
      local s = n > 0 and shifts[i] % n or 0
      if s ~= 0 then r = ember.cat({ r:narrow(d, n - s + 1, s), r:narrow(d, 1, n - s) }, d) end
    end
    return r == t and t:clone() or r
  end, true)
  -- sizes as a list (nothing may follow it) or one by one
  local function sizes_arg(op, a, ...)
    local n = select("#", ...)
    local s
    if type(a) == "table" and not is_tensor(a) then
      for i = 1, n do
        local v = select(i, ...)
        if v ~= nil then errors.extra_argument("ember.Tensor:" .. op, i + 1, v, { "sizes" }) end
      end
      s = a
    else
      s = { a, ... }
      local last = 0
      for i = 1, n + 1 do if s[i] ~= nil then last = i end end
      for i = 1, last do need_int(op, "size " .. i, s[i], 0) end
      for i = last + 1, n + 1 do s[i] = nil end
    end
    for i = 1, #s do need_int(op, "size " .. i, s[i], 0) end
    return s
  end
  -- t repeated reps[i] times along dim i (reps has at least t's dims; more put
  -- new leading dims)
  Tensor["repeat"] = function(t, ...)
    need_tensor("repeat", t, 1)
    local reps = sizes_arg("repeat", ...)
    local nd = t:dim()
    if #reps < nd then
      fail("repeat", ("needs at least the %d dims of the tensor (shape %s), got %d sizes"):format(nd, sh(t), #reps))
    end
    local shape = t:shape()
    while #shape < #reps do table.insert(shape, 1, 1) end
    local v, e, out = {}, {}, {}
    for i = 1, #reps do
      v[#v + 1], v[#v + 2] = 1, shape[i]
      e[#e + 1], e[#e + 2] = reps[i], shape[i]
      out[i] = reps[i] * shape[i]
    end
    if #v > 8 then   -- beyond 8 dims: one dim at a time
      local r = t:reshape(shape)
      for i = 1, #reps do
        if reps[i] ~= 1 then
          local parts = {}
          for k = 1, reps[i] do parts[k] = r end
          r = ember.cat(parts, i)
        end
      end
      return r
    end
    return t:reshape(v):expand(e):reshape(out)
  end
  -- repeat with reps padded with leading ones to t's dims
  def("tile", 2, function(t, reps)
    need_tensor("tile", t, 1)
    if type(reps) == "number" then reps = { reps } end
    if type(reps) ~= "table" then fail("tile", "reps must be a list of integers, got " .. type(reps)) end
    local r = {}
    for i = 1, t:dim() - #reps do r[i] = 1 end
    for i = 1, #reps do r[#r + 1] = reps[i] end
    return (t["repeat"](t, r))
  end, true)
  -- each element (or slice along dim) repeated repeats times, or repeats[i]
  -- times for a list or an integer tensor
  def("repeat_interleave", 3, function(t, repeats, dim)
    need_tensor("repeat_interleave", t, 1)
    if dim == nil then t, dim = t:reshape({ -1 }), 1 end
    local d = pdim("repeat_interleave", dim, math.max(t:dim(), 1))
    if t:dim() == 0 then t = t:reshape({ 1 }) end
    local n = t:size(d)
    local reps
    if is_tensor(repeats) then
      if repeats.dtype ~= "int64" and repeats.dtype ~= "int32" then
        fail("repeat_interleave", "repeats must be an integer tensor, got " .. repeats.dtype)
      end
      reps = repeats:reshape({ -1 }):cpu():tolist()
    elseif type(repeats) == "table" then
      reps = repeats
    else
      need_int("repeat_interleave", "repeats", repeats, 0)
      reps = {}
      for i = 1, n do reps[i] = repeats end
    end
    if #reps == 1 and n ~= 1 then
      local r = reps[1]
      reps = {}
      for i = 1, n do reps[i] = r end
    end
    if #reps ~= n then
      fail("repeat_interleave", ("repeats has %d entries for dim %d of size %d (shape %s)"):format(#reps, d, n, sh(t)))
    end
    local idx = {}
    for i = 1, n do
      need_int("repeat_interleave", "repeats[" .. i .. "]", reps[i], 0)
      for _ = 1, reps[i] do idx[#idx + 1] = i end
    end
    local it = #idx == 0 and ember.zeros({ 0 }, like_opts(t, "int64"))
      or ember.tensor(idx, { dtype = "int64" }):to(t.device)
    return t:index_select(d, it)
  end, true)

  ---------------------------------------------------------------- triangles and diagonals
  -- the bool mask of (col - row) compared with k over t's last two dims
  local function band(op, t, k, keep)
    need_tensor(op, t, 1)
    if t:dim() < 2 then fail(op, "expects a tensor with at least 2 dims, got shape " .. sh(t)) end
    k = k or 0
    need_int(op, "diagonal", k)
    local n, m = t:size(-2), t:size(-1)
    local off = arange_on(m, t):view(1, m) - arange_on(n, t):view(n, 1)
    local mask = keep(off, k)
    return ember.where(mask, t, t.dtype == "bool" and false or 0)
  end
  def("tril", 2, function(t, k) return band("tril", t, k, function(off, kk) return off:le(kk) end) end, true)
  def("triu", 2, function(t, k) return band("triu", t, k, function(off, kk) return off:ge(kk) end) end, true)
  -- the diagonal at offset (above the main one when > 0) of the plane of dims
  -- dim1 and dim2, as the result's last dim (a copy)
  def("diagonal", 4, function(t, offset, dim1, dim2)
    need_tensor("diagonal", t, 1)
    local nd = t:dim()
    if nd < 2 then fail("diagonal", "expects a tensor with at least 2 dims, got shape " .. sh(t)) end
    offset = offset or 0
    need_int("diagonal", "offset", offset)
    local d1, d2 = pdim("diagonal", dim1 or 1, nd), pdim("diagonal", dim2 or 2, nd)
    if d1 == d2 then fail("diagonal", "dim1 and dim2 are both " .. d1) end
    local perm = {}
    for d = 1, nd do if d ~= d1 and d ~= d2 then perm[#perm + 1] = d end end
    perm[#perm + 1], perm[#perm + 2] = d1, d2
    local x = t:permute(perm)
    local n, m = t:size(d1), t:size(d2)
    local len = offset >= 0 and math.max(math.min(n, m - offset), 0) or math.max(math.min(n + offset, m), 0)
    local lead = x:shape()
    lead[#lead] = nil
    lead[#lead] = nil
    local flat_shape = {}
    for i = 1, #lead do flat_shape[i] = lead[i] end
    flat_shape[#flat_shape + 1] = n * m
    local flat = x:reshape(flat_shape)
    local i = arange_on(len, t)
    local r0 = offset >= 0 and i or i - offset
    local c0 = offset >= 0 and i + offset or i
    return flat:index_select(#flat_shape, r0 * m + c0 + 1)
  end, true)
  -- of a 1-D tensor: the square matrix with it on diagonal k; of a 2-D one:
  -- its diagonal k
  def("diag", 2, function(t, k)
    need_tensor("diag", t, 1)
    k = k or 0
    need_int("diag", "diagonal", k)
    if t:dim() == 2 then return ember.diagonal(t, k) end
    if t:dim() ~= 1 then fail("diag", "expects a 1-D or 2-D tensor, got shape " .. sh(t)) end
    local n = t:size(1)
    local N = n + math.abs(k)
    local i = arange_on(n, t)
    local pos = (k >= 0 and i * (N + 1) + k or i * (N + 1) - k * N) + 1
    return ember.zeros({ N * N }, like_opts(t)):index_add(1, pos, t):reshape({ N, N })
  end, true)
  def("trace", 1, function(t)
    need_tensor("trace", t, 1)
    if t:dim() ~= 2 then fail("trace", "expects a 2-D tensor, got shape " .. sh(t)) end
    return ember.diagonal(t):sum()
  end, true)
  -- coordinate grids: each 1-D input expanded over the others' sizes
  -- (indexing "ij": the first input varies along dim 1; "xy": swaps the first two)
  function ember.meshgrid(...)
    local args = { ... }
    local opts
    if #args > 0 and type(args[#args]) == "table" and not is_tensor(args[#args]) and args[#args][1] == nil then
      opts = table.remove(args)
    end
    if #args == 1 and type(args[1]) == "table" and not is_tensor(args[1]) then args = args[1] end
    local o = options("meshgrid", opts, { indexing = true })
    local indexing = o.indexing or "ij"
    if indexing ~= "ij" and indexing ~= "xy" then
      fail("meshgrid", "indexing must be \"ij\" or \"xy\", got " .. tostring(indexing))
    end
    if #args == 0 then fail("meshgrid", "expects at least one tensor") end
    local shape = {}
    for i, t in ipairs(args) do
      need_tensor("meshgrid", t, i)
      if t:dim() > 1 then fail("meshgrid", ("tensor %d must be 0-d or 1-D, got shape %s"):format(i, sh(t))) end
      shape[i] = t:numel()
    end
    local swap = indexing == "xy" and #args >= 2
    if swap then shape[1], shape[2] = shape[2], shape[1] end
    local r = {}
    for i, t in ipairs(args) do
      local pos = i
      if swap and i <= 2 then pos = 3 - i end
      local v = {}
      for k = 1, #args do v[k] = k == pos and shape[pos] or 1 end
      r[i] = t:reshape(v):expand(shape)
    end
    return unpack(r)
  end

  ---------------------------------------------------------------- indexing
  -- the 1-based positions of the nonzero elements: (count, ndim) int64, or
  -- with {as_tuple = true} one 1-D tensor per dim
  def("nonzero", 2, function(t, opts)
    need_tensor("nonzero", t, 1)
    local o = options("nonzero", opts, { as_tuple = true })
    local as_tuple = need_bool("nonzero", "as_tuple", o.as_tuple)
    local shape, nd = t:shape(), t:dim()
    local m = bool_of(t):contiguous():cpu()
    local p = ffi.cast("const uint8_t *", m:data_ptr())
    local n, count = m:numel(), 0
    for i = 0, n - 1 do if p[i] ~= 0 then count = count + 1 end end
    local cols = math.max(nd, 1)
    local r = ember.empty({ count, cols }, { dtype = "int64" })
    local q = ffi.cast("int64_t *", r:data_ptr())
    local k = 0
    local pos = {}
    for d = 1, cols do pos[d] = 1 end
    for i = 0, n - 1 do
      if p[i] ~= 0 then
        for d = 1, cols do q[k * cols + d - 1] = pos[d] end
        k = k + 1
      end
      local d = nd
      while d >= 1 do
        pos[d] = pos[d] + 1
        if pos[d] <= shape[d] then break end
        pos[d] = 1
        d = d - 1
      end
    end
    if nd == 0 then r = r:narrow(2, 1, 0) end
    r = r:to(t.device)
    if as_tuple then
      local parts = {}
      for d = 1, nd do parts[d] = r:select(2, d):contiguous() end
      return unpack(parts)
    end
    return r
  end, true)
  local index_shape = ffi.new("int64_t[8]")
  -- src added into zeros of t's shape at index along dim (C's scatter_add)
  local function scattered(op, t, d0, index, src)
    local nd = t:dim()
    local s = t:shape()
    for i = 1, nd do index_shape[i - 1] = s[i] end
    check(C.ember_scatter_add(nd, index_shape, d0, idx0(index), tensor_arg(op, src, 4), out1))
    return wrap(out1[0])
  end
  local function index_checks(op, t, dim, index)
    need_tensor(op, t, 1)
    if not is_tensor(index) or (index.dtype ~= "int64" and index.dtype ~= "int32") then
      fail(op, "index must be an int64 or int32 tensor, got " .. (is_tensor(index) and index.dtype or type(index)))
    end
    local nd = t:dim()
    local d = pdim(op, dim, math.max(nd, 1))
    if index:dim() ~= nd then
      fail(op, ("index of shape %s must have the %d dims of the tensor %s"):format(sh(index), nd, sh(t)))
    end
    return d
  end
  -- t with src's values (or a number) written at index along dim:
  -- out[...][index[i][j]][...] = src[i][j] (PyTorch's scatter); with
  -- {reduce = "add"} added instead. Two writes to one place raise (PyTorch
  -- leaves their order unspecified)
  def("scatter", 5, function(t, dim, index, src, opts)
    local op = "scatter"
    local d = index_checks(op, t, dim, index)
    local o = options(op, opts, { reduce = true })
    if o.reduce ~= nil and o.reduce ~= "add" then
      fail(op, "reduce must be \"add\", got " .. tostring(o.reduce) .. " (for products use prod over a gathered tensor)")
    end
    local src_t
    if type(src) == "number" or type(src) == "boolean" then
      src_t = ember.full(index:shape(), src, like_opts(t))
    elseif is_tensor(src) then
      if src:dim() ~= index:dim() then
        fail(op, ("src of shape %s must have the dims of index %s"):format(sh(src), sh(index)))
      end
      src_t = src
      for k = 1, index:dim() do
        if src:size(k) < index:size(k) then
          fail(op, ("index of shape %s does not fit src of shape %s"):format(sh(index), sh(src)))
        end
        if src:size(k) > index:size(k) then src_t = src_t:narrow(k, 1, index:size(k)) end
      end
    else
      errors.argument(op, 4, "a tensor or a number", src)
    end
    local d0 = d - 1
    if o.reduce == "add" then return t + scattered(op, t, d0, index, src_t) end
    local count = scattered(op, t, d0, index, ember.ones(index:shape(), like_opts(t, "int64")))
    if count:numel() > 0 and count:max():item() > 1 then
      fail(op, "index writes some position more than once along dim " .. d
        .. " (PyTorch leaves which value wins unspecified); use scatter_add or {reduce = \"add\"}")
    end
    if src_t.dtype ~= t.dtype then src_t = src_t:to(t.dtype) end
    return ember.where(count:gt(0), scattered(op, t, d0, index, src_t), t)
  end, true)
  -- t with src added at index along dim (PyTorch's scatter_add)
  def("scatter_add", 4, function(t, dim, index, src)
    local d = index_checks("scatter_add", t, dim, index)
    need_tensor("scatter_add", src, 4)
    return t + scattered("scatter_add", t, d - 1, index, src)
  end, true)
  -- t with the slices at the (1-based) indices along dim set to value
  def("index_fill", 4, function(t, dim, index, value)
    need_tensor("index_fill", t, 1)
    local nd = math.max(t:dim(), 1)
    local d = pdim("index_fill", dim, nd)
    if not is_tensor(index) or (index.dtype ~= "int64" and index.dtype ~= "int32") or index:dim() > 1 then
      fail("index_fill", "index must be a 1-D int64 or int32 tensor")
    end
    if type(value) ~= "number" and type(value) ~= "boolean" and not (is_tensor(value) and value:dim() == 0) then
      fail("index_fill", "value must be a number or a 0-d tensor, got " .. type(value))
    end
    local x = t:dim() == 0 and t:reshape({ 1 }) or t
    local n = x:size(d)
    local hit = ember.zeros({ n }, like_opts(t, "int64")):index_add(1, index:reshape({ -1 }), ember.ones({ index:numel() }, like_opts(t, "int64")))
    local v = {}
    for k = 1, x:dim() do v[k] = k == d and n or 1 end
    local r = ember.where(hit:gt(0):reshape(v), value, x)
    if r.dtype ~= t.dtype then r = r:to(t.dtype) end
    return t:dim() == 0 and r:reshape({}) or r
  end, true)

  ---------------------------------------------------------------- products
  -- the product of every element (0-d) or along dim; integer and bool give int64
  def("prod", 4, function(t, dim, keepdim, opts)
    need_tensor("prod", t, 1)
    if type(dim) == "table" then dim, opts = nil, dim end
    if type(keepdim) == "table" then keepdim, opts = nil, keepdim end
    t = with_dtype("prod", t, opts)
    keepdim = need_bool("prod", "keepdim", keepdim)
    if dim == nil then
      if keepdim then fail("prod", "keepdim needs a dim") end
      local f = t:reshape({ -1 })
      if f:numel() == 0 then return ember.ones({}, like_opts(f, f:cumprod(1).dtype)) end
      return f:cumprod(1):select(1, f:numel())
    end
    local x = t:dim() == 0 and t:reshape({ 1 }) or t
    local d = pdim("prod", dim, x:dim())
    local n = x:size(d)
    local r
    if n == 0 then
      local s = x:shape()
      s[d] = 1
      r = ember.ones(s, like_opts(x, x:cumprod(d).dtype)):squeeze(d)
    else
      r = x:cumprod(d):select(d, n)
    end
    if t:dim() == 0 then return r:reshape({}) end
    return keepdim and r:unsqueeze(d) or r
  end, true)
  local function need_dims(op, t, n, what)
    if t:dim() ~= n then fail(op, ("%s must be %d-D, got shape %s"):format(what, n, sh(t))) end
  end
  -- batches of matrix products: (b, n, m) x (b, m, p) -> (b, n, p)
  def("bmm", 2, function(a, b)
    need_tensor("bmm", a, 1)
    need_tensor("bmm", b, 2)
    need_dims("bmm", a, 3, "batch1")
    need_dims("bmm", b, 3, "batch2")
    if a:size(1) ~= b:size(1) or a:size(3) ~= b:size(2) then
      fail("bmm", ("shapes %s and %s do not fit (b, n, m) x (b, m, p)"):format(sh(a), sh(b)))
    end
    return ember.matmul(a, b)
  end, true)
  local function scale_opts(op, opts)
    local o = options(op, opts, { beta = true, alpha = true })
    local beta, alpha = o.beta == nil and 1 or o.beta, o.alpha == nil and 1 or o.alpha
    if type(beta) ~= "number" then fail(op, "beta must be a number, got " .. type(beta)) end
    if type(alpha) ~= "number" then fail(op, "alpha must be a number, got " .. type(alpha)) end
    return beta, alpha
  end
  -- beta input + alpha product (beta = 0 ignores input, NaN included)
  local function add_product(op, input, p, beta, alpha)
    if alpha ~= 1 then p = p * alpha end
    if beta == 0 then return p:expand(p:shape()) + ember.zeros(p:shape(), like_opts(p)) end
    return (beta == 1 and input or input * beta) + p
  end
  def("baddbmm", 4, function(input, a, b, opts)
    need_tensor("baddbmm", input, 1)
    local beta, alpha = scale_opts("baddbmm", opts)
    return add_product("baddbmm", input, ember.bmm(a, b), beta, alpha)
  end, true)
  def("addmm", 4, function(input, a, b, opts)
    need_tensor("addmm", input, 1)
    need_tensor("addmm", a, 2)
    need_tensor("addmm", b, 3)
    local beta, alpha = scale_opts("addmm", opts)
    need_dims("addmm", a, 2, "mat1")
    need_dims("addmm", b, 2, "mat2")
    if a:size(2) ~= b:size(1) then fail("addmm", ("shapes %s and %s cannot be multiplied"):format(sh(a), sh(b))) end
    return add_product("addmm", input, ember.matmul(a, b), beta, alpha)
  end, true)
  def("outer", 2, function(a, b)
    need_tensor("outer", a, 1)
    need_tensor("outer", b, 2)
    need_dims("outer", a, 1, "input")
    need_dims("outer", b, 1, "vec2")
    return a:reshape({ a:numel(), 1 }) * b:reshape({ 1, b:numel() })
  end, true)
  ember.ger = ember.outer

  -- the contraction of a (labels la) and b (labels lb) keeping the labels in
  -- `keep` (a set), as one batched matmul: returns the tensor and its labels
  local function contract(a, la, b, lb, keep)
    local ina, inb = {}, {}
    for i = 1, #la do ina[la[i]] = i end
    for i = 1, #lb do inb[lb[i]] = i end
    -- labels of one operand only that are not kept: summed first
    local function sum_out(t, l, other)
      local dims, nl = {}, {}
      for i = 1, #l do
        if not other[l[i]] and not keep[l[i]] then dims[#dims + 1] = i else nl[#nl + 1] = l[i] end
      end
      if #dims > 0 then t = t:sum(dims) end
      return t, nl
    end
    a, la = sum_out(a, la, inb)
    b, lb = sum_out(b, lb, ina)
    ina, inb = {}, {}
    for i = 1, #la do ina[la[i]] = i end
    for i = 1, #lb do inb[lb[i]] = i end
    local batch, ca, cb, contr = {}, {}, {}, {}
    for _, l in ipairs(la) do
      if inb[l] then
        if keep[l] then batch[#batch + 1] = l else contr[#contr + 1] = l end
      else ca[#ca + 1] = l end
    end
    for _, l in ipairs(lb) do if not ina[l] then cb[#cb + 1] = l end end
    local function size_of(t, idx, l) return t:size(idx[l]) end
    local function prod_sizes(t, idx, ls)
      local p = 1
      for _, l in ipairs(ls) do p = p * size_of(t, idx, l) end
      return p
    end
    local pa, pb = {}, {}
    for _, l in ipairs(batch) do pa[#pa + 1], pb[#pb + 1] = ina[l], inb[l] end
    for _, l in ipairs(ca) do pa[#pa + 1] = ina[l] end
    for _, l in ipairs(contr) do pa[#pa + 1], pb[#pb + 1] = ina[l], inb[l] end
    for _, l in ipairs(cb) do pb[#pb + 1] = inb[l] end
    local B, M, K, N = 1, prod_sizes(a, ina, ca), 1, prod_sizes(b, inb, cb)
    local bshape = {}
    for _, l in ipairs(batch) do
      local sa, sb = size_of(a, ina, l), size_of(b, inb, l)
      local s = math.max(sa, sb)
      if sa ~= sb and sa ~= 1 and sb ~= 1 then
        fail("einsum", ("label '%s' has sizes %d and %d"):format(l, sa, sb))
      end
      bshape[#bshape + 1] = s
    end
    for _, l in ipairs(contr) do
      local sa, sb = size_of(a, ina, l), size_of(b, inb, l)
      if sa ~= sb then fail("einsum", ("label '%s' has sizes %d and %d"):format(l, sa, sb)) end
      K = K * sa
    end
    local ap = #pa > 0 and a:permute(pa) or a
    local bp = #pb > 0 and b:permute(pb) or b
    local sa, sbv = {}, {}
    for i, l in ipairs(batch) do sa[i], sbv[i] = size_of(a, ina, l), size_of(b, inb, l) end
    sa[#sa + 1], sa[#sa + 2] = M, K
    sbv[#sbv + 1], sbv[#sbv + 2] = K, N
    local r = ember.matmul(ap:reshape(sa), bp:reshape(sbv))
    local rs, rl = {}, {}
    for i, l in ipairs(batch) do rs[#rs + 1], rl[#rl + 1] = bshape[i], l end
    for _, l in ipairs(ca) do rs[#rs + 1], rl[#rl + 1] = size_of(a, ina, l), l end
    for _, l in ipairs(cb) do rs[#rs + 1], rl[#rl + 1] = size_of(b, inb, l), l end
    return r:reshape(rs), rl
  end
  -- a tensor with a repeated label ("ii") reduced to its diagonal
  local function take_diagonals(t, labels)
    local i = 1
    while i <= #labels do
      local j = i + 1
      while j <= #labels and labels[j] ~= labels[i] do j = j + 1 end
      if j <= #labels then
        if t:size(i) ~= t:size(j) then
          fail("einsum", ("label '%s' has sizes %d and %d in one operand"):format(labels[i], t:size(i), t:size(j)))
        end
        t = ember.diagonal(t, 0, i, j)   -- the diagonal becomes the last dim
        local l = labels[i]
        table.remove(labels, j)
        table.remove(labels, i)
        labels[#labels + 1] = l
      else
        i = i + 1
      end
    end
    return t, labels
  end
  -- Einstein summation: "ij,jk->ik" and the implicit form "ij,jk" (output: the
  -- labels that appear once, in order); "..." stands for the same leading
  -- dims in each operand
  function ember.einsum(eq, ...)
    if type(eq) ~= "string" then errors.argument("einsum", 1, "an equation string", eq) end
    local ops = { ... }
    if #ops == 1 and type(ops[1]) == "table" and not is_tensor(ops[1]) then ops = ops[1] end
    eq = eq:gsub("%s", "")
    local lhs, rhs = eq:match("^(.-)%->(.*)$")
    if not lhs then lhs = eq end
    local terms = {}
    for term in (lhs .. ","):gmatch("([^,]*),") do terms[#terms + 1] = term end
    if #terms ~= #ops then
      fail("einsum", ("the equation '%s' has %d operands, got %d tensors"):format(eq, #terms, #ops))
    end
    local ell_n = 0
    local labels = {}
    for k, term in ipairs(terms) do
      need_tensor("einsum", ops[k], k + 1)
      local ls, rest = {}, term
      local pre, post = term:match("^(.-)%.%.%.(.*)$")
      local nd = ops[k]:dim()
      if pre then
        rest = pre .. post
        if rest:find("%.") then fail("einsum", "'...' may appear once per operand, in '" .. term .. "'") end
      end
      if rest:find("[^%a]") then fail("einsum", ("bad label in '%s' (labels are letters)"):format(term)) end
      local nell = pre and nd - #rest or 0
      if nell < 0 or (not pre and #rest ~= nd) then
        fail("einsum", ("operand %d has %d dims, its term '%s' names %d"):format(k, nd, term, #rest))
      end
      ell_n = math.max(ell_n, nell)
      local p = pre or rest
      for c in p:gmatch(".") do ls[#ls + 1] = c end
      for e = 1, nell do ls[#ls + 1] = "." .. (nell - e + 1) end   -- ".k": the k-th dim from the end of "..."
      if pre then for c in post:gmatch(".") do ls[#ls + 1] = c end end
      labels[k] = ls
    end
    local out = {}
    if rhs then
      local pre, post = rhs:match("^(.-)%.%.%.(.*)$")
      local r = pre and (pre .. post) or rhs
      if r:find("[^%a]") then fail("einsum", "bad label in the output '" .. rhs .. "'") end
      local seen = {}
      local function add(c)
        if seen[c] then fail("einsum", "label '" .. c .. "' appears twice in the output") end
        seen[c] = true
        out[#out + 1] = c
      end
      for c in (pre or r):gmatch(".") do add(c) end
      if pre then
        for e = ell_n, 1, -1 do out[#out + 1] = "." .. e end
        for c in post:gmatch(".") do add(c) end
      end
      for _, c in ipairs(out) do
        local found = false
        for _, ls in ipairs(labels) do for _, l in ipairs(ls) do if l == c then found = true end end end
        if not found then fail("einsum", "output label '" .. c .. "' is in no operand") end
      end
    else
      local count = {}
      for _, ls in ipairs(labels) do for _, l in ipairs(ls) do count[l] = (count[l] or 0) + 1 end end
      for e = ell_n, 1, -1 do out[#out + 1] = "." .. e end
      local letters = {}
      for l, c in pairs(count) do if c == 1 and l:sub(1, 1) ~= "." then letters[#letters + 1] = l end end
      table.sort(letters)
      for _, l in ipairs(letters) do out[#out + 1] = l end
    end
    local outset = {}
    for _, l in ipairs(out) do outset[l] = true end
    -- operands with their diagonals taken
    local ts, ls = {}, {}
    for k = 1, #ops do ts[k], ls[k] = take_diagonals(ops[k], { unpack(labels[k]) }) end
    local t, l = ts[1], ls[1]
    for k = 2, #ops do
      local keep = {}
      for x in pairs(outset) do keep[x] = true end
      for j = k + 1, #ops do for _, x in ipairs(ls[j]) do keep[x] = true end end
      t, l = contract(t, l, ts[k], ls[k], keep)
    end
    -- what is left: sum the labels not in the output, then order them
    local dims, nl = {}, {}
    for i = 1, #l do if outset[l[i]] then nl[#nl + 1] = l[i] else dims[#dims + 1] = i end end
    if #dims > 0 then t = t:sum(dims) end
    if #nl > 0 then
      local pos, perm = {}, {}
      for i, x in ipairs(nl) do pos[x] = i end
      for i, x in ipairs(out) do perm[i] = pos[x] end
      t = t:permute(perm)
    end
    if t == ops[1] then t = t:clone() end
    return t
  end
  -- the sum of products over dims of a and b: dims = n (a's last n with b's
  -- first n) or {{a's dims}, {b's dims}}
  def("tensordot", 3, function(a, b, dims)
    need_tensor("tensordot", a, 1)
    need_tensor("tensordot", b, 2)
    dims = dims == nil and 2 or dims
    local da, db = {}, {}
    if type(dims) == "number" then
      need_int("tensordot", "dims", dims, 0)
      if dims > a:dim() or dims > b:dim() then
        fail("tensordot", ("dims = %d for shapes %s and %s"):format(dims, sh(a), sh(b)))
      end
      for i = 1, dims do da[i], db[i] = a:dim() - dims + i, i end
    elseif type(dims) == "table" and type(dims[1]) == "table" and type(dims[2]) == "table" and #dims[1] == #dims[2] then
      for i = 1, #dims[1] do
        da[i] = pdim("tensordot", dims[1][i], a:dim())
        db[i] = pdim("tensordot", dims[2][i], b:dim())
      end
    else
      fail("tensordot", "dims must be an integer or two lists of dims of one length")
    end
    local la, lb, used, nextc = {}, {}, {}, 0
    local function fresh() nextc = nextc + 1 return string.char(96 + nextc) end
    for i = 1, a:dim() do la[i] = fresh() end
    for i = 1, b:dim() do lb[i] = false end
    for i = 1, #da do
      if used[da[i]] then fail("tensordot", "dim " .. da[i] .. " of the first tensor appears twice") end
      used[da[i]] = true
      if lb[db[i]] then fail("tensordot", "dim " .. db[i] .. " of the second tensor appears twice") end
      lb[db[i]] = la[da[i]]
      if a:size(da[i]) ~= b:size(db[i]) then
        fail("tensordot", ("dim %d of %s and dim %d of %s differ"):format(da[i], sh(a), db[i], sh(b)))
      end
    end
    for i = 1, b:dim() do if not lb[i] then lb[i] = fresh() end end
    if nextc > 26 then fail("tensordot", "too many dims") end
    local o = {}
    for i = 1, a:dim() do if not used[i] then o[#o + 1] = la[i] end end
    local contracted = {}
    for i = 1, #db do contracted[db[i]] = true end
    for i = 1, b:dim() do if not contracted[i] then o[#o + 1] = lb[i] end end
    return ember.einsum(table.concat(la) .. "," .. table.concat(lb) .. "->" .. table.concat(o), a, b)
  end)
  -- the p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M): (..., P, R)
  def("cdist", 3, function(x1, x2, p)
    need_tensor("cdist", x1, 1)
    need_tensor("cdist", x2, 2)
    p = p == nil and 2 or p
    if type(p) ~= "number" or not (p >= 0) then fail("cdist", "p must be a number >= 0, got " .. tostring(p)) end
    if x1:dim() < 2 or x2:dim() < 2 or x1:size(-1) ~= x2:size(-1) then
      fail("cdist", ("x1 %s and x2 %s must be (..., P, M) and (..., R, M)"):format(sh(x1), sh(x2)))
    end
    if not is_float(x1) then fail("cdist", "expects floating-point tensors, got " .. x1.dtype) end
    local diff = x1:unsqueeze(-2) - x2:unsqueeze(-3)
    if p == 2 then
      -- zero distances have gradient 0, as PyTorch's
      local sq = (diff * diff):sum(-1)
      local zero = sq:eq(0)
      return ember.where(zero, 0, ember.where(zero, 1, sq):sqrt())
    end
    return diff:norm(p == huge and "inf" or p, -1)
  end)

  ---------------------------------------------------------------- counting
  -- counts of each value of a 1-D tensor of positive integers, 1-based as
  -- index tensors are: result[v] counts the entries equal to v (or sums their
  -- weights); length max(t, minlength)
  def("bincount", 2, function(t, opts)
    need_tensor("bincount", t, 1)
    local o = options("bincount", opts, { weights = true, minlength = true })
    if t:dim() ~= 1 or (t.dtype ~= "int64" and t.dtype ~= "int32" and t.dtype ~= "uint8") then
      fail("bincount", ("expects a 1-D integer tensor, got shape %s of %s"):format(sh(t), t.dtype))
    end
    local minlength = o.minlength or 0
    need_int("bincount", "minlength", minlength, 0)
    local n = minlength
    if t:numel() > 0 then
      local lo, hi = t:min():item(), t:max():item()
      if lo < 1 then fail("bincount", ("values are 1-based positions, got %d"):format(lo)) end
      n = math.max(n, hi)
    end
    local w = o.weights
    if w ~= nil then
      need_tensor("bincount", w, 2)
      if not errors.same_shape(w, t) then
        fail("bincount", ("weights of shape %s must have the input's shape %s"):format(sh(w), sh(t)))
      end
      if not is_float(w) then w = w:to("float64") end
    else
      w = ember.ones(t:shape(), like_opts(t, "int64"))
    end
    return ember.zeros({ n }, like_opts(w)):index_add(1, t:to("int64"), w)
  end, true)
  -- the histogram of t over bins equal bins on [min, max] (both 0: the data's
  -- range); elements outside (and NaN) are left out, max falls in the last bin
  def("histc", 4, function(t, bins, lo, hi)
    need_tensor("histc", t, 1)
    bins = bins == nil and 100 or bins
    need_int("histc", "bins", bins, 1)
    lo, hi = lo or 0, hi or 0
    if type(lo) ~= "number" or type(hi) ~= "number" then fail("histc", "min and max must be numbers") end
    if not is_float(t) then fail("histc", "expects a floating-point tensor, got " .. t.dtype) end
    local x = t:detach():reshape({ -1 })
    if lo == hi and x:numel() > 0 then
      local finite = x:isfinite()
      if finite:any():item() then
        lo = ember.where(finite, x, huge):min():item()
        hi = ember.where(finite, x, -huge):max():item()
      end
    end
    if lo == hi then lo, hi = lo - 1, hi + 1 end
    if not (lo < hi) or lo ~= lo or hi ~= hi or math.abs(lo) == huge or math.abs(hi) == huge then
      fail("histc", ("min %s and max %s must be finite with min <= max"):format(tostring(lo), tostring(hi)))
    end
    local inside = x:ge(lo):logical_and(x:le(hi))
    local pos = ember.where(inside, (x - lo) * (bins / (hi - lo)), 0):to("int64"):clamp(0, bins - 1) + 1
    return ember.zeros({ bins }, like_opts(t)):index_add(1, pos, inside:to(t.dtype))
  end, true)
  -- the sorted distinct values of t (flattened), or with {dim =} its distinct
  -- slices along dim in lexicographic order; with {return_inverse = true}
  -- also each element's (slice's) 1-based position among them, with
  -- {return_counts = true} their counts, returned in that order
  def("unique", 2, function(t, opts)
    need_tensor("unique", t, 1)
    local o = options("unique", opts, { sorted = true, return_inverse = true, return_counts = true, dim = true })
    need_bool("unique", "sorted", o.sorted)
    local inv, cnt = need_bool("unique", "return_inverse", o.return_inverse), need_bool("unique", "return_counts", o.return_counts)
    local d = o.dim ~= nil and pdim("unique", o.dim, math.max(t:dim(), 1)) or nil
    if d and t:dim() == 0 then fail("unique", "dim needs a tensor with at least 1 dim") end
    -- rows: the elements of the flattened tensor, or the slices along dim
    -- (flattened), sorted lexicographically by stable sorts from the last column
    local x = d and t:detach():transpose(d, 1) or t:detach():reshape({ -1 })
    local n = d and x:size(1) or x:numel()
    local flat = d and x:reshape({ n, -1 }) or x:reshape({ n, 1 })
    local idx = arange_on(n, t) + 1
    for c = flat:size(2), 1, -1 do
      local _, i = sort_raw("unique", flat:select(2, c):index_select(1, idx), 1, false)
      idx = idx:index_select(1, i)
    end
    local s = flat:index_select(1, idx)
    local new
    if n == 0 then
      new = ember.zeros({ 0 }, like_opts(t, "bool"))
    else
      local diff = s:narrow(1, 2, n - 1):ne(s:narrow(1, 1, n - 1)):any(2)
      new = ember.cat({ ember.ones({ 1 }, like_opts(t, "bool")), diff }, 1)
    end
    local starts = ember.nonzero(new):reshape({ -1 })
    local u = s:index_select(1, starts)
    if d then
      local shape = x:shape()
      shape[1] = starts:numel()
      u = u:reshape(shape):transpose(d, 1):contiguous()
    else
      u = u:reshape({ -1 })
    end
    local r = { u }
    if inv then
      local run = new:cumsum(1)   -- the run each sorted element belongs to (1-based)
      local where_ = ember.zeros({ n }, like_opts(t, "int64")):scatter(1, idx, run)
      r[#r + 1] = d and where_ or where_:reshape(t:shape())
    end
    if cnt then
      local k = starts:numel()
      local ends = ember.cat({ starts:narrow(1, 2, math.max(k - 1, 0)), ember.full({ 1 }, n + 1, like_opts(t, "int64")) }, 1)
      r[#r + 1] = k == 0 and ember.zeros({ 0 }, like_opts(t, "int64")) or ends - starts
    end
    return unpack(r)
  end, true)
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
