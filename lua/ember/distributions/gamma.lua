-- ember.distributions' gamma draws: standard gamma sampling on the CPU and
-- the implicit reparameterisation gradient that makes Gamma, Beta and
-- Dirichlet rsample differentiable (distributions.lua uses them).
local ember = require("ember")

local M = {}
local LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)

-- Standard gamma draws of shape alpha (a tensor, any shape) by Marsaglia and
-- Tsang's squeeze (2000) on the CPU in float64, from the generator's normals
-- and uniforms; alpha < 1 draws alpha + 1 and multiplies by u^(1/alpha).
-- No gradient here: rsample_gamma below adds the implicit one.
local ffi = require("ffi")
local function standard_gamma(alpha, opts)
  local a = alpha:detach():to("cpu"):to("float64"):contiguous()
  local n = a:numel()
  local out = ember.empty(a:shape(), { dtype = "float64" })
  local ap, op = ffi.cast("const double *", a:data_ptr()), ffi.cast("double *", out:data_ptr())
  local g = opts and opts.generator
  local pool_n, pool_u, at = nil, nil, 0
  local size = math.max(64, n * 2)
  local np, up
  local function next_pair()
    if pool_n == nil or at >= size then
      pool_n = ember.randn({ size }, { dtype = "float64", generator = g })
      pool_u = ember.rand({ size }, { dtype = "float64", generator = g })
      np, up = ffi.cast("const double *", pool_n:data_ptr()), ffi.cast("const double *", pool_u:data_ptr())
      at = 0
    end
    at = at + 1
    return np[at - 1], up[at - 1]
  end
  for i = 0, n - 1 do
    local alpha_i = ap[i]
    local boost = 1
    if alpha_i < 1 then
      local _, u = next_pair()
      boost = u ^ (1 / alpha_i)
      alpha_i = alpha_i + 1
    end
    local d = alpha_i - 1 / 3
    local c = 1 / math.sqrt(9 * d)
    while true do
      local x, u = next_pair()
      local v = 1 + c * x
      if v > 0 then
        v = v * v * v
        if u < 1 - 0.0331 * x ^ 4 or math.log(u) < 0.5 * x * x + d * (1 - v + math.log(v)) then
          op[i] = d * v * boost
          break
        end
      end
    end
  end
  return out:to(alpha.dtype):to(alpha.device)
end

-- The implicit reparameterisation gradient of a standard gamma draw x of
-- shape a (Figurnov et al., 2018): dx/da = -(dP(a, x)/da) / p(x; a), P the
-- regularised lower incomplete gamma function (a series below a + 1, Lentz's
-- continued fraction above) and its a-derivative by central differences
-- (step 1e-5 a at most; about 1e-8 relative in double).
local exp, log, abs = math.exp, math.log, math.abs
local function lgamma1(a)
  local shift = 0
  while a < 8 do shift = shift + log(a); a = a + 1 end
  local r = 1 / a
  local r2 = r * r
  return (a - 0.5) * log(a) - a + LOG_SQRT_2PI
    + r * (1 / 12 + r2 * (-1 / 360 + r2 * (1 / 1260 + r2 * (-1 / 1680 + r2 * (1 / 1188 + r2 * (-691 / 360360))))))
    - shift
end
local function gamma_p(a, x)
  if x <= 0 then return 0 end
  local front = exp(-x + a * log(x) - lgamma1(a))
  if x < a + 1 then
    local sum, term, ap = 1 / a, 1 / a, a
    for _ = 1, 10000 do
      ap = ap + 1
      term = term * x / ap
      sum = sum + term
      if abs(term) < abs(sum) * 1e-17 then break end
    end
    return sum * front
  end
  local tiny = 1e-300
  local b = x + 1 - a
  local c, d = 1 / tiny, 1 / b
  local h = d
  for i = 1, 10000 do
    local an = -i * (i - a)
    b = b + 2
    d = an * d + b
    if abs(d) < tiny then d = tiny end
    c = b + an / c
    if abs(c) < tiny then c = tiny end
    d = 1 / d
    local del = d * c
    h = h * del
    if abs(del - 1) < 1e-16 then break end
  end
  return 1 - front * h
end
local function dgamma_dalpha(a, x)
  if x <= 0 then return 0 end
  local h = math.min(1e-5 * math.max(a, 1e-3), a / 2)
  local dp = (gamma_p(a + h, x) - gamma_p(a - h, x)) / (2 * h)
  local pdf = exp((a - 1) * log(x) - x - lgamma1(a))
  if pdf == 0 then return 0 end
  return -dp / pdf
end
M.standard_gamma_grad = function(alpha, x)
  local a = alpha:detach():to("cpu"):to("float64"):contiguous()
  local xs = x:detach():to("cpu"):to("float64"):contiguous()
  local out = ember.empty(a:shape(), { dtype = "float64" })
  local ap, xp = ffi.cast("const double *", a:data_ptr()), ffi.cast("const double *", xs:data_ptr())
  local op = ffi.cast("double *", out:data_ptr())
  for i = 0, a:numel() - 1 do op[i] = dgamma_dalpha(ap[i], xp[i]) end
  return out:to(alpha.dtype):to(alpha.device)
end

-- standard gamma draws of shape alpha whose gradient to alpha is the
-- implicit one above
local StandardGamma = ember.autodiff.Function{
  name = "standard_gamma",
  forward = function(ctx, alpha, gen)
    local x = standard_gamma(alpha, { generator = gen or nil })
    ctx.grad = M.standard_gamma_grad(alpha, x)
    return x
  end,
  backward = function(ctx, dy) return dy * ctx.grad end,
}
local function rsample_gamma(alpha, opts)
  return StandardGamma(alpha, opts and opts.generator or false)
end

M.rsample_gamma = rsample_gamma
return M
