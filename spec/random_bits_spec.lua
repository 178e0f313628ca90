-- The CPU's draws give the bits they gave before they were vectorised and
-- split across threads (issue 33): every case of spec/support/random_cases.lua
-- (rand, randn, randint, uniform_, normal_, bernoulli(_), dropout,
-- exponential_, geometric_, randperm, multinomial; float32/64, float16,
-- bfloat16, int32/64; odd sizes, sizes off the vector width, views, seeds,
-- offsets) against the digests f5f2abb's build wrote
-- (spec/fixtures/random_bits/gen.lua), on 1, 2 and 3 threads.
local H = require("helpers")
local ember = H.ember
local R = require("support.random_cases")
local expected = dofile("spec/fixtures/random_bits/bits.lua")

describe("random draws' bits", function()
  H.keep_thread_setting(before_each, after_each)

  for _, n in ipairs({ 1, 2, 3 }) do
    it(("are the reference build's on %d thread%s"):format(n, n > 1 and "s" or ""), function()
      ember.set_num_threads(n)
      local cases = R.cases(ember)
      assert.is_true(#cases > 400)
      for _, c in ipairs(cases) do
        assert(expected[c.name], "no fixture for " .. c.name)
        assert.are.equal(expected[c.name], R.digest(c.fn()), c.name)
      end
    end)
  end

  it("a draw's element i is fixed by its index, whatever the draw's length", function()
    -- the second half of a draw is the draw that starts at its offset
    for _, n in ipairs({ 8, 64, 66, 4100 }) do
      for _, dt in ipairs({ "float32", "float64" }) do
        ember.manual_seed(11)
        local whole = ember.rand({ 2 * n }, { dtype = dt })
        ember.set_rng_state({ seed = 11, offset = n / 2 })
        H.same(ember.rand({ n }, { dtype = dt }), whole:narrow(1, n + 1, n):tolist(), 0)
        ember.manual_seed(11)
        local normal = ember.randn({ 2 * n }, { dtype = dt })
        ember.set_rng_state({ seed = 11, offset = n })
        H.same(ember.randn({ n }, { dtype = dt }), normal:narrow(1, n + 1, n):tolist(), 0)
      end
    end
  end)
end)
