-- ember.nn: modules in the Torch7/PyTorch style.
--
--   local Net = nn.Module:extend("Net")
--   function Net:init(n) self.fc = nn.Linear(n, 10) end
--   function Net:forward(x) return self.fc(x) end
--   local net = Net(784)
--
-- A module records the tensors and modules assigned to it, in assignment
-- order: tensors become parameters (unless registered as buffers with
-- self:register_buffer), modules become children. Parameters, state_dict keys
-- and children all follow that order; reassigning a name keeps its place.
-- Modules keep no per-call state, so one module may appear twice in a graph.
local ember = require("ember")
local F = require("ember.nn.functional")

local errors = require("ember.errors")

local nn = { functional = F }
local is_tensor = ember.is_tensor
local shape_str = errors.shape

---------------------------------------------------------------- Module
local Module = {}
Module.__name = "Module"
nn.Module = Module

-- per-instance bookkeeping lives in fields the user never assigns
local function fields(self) return rawget(self, "_fields") end

local function instance_index(self, k)
  local f = rawget(self, "_fields")
  local v = f.values[k]
  if v ~= nil then return v end
  return getmetatable(self).__class[k]
end

local function instance_newindex(self, k, v)
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
  if is_tensor(v) then newkind = kind == "buffer" and "buffer" or "param"
  elseif type(v) == "table" and getmetatable(v) and getmetatable(v).__module then newkind = "module"
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

-- Module:extend("Name") makes a subclass; calling the class makes an instance
-- and runs its init(...).
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
    __call = function(m, ...) return m:forward(...) end,
    __tostring = function(m) return m:__repr() end,
  }
  return class
end

function Module:new(...)
  local obj = { _fields = { values = {}, kind = {}, order = {} }, training = true }
  setmetatable(obj, self.__instance_mt)
  obj:init(...)
  return obj
end

function Module:init() end

function Module:forward()
  errors.raise("ember.nn." .. self.__name .. ": forward is not defined")
end

