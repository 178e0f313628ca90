-- ember.amp: mixed precision. ember.autocast(dtype, fn) runs fn with the
-- matrix products and convolutions in a 16-bit float dtype and the ops that
-- need range (softmax, reductions, norms, losses) in float32, as PyTorch's
-- autocast does; GradScaler scales a float16 loss so small gradients do not
-- flush to zero, and skips the steps whose gradients overflowed.
--
-- The ops reach the policy through two casts the op bindings call when a
-- scope is active (M._dtype is set): M._down for the lower-precision list,
-- M._up for the float32 list. Outside a scope an op pays one field read.
-- The casts are ordinary recorded `to` ops, so gradients reach float32
-- parameters in float32. docs/nn.md ("Mixed precision").
local ffi = require("ffi")
local ember = require("ember")   -- loaded by the op bindings while the package is being assembled
local errors = require("ember.errors")

-- M._dtype: the dtype name of the innermost enabled autocast scope, or nil;
-- M._cache: whether that scope caches the casts of parameters
local M = {}

local LOWER = { bfloat16 = true, float16 = true }
local EASED = { float32 = true, float16 = true, bfloat16 = true }   -- what autocast casts (not float64)

local is_tensor = ember.is_tensor

-- The cast cache, PyTorch's: within the outermost autocast scope, a
-- parameter (a leaf a recording tracks) is cast once per dtype however many
-- ops use it (an RNN's weights, once per time step otherwise). An entry holds
-- while the parameter keeps its version (no in-place write since) and
-- autograd its serial (the same recordings, grad mode and backward state), so
-- a reused cast is recorded exactly as a new one would be. Weak keys: a
-- parameter that is collected takes its entries with it.
local C = ember._C
local cache = setmetatable({}, { __mode = "k" })

local function cached_cast(t, dt)
  local c = t._c
  if C.ember_is_tracked(c) == 0 or C.ember_grad_fn(c, nil) ~= nil then return t:to(dt) end
  local version, serial = tonumber(C.ember_tensor_version(c)), tonumber(C.ember_autograd_serial())
  local e = cache[t]
  if not e or e.version ~= version or e.serial ~= serial then
    e = { version = version, serial = serial }
    cache[t] = e
  end
  local r = e[dt]
  if not r then
    r = t:to(dt)
    if r ~= t then ember.keep(r) end   -- an ember.tidy in the autocast scope leaves the cache alone
    e[dt] = r
  end
  return r
end

local function cast(t, dt)
  if is_tensor(t) then
    local d = t.dtype
    if d ~= dt and EASED[d] then
      if M._cache then return cached_cast(t, dt) end
      return t:to(dt)
    end
  end
  return t
end

-- the lower-precision list's casts (matmul, linear, conv): floating tensors to the scope's dtype
function M._down(a, b, c)
  local dt = M._dtype
  return cast(a, dt), cast(b, dt), cast(c, dt)
end

-- the float32 list's casts (softmax, reductions, norms, losses): 16-bit floats to float32
function M._up(a, b, c)
  return cast(a, "float32"), cast(b, "float32"), cast(c, "float32")
end

---------------------------------------------------------------- autocast
-- dtype: "bfloat16", "float16", false (autocast off inside fn), or
-- {dtype =, enabled =, cache_enabled =}; gives the scope's dtype (nil: off)
-- and whether it caches casts
local function scope_of(mode)
  local dt, enabled, cached = mode, true, true
  if type(mode) == "table" and not is_tensor(mode) then
    dt, enabled, cached = mode.dtype or "bfloat16", mode.enabled ~= false, mode.cache_enabled ~= false
  elseif mode == false then
    return nil, false
  end
  if not LOWER[dt] then
    errors.fail("autocast", ("dtype must be \"bfloat16\" or \"float16\", got %s"):format(
      type(dt) == "string" and ("\"" .. dt .. "\"") or tostring(dt)))
  end
  if not enabled then return nil, false end
  return dt, cached
end

local pack = table.pack or function(...) return { n = select("#", ...), ... } end
local unpack = table.unpack or unpack
local depth = 0   -- enclosing autocast calls; the cast cache empties when the outermost returns

function M.autocast(mode, fn, ...)
  local dt, cached = scope_of(mode)
  if type(fn) ~= "function" then errors.fail("autocast", "expected a function, got " .. type(fn)) end
  local prev, prev_cache = M._dtype, M._cache
  M._dtype, M._cache = dt, cached
  depth = depth + 1
  local res = pack(pcall(fn, ...))
  depth = depth - 1
  M._dtype, M._cache = prev, prev_cache
  if depth == 0 then
    for t in pairs(cache) do cache[t] = nil end
  end
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, res.n)
end

