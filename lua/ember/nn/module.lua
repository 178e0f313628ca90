-- ember.nn.Module, the base class of every module (nn/init.lua gathers nn).
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
local errors = require("ember.errors")
local A = require("ember.nn.args")

local C = ember._C
local is_tensor = ember.is_tensor
local shape_str = errors.shape

---------------------------------------------------------------- Module
local Module = {}
Module.__name = "Module"

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
  if v ~= nil then ember._keep_reachable(v) end   -- a module's fields outlive an ember.tidy
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
  if t ~= nil then ember.keep(t) end
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

-- walks self and its children depth first: fn(prefix, module), a module
-- reached twice once; every: under each of its names, as PyTorch's
-- state_dict does (a module holding itself is not entered again)
local function walk(self, prefix, fn, seen, every)
  seen = seen or {}
  if seen[self] then return end
  seen[self] = true
  fn(prefix, self)
  for _, e in ipairs(own(self, "module")) do walk(e[2], prefix .. e[1] .. ".", fn, seen, every) end
  if every then seen[self] = nil end
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

-- the list of kind's tensors; persistent: only those state_dict holds.
-- A tensor or module reached twice (a tied weight, a shared block) is listed
-- once, under its first name, unless every: then under each name, as
-- PyTorch's state_dict and named_parameters(remove_duplicate=False) do.
local function named(self, kind, torch, persistent, every)
  local list, seen = setmetatable({ _pos = {} }, NamedList), {}
  walk(self, "", function(prefix, m)
    local transient = fields(m).transient
    for _, e in ipairs(own(m, kind)) do
      local t = e[2]
      if (every or not seen[t]) and not (persistent and transient[e[1]]) then
        seen[t] = true
        local name = prefix .. e[1]
        if torch then name = torch_key(self, name) end
        list[#list + 1] = { name, t, name = name, tensor = t }
        list._pos[name] = #list
        rawset(list, name, t)
      end
    end
  end, nil, every)
  return list
end

-- opts: {torch_names = true} names them as PyTorch does (lists from 0);
-- {remove_duplicate = false} lists a shared tensor under each of its names
local NAMED_OPTS = { torch_names = true, remove_duplicate = true }
local function named_of(self, kind, fn, opts)
  opts = name_opts(self, fn, opts, NAMED_OPTS)
  if opts.remove_duplicate ~= nil and type(opts.remove_duplicate) ~= "boolean" then
    A.fail("ember.nn." .. self.__name .. ":" .. fn, "remove_duplicate must be a boolean, got %s",
      A.value_str(opts.remove_duplicate))
  end
  return named(self, kind, opts.torch_names, false, opts.remove_duplicate == false)
end
function Module:named_parameters(opts) return named_of(self, "param", "named_parameters", opts) end
function Module:named_buffers(opts) return named_of(self, "buffer", "named_buffers", opts) end

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
-- naming or (opts.torch_names) PyTorch's, and the keys in the module's order
local function own_state(self, fn, opts)
  opts = name_opts(self, fn, opts, { torch_names = true, strict = fn == "load_state_dict" or nil })
  local out, order = {}, {}
  for _, kind in ipairs({ "param", "buffer" }) do
    for _, e in ipairs(named(self, kind, opts.torch_names, true, true)) do
      out[e[1]] = e[2]
      order[#order + 1] = e[1]
    end
  end
  return out, order
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
  local mine, order = own_state(self, "load_state_dict", opts)
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
    for _, k in ipairs(order) do   -- in the module's order: of a shared tensor's names the last wins, as in PyTorch
      if sd[k] ~= nil then mine[k]:copy_(sd[k]) end
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
-- Dtype conversions leave integer and bool buffers as they are;
-- memory_format "channels_last" converts the 4-D ones (conv weights) and
-- leaves the rest. Nothing is converted while a recording tracks one of the
-- tensors.
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
  -- channels_last applies to the 4-D tensors (conv weights), as PyTorch's
  local function convert(t)
    local fmt = target.memory_format
    if fmt == "channels_last" and t:dim() ~= 4 then fmt = nil end
    local args = { dtype = FLOATING[t.dtype] and target.dtype or nil, device = target.device,
      non_blocking = target.non_blocking, memory_format = fmt }
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

-- what the containers (nn/containers.lua) share with the base class
return { Module = Module, fields = fields, own = own, is_module = is_module, list_kind = list_kind,
  list_entry_error = list_entry_error, newindex = instance_newindex }
