-- ember.nn.activation: PyTorch's pointwise activations beyond relu, gelu,
-- tanh, sigmoid and silu, each a function of ember.nn.functional and a
-- module of ember.nn (M.register) with PyTorch 1.13's argument names,
-- defaults and positional order (S.parse: positional values, then an
-- options table):
--
--   F.leaky_relu(x, negative_slope = 0.01, inplace = false)   nn.LeakyReLU
--   F.elu(x, alpha = 1, inplace)  F.selu(x, inplace)  F.celu(x, alpha = 1, inplace)
--   F.prelu(x, weight)            nn.PReLU(num_parameters = 1, init = 0.25)
--   F.relu6(x, inplace)  F.hardtanh(x, min_val = -1, max_val = 1, inplace)
--   F.hardswish(x, inplace)  F.hardsigmoid(x, inplace)
--   F.softplus(x, beta = 1, threshold = 20)  F.softsign(x)  F.mish(x, inplace)
--   F.logsigmoid(x)  F.glu(x, dim = -1)
--
-- Each is composed of recorded ops (where, clamp, exp, log1p, tanh,
-- sigmoid), or one op of its own (mish, whose rule is written with ops), so gradients of any order come from their rules. The branches
-- are chosen with where() on comparisons that are false for NaN, so NaN
-- goes through as NaN, as in PyTorch; an exp in a branch not taken is fed a
-- clamped argument, so it never overflows into a 0 * inf gradient. Where
-- PyTorch's backward picks one side at a kink (hardtanh's bounds give 0,
-- hardswish's -3 gives -0.5), the branches are split to pick the same.
-- inplace = true writes the result into x (copy_, recorded as any write
-- is) and returns x, as PyTorch does; under recording the formula reads a
-- clone of x, so the write leaves the values its ops keep untouched.
local ember = require("ember")
local A = require("ember.nn.args")
local S = require("ember.nn.signature")

local fail, shape_str = A.fail, A.shape_str
local M = { functional = {} }
local F = M.functional

local where = ember.where

local INPLACE = { "inplace", false, S.boolean }
local INPUT = { "input" }   -- the argument before a function's own (S.parse's lead)

local function float_input(op, x)
  A.need_tensor(op, "input", x)
  if not x.dtype:find("float") then
    fail(op, "input must be floating point, got %s %s", x.dtype, shape_str(x))
  end
end

-- activation(name, spec, fn): F[name](x, ...) checks x and the arguments
-- against spec, then fn(x, o)
local SPECS = {}
local function activation(name, spec, fn)
  local op = "ember.nn.functional." .. name
  SPECS[name] = spec
  F[name] = function(x, ...)
    local o = S.parse(op, INPUT, spec, ...)
    float_input(op, x)
    if not o.inplace then return fn(x, o, op) end
    -- under recording the formula reads a copy of x, which the write leaves
    -- alone (the ops that keep their input would see x changed otherwise)
    local src = ember._C.ember_is_grad_enabled() ~= 0 and x:clone() or x
    return x:copy_(fn(src, o, op))
  end
end

