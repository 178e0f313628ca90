-- ember.nn.pool: max and average pooling in 1, 2 and 3 spatial dims with
-- PyTorch 1.13's options, and adaptive max and average pooling. Each is a
-- function of ember.nn.functional and a module of ember.nn (M.register),
-- with PyTorch's argument names, defaults and positional order (S.parse:
-- positional values, then an options table):
--
--   F.max_pool2d(x, kernel_size, stride = kernel_size, padding = 0, dilation = 1,
--                ceil_mode = false, return_indices = false)     (1d, 3d alike)
--   F.avg_pool2d(x, kernel_size, stride = kernel_size, padding = 0, ceil_mode = false,
--                count_include_pad = true, divisor_override = nil)  (1d: no divisor_override)
--   F.adaptive_max_pool2d(x, output_size, return_indices = false) (1d, 3d alike)
--   F.adaptive_avg_pool1d(x, output_size), F.adaptive_avg_pool3d
--   nn.MaxPool2d(kernel_size, stride, padding, dilation, return_indices, ceil_mode)
--   nn.AvgPool2d(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
--
-- N batch, C channels, then nd spatial dims; (C, ...) without the batch
-- works too. The C kernels max_pool2d and avg_pool2d pool the planes (a 1-D
-- input as a height of 1, a 3-D one as (N, C D, H, W) planes) wherever the
-- plane's dilation is 1; ceil_mode's extra window comes from padding the
-- input after, an average's other divisors from rescaling the kernel's.
-- The depth taps of a 3-D pool, dilation within a plane and 3-D indices are
-- composed of recorded ops: the input padded (-inf for max, 0 for
-- average), one strided view for each kernel offset, stacked, then max or
-- sum over the offsets, so gradients of any order come from those ops'
-- rules. Adaptive max pooling reduces one dim at a time (a window's maximum
-- is the maximum of its rows' maxima, and the first in row-major order
-- stays first), adaptive average pooling is nn/adaptive.lua's (one mean
-- for global pooling, else a matmul with an averaging matrix along each dim). Indices are the int64 0-based flat positions
-- within each input plane (of nd dims), as F.max_pool2d has always
-- returned them and PyTorch does.
local ember = require("ember")
local ffi = require("ffi")
local A = require("ember.nn.args")
local S = require("ember.nn.signature")
local pad = require("ember.nn.resize").functional.pad

local C = ember._C
local fail, spread, shape_str, value_str = A.fail, A.spread, A.shape_str, A.value_str
local M = { functional = {} }
local F = M.functional

local out1 = ffi.new("ember_tensor*[1]")
local out2 = ffi.new("ember_tensor*[2]")
local check, int64s, ptr = require("ember.errors").check, A.int64s, A.ptr

---------------------------------------------------------------- arguments
local INPUT = { "input" }   -- the argument before a function's own (S.parse's lead)
local ints = S.ints
local function optional_ints(nd, lo) return S.optional(S.ints(nd, lo)) end

local function max_spec(nd)
  return { { "kernel_size", nil, ints(nd, 1) }, { "stride", nil, optional_ints(nd, 1) },
    { "padding", 0, ints(nd, 0) }, { "dilation", 1, ints(nd, 1) },
    { "ceil_mode", false, S.boolean }, { "return_indices", false, S.boolean } }
end
-- the module's order: return_indices before ceil_mode
local function max_module_spec(nd)
  local s = max_spec(nd)
  s[5], s[6] = s[6], s[5]
  return s
end
local function avg_spec(nd)
  local s = { { "kernel_size", nil, ints(nd, 1) }, { "stride", nil, optional_ints(nd, 1) },
    { "padding", 0, ints(nd, 0) }, { "ceil_mode", false, S.boolean },
    { "count_include_pad", true, S.boolean } }
  if nd > 1 then
    s[6] = { "divisor_override", nil, S.optional(function(v)
      if S.integer(v) or v == 0 then return "a nonzero integer" end
    end) }
  end
  return s
end

-- x (N, C, ...) or (C, ...) of nd spatial dims, floating point; returns x
-- batched and whether it was not
local function pool_input(op, x, nd)
  A.need_tensor(op, "input", x)
  if (x:dim() ~= nd + 1 and x:dim() ~= nd + 2) or not x.dtype:find("float") then
    local dims = ({ "L", "H, W", "D, H, W" })[nd]
    fail(op, "input must be a floating point %d-D (N, C, %s) or %d-D (C, %s) tensor, got %s %s", nd + 2, dims,
      nd + 1, dims, x.dtype, shape_str(x))
  end
  if x:dim() == nd + 1 then return x:unsqueeze(1), true end
  return x, false
