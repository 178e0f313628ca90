-- ember.nn's core layers: Linear, Conv2d, BatchNorm1d/2d, LayerNorm, Dropout,
-- Embedding, the activation modules of one argument and Flatten, with the
-- argument checks the other layer files share (nn/init.lua gathers nn).
local ember = require("ember")
local F = require("ember.nn.functional")
local errors = require("ember.errors")
local A = require("ember.nn.args")

local is_tensor = ember.is_tensor
local shape_str = errors.shape
local Module = require("ember.nn.module").Module

local M = {}
local nn = {}   -- this file's classes, which M.register adds to ember.nn

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
  if opts.bias ~= nil and type(opts.bias) ~= "boolean" then
    errors.raise(("ember.nn.Linear: bias must be a boolean, got %s"):format(A.value_str(opts.bias)))
  end
  local nin = check_int("Linear", "in_features", in_features, 0)
  local nout = check_int("Linear", "out_features", out_features, 0)
  self.in_features, self.out_features = nin, nout
  local bound = nin > 0 and 1 / math.sqrt(nin) or 0
  self.weight = uniform({ nout, nin }, bound, opts.dtype)
  if opts.bias ~= false then self.bias = uniform({ nout }, bound, opts.dtype) end
end
-- (the check's closure in a function of its own: conv_input's note below)
local function linear_input_error(n, x)
  need_input("Linear", x, function(t) return t:dim() >= 1 and t:size(-1) == n end,
    ("last dim %d, as in {N, %d}"):format(n, n))
end
local function linear_input(m, x)
  local n = m.in_features
  if not (is_tensor(x) and x:dim() >= 1 and x:size(-1) == n) then linear_input_error(n, x) end
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
-- (the checks' closures are made only on the way to an error, in a function
-- of their own: making one, or a function that could, each call stops
-- LuaJIT's trace, and a batch-1 forward is mostly such calls)
local function conv_input_error(c, x)
  need_input("Conv2d", x, function(t) return t:dim() == 4 and t:size(2) == c end,
    ("{N, %d, H, W}"):format(c))
end
local function conv_input(m, x)
  local c = m.in_channels
  if not (is_tensor(x) and x:dim() == 4 and x:size(2) == c) then conv_input_error(c, x) end
end
local function conv_opts(m)
  return { stride = m.stride, padding = m.padding, dilation = m.dilation, groups = m.groups }
end
-- The C call's stride, padding and dilation pairs and groups
-- (F._conv_options), kept per module while its fields hold the values they
-- were made from: {s1, s2, p1, p2, d1, d2, groups, stride, padding,
-- dilation} (a field set anew, or a pair changed in place, makes them again)
local kept_options = setmetatable({}, { __mode = "k" })
local function is_pair(v, a, b)
  if type(v) == "number" then return v == a and v == b end
  return type(v) == "table" and #v == 2 and v[1] == a and v[2] == b
end
local function conv_options(m, op)
  local e = kept_options[m]
  local s, p, d, g = m.stride, m.padding, m.dilation, m.groups
  if e and is_pair(s, e[1], e[2]) and is_pair(p, e[3], e[4]) and is_pair(d, e[5], e[6]) and (g or 1) == e[7] then
    return e
  end
  local sp, pp, dp, groups = F._conv_options(op, s, p, d, g)
  e = { tonumber(sp[0]), tonumber(sp[1]), tonumber(pp[0]), tonumber(pp[1]), tonumber(dp[0]), tonumber(dp[1]), groups,
    sp, pp, dp }
  kept_options[m] = e
  return e
end
function Conv2d:forward(x)
  conv_input(self, x)
  local relu = self.activation == "relu"
  local e = conv_options(self, relu and "conv2d_relu" or "conv2d")
  return F._conv2d_pairs(x, self.weight, self.bias, e[8], e[9], e[10], e[7], relu)
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
-- one more batch seen (ember.no_grad runs it: no closure made per call)
local function count_batch(num_batches_tracked) num_batches_tracked:add_(1) end
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
  function B:forward(x) return self:_forward(x) end
  -- with activation "relu" or "relu6": F.batch_norm's (nn.Sequential's
  -- BatchNorm then ReLU or ReLU6, containers.lua)
  local function fits(t, c)
    for _, d in ipairs(dims) do if t:dim() == d then return t:size(2) == c end end
    return false
  end
  -- (the check's closure in a function of its own: conv_input's note)
  local function input_error(x, c)
    need_input(name, x, function(t) return fits(t, c) end,
      dims[1] == 4 and ("{N, %d, H, W}"):format(c) or ("{N, %d} or {N, %d, L}"):format(c, c))
  end
  function B:_forward(x, activation)
    local c = self.num_features
    if not (is_tensor(x) and fits(x, c)) then input_error(x, c) end
    local training = self.training or self.running_mean == nil
    local momentum = self.momentum
    local batches = self.num_batches_tracked
    if self.training and batches then
      ember.no_grad(count_batch, batches)
      if momentum == false then momentum = 1 / batches:item() end
    end
    return F._batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, training, momentum or 0,
      self.eps, activation)
  end
  function B:extra_repr()
    return ("%d, eps=%g, momentum=%s"):format(self.num_features, self.eps,
      self.momentum == false and "None" or ("%g"):format(self.momentum))
  end
  return B
