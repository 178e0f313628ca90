-- ember.nn.init against PyTorch 1.13 (spec/fixtures/init_torch.lua, written by
-- gen_init.py): gains and fans exactly; each initialiser's bound or std, and
-- the statistics of a large tensor PyTorch filled, statistically (the draws
-- differ); constants and orthogonality exactly; in place, unrecorded, seeded.
local H = require("helpers")
local ember = H.ember
local nn = ember.nn
local init = nn.init
local GradManager = ember.autodiff.GradManager
local T = dofile("spec/fixtures/init_torch.lua")

local function stats(t)
  local d = t:to("float64")
  return { mean = d:mean():item(), std = d:std():item(), min = d:min():item(), max = d:max():item() }
end

local function near(got, want, rel, what)
  assert(math.abs(got - want) <= rel * math.abs(want),
    ("%s: got %.9g, expected %.9g within %g%%"):format(what, got, want, rel * 100))
end

-- the checks for one fixture case c on a tensor t that ember filled
local function check_case(c, t)
  local s, n = stats(t), t:numel()
  local lo, hi
  if c.fn == "uniform_" then lo, hi = c.args[1], c.args[2] end
  if c.bound then lo, hi = -c.bound, c.bound end
  -- a sample std is within 0.3% of the true one here: 1.5% is over 5 sigma
  if lo then   -- inside [lo, hi], reaching both ends, flat: PyTorch's bound
    assert(s.min >= lo and s.max <= hi, ("values %g..%g leave [%g, %g]"):format(s.min, s.max, lo, hi))
    assert(s.min < lo + 1e-3 * (hi - lo) and s.max > hi - 1e-3 * (hi - lo), "the range is not covered")
    assert(c.min < lo + 1e-3 * (hi - lo) and c.max > hi - 1e-3 * (hi - lo), "PyTorch's range differs")
    near(s.std, (hi - lo) / math.sqrt(12), 0.015, "std of the uniform")
    near(c.std, (hi - lo) / math.sqrt(12), 0.015, "std of PyTorch's tensor")
    assert(math.abs(s.mean - (lo + hi) / 2) < 5 * s.std / math.sqrt(n), "mean " .. s.mean)
  elseif c.sigma then
    near(s.std, c.sigma, 0.015, "std against PyTorch's formula")
    near(c.std, c.sigma, 0.015, "std of PyTorch's tensor")
    local mean = c.fn == "normal_" and c.args[1] or 0
    assert(math.abs(s.mean - mean) < 5 * c.sigma / math.sqrt(n), "mean " .. s.mean)
  elseif c.fn == "orthogonal_" then   -- rows (or columns) orthonormal, times gain
    local rows = c.shape[1]
    local m = t:to("float64"):reshape(rows, -1)
    local g2 = (c.args[1] or 1) ^ 2
    local k = math.min(rows, m:size(2))
    local gram = rows <= m:size(2) and m:matmul(m:t()) or m:t():matmul(m)
    assert.is_true((gram - ember.eye(k, { dtype = "float64" }) * g2):abs():max():item() < 1e-5)
    near(s.std, c.std, 0.01, "std against PyTorch's")
  else   -- constant_, zeros_, ones_: every element the value, PyTorch's in float32
    local want = t.dtype == "float32" and c.min or (c.args[1] or (c.fn == "ones_" and 1 or 0))
    assert.equal(want, s.min)
    assert.equal(want, s.max)
  end
end

describe("nn.init against PyTorch 1.13", function()
  it("calculate_gain for every nonlinearity", function()
    for _, g in ipairs(T.gains) do
      near(init.calculate_gain(g.nonlinearity, g.param), g.gain, 1e-15, g.nonlinearity)
    end
  end)

  it("fan_in and fan_out of Linear, Conv1d and Conv2d weights", function()
    local layers = {
      ["Linear(30, 20)"] = nn.Linear(30, 20).weight,
      ["Conv2d(16, 32, (3, 5))"] = nn.Conv2d(16, 32, { 3, 5 }).weight,
      ["Conv2d(16, 32, 3, groups = 4)"] = nn.Conv2d(16, 32, 3, { groups = 4 }).weight,
    }
    for _, f in ipairs(T.fans) do
      local w = layers[f.layer] or ember.empty(f.shape)
      assert.is_true(H.shape_is(w, f.shape), f.layer)
      local fan_in, fan_out = init.calculate_fan_in_and_fan_out(w)
      assert.equal(f.fan_in, fan_in)
      assert.equal(f.fan_out, fan_out)
    end
  end)

  for _, c in ipairs(T.cases) do
    local label = ("%s(%s) on {%s}"):format(c.fn, table.concat(c.args, ", "), table.concat(c.shape, ", "))
    it(label .. ", arguments positional", function()
      ember.manual_seed(17)
      local t = ember.empty(c.shape)
      assert.equal(t, init[c.fn](t, unpack(c.args)))
      assert.equal("float32", t.dtype)
      check_case(c, t)
    end)
    it(label .. ", arguments in a table", function()
      ember.manual_seed(18)
      local t = ember.empty(c.shape, { dtype = "float64" })
      assert.equal(t, init[c.fn](t, c.opts))
      check_case(c, t)
    end)
  end
end)

