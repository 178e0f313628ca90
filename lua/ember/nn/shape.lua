-- ember.nn.shape: layers that only move values around, or drop whole
-- channels. Each is a function of ember.nn.functional and a module of
-- ember.nn (M.register), with PyTorch 1.13's names, defaults and order:
--
--   F.pixel_shuffle(x, upscale_factor)      nn.PixelShuffle(upscale_factor)
--   F.pixel_unshuffle(x, downscale_factor)  nn.PixelUnshuffle(downscale_factor)
--   nn.Unflatten(dim, unflattened_size)
--   F.dropout1d(x, p = 0.5, training = true, inplace = false)   nn.Dropout1d(p, inplace)
--   F.dropout2d(x, p = 0.5, training = true, inplace = false)   nn.Dropout2d(p, inplace)
--
-- The shuffles are a reshape, a permute and a reshape; the channel dropouts
-- one Bernoulli draw per (N, C) channel from the seeded generator, scaled by
-- 1 / (1 - p); all are recorded ops. Dims are 1-based, as everywhere in ember.
local ember = require("ember")
local A = require("ember.nn.args")
local S = require("ember.nn.signature")

local fail, shape_str, value_str = A.fail, A.shape_str, A.value_str
local M = { functional = {} }
local F = M.functional

local INPUT = { "input" }   -- the argument before a function's own (S.parse's lead)
local FACTOR = function(name) return { { name, nil, S.int(1) } } end

-- pixel_shuffle's and pixel_unshuffle's arguments: the op's name, its factor r (named
-- factor_name), x's shape and dim count
local function shuffle_args(name, factor_name, x, ...)
  local op = "ember.nn.functional." .. name
  local r = S.parse(op, INPUT, FACTOR(factor_name), ...)[factor_name]
  A.need_tensor(op, "input", x)
  local s = x:shape()
  return op, r, s, #s
end

-- t (N, ...) as x's lead dims s[1 .. nd - 3] then c, h, w
local function lead_and(t, s, c, h, w)
  local shape, nd = {}, #s
  for i = 1, nd - 3 do shape[i] = s[i] end
  shape[nd - 2], shape[nd - 1], shape[nd] = c, h, w
  return t:reshape(shape)
end

-- x (*, C r^2, H, W) -> (*, C, H r, W r)
function F.pixel_shuffle(x, ...)
  local op, r, s, nd = shuffle_args("pixel_shuffle", "upscale_factor", x, ...)
  if nd < 3 or s[nd - 2] % (r * r) ~= 0 then
    fail(op, "input must be (*, C r^2, H, W) for upscale_factor r = %d, got %s", r, shape_str(x))
  end
  local c, h, w = s[nd - 2] / (r * r), s[nd - 1], s[nd]
  return lead_and(x:reshape({ -1, c, r, r, h, w }):permute({ 1, 2, 5, 3, 6, 4 }), s, c, h * r, w * r)
end

-- x (*, C, H r, W r) -> (*, C r^2, H, W)
function F.pixel_unshuffle(x, ...)
  local op, r, s, nd = shuffle_args("pixel_unshuffle", "downscale_factor", x, ...)
  if nd < 3 or s[nd - 1] % r ~= 0 or s[nd] % r ~= 0 then
    fail(op, "input must be (*, C, H r, W r) for downscale_factor r = %d, got %s", r, shape_str(x))
  end
  local c, h, w = s[nd - 2], s[nd - 1] / r, s[nd] / r
  return lead_and(x:reshape({ -1, c, h, r, w, r }):permute({ 1, 2, 4, 6, 3, 5 }), s, c * r * r, h, w)
end

---------------------------------------------------------------- channel dropout
local DROPOUT = { { "p", 0.5, function(v)
  if type(v) ~= "number" or not (v >= 0 and v <= 1) then return "a number in [0, 1]" end
end }, { "training", true, S.boolean }, { "inplace", false, S.boolean } }