end
nn.BatchNorm1d = batchnorm_class("BatchNorm1d", { 2, 3 })
nn.BatchNorm2d = batchnorm_class("BatchNorm2d", { 4 })

-- LayerNorm's and RMSNorm's set-up: normalized_shape (a number or a list) and, unless
-- elementwise_affine = false, a weight of ones (and with_bias, a bias of zeros); returns the options
local function normalized_init(self, name, shape, opts, with_bias)
  opts = check_opts(name, opts, { eps = true, elementwise_affine = true, dtype = true })
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" then errors.raise(("ember.nn.%s: normalized_shape must be a number or a list"):format(name)) end
  self.normalized_shape = shape
  if opts.elementwise_affine ~= false then
    self.weight = ember.ones(shape, { dtype = opts.dtype or "float32" })
    if with_bias then self.bias = ember.zeros(shape, { dtype = opts.dtype or "float32" }) end
  end
  return opts
end

local LayerNorm = Module:extend("LayerNorm")
nn.LayerNorm = LayerNorm
-- nn.LayerNorm(normalized_shape, {eps = 1e-5, elementwise_affine = true})
function LayerNorm:init(shape, opts)
  self.eps = normalized_init(self, "LayerNorm", shape, opts, true).eps or 1e-5
end
function LayerNorm:forward(x)
  return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, { eps = self.eps })
end
function LayerNorm:extra_repr() return shape_str(self.normalized_shape) .. (", eps=%g"):format(self.eps) end

local RMSNorm = Module:extend("RMSNorm")
nn.RMSNorm = RMSNorm
-- nn.RMSNorm(normalized_shape, {eps = the dtype's machine epsilon, elementwise_affine = true})
function RMSNorm:init(shape, opts)
  self.eps = normalized_init(self, "RMSNorm", shape, opts, false).eps
end
function RMSNorm:forward(x)
  return F.rms_norm(x, self.normalized_shape, self.weight, { eps = self.eps })
end
function RMSNorm:extra_repr()
  return shape_str(self.normalized_shape) .. (self.eps and (", eps=%g"):format(self.eps) or ", eps=None")
end

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
-- the range is checked in the lookup's copy; a bad index fails naming the module
function Embedding:forward(idx)
  local ok, y = pcall(F.embedding, idx, self.weight, { padding_idx = self.padding_idx, max_norm = self.max_norm,
    norm_type = self.norm_type })
  if ok then return y end
  if is_tensor(idx) and (idx.dtype == "int64" or idx.dtype == "int32") and idx:numel() > 0 then
    local lo, hi = idx:min():item(), idx:max():item()
    if lo < 1 or hi > self.num_embeddings then
      errors.raise(("ember.nn.Embedding: index %d is out of range 1..%d"):format(lo < 1 and lo or hi, self.num_embeddings))
    end
  end
  error(y, 0)
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

function M.register(target)
  for k, v in pairs(nn) do target[k] = v end
end

-- the checks nn/rnn.lua and the containers' fusion rules use
M.check_int, M.check_opts, M.uniform, M.need_input = check_int, check_opts, uniform, need_input
M.linear_input, M.conv_input, M.conv_opts = linear_input, conv_input, conv_opts
return M
