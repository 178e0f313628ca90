-- ember.nn: modules in the Torch7/PyTorch style.
--
--   local Net = nn.Module:extend("Net")
--   function Net:init(n) self.fc = nn.Linear(n, 10) end
--   function Net:forward(x) return self.fc(x) end
--   local net = Net(784)
--
-- A module records the tensors and modules assigned to it, in assignment
-- order: floating point tensors become parameters (unless registered as
-- buffers with self:register_buffer), modules become children; a tensor of
-- another dtype (a bool mask, int64 indices) stays a plain field.
-- Parameters, state_dict keys and children all follow that order;
-- reassigning a name keeps its place. The list containers (Sequential,
-- ModuleList, ParameterList) keep their entries in the instance's own array
-- part, so seq[i], #seq and ipairs(seq) are Lua's. Modules keep no per-call
-- state, so one module may appear twice in a graph.
local ember = require("ember")
local F = require("ember.nn.functional")

local errors = require("ember.errors")
local A = require("ember.nn.args")

local nn = { functional = F }
local C = ember._C
local is_tensor = ember.is_tensor
local shape_str = errors.shape

---------------------------------------------------------------- Module
local Module = {}
Module.__name = "Module"
nn.Module = Module

-- per-instance bookkeeping lives in fields the user never assigns
local function fields(self) return rawget(self, "_fields") end

local FLOATING = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
local function is_module(v) return type(v) == "table" and getmetatable(v) ~= nil and getmetatable(v).__module end

-- The list containers: the class's _list_kind ("module" or "param") says what
-- the instance's array part holds. A number past the ends raises; a negative
-- one counts from the end; "2" is entry 2 (state_dict names).
local function list_kind(self) return getmetatable(self).__class._list_kind end

local function list_pos(self, k, op)
  local n, i = #self, k
  if type(k) == "string" then i = tonumber(k:match("^%-?%d+$")) end
  if type(i) ~= "number" or i ~= math.floor(i) then return nil end
  if i < 0 then i = n + 1 + i end
  if i < 1 or i > n + (op == "write" and 1 or 0) then
    errors.raise(("ember.nn.%s: index %s is out of range: it has %d entries (1..%d, or -%d..-1 from the end)")
      :format(getmetatable(self).__class.__name, tostring(k), n, n, n))
  end
  return i
end

-- what may be an entry of a list container of kind lk: nil, or what v must be
local function list_entry_error(lk, v)
  if lk == "module" and not is_module(v) then return "a module" end
  if lk == "param" and not (is_tensor(v) and FLOATING[v.dtype]) then return "a floating point tensor" end
end

local function instance_index(self, k)
  local f = rawget(self, "_fields")
  local v = f.values[k]
  if v ~= nil then return v end
  local class = getmetatable(self).__class
  if class._list_kind then
    if k == "n" then return #self end
    local i = (type(k) == "number" or type(k) == "string") and list_pos(self, k)
    if i then return rawget(self, i) end
  end
  return class[k]
end