end

-- the output sizes and each dim's geometry {L, k, s, p, d, o}, PyTorch's rules
local function geometry(op, x, nd, o, dilation)
  local k, s, p = spread(o.kernel_size, nd), spread(o.stride or o.kernel_size, nd), spread(o.padding, nd)
  local d = spread(dilation or 1, nd)
  local g = {}
  for i = 1, nd do
    local L = x:size(2 + i)
    if p[i] > k[i] / 2 then
      fail(op, "padding %s must be at most half the kernel_size %s", value_str(o.padding),
        value_str(o.kernel_size))
    end
    local span = d[i] * (k[i] - 1) + 1
    local n = L + 2 * p[i] - span
    local out = (o.ceil_mode and math.floor((n + s[i] - 1) / s[i]) or math.floor(n / s[i])) + 1
    -- the last window must start inside the input or the left padding
    if o.ceil_mode and (out - 1) * s[i] >= L + p[i] then out = out - 1 end
    if out < 1 then
      fail(op, "input %s is smaller than kernel_size %s (dilation %s, padding %s): output size %d",
        shape_str(x), value_str(o.kernel_size), value_str(dilation or 1), value_str(o.padding), out)
    end
    g[i] = { L = L, k = k[i], s = s[i], p = p[i], d = d[i], o = out }
  end
  return g
end