describe("nn.init", function()
  it("fills in place, outside the autograd record", function()
    local w, x = ember.ones({ 3 }), ember.tensor({ 1, 2, 3 })
    local gm = GradManager()
    gm:attach({ w })
    gm:record()
    init.constant_(w, 2)
    init.normal_(w)
    init.orthogonal_(w:view(1, 3))
    gm:backward((w * x):sum())
    H.same(w.grad, { 1, 2, 3 }, 0)   -- w is still the leaf: the fills were not recorded
  end)

  it("fills non-contiguous views of a tensor", function()
    local base = ember.zeros({ 6, 4 })
    init.ones_(base:t():narrow(1, 2, 2))
    H.same(base:sum(), 12, 0)
    H.same(base:narrow(2, 2, 2):sum(), 12, 0)
    local w = ember.empty({ 8, 5 }, { dtype = "float64" })
    init.orthogonal_(w:t())
    local gram = w:t():matmul(w)
    assert.is_true((gram - ember.eye(5, { dtype = "float64" })):abs():max():item() < 1e-12)
  end)

  it("draws from the seeded generator", function()
    local a, b = ember.empty({ 4, 6 }), ember.empty({ 4, 6 })
    ember.manual_seed(5)
    init.kaiming_normal_(a)
    init.orthogonal_(b)
    local a2, b2 = ember.empty({ 4, 6 }), ember.empty({ 4, 6 })
    ember.manual_seed(5)
    init.kaiming_normal_(a2)
    init.orthogonal_(b2)
    H.same(a, a2:tolist(), 0)
    H.same(b, b2:tolist(), 0)
  end)

  it("leaves a tensor with no elements as it is, as PyTorch", function()
    local e = ember.empty({ 0, 3 })
    assert.equal(e, init.kaiming_uniform_(e))
    assert.equal(e, init.orthogonal_(e))
  end)

  it("rejects bad input with a message naming the call", function()
    local w = ember.empty({ 3, 4 })
    local cases = {
      { function() init.normal_(nil) end, "ember.nn.init.normal_: expected a tensor to fill, got nil" },
      { function() init.zeros_(ember.empty({ 2 }, { dtype = "int64" })) end,
        "ember.nn.init.zeros_: expected a floating point tensor, got int64" },
      { function() init.uniform_(w, 2, 1) end, "ember.nn.init.uniform_: expected a <= b, got a = 2, b = 1" },
      { function() init.normal_(w, { std = -1 }) end, "ember.nn.init.normal_: std must be >= 0, got -1" },
      { function() init.normal_(w, { sd = 1 }) end, "ember.nn.init.normal_: unknown option 'sd'" },
      { function() init.constant_(w) end, "ember.nn.init.constant_: val must be a number, got nil" },
      { function() init.xavier_uniform_(ember.empty({ 5 })) end,
        "ember.nn.init.xavier_uniform_: fan in and fan out need a tensor of 2 or more dims, got {5}" },
      { function() init.kaiming_normal_(w, { mode = "fan_avg" }) end,
        "ember.nn.init.kaiming_normal_: mode must be 'fan_in' or 'fan_out', got fan_avg" },
      { function() init.kaiming_uniform_(w, { nonlinearity = "swish" }) end,
        "ember.nn.init.kaiming_uniform_: unsupported nonlinearity swish (in ember.nn.init.calculate_gain)" },
      { function() init.calculate_gain("leaky_relu", "steep") end,
        "ember.nn.init.calculate_gain: negative_slope steep is not a valid number" },
      { function() init.orthogonal_(ember.empty({ 5 })) end,
        "ember.nn.init.orthogonal_: only tensors with 2 or more dims are supported, got {5}" },
      { function() init.xavier_normal_(w, "relu") end,
        "ember.nn.init.xavier_normal_: gain must be a number, got relu" },
    }
    for _, bad in ipairs(cases) do
      local ok, err = pcall(bad[1])
      assert.is_false(ok)
      assert(tostring(err):find(bad[2], 1, true), ("%q does not say %q"):format(tostring(err), bad[2]))
      assert.truthy(tostring(err):find("init_spec.lua:%d+:"), err)   -- the caller's line
    end
    H.same(init.ones_(w):sum(), 12, 0)   -- still usable
  end)
end)
