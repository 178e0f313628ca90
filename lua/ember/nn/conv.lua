-- ember.nn.conv: the convolutions built on conv2d's kernels. conv1d is conv2d
-- over a height of 1; conv_transpose2d is conv2d's input gradient, the op
-- conv2d_backward_input, whose own rule makes conv2d and conv2d_backward_weight
-- of it, so gradients of any order follow. Each is a function of
-- ember.nn.functional and a module of ember.nn (M.register), with PyTorch's
-- signatures, weight layouts, defaults and initialisation:
--
--   F.conv1d(x, w, b, {stride = 1, padding = 0, dilation = 1, groups = 1})
--   F.conv_transpose2d(x, w, b, {stride = 1, padding = 0, output_padding = 0,
--                                groups = 1, dilation = 1})
--
-- N batch, C channels, L length, H x W spatial; weights are (out, C / groups,
-- k) for conv1d and (C, out / groups, kH, kW) for conv_transpose2d.
local ember = require("ember")
local ffi = require("ffi")
local A = require("ember.nn.args")
local pad = require("ember.nn.resize").functional.pad
local amp = require("ember.amp")   -- autocast: amp._dtype is set inside a scope

local C = ember._C
local fail, spread, shape_str = A.fail, A.spread, A.shape_str
local M = { functional = {} }
local F = M.functional

local out1 = ffi.new("ember_tensor*[1]")
local check, int64s, ptr = require("ember.errors").check, A.int64s, A.ptr

local check_layout = A.conv_layout

-- y (N, Cout, ...) plus b (nil, or one per output channel); conv3d.lua's too
local function add_bias(y, b)
  if b == nil then return y end
  local shape = { 1, -1 }
  for d = 3, y:dim() do shape[d] = 1 end
  return y + b:view(shape)
end
M.add_bias = add_bias

-- F[name](x, w, b, opts), also F[name](x, w, opts): fn(op, x, w, b, o) with
-- the options checked against spec
local function functional(name, spec, fn)
  local op = "ember.nn.functional." .. name
  F[name] = function(x, w, b, opts)
    b, opts = A.bias_opts(b, opts)
    return fn(op, x, w, b, A.options(op, opts, spec))
  end
end

-- fn on autocast's lower-precision list: the function and the module both
-- reach it through this
local function lowered(fn)
  return function(op, x, w, b, o)
    if amp._dtype then x, w, b = amp._down(x, w, b) end
    return fn(op, x, w, b, o)
  end
end

---------------------------------------------------------------- conv1d
local CONV1D = { { "stride", 1, A.ints(1, 1) }, { "padding", 0, A.ints(1, 0) },
  { "dilation", 1, A.ints(1, 1) }, { "groups", 1, A.int(1) } }

local function conv1d(op, x, w, b, o)
  check_layout(op, x, w, b, 3, o.groups)
  local s, p, d = spread(o.stride, 1)[1], spread(o.padding, 1)[1], spread(o.dilation, 1)[1]
  local span = d * (w:size(3) - 1) + 1
  if x:size(3) + 2 * p < span then
    fail(op, "input %s padded by %d is shorter than the kernel's span %d (weight %s, dilation %d)",
      shape_str(x), p, span, shape_str(w), d)
  end
  check(C.ember_conv2d(ptr(op, x:unsqueeze(3), 1), ptr(op, w:unsqueeze(3), 2),
    int64s({ 1, s }), int64s({ 0, p }), int64s({ 1, d }), o.groups, out1))
  return add_bias(ember._wrap(out1[0]):squeeze(3), b)
end

conv1d = lowered(conv1d)
functional("conv1d", CONV1D, conv1d)

---------------------------------------------------------------- conv_transpose2d
local CONVT2D = { { "stride", 1, A.ints(2, 1) }, { "padding", 0, A.ints(2, 0) },
  { "output_padding", 0, A.ints(2, 0) }, { "groups", 1, A.int(1) },
  { "dilation", 1, A.ints(2, 1) } }

-- The output is the input gradient of conv2d(y, w) for the y of size
-- (in - 1) s - 2p + d (k - 1) + output_padding + 1 along each spatial dim.
-- That conv2d gives in + floor(output_padding / s) positions, so the input
-- gets that many zero rows (columns) at its end: they add nothing.
local function conv_transpose2d(op, x, w, b, o)
  local cout = check_layout(op, x, w, b, 4, o.groups, true)
  local s, p, d = spread(o.stride, 2), spread(o.padding, 2), spread(o.dilation, 2)
  local op_ = spread(o.output_padding, 2)
  local shape, extra = { x:size(1), cout }, {}
  for i = 1, 2 do
    if op_[i] >= s[i] and op_[i] >= d[i] then
      fail(op, "output_padding {%d, %d} must be smaller than either stride {%d, %d} or dilation "
        .. "{%d, %d}", op_[1], op_[2], s[1], s[2], d[1], d[2])
    end
    shape[i + 2] = (x:size(i + 2) - 1) * s[i] - 2 * p[i] + d[i] * (w:size(i + 2) - 1) + op_[i] + 1
    extra[i] = math.floor(op_[i] / s[i])
  end
  if shape[3] < 1 or shape[4] < 1 then
    fail(op, "input %s and weight %s with padding {%d, %d} give an empty output {%d, %d}",
      shape_str(x), shape_str(w), p[1], p[2], shape[3], shape[4])
  end
  if extra[1] + extra[2] > 0 then x = pad(x, { 0, extra[2], 0, extra[1] }) end
  check(C.ember_conv2d_backward_input(ptr(op, x, 1), ptr(op, w, 2), int64s(shape),
    int64s(s), int64s(p), int64s(d), o.groups, out1))
  return add_bias(ember._wrap(out1[0]), b)
