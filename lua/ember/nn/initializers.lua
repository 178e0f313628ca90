-- ember.nn.init: PyTorch's initialisers, with its gains and fan modes. Each
-- fills a floating point tensor in place from the seeded generator
-- (ember.manual_seed), outside any recording (as PyTorch's run under
-- no_grad), and returns it. Arguments come positionally in PyTorch's order or
-- as one options table with PyTorch's names:
--
--   init.kaiming_uniform_(w, math.sqrt(5))            -- a, mode, nonlinearity
--   init.kaiming_uniform_(w, { mode = "fan_out", nonlinearity = "relu" })
--
-- Not here: the draws themselves (Tensor.uniform_ and normal_ in C).
local ember = require("ember")

local init = {}
local is_tensor = ember.is_tensor
local F64 = { dtype = "float64" }

local errors = require("ember.errors")
local function fail(name, fmt, ...) errors.fail("nn.init." .. name, fmt, ...) end

local shape_str = require("ember.errors").shape

-- The floating point tensor t to fill, then the arguments after it by
-- PyTorch's names: positional (in the order of names) or one table, with
-- defaults for what is missing. Those whose default is a number, or that
-- have none, must be numbers.
local function args(name, t, names, defaults, ...)
  local first, n = ..., select("#", ...)
  local table_form = n == 1 and type(first) == "table" and not is_tensor(first)
  for i = table_form and n + 1 or #names + 1, n do
    local v = select(i, ...)
    if v ~= nil then
      local all = { "tensor" }
      for k, arg in ipairs(names) do all[k + 1] = arg end
      require("ember.errors").extra_argument("ember.nn.init." .. name, i + 1, v, all,
        #names > 0 and ", or the tensor and one options table" or nil, require("ember.nn.args").value_str)
    end
  end
  if not is_tensor(t) then fail(name, "expected a tensor to fill, got %s", type(t)) end
  if not t.dtype:find("float") then fail(name, "expected a floating point tensor, got %s", t.dtype) end
  local o = {}
  if select("#", ...) == 1 and type(first) == "table" and not is_tensor(first) then
    local known = {}
    for _, n in ipairs(names) do known[n] = true end
    for k in pairs(first) do
      if not known[k] then fail(name, "unknown option '%s'", tostring(k)) end
    end
    o = first
  else
    for i, n in ipairs(names) do o[n] = (select(i, ...)) end
  end
  local out = {}
  for i, n in ipairs(names) do
    local v = o[n]
    if v == nil then v = defaults[i] end
    if type(defaults[i]) ~= "string" and type(v) ~= "number" then
      fail(name, "%s must be a number, got %s", n, tostring(v))
    end
    out[i] = v
  end
  return unpack(out, 1, #names)
end

---------------------------------------------------------------- gains and fans
local LINEAR = { linear = true, conv1d = true, conv2d = true, conv3d = true, conv_transpose1d = true,
  conv_transpose2d = true, conv_transpose3d = true, sigmoid = true }

-- the gain PyTorch recommends for a nonlinearity; param is leaky_relu's
-- negative slope (0.01 when nil)
function init.calculate_gain(nonlinearity, param)
  if LINEAR[nonlinearity] then return 1 end
  if nonlinearity == "tanh" then return 5 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2) end
  if nonlinearity == "selu" then return 3 / 4 end
  if nonlinearity == "leaky_relu" then
    local slope = param == nil and 0.01 or param
    if type(slope) ~= "number" then
      fail("calculate_gain", "negative_slope %s is not a valid number", tostring(slope))
    end
    return math.sqrt(2 / (1 + slope * slope))
  end
  fail("calculate_gain", "unsupported nonlinearity %s", tostring(nonlinearity))
end

-- fan_in = size(2) * receptive field, fan_out = size(1) * receptive field:
-- {out, in} for Linear, {out, in / groups, kh, kw} for Conv2d
local function fans(name, t)
  if t:dim() < 2 then
    fail(name, "fan in and fan out need a tensor of 2 or more dims, got %s", shape_str(t))
  end
  local receptive = 1
  for d = 3, t:dim() do receptive = receptive * t:size(d) end
  return t:size(2) * receptive, t:size(1) * receptive
end

function init.calculate_fan_in_and_fan_out(t)
  if not is_tensor(t) then fail("calculate_fan_in_and_fan_out", "expected a tensor, got %s", type(t)) end
  return fans("calculate_fan_in_and_fan_out", t)
end

---------------------------------------------------------------- fills
local function filled(t, fill)
  ember.no_grad(fill)
  return t
end

function init.uniform_(t, ...)
  local a, b = args("uniform_", t, { "a", "b" }, { 0, 1 }, ...)
  if not (a <= b) then fail("uniform_", "expected a <= b, got a = %g, b = %g", a, b) end
  return filled(t, function() t:uniform_(a, b) end)
end

function init.normal_(t, ...)
  local mean, std = args("normal_", t, { "mean", "std" }, { 0, 1 }, ...)
  if not (std >= 0) then fail("normal_", "std must be >= 0, got %g", std) end
  return filled(t, function() t:normal_(mean, std) end)
end

function init.constant_(t, ...)
  local val = args("constant_", t, { "val" }, {}, ...)
  return filled(t, function() t:fill_(val) end)
end

-- (t) or (t, {}): the table form with nothing in it
function init.zeros_(t, ...)
  args("zeros_", t, {}, {}, ...)
  return init.constant_(t, 0)
end
function init.ones_(t, ...)
  args("ones_", t, {}, {}, ...)
  return init.constant_(t, 1)
end

-- std = gain sqrt(2 / (fan_in + fan_out)); the uniform bound is sqrt(3) std
local function xavier_std(name, t, ...)
  local gain = args(name, t, { "gain" }, { 1 }, ...)
  local fan_in, fan_out = fans(name, t)
  return gain * math.sqrt(2 / (fan_in + fan_out))
end

function init.xavier_uniform_(t, ...)
  local bound = math.sqrt(3) * xavier_std("xavier_uniform_", t, ...)
  return filled(t, function() t:uniform_(-bound, bound) end)
end

function init.xavier_normal_(t, ...)
  local std = xavier_std("xavier_normal_", t, ...)
  return filled(t, function() t:normal_(0, std) end)
end

-- std = gain(nonlinearity, a) / sqrt(fan); nil for a tensor with no elements,
-- which PyTorch leaves as it is
local function kaiming_std(name, t, ...)
  local a, mode, nonlinearity =
    args(name, t, { "a", "mode", "nonlinearity" }, { 0, "fan_in", "leaky_relu" }, ...)
  if t:numel() == 0 then return nil end
  if mode ~= "fan_in" and mode ~= "fan_out" then
    fail(name, "mode must be 'fan_in' or 'fan_out', got %s", tostring(mode))
  end
  local fan_in, fan_out = fans(name, t)
  return init.calculate_gain(nonlinearity, a) / math.sqrt(mode == "fan_in" and fan_in or fan_out)
end

function init.kaiming_uniform_(t, ...)
  local std = kaiming_std("kaiming_uniform_", t, ...)
  if std == nil then return t end
  local bound = math.sqrt(3) * std
  return filled(t, function() t:uniform_(-bound, bound) end)
end

function init.kaiming_normal_(t, ...)
  local std = kaiming_std("kaiming_normal_", t, ...)
  if std == nil then return t end
  return filled(t, function() t:normal_(0, std) end)
end

---------------------------------------------------------------- orthogonal
-- The Q of a = QR with R's diagonal positive, for a (m, n), m >= n, float64:
-- Gram-Schmidt, each column orthogonalised twice ("twice is enough" keeps
-- Q^T Q = I to rounding). That Q is unique, so it is the one PyTorch takes
-- from linalg.qr and fixes by the signs of R's diagonal.
local function q_of(a)
  local n = a:size(2)
  local q = ember.zeros(a:shape(), F64)
  for j = 1, n do
    local v = a:select(2, j)
    if j > 1 then
      local done = q:narrow(2, 1, j - 1)
      for _ = 1, 2 do v = v - done:matmul(done:t():matmul(v)) end
    end
    q:select(2, j):copy_(v / v:norm())
  end
  return q
end

-- (rows, cols) = (size(1), numel / size(1)) with orthonormal rows (rows <=
-- cols) or columns, times gain
function init.orthogonal_(t, ...)
  local gain = args("orthogonal_", t, { "gain" }, { 1 }, ...)
  if t:dim() < 2 then
    fail("orthogonal_", "only tensors with 2 or more dims are supported, got %s", shape_str(t))
  end
  if t:numel() == 0 then return t end
  local rows = t:size(1)
  local cols = t:numel() / rows
  return filled(t, function()
    local a = ember.empty({ rows, cols }, F64):normal_()
    local q = rows < cols and q_of(a:t()):t() or q_of(a)
    t:copy_((q * gain):view(t:shape()))
  end)
end

return init
