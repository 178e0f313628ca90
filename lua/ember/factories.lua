-- Constructors: ember.tensor from nested tables, the shape factories (empty,
-- zeros, ones, rand, randn, full and their _like forms), arange, linspace,
-- eye, randint, and the random seed. Built on the Tensor core (tensor.lua).
local ffi = require("ffi")

return function(ember, H)
  local C = ember._C
  local check, fail, wrap, tensor_arg, shape_arg, dtype_id = H.check, H.fail, H.wrap, H.tensor_arg, H.shape_arg, H.dtype_id
  local device_id, opts_of, is_tensor, out1, shape_buf, F32 = H.device_id, H.opts_of, H.is_tensor, H.out1, H.shape_buf, H.F32
  local F64, I64, BOOL = H.F64, H.I64, H.BOOL
  local check_int_value, INT_RANGE = H.check_int_value, H.INT_RANGE
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

  function ember.tensor(data, opts)
    if is_tensor(data) then return data:clone() end
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

  -- factories take an optional last {dtype =, device =} table (the random
  -- ones also {generator =}, an ember.Generator: see random.lua)
  local function split_opts(random, ...)
    local n = select("#", ...)
    local last = n > 0 and select(n, ...) or nil
    if n > 0 and (opts_of(last) or random and type(last) == "table" and not is_tensor(last)
        and last.generator ~= nil) then
      return last, n - 1
    end
    return nil, n
  end

  -- the C generator of a random factory's options, checking their keys
  local RANDOM_OPTS = { dtype = true, device = true }
  local function gen(name, opts) return H.gen_of(name, opts, RANDOM_OPTS) end

  local function shape_factory(name, fn, random)
    ember[name] = function(...)
      local opts, n = split_opts(random, ...)
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
      return fn(nd, s, dt, dev, random and gen(name, opts))
    end
  end
  shape_factory("empty", function(nd, s, dt, dev) check(C.ember_empty(nd, s, dt, dev, out1)); return wrap(out1[0]) end)
  shape_factory("zeros", function(nd, s, dt, dev) check(C.ember_full(nd, s, 0, dt, dev, out1)); return wrap(out1[0]) end)
  shape_factory("ones", function(nd, s, dt, dev) check(C.ember_full(nd, s, 1, dt, dev, out1)); return wrap(out1[0]) end)
  shape_factory("rand", function(nd, s, dt, dev, g)
    check(C.ember_rand_gen(g, nd, s, dt, dev, out1)); return wrap(out1[0])
  end, true)
  shape_factory("randn", function(nd, s, dt, dev, g)
    check(C.ember_randn_gen(g, nd, s, dt, dev, out1)); return wrap(out1[0])
  end, true)

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
    gen("rand_like", opts)
    return ember.rand(t:shape(), { dtype = opts and opts.dtype or t.dtype, device = opts and opts.device or t.device,
      generator = opts and opts.generator })
  end
  function ember.randn_like(t, opts)
    gen("randn_like", opts)
    return ember.randn(t:shape(), { dtype = opts and opts.dtype or t.dtype, device = opts and opts.device or t.device,
      generator = opts and opts.generator })
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
    check(C.ember_randint_gen(gen("randint", opts), low, high, nd, s, dt, device_id("randint", opts and opts.device), out1))
    return wrap(out1[0])
  end

  -- ember.randperm(n, opts?): a random permutation of 1..n (int64 unless
  -- opts.dtype): a Fisher-Yates shuffle driven by n - 1 uniforms of the generator
  function ember.randperm(n, opts)
    if not is_int(n) or n < 0 or n > 2 ^ 53 then
      fail("randperm", "expected a non-negative integer n, got " .. tostring(n))
    end
    local g = gen("randperm", opts)
    local dt = opts and opts.dtype and dtype_id("randperm", opts.dtype) or I64
    local dev = device_id("randperm", opts and opts.device)
    local perm = ffi.new("double[?]", math.max(n, 1))
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

  function ember.manual_seed(seed)
    if not is_int(seed) or seed < 0 then fail("manual_seed", "expected a non-negative integer seed") end
    C.ember_manual_seed(seed)
  end
  function ember.initial_seed() return tonumber(C.ember_initial_seed()) end

  -- The generator's whole state, the seed and the next unused counter block,
  -- as Lua numbers: setting a state got earlier repeats the draws made after
  -- it, and getting it draws nothing. A part past 2^53 that a Lua number
  -- cannot hold exactly (only a seed set from C can be one) is refused.
  local rng_state = ffi.new("uint64_t[2]")
  local function exact(v, what)
    local n = tonumber(v)
    if ffi.cast("uint64_t", n) ~= v then
      fail("get_rng_state", ("the generator's %s %s is past what a Lua number holds exactly")
        :format(what, (tostring(v):gsub("ULL$", ""))))
    end
    return n
  end
  function ember.get_rng_state()
    check(C.ember_get_rng_state(rng_state, rng_state + 1))
    return { seed = exact(rng_state[0], "seed"), offset = exact(rng_state[1], "offset") }
  end
  local function uint64(v) return is_int(v) and v >= 0 and v < 2 ^ 64 end
  function ember.set_rng_state(state)
    local seed, offset = type(state) == "table" and state.seed, type(state) == "table" and state.offset
    if not (uint64(seed) and uint64(offset)) then
      fail("set_rng_state", ("expected what get_rng_state returned ({seed = n, offset = m}), got %s")
        :format(type(state) ~= "table" and type(state)
          or ("seed = %s, offset = %s"):format(tostring(seed), tostring(offset))))
    end
    C.ember_set_rng_state(seed, offset)
  end
end