function Module:register_buffer(name, t)
  local f = fields(self)
  if t ~= nil and not is_tensor(t) then
    errors.raise(("ember.nn.%s: register_buffer('%s') needs a tensor, got %s"):format(self.__name, name, type(t)))
  end
  if not f.kind[name] then f.order[#f.order + 1] = name end
  f.kind[name], f.values[name] = "buffer", t
end

-- the module's own entries of one kind, in order: list of {name, value}
local function own(self, kind)
  local f, out = fields(self), {}
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

local function named(self, kind)
  local list, seen = setmetatable({ _pos = {} }, NamedList), {}
  walk(self, "", function(prefix, m)
    for _, e in ipairs(own(m, kind)) do
      local t = e[2]
      if kind == "buffer" or not seen[t] then
        seen[t] = true
        local name = prefix .. e[1]
        list[#list + 1] = { name, t, name = name, tensor = t }
        list._pos[name] = #list
        rawset(list, name, t)
      end
    end
  end)
  return list
end

function Module:named_parameters() return named(self, "param") end
function Module:named_buffers() return named(self, "buffer") end

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

-- PyTorch numbers the children of Sequential and ModuleList from 0, ember
-- from 1: a state_dict key in PyTorch's naming ("1.fc.weight" -> "0.fc.weight")
local function torch_key(self, key)
  local m, parts = self, {}
  for part in key:gmatch("[^.]+") do
    local f = m and fields(m)
    local child = f and f.kind[part] == "module" and f.values[part] or nil
    if child and m._numbered_children then part = tostring(tonumber(part) - 1) end
    parts[#parts + 1] = part
    m = child
  end
  return table.concat(parts, ".")
end

-- key -> tensor for every parameter and buffer, keys in ember's naming or
-- (opts.torch_names) PyTorch's
local function own_state(self, fn, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error(("ember.nn.%s: %s: options must be a table, got %s"):format(self.__name, fn, type(opts)), 3)
  end
  for k in pairs(opts or {}) do
    if k ~= "torch_names" and not (k == "strict" and fn == "load_state_dict") then
      error(("ember.nn.%s: %s: unknown option '%s'"):format(self.__name, fn, tostring(k)), 3)
    end
  end
  local torch, out = opts and opts.torch_names, {}
  for _, kind in ipairs({ "param", "buffer" }) do
    for _, e in ipairs(named(self, kind)) do out[torch and torch_key(self, e[1]) or e[1]] = e[2] end
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

-- module-wide conversions: t:to(...) on every parameter and buffer, in place
function Module:to(...)
  local args = { ... }
  walk(self, "", function(_, m)
    local f = fields(m)
    for _, k in ipairs(f.order) do
      if f.kind[k] ~= "module" and f.values[k] ~= nil then
        local moved = ember.no_grad(function() return f.values[k]:to(unpack(args)) end)
        f.values[k] = moved:detach()
      end
    end
  end)
  return self
end
function Module:float() return self:to("float32") end
function Module:double() return self:to("float64") end
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
    if not allowed[k] then errors.raise(("ember.nn.%s: unknown option '%s'"):format(layer, tostring(k))) end
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
function Linear:init(nin, nout, opts)
  if type(opts) == "boolean" then opts = { bias = opts } end
  opts = check_opts("Linear", opts, { bias = true, dtype = true })
  self.in_features = check_int("Linear", "in_features", nin, 0)
  self.out_features = check_int("Linear", "out_features", nout, 0)
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
-- (stride and padding may also come positionally, as in PyTorch); activation
-- "relu" makes the layer PyTorch's ConvReLU2d, F.conv2d_relu's one fused op
function Conv2d:init(cin, cout, kernel, opts, padding)
  if type(opts) == "number" or (type(opts) == "table" and #opts == 2) then
    opts = { stride = opts, padding = padding }
  end
  opts = check_opts("Conv2d", opts, { stride = true, padding = true, dilation = true, groups = true,
    bias = true, dtype = true, activation = true })
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

local function pool_class(name, fn)
  local P = Module:extend(name)
  -- nn.MaxPool2d(kernel, {stride = kernel, padding = 0}) (or positional stride, padding)
  function P:init(kernel, opts, padding)
    if type(opts) == "number" then opts = { stride = opts, padding = padding } end
    opts = check_opts(name, opts, { stride = true, padding = true })
    for what, v in pairs({ kernel_size = kernel, stride = opts.stride or kernel }) do
      local vals = type(v) == "table" and v or { v }
      for _, k in ipairs(vals) do check_int(name, what, k, 1) end
    end
    self.kernel_size, self.stride, self.padding = kernel, opts.stride or kernel, opts.padding or 0
  end
  function P:forward(x)
    need_input(name, x, function(t) return t:dim() == 4 end, "{N, C, H, W}")
    return fn(x, self.kernel_size, { stride = self.stride, padding = self.padding })
  end
  function P:extra_repr()
    return ("kernel_size=%s, stride=%s, padding=%s"):format(tostring(self.kernel_size), tostring(self.stride),
      tostring(self.padding))
  end
  return P
end
nn.MaxPool2d = pool_class("MaxPool2d", F.max_pool2d)
nn.AvgPool2d = pool_class("AvgPool2d", F.avg_pool2d)

local function batchnorm_class(name, dims)
  local B = Module:extend(name)
  -- nn.BatchNorm2d(C, {eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true})
  function B:init(num_features, opts)
    opts = check_opts(name, opts, { eps = true, momentum = true, affine = true, track_running_stats = true,
      dtype = true })
    self.num_features = check_int(name, "num_features", num_features)
    self.eps, self.momentum = opts.eps or 1e-5, opts.momentum or 0.1
    local dt = { dtype = opts.dtype or "float32" }
    if opts.affine ~= false then
      self.weight = ember.ones({ num_features }, dt)
      self.bias = ember.zeros({ num_features }, dt)
    end
    if opts.track_running_stats ~= false then
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
    if self.training and self.num_batches_tracked then
      ember.no_grad(function() self.num_batches_tracked:add_(1) end)
    end
    return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
      { training = training, momentum = self.momentum, eps = self.eps })
  end
  function B:extra_repr()
    return ("%d, eps=%g, momentum=%g"):format(self.num_features, self.eps, self.momentum)
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
-- nn.Embedding(num, dim): weight {num, dim} from N(0, 1); indices are 1-based
function Embedding:init(num, dim, opts)
  opts = check_opts("Embedding", opts, { dtype = true })
  self.num_embeddings = check_int("Embedding", "num_embeddings", num)
  self.embedding_dim = check_int("Embedding", "embedding_dim", dim)
  self.weight = ember.randn({ num, dim }, { dtype = opts.dtype or "float32" })
end
function Embedding:forward(idx)
  if is_tensor(idx) and (idx.dtype == "int64" or idx.dtype == "int32") and idx:numel() > 0 then
    local lo, hi = idx:min():item(), idx:max():item()
    if lo < 1 or hi > self.num_embeddings then
      errors.raise(("ember.nn.Embedding: index %d is out of range 1..%d"):format(lo < 1 and lo or hi, self.num_embeddings))
    end
  end
  return F.embedding(idx, self.weight)
end
function Embedding:extra_repr() return ("%d, %d"):format(self.num_embeddings, self.embedding_dim) end

local function activation(name, fn)
  local A = Module:extend(name)
  function A:init(opts) self.opts = opts end
  function A:forward(x)
    if not is_tensor(x) then errors.raise(("ember.nn.%s: input must be a tensor, got %s"):format(name, type(x))) end
    return fn(x, self.opts)
  end
  return A
end
nn.ReLU = activation("ReLU", F.relu)
nn.GELU = activation("GELU", F.gelu)
nn.Tanh = activation("Tanh", F.tanh)
nn.Sigmoid = activation("Sigmoid", F.sigmoid)
nn.SiLU = activation("SiLU", F.silu)
nn.Softmax = activation("Softmax", function(x, dim) return x:softmax(dim or -1) end)
nn.LogSoftmax = activation("LogSoftmax", function(x, dim) return x:log_softmax(dim or -1) end)
nn.Identity = activation("Identity", function(x) return x end)

local Flatten = Module:extend("Flatten")
nn.Flatten = Flatten
-- nn.Flatten(start = 2, end = -1): keeps the batch dim
function Flatten:init(s, e) self.start_dim, self.end_dim = s or 2, e or -1 end
function Flatten:forward(x)
  if not is_tensor(x) then errors.raise("ember.nn.Flatten: input must be a tensor, got " .. type(x)) end
  return x:flatten(self.start_dim, self.end_dim)
end

local Sequential = Module:extend("Sequential")
nn.Sequential = Sequential
Sequential._numbered_children = true   -- 1-based; PyTorch's are 0-based (state_dict's torch_names)
-- children are named "1", "2", ... (state_dict keys "1.weight", ...)
function Sequential:init(...)
  local n = select("#", ...)
  for i = 1, n do
    local m = select(i, ...)
    if not (type(m) == "table" and getmetatable(m) and getmetatable(m).__module) then
      errors.raise(("ember.nn.Sequential: argument %d is not a module (got %s)"):format(i, type(m)))
    end
    self[tostring(i)] = m
  end
  self.n = n
end
function Sequential:add(m)
  self.n = self.n + 1
  self[tostring(self.n)] = m
  return self
end
function Sequential:get(i) return self[tostring(i)] end
function Sequential:__len() return self.n end
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
    and rawget(p, "forward") == nil and no_padding(p.padding)
end
function Sequential:forward(x)
  local i = 1
  while i <= self.n do
    local m, r = self[tostring(i)], self[tostring(i + 1)]
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

local ModuleList = Module:extend("ModuleList")
nn.ModuleList = ModuleList
ModuleList._numbered_children = true
function ModuleList:init(list)
  self.n = 0
  for _, m in ipairs(list or {}) do self:append(m) end
end
function ModuleList:append(m)
  self.n = self.n + 1
  self[tostring(self.n)] = m
  return self
end
function ModuleList:get(i) return self[tostring(i)] end
function ModuleList:iter()
  local i = 0
  return function()
    i = i + 1
    if i <= self.n then return i, self[tostring(i)] end
  end
end

---------------------------------------------------------------- attention
local MHA = Module:extend("MultiheadAttention")
nn.MultiheadAttention = MHA
-- nn.MultiheadAttention(embed_dim, num_heads, {bias = true, dropout = 0, batch_first = false})
-- forward(q, k, v, {attn_mask =, is_causal =, need_weights = true,
-- key_padding_mask =}) -> output, weights averaged over heads (or nil).
-- Inputs are (L, N, E), or (N, L, E) with batch_first, or unbatched (L, E).
-- attn_mask: bool (true = may not attend, as in PyTorch) or additive float.
function MHA:init(embed_dim, num_heads, opts)
  opts = check_opts("MultiheadAttention", opts, { bias = true, dropout = true, batch_first = true, dtype = true })
  check_int("MultiheadAttention", "embed_dim", embed_dim)
  check_int("MultiheadAttention", "num_heads", num_heads)
  if embed_dim % num_heads ~= 0 then
    errors.raise(("ember.nn.MultiheadAttention: embed_dim %d must be divisible by num_heads %d"):format(embed_dim, num_heads))
  end
  self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim / num_heads
  self.dropout, self.batch_first = opts.dropout or 0, opts.batch_first or false
  -- xavier uniform for the packed projection, as PyTorch
  local bound = math.sqrt(6 / (embed_dim + embed_dim))
  self.in_proj_weight = uniform({ 3 * embed_dim, embed_dim }, bound, opts.dtype)
  if opts.bias ~= false then
    self.in_proj_bias = ember.zeros({ 3 * embed_dim }, { dtype = opts.dtype or "float32" })
  end
  self.out_proj = Linear(embed_dim, embed_dim, { bias = opts.bias ~= false, dtype = opts.dtype })
  if opts.bias ~= false then ember.no_grad(function() self.out_proj.bias:zero_() end) end
end

function MHA:forward(q, k, v, opts)
  opts = opts or {}
  k, v = k or q, v or k or q
  local E, H, D = self.embed_dim, self.num_heads, self.head_dim
  for _, t in ipairs({ q, k, v }) do
    need_input("MultiheadAttention", t, function(x) return (x:dim() == 3 or x:dim() == 2) and x:size(-1) == E end,
      ("{L, N, %d}, {N, L, %d} with batch_first, or {L, %d}"):format(E, E, E))
  end
  local unbatched = q:dim() == 2
  if unbatched then q, k, v = q:unsqueeze(2), k:unsqueeze(2), v:unsqueeze(2)
  elseif self.batch_first then q, k, v = q:transpose(1, 2), k:transpose(1, 2), v:transpose(1, 2) end
  -- now (L, N, E)
  local Lq, N, Lk = q:size(1), q:size(2), k:size(1)
  local w, b = self.in_proj_weight, self.in_proj_bias
  local function proj(x, i)
    return F.linear(x, w:narrow(1, (i - 1) * E + 1, E), b and b:narrow(1, (i - 1) * E + 1, E))
  end
  -- (L, N, E) -> (N, H, L, D)
  local function heads(x, L) return x:reshape(L, N, H, D):permute({ 2, 3, 1, 4 }) end
  local qh, kh, vh = heads(proj(q, 1), Lq), heads(proj(k, 2), Lk), heads(proj(v, 3), Lk)
  local mask = opts.attn_mask
  if opts.key_padding_mask ~= nil then   -- (N, Lk), true = padding
    local kpm = opts.key_padding_mask:view(N, 1, 1, Lk)
    if mask == nil then mask = kpm
    elseif mask.dtype == "bool" then mask = ember.maximum(mask:to("int32"), kpm:to("int32")):gt(0)
    else mask = ember.where(kpm, -math.huge, mask) end
  end
  local out, attn = F.scaled_dot_product_attention(qh, kh, vh, { attn_mask = mask, is_causal = opts.is_causal,
    dropout = self.dropout, training = self.training })
  -- (N, H, Lq, D) -> (Lq, N, E)
  out = self.out_proj(out:permute({ 3, 1, 2, 4 }):reshape(Lq, N, E))
  if unbatched then out = out:squeeze(2)
  elseif self.batch_first then out = out:transpose(1, 2) end
  local weights
  if opts.need_weights ~= false then
    weights = attn:mean(2)   -- (N, Lq, Lk)
    if unbatched then weights = weights:squeeze(1) end
  end
  return out, weights
end

-- an upper-triangular bool mask for causal attention over L positions (true = masked)
function nn.causal_mask(L)
  return ember.arange(L):view(1, L):gt(ember.arange(L):view(L, 1))
end

for _, file in ipairs({ "loss", "conv", "norm", "resize" }) do   -- nn.MSELoss, nn.Conv1d, ...
  require("ember.nn." .. file).register(nn)
end
nn.init = require("ember.nn.initializers")
nn.utils = require("ember.nn.utils")
-- RNN, LSTM, GRU and their cells (nn/rnn.lua), built on the helpers above
require("ember.nn.rnn")(nn, { check_int = check_int, check_opts = check_opts, uniform = uniform, need_input = need_input })

return nn
