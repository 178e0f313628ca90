-- The Tensor class: a Lua table { _c = <ember_tensor *> } per C tensor, kept
-- unique through a weak table keyed by address, so a tensor reached twice
-- (x.grad, a callback argument, an in-place result) is the same object.
-- Dims are 1-based here (negative counts from the end) and 0-based in C.
local ffi = require("ffi")
local bit = require("bit")

return function(ember)
  local C = ember._C
  local ffi_gc, ffi_string, ffi_new, ffi_cast = ffi.gc, ffi.string, ffi.new, ffi.cast
  local type, tonumber, select, error, rawget, setmetatable = type, tonumber, select, error,
    rawget, setmetatable
  local floor, huge = math.floor, math.huge

  local Tensor = {}
  Tensor.__name = "Tensor"
  ember.Tensor = Tensor

  local DTYPES = { "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool" }
  local DTYPE_ID = {}
  for i, name in ipairs(DTYPES) do DTYPE_ID[name] = i - 1 end
  local DTYPE_ALIASES = { float = "float32", double = "float64", half = "float16", long = "int64",
    int = "int32", byte = "uint8" }
  local F32, F64, I32, I64, BOOL = 0, 1, 4, 5, 7
  ember._DTYPES, ember._DTYPE_ID = DTYPES, DTYPE_ID

  local errors = require("ember.errors")
  local check, fail = errors.check, errors.fail

  ---------------------------------------------------------------- identity and lifetime
  -- Each wrapper owns one C reference, kept in a numbered slot: handles[slot]
  -- is the wrapper (weak), ptrs[slot] the pointer (strong), and the C tensor
  -- remembers its slot, so a pointer coming back from C finds its wrapper
  -- without a hash lookup. Slots whose wrapper the GC collected are released
  -- in one sweep after each completed GC cycle: a per-object finaliser
  -- (ffi.gc) costs more than the whole of a small op.
  local handles = setmetatable({}, { __mode = "v" })
  local ptrs, free_slots = {}, {}
  local n_free, top = 0, 0
  local cycle = setmetatable({ {} }, { __mode = "v" })   -- [1] dies with each GC cycle
  local out1 = ffi_new("ember_tensor *[1]")
  local out2 = ffi_new("ember_tensor *[2]")
  local release = C.ember_tensor_release
  -- Tensor bytes live in C where the Lua GC cannot see them (torch7's
  -- problem): once the C bytes allocated since the last sweep pass a budget,
  -- a full collection and a sweep run, so dead tensors go back to the
  -- allocator's cache and are reused while still warm. The budget is 24 MB,
  -- or twice the Lua heap when that is larger (a collection costs time in
  -- proportion to the Lua heap); it does not grow with the live C bytes, so
  -- a large data set in memory does not let garbage pile up. Every sweep,
  -- also one after a collection the Lua GC ran by itself, measures the live
  -- bytes afresh: a limit set while a large temporary was still alive (a
  -- data set being converted) comes down as soon as it has died.
  local gc_budget = 24 * 2 ^ 20
  local gc_limit = gc_budget
  local wrap_hook = nil   -- runs after each new wrapper while set (graph toolbox modes)
  function ember._set_wrap_hook(fn) wrap_hook = fn end

  local function sweep()
    for i = 1, top do
      local p = ptrs[i]
      if p ~= nil and handles[i] == nil then
        ptrs[i] = nil
        C.ember_tensor_set_lua_slot(p, 0)
        release(p)
        n_free = n_free + 1
        free_slots[n_free] = i
      end
    end
    cycle[1] = {}
    gc_limit = tonumber(C.ember_bytes_in_use()) + math.max(gc_budget, collectgarbage("count") * 2048)
  end
  ember._sweep = sweep
  -- out of memory under a memory limit: release what the GC collected first,
  -- so the caller's next attempt sees that memory
  errors.set_oom_handler(function()
    local s = ffi_new("ember_memory_stats_t")
    C.ember_memory_stats(s)
    if s.limit > 0 then
      collectgarbage()
      sweep()
    end
  end)

  local function gc_pressure()
    if tonumber(C.ember_bytes_in_use()) > gc_limit then
      collectgarbage()
      sweep()
    end
  end

  -- Takes ownership of one reference to p and returns the unique wrapper.
  local function wrap(p)
    if p == nil then return nil end
    if cycle[1] == nil then sweep() end
    local slot = C.ember_tensor_lua_slot(p)
    if slot ~= 0 then
      local t = handles[slot]
      release(p)   -- the slot already owns a reference
      if t == nil then   -- the old wrapper died unswept: a new one takes the slot
        t = setmetatable({ _c = ptrs[slot] }, Tensor)
        handles[slot] = t
      end
      return t
    end
    if n_free > 0 then
      slot = free_slots[n_free]
      n_free = n_free - 1
    else
      top = top + 1
      slot = top
    end
    local t = setmetatable({ _c = p }, Tensor)
    handles[slot] = t
    ptrs[slot] = p
    C.ember_tensor_set_lua_slot(p, slot)
    gc_pressure()
    if wrap_hook then wrap_hook() end
    return t
  end
  -- Wraps a borrowed pointer (C keeps its reference): retain first.
  local function wrap_borrowed(p)
    if p == nil then return nil end
    C.ember_tensor_retain(p)
    return wrap(p)
  end
  ember._wrap, ember._wrap_borrowed = wrap, wrap_borrowed
  -- the wrapper of a C tensor if Lua still holds one, else nil
  function ember._lookup(p)
    if p == nil then return nil end
    local slot = C.ember_tensor_lua_slot(p)
    return slot ~= 0 and handles[slot] or nil
  end

  -- When the Lua state closes, every tensor Lua still owns is released.
  local closer = newproxy(true)
  getmetatable(closer).__gc = function()
    for i = 1, top do
      local p = ptrs[i]
      if p ~= nil then
        ptrs[i] = nil
        C.ember_tensor_set_lua_slot(p, 0)
        release(p)
      end
    end
  end
  ember._closer = closer

  local function is_tensor(x) return type(x) == "table" and getmetatable(x) == Tensor end
  ember.is_tensor = is_tensor

  -- Releases the tensor now; the wrapper becomes unusable. Safe to call twice.
  function Tensor.free(t)
    local c = rawget(t, "_c")
    if c == nil then return end
    t._c = nil
    local slot = C.ember_tensor_lua_slot(c)
    if slot ~= 0 and handles[slot] == t then
      handles[slot] = nil
      ptrs[slot] = nil
      C.ember_tensor_set_lua_slot(c, 0)
      release(c)
      n_free = n_free + 1
      free_slots[n_free] = slot
    end
  end

  ---------------------------------------------------------------- conversions of arguments
  local function dtype_id(op, name)
    if name == nil then return F32 end
    local id = DTYPE_ID[DTYPE_ALIASES[name] or name]
    if not id then fail(op, "unknown dtype '" .. tostring(name) .. "'") end
    return id
  end

  local function device_id(op, dev)
    if dev == nil or dev == "cpu" then return 0 end
    if dev == "cuda" then return 1 end
    local k = type(dev) == "string" and dev:match("^cuda:(%d+)$")
    if k then return tonumber(k) + 1 end
    fail(op, "unknown device '" .. tostring(dev) .. "'")
  end
  local function device_name(id) return id == 0 and "cpu" or ("cuda:" .. (id - 1)) end

  -- A temporary made only to pass its pointer to C (an uncached scalar, an
  -- index shifted to 0-based) stays referenced here until 16 more have been
  -- made: a sweep while the call's other arguments are converted must not
  -- release it.
  local keep, keep_i = {}, 0
  local function keep_alive(t)
    keep_i = keep_i % 16 + 1
    keep[keep_i] = t
    return t
  end

  local scalar_cache, scalar_cache_n = {}, 0
  -- A Lua number as a "wrapped number" 0-d tensor (lowest promotion priority):
  -- int64 when integral, float64 otherwise, as Python scalars in PyTorch.
  local function scalar(v)
    local t = scalar_cache[v]
    if t then return t end
    local integral = v == floor(v) and v > -2 ^ 53 and v < 2 ^ 53
    check(C.ember_scalar(v, integral and I64 or F64, 1, out1))
    t = wrap(out1[0])
    if scalar_cache_n < 512 then
      scalar_cache[v] = t
      scalar_cache_n = scalar_cache_n + 1
    else
      keep_alive(t)
    end
    return t
  end

  -- Under a memory limit, what the GC collected is released before an op
  -- allocates, so memory freed by dropping references (and collectgarbage())
  -- counts at once. One upvalue test per argument otherwise.
  local limited = false
  local function release_collected()
    if cycle[1] == nil then sweep() end
  end

  local function ptr(op, x, argn)
    if limited then release_collected() end
    if type(x) == "number" then return scalar(x)._c end
    if type(x) == "table" then
      local c = rawget(x, "_c")
      if c ~= nil then return c end
      if getmetatable(x) == Tensor then fail(op, "tensor argument " .. argn .. " was freed") end
    elseif type(x) == "boolean" then
      check(C.ember_scalar(x and 1 or 0, BOOL, 1, out1))
      return keep_alive(wrap(out1[0]))._c
    end
    errors.argument(op, argn, "a tensor or a number", x)
  end
  ember._ptr = ptr

  local function tensor_arg(op, x, argn)
    if limited then release_collected() end
    if type(x) == "table" then
      local c = rawget(x, "_c")
      if c ~= nil then return c end
      if getmetatable(x) == Tensor then fail(op, "tensor argument " .. argn .. " was freed") end
    end
    errors.argument(op, argn, "a tensor", x)
  end
  ember._tensor_arg = tensor_arg

  local shape_buf = ffi_new("int64_t[8]")
  -- A shape from a table {2, 3} or from numbers (2, 3); returns ndim, int64_t*.
  local function shape_arg(op, s, ...)
    if limited then release_collected() end
    if type(s) == "number" then s = { s, ... } end
    if type(s) ~= "table" or is_tensor(s) then fail(op, "expected a shape table, got " .. type(s)) end
    local n = #s
    if n > 8 then fail(op, "at most 8 dims are supported, got " .. n) end
    for i = 1, n do
      local v = s[i]
      if type(v) ~= "number" or v ~= floor(v) or v < -1 or v > 2 ^ 53 then
        fail(op, "bad size " .. tostring(v) .. " at position " .. i .. " of the shape")
      end
      shape_buf[i - 1] = v
    end
    return n, shape_buf
  end

  -- 1-based (or negative) dim -> 0-based; `extra` allows ndim + 1 (unsqueeze)
  local function dim0(op, d, ndim, extra)
    local n = ndim + (extra or 0)
    if type(d) ~= "number" or d ~= floor(d) then fail(op, "dim must be an integer, got " .. tostring(d)) end
    local r = d < 0 and d + n or d - 1
    if r < 0 or r >= n or d == 0 then
      fail(op, "dim " .. d .. " out of range for a tensor of " .. ndim .. " dims")
    end
    return r
  end

  local function opts_of(t)
    if type(t) == "table" and not is_tensor(t) and (t.dtype or t.device) then return t end
  end

  ---------------------------------------------------------------- accessors
  function Tensor.dim(t) return C.ember_tensor_ndim(tensor_arg("dim", t, 1)) end
  function Tensor.numel(t) return tonumber(C.ember_tensor_numel(tensor_arg("numel", t, 1))) end
  function Tensor.shape(t)
    local c = tensor_arg("shape", t, 1)
    local n, s = C.ember_tensor_ndim(c), C.ember_tensor_shape(c)
    local r = {}
    for i = 1, n do r[i] = tonumber(s[i - 1]) end
    return r
  end
  function Tensor.size(t, d)
    if d == nil then return t:shape() end
    local c = tensor_arg("size", t, 1)
    local n = C.ember_tensor_ndim(c)
    return tonumber(C.ember_tensor_shape(c)[dim0("size", d, n)])
  end
  function Tensor.stride(t)
    local c = tensor_arg("stride", t, 1)
    local n, s = C.ember_tensor_ndim(c), C.ember_tensor_strides(c)
    local r = {}
    for i = 1, n do r[i] = tonumber(s[i - 1]) end
    return r
  end
  function Tensor.is_contiguous(t) return C.ember_tensor_is_contiguous(tensor_arg("is_contiguous", t, 1)) ~= 0 end
  function Tensor.version(t) return tonumber(C.ember_tensor_version(tensor_arg("version", t, 1))) end
  function Tensor.data_ptr(t) return C.ember_tensor_data(tensor_arg("data_ptr", t, 1)) end

  local index_fields = {
    dtype = function(t) return DTYPES[C.ember_tensor_dtype(tensor_arg("dtype", t, 1)) + 1] end,
    device = function(t) return device_name(C.ember_tensor_device(tensor_arg("device", t, 1))) end,
  }
  -- t.grad lives in the raw field _grad, so that every assignment passes
  -- through __newindex and is checked against the tensor
  index_fields.grad = function(t) return rawget(t, "_grad") end
  Tensor.__index = function(t, k)
    local m = Tensor[k]
    if m ~= nil then return m end
    local f = index_fields[k]
    if f then return f(t) end
    if type(k) ~= "string" then return ember._index_read(t, k) end   -- brackets (indexing.lua)
    return nil
  end
  local function same_dims(a, b)
    local na, nb = C.ember_tensor_ndim(a), C.ember_tensor_ndim(b)
    if na ~= nb then return false end
    local sa, sb = C.ember_tensor_shape(a), C.ember_tensor_shape(b)
    for d = 0, na - 1 do if sa[d] ~= sb[d] then return false end end
    return true
  end
  Tensor.__newindex = function(t, k, v)
    if k == "grad" then
      if v ~= nil then
        local c, g = rawget(t, "_c"), is_tensor(v) and rawget(v, "_c")
        if not g then
          errors.raise(("ember.grad: .grad of a tensor of shape {%s} must be a tensor or nil, got %s")
            :format(table.concat(t:shape(), ","), type(v)))
        end
        if c ~= nil and (not same_dims(c, g) or C.ember_tensor_dtype(c) ~= C.ember_tensor_dtype(g)
            or C.ember_tensor_device(c) ~= C.ember_tensor_device(g)) then
          errors.raise(("ember.grad: a gradient of shape {%s} (%s, %s) cannot be the .grad of a tensor of shape {%s} (%s, %s)")
            :format(table.concat(v:shape(), ","), v.dtype, v.device, table.concat(t:shape(), ","), t.dtype, t.device))
        end
      end
      rawset(t, "_grad", v)
    elseif type(k) ~= "string" then
      ember._index_write(t, k, v)   -- x[...] = v (indexing.lua)
    else
      rawset(t, k, v)
    end
  end

  local fmt_buf, fmt_cap = nil, 0
  function Tensor.__tostring(t)
    local c = rawget(t, "_c")
    if c == nil then return "tensor(<freed>)" end
    local need = tonumber(C.ember_format(c, fmt_buf, fmt_cap))
    if need > fmt_cap then
      fmt_cap = need + 64
      fmt_buf = ffi_new("char[?]", fmt_cap)
      C.ember_format(c, fmt_buf, fmt_cap)
    end
    return ffi_string(fmt_buf)
  end

  local item_buf = ffi_new("double[1]")
  function Tensor.item(t)
    check(C.ember_item(tensor_arg("item", t, 1), item_buf))
    local v = item_buf[0]
    if C.ember_tensor_dtype(t._c) == BOOL then return v ~= 0 end
    return v
  end

  function Tensor.tolist(t)
    local c = tensor_arg("tolist", t, 1)
    local n = tonumber(C.ember_tensor_numel(c))
    local buf = ffi_new("double[?]", math.max(n, 1))
    check(C.ember_copy_to_buffer(c, buf, F64))
    local is_bool = C.ember_tensor_dtype(c) == BOOL
    local shape = t:shape()
    local nd = #shape
    if nd == 0 then
      if is_bool then return buf[0] ~= 0 end
      return buf[0]
    end
    local pos = 0
    local function build(d)
      local r = {}
      if d == nd then
        for i = 1, shape[d] do
          local v = buf[pos]
          pos = pos + 1
          if is_bool then v = v ~= 0 end
          r[i] = v
        end
      else
        for i = 1, shape[d] do r[i] = build(d + 1) end
      end
      return r
    end
    return build(1)
  end

  ---------------------------------------------------------------- creation
  local function infer(data, op)
    -- walks nested tables: shape, flat values, and whether all are booleans
    local shape, flat, n_bool = {}, {}, 0
    local function walk(x, d)
      if type(x) == "table" and not is_tensor(x) then
        local len = #x
        if shape[d] == nil then
          shape[d] = len
        elseif shape[d] ~= len then
          fail(op, "ragged nested table: expected " .. shape[d] .. " entries at depth " .. d
            .. ", got " .. len)
        end
        if d > 8 then fail(op, "at most 8 dims are supported") end
        for i = 1, len do walk(x[i], d + 1) end
        if len == 0 and shape[d + 1] ~= nil then fail(op, "ragged nested table") end
      else
        if shape[d] ~= nil then
          fail(op, "ragged nested table: expected a table at depth " .. d .. ", got " .. type(x))
        end
        local v = x
        if type(x) == "boolean" then
          n_bool = n_bool + 1
          v = x and 1 or 0
        elseif is_tensor(x) and x:numel() == 1 then
          v = x:item()
          if type(v) == "boolean" then n_bool = n_bool + 1; v = v and 1 or 0 end
        elseif type(x) ~= "number" then
          fail(op, "expected numbers or booleans, got " .. type(x))
        end
        flat[#flat + 1] = v
        -- depth where the scalars live is fixed: mark it so deeper tables are ragged
        shape.leaf = shape.leaf or d
        if shape.leaf ~= d then fail(op, "ragged nested table") end
      end
    end
    walk(data, 1)
    local dims = {}
    for i = 1, (shape.leaf or 1) - 1 do dims[i] = shape[i] end
    return dims, flat, n_bool > 0 and n_bool == #flat
  end

  function ember.tensor(data, opts)
    if is_tensor(data) then return data:clone() end
    local dims, flat, all_bool = infer(data, "tensor")
    local dt = opts and opts.dtype and dtype_id("tensor", opts.dtype) or (all_bool and BOOL or F32)
    local dev = device_id("tensor", opts and opts.device)
    local n = #flat
    local buf = ffi_new("double[?]", math.max(n, 1))
    for i = 1, n do buf[i - 1] = flat[i] end
    local nd = #dims
    for i = 1, nd do shape_buf[i - 1] = dims[i] end
    check(C.ember_from_data(buf, F64, nd, shape_buf, dt, dev, out1))
    return wrap(out1[0])
  end

  -- factories take an optional last {dtype =, device =} table
  local function split_opts(...)
    local n = select("#", ...)
    local last = select(n, ...)
    if n > 0 and opts_of(last) then return last, n - 1 end
    return nil, n
  end

  local function shape_factory(name, fn)
    ember[name] = function(...)
      local opts, n = split_opts(...)
      local first = ...
      local nd, s
      if n == 0 then fail(name, "expected a shape") end
      if type(first) == "table" then
        nd, s = shape_arg(name, first)
      else
        local dims = {}
        for i = 1, n do dims[i] = (select(i, ...)) end
        nd, s = shape_arg(name, dims)
      end
      local dt = dtype_id(name, opts and opts.dtype)
      local dev = device_id(name, opts and opts.device)
      local span, sizes = 1, {}
      for i = 0, nd - 1 do sizes[i + 1] = tonumber(s[i]) end
      for i = 0, nd - 1 do
        if s[i] < 0 then fail(name, "negative size in shape {" .. table.concat(sizes, ", ") .. "}") end
        span = span * math.max(tonumber(s[i]), 1)
      end
      if span > 2 ^ 50 then
        fail(name, "shape {" .. table.concat(sizes, ", ") .. "} is too large: its sizes multiply past 2^50 elements")
      end
      return fn(nd, s, dt, dev)
    end
  end
  shape_factory("empty", function(nd, s, dt, dev) check(C.ember_empty(nd, s, dt, dev, out1)); return wrap(out1[0]) end)
  shape_factory("zeros", function(nd, s, dt, dev) check(C.ember_full(nd, s, 0, dt, dev, out1)); return wrap(out1[0]) end)
  shape_factory("ones", function(nd, s, dt, dev) check(C.ember_full(nd, s, 1, dt, dev, out1)); return wrap(out1[0]) end)
  shape_factory("rand", function(nd, s, dt, dev) check(C.ember_rand(nd, s, dt, dev, out1)); return wrap(out1[0]) end)
  shape_factory("randn", function(nd, s, dt, dev) check(C.ember_randn(nd, s, dt, dev, out1)); return wrap(out1[0]) end)

  function ember.full(shape, value, opts)
    local nd, s = shape_arg("full", shape)
    if type(value) ~= "number" and type(value) ~= "boolean" then
      fail("full", "expected a number fill value, got " .. type(value))
    end
    local dt = dtype_id("full", opts and opts.dtype)
    if type(value) == "boolean" then
      if not (opts and opts.dtype) then dt = BOOL end
      value = value and 1 or 0
    end
    check(C.ember_full(nd, s, value, dt, device_id("full", opts and opts.device), out1))
    return wrap(out1[0])
  end

  local function like(name, v)
    return function(t, opts)
      local c = tensor_arg(name, t, 1)
      local dt = opts and opts.dtype and dtype_id(name, opts.dtype) or C.ember_tensor_dtype(c)
      local dev = opts and opts.device and device_id(name, opts.device) or C.ember_tensor_device(c)
      check(C.ember_full(C.ember_tensor_ndim(c), C.ember_tensor_shape(c), v, dt, dev, out1))
      return wrap(out1[0])
    end
  end
  ember.zeros_like, ember.ones_like = like("zeros_like", 0), like("ones_like", 1)
  function ember.full_like(t, v, opts) return like("full_like", v)(t, opts) end
  function ember.empty_like(t, opts) return like("empty_like", 0)(t, opts) end
  function ember.rand_like(t, opts)
    return ember.rand(t:shape(), { dtype = opts and opts.dtype or t.dtype, device = t.device })
  end
  function ember.randn_like(t, opts)
    return ember.randn(t:shape(), { dtype = opts and opts.dtype or t.dtype, device = t.device })
  end

  local function is_int(x) return type(x) == "number" and x == floor(x) end

  function ember.arange(a, b, c, opts)
    if type(b) == "table" then opts, b = b, nil end
    if type(c) == "table" then opts, c = c, nil end
    local start, stop, step = a, b, c or 1
    if stop == nil then start, stop = 0, a end
    for _, v in ipairs({ start, stop, step }) do
      if type(v) ~= "number" then fail("arange", "expected numbers, got " .. type(v)) end
    end
    local dt = opts and opts.dtype and dtype_id("arange", opts.dtype)
      or ((is_int(start) and is_int(stop) and is_int(step)) and I64 or F32)
    check(C.ember_arange(start, stop, step, dt, device_id("arange", opts and opts.device), out1))
    return wrap(out1[0])
  end

  function ember.linspace(a, b, steps, opts)
    if type(a) ~= "number" or type(b) ~= "number" or not is_int(steps) then
      fail("linspace", "expected (start, end, steps)")
    end
    check(C.ember_linspace(a, b, steps, dtype_id("linspace", opts and opts.dtype),
      device_id("linspace", opts and opts.device), out1))
    return wrap(out1[0])
  end

  function ember.eye(n, m, opts)
    if type(m) == "table" then opts, m = m, nil end
    if not is_int(n) or (m ~= nil and not is_int(m)) then fail("eye", "expected integer sizes") end
    check(C.ember_eye(n, m or n, dtype_id("eye", opts and opts.dtype),
      device_id("eye", opts and opts.device), out1))
    return wrap(out1[0])
  end

  function ember.randint(low, high, shape, opts)
    if type(high) == "table" then low, high, shape, opts = 0, low, high, shape end
    if not is_int(low) or not is_int(high) or math.abs(low) >= 2 ^ 63 or math.abs(high) >= 2 ^ 63 then
      fail("randint", ("expected finite integer bounds, got low=%s high=%s"):format(tostring(low), tostring(high)))
    end
    local nd, s = shape_arg("randint", shape)
    local dt = opts and opts.dtype and dtype_id("randint", opts.dtype) or I64
    check(C.ember_randint(low, high, nd, s, dt, device_id("randint", opts and opts.device), out1))
    return wrap(out1[0])
  end

  function ember.manual_seed(seed)
    if not is_int(seed) or seed < 0 then fail("manual_seed", "expected a non-negative integer seed") end
    C.ember_manual_seed(seed)
  end
  function ember.initial_seed() return tonumber(C.ember_initial_seed()) end

  -- Both stats first release what the GC collected since the last sweep, so a
  -- tensor counts as freed right after collectgarbage().
  function ember.memory_stats()
    if cycle[1] == nil then sweep() end
    local s = ffi_new("ember_memory_stats_t")
    C.ember_memory_stats(s)
    return { live_tensors = tonumber(s.live_tensors), bytes_in_use = tonumber(s.bytes_in_use),
      peak_bytes = tonumber(s.peak_bytes), bytes_cached = tonumber(s.bytes_cached),
      limit = s.limit > 0 and tonumber(s.limit) or nil }
  end
  -- a ceiling on the bytes tensors hold (nil or 0: none); past it an op raises
  -- naming itself, the bytes and the limit, and everything stays usable
  function ember.set_memory_limit(bytes)
    if bytes ~= nil and (type(bytes) ~= "number" or not (bytes >= 0) or bytes ~= floor(bytes) or bytes >= 2 ^ 63) then
      fail("set_memory_limit", "expected a whole number of bytes >= 0 or nil, got " .. tostring(bytes))
    end
    check(C.ember_set_memory_limit(bytes or 0))
    limited = (bytes or 0) > 0
  end
  function ember.reset_peak_memory() C.ember_reset_peak() end
  function ember.empty_cache() C.ember_empty_cache() end
  function ember.set_num_threads(n) C.ember_set_num_threads(n) end
  -- bit-identical results for any thread count (docs/design.md, "Determinism")
  function ember.set_deterministic(on) C.ember_set_deterministic(on and 1 or 0) end
  function ember.is_deterministic() return C.ember_is_deterministic() ~= 0 end
  -- seconds on a monotonic clock (what run:step budgets are measured on)
  function ember.clock() return C.ember_clock() end
  function ember.get_num_threads() return C.ember_num_threads() end
  function ember.version() return ffi_string(C.ember_version()) end
  function ember.blas_info() return ffi_string(C.ember_blas_info()) end

  ---------------------------------------------------------------- elementwise ops
  -- Generated from source text so each wrapper calls C.ember_<op> by a
  -- constant name (what the JIT compiles best).
  local function gen(src, env)
    local f = assert(load(src, "=ember/tensor.lua(gen)"))
    setfenv(f, env)
    return f()
  end
  local genv = { C = C, ptr = ptr, out1 = out1, wrap = wrap, check = check, tensor_arg = tensor_arg }

  -- BINARY and UNARY lines of ops.def, written to ember/optable.lua at build time
  for _, op in ipairs(require("ember.optable")) do
    if op.lua == "binary" then
      local f = gen(([[
        local C, ptr, out1, wrap, check = C, ptr, out1, wrap, check
        return function(a, b)
          local rc = C.ember_OP(ptr("OP", a, 1), ptr("OP", b, 2), out1)
          if rc < 0 then check(rc) end
          return wrap(out1[0])
        end]]):gsub("OP", op.name), genv)
      Tensor[op.name], ember[op.name] = f, f
      if op.inplace then
        Tensor[op.name .. "_"] = gen(([[
          local C, ptr, tensor_arg, check = C, ptr, tensor_arg, check
          return function(a, b)
            local rc = C.ember_OP_(tensor_arg("OP_", a, 1), ptr("OP_", b, 2))
            if rc < 0 then check(rc) end
            return a
          end]]):gsub("OP", op.name), genv)
      end
    elseif op.lua == "unary" then
      local f = gen(([[
        local C, tensor_arg, out1, wrap, check = C, tensor_arg, out1, wrap, check
        return function(a)
          local rc = C.ember_OP(tensor_arg("OP", a, 1), out1)
          if rc < 0 then check(rc) end
          return wrap(out1[0])
        end]]):gsub("OP", op.name), genv)
      Tensor[op.name], ember[op.name] = f, f
      local name, iname = op.name, op.name .. "_"
      Tensor[iname] = function(a)
        check(C.ember_unary_(tensor_arg(iname, a, 1), name))
        return a
      end
    end
  end
  Tensor.__add, Tensor.__sub, Tensor.__mul, Tensor.__div, Tensor.__pow =
    ember.add, ember.sub, ember.mul, ember.div, ember.pow
  Tensor.__unm = ember.neg

  function Tensor.gelu(a, opts)
    if opts ~= nil and type(opts) ~= "table" then fail("gelu", "options must be a table, got " .. type(opts)) end
    local mode = opts and opts.approximate
    if mode ~= nil and mode ~= "none" and mode ~= "tanh" then
      fail("gelu", "approximate must be \"none\" or \"tanh\", got " .. tostring(mode))
    end
    local approx = mode == "tanh"
    check(C.ember_gelu(tensor_arg("gelu", a, 1), approx and 1 or 0, out1))
    return wrap(out1[0])
  end
  ember.gelu = Tensor.gelu

  function Tensor.clamp(a, lo, hi)
    if type(lo) == "table" or type(hi) == "table" then   -- tensor bounds
      local r = a
      if lo ~= nil then r = ember.maximum(r, lo) end
      if hi ~= nil then r = ember.minimum(r, hi) end
      return r == a and a:clone() or r
    end
    check(C.ember_clamp(tensor_arg("clamp", a, 1), lo ~= nil and 1 or 0, lo or 0,
      hi ~= nil and 1 or 0, hi or 0, out1))
    return wrap(out1[0])
  end
  ember.clamp = Tensor.clamp
  function Tensor.clamp_(a, lo, hi)
    if type(lo) == "table" or type(hi) == "table" then
      -- maximum and minimum keep their operands: under recording they read a
      -- copy of the old value, which the write leaves alone
      local old = C.ember_is_grad_enabled() ~= 0 and a:clone() or a
      return a:copy_(old:clamp(lo, hi))
    end
    check(C.ember_clamp_(tensor_arg("clamp_", a, 1), lo ~= nil and 1 or 0, lo or 0,
      hi ~= nil and 1 or 0, hi or 0))
    return a
  end

  function ember.where(cond, a, b)
    check(C.ember_where(ptr("where", cond, 1), ptr("where", a, 2), ptr("where", b, 3), out1))
    return wrap(out1[0])
  end
  function Tensor.where(a, cond, b) return ember.where(cond, a, b) end

  function Tensor.fill_(a, v)
    if type(v) == "boolean" then v = v and 1 or 0 end
    if type(v) ~= "number" then fail("fill_", "expected a number, got " .. type(v)) end
    check(C.ember_fill_(tensor_arg("fill_", a, 1), v))
    return a
  end
  function Tensor.zero_(a) return a:fill_(0) end
  function Tensor.copy_(a, src)
    check(C.ember_copy_(tensor_arg("copy_", a, 1), ptr("copy_", src, 2)))
    return a
  end
  function Tensor.uniform_(a, lo, hi)
    check(C.ember_uniform_(tensor_arg("uniform_", a, 1), lo or 0, hi or 1))
    return a
  end
  function Tensor.normal_(a, mean, std)
    check(C.ember_normal_(tensor_arg("normal_", a, 1), mean or 0, std or 1))
    return a
  end

  -- comparison operators in Lua must return booleans: == is identity (rawequal),
  -- and elementwise comparisons are methods (eq, lt, ...).

  ---------------------------------------------------------------- conversions
  function Tensor.clone(a)
    check(C.ember_clone(tensor_arg("clone", a, 1), out1))
    return wrap(out1[0])
  end
  function Tensor.contiguous(a)
    check(C.ember_contiguous(tensor_arg("contiguous", a, 1), out1))
    return wrap(out1[0])
  end
  function Tensor.detach(a)
    check(C.ember_detach(tensor_arg("detach", a, 1), out1))
    return wrap(out1[0])
  end
  ember.clone, ember.contiguous, ember.detach = Tensor.clone, Tensor.contiguous, Tensor.detach

  -- t:to("float64"), t:to("cuda"), t:to({dtype =, device =}), t:to(other_tensor)
  function Tensor.to(a, x, y)
    local c = tensor_arg("to", a, 1)
    local dt, dev
    if is_tensor(x) then
      local xc = tensor_arg("to", x, 2)
      dt, dev = C.ember_tensor_dtype(xc), C.ember_tensor_device(xc)
    elseif type(x) == "table" then
      dt = x.dtype and dtype_id("to", x.dtype)
      dev = x.device and device_id("to", x.device)
    else
      for _, v in ipairs({ x, y }) do
        if v ~= nil then
          if type(v) == "string" and (v == "cpu" or v:match("^cuda")) then dev = device_id("to", v)
          else dt = dtype_id("to", v) end
        end
      end
    end
    local r = a
    if dev and dev ~= C.ember_tensor_device(c) then
      check(C.ember_to_device(c, dev, out1))
      r = wrap(out1[0])
    end
    if dt and dt ~= C.ember_tensor_dtype(r._c) then
      check(C.ember_to_dtype(r._c, dt, out1))
      r = wrap(out1[0])
    end
    return r
  end
  function Tensor.float(a) return a:to("float32") end
  function Tensor.double(a) return a:to("float64") end
  function Tensor.half(a) return a:to("float16") end
  function Tensor.long(a) return a:to("int64") end
  function Tensor.int(a) return a:to("int32") end
  function Tensor.bool(a) return a:to("bool") end
  function Tensor.cpu(a) return a:to("cpu") end
  function Tensor.cuda(a, k) return a:to(k and ("cuda:" .. k) or "cuda") end
  function Tensor.type(a) return a.dtype end

  ---------------------------------------------------------------- reductions
  local dims_buf = ffi_new("int[8]")
  -- dim may be nil (all), a number or a list of numbers
  local function dims_arg(op, c, dim)
    local nd = C.ember_tensor_ndim(c)
    if dim == nil then return 0, nil end
    if type(dim) == "number" then
      dims_buf[0] = dim0(op, dim, nd)
      return 1, dims_buf
    end
    if type(dim) ~= "table" then fail(op, "dim must be a number or a list, got " .. type(dim)) end
    for i = 1, #dim do dims_buf[i - 1] = dim0(op, dim[i], nd) end
    return #dim, dims_buf
  end

  function Tensor.sum(a, dim, keepdim)
    local c = tensor_arg("sum", a, 1)
    local n, d = dims_arg("sum", c, dim)
    check(C.ember_sum(c, n, d, keepdim and 1 or 0, out1))
    return wrap(out1[0])
  end
  function Tensor.mean(a, dim, keepdim)
    local c = tensor_arg("mean", a, 1)
    local n, d = dims_arg("mean", c, dim)
    check(C.ember_mean(c, n, d, keepdim and 1 or 0, out1))
    return wrap(out1[0])
  end
  function Tensor.var(a, dim, keepdim, unbiased)
    local c = tensor_arg("var", a, 1)
    local n, d = dims_arg("var", c, dim)
    check(C.ember_var(c, n, d, keepdim and 1 or 0, unbiased == false and 0 or 1, out1))
    return wrap(out1[0])
  end
  function Tensor.std(a, dim, keepdim, unbiased) return a:var(dim, keepdim, unbiased):sqrt() end
  function Tensor.norm(a, p, dim, keepdim)
    local c = tensor_arg("norm", a, 1)
    if p == "fro" or p == nil then p = 2 end
    if p == "inf" then p = huge end
    local n, d = dims_arg("norm", c, dim)
    check(C.ember_norm(c, p, n, d, keepdim and 1 or 0, out1))
    return wrap(out1[0])
  end
  function Tensor.logsumexp(a, dim, keepdim)
    local c = tensor_arg("logsumexp", a, 1)
    if dim == nil then fail("logsumexp", "dim is required") end
    check(C.ember_logsumexp(c, dim0("logsumexp", dim, C.ember_tensor_ndim(c)), keepdim and 1 or 0, out1))
    return wrap(out1[0])
  end
  local function minmax(op, all_name, dim_name)
    return function(a, dim, keepdim)
      local c = tensor_arg(op, a, 1)
      if dim == nil then
        check(C[all_name](c, out1))
        return wrap(out1[0])
      end
      check(C[dim_name](c, dim0(op, dim, C.ember_tensor_ndim(c)), keepdim and 1 or 0, out2, out2 + 1))
      local values, idx = wrap(out2[0]), wrap(out2[1])
      return values, idx + 1
    end
  end
  Tensor.max = minmax("max", "ember_amax_all", "ember_max_dim")
  Tensor.min = minmax("min", "ember_amin_all", "ember_min_dim")
  local function argm(op, fname)
    return function(a, dim, keepdim)
      local c = tensor_arg(op, a, 1)
      local d = dim == nil and -1 or dim0(op, dim, C.ember_tensor_ndim(c))
      check(C[fname](c, d, keepdim and 1 or 0, out1))
      return wrap(out1[0]) + 1
    end
  end
  Tensor.argmax, Tensor.argmin = argm("argmax", "ember_argmax"), argm("argmin", "ember_argmin")
  function Tensor.softmax(a, dim)
    local c = tensor_arg("softmax", a, 1)
    check(C.ember_softmax(c, dim0("softmax", dim or -1, C.ember_tensor_ndim(c)), out1))
    return wrap(out1[0])
  end
  function Tensor.log_softmax(a, dim)
    local c = tensor_arg("log_softmax", a, 1)
    check(C.ember_log_softmax(c, dim0("log_softmax", dim or -1, C.ember_tensor_ndim(c)), out1))
    return wrap(out1[0])
  end
  for _, op in ipairs({ "sum", "mean", "var", "std", "norm", "logsumexp", "max", "min", "argmax",
    "argmin", "softmax", "log_softmax" }) do
    ember[op] = Tensor[op]
  end
  function Tensor.sum_to(a, shape)
    local nd, s = shape_arg("sum_to", shape)
    check(C.ember_sum_to(tensor_arg("sum_to", a, 1), nd, s, out1))
    return wrap(out1[0])
  end

  ---------------------------------------------------------------- linear algebra
  function Tensor.matmul(a, b)
    check(C.ember_matmul(tensor_arg("matmul", a, 1), tensor_arg("matmul", b, 2), out1))
    return wrap(out1[0])
  end
  ember.matmul = Tensor.matmul
  function Tensor.t(a)
    local c = tensor_arg("t", a, 1)
    local nd = C.ember_tensor_ndim(c)
    if nd > 2 then fail("t", "expects a tensor with <= 2 dims, got " .. nd) end
    if nd < 2 then return a:view(a:shape()) end
    check(C.ember_transpose(c, 0, 1, out1))
    return wrap(out1[0])
  end

  ---------------------------------------------------------------- shape
  function Tensor.reshape(a, ...)
    local nd, s = shape_arg("reshape", ...)
    check(C.ember_reshape(tensor_arg("reshape", a, 1), nd, s, out1))
    return wrap(out1[0])
  end
  function Tensor.view(a, ...)
    local nd, s = shape_arg("view", ...)
    check(C.ember_view(tensor_arg("view", a, 1), nd, s, out1))
    return wrap(out1[0])
  end
  function Tensor.view_as(a, b) return a:view(b:shape()) end
  function Tensor.reshape_as(a, b) return a:reshape(b:shape()) end
  function Tensor.expand(a, ...)
    local nd, s = shape_arg("expand", ...)
    check(C.ember_expand(tensor_arg("expand", a, 1), nd, s, out1))
    return wrap(out1[0])
  end
  function Tensor.expand_as(a, b) return a:expand(b:shape()) end
  function Tensor.transpose(a, d1, d2)
    local c = tensor_arg("transpose", a, 1)
    local nd = C.ember_tensor_ndim(c)
    check(C.ember_transpose(c, dim0("transpose", d1, nd), dim0("transpose", d2, nd), out1))
    return wrap(out1[0])
  end
  local perm_buf = ffi_new("int[8]")
  function Tensor.permute(a, dims, ...)
    local c = tensor_arg("permute", a, 1)
    if type(dims) == "number" then dims = { dims, ... } end
    if type(dims) ~= "table" then fail("permute", "expected a list of dims") end
    local nd = C.ember_tensor_ndim(c)
    if #dims ~= nd then
      fail("permute", "expected " .. nd .. " dims for a tensor of " .. nd .. " dims, got " .. #dims)
    end
    for i = 1, nd do perm_buf[i - 1] = dim0("permute", dims[i], nd) end
    check(C.ember_permute(c, nd, perm_buf, out1))
    return wrap(out1[0])
  end
  function Tensor.squeeze(a, d)
    local c = tensor_arg("squeeze", a, 1)
    local dd = d == nil and -1 or dim0("squeeze", d, C.ember_tensor_ndim(c))
    check(C.ember_squeeze(c, dd, out1))
    return wrap(out1[0])
  end
  function Tensor.unsqueeze(a, d)
    local c = tensor_arg("unsqueeze", a, 1)
    check(C.ember_unsqueeze(c, dim0("unsqueeze", d, C.ember_tensor_ndim(c), 1), out1))
    return wrap(out1[0])
  end
  function Tensor.flatten(a, s, e)
    local shape = a:shape()
    local nd = #shape
    if nd == 0 then return a:reshape({ 1 }) end
    local s0 = dim0("flatten", s or 1, nd)
    local e0 = dim0("flatten", e or -1, nd)
    if s0 > e0 then fail("flatten", "start dim " .. tostring(s) .. " comes after end dim " .. tostring(e)) end
    local new, prod = {}, 1
    for i = 1, s0 do new[#new + 1] = shape[i] end
    for i = s0 + 1, e0 + 1 do prod = prod * shape[i] end
    new[#new + 1] = prod
    for i = e0 + 2, nd do new[#new + 1] = shape[i] end
    return a:reshape(new)
  end
  function Tensor.narrow(a, d, start, len)
    local c = tensor_arg("narrow", a, 1)
    local nd = C.ember_tensor_ndim(c)
    local d0 = dim0("narrow", d, nd)
    local size = tonumber(C.ember_tensor_shape(c)[d0])
    if not is_int(start) or not is_int(len) then fail("narrow", "start and length must be integers") end
    local s0 = start < 0 and start + size or start - 1
    if start == 0 or s0 < 0 or len < 0 or s0 + len > size then
      fail("narrow", ("start %s and length %s out of range for dim %d of size %d")
        :format(tostring(start), tostring(len), d, size))
    end
    check(C.ember_narrow(c, d0, s0, len, out1))
    return wrap(out1[0])
  end
  function Tensor.select(a, d, i)
    local c = tensor_arg("select", a, 1)
    local nd = C.ember_tensor_ndim(c)
    local d0 = dim0("select", d, nd)
    local size = tonumber(C.ember_tensor_shape(c)[d0])
    if not is_int(i) then fail("select", "index must be an integer") end
    local i0 = i < 0 and i + size or i - 1
    if i == 0 or i0 < 0 or i0 >= size then
      fail("select", ("index %s out of range for dim %d of size %d"):format(tostring(i), d, size))
    end
    check(C.ember_select(c, d0, i0, out1))
    return wrap(out1[0])
  end

  -- index tensors are 1-based int64/int32 in Lua and 0-based in C
  local function index_arg(op, idx)
    if not is_tensor(idx) then fail(op, "expected an index tensor, got " .. type(idx)) end
    local dt = C.ember_tensor_dtype(tensor_arg(op, idx, 2))
    if dt ~= I64 and dt ~= I32 then
      fail(op, "index tensor must be int64 or int32, got " .. DTYPES[dt + 1])
    end
    return keep_alive(idx - 1)._c
  end
  function Tensor.index_select(a, d, idx)
    local c = tensor_arg("index_select", a, 1)
    local d0 = dim0("index_select", d, C.ember_tensor_ndim(c))
    check(C.ember_index_select(c, d0, index_arg("index_select", idx), out1))
    return wrap(out1[0])
  end
  -- a with src's slices added at the (1-based) indices idx along dim d:
  -- a[..., idx[i], ...] += src[..., i, ...] (PyTorch's index_add)
  local index_shape = ffi_new("int64_t[8]")
  local function index_added(op, a, d, idx, src)
    local c = tensor_arg(op, a, 1)
    local nd = C.ember_tensor_ndim(c)
    local d0 = dim0(op, d, nd)
    local s = C.ember_tensor_shape(c)
    for i = 0, nd - 1 do index_shape[i] = s[i] end
    local sc = tensor_arg(op, src, 4)
    check(C.ember_index_add(nd, index_shape, d0, index_arg(op, idx), sc, out1))
    return wrap(out1[0])
  end
  function Tensor.index_add(a, d, idx, src) return a + index_added("index_add", a, d, idx, src) end
  function Tensor.index_add_(a, d, idx, src) return a:add_(index_added("index_add_", a, d, idx, src)) end
  ember.index_add = Tensor.index_add

  -- value where the bool mask (broadcast to a) is true, a elsewhere; a's dtype
  local function mask_arg(op, a, mask, v)
    tensor_arg(op, a, 1)
    if not is_tensor(mask) or mask.dtype ~= "bool" then
      fail(op, "mask must be a bool tensor, got " .. (is_tensor(mask) and mask.dtype or type(mask)))
    end
    if type(v) ~= "number" and not (is_tensor(v) and v:numel() == 1) then
      fail(op, "value must be a number or a one-element tensor, got " .. type(v))
    end
  end
  function Tensor.masked_fill(a, mask, v)
    mask_arg("masked_fill", a, mask, v)
    local r = ember.where(mask, v, a)
    return r.dtype == a.dtype and r or r:to(a.dtype)
  end
  function Tensor.masked_fill_(a, mask, v)
    mask_arg("masked_fill_", a, mask, v)
    return a:copy_(ember.where(mask, v, a))
  end
  ember.masked_fill = Tensor.masked_fill

  function Tensor.gather(a, d, idx)
    local c = tensor_arg("gather", a, 1)
    local d0 = dim0("gather", d, C.ember_tensor_ndim(c))
    check(C.ember_gather(c, d0, index_arg("gather", idx), out1))
    return wrap(out1[0])
  end

  local list_buf = ffi_new("ember_tensor *[256]")
  local function list_op(op, fname, extra)
    return function(list, d)
      if type(list) ~= "table" or is_tensor(list) then fail(op, "expected a list of tensors") end
      local n = #list
      if n == 0 then fail(op, "expected a non-empty list of tensors") end
      local buf = n <= 256 and list_buf or ffi_new("ember_tensor *[?]", n)
      for i = 1, n do buf[i - 1] = tensor_arg(op, list[i], i) end
      local nd = C.ember_tensor_ndim(buf[0]) + extra
      check(C[fname](n, buf, dim0(op, d or 1, nd), out1))
      return wrap(out1[0])
    end
  end
  ember.cat = list_op("cat", "ember_cat", 0)
  ember.stack = list_op("stack", "ember_stack", 1)

  for _, op in ipairs({ "reshape", "view", "transpose", "permute", "squeeze", "unsqueeze",
    "expand", "flatten", "narrow", "select", "index_select", "gather" }) do
    ember[op] = Tensor[op]
  end

  Tensor.__len = function(t) return t:dim() > 0 and t:size(1) or 0 end
  Tensor.__concat = function(a, b) return tostring(a) .. tostring(b) end
end