---------------------------------------------------------------- composed windows
-- x (N, C, ...) with the pooled dims 3 .. 2 + #g (g[i] describes dim 2 + i;
-- any dims after them are left alone): padded by each dim's p before and
-- enough after with value, then the list of views, one per kernel offset
-- in row-major order, each x at o s + j d along each pooled dim
local function windows(x, g, value)
  local nd, pads = #g, {}
  for _ = x:dim(), nd + 3, -1 do
    pads[#pads + 1] = 0
    pads[#pads + 1] = 0
  end
  for i = nd, 1, -1 do
    local gi = g[i]
    local need = (gi.k - 1) * gi.d + gi.o * gi.s   -- every view reads o s positions from its start
    pads[#pads + 1] = gi.p
    pads[#pads + 1] = math.max(need - gi.L - gi.p, 0)
  end
  local list = { pad(x, pads, "constant", value) }
  for i = 1, nd do
    local gi, dim, next_list = g[i], 2 + i, {}
    for _, t in ipairs(list) do
      for j = 0, gi.k - 1 do
        local v = t:narrow(dim, j * gi.d + 1, gi.o * gi.s)
        if gi.s > 1 then
          local shape = v:shape()
          shape[dim] = gi.o
          table.insert(shape, dim + 1, gi.s)
          v = v:reshape(shape):select(dim + 1, 1)
        end
        next_list[#next_list + 1] = v
      end
    end
    list = next_list
  end
  return list
end

-- the int64 0-based flat input positions of the pooled maxima: each output
-- position's window offset idx (1-based, (N, C, o...)) mapped through the table
-- of positions (o..., K)
local function window_positions(g, idx)
  local dev = { dtype = "int64", device = idx.device }
  local nd, K = #g, 1
  for i = 1, nd do K = K * g[i].k end
  local instride = {}
  local acc = 1
  for i = nd, 1, -1 do instride[i] = acc; acc = acc * g[i].L end
  local pos, n = {}, 0
  local function rec(i, base)
    if i > nd then
      -- the kernel offsets, row-major
      local function off(m, b)
        if m > nd then n = n + 1; pos[n] = b; return end
        for j = 0, g[m].k - 1 do off(m + 1, b + j * g[m].d * instride[m]) end
      end
      off(1, base)
      return
    end
    for q = 0, g[i].o - 1 do rec(i + 1, base + (q * g[i].s - g[i].p) * instride[i]) end
  end
  rec(1, 0)
  local table_ = ember.tensor(pos, dev)
  local outs = 1
  for i = 1, nd do outs = outs * g[i].o end
  local shape = { 1, 1 }
  for i = 1, nd do shape[2 + i] = g[i].o end
  local base = ember.arange(0, outs, 1, dev):view(shape) * K
  local lin = (base + (idx - 1)):reshape(-1) + 1
  return table_:index_select(1, lin):view(idx:shape())
end

---------------------------------------------------------------- the C kernels
-- The C kernels pool the last two dims (a 1-D pool: the last, as a width
-- under a height of 1) with symmetric padding and floor's window count, no
-- dilation. ceil_mode's extra window comes from padding the input after
-- each dim (with value) so that floor counts it; max pooling then ignores the
-- -inf, average pooling's divisor is put right by the caller.
local function c_ok(g, first)
  for i = first, #g do if g[i].d ~= 1 then return false end end
  return true
end

-- the extra positions after dim gi's input that make floor count gi.o windows
local function extra(gi) return math.max((gi.o - 1) * gi.s + gi.k - (gi.L + 2 * gi.p), 0) end

-- kind "max" or "avg" over the dims of g2 (the last one or two of x, which is
-- batched (N, C, ...)): the C kernel's output (avg: the window sums divided
-- by the kernel's size) and for max with want_idx the indices in the plane x
-- has after its padding, and that plane's width (without want_idx the kernel
-- writes no indices unless a recording keeps them for the gradient)
local function c_pool(op, kind, x, g2, value, want_idx)
  local two = #g2 == 2
  local gh, gw = two and g2[1] or { k = 1, s = 1, p = 0, L = 1 }, g2[#g2]
  local eh, ew = two and extra(gh) or 0, extra(gw)
  local lead = x:shape()
  local nd = #lead
  for _ = 1, #g2 do table.remove(lead) end
  -- (N', C', H, W): every dim before the pooled ones folded into the channels
  local rest = 1
  for i = 2, #lead do rest = rest * lead[i] end
  local xin = (two and nd == 4) and x or x:reshape({ lead[1], rest, two and x:size(nd - 1) or 1, x:size(nd) })
  if eh + ew > 0 then xin = pad(xin, { 0, ew, 0, eh }, "constant", value) end
  local k, s, p = int64s({ gh.k, gw.k }), int64s({ gh.s, gw.s }), int64s({ gh.p, gw.p })
  local y, idx
  if kind == "max" then
    check(C.ember_max_pool2d(ptr(op, xin, 1), k, s, p, out2, want_idx and out2 + 1 or nil))
    y = ember._wrap(out2[0])
    if want_idx then idx = ember._wrap(out2[1]) end
  else
    check(C.ember_avg_pool2d(ptr(op, xin, 1), k, s, p, out1))
    y = ember._wrap(out1[0])
  end
  local shape = {}
  for i, n in ipairs(lead) do shape[i] = n end
  if two then shape[#shape + 1] = gh.o end
  shape[#shape + 1] = gw.o
  return y:view(shape), idx and idx:view(shape), gw.L + ew
end

-- positions in a plane of Hp x Wp, the input's H x W padded after (the
-- padding holds no maximum: it is -inf) -> positions in the input's plane
local function unpad_positions(idx, Hp, W, Wp)
  if Wp == W then return idx end
  local dev = { dtype = "int64", device = idx.device }
  local map = (ember.arange(0, Hp, 1, dev):view(Hp, 1) * W + ember.arange(0, Wp, 1, dev):view(1, Wp)):reshape(-1)
  return map:index_select(1, idx:reshape(-1) + 1):view(idx:shape())
end

---------------------------------------------------------------- max pooling
local function max_pool(op, nd, x, o)
  local unbatched
  x, unbatched = pool_input(op, x, nd)
  local g = geometry(op, x, nd, o, o.dilation)
  local y, idx
  if nd <= 2 and c_ok(g, 1) then
    local Wp
    y, idx, Wp = c_pool(op, "max", x, g, -math.huge, o.return_indices)
    if o.return_indices then
      local Hp = nd == 2 and g[1].L + extra(g[1]) or 1
      idx = unpad_positions(idx, Hp, g[nd].L, Wp)
    end
  elseif nd == 3 and not o.return_indices and c_ok(g, 2) then
    -- a window's maximum is the maximum over its depth taps of each plane's
    y = c_pool(op, "max", x, { g[2], g[3] }, -math.huge)
    local depth = { k = g[1].k, s = g[1].s, p = g[1].p, d = g[1].d, o = g[1].o, L = g[1].L }
    y = ember.stack(windows(y, { depth }, -math.huge), y:dim() + 1):max(y:dim() + 1)
  else
    local list = windows(x, g, -math.huge)
    local stacked = ember.stack(list, x:dim() + 1)
    local off
    y, off = stacked:max(x:dim() + 1)
    if o.return_indices then idx = window_positions(g, off) end
  end
  if unbatched then y, idx = y:squeeze(1), idx and idx:squeeze(1) end
  if o.return_indices then return y, idx end
  return y
end

-- F.max_pool2d(x, k, opts, return_indices), the form ember had before
-- PyTorch's positional order, is still read: an options table (or nil)
-- then a boolean
local function legacy(...)
  local n = select("#", ...)
  local _, a, b = ...
  if n == 3 and type(b) == "boolean" and (a == nil or (type(a) == "table" and a[1] == nil
    and not ember.is_tensor(a))) then
    return true
  end
  return false
end

for nd = 1, 3 do
  local name = ("max_pool%dd"):format(nd)
  local op, spec = "ember.nn.functional." .. name, max_spec(nd)
  F[name] = function(x, ...)
    local o
    if legacy(...) then
      local k, opts, ri = ...
      o = S.parse(op, INPUT, spec, k, opts)
      o.return_indices = ri
    else
      o = S.parse(op, INPUT, spec, ...)
    end
    return max_pool(op, nd, x, o)
  end
end

---------------------------------------------------------------- average pooling
-- each dim's window counts (o of them): the window clipped to the padded
-- input, or to the input without count_include_pad (PyTorch's rule)
local function counts(gi, include_pad)
  local c = {}
  for q = 0, gi.o - 1 do
    local lo = q * gi.s - gi.p
    local hi = math.min(lo + gi.k, gi.L + gi.p)
    if not include_pad then lo, hi = math.max(lo, 0), math.min(hi, gi.L) end
    c[q + 1] = hi - lo
  end
  return c
end

-- the divisors, (1, 1, o...) in dtype
local function divisors(g, o, x)
  local nd = #g
  local shape = { 1, 1 }
  for i = 1, nd do shape[2 + i] = g[i].o end
  if o.divisor_override then return o.divisor_override end
  local per = {}
  for i = 1, nd do per[i] = counts(g[i], o.count_include_pad) end
  local flat, n = {}, 0
  local function rec(i, prod)
    if i > nd then n = n + 1; flat[n] = prod; return end
    for q = 1, g[i].o do rec(i + 1, prod * per[i][q]) end
  end
  rec(1, 1)
  return ember.tensor(flat, { dtype = x.dtype, device = x.device }):view(shape)
end

local function avg_pool(op, nd, x, o)
  local unbatched
  x, unbatched = pool_input(op, x, nd)
  local g = geometry(op, x, nd, o)
  -- the C kernel's result is exact where it divides by PyTorch's divisor:
  -- the kernel's size, which count_include_pad gives unless ceil_mode adds
  -- a window (or no padding and no extra window, without count_include_pad)
  local plain = o.divisor_override == nil
  for i = 1, nd do
    plain = plain and extra(g[i]) == 0 and (o.count_include_pad or g[i].p == 0)
  end
  local first = math.max(nd - 1, 1)
  local sums = c_pool(op, "avg", x, { unpack(g, first) }, 0)
  local y
  if plain and nd <= 2 then
    y = sums
  else
    local size = 1
    for i = first, nd do size = size * g[i].k end
    if nd == 3 then   -- the depth taps' sums of the planes' averages
      local depth = { k = g[1].k, s = g[1].s, p = g[1].p, d = 1, o = g[1].o, L = g[1].L }
      sums = ember.stack(windows(sums, { depth }, 0), sums:dim() + 1):sum(sums:dim() + 1)
    end
    y = sums * size / divisors(g, o, x)
  end
  if unbatched then y = y:squeeze(1) end
  return y
end

for nd = 1, 3 do
  local name = ("avg_pool%dd"):format(nd)
  local op, spec = "ember.nn.functional." .. name, avg_spec(nd)
  F[name] = function(x, ...) return avg_pool(op, nd, x, S.parse(op, INPUT, spec, ...)) end
end

---------------------------------------------------------------- adaptive pooling
-- output_size: a number or nd of them (nil keeps that dim's size)
local function output_sizes(op, nd, v, x)
  local size = spread(v, nd)
  local ok = type(size) == "table" and not ember.is_tensor(size) and table.maxn(size) <= nd
  for i = 1, nd do ok = ok and (size[i] == nil or S.int(1)(size[i]) == nil) end
  if not ok then
    fail(op, "output_size must be an integer >= 1 or a list of %d of them (nil keeps a size), got %s", nd,
      value_str(v))
  end
  local out = {}
  for i = 1, nd do out[i] = size[i] or (x and x:size(2 + i)) end
  return out
end

-- PyTorch's window of output i of n over L positions: [floor(i L / n), ceil((i + 1) L / n))
local adaptive = require("ember.nn.adaptive")
local window = adaptive.window

local function adaptive_input(op, x, nd)
  local unbatched
  x, unbatched = pool_input(op, x, nd)
  for i = 1, nd do
    if x:size(2 + i) < 1 then fail(op, "input %s has an empty spatial dim", shape_str(x)) end
  end
  return x, unbatched
end

local function adaptive_max(op, nd, x, o)
  local unbatched
  x, unbatched = adaptive_input(op, x, nd)
  local size = output_sizes(op, nd, o.output_size, x)
  -- the flat input position of every element of the (partly reduced) tensor
  local where_ = nil
  if o.return_indices then
    local plane = {}
    for i = 1, nd do plane[i] = x:size(2 + i) end
    local n = 1
    for i = 1, nd do n = n * plane[i] end
    local shape = { 1, 1 }
    for i = 1, nd do shape[2 + i] = plane[i] end
    where_ = ember.arange(0, n, 1, { dtype = "int64", device = x.device }):view(shape):expand(x:shape()):contiguous()
  end
  for i = nd, 1, -1 do
    local dim, L, n = 2 + i, x:size(2 + i), size[i]
    local vals, pos = {}, {}
    for q = 0, n - 1 do
      local lo, hi = window(q, L, n)
      local v, arg = x:narrow(dim, lo + 1, hi - lo):max(dim, true)
      vals[#vals + 1] = v
      if where_ then pos[#pos + 1] = where_:narrow(dim, lo + 1, hi - lo):gather(dim, arg) end
    end
    x = ember.cat(vals, dim)
    if where_ then where_ = ember.cat(pos, dim) end
  end
  if unbatched then x, where_ = x:squeeze(1), where_ and where_:squeeze(1) end
  if o.return_indices then return x, where_ end
  return x
end

-- (n, L): row i averages PyTorch's window i
local function adaptive_avg(op, nd, x, o)
  local unbatched
  x, unbatched = adaptive_input(op, x, nd)
  local size = output_sizes(op, nd, o.output_size, x)
  x = adaptive.average(x, size)
  if unbatched then x = x:squeeze(1) end
  return x
end

local function adaptive_spec(nd, with_indices)
  local spec = { { "output_size", nil, function(v)
    if v == nil then return ("an integer >= 1 or a list of %d of them"):format(nd) end
  end } }
  if with_indices then spec[2] = { "return_indices", false, S.boolean } end
  return spec
end

-- F.adaptive_<kind>_pool<nd>d(x, output_size, ...), run by run (adaptive_max or adaptive_avg)
local function adaptive_fn(kind, nd, run)
  local name = ("adaptive_%s_pool%dd"):format(kind, nd)
  local op, spec = "ember.nn.functional." .. name, adaptive_spec(nd, kind == "max")
  F[name] = function(x, ...)
    local o = S.parse(op, INPUT, spec, ...)
    output_sizes(op, nd, o.output_size)
    return run(op, nd, x, o)
  end
end

for nd = 1, 3 do
  adaptive_fn("max", nd, adaptive_max)
  if nd ~= 2 then adaptive_fn("avg", nd, adaptive_avg) end   -- adaptive_avg_pool2d is resize.lua's
end

---------------------------------------------------------------- modules
local function module(nn, name, spec, run, nd, check_sizes)
  local op = "ember.nn." .. name
  local K = nn.Module:extend(name)
  function K:init(...)
    local o = S.parse(op, {}, spec, ...)
    if check_sizes then output_sizes(op, nd, o.output_size) end
    for _, s in ipairs(spec) do self[s[1]] = o[s[1]] end
    if spec[2] and spec[2][1] == "stride" and self.stride == nil then self.stride = self.kernel_size end
  end
  function K:forward(x)
    local o = {}
    for _, s in ipairs(spec) do o[s[1]] = self[s[1]] end
    return run(op, nd, x, S.parse(op, {}, spec, o))
  end
  function K:extra_repr()
    local parts = {}
    for _, s in ipairs(spec) do
      if self[s[1]] ~= nil then parts[#parts + 1] = s[1] .. "=" .. value_str(self[s[1]]) end
    end
    return table.concat(parts, ", ")
  end
  nn[name] = K
end

function M.register(nn)
  for nd = 1, 3 do
    module(nn, ("MaxPool%dd"):format(nd), max_module_spec(nd), max_pool, nd)
    module(nn, ("AvgPool%dd"):format(nd), avg_spec(nd), avg_pool, nd)
    module(nn, ("AdaptiveMaxPool%dd"):format(nd), adaptive_spec(nd, true), adaptive_max, nd, true)
    if nd ~= 2 then
      module(nn, ("AdaptiveAvgPool%dd"):format(nd), adaptive_spec(nd, false), adaptive_avg, nd, true)
    end
  end
end

return M
