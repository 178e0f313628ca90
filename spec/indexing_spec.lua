-- Bracket indexing (API.md, "brackets"), against the equivalent explicit
-- calls, through autograd, and its errors.
local H = require("helpers")
local ember = H.ember

local function x23() return ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }) end

describe("bracket indexing", function()
  it("reads views and numbers like select and narrow, negative from the end", function()
    local x = x23()
    H.same(x[1], x:select(1, 1):tolist())
    H.same(x[-1], { 4, 5, 6 })
    assert.are.equal(6, x[{ 2, 3 }])
    assert.are.equal(2, x[{ -2, -2 }])
    assert.are.equal("number", type(x[{ 1, 1 }]))
    H.same(x[{ 2 }], { 4, 5, 6 })                            -- fewer indices than dims: a view
    H.same(x[{ {}, { 2, 3 } }], x:narrow(2, 2, 2):tolist())
    H.same(x[{ {}, 2 }], { 2, 5 })
    H.same(x[{ { 2 } }], { { 4, 5, 6 } })                   -- {a} keeps the dim
    H.same(x[{ { -1 }, { 1, -2 } }], { { 4, 5 } })
    local v = x[{ {}, 2 }]
    v:fill_(0)                                               -- a view: writes reach x
    H.same(x, { { 1, 0, 3 }, { 4, 0, 6 } })
  end)

  it("gathers with a bool mask and an int64 index", function()
    local x = x23()
    H.same(x[x:gt(2)], { 3, 4, 5, 6 })
    H.same(x[x:gt(99)], {}, nil, { 0 })
    H.same(x[ember.tensor({ 2, 1, 2 }, { dtype = "int64" })], { { 4, 5, 6 }, { 1, 2, 3 }, { 4, 5, 6 } })
    H.same(x:t()[{ {}, 2 }][ember.tensor({ 3 }, { dtype = "int32" })], { 6 })
  end)

  it("writes in place: elements, ranges, rows and masks", function()
    local x = x23()
    local v0 = x:version()
    x[{ 1, 2 }] = 7
    x[{ {}, 1 }] = ember.tensor({ 9, 8 })
    x[2] = ember.tensor({ 0, 1, 0 })
    x[{ { 1 }, { 3 } }] = -1
    x[x:lt(0)] = 5
    H.same(x, { { 9, 7, 5 }, { 0, 1, 0 } })
    assert.is_true(x:version() > v0)
    local b = ember.tensor({ true, false })
    b[2] = true
    H.same(b, { true, true })
  end)

  it("is recorded by autograd, reading and writing", function()
    local w, gm = H.recording({ { 1, 2 }, { 3, 4 } }, { dtype = "float64" })
    local y = w * 3
    y[{ 1, 2 }] = 0                            -- cut: no gradient to w[1][2]
    y[2] = w[1] * w[1]                         -- row 2 becomes w[1]^2
    local loss = y[{ {}, 1 }]:sum() * 10 + y[y:gt(-1)]:sum()
    gm:backward(loss)
    -- y = {{3 w11, 0}, {w11^2, w12^2}}; loss = 11 (3 w11 + w11^2) + w12^2 + 0
    H.same(w.grad, { { 11 * (3 + 2 * 1), 2 * 2 }, { 0, 0 } }, 1e-12)
  end)

  it("raises for what it cannot take, naming the index and the shape", function()
    local x = x23()
    local cases = {
      { function() return x[3] end, "index 3 out of range for dim 1 of size 2" },
      { function() return x[0] end, "index 0 out of range" },
      { function() return x[1.5] end, "1.5 is not an integer" },
      { function() return x[{ 1, 2, 3 }] end, "3 indices for a tensor of shape {2, 3}" },
      { function() return x[{ {}, { 2, 9 } }] end, "range {2, 9} out of range for dim 2 of size 3" },
      { function() return x[{ {}, { 1, 2, 3 } }] end, "selector 2 must be a number, {} or {first, last}" },
      { function() return x[{ "a" }] end, "selector 1 must be a number or a range table, got string" },
      { function() return x[true] end, "cannot index a tensor with a boolean" },
      { function() return x[ember.tensor({ 1.5 })] end, "must be bool, int64 or int32, got float32" },
      { function() return x[ember.tensor({ true })] end, "mask of shape {1} does not match a tensor of shape {2, 3}" },
      { function() return ember.tensor(3)[1] end, "a 0-d tensor cannot be indexed" },
      { function() x[{ 1, 1 }] = "x" end, "must be a number or a tensor, got string" },
      { function() x[ember.tensor({ 1 }, { dtype = "int64" })] = 0 end, "assignment through an int64 index" },
      { function() x[x:gt(0)] = ember.ones({ 6 }) end, "x[mask] = v takes a number or a one-element tensor" },
      { function() x[{ {}, 1 }] = ember.ones({ 3 }) end, "copy_" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(c[2], 1, true), tostring(err))
    end
    -- a string key that is no method or field raises with the closest names
    local ok, err = pcall(function() return x.not_a_field end)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("no method or field 'not_a_field'", 1, true), tostring(err))
    assert.is_nil(x._not_a_field)   -- private names stay nil
    H.same(x, { { 1, 2, 3 }, { 4, 5, 6 } })
  end)
end)