---------------------------------------------------------------- the formulas
-- log(1 + exp(beta x)) / beta, x where beta x > threshold (PyTorch's)
local function softplus(x, beta, threshold)
  local bx = beta == 1 and x or x * beta
  local sp = bx:clamp(nil, threshold):exp():log1p()
  if beta ~= 1 then sp = sp / beta end
  return where(bx:gt(threshold), x, sp)
end

-- alpha (exp(x / scale) - 1) for x <= 0, x otherwise
local function elu(x, alpha, scale)
  local neg = x:clamp(nil, 0)
  if scale ~= 1 then neg = neg / scale end
  return where(x:gt(0), x, (neg:exp() - 1) * alpha)
end

local SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

activation("leaky_relu", { { "negative_slope", 0.01, S.number }, INPLACE }, function(x, o)
  return where(x:gt(0), x, x * o.negative_slope)
end)

activation("elu", { { "alpha", 1.0, S.number }, INPLACE }, function(x, o) return elu(x, o.alpha, 1) end)

activation("selu", { INPLACE }, function(x) return elu(x, SELU_ALPHA, 1) * SELU_SCALE end)

activation("celu", { { "alpha", 1.0, S.number }, INPLACE }, function(x, o, op)
  if o.alpha == 0 then fail(op, "alpha must not be 0 (CELU divides by it)") end
  return elu(x, o.alpha, o.alpha)
end)

-- x between the bounds, each bound past it; PyTorch's gradient is 0 at the bounds
local function hardtanh(x, lo, hi)
  return where(x:le(lo), lo, where(x:ge(hi), hi, x))
end

activation("hardtanh", { { "min_val", -1.0, S.number }, { "max_val", 1.0, S.number }, INPLACE },
  function(x, o, op)
    if o.max_val < o.min_val then
      fail(op, "max_val %s must not be less than min_val %s", tostring(o.max_val), tostring(o.min_val))
    end
    return hardtanh(x, o.min_val, o.max_val)
  end)

activation("relu6", { INPLACE }, function(x) return hardtanh(x, 0, 6) end)

activation("hardswish", { INPLACE }, function(x)
  return where(x:lt(-3), 0, where(x:le(3), x * (x + 3) / 6, x))
end)

activation("hardsigmoid", { INPLACE }, function(x)
  return where(x:le(-3), 0, where(x:ge(3), 1, (x + 3) / 6))
end)

activation("softplus", { { "beta", 1, S.number }, { "threshold", 20, S.number } }, function(x, o, op)
  if o.beta == 0 then fail(op, "beta must not be 0 (softplus divides by it)") end
  return softplus(x, o.beta, o.threshold)
end)

activation("softsign", {}, function(x) return x / (x:abs() + 1) end)

-- one op (ops.def: mish), as its composition took 6 passes over the tensor
activation("mish", { INPLACE }, function(x) return x:mish() end)

-- -softplus(-x), switching to x only where exp(-x) would overflow
activation("logsigmoid", {}, function(x) return -softplus(-x, 1, 700) end)

activation("glu", { { "dim", -1, S.integer } }, function(x, o, op)
  local nd = x:dim()
  local d = o.dim < 0 and nd + 1 + o.dim or o.dim
  if nd == 0 or d < 1 or d > nd then
    fail(op, "dim %d is out of range for input %s", o.dim, shape_str(x))
  end
  local n = x:size(d)
  if n % 2 ~= 0 then
    fail(op, "dim %d of input %s has odd size %d; it must halve", o.dim, shape_str(x), n)
  end
  return x:narrow(d, 1, n / 2) * x:narrow(d, n / 2 + 1, n / 2):sigmoid()
end)

-- weight: one slope, or one for each channel (x's dim 2); a value past
-- weight raises (init.lua's arity wrapper)
function F.prelu(x, weight)
  local op = "ember.nn.functional.prelu"
  float_input(op, x)
  A.need_tensor(op, "weight", weight)
  if weight:dim() > 1 then fail(op, "weight must be 1-D or a scalar, got %s", shape_str(weight)) end
  local n, w = weight:numel(), weight
  if n ~= 1 then
    if x:dim() < 2 or x:size(2) ~= n then
      fail(op, "weight %s has %d slopes but input %s has %s channels (dim 2)", shape_str(weight), n,
        shape_str(x), x:dim() >= 2 and tostring(x:size(2)) or "no")
    end
    local shape = { 1, n }
    for d = 3, x:dim() do shape[d] = 1 end
    w = weight:view(shape)
  elseif weight:dim() == 1 then
    w = weight:view({})
  end
  return where(x:gt(0), x, x * w)
end

---------------------------------------------------------------- modules
-- the modules take their function's arguments but the input; their fields
-- are the arguments' names
local MODULES = {
  { "LeakyReLU", "leaky_relu" }, { "ELU", "elu" }, { "SELU", "selu" }, { "CELU", "celu" },
  { "ReLU6", "relu6" }, { "Hardtanh", "hardtanh" }, { "Hardswish", "hardswish" },
  { "Hardsigmoid", "hardsigmoid" }, { "Softplus", "softplus" }, { "Softsign", "softsign" },
  { "Mish", "mish" }, { "LogSigmoid", "logsigmoid" }, { "GLU", "glu" },
}

function M.register(nn)
  for _, e in ipairs(MODULES) do
    local name, fname = e[1], e[2]
    local spec, fn, op = SPECS[fname], F[fname], "ember.nn." .. name
    local K = nn.Module:extend(name)
    function K:init(...)
      local o = S.parse(op, {}, spec, ...)
      for _, s in ipairs(spec) do self[s[1]] = o[s[1]] end
      if fname == "hardtanh" and o.max_val < o.min_val then
        fail(op, "max_val %s must not be less than min_val %s", tostring(o.max_val), tostring(o.min_val))
      end
      if (fname == "celu" and o.alpha == 0) or (fname == "softplus" and o.beta == 0) then
        fail(op, "%s must not be 0", fname == "celu" and "alpha" or "beta")
      end
    end
    function K:forward(x)
      local o = {}
      for _, s in ipairs(spec) do o[s[1]] = self[s[1]] end
      return fn(x, o)
    end
    function K:extra_repr()
      local parts = {}
      for _, s in ipairs(spec) do parts[#parts + 1] = s[1] .. "=" .. tostring(self[s[1]]) end
      return table.concat(parts, ", ")
    end
    nn[name] = K
  end

  -- nn.PReLU(num_parameters = 1, init = 0.25, {dtype =}): the slopes are a parameter
  local PReLU = nn.Module:extend("PReLU")
  local PRELU = { { "num_parameters", 1, S.int(1) }, { "init", 0.25, S.number }, A.DTYPE }
  function PReLU:init(...)
    local o = S.parse("ember.nn.PReLU", {}, PRELU, ...)
    self.num_parameters = o.num_parameters
    self.weight = ember.full({ o.num_parameters }, o.init, { dtype = o.dtype })
  end
  function PReLU:forward(x)
    return F.prelu(x, self.weight)
  end
  function PReLU:extra_repr() return ("num_parameters=%d"):format(self.num_parameters) end
  nn.PReLU = PReLU
end

return M
