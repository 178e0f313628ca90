-- The tensor library's splitting and arranging (chunk, split, flip, roll,
-- tile, repeat_interleave), triangles and diagonals, meshgrid, nonzero
-- and scatter.
-- Part of the everyday tensor library: lua/ember/tensorlib.lua passes
-- the helpers the parts share as L. Dims, index arguments and index
-- results are 1-based, as everywhere in ember.
local ffi = require("ffi")

return function(ember, L)
  local C, Tensor, check, fail, wrap = L.C, L.Tensor, L.check, L.fail, L.wrap
  local tensor_arg, is_tensor, out1, errors = L.tensor_arg, L.is_tensor, L.out1, L.errors
  local unpack, sh, def, options, need_tensor = L.unpack, L.sh, L.def, L.options, L.need_tensor
  local need_bool, need_int, pdim = L.need_bool, L.need_int, L.pdim
  local like_opts, arange_on, bool_of, is_int = L.like_opts, L.arange_on, L.bool_of, L.is_int
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
  -- a view of t's elements taken in row-major order: size[i] elements
  -- stride[i] apart along dim i, from element offset (0-based, default 0);
  -- shares t's memory (for a contiguous t, PyTorch's as_strided with the
  -- storage offset counted from t's first element)
  local geometry = { ffi.new("int64_t[8]"), ffi.new("int64_t[8]") }
  local function int_list(op, what, list, buf)
    if type(list) ~= "table" or is_tensor(list) then
      fail(op, what .. " must be a table of integers, got " .. type(list))
    end
    if #list > 8 then fail(op, ("%s has %d entries; at most 8 dims are supported"):format(what, #list)) end
    for i = 1, #list do
      local v = list[i]
      if not is_int(v) or v < 0 or v > 2 ^ 53 then
        fail(op, ("%s[%d] must be an integer >= 0, got %s"):format(what, i, tostring(v)))
      end
      buf[i - 1] = v
    end
    return #list
  end
  def("as_strided", 4, function(t, size, stride, offset)
    need_tensor("as_strided", t, 1)
    local n = int_list("as_strided", "size", size, geometry[1])
    if int_list("as_strided", "stride", stride, geometry[2]) ~= n then
      fail("as_strided", ("size has %d entries and stride %d"):format(n, #stride))
    end
    if offset ~= nil then need_int("as_strided", "offset", offset, 0) end
    check(C.ember_as_strided(t._c, n, geometry[1], geometry[2], offset or 0, out1))
    return wrap(out1[0])
  end, true)
  -- the diagonal at offset (above the main one when > 0) of the plane of dims
  -- dim1 and dim2, as the result's last dim: a view (as_strided over t's
  -- row-major layout)
  def("diagonal", 4, function(t, offset, dim1, dim2)
    need_tensor("diagonal", t, 1)
    local nd = t:dim()
    if nd < 2 then fail("diagonal", "expects a tensor with at least 2 dims, got shape " .. sh(t)) end
    offset = offset or 0
    need_int("diagonal", "offset", offset)
    local d1, d2 = pdim("diagonal", dim1 or 1, nd), pdim("diagonal", dim2 or 2, nd)
    if d1 == d2 then fail("diagonal", "dim1 and dim2 are both " .. d1) end
    local shape, cs = t:shape(), {}
    cs[nd] = 1
    for d = nd - 1, 1, -1 do cs[d] = cs[d + 1] * shape[d + 1] end
    local size, stride = {}, {}
    for d = 1, nd do
      if d ~= d1 and d ~= d2 then size[#size + 1], stride[#stride + 1] = shape[d], cs[d] end
    end
    local n, m = shape[d1], shape[d2]
    size[#size + 1] = offset >= 0 and math.max(math.min(n, m - offset), 0) or math.max(math.min(n + offset, m), 0)
    stride[#stride + 1] = cs[d1] + cs[d2]
    local at = size[#size] == 0 and 0 or offset >= 0 and offset * cs[d2] or -offset * cs[d1]
    return ember.as_strided(t, size, stride, at)
  end, true)
  -- of a 1-D tensor: the square matrix with it on diagonal k; of a 2-D one:
  -- its diagonal k (a copy)
  def("diag", 2, function(t, k)
    need_tensor("diag", t, 1)
    k = k or 0
    need_int("diag", "diagonal", k)
    if t:dim() == 2 then return ember.diagonal(t, k):clone() end   -- a copy, as PyTorch's
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
  -- src added into zeros of t's shape at the 1-based index along dim (C's scatter_add)
  local function scattered(op, t, d0, index, src)
    local nd = t:dim()
    local s = t:shape()
    for i = 1, nd do index_shape[i - 1] = s[i] end
    check(C.ember_scatter_add_base(nd, index_shape, d0, index._c, 1, tensor_arg(op, src, 4), out1))
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
end
