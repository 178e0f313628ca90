-- ember.distributions: log_prob, entropy, mean, variance, stddev, the shapes
-- and kl_divergence against PyTorch 1.13 in float64, values and gradients
-- (spec/fixtures/distributions/cases.json, written by gen.py there);
-- sample and rsample statistics with fixed seeds against the known moments;
-- argument validation.
local H = require("helpers")
local ember = H.ember
local D = ember.distributions
local GradManager = ember.autodiff.GradManager

local read = H.read_json
local FIX = read("spec/fixtures/distributions/cases.json")

local F64 = { dtype = "float64" }
local MAKE = {
  Normal = function(a, b) return D.Normal(a, b) end,
  Uniform = function(a, b) return D.Uniform(a, b) end,
  Bernoulli_probs = function(p) return D.Bernoulli({ probs = p }) end,
  Bernoulli_logits = function(l) return D.Bernoulli({ logits = l }) end,
  Categorical_probs = function(p) return D.Categorical({ probs = p }) end,
  Categorical_logits = function(l) return D.Categorical({ logits = l }) end,
  Independent_Normal = function(a, b) return D.Independent(D.Normal(a, b), 1) end,
  Gamma = function(a, b) return D.Gamma(a, b) end,
  Beta = function(a, b) return D.Beta(a, b) end,
  Dirichlet = function(c) return D.Dirichlet(c) end,
  MultivariateNormal = function(loc, cov) return D.MultivariateNormal(loc, { covariance_matrix = cov }) end,
  MultivariateNormal_tril = function(loc, tril) return D.MultivariateNormal(loc, { scale_tril = tril }) end,
  MultivariateNormal_tril_batched = function(loc, tril) return D.MultivariateNormal(loc, { scale_tril = tril }) end,
  MultivariateNormal_precision = function(loc, p) return D.MultivariateNormal(loc, { precision_matrix = p }) end,
}

