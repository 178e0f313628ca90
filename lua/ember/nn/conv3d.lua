-- ember.nn.conv3d: conv3d and conv_transpose1d, each a function of
-- ember.nn.functional and a module of ember.nn (M.register) with PyTorch
-- 1.13's signatures, weight layouts, defaults and initialisation:
--
--   F.conv3d(x, w, b = nil, stride = 1, padding = 0, dilation = 1, groups = 1)
--   F.conv_transpose1d(x, w, b = nil, stride = 1, padding = 0, output_padding = 0,
--                      groups = 1, dilation = 1)
--   nn.Conv3d(in, out, kernel_size, stride, padding, dilation, groups, bias = true)
--   nn.ConvTranspose1d(in, out, kernel_size, stride, padding, output_padding, groups,
--                      bias = true, dilation)
--
-- (positional values, then an options table; {dtype =} for the modules).
-- conv3d is a sum over the kernel's depth taps of conv2d: tap j reads the
-- depth positions o s + j d of the (zero-padded) input, every output depth
-- at once as a batch of planes, so the result is exact (up to the order of
-- the sums) and its gradients of any order are conv2d's. conv_transpose1d is
-- conv_transpose2d over a height of 1.
--
-- N batch, C channels, D x H x W spatial (L for 1-D); weights (out, C /
-- groups, kD, kH, kW) for conv3d and (C, out / groups, k) for conv_transpose1d.
local ember = require("ember")
local ffi = require("ffi")
local A = require("ember.nn.args")
local S = require("ember.nn.signature")
local amp = require("ember.amp")
local pad = require("ember.nn.resize").functional.pad
local conv = require("ember.nn.conv")
local conv_transpose2d, add_bias = conv.functional.conv_transpose2d, conv.add_bias

local C = ember._C
local fail, spread, shape_str, value_str = A.fail, A.spread, A.shape_str, A.value_str
local M = { functional = {} }
local F = M.functional

local out1 = ffi.new("ember_tensor*[1]")
local check, int64s, ptr = require("ember.errors").check, A.int64s, A.ptr

local BIAS_ARG = { "bias", nil, A.optional_tensor }
local LEAD = { "input", "weight" }   -- the functions' arguments before their own (S.parse's lead)
local CONV3D = { BIAS_ARG, { "stride", 1, S.ints(3, 1) }, { "padding", 0, S.ints(3, 0) },
  { "dilation", 1, S.ints(3, 1) }, { "groups", 1, S.int(1) } }
local CONVT1D = { BIAS_ARG, { "stride", 1, S.ints(1, 1) }, { "padding", 0, S.ints(1, 0) },
  { "output_padding", 0, S.ints(1, 0) }, { "groups", 1, S.int(1) }, { "dilation", 1, S.ints(1, 1) } }

local check_layout = A.conv_layout

-- run(op, x, w, o) on a batch (N, C, ...) of nd dims, and on the unbatched
-- form (C, ...) as a batch of one
local function batched(nd, run)
  return function(op, x, w, o)
    if ember.is_tensor(x) and x:dim() == nd - 1 then return run(op, x:unsqueeze(1), w, o):squeeze(1) end
    return run(op, x, w, o)
  end
end

