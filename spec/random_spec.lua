-- ember.Generator and the random functions that take one: reproducibility,
-- independence from the default stream, get_state/set_state; the moments
-- of exponential_, geometric_, bernoulli_ and the frequencies of
-- multinomial (with and without replacement) from fixed seeds, each within
-- 5 standard errors of the known value for the sample size; randperm;
-- DataLoader's generator; errors.
local H = require("helpers")
local ember = H.ember

local N = 200000
local F64 = { dtype = "float64" }

describe("ember.Generator", function()
  it("repeats its stream for a seed and leaves the default generator alone", function()
    ember.manual_seed(3)
    local before = ember.get_rng_state()
    local g1, g2 = ember.Generator(42), ember.Generator(42)
    local draws = {
      function(g) return ember.rand({ 5 }, { generator = g }) end,
      function(g) return ember.randn(2, 3, { generator = g, dtype = "float64" }) end,
      function(g) return ember.randint(0, 100, { 6 }, { generator = g }) end,
      function(g) return ember.randperm(9, { generator = g }) end,
      function(g) return ember.rand_like(ember.zeros({ 4 }), { generator = g }) end,
      function(g) return ember.randn_like(ember.zeros({ 4 }), { generator = g }) end,
      function(g) return ember.empty({ 4 }):uniform_(-1, 1, { generator = g }) end,
      function(g) return ember.empty({ 4 }):normal_(2, 3, { generator = g }) end,
      function(g) return ember.empty({ 4 }):exponential_(2, { generator = g }) end,
      function(g) return ember.empty({ 4 }):geometric_(0.3, { generator = g }) end,
      function(g) return ember.empty({ 4 }):bernoulli_(0.3, { generator = g }) end,
      function(g) return ember.bernoulli(ember.full({ 6 }, 0.5), { generator = g }) end,
      function(g) return ember.multinomial(ember.tensor({ 1, 2, 3 }), 4, { replacement = true, generator = g }) end,
      function(g) return ember.multinomial(ember.tensor({ 1, 2, 3 }), 2, { generator = g }) end,
      function(g) return ember.nn.functional.dropout(ember.ones({ 8 }), { p = 0.5, generator = g }) end,
    }
    for i, f in ipairs(draws) do
      H.same(f(g1), f(g2):tolist(), 0)
      assert.are.same(before, ember.get_rng_state(), "draw " .. i .. " moved the default generator")
    end
    -- the default stream is the one it would have been without them
    local a = ember.rand({ 8 })
    ember.manual_seed(3)
    H.same(ember.rand({ 8 }), a:tolist(), 0)
  end)

  it("manual_seed, initial_seed, get_state and set_state", function()
    local g = ember.Generator()
    assert.are.equal(67280421310721, g:initial_seed())   -- PyTorch's default seed, as ember's
    assert.are.equal(g, g:manual_seed(7))
    assert.are.equal(7, g:initial_seed())
    assert.are.same({ seed = 7, offset = 0 }, g:get_state())
    ember.rand({ 3 }, { generator = g })
    local s = g:get_state()
    assert.are.same({ seed = 7, offset = 2 }, s)         -- 3 uniforms use 2 blocks
    local x = ember.randn({ 5 }, { generator = g })
    g:set_state(s)
    H.same(ember.randn({ 5 }, { generator = g }), x:tolist(), 0)
    -- the same seed gives the default generator's stream
    ember.manual_seed(7)
    H.same(ember.rand({ 6 }), ember.rand({ 6 }, { generator = ember.Generator(7) }):tolist(), 0)
    local s2 = g:seed()
    assert.are.equal(s2, g:initial_seed())
    assert.are.equal(ember.initial_seed(), ember.default_generator:initial_seed())
    assert.is_truthy(tostring(g):find("ember.Generator(seed = ", 1, true))
  end)

  it("raises for bad arguments, naming the call", function()
    local g = ember.Generator(1)
    H.raises(function() ember.Generator(-1) end, "ember.Generator", "non-negative integer seed")
    H.raises(function() ember.Generator(1.5) end, "non-negative integer seed")
    assert.are.equal(8, ember.Generator({ seed = 8, device = "cpu" }):initial_seed())
    H.raises(function() ember.Generator({ sed = 8 }) end, "unknown option 'sed'")
    H.raises(function() ember.Generator({ device = "tpu" }) end, "ember.Generator", "tpu")
    H.raises(function() g:manual_seed("x") end, "Generator:manual_seed")
    H.raises(function() g.manual_seed(5) end, "expected a Generator")
    H.raises(function() g:set_state({ seed = 1 }) end, "Generator:set_state", "offset = nil")
    H.raises(function() ember.rand({ 2 }, { generator = 5 }) end, "ember.rand", "generator must be an ember.Generator")
    H.raises(function() ember.rand({ 2 }, { generator = g, seed = 1 }) end, "unknown option 'seed'")
    H.raises(function() ember.randint(0, 5, { 2 }, { generator = g, replacement = true }) end, "unknown option 'replacement'")
    H.raises(function() ember.empty({ 2 }):uniform_(0, 1, 2) end, "uniform_", "options must be a table, got number")
    H.raises(function() ember.empty({ 2 }):uniform_(0, 1, {}, 2) end,
      "ember.Tensor:uniform_: extra argument 4 (2): it takes 3 (lo, hi, opts)")
    H.raises(function() ember.empty({ 2 }):normal_({ generator = g }, 1) end,
      "ember.Tensor:normal_: extra argument 2 (1): it takes 1 (opts)")
    H.raises(function() ember.empty({ 2 }):exponential_("x") end, "exponential_", "lambd must be a number, got string")
    H.raises(function() ember.empty({ 2 }):bernoulli_({ generator = g }, {}) end,
      "ember.Tensor:bernoulli_: extra argument 2")
    H.raises(function() ember.bernoulli(ember.ones({ 2 }), nil, {}) end, "ember.bernoulli: extra argument 3")
    H.raises(function() ember.Generator(1, 2) end, "ember.Generator: extra argument 2 (2): it takes 1 (seed)")
    H.raises(function() ember.empty({ 2 }):normal_(0, 1, { generator = {} }) end, "generator must be an ember.Generator")
    H.raises(function() ember.nn.functional.dropout(ember.ones({ 2 }), { p = 0.5, generater = g }) end,
      "dropout", "unknown option 'generater'")
  end)
end)

