-- ember.nn.resize: padding, interpolation and adaptive average pooling with
-- PyTorch 1.13's index rules, built from views, gathers (index_select) and
-- matmuls, so gradients of any order come from those ops' rules and none has
-- a kernel of its own. Each is a function of ember.nn.functional and, where
-- PyTorch has one, a module of ember.nn (M.register):
--
--   F.pad(x, {left, right, top, bottom, ...}, mode = "constant", value = 0)
--   F.interpolate(x, {size =, scale_factor =, mode = "nearest", align_corners =})
--   F.adaptive_avg_pool2d(x, output_size)          nn.Upsample, nn.AdaptiveAvgPool2d
--
-- N batch, C channels; the spatial dims are those after C.
local ember = require("ember")
local ffi = require("ffi")
local A = require("ember.nn.args")
local amp = require("ember.amp")
local adaptive = require("ember.nn.adaptive")

local fail, spread, shape_str = A.fail, A.spread, A.shape_str
local M = { functional = {} }
local F = M.functional

local function positions(list) return ember.tensor(list, { dtype = "int64" }) end

---------------------------------------------------------------- pad
-- the 1-based source of position q (1-based, q < 1 or q > n in the padding)
-- of a dim of size n
local SOURCE = {
  reflect = function(q, n)
    if q < 1 then return 2 - q end
    if q > n then return 2 * n - q end
    return q
  end,
  replicate = function(q, n) return math.min(math.max(q, 1), n) end,
  circular = function(q, n) return (q - 1) % n + 1 end,
}
-- the largest padding each mode takes, given the dim's size
local MOST = {
  reflect = function(n) return n - 1 end,
  replicate = function() return math.huge end,
  circular = function(n) return n end,
}

local PAD = { { "mode", "constant", A.one_of("constant", "reflect", "replicate", "circular") },
  { "value", nil, function(v) if v ~= nil and type(v) ~= "number" then return "a number" end end } }

-- pairs of pads from the last dim backwards: pads[2i - 1], pads[2i] go
-- before and after dim (ndim - i + 1); each call of fn(dim, before, after)
local function each_pair(x, pads, fn)
  for i = 1, #pads / 2 do fn(x:dim() - i + 1, pads[2 * i - 1], pads[2 * i]) end
end

-- a tensor of value, the input (cropped by negative pads) written into a view
-- of it, which records the write (docs/autodiff.md)
local function pad_constant(op, x, pads, value)
  local shape, src = x:shape(), x
  each_pair(x, pads, function(d, lo, hi)
    shape[d] = shape[d] + lo + hi
    if shape[d] < 0 then
      fail(op, "padding {%d, %d} of dim %d of input %s leaves a negative size", lo, hi, d,
        shape_str(x))
    end
    local first = math.min(1 + math.max(-lo, 0), src:size(d) + 1)
    src = src:narrow(d, first, math.max(src:size(d) - math.max(-hi, 0) - first + 1, 0))
  end)
  local out = ember.full(shape, value, { dtype = x.dtype })
  if out:numel() == 0 then return out end
  local view = out
  each_pair(x, pads, function(d, lo) view = view:narrow(d, math.max(lo, 0) + 1, src:size(d)) end)
  view:copy_(src)
  return out
end