local instance_newindex
local function list_newindex(self, k, v)
  local i = list_pos(self, k, "write")
  if not i then return false end
  -- only a new entry (#self + 1) or a negative index gets here: an existing
  -- entry is a raw slot, checked at its next use (own, Sequential:forward)
  local want = v ~= nil and list_entry_error(list_kind(self), v)
  if want then
    errors.raise(("ember.nn.%s: entry %d must be %s, got %s"):format(getmetatable(self).__class.__name, i,
      want, A.value_str(v)))
  end
  rawset(self, i, v)
  return true
end

function instance_newindex(self, k, v)
  if list_kind(self) and (type(k) == "number" or (type(k) == "string" and k:match("^%-?%d+$")))
      and list_newindex(self, k, v) then
    return
  end
  local f = rawget(self, "_fields")
  local kind = f.kind[k]
  if v == nil then   -- removal
    if kind then
      f.values[k], f.kind[k] = nil, nil
      for i, name in ipairs(f.order) do
        if name == k then table.remove(f.order, i) break end
      end
    else
      rawset(self, k, nil)
    end
    return
  end
  local newkind
  if is_tensor(v) then
    if kind == "buffer" then newkind = "buffer"
    elseif FLOATING[v.dtype] then newkind = "param"
    elseif kind == "param" then
      errors.raise(("ember.nn.%s: '%s' is a parameter, which must be floating point, got %s (a %s tensor "
        .. "becomes a plain field under a new name; set self.%s = nil first, or register a buffer)")
        :format(self.__name, tostring(k), A.value_str(v), v.dtype, tostring(k)))
    end
  elseif is_module(v) then newkind = "module"
  end
  if newkind then
    if not kind then f.order[#f.order + 1] = k end
    f.values[k], f.kind[k] = v, newkind
    rawset(self, k, nil)
  elseif kind then   -- a registered name given a plain value
    f.values[k], f.kind[k] = nil, nil
    for i, name in ipairs(f.order) do
      if name == k then table.remove(f.order, i) break end
    end
    rawset(self, k, v)
  else
    rawset(self, k, v)
  end
end

-- how many arguments each forward takes (false: any), for m(...)'s check
local forward_limit = setmetatable({}, { __mode = "k" })

-- Module:extend("Name") makes a subclass; calling the class makes an instance
-- and runs its init(...). Calling an instance runs its forward, then a
-- sliced step's yield point (ember.frame).
local slicer = ember._slicer
local function after_forward(...)
  if slicer.active then slicer.point() end
  return ...
end
function Module:extend(name)
  local class = setmetatable({}, { __index = self, __call = function(cls, ...) return cls:new(...) end,
    __tostring = function() return "class " .. (name or "Module") end })
  class.__name = name or "Module"
  class.__super = self
  class.__instance_mt = {
    __class = class,
    __module = true,
    __index = instance_index,
    __newindex = instance_newindex,
    __call = function(m, ...)
      local fwd = m.forward
      local limit = forward_limit[fwd]
      if limit == nil then
        limit = fwd ~= Module.forward and errors.arity_limit(fwd, 1)
        forward_limit[fwd] = limit
      end
      if limit and select("#", ...) > limit then A.check_arity("ember.nn." .. m.__name .. ":forward", fwd, 1, ...) end
      return after_forward(fwd(m, ...))
    end,
    __tostring = function(m) return m:__repr() end,
  }
  return class
end

function Module:new(...)
  A.check_arity("ember.nn." .. self.__name, self.init, 1, ...)
  local obj = { _fields = { values = {}, kind = {}, order = {}, transient = {} }, training = true }
  setmetatable(obj, self.__instance_mt)
  obj:init(...)
  return obj
end

function Module:init() end

function Module:forward(...)   -- variadic: a subclass defines its own
  errors.raise("ember.nn." .. self.__name .. ": forward is not defined")
end

local function need_name(self, fn, name)
  if type(name) ~= "string" or name == "" or name:find(".", 1, true) then
    errors.raise(("ember.nn.%s: %s: name must be a non-empty string without '.', got %s")
      :format(self.__name, fn, A.value_str(name)))
  end
end

-- register_buffer(name, t, persistent = true): a buffer is moved and cast
-- with the module but is no parameter; a persistent one is in state_dict
-- (PyTorch's register_buffer, whose persistent = False keeps it out)
function Module:register_buffer(name, t, persistent)
  local f = fields(self)
  need_name(self, "register_buffer", name)
  if t ~= nil and not is_tensor(t) then
    errors.raise(("ember.nn.%s: register_buffer('%s') needs a tensor, got %s"):format(self.__name, name, type(t)))
  end
  if persistent ~= nil and type(persistent) ~= "boolean" then
    errors.raise(("ember.nn.%s: register_buffer('%s'): persistent must be a boolean, got %s")
      :format(self.__name, name, A.value_str(persistent)))
  end
  rawset(self, name, nil)
  if not f.kind[name] then f.order[#f.order + 1] = name end
  f.kind[name], f.values[name] = "buffer", t
  f.transient[name] = persistent == false or nil
end

-- register_parameter(name, t): as self[name] = t, but raises unless t is a
-- floating point tensor (or nil, which removes it)
function Module:register_parameter(name, t)
  need_name(self, "register_parameter", name)
  if t ~= nil and not (is_tensor(t) and FLOATING[t.dtype]) then
    errors.raise(("ember.nn.%s: register_parameter('%s') needs a floating point tensor, got %s")
      :format(self.__name, name, A.value_str(t)))
  end
  local f = fields(self)
  if f.kind[name] == "buffer" then self[name] = nil end
  rawset(self, name, nil)   -- a plain field of that name would take the assignment raw
  self[name] = t
end

-- the module's own entries of one kind, in order: list of {name, value}
local function own(self, kind)
  local f, out = fields(self), {}
  local lk = list_kind(self)
  if lk == kind then
    for i = 1, #self do
      local v = rawget(self, i)
      local want = list_entry_error(lk, v)
      if want then
        errors.raise(("ember.nn.%s: entry %d must be %s, got %s"):format(self.__name, i, want, A.value_str(v)))
      end
      out[#out + 1] = { tostring(i), v }
    end
  end
  for _, k in ipairs(f.order) do
    if f.kind[k] == kind and f.values[k] ~= nil then out[#out + 1] = { k, f.values[k] } end
  end
  return out
end

function Module:children()
  local out = {}
  for _, e in ipairs(own(self, "module")) do out[#out + 1] = e[2] end
  return out
end

function Module:named_children()
  return own(self, "module")
end

-- walks self and its children depth first: fn(prefix, module)
local function walk(self, prefix, fn, seen)
  seen = seen or {}
  if seen[self] then return end
  seen[self] = true
  fn(prefix, self)
  for _, e in ipairs(own(self, "module")) do walk(e[2], prefix .. e[1] .. ".", fn, seen) end
end

function Module:modules()
  local out = {}
  walk(self, "", function(_, m) out[#out + 1] = m end)
  return out
end

-- A list of {name, tensor} pairs in order that also answers by name
-- (list["fc.weight"]) and iterates as `for name, t in list do`.
local NamedList = {
  __call = function(list, _, name)
    local i = (name == nil and 0 or list._pos[name]) + 1
    local e = rawget(list, i)
    if e then return e[1], e[2] end
  end,
}

-- PyTorch numbers the entries of Sequential, ModuleList and ParameterList
-- from 0, ember from 1: a state_dict key in PyTorch's naming ("1.fc.weight"
-- -> "0.fc.weight")
local function torch_key(self, key)
  local m, parts = self, {}
  for part in key:gmatch("[^.]+") do
    local listed = m and list_kind(m) and part:match("^%d+$")
    local child = nil
    if listed then child = rawget(m, tonumber(part))
    elseif m then
      local f = fields(m)
      child = f.kind[part] == "module" and f.values[part] or nil
    end
    parts[#parts + 1] = listed and tostring(tonumber(part) - 1) or part
    m = is_module(child) and child or nil
  end
  return table.concat(parts, ".")
end

-- opts of the naming functions checked: a table whose keys are in allowed
local function name_opts(self, fn, opts, allowed)
  if opts ~= nil and not A.is_options(opts) then
    errors.raise(("ember.nn.%s: %s: options must be a table, got %s"):format(self.__name, fn,
      type(opts) == "table" and A.value_str(opts) or type(opts)))
  end
  for k in pairs(opts or {}) do
    if not allowed[k] then
      errors.raise(("ember.nn.%s: %s: unknown option '%s'"):format(self.__name, fn, tostring(k)))
    end
  end
  return opts or {}
end

-- the list of kind's tensors; persistent: only those state_dict holds
-- (every: a parameter shared under several names under each of them, as
-- PyTorch's state_dict keeps a tied weight)
local function named(self, kind, torch, persistent, every)
  local list, seen = setmetatable({ _pos = {} }, NamedList), {}
  walk(self, "", function(prefix, m)
    local transient = fields(m).transient
    for _, e in ipairs(own(m, kind)) do
      local t = e[2]
      if (every or kind == "buffer" or not seen[t]) and not (persistent and transient[e[1]]) then
        seen[t] = true
        local name = prefix .. e[1]
        if torch then name = torch_key(self, name) end
        list[#list + 1] = { name, t, name = name, tensor = t }
        list._pos[name] = #list
        rawset(list, name, t)
      end
    end
  end)
  return list
end

-- opts: {torch_names = true} names them as PyTorch does (lists from 0)
function Module:named_parameters(opts)
  return named(self, "param", name_opts(self, "named_parameters", opts, { torch_names = true }).torch_names)
end
function Module:named_buffers(opts)
  return named(self, "buffer", name_opts(self, "named_buffers", opts, { torch_names = true }).torch_names)
end

function Module:parameters()
  local out = {}
  for _, e in ipairs(self:named_parameters()) do out[#out + 1] = e[2] end
  return out
end

function Module:buffers()
  local out = {}
  for _, e in ipairs(self:named_buffers()) do out[#out + 1] = e[2] end
  return out
end

function Module:train(mode)
  if mode == nil then mode = true end
  walk(self, "", function(_, m) rawset(m, "training", mode and true or false) end)
  return self
end

function Module:eval() return self:train(false) end

function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do p.grad = nil end
end

-- key -> tensor for every parameter and persistent buffer, keys in ember's
-- naming or (opts.torch_names) PyTorch's
local function own_state(self, fn, opts)
  opts = name_opts(self, fn, opts, { torch_names = true, strict = fn == "load_state_dict" or nil })
  local out = {}
  for _, kind in ipairs({ "param", "buffer" }) do
    for _, e in ipairs(named(self, kind, opts.torch_names, true, true)) do out[e[1]] = e[2] end
  end
  return out
end

-- name -> tensor for every parameter and buffer; the tensors share storage
-- with the module's (detached), so save them or clone them.
-- opts: {torch_names = true} numbers Sequential's children from 0, as PyTorch does.
function Module:state_dict(opts)
  local sd = {}
  for k, t in pairs(own_state(self, "state_dict", opts)) do sd[k] = t:detach() end
  return sd
end

-- guidance when unexpected keys are this module's own in PyTorch's naming
local function naming_hint(self, unexpected)
  local theirs = own_state(self, "load_state_dict", { torch_names = true })
  for _, k in ipairs(unexpected) do
    if theirs[k] then
      return " (PyTorch's names, children numbered from 0? pass {torch_names = true})"
    end
  end
  return ""
end

-- Copies the values of sd into the module's tensors. strict (the default)
-- requires the same keys; shapes must always match. Nothing is copied unless
-- every check passes. The second argument is strict, or {strict =, torch_names =}.
function Module:load_state_dict(sd, strict)
  if type(sd) ~= "table" then
    errors.raise(("ember.nn.%s: load_state_dict expects a table of tensors, got %s"):format(self.__name, type(sd)))
  end
  local opts = type(strict) == "table" and strict or nil
  if opts then strict = opts.strict end
  if strict == nil then strict = true end
  local mine = own_state(self, "load_state_dict", opts)
  local missing, unexpected, bad = {}, {}, {}
  for k, t in pairs(mine) do
    local v = sd[k]
    if v == nil then missing[#missing + 1] = k
    elseif not is_tensor(v) then bad[#bad + 1] = ("%s is a %s, not a tensor"):format(k, type(v))
    else
      local a, b = t:shape(), v:shape()
      local same = #a == #b
      for i = 1, #a do same = same and a[i] == b[i] end
      if not same then
        bad[#bad + 1] = ("%s: the checkpoint has shape %s, the model %s"):format(k, shape_str(b), shape_str(a))
      end
    end
  end
  for k in pairs(sd) do
    if mine[k] == nil then unexpected[#unexpected + 1] = tostring(k) end
  end
  table.sort(missing)
  table.sort(unexpected)
  table.sort(bad)
  local problems = {}
  if #bad > 0 then problems[#problems + 1] = "size mismatch for " .. table.concat(bad, "; ") end
  if strict and #missing > 0 then problems[#problems + 1] = "missing keys: " .. table.concat(missing, ", ") end
  if strict and #unexpected > 0 then
    problems[#problems + 1] = "unexpected keys: " .. table.concat(unexpected, ", ")
      .. (opts and opts.torch_names and "" or naming_hint(self, unexpected))
  end
  if #problems > 0 then
    errors.raise(("ember.nn.%s: load_state_dict failed: %s"):format(self.__name, table.concat(problems, "; ")))
  end
  ember.no_grad(function()
    for k, t in pairs(mine) do
      if sd[k] ~= nil then t:copy_(sd[k]) end
    end
  end)
  return { missing_keys = missing, unexpected_keys = unexpected }
end

-- Module:to's arguments as {dtype =, device =, non_blocking =}: a dtype, a
-- device, both, a tensor (its dtype and device), or a table of those keys
-- and memory_format; the dtype must be floating point, as PyTorch's
local DTYPE_ALIASES = { float = "float32", double = "float64", half = "float16" }
local function to_target(self, ...)
  local op = "nn." .. self.__name .. ":to"
  local target = {}
  local function set(k, v)
    if target[k] ~= nil and target[k] ~= v then
      A.fail("ember." .. op, "%s is given twice (%s and %s)", k, A.value_str(target[k]), A.value_str(v))
    end
    target[k] = v
  end
  local function set_dtype(v)
    local d = DTYPE_ALIASES[v] or v
    if not FLOATING[d] then
      A.fail("ember." .. op, "dtype must be floating point (float32, float64, float16, bfloat16), got %s; "
        .. "integer buffers keep their dtype", A.value_str(v))
    end
    set("dtype", d)
  end
  local function set_device(v)
    if type(v) ~= "string" or not (v == "cpu" or v:match("^cuda$") or v:match("^cuda:%d+$")) then
      A.fail("ember." .. op, "device must be 'cpu', 'cuda' or 'cuda:<n>', got %s", A.value_str(v))
    end
    set("device", v)
  end
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if is_tensor(v) then set_dtype(v.dtype) set_device(v.device)
    elseif type(v) == "string" then
      if v == "cpu" or v:match("^cuda") then set_device(v) else set_dtype(v) end
    elseif A.is_options(v) then
      for k, x in pairs(v) do
        if k == "dtype" then set_dtype(x)
        elseif k == "device" then set_device(x)
        elseif k == "non_blocking" then
          if type(x) ~= "boolean" then A.fail("ember." .. op, "non_blocking must be a boolean, got %s", A.value_str(x)) end
          target.non_blocking = x or nil
        elseif k == "memory_format" then
          ember._memory_format("ember." .. op, x)
          target.memory_format = x
        else A.fail("ember." .. op, "unknown option '%s'", tostring(k)) end
      end
    elseif v ~= nil then
      A.fail("ember." .. op, "argument %d must be a dtype, a device, a tensor or an options table, got %s", i,
        A.value_str(v))
    end
  end
  return target
end

-- Module-wide conversions, in place: every parameter and buffer (and a
-- parameter's .grad) keeps its Lua object and gets the converted C tensor
-- (ember._swap), so managers and optimizers that hold it go on working.
-- Dtype conversions leave integer and bool buffers as they are. Nothing is
-- converted while a recording tracks one of the tensors.
function Module:to(...)
  local target = to_target(self, ...)
  local todo, seen = {}, {}
  walk(self, "", function(prefix, m)
    for _, kind in ipairs({ "param", "buffer" }) do
      for _, e in ipairs(own(m, kind)) do
        local t = e[2]
        if not seen[t] then
          seen[t] = true
          if C.ember_is_tracked(t._c) ~= 0 then
            errors.raise(("ember.nn.%s:to: %s%s is tracked by a recording GradManager: convert before "
              .. "gm:record() or after gm:backward()"):format(self.__name, prefix, e[1]))
          end
          todo[#todo + 1] = t
        end
      end
    end
  end)
  -- every conversion first, then the swaps: a conversion that fails (a
  -- device without memory) leaves the module as it was
  local pairs_ = {}
  local function convert(t)
    local args = { dtype = FLOATING[t.dtype] and target.dtype or nil, device = target.device,
      non_blocking = target.non_blocking, memory_format = target.memory_format }
    local moved = ember.no_grad(function() return t:to(args) end)
    if moved ~= t then pairs_[#pairs_ + 1] = { t, moved } end
  end
  for _, t in ipairs(todo) do
    convert(t)
    local g = rawget(t, "_grad")
    if g ~= nil then convert(g) end
  end
  for _, p in ipairs(pairs_) do ember._swap(p[1], p[2]) end
  return self
end
function Module:float() return self:to("float32") end
function Module:double() return self:to("float64") end
function Module:half() return self:to("float16") end
function Module:bfloat16() return self:to("bfloat16") end
function Module:cuda() return self:to("cuda") end
function Module:cpu() return self:to("cpu") end

function Module:extra_repr() return "" end

function Module:__repr()
  local kids = own(self, "module")
  local head = self.__name .. "(" .. self:extra_repr()
  if #kids == 0 then return head .. ")" end
  local lines = { head }
  for _, e in ipairs(kids) do
    lines[#lines + 1] = "  (" .. e[1] .. "): " .. tostring(e[2]):gsub("\n", "\n  ")
  end
  return table.concat(lines, "\n") .. "\n)"
end

-- Module itself is a class too (for Module:extend on it)
Module.__instance_mt = { __class = Module, __module = true, __index = instance_index, __newindex = instance_newindex }

---------------------------------------------------------------- helpers for layers
local function check_int(layer, name, v, min)
  if type(v) ~= "number" or v ~= math.floor(v) or v < (min or 1) then
    errors.raise(("ember.nn.%s: %s must be an integer >= %d, got %s"):format(layer, name, min or 1, tostring(v)))
  end
  return v
end

local function check_opts(layer, o, allowed)
  if o == nil then return {} end
  if type(o) ~= "table" or is_tensor(o) then
    errors.raise(("ember.nn.%s: options must be a table, got %s"):format(layer, type(o)))
  end
  for k in pairs(o) do
    if not allowed[k] then
      local known = {}
      for name in pairs(allowed) do known[#known + 1] = name end
      errors.known_options("nn." .. layer, o, known)   -- raises naming k and the known options
    end
  end
  return o
end

-- parameters are float32 unless {dtype =} says otherwise
local function uniform(shape, bound, dtype)
  return ember.empty(shape, { dtype = dtype or "float32" }):uniform_(-bound, bound)
end

local function need_input(layer, x, ok, expected)
  if not is_tensor(x) then errors.raise(("ember.nn.%s: input must be a tensor, got %s"):format(layer, type(x))) end
  if not ok(x) then
    errors.raise(("ember.nn.%s: input of shape %s does not fit: expected %s"):format(layer, shape_str(x), expected))
  end
end

---------------------------------------------------------------- layers
local Linear = Module:extend("Linear")
nn.Linear = Linear
-- nn.Linear(in, out, {bias = true, dtype = "float32"}); weight {out, in}, both
-- drawn from U(-1/sqrt(in), 1/sqrt(in)) as in PyTorch
function Linear:init(in_features, out_features, opts)
  if type(opts) == "boolean" then opts = { bias = opts } end
  opts = check_opts("Linear", opts, { bias = true, dtype = true })
  local nin = check_int("Linear", "in_features", in_features, 0)
  local nout = check_int("Linear", "out_features", out_features, 0)
  self.in_features, self.out_features = nin, nout
  local bound = nin > 0 and 1 / math.sqrt(nin) or 0
  self.weight = uniform({ nout, nin }, bound, opts.dtype)
  if opts.bias ~= false then self.bias = uniform({ nout }, bound, opts.dtype) end
end
local function linear_input(m, x)
  local n = m.in_features
  need_input("Linear", x, function(t) return t:dim() >= 1 and t:size(-1) == n end,
    ("last dim %d, as in {N, %d}"):format(n, n))
end
function Linear:forward(x)
  linear_input(self, x)
  return F.linear(x, self.weight, self.bias)
end
function Linear:extra_repr()
  return ("in_features=%d, out_features=%d, bias=%s"):format(self.in_features, self.out_features,
    tostring(self.bias ~= nil))
end

local function pair_of(v) if type(v) == "table" then return v end return { v, v } end

local Conv2d = Module:extend("Conv2d")
nn.Conv2d = Conv2d
-- nn.Conv2d(in, out, kernel, {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true,
--                             activation = nil | "relu"})
-- (stride, padding, dilation, groups and bias may also come positionally, in
-- PyTorch's order, with the options table after them); activation "relu"
-- makes the layer PyTorch's ConvReLU2d, F.conv2d_relu's one fused op
Conv2d.POSITIONAL = { "stride", "padding", "dilation", "groups", "bias" }
function Conv2d:init(cin, cout, kernel, ...)
  local opts = A.positional("ember.nn.Conv2d", { "in_channels", "out_channels", "kernel_size" },
    Conv2d.POSITIONAL, ...)
  opts = check_opts("Conv2d", opts, { stride = true, padding = true, dilation = true, groups = true,
    bias = true, dtype = true, activation = true })
  if opts.bias ~= nil and type(opts.bias) ~= "boolean" then
    errors.raise(("ember.nn.Conv2d: bias must be a boolean, got %s"):format(A.value_str(opts.bias)))
  end
  local groups = opts.groups or 1
  if opts.activation ~= nil and opts.activation ~= "relu" then
    errors.raise(("ember.nn.Conv2d: activation must be nil or \"relu\", got %s"):format(tostring(opts.activation)))
  end
  self.activation = opts.activation
  check_int("Conv2d", "in_channels", cin)
  check_int("Conv2d", "out_channels", cout)
  check_int("Conv2d", "groups", groups)
  if cin % groups ~= 0 or cout % groups ~= 0 then
    errors.raise(("ember.nn.Conv2d: groups = %d must divide in_channels = %d and out_channels = %d"):format(groups, cin, cout))
  end
  local k = pair_of(kernel)
  check_int("Conv2d", "kernel_size", k[1])
  check_int("Conv2d", "kernel_size", k[2])
  self.in_channels, self.out_channels, self.kernel_size = cin, cout, k
  self.stride, self.padding, self.dilation, self.groups =
    opts.stride or 1, opts.padding or 0, opts.dilation or 1, groups
  local fan_in = cin / groups * k[1] * k[2]
  local bound = 1 / math.sqrt(fan_in)
  self.weight = uniform({ cout, cin / groups, k[1], k[2] }, bound, opts.dtype)
  if opts.bias ~= false then self.bias = uniform({ cout }, bound, opts.dtype) end
end
local function conv_input(m, x)
  local c = m.in_channels
  need_input("Conv2d", x, function(t) return t:dim() == 4 and t:size(2) == c end,
    ("{N, %d, H, W}"):format(c))
end
local function conv_opts(m)
  return { stride = m.stride, padding = m.padding, dilation = m.dilation, groups = m.groups }
end
function Conv2d:forward(x)
  conv_input(self, x)
  local conv = self.activation == "relu" and F.conv2d_relu or F.conv2d
  return conv(x, self.weight, self.bias, conv_opts(self))
end
function Conv2d:extra_repr()
  return ("%d, %d, kernel_size={%d, %d}, stride=%s, padding=%s%s"):format(self.in_channels, self.out_channels,
    self.kernel_size[1], self.kernel_size[2], tostring(self.stride), tostring(self.padding),
    self.activation and (", activation=" .. self.activation) or "")
end

local BATCHNORM = { { "eps", 1e-5, A.positive },
  { "momentum", 0.1, function(v)
    if v ~= false and (type(v) ~= "number" or not (v >= 0 and v <= 1)) then
      return "a number in [0, 1], or false (PyTorch's None: the cumulative average)"
    end
  end },
  { "affine", true, A.boolean }, { "track_running_stats", true, A.boolean }, A.DTYPE }
local function batchnorm_class(name, dims)
  local B = Module:extend(name)
  -- nn.BatchNorm2d(C, {eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true});
  -- momentum = false is PyTorch's momentum=None: the running statistics are
  -- the cumulative average over the batches seen (factor 1 / num_batches_tracked)
  function B:init(num_features, opts)
    opts = A.options("ember.nn." .. name, opts, BATCHNORM)
    self.num_features = check_int(name, "num_features", num_features)
    self.eps, self.momentum = opts.eps, opts.momentum
    local dt = { dtype = opts.dtype }
    if opts.affine then
      self.weight = ember.ones({ num_features }, dt)
      self.bias = ember.zeros({ num_features }, dt)
    end
    if opts.track_running_stats then
      self:register_buffer("running_mean", ember.zeros({ num_features }, dt))
      self:register_buffer("running_var", ember.ones({ num_features }, dt))
      self:register_buffer("num_batches_tracked", ember.zeros({}, { dtype = "int64" }))
    end
  end
  function B:forward(x)
    local c = self.num_features
    need_input(name, x, function(t)
      for _, d in ipairs(dims) do if t:dim() == d then return t:size(2) == c end end
      return false
    end, dims[1] == 4 and ("{N, %d, H, W}"):format(c) or ("{N, %d} or {N, %d, L}"):format(c, c))
    local training = self.training or self.running_mean == nil
    local momentum = self.momentum
    if self.training and self.num_batches_tracked then
      ember.no_grad(function() self.num_batches_tracked:add_(1) end)
      if momentum == false then momentum = 1 / self.num_batches_tracked:item() end
    end
    return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
      { training = training, momentum = momentum or 0, eps = self.eps })
  end
  function B:extra_repr()
    return ("%d, eps=%g, momentum=%s"):format(self.num_features, self.eps,
      self.momentum == false and "None" or ("%g"):format(self.momentum))
  end
  return B
end
nn.BatchNorm1d = batchnorm_class("BatchNorm1d", { 2, 3 })
nn.BatchNorm2d = batchnorm_class("BatchNorm2d", { 4 })

local LayerNorm = Module:extend("LayerNorm")
nn.LayerNorm = LayerNorm
-- nn.LayerNorm(normalized_shape, {eps = 1e-5, elementwise_affine = true})
function LayerNorm:init(shape, opts)
  opts = check_opts("LayerNorm", opts, { eps = true, elementwise_affine = true, dtype = true })
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" then errors.raise("ember.nn.LayerNorm: normalized_shape must be a number or a list") end
  self.normalized_shape, self.eps = shape, opts.eps or 1e-5
  if opts.elementwise_affine ~= false then
    self.weight = ember.ones(shape, { dtype = opts.dtype or "float32" })
    self.bias = ember.zeros(shape, { dtype = opts.dtype or "float32" })
  end
end
function LayerNorm:forward(x)
  return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, { eps = self.eps })
end
function LayerNorm:extra_repr() return shape_str(self.normalized_shape) .. (", eps=%g"):format(self.eps) end

local Dropout = Module:extend("Dropout")
nn.Dropout = Dropout
function Dropout:init(p)
  p = p == nil and 0.5 or p
  if type(p) ~= "number" or p < 0 or p > 1 then
    errors.raise(("ember.nn.Dropout: p must be in [0, 1], got %s"):format(tostring(p)))
  end
  self.p = p
end
function Dropout:forward(x) return F.dropout(x, self.p, self.training) end
function Dropout:extra_repr() return ("p=%g"):format(self.p) end

local Embedding = Module:extend("Embedding")
nn.Embedding = Embedding
local EMBEDDING_OPTS = { padding_idx = true, max_norm = true, norm_type = true, scale_grad_by_freq = true,
  sparse = true, dtype = true }
local EMBEDDING_ARGS = { "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse" }
-- nn.Embedding(num, dim, padding_idx, max_norm, norm_type = 2, scale_grad_by_freq, sparse,
-- {dtype =}) (F.embedding's arguments positionally or as options, A.positional): weight {num, dim}
-- from N(0, 1), the padding_idx row zeros; indices are 1-based
function Embedding:init(num, dim, ...)
  local args = check_opts("Embedding", A.positional("ember.nn.Embedding", { "num_embeddings", "embedding_dim" },
    EMBEDDING_ARGS, ...), EMBEDDING_OPTS)
  self.num_embeddings = check_int("Embedding", "num_embeddings", num)
  self.embedding_dim = check_int("Embedding", "embedding_dim", dim)
  local pad = F._embedding_padding_row("ember.nn.Embedding", args.padding_idx, num)
  self.padding_idx, self.max_norm, self.norm_type = args.padding_idx, args.max_norm, args.norm_type or 2
  for _, k in ipairs({ "scale_grad_by_freq", "sparse" }) do
    if args[k] ~= nil and type(args[k]) ~= "boolean" then
      errors.raise(("ember.nn.Embedding: %s must be a boolean, got %s"):format(k, A.value_str(args[k])))
    end
  end
  self.scale_grad_by_freq, self.sparse = args.scale_grad_by_freq or false, args.sparse or false
  if self.scale_grad_by_freq or self.sparse then
    errors.raise("ember.nn.Embedding: scale_grad_by_freq and sparse are not supported (dense gradients, unscaled)")
  end
  if self.max_norm ~= nil and (type(self.max_norm) ~= "number" or not (self.max_norm >= 0)) then
    errors.raise(("ember.nn.Embedding: max_norm must be a number >= 0, got %s"):format(tostring(self.max_norm)))
  end
  if type(self.norm_type) ~= "number" or self.norm_type ~= self.norm_type then
    errors.raise(("ember.nn.Embedding: norm_type must be a number, got %s"):format(tostring(self.norm_type)))
  end
  self.weight = ember.randn({ num, dim }, { dtype = args.dtype or "float32" })
  if pad then ember.no_grad(function() self.weight:select(1, pad):zero_() end) end
end
function Embedding:forward(idx)
  if is_tensor(idx) and (idx.dtype == "int64" or idx.dtype == "int32") and idx:numel() > 0 then
    local lo, hi = idx:min():item(), idx:max():item()
    if lo < 1 or hi > self.num_embeddings then
      errors.raise(("ember.nn.Embedding: index %d is out of range 1..%d"):format(lo < 1 and lo or hi, self.num_embeddings))
    end
  end
  return F.embedding(idx, self.weight, { padding_idx = self.padding_idx, max_norm = self.max_norm,
    norm_type = self.norm_type })
end
function Embedding:extra_repr()
  return ("%d, %d%s"):format(self.num_embeddings, self.embedding_dim,
    self.padding_idx and (", padding_idx=" .. self.padding_idx) or "")
end

-- an activation module: init(arg) keeps its one argument (none when takes
-- is nil, "dim" for a dim, or an option spec for an options table)
local function activation(name, fn, takes)
  local K = Module:extend(name)
  local op = "ember.nn." .. name
  if takes == nil then
    function K:init() end
  elseif takes == "dim" then
    function K:init(dim)
      if dim ~= nil and (type(dim) ~= "number" or dim ~= math.floor(dim)) then
        A.fail(op, "dim must be an integer, got %s", A.value_str(dim))
      end
      self.opts = dim
    end
  else
    function K:init(opts) self.opts = A.options(op, opts, takes) end
  end
  function K:forward(x)
    if not is_tensor(x) then errors.raise(("ember.nn.%s: input must be a tensor, got %s"):format(name, type(x))) end
    return fn(x, self.opts)
  end
  return K
end
nn.ReLU = activation("ReLU", F.relu)
nn.GELU = activation("GELU", F.gelu, { { "approximate", "none", A.one_of("none", "tanh") } })
nn.Tanh = activation("Tanh", F.tanh)
nn.Sigmoid = activation("Sigmoid", F.sigmoid)
nn.SiLU = activation("SiLU", F.silu)
nn.Softmax = activation("Softmax", function(x, dim) return x:softmax(dim or -1) end, "dim")
nn.LogSoftmax = activation("LogSoftmax", function(x, dim) return x:log_softmax(dim or -1) end, "dim")
nn.Identity = activation("Identity", function(x) return x end)

local Flatten = Module:extend("Flatten")
nn.Flatten = Flatten
-- nn.Flatten(start = 2, end = -1): keeps the batch dim
function Flatten:init(s, e) self.start_dim, self.end_dim = s or 2, e or -1 end
function Flatten:forward(x)
  if not is_tensor(x) then errors.raise("ember.nn.Flatten: input must be a tensor, got " .. type(x)) end
  return x:flatten(self.start_dim, self.end_dim)
end

---------------------------------------------------------------- containers
-- The list containers' shared methods: len, get, append, extend, iter. Their
-- entries sit in the instance's array part: c[i] (negative from the end),
-- #c and ipairs(c) are Lua's own; c[#c + 1] = v appends, c[#c] = nil pops.
local function list_class(name, kind)
  local K = Module:extend(name)
  K._list_kind = kind
  local op = "ember.nn." .. name
  function K:len() return #self end
  function K:get(i)
    if type(i) ~= "number" then A.fail(op, "get: index must be a number, got %s", A.value_str(i)) end
    return self[i]
  end
  function K:append(v)
    self[#self + 1] = v
    return self
  end
  function K:extend(list)
    if type(list) ~= "table" or getmetatable(list) ~= nil and not list_kind(list) then
      A.fail(op, "extend: expected a list, got %s", A.value_str(list))
    end
    for i = 1, #list do
      local want = list_entry_error(kind, list[i])
      if want then A.fail(op, "extend: entry %d must be %s, got %s", i, want, A.value_str(list[i])) end
    end
    for i = 1, #list do self:append(list[i]) end
    return self
  end
  -- for i, v in c:iter() (the same as ipairs(c))
  function K:iter() return ipairs(self) end
  -- K(list): a list of entries, or nothing
  function K:init(list)
    if list == nil then return end
    if type(list) ~= "table" or getmetatable(list) ~= nil and not list_kind(list) then
      A.fail(op, "expected a list of entries, got %s", A.value_str(list))
    end
    self:extend(list)
  end
  return K
end

local Sequential = list_class("Sequential", "module")
nn.Sequential = Sequential
-- children are named "1", "2", ... (state_dict keys "1.weight", ...; PyTorch's from 0)
function Sequential:init(...)
  local n = select("#", ...)
  for i = 1, n do
    local m = select(i, ...)
    if not is_module(m) then
      errors.raise(("ember.nn.Sequential: argument %d is not a module (got %s %s)"):format(i, type(m),
        A.value_str(m)))
    end
  end
  for i = 1, n do rawset(self, i, (select(i, ...))) end
end
Sequential.add = Sequential.append
-- a Linear layer with a bias followed by a ReLU runs as one F.linear_relu
local function linear_then_relu(m, r)
  return getmetatable(m).__class == Linear and rawget(m, "forward") == nil and m.bias ~= nil and r ~= nil
    and getmetatable(r).__class == nn.ReLU and rawget(r, "forward") == nil
end
-- a Conv2d with a bias and activation "relu" followed by a MaxPool2d
-- without padding runs as one F.conv2d_relu_max_pool2d
local function no_padding(p) return p == 0 or (type(p) == "table" and p[1] == 0 and p[2] == 0) end
local function conv_relu_then_pool(m, p)
  return getmetatable(m).__class == Conv2d and rawget(m, "forward") == nil and m.bias ~= nil
    and m.activation == "relu" and p ~= nil and getmetatable(p).__class == nn.MaxPool2d
    and rawget(p, "forward") == nil and no_padding(p.padding) and p.dilation == 1 and not p.ceil_mode
    and not p.return_indices
end
function Sequential:forward(x)
  local i, n = 1, #self
  while i <= n do
    local m, r = rawget(self, i), rawget(self, i + 1)
    if not is_module(m) then
      errors.raise(("ember.nn.Sequential: entry %d must be a module, got %s"):format(i, A.value_str(m)))
    end
    if not is_module(r) then r = nil end
    if linear_then_relu(m, r) then
      linear_input(m, x)
      x = F.linear_relu(x, m.weight, m.bias)
      i = i + 2
    elseif conv_relu_then_pool(m, r) then
      conv_input(m, x)
      x = F.conv2d_relu_max_pool2d(x, m.weight, m.bias, conv_opts(m), r.kernel_size, { stride = r.stride })
      i = i + 2
    else
      x = m(x)
      i = i + 1
    end
  end
  return x
end

nn.ModuleList = list_class("ModuleList", "module")
-- nn.ParameterList({t1, t2}): floating point tensors, each a parameter
nn.ParameterList = list_class("ParameterList", "param")

-- The dict containers: entries by name, in insertion order (a table given to
-- the constructor is taken in sorted key order, a list of {name, value}
-- pairs in its own); d[name] reads and writes one; a name may not be one of
-- the class's methods.
local function dict_class(name, kind)
  local K = Module:extend(name)
  local op = "ember.nn." .. name
  local what = kind == "module" and "a module" or "a floating point tensor"
  local function check(self, k, v)
    if type(k) ~= "string" or k == "" or k:find(".", 1, true) then
      A.fail(op, "a key must be a non-empty string without '.', got %s", A.value_str(k))
    end
    if K[k] ~= nil then A.fail(op, "key '%s' is the name of a method of %s", k, name) end
    if v ~= nil and list_entry_error(kind, v) then
      A.fail(op, "entry '%s' must be %s, got %s", k, what, A.value_str(v))
    end
  end
  K.__instance_mt.__newindex = function(self, k, v)
    if type(k) == "string" and (k == "training" or k:sub(1, 1) == "_") then return instance_newindex(self, k, v) end
    check(self, k, v)
    instance_newindex(self, k, v)
  end
  local function entries(self)
    local out = own(self, kind)
    return out
  end
  function K:len() return #entries(self) end
  function K:keys()
    local out = {}
    for _, e in ipairs(entries(self)) do out[#out + 1] = e[1] end
    return out
  end
  function K:values()
    local out = {}
    for _, e in ipairs(entries(self)) do out[#out + 1] = e[2] end
    return out
  end
  -- for name, v in d:items()
  function K:items()
    local list, i = entries(self), 0
    return function()
      i = i + 1
      if list[i] then return list[i][1], list[i][2] end
    end
  end
  function K:contains(k) return fields(self).kind[k] == kind end
  function K:pop(k)
    local v = self:contains(k) and fields(self).values[k] or nil
    if v == nil then A.fail(op, "pop: no entry '%s'", tostring(k)) end
    self[k] = nil
    return v
  end
  -- d:update(table or list of {name, value} pairs)
  function K:update(src)
    if type(src) ~= "table" or getmetatable(src) ~= nil then
      A.fail(op, "expected a table of %s entries or a list of {name, value} pairs, got %s", kind, A.value_str(src))
    end
    local pairs_list = {}
    if rawget(src, 1) ~= nil then
      for i, e in ipairs(src) do
        if type(e) ~= "table" or #e ~= 2 then A.fail(op, "entry %d must be a {name, value} pair", i) end
        pairs_list[i] = e
      end
    else
      local keys = {}
      for k in pairs(src) do keys[#keys + 1] = k end
      for _, k in ipairs(keys) do if type(k) ~= "string" then A.fail(op, "a key must be a string, got %s", A.value_str(k)) end end
      table.sort(keys)
      for i, k in ipairs(keys) do pairs_list[i] = { k, src[k] } end
    end
    for _, e in ipairs(pairs_list) do check(self, e[1], e[2]) end
    for _, e in ipairs(pairs_list) do self[e[1]] = e[2] end
    return self
  end
  function K:init(src) if src ~= nil then self:update(src) end end
  return K
end
nn.ModuleDict = dict_class("ModuleDict", "module")
nn.ParameterDict = dict_class("ParameterDict", "param")

for _, file in ipairs({ "loss", "conv", "norm", "resize", "activation", "pool", "conv3d", "shape" }) do
  require("ember.nn." .. file).register(nn)   -- nn.MSELoss, nn.Conv1d, ...
end
nn.init = require("ember.nn.initializers")
nn.utils = require("ember.nn.utils")
-- RNN, LSTM, GRU and their cells (nn/rnn.lua), built on the helpers above
require("ember.nn.rnn")(nn, { check_int = check_int, check_opts = check_opts, uniform = uniform, need_input = need_input })
-- MultiheadAttention, the Transformer layers and stacks, nn.causal_mask (nn/transformer.lua)
require("ember.nn.transformer").register(nn)

-- no value past a function's parameters is ignored: F.f(x, y, z) raises
-- when F.f takes two (variadic functions take anything); the same for the
-- public methods of Module and the containers
for _, tbl in ipairs({ { F, "ember.nn.functional." }, { nn, "ember.nn." }, { nn.init, "ember.nn.init." } }) do
  local t, prefix = tbl[1], tbl[2]
  for name, fn in pairs(t) do
    if type(fn) == "function" and type(name) == "string" and name:sub(1, 1) ~= "_" then
      t[name] = errors.arity_checked(prefix .. name, fn, 0, t == F)
    end
  end
end
local NOT_CHECKED = { init = true, forward = true, new = true }
for _, class in ipairs({ Module, Sequential, nn.ModuleList, nn.ParameterList, nn.ModuleDict, nn.ParameterDict }) do
  for name, fn in pairs(class) do
    if type(fn) == "function" and type(name) == "string" and name:sub(1, 1) ~= "_" and not NOT_CHECKED[name] then
      class[name] = errors.arity_checked("ember.nn." .. class.__name .. ":" .. name, fn, 1)
    end
  end
end

return nn