describe("random draws", function()
  local function stats(t)
    t = t:to("float64")
    return t:mean():item(), t:var():item()
  end

  it("exponential_(lambd): mean 1/lambd, variance 1/lambd^2", function()
    local t = ember.empty({ N }, F64):exponential_(2, { generator = ember.Generator(1) })
    assert.is_true(t:min():item() >= 0)
    local m, v = stats(t)
    assert.is_true(math.abs(m - 0.5) < 5 * 0.5 / math.sqrt(N), m)
    assert.is_true(math.abs(v - 0.25) < 0.01, v)
    H.raises(function() ember.empty({ 2 }):exponential_(0) end, "exponential_", "lambd > 0")
    H.raises(function() ember.empty({ 2 }, { dtype = "int64" }):exponential_() end, "floating point")
  end)

  it("geometric_(p): values 1, 2, ..., mean 1/p, variance (1-p)/p^2, any numeric dtype", function()
    local t = ember.empty({ N }, { dtype = "int64" }):geometric_(0.25, { generator = ember.Generator(2) })
    assert.are.equal(1, t:min():item())
    local m, v = stats(t)
    assert.is_true(math.abs(m - 4) < 5 * math.sqrt(12 / N), m)
    assert.is_true(math.abs(v - 12) < 0.6, v)
    H.same(ember.empty({ 5 }):geometric_(1), { 1, 1, 1, 1, 1 }, 0)
    H.raises(function() ember.empty({ 2 }):geometric_(0) end, "geometric_", "0 < p <= 1")
    H.raises(function() ember.empty({ 2 }):geometric_() end, "geometric_", "probability")
  end)

  it("bernoulli_ and bernoulli: frequencies match p, elementwise for a tensor p", function()
    local g = ember.Generator(3)
    local t = ember.empty({ N }):bernoulli_(0.3, { generator = g })
    local m = stats(t)
    assert.is_true(math.abs(m - 0.3) < 5 * math.sqrt(0.21 / N), m)
    local p = ember.tensor({ 0, 0.2, 0.9, 1 }, F64):reshape({ 4, 1 }):expand({ 4, N / 4 }):contiguous()
    local b = ember.bernoulli(p, { generator = g })
    assert.are.equal("float64", b.dtype)
    local f = b:mean(2):tolist()
    assert.are.equal(0, f[1])
    assert.are.equal(1, f[4])
    assert.is_true(math.abs(f[2] - 0.2) < 5 * math.sqrt(0.16 / (N / 4)))
    assert.is_true(math.abs(f[3] - 0.9) < 5 * math.sqrt(0.09 / (N / 4)))
    local x = ember.zeros({ 3, 4 }, { dtype = "int64" }):bernoulli_(ember.tensor({ 0, 1, 0, 1 }), { generator = g })
    H.same(x, { { 0, 1, 0, 1 }, { 0, 1, 0, 1 }, { 0, 1, 0, 1 } }, 0)
    H.raises(function() ember.bernoulli(ember.tensor({ 1.5 })) end, "bernoulli", "probabilities in [0, 1]")
    H.raises(function() ember.bernoulli(ember.tensor({ 1 }, { dtype = "int64" })) end, "floating point")
    H.raises(function() ember.empty({ 2 }):bernoulli_(-0.1) end, "bernoulli_", "0 <= p <= 1")
  end)

  it("multinomial with replacement: frequencies match the normalised weights", function()
    local w = ember.tensor({ 1, 0, 3, 6 })
    local x = ember.multinomial(w, N, { replacement = true, generator = ember.Generator(4) })
    assert.are.equal("int64", x.dtype)
    H.shape_is(x, { N })
    for k, p in ipairs({ 0.1, 0, 0.3, 0.6 }) do
      local f = x:eq(k):to("float64"):mean():item()
      assert.is_true(math.abs(f - p) < 5 * math.sqrt(p * (1 - p) / N) + 1e-15, k .. ": " .. f)
    end
  end)

  it("multinomial without replacement: distinct picks, the first and second draws' laws", function()
    local rows = 40000
    local w = ember.tensor({ 0.1, 0.2, 0.7 }, F64):reshape({ 1, 3 }):expand({ rows, 3 }):contiguous()
    local x = ember.multinomial(w, 2, { generator = ember.Generator(5) })
    H.shape_is(x, { rows, 2 })
    assert.are.equal(0, x:select(2, 1):eq(x:select(2, 2)):to("float64"):sum():item())
    -- P(second = 1) = 0.2 * 0.1/0.8 + 0.7 * 0.1/0.3
    local laws = { { 0.1, 0.2, 0.7 }, { 0.2 * 0.1 / 0.8 + 0.7 * 0.1 / 0.3, 0.1 * 0.2 / 0.9 + 0.7 * 0.2 / 0.3,
      0.1 * 0.7 / 0.9 + 0.2 * 0.7 / 0.8 } }
    for col = 1, 2 do
      for k = 1, 3 do
        local p = laws[col][k]
        local f = x:select(2, col):eq(k):to("float64"):mean():item()
        assert.is_true(math.abs(f - p) < 5 * math.sqrt(p * (1 - p) / rows), col .. "," .. k .. ": " .. f)
      end
    end
    -- every category once: a permutation; a zero weight is never drawn
    local all = ember.multinomial(ember.tensor({ 5, 1, 2, 2 }), 4):tolist()
    table.sort(all)
    assert.are.same({ 1, 2, 3, 4 }, all)
    for _ = 1, 20 do
      local two = ember.multinomial(ember.tensor({ 0, 1, 0, 1 }), 2):tolist()
      table.sort(two)
      assert.are.same({ 2, 4 }, two)
    end
  end)

  it("multinomial raises for bad weights and counts, naming the row", function()
    H.raises(function() ember.multinomial(ember.tensor({ 1, 1 }), 3) end, "multinomial", "3 samples without replacement from 2")
    H.raises(function() ember.multinomial(ember.tensor({ { 1, 1 }, { 1, 0 } }), 2) end, "row 2 has 1 categories of positive weight")
    H.raises(function() ember.multinomial(ember.tensor({ 1, -1 }), 1) end, "row 1 holds the weight -1 at 2")
    H.raises(function() ember.multinomial(ember.tensor({ 0, 0 }), 1, { replacement = true }) end, "row 1 has no positive weight")
    H.raises(function() ember.multinomial(ember.tensor({ 1, 0 / 0 }), 1) end, "weights must be finite")
    H.raises(function() ember.multinomial(ember.zeros({ 2, 2, 2 }), 1) end, "1-D or 2-D")
    H.raises(function() ember.multinomial(ember.tensor({ 1 }), 0) end, "num_samples must be a positive integer")
    H.raises(function() ember.multinomial(ember.tensor({ 1 }), 1, { replace = true }) end, "unknown option 'replace'")
    H.raises(function() ember.multinomial(ember.tensor({ 1 }), 1, { replacement = 1 }) end, "replacement must be a boolean")
  end)

  it("randperm is a permutation of 1..n", function()
    local p = ember.randperm(50, { generator = ember.Generator(6) })
    assert.are.equal("int64", p.dtype)
    local v = p:tolist()
    table.sort(v)
    for i = 1, 50 do assert.are.equal(i, v[i]) end
    H.same(ember.randperm(0), {}, 0)
    H.same(ember.randperm(1), { 1 }, 0)
    H.raises(function() ember.randperm(-1) end, "randperm", "non-negative integer")
  end)

  it("DataLoader shuffles from its generator, leaving the default one alone", function()
    local ds = ember.data.TensorDataset(ember.arange(1, 21):reshape({ 20, 1 }), ember.zeros({ 20 }))
    local function order(gen)
      local out = {}
      for x in ember.data.DataLoader(ds, { batch_size = 20, shuffle = true, generator = gen }):iter() do
        out = x:reshape({ 20 }):tolist()
      end
      return out
    end
    local before = ember.get_rng_state()
    assert.are.same(order(ember.Generator(9)), order(ember.Generator(9)))
    assert.are_not.same(order(ember.Generator(9)), order(ember.Generator(10)))
    assert.are.same(before, ember.get_rng_state())
    H.raises(function() ember.data.DataLoader(ds, { generator = 3 }) end, "generator must be an ember.Generator")
    H.raises(function() ember.data.DataLoader(ds, { generator = ember.Generator(1), seed = 2 }) end, "not both")
  end)
end)

describe("tensor method names", function()
  it("a missing method raises with the closest names; PyTorch idioms say what to write", function()
    local t = ember.zeros({ 2 })
    H.raises(function() return t:sumn() end, "ember.Tensor: no method or field 'sumn'", "did you mean")
    H.raises(function() return t:backwrd() end, "did you mean backward", "gm:backward(loss)")
    H.raises(function() t:backward() end, "'backward'", "gm:backward(loss)")
    H.raises(function() t:requires_grad_() end, "gm:attach(t)")
    H.raises(function() return t.ndim end, "t:dim()")
    assert.is_nil(t._private_name)
    assert.are.equal("float32", t.dtype)
  end)
end)