-- x (N, C, *) or (C, *) with nd spatial dims: whole channels zeroed with
-- probability p, the rest scaled by 1 / (1 - p); dropout2d refuses 3-D input
local function channel_dropout(op, nd, x, o)
  A.need_tensor(op, "input", x)
  if (x:dim() ~= nd + 1 and x:dim() ~= nd + 2) or not x.dtype:find("float") then
    fail(op, "input must be a floating point (N, C, %s) or (C, %s), got %s %s",
      nd == 1 and "L" or "H, W", nd == 1 and "L" or "H, W", x.dtype, shape_str(x))
  end
  if nd == 2 and x:dim() == 3 then   -- PyTorch 1.13 reads it as (N, C, L), later versions as (C, H, W)
    fail(op, "a 3-D input %s is ambiguous (PyTorch 1.13 drops channels of (N, C, L), later versions of "
      .. "(C, H, W)): use dropout1d for (N, C, L), or give (C, H, W) a batch dim", shape_str(x))
  end
  if not o.training or o.p == 0 then return x end
  local shape = x:shape()
  for d = x:dim() - nd + 1, x:dim() do shape[d] = 1 end
  local y
  if o.p == 1 then
    y = x * 0
  else
    local keep = ember.rand(shape, { dtype = x.dtype, device = x.device }):ge(o.p):to(x.dtype)
    y = x * (keep * (1 / (1 - o.p)))
  end
  if o.inplace then x:copy_(y); return x end
  return y
end

for nd = 1, 2 do
  local name = ("dropout%dd"):format(nd)
  local op = "ember.nn.functional." .. name
  F[name] = function(x, ...) return channel_dropout(op, nd, x, S.parse(op, INPUT, DROPOUT, ...)) end
end

---------------------------------------------------------------- modules
function M.register(nn)
  for _, e in ipairs({ { "PixelShuffle", "upscale_factor", F.pixel_shuffle },
    { "PixelUnshuffle", "downscale_factor", F.pixel_unshuffle } }) do
    local name, arg, fn = e[1], e[2], e[3]
    local K = nn.Module:extend(name)
    function K:init(...) self[arg] = S.parse("ember.nn." .. name, {}, FACTOR(arg), ...)[arg] end
    function K:forward(x)
      return fn(x, self[arg])
    end
    function K:extra_repr() return ("%s=%d"):format(arg, self[arg]) end
    nn[name] = K
  end

  local MODULE_DROPOUT = { DROPOUT[1], DROPOUT[3] }
  for nd = 1, 2 do
    local name = ("Dropout%dd"):format(nd)
    local op = "ember.nn." .. name
    local K = nn.Module:extend(name)
    function K:init(...)
      local o = S.parse(op, {}, MODULE_DROPOUT, ...)
      self.p, self.inplace = o.p, o.inplace
    end
    function K:forward(x)
      return channel_dropout(op, nd, x, { p = self.p, training = self.training, inplace = self.inplace })
    end
    function K:extra_repr() return ("p=%g, inplace=%s"):format(self.p, tostring(self.inplace)) end
    nn[name] = K
  end

  -- nn.Unflatten(dim, unflattened_size): dim (1-based, negative from the
  -- end) becomes unflattened_size, whose product must be its size (one -1 allowed)
  local Unflatten = nn.Module:extend("Unflatten")
  local UNFLATTEN = { { "dim", nil, S.integer }, { "unflattened_size", nil, function(v)
    if type(v) ~= "table" or ember.is_tensor(v) or #v == 0 then return "a list of sizes" end
    for _, n in ipairs(v) do
      if type(n) ~= "number" or n ~= math.floor(n) or (n < 0 and n ~= -1) then return "a list of sizes" end
    end
  end } }
  function Unflatten:init(...)
    local o = S.parse("ember.nn.Unflatten", {}, UNFLATTEN, ...)
    self.dim, self.unflattened_size = o.dim, o.unflattened_size
  end
  function Unflatten:forward(x)
    local op = "ember.nn.Unflatten"
    A.need_tensor(op, "input", x)
    local nd = x:dim()
    local d = self.dim < 0 and nd + 1 + self.dim or self.dim
    if d < 1 or d > nd then fail(op, "dim %d is out of range for input %s", self.dim, shape_str(x)) end
    local known, free = 1, 0
    for _, n in ipairs(self.unflattened_size) do
      if n == -1 then free = free + 1 else known = known * n end
    end
    local size = x:size(d)
    if free > 1 or (free == 0 and known ~= size) or (free == 1 and (known == 0 or size % known ~= 0)) then
      fail(op, "unflattened_size %s does not fit dim %d of size %d of input %s", value_str(self.unflattened_size),
        self.dim, size, shape_str(x))
    end
    local s = x:shape()
    local shape = {}
    for i = 1, d - 1 do shape[#shape + 1] = s[i] end
    for _, n in ipairs(self.unflattened_size) do shape[#shape + 1] = n == -1 and size / known or n end
    for i = d + 1, nd do shape[#shape + 1] = s[i] end
    return x:reshape(shape)
  end
  function Unflatten:extra_repr() return ("dim=%d, unflattened_size=%s"):format(self.dim, value_str(self.unflattened_size)) end
  nn.Unflatten = Unflatten
end

return M
