-- ember.distributions: probability distributions with PyTorch 1.13's
-- semantics (torch.distributions): Categorical, Bernoulli, Normal, Uniform,
-- Gamma, Beta, Dirichlet, MultivariateNormal and Independent, each with sample (no gradient), rsample (reparameterised,
-- where the distribution allows it), log_prob, entropy, mean, variance,
-- stddev, batch_shape and event_shape, argument validation (validate_args,
-- on unless {validate_args = false}), and kl_divergence for the pairs
-- PyTorch registers among them. Categorical's values are 1-based category
-- indices (int64), as every index in ember is. Every function here composes
-- tensor ops, so gradients flow through log_prob, entropy and rsample.
local ember = require("ember")
local errors = require("ember.errors")
local D = {}
local LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
local function min_of(t) return (errors.extremes(t)) end   -- a tensor's smallest value, for messages
local function fail(op, fmt, ...) errors.fail("distributions." .. op, fmt, ...) end

---------------------------------------------------------------- shapes
local function concat(...)
  local out = {}
  for i = 1, select("#", ...) do
    local s = select(i, ...)
    for j = 1, #s do out[#out + 1] = s[j] end
  end
  return out
end
local function slice(s, a, b)
  local out = {}
  for i = a, b or #s do out[#out + 1] = s[i] end
  return out
end
local function show(s) return "{" .. table.concat(s, ", ") .. "}" end