-- one gather of source positions for each padded dim, once every pair fits
local function pad_indexed(op, x, pads, mode)
  local k = #pads / 2
  if k > 3 or (x:dim() ~= k + 1 and x:dim() ~= k + 2) then
    fail(op, "mode '%s' pads the last 1, 2 or 3 dims of a (N, C, ...) or (C, ...) input, got %d "
      .. "pads for input %s", mode, #pads, shape_str(x))
  end
  each_pair(x, pads, function(d, lo, hi)
    local n = x:size(d)
    if n == 0 or lo > MOST[mode](n) or hi > MOST[mode](n) or n + lo + hi < 1 then
      fail(op, "padding {%d, %d} does not fit dim %d of input %s in mode '%s' (at most %s each)",
        lo, hi, d, shape_str(x), mode, tostring(MOST[mode](n)))
    end
  end)
  each_pair(x, pads, function(d, lo, hi)
    local n = x:size(d)
    local idx = {}
    for j = 1, n + lo + hi do idx[j] = SOURCE[mode](j - lo, n) end
    x = x:index_select(d, positions(idx))
  end)
  return x
end

-- F.pad(x, pads, mode, value) as PyTorch, or F.pad(x, pads, {mode =, value =})
function F.pad(x, pads, mode, value)
  local op = "ember.nn.functional.pad"
  local o = A.options(op, type(mode) == "table" and mode or { mode = mode, value = value }, PAD)
  A.need_tensor(op, "input", x)
  local ok = type(pads) == "table" and #pads > 0 and #pads % 2 == 0 and #pads / 2 <= x:dim()
  for i = 1, ok and #pads or 0 do
    ok = ok and type(pads[i]) == "number" and pads[i] == math.floor(pads[i])
  end
  if not ok then
    fail(op, "pad must be an even list of at most 2 x %d integers (before and after each dim, "
      .. "last dim first) for input %s", x:dim(), shape_str(x))
  end
  if o.mode == "constant" then return pad_constant(op, x, pads, o.value or 0) end
  if o.value ~= nil and o.value ~= 0 then
    fail(op, "mode '%s' takes no value, got %g", o.mode, o.value)
  end
  return pad_indexed(op, x, pads, o.mode)
end

---------------------------------------------------------------- interpolate
local fbuf = ffi.new("float[1]")
local function f32(v)
  fbuf[0] = v
  return fbuf[0]
end

-- PyTorch's nearest source index: floorf(j * scale), scale = in / out or
-- 1 / scale_factor when that was given, the product in the input's precision
-- (float for all but float64) and rounded to float by floorf
local function nearest(x, d, n, out, scale)
  local s = scale or n / out
  if x.dtype ~= "float64" then s = f32(s) end
  local idx = {}
  for j = 0, out - 1 do idx[j + 1] = 1 + math.min(math.floor(f32(j * s)), n - 1) end
  return x:index_select(d, positions(idx))
end

-- PyTorch's linear source coordinate: j * (in - 1) / (out - 1) with
-- align_corners, else max((j + 0.5) * scale - 0.5, 0); the two neighbours
-- weighted by their distance
local function linear(x, d, n, out, scale, align_corners)
  local ratio = scale or n / out
  if align_corners then ratio = out > 1 and (n - 1) / (out - 1) or 0 end
  local i0, i1, w0, w1 = {}, {}, {}, {}
  for j = 0, out - 1 do
    local src = align_corners and ratio * j or math.max(ratio * (j + 0.5) - 0.5, 0)
    local lo = math.floor(src)
    i0[j + 1], i1[j + 1] = lo + 1, lo + (lo < n - 1 and 2 or 1)
    w1[j + 1] = math.min(math.max(src - lo, 0), 1)
    w0[j + 1] = 1 - w1[j + 1]
  end
  local shape = { out }
  for _ = d + 1, x:dim() do shape[#shape + 1] = 1 end
  local function weights(w) return ember.tensor(w, { dtype = x.dtype }):view(shape) end
  return x:index_select(d, positions(i0)) * weights(w0)
    + x:index_select(d, positions(i1)) * weights(w1)
end

local function optional(check) return function(v) if v ~= nil then return check(v) end end end
-- an option check: what check accepts, or a list of 1 to 3 of them
local function one_or_list(check, want)
  return function(v)
    if check(v) == nil then return nil end
    if type(v) ~= "table" or #v < 1 or #v > 3 then return want end
    for _, s in ipairs(v) do if check(s) then return want end end
  end
end
local sizes = one_or_list(A.int(1), "an integer >= 1 or a list of them")
local factors = one_or_list(A.positive, "a positive number or a list of them")

local INTERPOLATE = { { "size", nil, optional(sizes) }, { "scale_factor", nil, optional(factors) },
  { "mode", "nearest", A.one_of("nearest", "linear", "bilinear", "trilinear") },
  { "align_corners", nil, optional(A.boolean) },
  { "recompute_scale_factor", nil, optional(A.boolean) } }
local SPATIAL_DIMS = { linear = 1, bilinear = 2, trilinear = 3 }

local function interpolate(op, x, o)
  A.need_tensor(op, "input", x)
  local k = x:dim() - 2
  local want = SPATIAL_DIMS[o.mode]
  if k < 1 or k > 3 or (want and k ~= want) then
    fail(op, "mode '%s' takes a %s-D input (N, C, ...), got %s", o.mode,
      want and want + 2 or "3-D, 4-D or 5", shape_str(x))
  end
  if (o.size == nil) == (o.scale_factor == nil) then
    fail(op, "give either size or scale_factor, not both or neither")
  end
  if o.align_corners ~= nil and not want then
    fail(op, "align_corners only applies to the modes 'linear', 'bilinear' and 'trilinear', "
      .. "not '%s'", o.mode)
  end
  if o.recompute_scale_factor and o.size then
    fail(op, "recompute_scale_factor does not apply to an explicit size")
  end
  if want and not x.dtype:find("float") then
    fail(op, "mode '%s' needs a floating point input, got %s", o.mode, x.dtype)
  end
  local size, factor = spread(o.size, k), spread(o.scale_factor, k)
  if #(size or factor) ~= k then
    fail(op, "%s has %d entries but input %s has %d spatial dims",
      size and "size" or "scale_factor", #(size or factor), shape_str(x), k)
  end
  for i = 1, k do
    local d, n = i + 2, x:size(i + 2)
    local out, scale = size and size[i]
    if not out then
      out = math.floor(n * factor[i])
      if not o.recompute_scale_factor then scale = 1 / factor[i] end
    end
    if out < 1 or n < 1 then
      fail(op, "input %s gives an empty output along dim %d", shape_str(x), d)
    end
    -- an unchanged size is the identity, except for nearest at a scale factor
    if out ~= n or (scale and not want) then
      if want then
        x = linear(x, d, n, out, scale, o.align_corners)
      else
        x = nearest(x, d, n, out, scale)
      end
    end
  end
  return x
end

function F.interpolate(x, opts)
  local op = "ember.nn.functional.interpolate"
  return interpolate(op, x, A.options(op, opts, INTERPOLATE))
end

---------------------------------------------------------------- adaptive_avg_pool2d
-- output_size: a number, or {h, w} where nil keeps the input's size
local function output_pair(op, output_size)
  local size = spread(output_size, 2)
  local ok = type(size) == "table" and not ember.is_tensor(size) and table.maxn(size) <= 2
  for i = 1, 2 do ok = ok and (size[i] == nil or A.int(1)(size[i]) == nil) end
  if not ok then
    fail(op, "output_size must be an integer >= 1 or an {h, w} pair of them (nil keeps a size), "
      .. "got %s", A.value_str(output_size))
  end
  return size
end

-- in x's dtype, as PyTorch's: its products are averages, not autocast's matmuls
local function adaptive_avg_pool2d(op, x, output_size)
  if amp._dtype then return ember.autocast(false, adaptive_avg_pool2d, op, x, output_size) end
  local size = output_pair(op, output_size)
  A.need_tensor(op, "input", x)
  local nd = x:dim()
  if (nd ~= 3 and nd ~= 4) or x:size(-1) < 1 or x:size(-2) < 1 or not x.dtype:find("float") then
    fail(op, "input must be a floating point (N, C, H, W) or (C, H, W) with H, W >= 1, got %s %s",
      x.dtype, shape_str(x))
  end
  return adaptive.average(x, { size[1] or x:size(-2), size[2] or x:size(-1) })
end

function F.adaptive_avg_pool2d(x, output_size)
  return adaptive_avg_pool2d("ember.nn.functional.adaptive_avg_pool2d", x, output_size)
end

---------------------------------------------------------------- modules
function M.register(nn)
  -- nn.Upsample({size =, scale_factor =, mode = "nearest", align_corners =}): F.interpolate's
  -- options, kept as fields
  local Upsample = nn.Module:extend("Upsample")
  function Upsample:init(opts)
    local o = A.options("ember.nn.Upsample", opts, INTERPOLATE)
    for _, s in ipairs(INTERPOLATE) do self[s[1]] = o[s[1]] end
  end
  function Upsample:forward(x)
    local o = {}
    for _, s in ipairs(INTERPOLATE) do o[s[1]] = self[s[1]] end
    return interpolate("ember.nn.Upsample", x, A.options("ember.nn.Upsample", o, INTERPOLATE))
  end
  function Upsample:extra_repr()
    local what = self.size and "size=" or "scale_factor="
    local values = table.concat(spread(self.size or self.scale_factor, 1), ", ")
    return what .. values .. ", mode=" .. self.mode
  end
  nn.Upsample = Upsample

  local Pool = nn.Module:extend("AdaptiveAvgPool2d")
  function Pool:init(output_size)
    output_pair("ember.nn.AdaptiveAvgPool2d", output_size)
    self.output_size = output_size
  end
  function Pool:forward(x)
    return adaptive_avg_pool2d("ember.nn.AdaptiveAvgPool2d", x, self.output_size)
  end
  function Pool:extra_repr()
    local size = spread(self.output_size, 2)
    return ("output_size={%s, %s}"):format(tostring(size[1]), tostring(size[2]))
  end
  nn.AdaptiveAvgPool2d = Pool
end

return M