---------------------------------------------------------------- conv3d
local conv3d = batched(5, function(op, x, w, o)
  local b = o.bias
  if amp._dtype then x, w, b = amp._down(x, w, b) end
  check_layout(op, x, w, b, 5, o.groups)
  local s, p, d = spread(o.stride, 3), spread(o.padding, 3), spread(o.dilation, 3)
  local N, Cin, D = x:size(1), x:size(2), x:size(3)
  local kD = w:size(3)
  local out = {}
  for i = 1, 3 do
    local span = d[i] * (w:size(2 + i) - 1) + 1
    local L = x:size(2 + i) + 2 * p[i]
    if L < span then
      fail(op, "input %s padded by %s is smaller than the kernel's span (weight %s, dilation %s)",
        shape_str(x), value_str(o.padding), shape_str(w), value_str(o.dilation))
    end
    out[i] = math.floor((L - span) / s[i]) + 1
  end
  local oD = out[1]
  -- the depth padded (and long enough for each tap's oD s positions); H and W padded by conv2d
  local need = (kD - 1) * d[1] + oD * s[1]
  local xp = x
  if p[1] > 0 or need > D + 2 * p[1] then
    xp = pad(x, { 0, 0, 0, 0, p[1], math.max(need - D - p[1], p[1]) })
  end
  local H, W = x:size(4), x:size(5)
  local y
  for j = 0, kD - 1 do
    -- (N, C, oD, H, W): depths o s + j d
    local v = xp:narrow(3, j * d[1] + 1, oD * s[1])
    if s[1] > 1 then v = v:reshape({ N, Cin, oD, s[1], H, W }):select(4, 1) end
    local planes = v:permute({ 1, 3, 2, 4, 5 }):reshape({ N * oD, Cin, H, W })
    local wj = w:select(3, j + 1)
    check(C.ember_conv2d(ptr(op, planes, 1), ptr(op, wj, 2), int64s({ s[2], s[3] }), int64s({ p[2], p[3] }),
      int64s({ d[2], d[3] }), o.groups, out1))
    local t = ember._wrap(out1[0])
    y = y and y + t or t
  end
  local Cout = w:size(1)
  y = y:view({ N, oD, Cout, out[2], out[3] }):permute({ 1, 3, 2, 4, 5 })
  return add_bias(y, b):contiguous()
end)

function F.conv3d(x, w, ...)
  local op = "ember.nn.functional.conv3d"
  return conv3d(op, x, w, S.parse(op, LEAD, CONV3D, ...))
end

---------------------------------------------------------------- conv_transpose1d
local conv_transpose1d = batched(3, function(op, x, w, o)
  check_layout(op, x, w, o.bias, 3, o.groups, true)
  local o2 = {}
  for _, k in ipairs({ "stride", "padding", "output_padding", "dilation" }) do
    local v = spread(o[k], 1)[1]
    o2[k] = { 1, v }
  end
  o2.padding[1], o2.output_padding[1] = 0, 0
  o2.groups = o.groups
  local op_, s, d = o2.output_padding[2], o2.stride[2], o2.dilation[2]
  if op_ >= s and op_ >= d then
    fail(op, "output_padding %d must be smaller than either stride %d or dilation %d", op_, s, d)
  end
  return conv_transpose2d(x:unsqueeze(3), w:unsqueeze(3), o.bias, o2):squeeze(3)
end)

function F.conv_transpose1d(x, w, ...)
  local op = "ember.nn.functional.conv_transpose1d"
  return conv_transpose1d(op, x, w, S.parse(op, LEAD, CONVT1D, ...))
end

---------------------------------------------------------------- modules
-- nn.Conv3d(in, out, kernel_size, stride, padding, dilation, groups, bias, {dtype =}): dtype by
-- name only (PyTorch's positional order has padding_mode and device before it)
local MODULE_LEAD = { "in_channels", "out_channels", "kernel_size" }
local MODULE_CONV3D = { { "stride", 1, S.ints(3, 1) }, { "padding", 0, S.ints(3, 0) },
  { "dilation", 1, S.ints(3, 1) }, { "groups", 1, S.int(1) }, A.BIAS, A.DTYPE }
local MODULE_CONVT1D = { { "stride", 1, S.ints(1, 1) }, { "padding", 0, S.ints(1, 0) },
  { "output_padding", 0, S.ints(1, 0) }, { "groups", 1, S.int(1) }, A.BIAS,
  { "dilation", 1, S.ints(1, 1) }, A.DTYPE }

local function conv_class(nn, name, spec, nd, transposed, run)
  local op = "ember.nn." .. name
  local K = nn.Module:extend(name)
  -- weight from kaiming_uniform_(a = sqrt(5)), bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as PyTorch
  function K:init(cin, cout, kernel, ...)
    local o = S.parse(op, MODULE_LEAD, spec, ...)
    for _, arg in ipairs({ { "in_channels", cin }, { "out_channels", cout } }) do
      if S.int(1)(arg[2]) then fail(op, "%s must be an integer >= 1, got %s", arg[1], value_str(arg[2])) end
    end
    local want = S.ints(nd, 1)(kernel)
    if want then fail(op, "kernel_size must be %s, got %s", want, value_str(kernel)) end
    if cin % o.groups ~= 0 or cout % o.groups ~= 0 then
      fail(op, "groups = %d must divide in_channels = %d and out_channels = %d", o.groups, cin, cout)
    end
    self.in_channels, self.out_channels, self.kernel_size = cin, cout, spread(kernel, nd)
    for _, s in ipairs(spec) do
      if s[1] ~= "bias" and s[1] ~= "dtype" then self[s[1]] = o[s[1]] end
    end
    conv.init_parameters(self, o, transposed)
  end
  function K:forward(x)
    local o = { bias = self.bias }
    for _, s in ipairs(spec) do
      if s[1] ~= "bias" and s[1] ~= "dtype" then o[s[1]] = self[s[1]] end
    end
    return run(op, x, self.weight, o)
  end
  function K:extra_repr()
    return ("%d, %d, kernel_size=%s, stride=%s"):format(self.in_channels, self.out_channels,
      value_str(self.kernel_size), value_str(self.stride))
  end
  nn[name] = K
end

function M.register(nn)
  conv_class(nn, "Conv3d", MODULE_CONV3D, 3, false, conv3d)
  conv_class(nn, "ConvTranspose1d", MODULE_CONVT1D, 1, true, conv_transpose1d)
end

return M
