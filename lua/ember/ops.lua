-- The op bindings: Tensor methods and ember.<op> functions over the C ops.
-- The elementwise ones come from ops.def's list (ember/optable.lua, written at
-- build time) and are generated from source text, so each calls C.ember_<op>
-- by a constant name (what the JIT compiles best). Dims are 1-based here and
-- 0-based in C; index tensors likewise.
local ffi = require("ffi")

return function(ember, H)
  local C = ember._C
  local Tensor, check, fail, wrap, ptr, tensor_arg = H.Tensor, H.check, H.fail, H.wrap, H.ptr, H.tensor_arg
  local shape_arg, dim0, dtype_id, device_id, is_tensor, out1 = H.shape_arg, H.dim0, H.dtype_id, H.device_id, H.is_tensor, H.out1
  local out2, DTYPES, I32, I64 = H.out2, H.DTYPES, H.I32, H.I64
  local ffi_new = ffi.new
  local floor, huge = math.floor, math.huge
  local amp = require("ember.amp")   -- autocast: amp._dtype is set inside a scope
  local errors = require("ember.errors")
  local function is_int(x) return type(x) == "number" and x == floor(x) end
  -- a boolean argument (nil is false) as the C API's 0 or 1; anything else raises naming it
  local function flag(op, what, v) return errors.boolean(op, what, v) and 1 or 0 end

  ---------------------------------------------------------------- elementwise ops
  -- Generated from source text so each wrapper calls C.ember_<op> by a
  -- constant name (what the JIT compiles best).
  local function gen(src, env)
    local f = assert(load(src, "=ember/ops.lua(gen)"))
    setfenv(f, env)
    return f()
  end
  local slicer = ember._slicer   -- yield points of a sliced step (ember.frame)
  local genv = { C = C, ptr = ptr, out1 = out1, wrap = wrap, check = check, tensor_arg = tensor_arg, slicer = slicer }

  -- the wrapper of op that returns a new tensor: ARGS its parameters, INPUTS
  -- what it passes C.ember_<op> before the output
  local function out_of_place(op, args, inputs)
    local f = gen(([[
      local C, ptr, tensor_arg, out1, wrap, check, slicer = C, ptr, tensor_arg, out1, wrap, check, slicer
      return function(ARGS)
        local rc = C.ember_OP(INPUTS, out1)
        if rc < 0 then check(rc) end
        local r = wrap(out1[0])
        if slicer.active then slicer.point() end
        return r
      end]]):gsub("ARGS", args):gsub("INPUTS", inputs):gsub("OP", op.name), genv)
    Tensor[op.name], ember[op.name] = f, f
  end

  -- BINARY and UNARY lines of ops.def, written to ember/optable.lua at build time
  for _, op in ipairs(require("ember.optable")) do
    if op.lua == "binary" then
      out_of_place(op, "a, b", 'ptr("OP", a, 1), ptr("OP", b, 2)')
      if op.inplace then
        Tensor[op.name .. "_"] = gen(([[
          local C, ptr, tensor_arg, check, slicer = C, ptr, tensor_arg, check, slicer
          return function(a, b)
            local rc = C.ember_OP_(tensor_arg("OP_", a, 1), ptr("OP_", b, 2))
            if rc < 0 then check(rc) end
            if slicer.active then slicer.point() end
            return a
          end]]):gsub("OP", op.name), genv)
      end
    elseif op.lua == "unary" then
      out_of_place(op, "a", 'tensor_arg("OP", a, 1)')
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

  local GELU_OPTIONS = { approximate = true }
  function Tensor.gelu(a, opts)
    local mode = errors.options("gelu", opts, GELU_OPTIONS).approximate
    if mode ~= nil and mode ~= "none" and mode ~= "tanh" then
      fail("gelu", "approximate must be \"none\" or \"tanh\", got " .. tostring(mode))
    end
    local approx = mode == "tanh"
    check(C.ember_gelu(tensor_arg("gelu", a, 1), approx and 1 or 0, out1))
    return wrap(out1[0])
  end
  ember.gelu = Tensor.gelu

  -- a bound of clamp: nil, a number or a tensor
  local function bound(op, what, v)
    if v ~= nil and type(v) ~= "number" and not is_tensor(v) then
      fail(op, what .. " must be a number or a tensor, got " .. errors.show(v))
    end
  end
  function Tensor.clamp(a, lo, hi)
    bound("clamp", "min", lo)
    bound("clamp", "max", hi)
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
    bound("clamp_", "min", lo)
    bound("clamp_", "max", hi)
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
  -- x:contiguous() or x:contiguous({memory_format = "channels_last"}) (ember._to_memory_format)
  local CONTIGUOUS_OPTIONS = { memory_format = true }
  function Tensor.contiguous(a, opts)
    local c = tensor_arg("contiguous", a, 1)
    if opts == nil then
      check(C.ember_contiguous(c, out1))
      return wrap(out1[0])
    end
    local fmt = ember._memory_format("ember.contiguous", errors.options("contiguous", opts, CONTIGUOUS_OPTIONS)
      .memory_format) or "contiguous_format"
    if fmt == "preserve_format" then
      fail("contiguous", "memory_format 'preserve_format' is not a layout contiguous can give: use "
        .. "'contiguous_format' or 'channels_last' (x:clone() copies)")
    end
    if fmt == "channels_last" then return (ember._to_memory_format("contiguous", a, fmt)) end
    check(C.ember_contiguous(c, out1))
    return wrap(out1[0])
  end
  function Tensor.detach(a)
    check(C.ember_detach(tensor_arg("detach", a, 1), out1))
    return wrap(out1[0])
  end
  ember.clone, ember.contiguous, ember.detach = Tensor.clone, Tensor.contiguous, Tensor.detach
  function Tensor.pin_memory(a)
    check(C.ember_pin_memory(tensor_arg("pin_memory", a, 1), out1))
    return wrap(out1[0])
  end
  function Tensor.is_pinned(a) return C.ember_is_pinned(tensor_arg("is_pinned", a, 1)) ~= 0 end

  -- t:to("float64"), t:to("cuda"), t:to({dtype =, device =}), t:to(other_tensor);
  -- t:to("cuda", {non_blocking = true}) or t:to({device =, non_blocking = true})
  -- PyTorch's memory formats: "preserve_format" (keep the layout),
  -- "contiguous_format" (row-major) and "channels_last" (a 4-D tensor (N, C,
  -- H, W) with the strides of a row-major (N, H, W, C): an ordinary strided
  -- tensor, which convolutions, batch norm and pooling take and give without
  -- reordering, docs/nn.md). Returns the format's name, nil for nil.
  local MEMORY_FORMATS = { preserve_format = true, contiguous_format = true, channels_last = true }
  function ember._memory_format(op, v)
    if v == nil then return nil end
    if MEMORY_FORMATS[v] then return v end
    if v == "channels_last_3d" then
      errors.raise(("%s: memory_format 'channels_last_3d' is not supported: 5-D tensors are kept in the "
        .. "contiguous (NCDHW) layout"):format(op))
    end
    errors.raise(("%s: unknown memory_format %s: expected 'preserve_format', 'contiguous_format' or "
      .. "'channels_last'"):format(op, type(v) == "string" and ("'" .. v .. "'") or tostring(v)))
  end
  -- whether t's strides are those of fmt (size-1 dims skipped, as PyTorch's
  -- is_contiguous(memory_format)): channels_last is 4-D with dims 2, 4, 3, 1
  -- dense in that order
  local CL_ORDER = { 2, 4, 3, 1 }
  local function in_format(t, fmt)
    if fmt == "contiguous_format" then return C.ember_tensor_is_contiguous(t._c) ~= 0 end
    if t:dim() ~= 4 then return false end
    local shape, stride, expect = t:shape(), t:stride(), 1
    for _, d in ipairs(CL_ORDER) do
      if shape[d] ~= 1 then
        if stride[d] ~= expect then return false end
        expect = expect * shape[d]
      end
    end
    return true
  end
  ember._in_memory_format = in_format
  -- t in format fmt ("contiguous_format" or "channels_last"): t itself where
  -- it is, else a copy, recorded (gradients flow through it)
  function ember._to_memory_format(op, t, fmt)
    if in_format(t, fmt) then return t end
    if fmt == "contiguous_format" then return t:contiguous() end
    if t:dim() ~= 4 then
      fail(op, ("memory_format 'channels_last' needs a 4-D tensor (N, C, H, W), got shape %s"):format(errors.shape(t)))
    end
    return t:permute({ 1, 3, 4, 2 }):contiguous():permute({ 1, 4, 2, 3 })
  end
  -- x:is_contiguous() or x:is_contiguous({memory_format = "channels_last"})
  local IS_CONTIGUOUS_OPTIONS = { memory_format = true }
  function Tensor.is_contiguous(t, opts)
    local c = tensor_arg("is_contiguous", t, 1)
    if opts == nil then return C.ember_tensor_is_contiguous(c) ~= 0 end
    local fmt = ember._memory_format("ember.is_contiguous",
      errors.options("is_contiguous", opts, IS_CONTIGUOUS_OPTIONS).memory_format) or "contiguous_format"
    if fmt == "preserve_format" then
      fail("is_contiguous", "memory_format 'preserve_format' is not a layout: use 'contiguous_format' or "
        .. "'channels_last'")
    end
    return in_format(t, fmt)
  end
  local TO_OPTIONS = { dtype = true, device = true, non_blocking = true, memory_format = true }
  local function to_options(t, keys)
    errors.options("to", t, keys)
    if t.non_blocking ~= nil and type(t.non_blocking) ~= "boolean" then
      fail("to", "non_blocking must be a boolean, got " .. tostring(t.non_blocking))
    end
    return ember._memory_format("ember.to", t.memory_format)
  end
  -- the format to's result must have (nil: none asked)
  local function apply_format(r, fmt)
    if fmt == nil or fmt == "preserve_format" then return r end
    return (ember._to_memory_format("to", r, fmt))   -- not a tail call: the error names Tensor:to
  end
  -- a value past the two raises through init.lua's arity wrapper, naming these two
  function Tensor.to(a, dtype_or_device, device_or_opts)
    local x, y = dtype_or_device, device_or_opts
    local c = tensor_arg("to", a, 1)
    local dt, dev, non_blocking, fmt
    if type(y) == "table" and not is_tensor(y) then
      fmt = to_options(y, { non_blocking = true, memory_format = true })
      y, non_blocking = nil, y.non_blocking
    end
    if is_tensor(x) then
      local xc = tensor_arg("to", x, 2)
      dt, dev = C.ember_tensor_dtype(xc), C.ember_tensor_device(xc)
    elseif type(x) == "table" then
      if y ~= nil then fail("to", "argument 3 (" .. tostring(y) .. ") comes after the options table") end
      fmt = to_options(x, TO_OPTIONS)
      dt = x.dtype and dtype_id("to", x.dtype)
      dev = x.device and device_id("to", x.device)
      non_blocking = x.non_blocking
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
      check((non_blocking and C.ember_to_device_async or C.ember_to_device)(c, dev, out1))
      r = wrap(out1[0])
    end
    if dt and dt ~= C.ember_tensor_dtype(r._c) then
      check(C.ember_to_dtype(r._c, dt, out1))
      r = wrap(out1[0])
    end
    return (apply_format(r, fmt))
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
    if type(dim) ~= "table" then fail(op, "dim must be a number or a list, got " .. errors.show(dim)) end
    for k in pairs(dim) do   -- x:sum({dim = 2}) would reduce every dim
      if type(k) ~= "number" then
        fail(op, ("dim must be a number or a list of dims, got a table with key %s"):format(errors.show(k)))
      end
    end
    for i = 1, #dim do dims_buf[i - 1] = dim0(op, dim[i], nd) end
    return #dim, dims_buf
  end

  function Tensor.sum(a, dim, keepdim)
    if amp._dtype then a = amp._up(a) end
    local c = tensor_arg("sum", a, 1)
    local n, d = dims_arg("sum", c, dim)
    check(C.ember_sum(c, n, d, flag("sum", "keepdim", keepdim), out1))
    return wrap(out1[0])
  end
  function Tensor.mean(a, dim, keepdim)
    local c = tensor_arg("mean", a, 1)
    local n, d = dims_arg("mean", c, dim)
    check(C.ember_mean(c, n, d, flag("mean", "keepdim", keepdim), out1))
    return wrap(out1[0])
  end
  function Tensor.var(a, dim, keepdim, unbiased)
    local c = tensor_arg("var", a, 1)
    local n, d = dims_arg("var", c, dim)
    local corrected = unbiased == nil and 1 or flag("var", "unbiased", unbiased)
    check(C.ember_var(c, n, d, flag("var", "keepdim", keepdim), corrected, out1))
    return wrap(out1[0])
  end
  function Tensor.std(a, dim, keepdim, unbiased) return a:var(dim, keepdim, unbiased):sqrt() end
  function Tensor.norm(a, p, dim, keepdim)
    if amp._dtype then a = amp._up(a) end
    local c = tensor_arg("norm", a, 1)
    if p == "fro" or p == nil then p = 2 end
    if p == "inf" then p = huge end
    if type(p) ~= "number" then fail("norm", "p must be a number, 'fro' or 'inf', got " .. errors.show(p)) end
    local n, d = dims_arg("norm", c, dim)
    check(C.ember_norm(c, p, n, d, flag("norm", "keepdim", keepdim), out1))
    return wrap(out1[0])
  end
  function Tensor.logsumexp(a, dim, keepdim)
    if amp._dtype then a = amp._up(a) end
    local c = tensor_arg("logsumexp", a, 1)
    if dim == nil then fail("logsumexp", "dim is required") end
    local d = dim0("logsumexp", dim, C.ember_tensor_ndim(c))
    check(C.ember_logsumexp(c, d, flag("logsumexp", "keepdim", keepdim), out1))
    return wrap(out1[0])
  end
  local function minmax(op, all_name, dim_name)
    return function(a, dim, keepdim)
      local c = tensor_arg(op, a, 1)
      if dim == nil then
        check(C[all_name](c, out1))
        return wrap(out1[0])
      end
      check(C[dim_name](c, dim0(op, dim, C.ember_tensor_ndim(c)), flag(op, "keepdim", keepdim), out2, out2 + 1))
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
      check(C[fname](c, d, flag(op, "keepdim", keepdim), out1))
      return wrap(out1[0]) + 1
    end
  end
  Tensor.argmax, Tensor.argmin = argm("argmax", "ember_argmax"), argm("argmin", "ember_argmin")
  -- softmax and log_softmax along dim (default the last), in float32 under autocast
  local function softmax_like(op)
    local fn = C["ember_" .. op]
    return function(a, dim)
      if amp._dtype then a = amp._up(a) end
      local c = tensor_arg(op, a, 1)
      check(fn(c, dim0(op, dim or -1, C.ember_tensor_ndim(c)), out1))
      return wrap(out1[0])
    end
  end
  Tensor.softmax, Tensor.log_softmax = softmax_like("softmax"), softmax_like("log_softmax")
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
    if amp._dtype then a, b = amp._down(a, b) end
    check(C.ember_matmul(tensor_arg("matmul", a, 1), tensor_arg("matmul", b, 2), out1))
    local r = wrap(out1[0])
    if slicer.active then slicer.point() end
    return r
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
  -- reshape, view and expand: a(...) to the shape given as sizes or a list
  local function to_shape(op)
    local fn = C["ember_" .. op]
    return function(a, ...)
      local nd, s = shape_arg(op, ...)
      check(fn(tensor_arg(op, a, 1), nd, s, out1))
      return wrap(out1[0])
    end
  end
  Tensor.reshape, Tensor.view, Tensor.expand = to_shape("reshape"), to_shape("view"), to_shape("expand")
  -- (not tail calls: an error names the op called, errors.lua)
  function Tensor.view_as(a, b) return (a:view(b:shape())) end
  function Tensor.reshape_as(a, b) return (a:reshape(b:shape())) end
  function Tensor.expand_as(a, b) return (a:expand(b:shape())) end
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
    if type(dims) ~= "table" then fail("permute", "expected a list of dims, got " .. errors.show(dims)) end
    local nd = C.ember_tensor_ndim(c)
    local given = "{" .. table.concat(dims, ", ") .. "}"
    if #dims ~= nd then
      fail("permute", ("dims %s: expected %d dims for a tensor of %d dims, got %d"):format(given, nd, nd, #dims))
    end
    local seen = {}
    for i = 1, nd do
      local d = dim0("permute", dims[i], nd)
      if seen[d] then   -- 1-based, as the user wrote them (the C check would say a 0-based dim)
        fail("permute", ("dims %s are not a permutation of 1..%d: dim %d appears twice"):format(given, nd, d + 1))
      end
      seen[d], perm_buf[i - 1] = true, d
    end
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

  -- index tensors are 1-based int64/int32 in Lua; C reads them as they are
  -- (the _base entry points, base 1)
  local function index_arg(op, idx)
    if not is_tensor(idx) then fail(op, "expected an index tensor, got " .. type(idx)) end
    local c = tensor_arg(op, idx, 2)
    local dt = C.ember_tensor_dtype(c)
    if dt ~= I64 and dt ~= I32 then
      fail(op, "index tensor must be int64 or int32, got " .. DTYPES[dt + 1])
    end
    return c
  end
  -- t:index_select(d, idx) and t:gather(d, idx): (a, dim, 1-based index) -> C
  local function by_index(op, fname)
    return function(a, d, idx)
      local c = tensor_arg(op, a, 1)
      local d0 = dim0(op, d, C.ember_tensor_ndim(c))
      check(C[fname](c, d0, index_arg(op, idx), 1, out1))
      return wrap(out1[0])
    end
  end
  Tensor.index_select = by_index("index_select", "ember_index_select_base")
  Tensor.gather = by_index("gather", "ember_gather_base")
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
    check(C.ember_index_add_base(nd, index_shape, d0, index_arg(op, idx), 1, sc, out1))
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
    -- a number an integer tensor cannot hold raises (NaN, 2^40 into int32), as PyTorch
    if type(v) == "number" then H.check_int_value(op, v, C.ember_tensor_dtype(a._c)) end
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
end
