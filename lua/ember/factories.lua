-- Constructors: ember.tensor from nested tables, the shape factories (empty,
-- zeros, ones, rand, randn, full and their _like forms), arange, linspace,
-- eye, randint, and the random seed. Built on the Tensor core (tensor.lua).
local ffi = require("ffi")

return function(ember, H)
  local C = ember._C
  local check, fail, wrap, tensor_arg, shape_arg, dtype_id = H.check, H.fail, H.wrap, H.tensor_arg, H.shape_arg, H.dtype_id
  local device_id, is_tensor, out1, shape_buf, F32 = H.device_id, H.is_tensor, H.out1, H.shape_buf, H.F32
  local F64, I64, BOOL = H.F64, H.I64, H.BOOL
  local check_int_value, INT_RANGE = H.check_int_value, H.INT_RANGE
  local errors = require("ember.errors")
  local known_options = errors.known_options
  local ffi_new = ffi.new
  local floor = math.floor

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
    if shape.leaf then
      for i = 1, shape.leaf - 1 do dims[i] = shape[i] end
    else   -- no number anywhere: {} is shape {0}, {{}, {}} shape {2, 0}, as PyTorch
      local i = 1
      while shape[i] ~= nil do dims[i] = shape[i]; i = i + 1 end
    end
    return dims, flat, n_bool > 0 and n_bool == #flat
  end

  -- A factory's options table: nil, or a table (not a tensor) whose keys are
  -- all in known (errors.known_options raises naming one that is not); pos
  -- is its argument position, for the message about a value of another type.
  local BASIC = { "device", "dtype" }
  local RANDOM = { "device", "dtype", "generator" }
  local LIKE = { "device", "dtype", "memory_format" }
  local KNOWN = { [BASIC] = { device = true, dtype = true }, [RANDOM] = { device = true, dtype = true, generator = true },
    [LIKE] = { device = true, dtype = true, memory_format = true } }
  local function options(op, opts, pos, known)
    if opts == nil then return nil end
    if type(opts) ~= "table" or is_tensor(opts) then
      fail(op, ("expected an options table as argument %d, got %s"):format(pos, is_tensor(opts) and "a tensor"
        or type(opts) == "string" and ("'" .. opts .. "'") or tostring(opts)))
    end
    -- the keys against a set made once (known_options makes one per call),
    -- without a loop (a loop here costs every call a trace abort: JIT, loop
    -- unroll limit): the keys are distinct, so past #known of them one is
    -- unknown
    local set, k = KNOWN[known], next(opts)
    if k ~= nil then
      if not set[k] then return known_options(op, opts, known) end
      k = next(opts, k)
      if k ~= nil then
        if not set[k] then return known_options(op, opts, known) end
        k = next(opts, k)
        if k ~= nil and (not set[k] or next(opts, k) ~= nil or #known < 3) then
          return known_options(op, opts, known)
        end
      end
    end
    return opts
  end

  -- the C generator of a random factory's options (random.lua; their keys
  -- are checked first, by options)
  local GEN_KEYS = { dtype = true, device = true }
  local function gen(name, opts) return H.gen_of(name, opts, GEN_KEYS) end

  local show = errors.show   -- a value as a message shows it

  function ember.tensor(data, opts)
    if opts ~= nil then options("tensor", opts, 2, BASIC) end
    if is_tensor(data) then
      if not (opts and (opts.dtype or opts.device)) then return data:clone() end
      local dt = opts.dtype and dtype_id("tensor", opts.dtype) and opts.dtype
      local dev = opts.device and device_id("tensor", opts.device) and opts.device
      local r = data:to({ dtype = dt, device = dev })
      return r == data and data:clone() or r
    end
    local dims, flat, all_bool = infer(data, "tensor")
    local dt = opts and opts.dtype and dtype_id("tensor", opts.dtype) or (all_bool and BOOL or F32)
    local dev = device_id("tensor", opts and opts.device)
    local n = #flat
    local buf = ffi_new("double[?]", math.max(n, 1))
    if INT_RANGE[dt] then   -- a value the integer dtype cannot hold raises, as PyTorch
      for i = 1, n do check_int_value("tensor", flat[i], dt); buf[i - 1] = flat[i] end
    else
      for i = 1, n do buf[i - 1] = flat[i] end
    end
    local nd = #dims
    for i = 1, nd do shape_buf[i - 1] = dims[i] end
    check(C.ember_from_data(buf, F64, nd, shape_buf, dt, dev, out1))
    return wrap(out1[0])
  end

  -- The shape factories take a shape table and an optional options table,
  -- zeros({2, 3}, opts), or the sizes one by one and then an optional
  -- options table, zeros(2, 3, opts). A value after the options table, a
  -- non-number among the sizes (nil included) and a shape table holding
  -- anything besides its sizes 1..n raise naming it.
  local SHAPE_NAMES = { "shape", "opts" }
  -- the shape table s: its sizes, and no other key (a hole, a dtype = ...)
  local function shape_table(name, s)
    local nd, sb = shape_arg(name, s)
    -- counting the keys stops past nd: a loop over pairs costs a trace abort
    -- on every call (JIT: inner loop in root trace), this one does not
    local keys, k = 0, next(s)
    while k ~= nil and keys <= nd do keys = keys + 1; k = next(s, k) end
    if keys ~= nd then
      for k, v in pairs(s) do
        if type(k) ~= "number" or k ~= floor(k) or k < 1 or k > nd then
          fail(name, ("the shape table holds %s = %s besides its %d sizes: it is a list of sizes {2, 3}, "
            .. "options go in a table after it (%s({2, 3}, {dtype = 'float64'}))")
            :format(type(k) == "string" and k or "[" .. show(k) .. "]", show(v), nd, name))
        end
      end
    end
    return nd, sb
  end
  -- the sizes given one by one: first (a number), then the values in ...
  local function size_args(name, first, ...)
    local n = select("#", ...)
    local dims = { first }
    local i = 1
    while i <= n do
      local v = select(i, ...)
      if type(v) ~= "number" then break end
      dims[i + 1] = v
      i = i + 1
    end
    local opts
    if i <= n then
      local v = select(i, ...)
      if type(v) == "table" and not is_tensor(v) then
        opts = v
      elseif v ~= nil then
        fail(name, ("bad size %s at position %d of the shape"):format(show(v), i + 1))
      end
      for j = i + 1, n do
        local w = select(j, ...)
        if w ~= nil then
          if not opts then fail(name, ("bad size nil at position %d of the shape"):format(i + 1)) end
          local names = {}
          for k = 1, #dims do names[k] = "size" .. k end
          errors.extra_argument("ember." .. name, j + 1, w, names, ", then an options table")
        end
      end
    end
    local nd, sb = shape_arg(name, dims)
    return nd, sb, opts
  end

  -- (shape, opts?): a value past them raises before anything is checked
  local function shape_and_options(name, shape, ...)
    for i = 2, select("#", ...) do
      local v = select(i, ...)
      if v ~= nil then errors.extra_argument("ember." .. name, i + 1, v, SHAPE_NAMES) end
    end
    if type(shape) == "table" and not is_tensor(shape) then
      local nd, s = shape_table(name, shape)
      return nd, s, (...)
    elseif is_tensor(shape) then
      fail(name, "expected a shape, got a tensor (ember." .. name .. "_like(t) takes a tensor's shape)")
    end
    fail(name, "expected a shape (a table {2, 3} or sizes 2, 3), got " .. show(shape))
  end

  local function shape_factory(name, fn, known)
    ember[name] = function(first, ...)
      local nd, s, opts
      if type(first) == "number" then
        nd, s, opts = size_args(name, first, ...)
      else
        nd, s, opts = shape_and_options(name, first, ...)
      end
      if opts ~= nil then options(name, opts, type(first) == "number" and nd + 1 or 2, known) end
      local dt = dtype_id(name, opts and opts.dtype)
      local dev = device_id(name, opts and opts.device)
      local span = 1
      for i = 0, nd - 1 do
        local d = tonumber(s[i])
        if d < 0 or span * math.max(d, 1) > 2 ^ 50 then
          local sizes = {}
          for k = 0, nd - 1 do sizes[k + 1] = tonumber(s[k]) end
          if d < 0 then fail(name, "negative size in shape {" .. table.concat(sizes, ", ") .. "}") end
          fail(name, "shape {" .. table.concat(sizes, ", ") .. "} is too large: its sizes multiply past 2^50 elements")
        end
        span = span * math.max(d, 1)
      end
      -- not a tail call: a C error ("full: out of memory" under ember.ones) names this factory (errors.lua)
      return (fn(nd, s, dt, dev, known == RANDOM and gen(name, opts)))
    end
  end
  shape_factory("empty", function(nd, s, dt, dev) check(C.ember_empty(nd, s, dt, dev, out1)); return wrap(out1[0]) end,
    BASIC)
  shape_factory("zeros", function(nd, s, dt, dev) check(C.ember_full(nd, s, 0, dt, dev, out1)); return wrap(out1[0]) end,
    BASIC)
  shape_factory("ones", function(nd, s, dt, dev) check(C.ember_full(nd, s, 1, dt, dev, out1)); return wrap(out1[0]) end,
    BASIC)
  shape_factory("rand", function(nd, s, dt, dev, g)
    check(C.ember_rand_gen(g, nd, s, dt, dev, out1)); return wrap(out1[0])
  end, RANDOM)
  shape_factory("randn", function(nd, s, dt, dev, g)
    check(C.ember_randn_gen(g, nd, s, dt, dev, out1)); return wrap(out1[0])
  end, RANDOM)

  -- a fill value: a number, or a boolean (1 or 0)
  local function fill_value(op, value, pos)
    if type(value) == "boolean" then return value and 1 or 0 end
    if type(value) ~= "number" then
      fail(op, ("expected a number or a boolean fill value as argument %d, got %s"):format(pos, show(value)))
    end
    return value
  end

  function ember.full(shape, value, opts)
    options("full", opts, 3, BASIC)
    local nd, s = shape_arg("full", shape)
    local v = fill_value("full", value, 2)
    local dt = dtype_id("full", opts and opts.dtype)
    if type(value) == "boolean" and not (opts and opts.dtype) then dt = BOOL end
    check(C.ember_full(nd, s, v, dt, device_id("full", opts and opts.device), out1))
    return wrap(out1[0])
  end

  -- a tensor of t's shape, dtype and device (opts may change the last two)
  -- filled with v; channels_last (ops.lua) where memory_format asks for it
  -- or preserves it (the default: t is channels_last and not contiguous)
  local function like(name, t, v, opts, pos)
    local c = tensor_arg(name, t, 1)
    options(name, opts, pos, LIKE)
    local dt = opts and opts.dtype and dtype_id(name, opts.dtype) or C.ember_tensor_dtype(c)
    local dev = opts and opts.device and device_id(name, opts.device) or C.ember_tensor_device(c)
    local fmt = opts and ember._memory_format("ember." .. name, opts.memory_format) or "preserve_format"
    local cl = fmt == "channels_last" or fmt == "preserve_format" and C.ember_tensor_is_contiguous(c) == 0
      and ember._in_memory_format(t, "channels_last")
    if not cl then
      check(C.ember_full(C.ember_tensor_ndim(c), C.ember_tensor_shape(c), v, dt, dev, out1))
      return wrap(out1[0])
    end
    if C.ember_tensor_ndim(c) ~= 4 then ember._to_memory_format(name, t, fmt) end   -- raises naming the shape
    local s = C.ember_tensor_shape(c)
    check(C.ember_full(4, ffi.new("int64_t[4]", s[0], s[2], s[3], s[1]), v, dt, dev, out1))
    return wrap(out1[0]):permute({ 1, 4, 2, 3 })
  end
  function ember.zeros_like(t, opts) return like("zeros_like", t, 0, opts, 2) end
  function ember.ones_like(t, opts) return like("ones_like", t, 1, opts, 2) end
  function ember.empty_like(t, opts) return like("empty_like", t, 0, opts, 2) end
  function ember.full_like(t, value, opts)
    tensor_arg("full_like", t, 1)
    return like("full_like", t, fill_value("full_like", value, 2), opts, 3)
  end
  local function random_like(name, draw, t, opts)
    tensor_arg(name, t, 1)
    options(name, opts, 2, RANDOM)
    return draw(t:shape(), { dtype = opts and opts.dtype or t.dtype, device = opts and opts.device or t.device,
      generator = opts and opts.generator })
  end
  -- (not tail calls, as random_like's draw: an error names the function called, errors.lua)
  function ember.rand_like(t, opts) return (random_like("rand_like", ember.rand, t, opts)) end
  function ember.randn_like(t, opts) return (random_like("randn_like", ember.randn, t, opts)) end

  local function is_int(x) return type(x) == "number" and x == floor(x) end
  local function number_arg(op, v, pos)
    if type(v) ~= "number" then errors.argument(op, pos, "a number", v) end
    return v
  end

  -- ember.arange(n, opts?), ember.arange(a, b, opts?), ember.arange(a, b, step, opts?)
  function ember.arange(a, b, step, opts)
    local pos = 4
    if type(b) == "table" and not is_tensor(b) then
      if step ~= nil then errors.extra_argument("ember.arange", 3, step, { "n", "opts" }) end
      if opts ~= nil then errors.extra_argument("ember.arange", 4, opts, { "n", "opts" }) end
      opts, b, pos = b, nil, 2
    elseif type(step) == "table" and not is_tensor(step) then
      if opts ~= nil then errors.extra_argument("ember.arange", 4, opts, { "a", "b", "opts" }) end
      opts, step, pos = step, nil, 3
    end
    options("arange", opts, pos, BASIC)
    local start, stop
    if b == nil then
      if step ~= nil then errors.argument("arange", 2, "a number", b) end
      start, stop = 0, number_arg("arange", a, 1)
    else
      start, stop = number_arg("arange", a, 1), number_arg("arange", b, 2)
    end
    if step == nil then step = 1 else number_arg("arange", step, 3) end
    local dt = opts and opts.dtype and dtype_id("arange", opts.dtype)
      or ((is_int(start) and is_int(stop) and is_int(step)) and I64 or F32)
    check(C.ember_arange(start, stop, step, dt, device_id("arange", opts and opts.device), out1))
    return wrap(out1[0])
  end

  function ember.linspace(a, b, steps, opts)
    options("linspace", opts, 4, BASIC)
    number_arg("linspace", a, 1)
    number_arg("linspace", b, 2)
    if not is_int(steps) then
      fail("linspace", "expected an integer count of steps as argument 3, got " .. show(steps))
    end
    check(C.ember_linspace(a, b, steps, dtype_id("linspace", opts and opts.dtype),
      device_id("linspace", opts and opts.device), out1))
    return wrap(out1[0])
  end

  function ember.eye(n, m, opts)
    local pos = 3
    if type(m) == "table" and not is_tensor(m) then
      if opts ~= nil then errors.extra_argument("ember.eye", 3, opts, { "n", "opts" }) end
      opts, m, pos = m, nil, 2
    end
    options("eye", opts, pos, BASIC)
    if not is_int(n) or (m ~= nil and not is_int(m)) then
      fail("eye", ("expected integer sizes, got n = %s, m = %s"):format(show(n), show(m)))
    end
    check(C.ember_eye(n, m or n, dtype_id("eye", opts and opts.dtype),
      device_id("eye", opts and opts.device), out1))
    return wrap(out1[0])
  end

  -- ember.randint(low, high, shape, opts?), ember.randint(high, shape, opts?)
  function ember.randint(low, high, shape, opts)
    local pos = 4
    if type(high) == "table" and not is_tensor(high) then
      if opts ~= nil then errors.extra_argument("ember.randint", 4, opts, { "high", "shape", "opts" }) end
      low, high, shape, opts, pos = 0, low, high, shape, 3
    end
    options("randint", opts, pos, RANDOM)
    if not is_int(low) or not is_int(high) or math.abs(low) >= 2 ^ 63 or math.abs(high) >= 2 ^ 63 then
      fail("randint", ("expected finite integer bounds, got low=%s high=%s"):format(show(low), show(high)))
    end
    local nd, s = shape_arg("randint", shape)
    local dt = opts and opts.dtype and dtype_id("randint", opts.dtype) or I64
    check(C.ember_randint_gen(gen("randint", opts), low, high, nd, s, dt, device_id("randint", opts and opts.device), out1))
    return wrap(out1[0])
  end

  -- ember.randperm(n, opts?): a random permutation of 1..n (int64 unless
  -- opts.dtype): a Fisher-Yates shuffle driven by n - 1 uniforms of the generator
  function ember.randperm(n, opts)
    options("randperm", opts, 2, RANDOM)
    if not is_int(n) or n < 0 then fail("randperm", "expected a non-negative integer n, got " .. show(n)) end
    if n > 2 ^ 50 then fail("randperm", "n = " .. show(n) .. " is too large: past 2^50 elements") end
    local g = gen("randperm", opts)
    local dt = opts and opts.dtype and dtype_id("randperm", opts.dtype) or I64
    local dev = device_id("randperm", opts and opts.device)
    local ok, perm = pcall(ffi.new, "double[?]", math.max(n, 1))
    if not ok then fail("randperm", "out of memory for a permutation of n = " .. show(n)) end
    for i = 0, n - 1 do perm[i] = i + 1 end
    if n > 1 then
      local us = n - 1
      check(C.ember_rand_gen(g, 1, ffi.new("int64_t[1]", us), F64, device_id("randperm", nil), out1))
      local u = wrap(out1[0])
      local up = ffi.cast("const double *", u:data_ptr())
      for i = n - 1, 1, -1 do
        local j = floor(up[n - 1 - i] * (i + 1))
        perm[i], perm[j] = perm[j], perm[i]
      end
    end
    check(C.ember_from_data(perm, F64, 1, ffi.new("int64_t[1]", n), dt, dev, out1))
    return wrap(out1[0])
  end

  -- a generator's state set inside ember.jit.trace would not be set again by a run of the plan
  local function not_traced(what)
    if ember._jit_refuse then ember._jit_refuse(what, "a plan's random draws go on from the generator's state") end
  end

  function ember.manual_seed(seed)
    if not is_int(seed) or seed < 0 then fail("manual_seed", "expected a non-negative integer seed, got " .. show(seed)) end
    not_traced("manual_seed")
    C.ember_manual_seed(seed)
  end
  function ember.initial_seed() return tonumber(C.ember_initial_seed()) end

  -- The generator's whole state, the seed and the next unused counter block,
  -- as Lua numbers: setting a state got earlier repeats the draws made after
  -- it, and getting it draws nothing. A part past 2^53 that a Lua number
  -- cannot hold exactly (only a seed set from C can be one) is refused.
  -- (random.lua's Generator:get_state and set_state take these helpers from H.)
  local rng_state = ffi.new("uint64_t[2]")
  -- the state {seed, offset} of the uint64_t pair p as Lua numbers (op names the call)
  local function state_of(op, p)
    local function exact(v, what)
      local n = tonumber(v)
      if ffi.cast("uint64_t", n) ~= v then
        fail(op, ("the generator's %s %s is past what a Lua number holds exactly")
          :format(what, (tostring(v):gsub("ULL$", ""))))
      end
      return n
    end
    return { seed = exact(p[0], "seed"), offset = exact(p[1], "offset") }
  end
  function ember.get_rng_state()
    check(C.ember_get_rng_state(rng_state, rng_state + 1))
    return state_of("get_rng_state", rng_state)
  end
  local function uint64(v) return is_int(v) and v >= 0 and v < 2 ^ 64 end
  -- state's seed and offset, each an integer in [0, 2^64) (getter: the function whose result it should be)
  local function state_parts(op, getter, state)
    local seed, offset = type(state) == "table" and state.seed, type(state) == "table" and state.offset
    if not (uint64(seed) and uint64(offset)) then
      fail(op, ("expected what %s returned ({seed = n, offset = m}), got %s")
        :format(getter, type(state) ~= "table" and type(state)
          or ("seed = %s, offset = %s"):format(tostring(seed), tostring(offset))))
    end
    return seed, offset
  end
  H.state_of, H.state_parts = state_of, state_parts
  function ember.set_rng_state(state)
    local seed, offset = state_parts("set_rng_state", "get_rng_state", state)
    not_traced("set_rng_state")
    for k in pairs(state) do
      if k ~= "seed" and k ~= "offset" then
        fail("set_rng_state", ("unknown key %s = %s in the state: get_rng_state returns {seed = n, offset = m}")
          :format(type(k) == "string" and k or "[" .. show(k) .. "]", show(state[k])))
      end
    end
    C.ember_set_rng_state(seed, offset)
  end
end
