-- The Tensor class: a Lua table { _c = <ember_tensor *> } per C tensor, kept
-- unique through a weak table keyed by address, so a tensor reached twice
-- (x.grad, a callback argument, an in-place result) is the same object.
-- This file is the tensors' identity and lifetime, the conversion of
-- arguments, the accessors and the memory and runtime settings; the
-- constructors are factories.lua, the op bindings ops.lua, both built on the
-- helpers this one returns. Dims are 1-based here (negative counts from the
-- end) and 0-based in C.
local ffi = require("ffi")

return function(ember)
  local C = ember._C
  local ffi_string, ffi_new = ffi.string, ffi.new
  local type, tonumber, rawget, setmetatable = type, tonumber, rawget, setmetatable
  local floor = math.floor

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
  -- problem), so the binding paces the GC by them (docs/performance.md,
  -- "When a temporary's memory comes back"): each time the tensor bytes in
  -- use pass their highest level since the last sweep by a sixteenth of the
  -- budget, one incremental step of the Lua GC runs, its work in proportion
  -- to that growth, so that a cycle ends after about three quarters of a
  -- budget. The cycle clears the dead wrappers from the weak handles; the
  -- next wrap sees the sentinel cycle[1] gone and sweeps their slots, so
  -- dead tensors go back to the allocator's cache. Memory freed at once
  -- (t:free(), ember.tidy) lowers the level, so a loop that frees its
  -- temporaries runs no steps; below the sweep's, the level is measured
  -- from there. The budget is 24 MB, or twice the Lua heap
  -- when that is larger (a cycle costs time in proportion to the Lua heap);
  -- it does not grow with the live C bytes, so a large data set in memory
  -- does not let garbage pile up. A full collection runs as a backstop once
  -- the level passes a budget and a half without a cycle ending, when DTR
  -- asks, and out of memory under a limit. Every sweep measures the live
  -- bytes afresh: a limit set while a large temporary was still alive (a
  -- data set being converted) comes down as soon as it has died. While the
  -- program has stopped the GC (collectgarbage("stop")) no step runs, and
  -- the backstop's collection leaves it stopped.
  local GC_BUDGET = 24 * 2 ^ 20
  local STEPS = 16   -- steps per budget
  -- a cycle of LuaJIT's GC (stepmul 200) is about a quarter of the Lua
  -- heap in collectgarbage("step", kb)'s KB; a third ends it a little early
  local CYCLE_STEP_KB = 1 / 3
  local budget = GC_BUDGET   -- as measured at the last sweep
  local gc_base = 0   -- the tensor bytes in use after the last sweep
  local high = 0   -- the highest level (bytes in use above gc_base) a step has seen since
  local dtr_watch = false   -- under DTR, also when it asks (ember_dtr_gc_wanted: eviction cannot make room)
  local wrap_hook = nil   -- runs after each new wrapper while set (graph toolbox modes)
  function ember._set_wrap_hook(fn) wrap_hook = fn end
  -- ember.tidy (lua/ember/tidy.lua): while one runs, each new wrapper goes on
  -- its list, so that it can free what its function did not return; kept
  -- wrappers (ember.keep, and what the library stores: a cached scalar, an
  -- optimizer's state) are left alone by every tidy, and a .grad while it is
  -- one (grad_owner[g]: the tensor g was last made the .grad of). A .grad a
  -- tidy made and spared (tidy_grads) goes on the list of the tidy that
  -- clears or replaces it (zero_grad in the next step's tidy).
  local tidy_list = nil
  local kept = setmetatable({}, { __mode = "k" })
  local grad_owner = setmetatable({}, { __mode = "kv" })
  local tidy_grads = setmetatable({}, { __mode = "k" })
  ember._grad_owner, ember._tidy_grads = grad_owner, tidy_grads
  function ember._set_tidy_list(l)
    local prev = tidy_list
    tidy_list = l
    return prev
  end
  ember._kept = kept
  function ember._tidy_open() return tidy_list ~= nil end
  local function note_new(t)
    local n = tidy_list.n + 1
    tidy_list.n = n
    tidy_list[n] = t
  end

  -- gives slot i's reference back to C and the slot to the free list
  local function free_slot(i)
    local p = ptrs[i]
    handles[i], ptrs[i] = nil, nil
    C.ember_tensor_set_lua_slot(p, 0)
    release(p)
    n_free = n_free + 1
    free_slots[n_free] = i
  end

  -- what memory_stats() reports as gc_steps, gc_sweeps and gc_collections
  local gc_counts = { steps = 0, sweeps = 0, collections = 0 }

  -- releases the slots of the wrappers the last GC cycle found dead
  local function sweep()
    gc_counts.sweeps = gc_counts.sweeps + 1
    for i = 1, top do
      if ptrs[i] ~= nil and handles[i] == nil then free_slot(i) end
    end
    cycle[1] = {}
    budget = math.max(GC_BUDGET, collectgarbage("count") * 2048)
    gc_base, high = tonumber(C.ember_bytes_in_use()), 0
  end
  ember._sweep = sweep
  -- a full collection and a sweep, leaving a stopped GC stopped
  local function collect()
    gc_counts.collections = gc_counts.collections + 1
    local running = collectgarbage("isrunning")
    collectgarbage()
    if not running then collectgarbage("stop") end
    sweep()
  end
  -- out of memory under a memory limit: release what the GC collected first,
  -- so the caller's next attempt sees that memory
  local watchers = {}   -- what asks for the release above: "limit" (set_memory_limit), "dtr"
  errors.set_oom_handler(function()
    if next(watchers) then collect() end
  end)

  local function gc_pressure()
    local level = tonumber(C.ember_bytes_in_use()) - gc_base
    if level < 0 then   -- what lived at the sweep was freed at once since: measure from here
      gc_base, high, level = gc_base + level, 0, 0
    elseif level > high + budget / STEPS then
      local grown = level - high
      high = level
      if level > 1.5 * budget then
        collect()
      elseif collectgarbage("isrunning") then
        gc_counts.steps = gc_counts.steps + 1
        collectgarbage("step", math.max(1, collectgarbage("count") * CYCLE_STEP_KB * grown / budget))
        if cycle[1] == nil then sweep() end
      end
    end
    if dtr_watch and C.ember_dtr_gc_wanted() ~= 0 then collect() end
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
        if tidy_list then note_new(t) end
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
    if tidy_list then note_new(t) end
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
  -- A sliced step (ember.frame, lua/ember/frame.lua) pauses at yield
  -- points: after the elementwise ops, matmul, linear, a module's forward
  -- and each parameter's optimizer update. slicer.active is true only while
  -- a run is resumed, so elsewhere a point costs one table load.
  local slicer = { active = false, hold = 0 }
  ember._slicer = slicer
  function ember._slice_point()
    if slicer.active then slicer.point() end
  end
  -- the wrapper of a C tensor if Lua still holds one, else nil
  function ember._lookup(p)
    if p == nil then return nil end
    local slot = C.ember_tensor_lua_slot(p)
    return slot ~= 0 and handles[slot] or nil
  end

  -- Gives wrapper a the C tensor of wrapper b, and b a's: Module:to converts
  -- a parameter in place this way, so the Lua object that managers and
  -- optimizers hold stays the one the module has. b (usually a fresh
  -- conversion) then holds the old C tensor and is freed with it.
  function ember._swap(a, b)
    local pa, pb = rawget(a, "_c"), rawget(b, "_c")
    local sa, sb = C.ember_tensor_lua_slot(pa), C.ember_tensor_lua_slot(pb)
    if sa == 0 or sb == 0 or handles[sa] ~= a or handles[sb] ~= b then
      fail("_swap", "both tensors must be live wrappers")
    end
    ptrs[sa], ptrs[sb] = pb, pa
    C.ember_tensor_set_lua_slot(pb, sa)
    C.ember_tensor_set_lua_slot(pa, sb)
    rawset(a, "_c", pb)
    rawset(b, "_c", pa)
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

  -- Under the plain luajit binary, whose SIGINT handler raises "interrupted!"
  -- at any instruction (between an op's C call and wrap above, say), the
  -- ember_sigint module beside libember puts its own in its place: the same
  -- error, raised only in the user's code (cli/src/sigint_module.c,
  -- docs/hardening.md, "Ctrl-C"). Elsewhere it changes nothing.
  do
    local dir = type(ember._libpath) == "string" and ember._libpath:match("^(.*)/[^/]*$")
    local open = dir and package.loadlib(dir .. "/ember_sigint.so", "luaopen_ember_sigint")
    local ok, m = pcall(open or error)
    if ok and type(m) == "table" then
      ember._sigint = m
      m.take_over(errors.source_prefix)
    end
  end

  local function is_tensor(x) return type(x) == "table" and getmetatable(x) == Tensor end
  ember.is_tensor = is_tensor

  -- Releases the tensor now; the wrapper becomes unusable. Safe to call twice.
  function Tensor.free(t)
    local c = rawget(t, "_c")
    if c == nil then return end
    t._c = nil
    local slot = C.ember_tensor_lua_slot(c)
    if slot ~= 0 and handles[slot] == t then free_slot(slot) end
  end

  -- Whether a trace (ember.jit) or a saved-tensor hook (ember.autodiff.graph)
  -- watches the wrappers: then the library frees none of its temporaries.
  function ember._watched() return wrap_hook ~= nil or ember._jit_tracing() end
  -- Frees t, a temporary the library made that nobody else can see (what C
  -- holds, such as the tape's saved tensors, keeps its memory), so that it
  -- goes back to the allocator now rather than at the next GC.
  function ember._drop(t)
    if not ember._watched() then Tensor.free(t) end
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
    -- every whole number an int64 holds, so int64 + 2^60 stays int64 and exact
    -- (past 2^53 a Lua number is still whole; 1e20 is past int64: float64)
    local integral = v == floor(v) and v >= -2 ^ 63 and v < 2 ^ 63
    check(C.ember_scalar(v, integral and I64 or F64, 1, out1))
    t = wrap(out1[0])
    if scalar_cache_n < 512 and v == v then   -- NaN cannot be a table key
      scalar_cache[v] = t
      scalar_cache_n = scalar_cache_n + 1
      kept[t] = true
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
    if type(s) == "number" then s = { s, ... }
    elseif select("#", ...) > 0 then
      for i = 1, select("#", ...) do
        if select(i, ...) ~= nil then
          fail(op, "extra argument after the shape table: a shape is one table {2, 3} or sizes 2, 3")
        end
      end
    end
    if type(s) ~= "table" or is_tensor(s) then fail(op, "expected a shape table, got " .. type(s)) end
    local n = #s
    if n > 8 then fail(op, "at most 8 dims are supported, got " .. n) end
    for i = 1, n do
      local v = s[i]
      if type(v) ~= "number" or v ~= floor(v) or v < -1 or v > 2 ^ 53 then
        fail(op, "bad size " .. errors.show(v) .. " at position " .. i .. " of the shape")
      end
      shape_buf[i - 1] = v
    end
    return n, shape_buf
  end

  -- 1-based (or negative) dim -> 0-based; `extra` allows ndim + 1 (unsqueeze)
  local function dim0(op, d, ndim, extra)
    local n = ndim + (extra or 0)
    if type(d) ~= "number" or d ~= floor(d) then fail(op, "dim must be an integer, got " .. errors.show(d)) end
    local r = d < 0 and d + n or d - 1
    if r < 0 or r >= n or d == 0 then
      fail(op, "dim " .. d .. " out of range for a tensor of " .. ndim .. " dims")
    end
    return r
  end

  -- A Lua number becoming an element of an integer dtype (ember.tensor,
  -- masked_fill): NaN, an infinity or a value past the dtype's range raises
  -- naming the value and the dtype, as PyTorch's "value cannot be converted
  -- to type int32 without overflow" (the words of core/src/dtype.c's check,
  -- which full, fill_, the ranges and number operands go through); a
  -- fraction is truncated toward zero. bool takes any number (nonzero, NaN
  -- included, is true). Tensor-to-tensor casts (t:int()) do not come here.
  local INT_RANGE = { [I32] = { -2 ^ 31, 2 ^ 31 - 1 }, [I64] = { -2 ^ 63, 2 ^ 63 }, [6] = { 0, 255 } }
  local function check_int_value(op, v, dt)
    local r = INT_RANGE[dt]
    if r and not (v >= r[1] and (dt == I64 and v < r[2] or dt ~= I64 and v <= r[2])) then
      fail(op, ("value %s cannot be converted to %s without overflow")
        :format(v ~= v and "nan" or ("%.17g"):format(v), DTYPES[dt + 1]))
    end
  end

  local function opts_of(t)
    if type(t) == "table" and not is_tensor(t) and (t.dtype or t.device) then return t end
  end

  ---------------------------------------------------------------- accessors
  function Tensor.dim(t) return C.ember_tensor_ndim(tensor_arg("dim", t, 1)) end
  function Tensor.numel(t) return tonumber(C.ember_tensor_numel(tensor_arg("numel", t, 1))) end
  -- a tensor's shape or strides as a Lua list
  local function dims_of(op, t, read)
    local c = tensor_arg(op, t, 1)
    local n, s = C.ember_tensor_ndim(c), read(c)
    local r = {}
    for i = 1, n do r[i] = tonumber(s[i - 1]) end
    return r
  end
  function Tensor.shape(t) return dims_of("shape", t, C.ember_tensor_shape) end
  function Tensor.size(t, d)
    if d == nil then return t:shape() end
    local c = tensor_arg("size", t, 1)
    local n = C.ember_tensor_ndim(c)
    return tonumber(C.ember_tensor_shape(c)[dim0("size", d, n)])
  end
  function Tensor.stride(t) return dims_of("stride", t, C.ember_tensor_strides) end
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
    return Tensor._miss(t, k)
  end
  -- A name no tensor has: private ones ('_' first) read as nil, any other
  -- raises naming the closest methods, or what to write instead of a
  -- PyTorch idiom that cannot work here. Only reached on a miss, so the
  -- methods that exist pay nothing for it.
  local IDIOMS = {
    backward = "gradients come from a GradManager: write gm:backward(loss) (gm = ember.autodiff.GradManager(), "
      .. "gm:attach(params), the forward pass inside gm:record() ... gm:release())",
    requires_grad_ = "a GradManager tracks the tensors to differentiate: gm:attach(t)",
    requires_grad = "a GradManager tracks the tensors to differentiate: gm:attach(t)",
    numpy = "t:tolist() gives the values as nested Lua tables",
    len = "#t does not reach a tensor in LuaJIT: write t:size(1)",
    ndim = "t:dim() gives the number of dims",
    T = "t:t() transposes a 2-D tensor; t:permute(dims) any other",
  }
  local method_names
  function Tensor._miss(t, k)
    if k:byte(1) == 95 and not IDIOMS[k] then return nil end
    local suggest = require("ember.suggest")
    local hint = IDIOMS[k]
    if hint then
      hint = ": " .. hint
    else
      if not method_names then
        method_names = suggest.public_names(Tensor)
        for f in pairs(index_fields) do method_names[#method_names + 1] = f end
        for f in pairs(IDIOMS) do method_names[#method_names + 1] = f end
      end
      local near = suggest.closest(k, method_names)
      hint = suggest.phrase(near)
      for _, name in ipairs(near) do
        if IDIOMS[name] then hint = hint .. "; " .. name .. ": " .. IDIOMS[name] end
      end
    end
    errors.raise(("ember.Tensor: no method or field '%s'%s"):format(k, hint))
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
            :format(table.concat(t:shape(), ","), is_tensor(v) and "a freed tensor" or type(v)))
        end
        if c ~= nil and (not same_dims(c, g) or C.ember_tensor_dtype(c) ~= C.ember_tensor_dtype(g)
            or C.ember_tensor_device(c) ~= C.ember_tensor_device(g)) then
          errors.raise(("ember.grad: a gradient of shape {%s} (%s, %s) cannot be the .grad of a tensor of shape {%s} (%s, %s)")
            :format(table.concat(v:shape(), ","), v.dtype, v.device, table.concat(t:shape(), ","), t.dtype, t.device))
        end
      end
      local seen = ember._jit_grads   -- a trace notes every .grad set (jit.lua)
      if seen then seen[t] = true end
      if v ~= nil then grad_owner[v] = t end   -- a .grad outlives any tidy while it is one
      local old = rawget(t, "_grad")
      if tidy_list and old ~= nil and old ~= v and tidy_grads[old] then
        tidy_grads[old] = nil
        note_new(old)
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

  -- Both stats first release what the GC collected since the last sweep, so a
  -- tensor counts as freed right after collectgarbage().
  -- device "cuda" (or "cuda:0"): the CUDA backend's caching allocator
  function ember.memory_stats(device)
    if device ~= nil and device ~= "cpu" then
      if type(device) ~= "string" or not device:match("^cuda") then
        fail("memory_stats", "expected nil, \"cpu\" or \"cuda\", got " .. tostring(device))
      end
      if cycle[1] == nil then sweep() end
      return require("ember.cuda").memory_stats()
    end
    if cycle[1] == nil then sweep() end
    local s = ffi_new("ember_memory_stats_t")
    C.ember_memory_stats(s)
    return { live_tensors = tonumber(s.live_tensors), bytes_in_use = tonumber(s.bytes_in_use),
      peak_bytes = tonumber(s.peak_bytes), bytes_cached = tonumber(s.bytes_cached),
      limit = s.limit > 0 and tonumber(s.limit) or nil, cache_hits = tonumber(s.cache_hits),
      cache_misses = tonumber(s.cache_misses), cache_evictions = tonumber(s.cache_evictions),
      cache_limit = tonumber(s.cache_limit), huge_bytes = tonumber(s.huge_bytes), gc_steps = gc_counts.steps, gc_sweeps = gc_counts.sweeps,
      gc_collections = gc_counts.collections }
  end
  -- a ceiling on the bytes tensors hold (nil or 0: none); past it an op raises
  -- naming itself, the bytes and the limit, and everything stays usable
  function ember.set_memory_limit(bytes)
    if bytes ~= nil and (type(bytes) ~= "number" or not (bytes >= 0) or bytes ~= floor(bytes) or bytes >= 2 ^ 63) then
      fail("set_memory_limit", "expected a whole number of bytes >= 0 or nil, got " .. errors.show(bytes))
    end
    check(C.ember_set_memory_limit(bytes or 0))
    ember._memory_watch("limit", (bytes or 0) > 0)
  end
  -- under a memory limit or a DTR budget, what the GC collected is released
  -- before each op allocates; under DTR the GC also runs when DTR asks
  -- (eviction could not make room, or what it cannot free grew by an eighth
  -- of the room the budget leaves), not every so many bytes: evicting is cheaper than a
  -- full collection, and dead tensors with recipes are evicted like others
  function ember._memory_watch(who, on)
    watchers[who] = on or nil
    limited = next(watchers) ~= nil
    dtr_watch = watchers.dtr ~= nil
  end
  function ember.reset_peak_memory() C.ember_reset_peak() end
  function ember.empty_cache() C.ember_empty_cache() end
  -- EMBER_NUM_THREADS: a whole number of threads for every job, or "auto"
  local env_threads = os.getenv("EMBER_NUM_THREADS")
  if env_threads and env_threads ~= "auto" and not env_threads:match("^[1-9]%d*$") then
    error(("ember: EMBER_NUM_THREADS must be a whole number >= 1 or \"auto\", got %q"):format(env_threads), 0)
  end
  -- EMBER_HUGEPAGES: 0 keeps large blocks on 4 KiB pages, 1 (the default) puts them on huge pages
  local env_huge = os.getenv("EMBER_HUGEPAGES")
  if env_huge and env_huge ~= "0" and env_huge ~= "1" then
    error(("ember: EMBER_HUGEPAGES must be 0 or 1, got %q"):format(env_huge), 0)
  end
  -- n threads for every job, or "auto": the default policy (docs/frame_loop.md, "Threads")
  function ember.set_num_threads(n)
    if n == "auto" then return C.ember_set_num_threads_auto() end
    local max = C.ember_max_threads()
    if type(n) ~= "number" or n ~= floor(n) or not (n >= 1 and n <= max) then
      fail("set_num_threads", ("expected a whole number of threads from 1 to %d or \"auto\", got %s")
        :format(max, type(n) == "string" and ("%q"):format(n) or tostring(n)))
    end
    C.ember_set_num_threads(n)
  end
  function ember.thread_stats()
    local s = ffi.new("ember_thread_stats_t")
    C.ember_thread_stats(s)
    return { policy = s.auto_policy ~= 0 and "auto" or "fixed", threads = s.threads, max_threads = s.max_threads,
      spare = s.spare, online_cpus = s.online_cpus, jobs_parallel = tonumber(s.jobs_parallel),
      jobs_inline_small = tonumber(s.jobs_inline_small), jobs_inline_busy = tonumber(s.jobs_inline_busy),
      late_jobs = tonumber(s.late_jobs), load_samples = tonumber(s.load_samples),
      inline_seconds_left = s.inline_seconds_left, backoff_seconds = s.backoff_seconds,
      arm = s.winner == 1 and "team" or "sampled", trial = s.trial ~= 0, kinds = s.kinds,
      jobs_sampled = tonumber(s.jobs_sampled), jobs_team = tonumber(s.jobs_team), trials = tonumber(s.trials),
      trials_won = tonumber(s.trials_won), trials_stopped = tonumber(s.trials_stopped),
      team_cuts = tonumber(s.team_cuts), last_trial_ratio = s.last_trial_ratio,
      trials_postponed = tonumber(s.trials_postponed), crowded = s.crowded ~= 0 }
  end
  -- bit-identical results for any thread count (docs/design.md, "Determinism")
  function ember.set_deterministic(on) C.ember_set_deterministic(errors.boolean("set_deterministic", "on", on) and 1 or 0) end
  function ember.is_deterministic() return C.ember_is_deterministic() ~= 0 end
  -- seconds on a monotonic clock (what run:step budgets are measured on)
  function ember.clock() return C.ember_clock() end
  function ember.get_num_threads() return C.ember_num_threads() end
  function ember.version() return ffi_string(C.ember_version()) end
  function ember.blas_info() return ffi_string(C.ember_blas_info()) end
  -- oneDNN for float32 convolutions, when built with it (docs/nn.md, "Kernels")
  function ember.dnnl_info() return ffi_string(C.ember_dnnl_info()) end
  function ember.set_dnnl_enabled(on) C.ember_set_dnnl_enabled(errors.boolean("set_dnnl_enabled", "on", on) and 1 or 0) end
  function ember.dnnl_enabled() return C.ember_dnnl_enabled() ~= 0 end
  -- and for the float32 matrix products where it beats OpenBLAS (docs/nn.md, "Matrix products")
  function ember.set_dnnl_matmul_enabled(on) C.ember_set_dnnl_matmul_enabled(errors.boolean("set_dnnl_matmul_enabled", "on", on) and 1 or 0) end
  function ember.dnnl_matmul_enabled() return C.ember_dnnl_matmul_enabled() ~= 0 end
  -- ember's direct convolution kernels (depthwise; docs/nn.md, "Kernels")
  function ember.set_conv_kernels_enabled(on)
    C.ember_set_conv_kernels_enabled(errors.boolean("set_conv_kernels_enabled", "on", on) and 1 or 0)
  end
  function ember.conv_kernels_enabled() return C.ember_conv_kernels_enabled() ~= 0 end

  Tensor.__len = function(t) return t:dim() > 0 and t:size(1) or 0 end
  Tensor.__concat = function(a, b) return tostring(a) .. tostring(b) end

  -- what the constructors (factories.lua) and the op bindings (ops.lua) are built on
  return {
    Tensor = Tensor, check = check, fail = fail, wrap = wrap, ptr = ptr, tensor_arg = tensor_arg,
    shape_arg = shape_arg, dim0 = dim0, dtype_id = dtype_id, device_id = device_id, opts_of = opts_of,
    check_int_value = check_int_value, INT_RANGE = INT_RANGE,
    is_tensor = is_tensor, out1 = out1, out2 = out2, shape_buf = shape_buf, keep_alive = keep_alive,
    DTYPES = DTYPES, F32 = F32, F64 = F64, I32 = I32, I64 = I64, BOOL = BOOL,
  }
end
