-- sigmoid and silu in float32 (core/src/ops/exp_blocks.c): blocks of 1024
-- whose exp arguments -x all lie in (-87, 88) skip ember__expf's steps for
-- large, small and NaN arguments. The bits must be the unblocked loop's (a
-- strided input takes it): over a dense grid past the range, blocks wholly
-- inside and mixed, at odd offsets and lengths, on one and two threads; and
-- the values within rounding of the float64 formula.
local H = require("helpers")
local ember = H.ember

-- t's op against the same op on a strided copy (the plain loop): bit for bit
local function same_as_strided(op, t)
  assert.is_true(ember.equal(t[op](t), H.noncontig(t)[op](H.noncontig(t))), op)
end

describe("sigmoid and silu in float32", function()
  for _, op in ipairs({ "sigmoid", "silu" }) do
    it(op .. " gives the unblocked loop's bits over a grid past (-88, 87), at odd offsets and lengths", function()
      local x = ember.linspace(-104, 104, 3000017)
      for _, t in ipairs({ x, x:narrow(1, 2, 2999999), x * 0.25, x:narrow(1, 1000001, 700001), x:narrow(1, 7, 1023),
        x:narrow(1, 1500000, 1025), x:narrow(1, 3, 5) }) do
        same_as_strided(op, t)
      end
    end)

    it(op .. " keeps the specials of its formula in a block among in-range values", function()
      local special = ember.tensor({ 0, -0.0, math.huge, -math.huge, 0 / 0, 87.5, 87.3365479, -88.7228391, -88.8,
        87, -88, 86.99, -87.99, 1e-30, -1e-30, 100, -100 })
      local t = ember.cat({ ember.zeros({ 1020 }), special, ember.ones({ 2000 }) })
      local got = t[op](t):tolist()
      local want = H.noncontig(special)[op](H.noncontig(special)):tolist()
      for k = 1, #want do
        local g = got[1020 + k]
        if want[k] ~= want[k] then assert.is_true(g ~= g) else assert.are.equal(want[k], g) end
      end
      if op == "sigmoid" then
        assert.are.equal(0.5, got[1021])
        assert.are.equal(1, got[1023])   -- sigmoid(inf)
        assert.are.equal(0, got[1024])   -- sigmoid(-inf)
      end
    end)

    it(op .. " is within rounding of the float64 formula, the same bits on one and two threads", function()
      ember.manual_seed(3)
      local x = ember.randn({ 1000003 }) * 8
      local d = x:double()
      local s = (ember.ones_like(d) / ((-d):exp() + 1))
      local want = op == "sigmoid" and s or d * s
      local got = x[op](x)
      -- relative to the value, with an absolute floor where silu crosses 0
      local err = ((got:double() - want):abs() / (want:abs() + 1e-30)):max():item()
      local abs_err = (got:double() - want):abs():max():item()
      assert.is_true(err < 4e-7 or abs_err < 1e-37, ("%s: relative error %g"):format(op, err))
      H.same_bits_on_threads(function() return { x[op](x), H.noncontig(x)[op](H.noncontig(x)) } end)
    end)
  end

  it("exp, sigmoid and silu of a transposed or broadcast input match the contiguous result", function()
    ember.manual_seed(4)
    local m = ember.randn({ 613, 1031 }) * 20
    for _, op in ipairs({ "exp", "sigmoid", "silu" }) do
      local t = m:t()
      assert.is_true(ember.equal(t[op](t), t:contiguous()[op](t:contiguous())), op .. " transposed")
      local row = ember.randn({ 1, 1031 }):expand({ 613, 1031 })
      assert.is_true(ember.equal(row[op](row), row:contiguous()[op](row:contiguous())), op .. " broadcast")
    end
  end)
end)
