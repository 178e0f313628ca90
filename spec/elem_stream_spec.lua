-- iter.c's choice between cached and streamed (non-temporal) stores, by the
-- operands' own bytes: a broadcast row counts its row, so a 2048 x 2048 add
-- of a row (32 MiB and a row) is written through the cache, and operands
-- past 36 MiB are streamed. Either way the kernel and its bits are the same:
-- each result against float64 sums rounded once to float32 (exact: the sum
-- of two floats is exact in double), on one and two threads, at sizes on
-- both sides of the threshold, with odd widths and strided operands.
local H = require("helpers")
local ember = H.ember

-- a + b in float64, rounded once: float32's correctly rounded sum
local function exact_sum(a, b) return (a:double() + b:double()):float() end

describe("elementwise results cached or streamed", function()
  local cases = {
    { "a row, 32 MiB and a row (cached)", { 2048, 2048 }, { 2048 } },
    { "a row, odd width (cached)", { 2047, 2049 }, { 2049 } },
    { "a row, 48 MiB (streamed)", { 3072, 2048 }, { 2048 } },
    { "a column, 32 MiB (cached)", { 2048, 2048 }, { 2048, 1 } },
    { "two operands, 48 MiB (streamed)", { 2048, 2048 }, { 2048, 2048 } },
    { "two operands, 24 MiB (cached)", { 2048, 1024 }, { 2048, 1024 } },
  }
  for _, c in ipairs(cases) do
    it("adds " .. c[1] .. " with the bits of float64 sums rounded once, on one and two threads", function()
      ember.manual_seed(7)
      local a, b = ember.randn(c[2]), ember.randn(c[3])
      H.same_bits_on_threads(function()
        local r = a + b
        assert.is_true(ember.equal(r, exact_sum(a, b)))
        return { r }
      end)
    end)
  end

  it("adds a transposed operand and a row as the contiguous ones", function()
    ember.manual_seed(8)
    local a, row = ember.randn({ 2048, 2048 }), ember.randn({ 2048 })
    local at = a:t()   -- 2048 x 2048, strides (1, 2048)
    H.same_bits_on_threads(function()
      local r = at + row
      assert.is_true(ember.equal(r, at:contiguous() + row))
      assert.is_true(ember.equal(r, exact_sum(at, row)))
      return { r }
    end)
  end)
end)
