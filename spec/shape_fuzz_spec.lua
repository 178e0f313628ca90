-- The shape fuzzer (spec/support/shape_fuzz.lua) with a fixed seed and count,
-- in the normal suite and against the ASan + UBSan library (scripts/test.sh):
-- every op family with random shapes, dims, dtypes, views and index tensors
-- that do not fit on purpose. Each call returns or raises an error naming an
-- ember call; nothing crashes; ember stays usable. Long runs:
--   luajit spec/support/shape_fuzz.lua N SEED
-- Below, the cases it found, each as a fixed call (docs/hardening.md).
local H = require("helpers")
local ember = H.ember
local fuzz = require("spec.support.shape_fuzz")

describe("shape fuzzer #fuzz", function()
  it("3000 random calls, seed 20261125: no crash, every error names ember", function()
    local st = fuzz.run(3000, 20261125)
    assert.are.equal(3000, st.calls)
    assert.is_true(st.ok > 1000 and st.errors > 500, ("ok %d, errors %d"):format(st.ok, st.errors))
    assert.are.same({}, st.problems)
    H.same(ember.ones({ 2, 3 }):sum(), 6)
  end)

  it("every op family is drawn", function()
    local st = fuzz.run(600, 7)
    for _, f in ipairs(fuzz.families) do
      assert.is_truthy(st.by_family[f.name], f.name)
    end
  end)
end)

describe("what the shape fuzzer found", function()
  it("matmul of a view contiguous by its sizes but not its strides finishes (it looped forever)", function()
    local x = ember.full({ 1, 1, 3 }, 2):transpose(1, 3)   -- {3, 1, 1}, strides {1, 3, 3}
    H.same(x:matmul(ember.full({ 1, 2 }, 3)), { { { 6, 6 } }, { { 6, 6 } }, { { 6, 6 } } })
    H.same(ember.nn.functional.linear(x, ember.full({ 2, 1 }, 3)), { { { 6, 6 } }, { { 6, 6 } }, { { 6, 6 } } })
  end)
end)