end

conv_transpose2d = lowered(conv_transpose2d)
functional("conv_transpose2d", CONVT2D, conv_transpose2d)

-- the output_padding that makes conv_transpose2d's output {H, W} (PyTorch's
-- ConvTranspose2d:forward(x, output_size); output_size may also be {N, C, H, W})
local function output_padding_for(op, x, size, m)
  if type(size) ~= "table" or (#size ~= 2 and #size ~= 4) then
    fail(op, "output_size must be a list {H, W} or {N, C, H, W}, got %s", type(size))
  end
  local s, p, d = spread(m.stride, 2), spread(m.padding, 2), spread(m.dilation, 2)
  local result = {}
  for i = 1, 2 do
    local want = size[#size - 2 + i]
    local least = (x:size(i + 2) - 1) * s[i] - 2 * p[i] + d[i] * (m.kernel_size[i] - 1) + 1
    if type(want) ~= "number" or want < least or want >= least + s[i] then
      fail(op, "output_size %s is not reachable from input %s: dim %d must be in %d..%d",
        A.value_str(size), shape_str(x), i, least, least + s[i] - 1)
    end
    result[i] = want - least
  end
  return result
end

---------------------------------------------------------------- modules
-- a convolution module's weight, from kaiming_uniform_(a = sqrt(5)), and
-- (when o.bias) bias, from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in from
-- the weight's second dim as in PyTorch; the weight {in, out / groups,
-- kernel...} when transposed, else {out, in / groups, kernel...}, in o.dtype
function M.init_parameters(m, o, transposed)
  local init = require("ember.nn.initializers")
  local cin, cout = m.in_channels, m.out_channels
  local shape = transposed and { cin, cout / o.groups } or { cout, cin / o.groups }
  for _, k in ipairs(m.kernel_size) do shape[#shape + 1] = k end
  m.weight = init.kaiming_uniform_(ember.empty(shape, { dtype = o.dtype }), math.sqrt(5))
  if o.bias then
    local bound = 1 / math.sqrt(init.calculate_fan_in_and_fan_out(m.weight))
    m.bias = ember.empty({ cout }, { dtype = o.dtype }):uniform_(-bound, bound)
  end
end

local LEAD = { "in_channels", "out_channels", "kernel_size" }   -- the arguments before the positional options
local function conv_class(nn, name, spec, fn, kernel_dims, transposed, positional)
  local op = "ember.nn." .. name
  local K = nn.Module:extend(name)
  local module_spec = A.with(spec, A.BIAS, A.DTYPE)

  -- weight from kaiming_uniform_(a = sqrt(5)), bias from U(-1/sqrt(fan_in),
  -- 1/sqrt(fan_in)), fan_in from the weight's second dim as in PyTorch; the
  -- options may come positionally in PyTorch's order (K.POSITIONAL), an
  -- options table after them
  K.POSITIONAL = positional
  function K:init(cin, cout, kernel, ...)
    local o = A.options(op, A.positional(op, LEAD, positional, ...), module_spec)
    for _, arg in ipairs({ { "in_channels", cin }, { "out_channels", cout } }) do
      if A.int(1)(arg[2]) then
        fail(op, "%s must be an integer >= 1, got %s", arg[1], tostring(arg[2]))
      end
    end
    if A.ints(kernel_dims, 1)(kernel) then
      fail(op, "kernel_size must be %s, got %s", A.ints(kernel_dims, 1)(kernel), tostring(kernel))
    end
    if cin % o.groups ~= 0 or cout % o.groups ~= 0 then
      fail(op, "groups = %d must divide in_channels = %d and out_channels = %d", o.groups, cin,
        cout)
    end
    self.in_channels, self.out_channels, self.kernel_size = cin, cout, spread(kernel, kernel_dims)
    for _, s in ipairs(spec) do self[s[1]] = o[s[1]] end
    M.init_parameters(self, o, transposed)
  end

  function K:layer_options()
    local o = {}
    for _, s in ipairs(spec) do o[s[1]] = self[s[1]] end
    return A.options(op, o, spec)
  end

  function K:forward(x) return fn(op, x, self.weight, self.bias, self:layer_options()) end

  function K:extra_repr()
    return ("%d, %d, kernel_size={%s}, stride=%s"):format(self.in_channels, self.out_channels,
      table.concat(self.kernel_size, ", "), table.concat(spread(self.stride, kernel_dims), ", "))
  end
  nn[name] = K
  return K
end

function M.register(nn)
  -- PyTorch's positional order after kernel_size
  conv_class(nn, "Conv1d", CONV1D, conv1d, 1, false, { "stride", "padding", "dilation", "groups", "bias" })
  local T = conv_class(nn, "ConvTranspose2d", CONVT2D, conv_transpose2d, 2, true,
    { "stride", "padding", "output_padding", "groups", "bias", "dilation" })
  -- m(x, output_size): the output_padding comes from the size asked for
  function T:forward(x, output_size)
    local op, o = "ember.nn.ConvTranspose2d", self:layer_options()
    if output_size ~= nil then
      check_layout(op, x, self.weight, self.bias, 4, o.groups, true)
      o.output_padding = output_padding_for(op, x, output_size, self)
    end
    return conv_transpose2d(op, x, self.weight, self.bias, o)
  end
end

return M