-- the broadcast of shapes a and b, as PyTorch's (trailing dims aligned)
local function broadcast_shape(op, a, b)
  local n = math.max(#a, #b)
  local out = {}
  for i = 1, n do
    local x, y = a[#a - n + i] or 1, b[#b - n + i] or 1
    if x ~= y and x ~= 1 and y ~= 1 then
      fail(op, "shapes %s and %s do not broadcast", show(a), show(b))
    end
    out[i] = x == 1 and y or x
  end
  return out
end

-- a sample shape: nil, a number or a list of sizes
-- the sample shape (nil, a size or a list of sizes) of sample/rsample(shape?,
-- opts?), after checking opts: only {generator =} (an ember.Generator,
-- which the draws check)
local function sample_shape(op, s, opts)
  if opts ~= nil then
    if type(opts) ~= "table" or ember.is_tensor(opts) then fail(op, "options must be a table, got %s", type(opts)) end
    for k in pairs(opts) do
      if k ~= "generator" then fail(op, "unknown option '%s' (known: generator)", tostring(k)) end
    end
  end
  if s == nil then return {} end
  if type(s) == "number" then s = { s } end
  if type(s) ~= "table" or ember.is_tensor(s) then fail(op, "sample_shape must be a list of sizes, got %s", type(s)) end
  local n = 0
  for _ in pairs(s) do n = n + 1 end
  if n ~= #s then fail(op, "sample_shape must be a list of sizes (an options table comes second: sample(nil, opts))") end
  for i = 1, #s do
    if type(s[i]) ~= "number" or s[i] ~= math.floor(s[i]) or s[i] < 0 then
      fail(op, "sample_shape must hold non-negative integers, got %s", tostring(s[i]))
    end
  end
  return s
end

-- parameters: numbers become tensors of the tensors' float dtype (float32
-- when none is a tensor); all are expanded to their broadcast shape
local function params(op, names, ...)
  local vals, dtype, device = { ... }, nil, nil
  for i, v in ipairs(names) do
    local x = vals[i]
    if ember.is_tensor(x) then
      if x.dtype ~= "float32" and x.dtype ~= "float64" then
        fail(op, "%s must be a floating point tensor, got %s", v, x.dtype)
      end
      dtype, device = dtype or x.dtype, device or x.device
    elseif type(x) ~= "number" then
      fail(op, "%s must be a number or a tensor, got %s", v, type(x))
    end
  end
  dtype = dtype or "float32"
  local shape = {}
  for i = 1, #names do
    if type(vals[i]) == "number" then vals[i] = ember.tensor(vals[i], { dtype = dtype, device = device }) end
    shape = broadcast_shape(op, shape, vals[i]:shape())
  end
  for i = 1, #names do
    local s = vals[i]:shape()
    local same = #s == #shape
    for d = 1, #s do same = same and s[d] == shape[d] end
    if not same then vals[i] = vals[i]:expand(shape) end
  end
  return shape, unpack(vals, 1, #names)
end

local function check_opts(op, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" or ember.is_tensor(opts) then fail(op, "options must be a table, got %s", type(opts)) end
  for k in pairs(opts) do
    if not allowed[k] then fail(op, "unknown option '%s'", tostring(k)) end
  end
  if opts.validate_args ~= nil and type(opts.validate_args) ~= "boolean" then
    fail(op, "validate_args must be a boolean, got %s", type(opts.validate_args))
  end
  return opts
end

local function all(t) return t:numel() == 0 or t:to("float32"):min():item() > 0 end
---------------------------------------------------------------- Distribution
local Distribution = {}
Distribution.__index = Distribution
D.Distribution = Distribution

-- a distribution class, D[name]
local function class(name, parent)
  local c = setmetatable({}, { __index = parent or Distribution })
  D[name] = c
  c.__index = c
  c.__name = "ember.distributions." .. name
  c.name = name
  c.__tostring = function(d) return ("%s(batch_shape = %s, event_shape = %s)"):format(name, show(d.batch_shape), show(d.event_shape)) end
  return c
end

-- what every distribution answers; a subclass that lacks one raises as
-- PyTorch's base class does
for _, m in ipairs({ "log_prob", "entropy", "mean", "variance", "cdf", "enumerate_support" }) do
  local function missing(self)
    fail((self.name or "Distribution") .. ":" .. m, "not implemented for %s", self.name or "this distribution")
  end
  -- the documented parameters, so a value is counted against them
  Distribution[m] = (m == "log_prob" or m == "cdf") and function(self, x) return missing(self, x) end or missing
end

function Distribution:_extended(shape)
  return concat(shape, self.batch_shape, self.event_shape)
end
-- sample() of a reparameterisable distribution: rsample() without the graph.
-- Its classes take it as their own sample (so that the arity check names them)
local function sample_by_rsample(self, shape, opts)
  return ember.no_grad(function() return self:rsample(shape, opts) end)
end
function Distribution:sample(shape, opts)
  if not self.has_rsample then fail(self.name .. ":sample", "not implemented") end
  return sample_by_rsample(self, shape, opts)
end
function Distribution:rsample(shape, opts)   -- the documented parameters (shape, opts unused)
  fail(self.name .. ":rsample", "%s is not reparameterisable; use sample() (and a score-function "
    .. "estimator: log_prob(x) * reward)", self.name)
end
function Distribution:stddev() return self:variance():sqrt() end
function Distribution:_validate(op, value)
  if not self.validate_args then return end
  if not ember.is_tensor(value) then fail(self.name .. ":" .. op, "expected a tensor value, got %s", type(value)) end
  local ok, why = self:_support(value)
  if not ok then fail(self.name .. ":" .. op, "the value is outside the support: %s", why) end
end

---------------------------------------------------------------- Normal
-- the constructors of the reparameterised two-parameter families (Normal, Uniform,
-- Gamma, Beta): opts checked, the parameters broadcast to one batch shape
local function two_param_new(cls, names, a, b, opts)
  opts = check_opts(cls.name, opts, { validate_args = true })
  local shape
  shape, a, b = params(cls.name, names, a, b)
  return setmetatable({ [names[1]] = a, [names[2]] = b, batch_shape = shape, event_shape = {},
    validate_args = opts.validate_args ~= false, has_rsample = true }, cls)
end
local Normal = class("Normal")
-- Normal(loc, scale, {validate_args =}): scale > 0
function D.Normal_new(loc, scale, opts)
  local d = two_param_new(Normal, { "loc", "scale" }, loc, scale, opts)
  if d.validate_args and not all(d.scale:detach()) then fail("Normal", "scale must be positive, got %s", min_of(d.scale)) end
  return d
end
function Normal:_support() return true end
function Normal:mean() return self.loc end
function Normal:variance() return self.scale:pow(2) end
function Normal:stddev() return self.scale end
function Normal:rsample(shape, opts)
  local s = self:_extended(sample_shape("Normal:rsample", shape, opts))
  local eps = ember.randn(s, { dtype = self.loc.dtype, device = self.loc.device, generator = opts and opts.generator })
  return self.loc + eps * self.scale
end
Normal.sample = sample_by_rsample
function Normal:log_prob(v)
  self:_validate("log_prob", v)
  local z = (v - self.loc) / self.scale
  return z:pow(2) * -0.5 - self.scale:log() - LOG_SQRT_2PI
end
function Normal:entropy() return self.scale:log() + (0.5 + LOG_SQRT_2PI) end
function Normal:cdf(v)
  self:_validate("cdf", v)
  return (((v - self.loc) / self.scale) * (1 / math.sqrt(2))):erf() * 0.5 + 0.5
end

---------------------------------------------------------------- Uniform
local Uniform = class("Uniform")
function D.Uniform_new(low, high, opts)
  local d = two_param_new(Uniform, { "low", "high" }, low, high, opts)
  if d.validate_args and not all((d.high - d.low):detach()) then
    fail("Uniform", "low must be below high, got low - high up to %s", select(2, errors.extremes(d.low - d.high)))
  end
  return d
end
function Uniform:_support(v)
  local inside = v:ge(self.low):to("float32") * v:lt(self.high):to("float32")
  if inside:numel() > 0 and inside:min():item() == 0 then return false, "values must lie in [low, high)" end
  return true
end
function Uniform:mean() return (self.low + self.high) * 0.5 end
function Uniform:variance() return (self.high - self.low):pow(2) * (1 / 12) end
function Uniform:rsample(shape, opts)
  local s = self:_extended(sample_shape("Uniform:rsample", shape, opts))
  local u = ember.rand(s, { dtype = self.low.dtype, device = self.low.device, generator = opts and opts.generator })
  return self.low + u * (self.high - self.low)
end
Uniform.sample = sample_by_rsample
function Uniform:log_prob(v)
  self:_validate("log_prob", v)
  local inside = v:ge(self.low):mul(v:lt(self.high)):to(self.low.dtype)
  return inside:log() - (self.high - self.low):log()
end
function Uniform:entropy() return (self.high - self.low):log() end
function Uniform:cdf(v)
  return ((v - self.low) / (self.high - self.low)):clamp(0, 1)
end

---------------------------------------------------------------- probs / logits
-- log(1 + exp(x)) without overflow; maximum splits its gradient at 0,
-- which gives softplus' 1/2 there (as nn/loss.lua's BCE with logits)
local function softplus(x) return ember.maximum(x, 0) + (-x:abs()):exp():log1p() end

local function probs_or_logits(op, probs, logits)
  if (probs == nil) == (logits == nil) then fail(op, "give exactly one of probs and logits") end
  local t = probs or logits
  if ember.is_tensor(t) then
    if t.dtype ~= "float32" and t.dtype ~= "float64" then
      fail(op, "%s must be a floating point tensor, got %s", probs and "probs" or "logits", t.dtype)
    end
  elseif type(t) == "number" then
    t = ember.tensor(t)
  else
    fail(op, "%s must be a tensor or a number, got %s", probs and "probs" or "logits", type(t))
  end
  if probs then return t, nil end
  return nil, t
end

-- D.X(probs, opts?) or D.X{probs =} / D.X{logits =}: the options, probs
-- among them (the caller's table is not changed). After the options-table
-- form a second value is an extra argument.
local function probs_opts(op, a, opts)
  if type(a) == "table" and not ember.is_tensor(a) then
    if opts ~= nil then errors.extra_argument("ember.distributions." .. op, 2, opts, { "opts" }) end
    return check_opts(op, a, { probs = true, logits = true, validate_args = true })
  end
  if type(opts) == "table" and opts.probs ~= nil and a ~= nil then
    fail(op, "probs is given twice: as the first argument and in the options")
  end
  local o = check_opts(op, opts, { validate_args = true })
  return { probs = a, validate_args = o.validate_args }
end

---------------------------------------------------------------- Bernoulli
local Bernoulli = class("Bernoulli")
-- Bernoulli{probs =} or Bernoulli{logits =}, or Bernoulli(probs, opts?)
function D.Bernoulli_new(probs, opts)
  opts = probs_opts("Bernoulli", probs, opts)
  local probs, logits = probs_or_logits("Bernoulli", opts.probs, opts.logits)
  local d = setmetatable({ batch_shape = (probs or logits):shape(), event_shape = {},
    validate_args = opts.validate_args ~= false, has_rsample = false }, Bernoulli)
  if probs then
    if d.validate_args then
      local p = probs:detach()
      if p:numel() > 0 and not (p:min():item() >= 0 and p:max():item() <= 1) then
        fail("Bernoulli", "probs must lie in [0, 1], got values in [%s, %s]", errors.extremes(p))
      end
    end
    local eps = probs.dtype == "float64" and 2.220446049250313e-16 or 1.1920928955078125e-07
    d.probs = probs
    local pc = probs:clamp(eps, 1 - eps)
    d.logits = pc:log() - (-pc):log1p()
  else
    d.logits, d.probs = logits, logits:sigmoid()
  end
  return d
end
function Bernoulli:_support(v)
  local ok = v:eq(0):to("float32") + v:eq(1):to("float32")
  if ok:numel() > 0 and ok:min():item() == 0 then return false, "values must be 0 or 1" end
  return true
end
function Bernoulli:mean() return self.probs end
function Bernoulli:variance() return self.probs * (-self.probs + 1) end
function Bernoulli:sample(shape, opts)
  local s = self:_extended(sample_shape("Bernoulli:sample", shape, opts))
  return ember.no_grad(function()
    return ember.bernoulli(self.probs:detach():expand(s):contiguous(), { generator = opts and opts.generator })
  end)
end
function Bernoulli:log_prob(v)
  self:_validate("log_prob", v)
  v = v:to(self.logits.dtype)
  return v * self.logits - softplus(self.logits)
end
function Bernoulli:entropy() return softplus(self.logits) - self.probs * self.logits end

---------------------------------------------------------------- Categorical
local Categorical = class("Categorical")
-- Categorical{probs =} or Categorical{logits =} (the last dim holds the
-- categories), or Categorical(probs, opts?); values are 1-based category indices
function D.Categorical_new(probs, opts)
  opts = probs_opts("Categorical", probs, opts)
  local probs, logits = probs_or_logits("Categorical", opts.probs, opts.logits)
  local t = probs or logits
  if t:dim() < 1 then fail("Categorical", "%s must have at least one dim", probs and "probs" or "logits") end
  local d = setmetatable({ validate_args = opts.validate_args ~= false, has_rsample = false }, Categorical)
  if probs then
    if d.validate_args then
      local p = probs:detach()
      if p:numel() > 0 and not (p:min():item() >= 0) then fail("Categorical", "probs must be non-negative, got %s", min_of(p)) end
    end
    d.probs = probs / probs:sum(-1, true)
    local tiny = probs.dtype == "float64" and 2.2250738585072014e-308 or 1.1754943508222875e-38
    d.logits = d.probs:clamp(tiny, 1):log()
  else
    d.logits = logits - logits:logsumexp(-1, true)
    d.probs = d.logits:exp()
  end
  local s = t:shape()
  d.num_events = s[#s]
  d.batch_shape, d.event_shape = slice(s, 1, #s - 1), {}
  return d
end
function Categorical:_support(v)
  if v.dtype ~= "int64" and v.dtype ~= "int32" then return false, "values must be integer category indices, got " .. v.dtype end
  if v:numel() > 0 and (v:min():item() < 1 or v:max():item() > self.num_events) then
    return false, ("values must lie in 1..%d"):format(self.num_events)
  end
  return true
end
function Categorical:mean() return ember.full(self.batch_shape, 0 / 0, { dtype = self.probs.dtype, device = self.probs.device }) end
Categorical.variance = Categorical.mean
function Categorical:sample(shape, opts)
  local ss = sample_shape("Categorical:sample", shape, opts)
  local n = 1
  for i = 1, #ss do n = n * ss[i] end
  local k = self.num_events
  local out = ember.no_grad(function()
    local p = self.probs:detach():reshape({ -1, k })
    if n == 0 then return ember.empty(concat({ 0 }, { p:size(1) }), { dtype = "int64", device = p.device }) end
    local idx = ember.multinomial(p, n, { replacement = true, generator = opts and opts.generator })   -- {B, n}
    return idx:t():contiguous()
  end)
  return out:reshape(concat(ss, self.batch_shape))
end
function Categorical:log_prob(v)
  self:_validate("log_prob", v)
  v = v:to("int64")
  local shape = broadcast_shape("Categorical:log_prob", v:shape(), self.batch_shape)
  local vi = v:expand(shape):unsqueeze(-1)
  local lg = self.logits:expand(concat(shape, { self.num_events }))
  return lg:gather(-1, vi):squeeze(-1)
end
function Categorical:entropy()
  local lo = self.logits.dtype == "float64" and -1.7976931348623157e308 or -3.4028234663852886e38
  return -(self.probs * self.logits:clamp(lo)):sum(-1)
end
-- every value of the support, {k, batch...}: 1..k along dim 1
function Categorical:enumerate_support()
  local k = self.num_events
  local v = ember.arange(1, k + 1, { dtype = "int64", device = self.probs.device })
  local shape = concat({ k }, self.batch_shape)
  local view = { k }
  for _ = 1, #self.batch_shape do view[#view + 1] = 1 end
  return v:reshape(view):expand(shape)
end

---------------------------------------------------------------- lgamma, digamma
-- the elementwise ops (gradients digamma and trigamma)
local function lgamma(x) return x:lgamma() end
local function digamma(x) return x:digamma() end

---------------------------------------------------------------- Gamma sampling
-- standard gamma draws with the implicit gradient (distributions/gamma.lua)
local gamma = require("ember.distributions.gamma")
local rsample_gamma = gamma.rsample_gamma
D._standard_gamma_grad = gamma.standard_gamma_grad

local function positive_param(op, name, t, validate)
  if validate and t:numel() > 0 and not (t:detach():min():item() > 0) then
    fail(op, "%s must be positive, got %s", name, min_of(t))
  end
end
-- a two-parameter family whose parameters are both positive (Gamma, Beta)
local function positive_pair_new(cls, names, a, b, opts)
  local d = two_param_new(cls, names, a, b, opts)
  for _, name in ipairs(names) do positive_param(cls.name, name, d[name], d.validate_args) end
  return d
end
---------------------------------------------------------------- Gamma
local Gamma = class("Gamma")
function D.Gamma_new(concentration, rate, opts)
  return positive_pair_new(Gamma, { "concentration", "rate" }, concentration, rate, opts)
end
-- the support of Gamma, and Dirichlet's before its sums
local function nonnegative(v)
  if v:numel() > 0 and not (v:min():item() >= 0) then return false, "values must be non-negative" end
  return true
end
function Gamma:_support(v) return nonnegative(v) end
function Gamma:mean() return self.concentration / self.rate end
function Gamma:variance() return self.concentration / self.rate:pow(2) end
function Gamma:rsample(shape, opts)
  local s = self:_extended(sample_shape("Gamma:rsample", shape, opts))
  return rsample_gamma(self.concentration:expand(s):contiguous(), opts) / self.rate
end
Gamma.sample = sample_by_rsample
function Gamma:log_prob(v)
  self:_validate("log_prob", v)
  local a, b = self.concentration, self.rate
  return a * b:log() + (a - 1) * v:log() - b * v - lgamma(a)
end
function Gamma:entropy()
  local a = self.concentration
  return a - self.rate:log() + lgamma(a) + (-a + 1) * digamma(a)
end

---------------------------------------------------------------- Beta
local Beta = class("Beta")
function D.Beta_new(concentration1, concentration0, opts)
  return positive_pair_new(Beta, { "concentration1", "concentration0" }, concentration1, concentration0, opts)
end
function Beta:_support(v)
  if v:numel() > 0 and not (v:min():item() > 0 and v:max():item() < 1) then return false, "values must lie in (0, 1)" end
  return true
end
function Beta:mean() return self.concentration1 / (self.concentration1 + self.concentration0) end
function Beta:variance()
  local a, b = self.concentration1, self.concentration0
  local t = a + b
  return a * b / (t:pow(2) * (t + 1))
end
function Beta:rsample(shape, opts)
  local s = self:_extended(sample_shape("Beta:rsample", shape, opts))
  local x = rsample_gamma(self.concentration1:expand(s):contiguous(), opts)
  local y = rsample_gamma(self.concentration0:expand(s):contiguous(), opts)
  return x / (x + y)
end
Beta.sample = sample_by_rsample
local function lbeta(a, b) return lgamma(a) + lgamma(b) - lgamma(a + b) end
function Beta:log_prob(v)
  self:_validate("log_prob", v)
  local a, b = self.concentration1, self.concentration0
  return (a - 1) * v:log() + (b - 1) * (-v):log1p() - lbeta(a, b)
end
function Beta:entropy()
  local a, b = self.concentration1, self.concentration0
  return lbeta(a, b) - (a - 1) * digamma(a) - (b - 1) * digamma(b) + (a + b - 2) * digamma(a + b)
end

---------------------------------------------------------------- Dirichlet
local Dirichlet = class("Dirichlet")
function D.Dirichlet_new(concentration, opts)
  opts = check_opts("Dirichlet", opts, { validate_args = true })
  if not ember.is_tensor(concentration) or concentration:dim() < 1 then
    fail("Dirichlet", "concentration must be a tensor of at least one dim")
  end
  if concentration.dtype ~= "float32" and concentration.dtype ~= "float64" then
    fail("Dirichlet", "concentration must be a floating point tensor, got %s", concentration.dtype)
  end
  local s = concentration:shape()
  local d = setmetatable({ concentration = concentration, batch_shape = slice(s, 1, #s - 1),
    event_shape = { s[#s] }, validate_args = opts.validate_args ~= false, has_rsample = true }, Dirichlet)
  positive_param("Dirichlet", "concentration", concentration, d.validate_args)
  return d
end
function Dirichlet:_support(v)
  local ok, why = nonnegative(v)
  if not ok then return ok, why end
  local err = (v:sum(-1) - 1):abs()
  if err:numel() > 0 and err:max():item() > 1e-6 then return false, "values must sum to 1 along the last dim" end
  return true
end
function Dirichlet:mean() return self.concentration / self.concentration:sum(-1, true) end
function Dirichlet:variance()
  local c = self.concentration
  local c0 = c:sum(-1, true)
  return c * (c0 - c) / (c0:pow(2) * (c0 + 1))
end
function Dirichlet:rsample(shape, opts)
  local s = self:_extended(sample_shape("Dirichlet:rsample", shape, opts))
  local x = rsample_gamma(self.concentration:expand(s):contiguous(), opts)
  return x / x:sum(-1, true)
end
Dirichlet.sample = sample_by_rsample
function Dirichlet:log_prob(v)
  self:_validate("log_prob", v)
  local c = self.concentration
  return ((c - 1) * v:log()):sum(-1) + lgamma(c:sum(-1)) - lgamma(c):sum(-1)
end
function Dirichlet:entropy()
  local c = self.concentration
  local k = c:size(-1)
  local c0 = c:sum(-1)
  return lgamma(c):sum(-1) - lgamma(c0) + (c0 - k) * digamma(c0) - ((c - 1) * digamma(c)):sum(-1)
end

---------------------------------------------------------------- MultivariateNormal
-- Through ember.linalg: the Cholesky factor L of the covariance (its
-- gradient symmetric, as PyTorch's), triangular solves against it, and its
-- diagonal's logs for the log-determinant.
local linalg = ember.linalg
local function solve_lower(l, b) return linalg.solve_triangular(l, b, { upper = false }) end
local function half_log_det(l) return l:diagonal(0, -2, -1):log():sum(-1) end
-- the squared norm of L^-1 x over the last dim of x, L's batch dims broadcast
-- against x's leading dims
local function mahalanobis(l, x)
  local y = solve_lower(l, x:unsqueeze(-1)):squeeze(-1)
  return (y * y):sum(-1)
end
-- runs f, naming op and what for a matrix linalg finds not positive-definite
local function factor(op, what, f, ...)
  local ok, r = pcall(f, ...)
  if not ok then
    local msg = tostring(r)
    local detail = msg:match("not positive%-definite.*$")
    if detail then fail(op, "%s is not positive definite (ember.linalg.cholesky: %s)", what, detail) end
    error(r, 0)
  end
  return r
end
-- the lower Cholesky factor of P^-1 from P, as PyTorch's
-- _precision_to_scale_tril: flip(cholesky(flip(P)))^-T, triangular
local function precision_to_scale_tril(op, P)
  local lf = factor(op, "precision_matrix", linalg.cholesky, P:flip({ -2, -1 }))
  local l_inv = lf:flip({ -2, -1 }):transpose(-2, -1)
  local n = P:size(-1)
  local id = ember.eye(n, n, { dtype = P.dtype, device = P.device }):expand(P:shape())
  return solve_lower(l_inv, id)
end

local MultivariateNormal = class("MultivariateNormal")
-- MultivariateNormal(loc, {covariance_matrix =} or {precision_matrix =} or
-- {scale_tril =}, validate_args =)
function D.MultivariateNormal_new(loc, opts)
  local name = "MultivariateNormal"
  opts = check_opts(name, opts, { covariance_matrix = true, scale_tril = true, precision_matrix = true,
    validate_args = true })
  local given, form = 0, nil
  for _, k in ipairs({ "covariance_matrix", "precision_matrix", "scale_tril" }) do
    if opts[k] ~= nil then given, form = given + 1, k end
  end
  if given ~= 1 then
    fail(name, "give exactly one of covariance_matrix, precision_matrix and scale_tril (got %d)", given)
  end
  if not ember.is_tensor(loc) or loc:dim() < 1 then fail(name, "loc must be a tensor of at least one dim") end
  local M = opts[form]
  if not ember.is_tensor(M) or M:dim() < 2 then fail(name, "%s must be a tensor of at least two dims", form) end
  if M.dtype ~= "float32" and M.dtype ~= "float64" then fail(name, "%s must be float32 or float64, got %s", form, M.dtype) end
  local ls, ms = loc:shape(), M:shape()
  local n = ls[#ls]
  if ms[#ms] ~= n or ms[#ms - 1] ~= n then
    fail(name, "loc %s has %d dims of event, %s is %s: it must end in {%d, %d}", show(ls), n, form, show(ms), n, n)
  end
  local batch = broadcast_shape(name, slice(ls, 1, #ls - 1), slice(ms, 1, #ms - 2))
  loc = loc:expand(concat(batch, { n }))
  M = M:expand(concat(batch, { n, n }))
  local validate = opts.validate_args ~= false
  if validate and M:numel() > 0 and form ~= "scale_tril" then
    local asym = (M - M:transpose(-2, -1)):abs():max():item()
    local tol = 1e-6 * math.max(1, M:abs():max():item())
    if not (asym <= tol) then fail(name, "%s is not symmetric (largest |M - M^T| is %g)", form, asym) end
  end
  local l
  if form == "covariance_matrix" then
    l = factor(name, form, linalg.cholesky, M)
  elseif form == "precision_matrix" then
    l = precision_to_scale_tril(name, M)
  else
    if validate and M:numel() > 0 then
      if M:triu(1):abs():max():item() ~= 0 then
        fail(name, "scale_tril must be lower triangular (it has a non-zero element above the diagonal)")
      end
      local dmin = M:diagonal(0, -2, -1):min():item()
      if not (dmin > 0) then fail(name, "scale_tril must have a positive diagonal (its smallest element is %g)", dmin) end
    end
    -- as given, as PyTorch's (its upper part, zero once validated, reaches the
    -- gradients of what multiplies by it: covariance_matrix, kl_divergence)
    l = M
  end
  local d = setmetatable({ loc = loc, batch_shape = batch, event_shape = { n }, validate_args = validate,
    has_rsample = true, _n = n, scale_tril = l }, MultivariateNormal)
  return d
end
function MultivariateNormal:_support() return true end
function MultivariateNormal:mean() return self.loc end
function MultivariateNormal:covariance_matrix() return self.scale_tril:matmul(self.scale_tril:transpose(-2, -1)) end
-- (L L^T)^-1 = L^-T L^-1
function MultivariateNormal:precision_matrix()
  local n = self._n
  local l = self.scale_tril
  local id = ember.eye(n, n, { dtype = l.dtype, device = l.device }):expand(l:shape())
  local li = solve_lower(l, id)
  return li:transpose(-2, -1):matmul(li)
end
function MultivariateNormal:variance() return self.scale_tril:pow(2):sum(-1) end
function MultivariateNormal:rsample(shape, opts)
  local s = self:_extended(sample_shape("MultivariateNormal:rsample", shape, opts))
  local eps = ember.randn(s, { dtype = self.loc.dtype, device = self.loc.device, generator = opts and opts.generator })
  return self.loc + self.scale_tril:matmul(eps:unsqueeze(-1)):squeeze(-1)
end
MultivariateNormal.sample = sample_by_rsample
function MultivariateNormal:log_prob(v)
  self:_validate("log_prob", v)
  local n = self._n
  local m = mahalanobis(self.scale_tril, v - self.loc)
  return (m + n * math.log(2 * math.pi)) * -0.5 - half_log_det(self.scale_tril)
end
function MultivariateNormal:entropy()
  local n = self._n
  return half_log_det(self.scale_tril) + 0.5 * n * (1 + math.log(2 * math.pi))
end

---------------------------------------------------------------- Independent
local Independent = class("Independent")
-- Independent(base, n): the last n batch dims of base become event dims
function D.Independent_new(base, n, opts)
  opts = check_opts("Independent", opts, { validate_args = true })
  if getmetatable(base) == nil or not getmetatable(base).name or not base.batch_shape then
    fail("Independent", "expected a distribution, got %s", type(base))
  end
  local b = base.batch_shape
  if type(n) ~= "number" or n ~= math.floor(n) or n < 0 or n > #b then
    fail("Independent", "reinterpreted_batch_ndims must be an integer in 0..%d (the base's batch dims), got %s",
      #b, tostring(n))
  end
  return setmetatable({ base_dist = base, reinterpreted_batch_ndims = n,
    batch_shape = slice(b, 1, #b - n), event_shape = concat(slice(b, #b - n + 1), base.event_shape),
    validate_args = opts.validate_args ~= false, has_rsample = base.has_rsample }, Independent)
end
local function sum_last(t, n)
  for _ = 1, n do t = t:sum(-1) end
  return t
end
function Independent:sample(shape, opts) return self.base_dist:sample(shape, opts) end
function Independent:rsample(shape, opts) return self.base_dist:rsample(shape, opts) end
function Independent:log_prob(v) return sum_last(self.base_dist:log_prob(v), self.reinterpreted_batch_ndims) end
function Independent:entropy() return sum_last(self.base_dist:entropy(), self.reinterpreted_batch_ndims) end
function Independent:mean() return self.base_dist:mean() end
function Independent:variance() return self.base_dist:variance() end
function Independent:stddev() return self.base_dist:stddev() end

---------------------------------------------------------------- kl_divergence
local KL = {}
local function register(p, q, fn) KL[p] = KL[p] or {}; KL[p][q] = fn end
register(Normal, Normal, function(p, q)
  local vr = (p.scale / q.scale):pow(2)
  local t1 = ((p.loc - q.loc) / q.scale):pow(2)
  return (vr + t1 - 1 - vr:log()) * 0.5
end)
register(Uniform, Uniform, function(p, q)
  local r = ((q.high - q.low) / (p.high - p.low)):log()
  local outside = q.low:gt(p.low):to("float32") + q.high:lt(p.high):to("float32")
  return ember.where(outside:gt(0), ember.full_like(r, math.huge), r)
end)
register(Uniform, Normal, function(p, q)
  local w = p.high - p.low
  local t1 = (q.scale * math.sqrt(2 * math.pi) / w):log()
  local t2 = w:pow(2) * (1 / 12)
  local t3 = ((p.high + p.low - q.loc * 2) * 0.5):pow(2)
  return t1 + (t2 + t3) * 0.5 / q.scale:pow(2)
end)
register(Bernoulli, Bernoulli, function(p, q)
  local t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
  local t2 = (-p.probs + 1) * (softplus(q.logits) - softplus(p.logits))
  return t1 + t2
end)
register(Categorical, Categorical, function(p, q)
  local t = p.probs * (p.logits - q.logits)
  t = ember.where(q.probs:eq(0), ember.full_like(t, math.huge), t)
  t = ember.where(p.probs:eq(0), ember.zeros_like(t), t)
  return t:sum(-1)
end)
register(Gamma, Gamma, function(p, q)
  local t1 = q.concentration * (p.rate / q.rate):log()
  local t2 = lgamma(q.concentration) - lgamma(p.concentration)
  local t3 = (p.concentration - q.concentration) * digamma(p.concentration)
  local t4 = (q.rate - p.rate) * (p.concentration / p.rate)
  return t1 + t2 + t3 + t4
end)
register(Beta, Beta, function(p, q)
  local sp, sq = p.concentration1 + p.concentration0, q.concentration1 + q.concentration0
  local t1 = lgamma(q.concentration1) + lgamma(q.concentration0) + lgamma(sp)
  local t2 = lgamma(p.concentration1) + lgamma(p.concentration0) + lgamma(sq)
  local t3 = (p.concentration1 - q.concentration1) * digamma(p.concentration1)
  local t4 = (p.concentration0 - q.concentration0) * digamma(p.concentration0)
  local t5 = (sq - sp) * digamma(sp)
  return t1 - t2 + t3 + t4 + t5
end)
register(Dirichlet, Dirichlet, function(p, q)
  local sp, sq = p.concentration:sum(-1), q.concentration:sum(-1)
  local t1 = lgamma(sp) - lgamma(sq)
  local t2 = (lgamma(p.concentration) - lgamma(q.concentration)):sum(-1)
  local t3 = p.concentration - q.concentration
  local t4 = digamma(p.concentration) - digamma(sp):unsqueeze(-1)
  return t1 - t2 + (t3 * t4):sum(-1)
end)
register(MultivariateNormal, MultivariateNormal, function(p, q)
  local n = p._n
  if q._n ~= n then fail("kl_divergence", "MultivariateNormal of %d and %d dims", n, q._n) end
  -- tr(Sq^-1 Sp) = |Lq^-1 Lp|_F^2, by one triangular solve; the Mahalanobis term by another
  local y = solve_lower(q.scale_tril, p.scale_tril)
  local tr = (y * y):sum(-1):sum(-1)
  local m = mahalanobis(q.scale_tril, q.loc - p.loc)
  return half_log_det(q.scale_tril) - half_log_det(p.scale_tril) + (tr + m - n) * 0.5
end)
register(Independent, Independent, function(p, q)
  if p.reinterpreted_batch_ndims ~= q.reinterpreted_batch_ndims then
    fail("kl_divergence", "Independent distributions over %d and %d event dims", p.reinterpreted_batch_ndims,
      q.reinterpreted_batch_ndims)
  end
  return sum_last(D.kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)
end)

-- KL(p || q), batch-shaped, for the registered pairs
function D.kl_divergence(p, q)
  local mp, mq = getmetatable(p), getmetatable(q)
  local fn = KL[mp] and KL[mp][mq]
  if not fn then
    fail("kl_divergence", "no KL divergence is registered for %s || %s", mp and mp.name or type(p), mq and mq.name or type(q))
  end
  return fn(p, q)
end

-- the constructors are called as D.Normal(loc, scale), and the classes stay
-- reachable for getmetatable(d) == ... checks as D.Normal too
for _, name in ipairs({ "Normal", "Uniform", "Bernoulli", "Categorical", "Independent", "Gamma", "Beta", "Dirichlet",
  "MultivariateNormal" }) do
  local cls, new = D[name], D[name .. "_new"]
  D[name .. "_new"] = nil
  -- the methods raise for a value past their parameters as the base
  -- class's (init.lua's wrappers) do
  for k, v in pairs(cls) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and type(v) == "function" then
      cls[k] = errors.arity_checked("ember.distributions." .. name .. ":" .. k, v, 1)
    end
  end
  local op, limit = "ember.distributions." .. name, errors.arity_limit(new, 0)
  -- a value past new's parameters raises before any other check
  setmetatable(cls, { __index = Distribution, __call = function(_, ...)
    if select("#", ...) > limit then errors.check_arity(op, new, 0, nil, ...) end
    return new(...)
  end })
end

require("ember.suggest").guard(D, "ember.distributions")   -- D.Normla raises with a did-you-mean
package.loaded["ember.distributions"] = D
return D
