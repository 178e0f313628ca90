-- ember.nn's containers: Sequential (and the layer pairs it runs as one
-- fused op), ModuleList, ParameterList, ModuleDict, ParameterDict
-- (nn/init.lua gathers nn).
local ember = require("ember")
local F = require("ember.nn.functional")
local errors = require("ember.errors")
local A = require("ember.nn.args")
local base = require("ember.nn.module")
local layers = require("ember.nn.layers")

local Module, fields, own, is_module = base.Module, base.fields, base.own, base.is_module
local list_kind, list_entry_error, instance_newindex = base.list_kind, base.list_entry_error, base.newindex
local linear_input, conv_input, conv_opts = layers.linear_input, layers.conv_input, layers.conv_opts

local M = {}
-- this file's classes, which M.register adds to ember.nn; the fusion rules
-- read the other layers (nn.Linear, nn.MaxPool2d) through it from ember.nn
local nn = {}

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
  return getmetatable(m).__class == nn.Linear and rawget(m, "forward") == nil and m.bias ~= nil and r ~= nil
    and getmetatable(r).__class == nn.ReLU and rawget(r, "forward") == nil
end
-- a Conv2d with a bias and activation "relu" followed by a MaxPool2d
-- without padding runs as one F.conv2d_relu_max_pool2d
local function no_padding(p) return p == 0 or (type(p) == "table" and p[1] == 0 and p[2] == 0) end
local function conv_relu_then_pool(m, p)
  return getmetatable(m).__class == nn.Conv2d and rawget(m, "forward") == nil and m.bias ~= nil
    and m.activation == "relu" and p ~= nil and getmetatable(p).__class == nn.MaxPool2d
    and rawget(p, "forward") == nil and no_padding(p.padding) and p.dilation == 1 and not p.ceil_mode
    and not p.return_indices
end
-- a BatchNorm1d/2d followed by a ReLU or ReLU6 runs as one F.batch_norm
-- with that activation (the op batch_norm_act in training, channel_affine
-- in eval mode)
local function bn_then_act(m, r)
  local cls = getmetatable(m).__class
  if not ((cls == nn.BatchNorm2d or cls == nn.BatchNorm1d) and rawget(m, "forward") == nil and r ~= nil
      and rawget(r, "forward") == nil) then
    return nil
  end
  local rc = getmetatable(r).__class
  return rc == nn.ReLU and "relu" or rc == nn.ReLU6 and "relu6" or nil
end
-- Layers whose forward keeps neither its input nor its output anywhere (the
-- classes as the library defines them, no forward of the instance's own).
-- Between two of them the tensor passed on is a temporary nobody else can
-- see: Sequential frees its wrapper once the next layer has run (what the
-- tape saved keeps its memory until backward), so it goes back to the
-- allocator then rather than at the next GC (ember._drop).
local PASS_THROUGH
local function keeps_nothing(m)
  if not PASS_THROUGH then
    PASS_THROUGH = {}
    for _, name in ipairs({ "Linear", "ReLU", "Flatten", "Dropout", "Conv2d", "MaxPool2d", "AvgPool2d", "Tanh",
        "Sigmoid", "GELU" }) do
      if nn[name] then PASS_THROUGH[nn[name]] = true end
    end
  end
  return PASS_THROUGH[getmetatable(m).__class] == true and rawget(m, "forward") == nil
end
function Sequential:forward(x)
  local i, n = 1, #self
  local temp = false   -- x was made here by a layer that keeps nothing
  while i <= n do
    local m, r = rawget(self, i), rawget(self, i + 1)
    if not is_module(m) then
      errors.raise(("ember.nn.Sequential: entry %d must be a module, got %s"):format(i, A.value_str(m)))
    end
    if not is_module(r) then r = nil end
    local prev, lib, act = x, true, bn_then_act(m, r)
    if linear_then_relu(m, r) then
      linear_input(m, x)
      x = F.linear_relu(x, m.weight, m.bias)
      i = i + 2
    elseif conv_relu_then_pool(m, r) then
      conv_input(m, x)
      x = F.conv2d_relu_max_pool2d(x, m.weight, m.bias, conv_opts(m), r.kernel_size, { stride = r.stride })
      i = i + 2
    elseif act then
      x = m:_forward(x, act)
      i = i + 2
    else
      lib = keeps_nothing(m)
      x = m(x)
      i = i + 1
    end
    if not rawequal(x, prev) then
      if temp and lib then ember._drop(prev) end
      temp = lib
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

function M.register(target)
  for k, v in pairs(nn) do target[k] = v end
  setmetatable(nn, { __index = target })
end

return M
