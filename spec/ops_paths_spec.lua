-- The faster paths of issue 33's sweep against what they replace: the
-- embedding's range check fused into its copy, max pooling's plane sweeps
-- and its gathered adjoint (nn_kernels_spec.lua has the window scan).
local ember = require("ember")
local F = ember.nn.functional

describe("embedding's range check in the copy", function()
  local w = ember.randn({ 4, 3 })
  it("looks up the rows index_select gives", function()
    local idx = ember.tensor({ { 1, 4 }, { 2, 2 } }, { dtype = "int64" })
    local y = F.embedding(idx, w)
    assert.are.same({ 2, 2, 3 }, y:shape())
    assert.are.same(w:index_select(1, idx:reshape(-1)):tolist(), y:view(4, 3):tolist())
  end)
  it("names embedding and the bad index, and stays usable", function()
    for _, bad in ipairs({ 0, 5, -2 }) do
      local idx = ember.tensor({ 1, bad, 2 }, { dtype = "int64" })
      local ok, e = pcall(F.embedding, idx, w)
      assert.is_false(ok)
      assert.truthy(tostring(e):find(("ember.nn.functional.embedding: index %d out of range 1..4 of a weight of "
        .. "shape {4, 3}"):format(bad), 1, true), tostring(e))
      local m = ember.nn.Embedding(4, 3)
      ok, e = pcall(m, idx)
      assert.is_false(ok)
      assert.truthy(tostring(e):find(("ember.nn.Embedding: index %d is out of range 1..4"):format(bad), 1, true),
        tostring(e))
    end
    assert.are.same({ 2, 3 }, F.embedding(ember.tensor({ 1, 2 }, { dtype = "int32" }), w):shape())
  end)
end)