function M.is_autocast_enabled() return M._dtype ~= nil end
function M.get_autocast_dtype() return M._dtype end

---------------------------------------------------------------- GradScaler
-- PyTorch's torch.cuda.amp.GradScaler and its update rule: the scale is a
-- float32 number; an iteration whose gradients held an inf or a NaN
-- multiplies it by backoff_factor, and growth_interval iterations in a row
-- without one multiply it by growth_factor.
local GradScaler = {}
GradScaler.__index = GradScaler
M.GradScaler = GradScaler

local f32 = ffi.new("float[1]")
local function float32(x)
  f32[0] = x
  return tonumber(f32[0])
end

local function fail(msg, ...) errors.fail("amp.GradScaler", msg:format(...)) end

local OPTIONS = {
  init_scale = function(v) return type(v) == "number" and v > 0 and v < math.huge end,
  growth_factor = function(v) return type(v) == "number" and v > 1 end,
  backoff_factor = function(v) return type(v) == "number" and v > 0 and v < 1 end,
  growth_interval = function(v) return type(v) == "number" and v >= 1 and v == math.floor(v) end,
  enabled = function(v) return type(v) == "boolean" end,
}
local RULE = { init_scale = "a positive finite number", growth_factor = "a number above 1",
  backoff_factor = "a number in (0, 1)", growth_interval = "a positive integer", enabled = "a boolean" }

local function new_scaler(_, opts)
  if opts ~= nil and (type(opts) ~= "table" or is_tensor(opts)) then
    fail("options must be a table, got %s", type(opts))
  end
  opts = opts or {}
  for k, v in pairs(opts) do
    if not OPTIONS[k] then fail("unknown option '%s'", tostring(k)) end
    if not OPTIONS[k](v) then fail("%s must be %s, got %s", k, RULE[k], tostring(v)) end
  end
  return setmetatable({
    _scale = float32(opts.init_scale or 2 ^ 16),
    _growth_factor = opts.growth_factor or 2,
    _backoff_factor = opts.backoff_factor or 0.5,
    _growth_interval = opts.growth_interval or 2000,
    _growth_tracker = 0,
    _enabled = opts.enabled ~= false,
    _per_optimizer = {},   -- optimizer -> {stage = "unscaled" | "stepped", found_inf = bool}
  }, GradScaler)
end
setmetatable(GradScaler, { __call = new_scaler })

-- loss (a tensor or a list of tensors) times the scale; a 0-d float32 factor,
-- so a 0-d float16 loss is scaled in float32, as in PyTorch
function GradScaler:scale(outputs)
  if not self._enabled then return outputs end
  local s = ember.tensor(self._scale)
  if is_tensor(outputs) then return outputs * s end
  if type(outputs) ~= "table" then fail("scale: expected a tensor or a list of tensors, got %s", type(outputs)) end
  local out = {}
  for i, t in ipairs(outputs) do
    if not is_tensor(t) then fail("scale: outputs[%d] must be a tensor, got %s", i, type(t)) end
    out[i] = t * s
  end
  return out
end

local function state_of(self, optimizer)
  local st = self._per_optimizer[optimizer]
  if not st then
    st = {}
    self._per_optimizer[optimizer] = st
  end
  return st
end