local function tensors(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = ember.tensor(v, F64) end
  return out
end

-- the gradients of sum(f(d)) with respect to the parameters
local function grads(make, params, f)
  local ps = tensors(params)
  local gm = GradManager():attach(ps)
  gm:record()
  local out = f(make(unpack(ps)))
  gm:backward(out:sum())
  return ps
end

local function same_grads(ps, expected, what)
  for i, p in ipairs(ps) do
    if p.grad == nil then
      for _, v in ipairs(H.flatten(expected[i])) do assert(v == 0, what .. ": no gradient for parameter " .. i) end
    else
      H.same(p.grad, expected[i], 1e-9)
    end
  end
end

describe("ember.distributions against PyTorch 1.13 (float64)", function()
  for _, c in ipairs(FIX.cases) do
    local make = MAKE[c.name]
    it(c.name .. ": shapes, log_prob, entropy, moments, kl and their gradients", function()
      local d = make(unpack(tensors(c.params)))
      assert.are.same(c.batch_shape, d.batch_shape)
      assert.are.same(c.event_shape, d.event_shape)
      local categorical = c.name:find("Categorical") ~= nil
      local v = ember.tensor(c.value, categorical and { dtype = "int64" } or F64)
      H.same(d:log_prob(v), c.log_prob, 1e-9)
      H.same(d:entropy(), c.entropy, 1e-9)
      if c.mean then
        H.same(d:mean(), c.mean, 1e-12)
        H.same(d:variance(), c.variance, 1e-12)
        H.same(d:stddev(), c.stddev, 1e-12)
      else   -- a categorical's mean and variance are undefined: NaN, batch-shaped
        local n = 1
        for _, b in ipairs(c.batch_shape) do n = n * b end
        local nan = {}
        for i = 1, n do nan[i] = 0 / 0 end
        H.same(d:mean(), nan, 0, c.batch_shape)
        H.same(d:variance(), nan, 0, c.batch_shape)
      end
      same_grads(grads(make, c.params, function(x) return x:log_prob(v) end), c.log_prob_grad, "log_prob")
      same_grads(grads(make, c.params, function(x) return x:entropy() end), c.entropy_grad, "entropy")
      if c.kl then
        local q = make(unpack(tensors(c.kl_params)))
        H.same(D.kl_divergence(d, q), c.kl, 1e-9)
        same_grads(grads(make, c.params, function(x) return D.kl_divergence(x, q) end), c.kl_grad, "kl")
      end
    end)
  end

  it("kl_divergence(Uniform, Normal)", function()
    local c = FIX.cross[1]
    local q = D.Normal(ember.tensor(c.q[1], F64), ember.tensor(c.q[2], F64))
    local ps = grads(function(l, h) return D.Uniform(l, h) end, c.p, function(p) return D.kl_divergence(p, q) end)
    H.same(D.kl_divergence(D.Uniform(ps[1]:detach(), ps[2]:detach()), q), c.kl, 1e-10)
    same_grads(ps, c.kl_grad, "kl")
  end)
end)

describe("ember.distributions sampling", function()
  -- n draws: the sample mean is within 5 standard errors (sd / sqrt(n)) of
  -- the true mean, and the sample variance within 5 of its own (for these
  -- distributions about sd^2 * sqrt(2 / n) for the normal, sd^2 * 0.1 at most)
  local N = 200000
  local function moments(x)
    x = x:to("float64")
    return x:mean():item(), x:var():item()
  end

  it("Normal: sample and rsample match loc and scale; rsample carries gradients", function()
    ember.manual_seed(11)
    local loc, scale = ember.tensor({ 1.5 }, F64), ember.tensor({ 0.5 }, F64)
    local d = D.Normal(loc, scale)
    local x = d:sample({ N })
    H.shape_is(x, { N, 1 })
    local m, v = moments(x)
    assert.is_true(math.abs(m - 1.5) < 5 * 0.5 / math.sqrt(N))
    assert.is_true(math.abs(v - 0.25) < 5 * 0.25 * math.sqrt(2 / N))
    local gm = GradManager():attach({ loc, scale })
    gm:record()
    local y = D.Normal(loc, scale):rsample({ 1000 })
    gm:backward(y:sum())
    H.same(loc.grad, { 1000 }, 1e-12)                      -- d/dloc sum(loc + eps * scale)
    H.same(scale.grad, { ((y:detach() - 1.5) / 0.5):sum():item() }, 1e-9)   -- sum(eps)
  end)

  it("Uniform: samples in [low, high) with the uniform's moments", function()
    ember.manual_seed(12)
    local x = D.Uniform(-1, 3):sample({ N })
    assert.is_true(x:min():item() >= -1 and x:max():item() < 3)
    local m, v = moments(x)
    local sd = 4 / math.sqrt(12)
    assert.is_true(math.abs(m - 1) < 5 * sd / math.sqrt(N))
    assert.is_true(math.abs(v - sd * sd) < 0.02)
  end)

  it("Bernoulli: sample frequencies match probs", function()
    ember.manual_seed(13)
    local p = ember.tensor({ 0.1, 0.5, 0.85 })
    local x = D.Bernoulli(p):sample({ N })
    local f = x:mean(1):tolist()
    for i, pi in ipairs({ 0.1, 0.5, 0.85 }) do
      assert.is_true(math.abs(f[i] - pi) < 5 * math.sqrt(pi * (1 - pi) / N), i .. ": " .. f[i])
    end
  end)

  it("Categorical: sample frequencies match probs, per batch row, values 1-based", function()
    ember.manual_seed(14)
    local probs = { { 0.2, 0.3, 0.5 }, { 0.7, 0.0, 0.3 } }
    local d = D.Categorical({ logits = ember.tensor(probs):clamp(1e-30, 1):log() })
    local x = d:sample({ N })
    H.shape_is(x, { N, 2 })
    assert.are.equal("int64", x.dtype)
    for r = 1, 2 do
      local col = x:select(2, r)
      for k = 1, 3 do
        local f = col:eq(k):to("float64"):mean():item()
        local p = probs[r][k]
        assert.is_true(math.abs(f - p) < 5 * math.sqrt(p * (1 - p) / N) + 1e-12, r .. "," .. k .. ": " .. f)
      end
    end
  end)

  it("Gamma, Beta and Dirichlet: sample means and variances match the moments", function()
    -- Marsaglia-Tsang draws (alpha < 1 boosted); 5 standard errors of the mean
    local g = ember.Generator(21)
    local conc = ember.tensor({ 0.3, 1, 4.5 }, F64)
    local d = D.Gamma(conc, 2)
    local x = d:sample({ N }, { generator = g })
    assert.is_true(x:min():item() >= 0)
    local m, v = x:mean(1):tolist(), x:var(1):tolist()
    for i, a in ipairs({ 0.3, 1, 4.5 }) do
      local mean, var = a / 2, a / 4
      assert.is_true(math.abs(m[i] - mean) < 5 * math.sqrt(var / N), i .. ": mean " .. m[i])
      assert.is_true(math.abs(v[i] - var) < 0.05 * var + 5 * math.sqrt(var / N), i .. ": var " .. v[i])
    end
    local b = D.Beta(ember.tensor({ 2 }, F64), ember.tensor({ 5 }, F64)):sample({ N }, { generator = g })
    local bm = b:mean():item()
    assert.is_true(math.abs(bm - 2 / 7) < 5 * math.sqrt(10 / (49 * 8) / N), bm)
    local dd = D.Dirichlet(ember.tensor({ 1, 2, 3 }, F64))
    local y = dd:sample({ N }, { generator = g })
    H.same(y:sum(2), H.flatten(ember.ones({ N }):tolist()), 1e-12)
    local ym = y:mean(1):tolist()
    for i, a in ipairs({ 1, 2, 3 }) do
      local mean = a / 6
      local var = mean * (1 - mean) / 7
      assert.is_true(math.abs(ym[i] - mean) < 5 * math.sqrt(var / N), i .. ": " .. ym[i])
    end
  end)

  it("MultivariateNormal: rsample's mean and covariance; errors", function()
    local cov = ember.tensor({ { 2, 0.6 }, { 0.6, 1 } }, F64)
    local d = D.MultivariateNormal(ember.tensor({ 1, -1 }, F64), { covariance_matrix = cov })
    local x = d:rsample({ N }, { generator = ember.Generator(31) })
    H.shape_is(x, { N, 2 })
    local c = x - x:mean(1)
    local emp = c:t():matmul(c) / (N - 1)
    H.same(x:mean(1), { 1, -1 }, 5 * math.sqrt(2 / N))
    H.same(emp, { { 2, 0.6 }, { 0.6, 1 } }, 0.03)
    H.same(d:covariance_matrix(), { { 2, 0.6 }, { 0.6, 1 } }, 1e-12)
    H.raises(function() D.MultivariateNormal(ember.zeros({ 2 }), { covariance_matrix = ember.tensor({ { 1, 2 }, { 2, 1 } }) }) end,
      "ember.distributions.MultivariateNormal", "covariance_matrix is not positive definite", "order 2")
    H.raises(function() D.MultivariateNormal(ember.zeros({ 2 }), { precision_matrix = ember.tensor({ { 1, 2 }, { 2, 1 } }) }) end,
      "precision_matrix is not positive definite")
    H.raises(function() D.MultivariateNormal(ember.zeros({ 2 }), { covariance_matrix = ember.tensor({ { 1, 0.5 }, { 0, 1 } }) }) end,
      "covariance_matrix is not symmetric")
    H.raises(function() D.MultivariateNormal(ember.zeros({ 2 }), { scale_tril = ember.tensor({ { 1, 0.5 }, { 0, 1 } }) }) end,
      "scale_tril must be lower triangular")
    H.raises(function() D.MultivariateNormal(ember.zeros({ 2 }), { scale_tril = ember.tensor({ { 1, 0 }, { 0.5, -1 } }) }) end,
      "scale_tril must have a positive diagonal")
    H.raises(function() D.MultivariateNormal(ember.zeros({ 3 }), { covariance_matrix = ember.eye(2) }) end, "must end in {3, 3}")
    H.raises(function() D.MultivariateNormal(ember.zeros({ 2 }), {}) end,
      "exactly one of covariance_matrix, precision_matrix and scale_tril (got 0)")
    H.raises(function() D.MultivariateNormal(ember.zeros({ 2 }), { covariance_matrix = ember.eye(2), scale_tril = ember.eye(2) }) end,
      "exactly one of covariance_matrix, precision_matrix and scale_tril (got 2)")
    -- the three forms of one distribution agree, and precision_matrix() inverts the covariance
    local loc = ember.tensor({ 1, -1 }, F64)
    local byp = D.MultivariateNormal(loc, { precision_matrix = ember.linalg.inv(cov) })
    local byl = D.MultivariateNormal(loc, { scale_tril = ember.linalg.cholesky(cov) })
    H.same(byp.scale_tril, d.scale_tril:tolist(), 1e-12)
    H.same(byl:covariance_matrix(), cov:tolist(), 1e-12)
    H.same(d:precision_matrix():matmul(cov), { { 1, 0 }, { 0, 1 } }, 1e-12)
    local v = ember.tensor({ { 0.3, 0.2 }, { -1, 2 } }, F64)
    H.same(byp:log_prob(v), d:log_prob(v):tolist(), 1e-12)
    H.same(byl:log_prob(v), d:log_prob(v):tolist(), 1e-12)
  end)

  it("Gamma, Beta, Dirichlet rsample: implicit gradients, exact to 1e-7 and in expectation", function()
    local gg = FIX.gamma_grad
    local got = D._standard_gamma_grad(ember.tensor(gg.alpha, F64), ember.tensor(gg.x, F64))
    H.same(got, gg.exact, 1e-7)          -- mpmath's
    H.same(got, gg.torch, 1e-3)          -- PyTorch's approximation
    -- d/da E[x] = 1/rate for Gamma(a, rate): the mean of the pathwise gradients
    local alpha = ember.tensor({ 0.5, 2, 9 }, F64)
    local gm = GradManager():attach({ alpha })
    gm:record()
    local n = 20000
    local y = D.Gamma(alpha, 2):rsample({ n }, { generator = ember.Generator(41) })
    gm:backward(y:mean(1):sum())
    H.same(alpha.grad, { 0.5, 0.5, 0.5 }, 0.01)
    -- Beta(a, b): d/da E[x] = b / (a + b)^2
    local a, b = ember.tensor({ 2 }, F64), ember.tensor({ 3 }, F64)
    gm = GradManager():attach({ a, b })
    gm:record()
    local z = D.Beta(a, b):rsample({ n }, { generator = ember.Generator(42) })
    gm:backward(z:mean())
    H.same(a.grad, { 3 / 25 }, 0.005)
    H.same(b.grad, { -2 / 25 }, 0.005)
    -- Dirichlet: draws on the simplex, gradients of E[x_1] = c_1 / sum(c)
    local c = ember.tensor({ 1, 2, 3 }, F64)
    gm = GradManager():attach({ c })
    gm:record()
    local w = D.Dirichlet(c):rsample({ n }, { generator = ember.Generator(43) })
    gm:backward(w:select(2, 1):mean())
    H.same(c.grad, { 5 / 36, -1 / 36, -1 / 36 }, 0.005)
  end)

  it("MultivariateNormal: gradcheck and gradgradcheck of log_prob and kl through each form (float64)", function()
    local gc, ggc = ember.autodiff.gradcheck, ember.autodiff.gradgradcheck
    local v = ember.tensor({ { 0.3, -0.2, 1 }, { 1, 0.5, -1 } }, F64)
    local q = D.MultivariateNormal(ember.zeros({ 3 }, F64), { covariance_matrix = ember.eye(3, 3, F64) * 2 })
    local function sym(a) return a:matmul(a:t()) + ember.eye(3, 3, F64) * 3 end
    local forms = {
      function(loc, a) return D.MultivariateNormal(loc, { covariance_matrix = sym(a) }) end,
      function(loc, a) return D.MultivariateNormal(loc, { precision_matrix = sym(a) }) end,
      function(loc, a) return D.MultivariateNormal(loc, { scale_tril = a:tril(-1) + ember.eye(3, 3, F64) * 1.5 }) end,
    }
    for _, make in ipairs(forms) do
      local f = function(loc, a) local d = make(loc, a) return d:log_prob(v), D.kl_divergence(d, q) end
      local inputs = { ember.tensor({ 0.1, -0.3, 0.2 }, F64), ember.tensor({ { 1, 0.2, -0.1 }, { 0.3, 0.9, 0 }, { -0.2, 0.4, 1.1 } }, F64) }
      assert.is_true(gc(f, inputs))
      assert.is_true(ggc(f, inputs))
    end
  end)

  it("constructors: a value past the parameters raises first; probs first and opts together", function()
    H.raises(function() D.Normal(0, 1, nil, 5) end, "ember.distributions.Normal", "extra argument 4 (5)")
    H.raises(function() D.MultivariateNormal(nil, nil, "x") end, "ember.distributions.MultivariateNormal", "extra argument 3")
    H.raises(function() D.Bernoulli({ probs = ember.tensor({ 0.5 }) }, {}) end, "ember.distributions.Bernoulli", "extra argument 2")
    H.raises(function() D.Categorical(ember.tensor({ 0.5, 0.5 }), "x") end, "ember.distributions.Categorical",
      "options must be a table, got string")
    H.raises(function() D.Bernoulli(ember.tensor({ 0.5 }), { probs = ember.tensor({ 0.2 }) }) end, "probs is given twice")
    local opts = { validate_args = false }
    local d = D.Bernoulli(ember.tensor({ 0.25 }, F64), opts)
    assert.is_nil(opts.probs)                                   -- the caller's table is not written to
    assert.is_false(d.validate_args)
    H.same(d.probs, { 0.25 }, 0)
  end)

  it("a private generator repeats its draws and leaves the default stream alone", function()
    local d = D.Normal(ember.zeros({ 3 }), 1)
    ember.manual_seed(5)
    local before = ember.get_rng_state()
    local a = d:sample({ 4 }, { generator = ember.Generator(7) })
    local b = d:sample({ 4 }, { generator = ember.Generator(7) })
    H.same(a, b:tolist(), 0)
    assert.are.same(before, ember.get_rng_state())
    local c = D.Categorical(ember.tensor({ 0.5, 0.5 }))
    H.same(c:sample({ 20 }, { generator = ember.Generator(3) }), c:sample({ 20 }, { generator = ember.Generator(3) }):tolist(), 0)
    assert.are.same(before, ember.get_rng_state())
  end)
end)

describe("ember.distributions arguments", function()
  it("validates parameters and values, naming the distribution", function()
    H.raises(function() D.Normal(0, -1) end, "distributions.Normal", "scale must be positive")
    H.raises(function() D.Uniform(1, 1) end, "low must be below high")
    H.raises(function() D.Bernoulli({ probs = ember.tensor({ 1.5 }) }) end, "probs must lie in [0, 1]")
    H.raises(function() D.Categorical({ probs = ember.tensor({ 0.5 }), logits = ember.tensor({ 0 }) }) end,
      "exactly one of probs and logits")
    H.raises(function() D.Normal(0, 1, { validate = true }) end, "unknown option 'validate'")
    local c = D.Categorical(ember.tensor({ 0.5, 0.5 }))
    H.raises(function() c:log_prob(ember.tensor({ 3 }, { dtype = "int64" })) end, "values must lie in 1..2")
    H.raises(function() D.Uniform(0, 1):log_prob(ember.tensor({ 2 })) end, "outside the support")
    -- validate_args = false: outside values give -inf as PyTorch's
    H.same(D.Uniform(0, 1, { validate_args = false }):log_prob(ember.tensor({ 2 })), { -math.huge })
    H.raises(function() return D.Betta end, "no field 'Betta'", "did you mean Beta")
    H.raises(function() D.Gamma(0, 1) end, "concentration must be positive")
    H.raises(function() D.Beta(1, 1):log_prob(ember.tensor({ 1 })) end, "values must lie in (0, 1)")
    H.raises(function() D.Dirichlet(ember.tensor({ 1, 1 })):log_prob(ember.tensor({ 0.5, 0.6 })) end, "sum to 1")
    H.raises(function() D.Categorical(ember.tensor({ 0.5, 0.5 })):rsample() end, "not reparameterisable")
    H.raises(function() D.kl_divergence(D.Normal(0, 1), D.Bernoulli(0.5)) end, "no KL divergence is registered for Normal || Bernoulli")
  end)

  it("raises for a value past a call's parameters and for an unknown sample option", function()
    local g = ember.Generator(3)
    H.raises(function() D.Normal(0, 1, {}, 5) end,
      "ember.distributions.Normal: extra argument 4 (5): it takes 3 (loc, scale, opts)")
    H.raises(function() D.Beta(nil, nil, nil, 5) end, "ember.distributions.Beta: extra argument 4")
    H.raises(function() D.Bernoulli({ probs = ember.tensor({ 0.5 }) }, { validate_args = false }) end,
      "ember.distributions.Bernoulli: extra argument 2")
    H.raises(function() D.Categorical(ember.tensor({ 0.5, 0.5 }), { logits = ember.tensor({ 0, 0 }) }) end,
      "unknown option 'logits'")
    local d = D.Normal(0, 1)
    H.raises(function() d:sample({ 2 }, {}, 5) end, "ember.distributions.Normal:sample: extra argument 3 (5)")
    H.raises(function() d:log_prob(ember.zeros({ 1 }), 5) end, "ember.distributions.Normal:log_prob: extra argument 2")
    H.raises(function() d:sample({ 2 }, { generater = g }) end, "unknown option 'generater'")
    H.raises(function() d:sample({ generator = g }) end, "an options table comes second")
    H.raises(function() D.Bernoulli(0.5):sample(nil, 7) end, "options must be a table, got number")
    H.raises(function() D.Independent(D.Normal(ember.zeros({ 2 }), 1), 1):rsample({ 1 }, { seed = 1 }) end,
      "unknown option 'seed'")
    -- the options table given with probs is the caller's, left as it was
    local o = { validate_args = false }
    local b = D.Bernoulli(ember.tensor({ 0.25 }), o)
    assert.are.same({ validate_args = false }, o)
    assert.is_false(b.validate_args)
    H.same(b.probs, { 0.25 })
    -- with the same generator state the base class's sample draws what Normal's does
    local a = D.Distribution.sample(d, { 3 }, { generator = ember.Generator(9) })
    assert.is_true(ember.equal(a, d:sample({ 3 }, { generator = ember.Generator(9) })))
  end)

  it("Independent moves batch dims into the event", function()
    local d = D.Independent(D.Normal(ember.zeros({ 2, 3 }), 1), 1)
    assert.are.same({ 2 }, d.batch_shape)
    assert.are.same({ 3 }, d.event_shape)
    H.shape_is(d:sample({ 5 }), { 5, 2, 3 })
    H.shape_is(d:log_prob(ember.zeros({ 2, 3 })), { 2 })
    H.raises(function() D.Independent(d.base_dist, 3) end, "reinterpreted_batch_ndims must be an integer in 0..2")
  end)
end)