-- Divides every gradient of the optimizer by the scale (in place) and notes
-- whether one held an inf or a NaN.
function GradScaler:unscale_(optimizer)
  if not self._enabled then return end
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    fail("unscale_: expected an optimizer, got %s", type(optimizer))
  end
  local st = state_of(self, optimizer)
  if st.stage == "unscaled" then fail("unscale_() has already been called on this optimizer since the last update()") end
  if st.stage == "stepped" then fail("unscale_() is being called after step()") end
  local inv = float32(1 / self._scale)
  local found = false
  ember.no_grad(function()
    for _, group in ipairs(optimizer.param_groups) do
      for _, p in ipairs(group.params) do
        local g = p.grad
        if g ~= nil then
          if g.dtype == "float16" then fail("unscale_: attempting to unscale float16 gradients (keep the parameters in float32 and use ember.autocast)") end
          if (g * 0):sum():item() ~= 0 then found = true end   -- inf * 0 and NaN * 0 are NaN
          g:mul_(inv)
        end
      end
    end
  end)
  st.stage, st.found_inf = "unscaled", found
end

-- optimizer:step(...) unless the unscaled gradients held an inf or a NaN;
-- returns what step returned, or nothing for a skipped step
function GradScaler:step(optimizer, ...)
  if not self._enabled then return optimizer:step(...) end
  local st = state_of(self, optimizer)
  if st.stage == "stepped" then fail("step() has already been called since the last update()") end
  if st.stage ~= "unscaled" then self:unscale_(optimizer) end
  st.stage = "stepped"
  if not st.found_inf then return optimizer:step(...) end
end

-- The scale for the next iteration: new_scale when given, else PyTorch's rule
-- over the infs the optimizers' unscale_ found in this one.
function GradScaler:update(new_scale)
  if not self._enabled then return end
  if new_scale ~= nil then
    if not OPTIONS.init_scale(new_scale) then
      fail("update: new_scale must be a positive finite number, got %s", tostring(new_scale))
    end
    self._scale = float32(new_scale)
  else
    local any, found = false, false
    for _, st in pairs(self._per_optimizer) do
      if st.stage then any = true end
      found = found or st.found_inf
    end
    if not any then fail("update: no inf checks were recorded before update() (call step or unscale_ first)") end
    if found then
      self._scale, self._growth_tracker = float32(self._scale * self._backoff_factor), 0
    elseif self._growth_tracker + 1 == self._growth_interval then
      local grown = float32(self._scale * self._growth_factor)
      if grown < math.huge then self._scale = grown end
      self._growth_tracker = 0
    else
      self._growth_tracker = self._growth_tracker + 1
    end
  end
  self._per_optimizer = {}
end

function GradScaler:get_scale() return self._enabled and self._scale or 1 end
function GradScaler:get_growth_factor() return self._growth_factor end
function GradScaler:get_backoff_factor() return self._backoff_factor end
function GradScaler:get_growth_interval() return self._growth_interval end
function GradScaler:is_enabled() return self._enabled end

-- PyTorch's keys; empty when disabled
function GradScaler:state_dict()
  if not self._enabled then return {} end
  return { scale = self._scale, growth_factor = self._growth_factor, backoff_factor = self._backoff_factor,
    growth_interval = self._growth_interval, _growth_tracker = self._growth_tracker }
end

function GradScaler:load_state_dict(sd)
  if not self._enabled then return end
  if type(sd) ~= "table" or sd.scale == nil then
    fail("load_state_dict: expected the table state_dict() gives, got %s", type(sd) == "table" and "an empty table" or type(sd))
  end
  for _, k in ipairs({ "growth_factor", "backoff_factor", "growth_interval" }) do
    if not OPTIONS[k](sd[k]) then fail("load_state_dict: %s must be %s, got %s", k, RULE[k], tostring(sd[k])) end
  end
  local tracker = sd._growth_tracker
  if type(tracker) ~= "number" or tracker < 0 or tracker ~= math.floor(tracker) then
    fail("load_state_dict: _growth_tracker must be a non-negative integer, got %s", tostring(tracker))
  end
  if not OPTIONS.init_scale(sd.scale) then fail("load_state_dict: scale must be a positive finite number, got %s", tostring(sd.scale)) end
  self._scale, self._growth_factor, self._backoff_factor = float32(sd.scale), sd.growth_factor, sd.backoff_factor
  self._growth_interval, self._growth_tracker = sd.growth_interval, tracker
end

ember.autocast = M.autocast
ember.is_autocast_enabled, ember.get_autocast_dtype = M.is_autocast_enabled, M.get_autocast_dtype
return M
