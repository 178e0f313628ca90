-- Shape ops and indexing through the Lua API: values by hand, views sharing
-- storage, non-contiguous inputs, 1-based indices and errors.
local H = require("helpers")
local ember = H.ember

local function a23() return ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }) end

describe("views", function()
  it("reshape, view, flatten and share storage", function()
    local a = a23()
    local r = a:reshape({ 3, 2 })
    H.same(r, { { 1, 2 }, { 3, 4 }, { 5, 6 } })
    local v = a:view(6)
    v:mul_(10)
    H.same(a, { { 10, 20, 30 }, { 40, 50, 60 } })
    H.same(a:reshape({ -1 }), { 10, 20, 30, 40, 50, 60 }, 0, { 6 })
    H.same(a:flatten(), { 10, 20, 30, 40, 50, 60 })
    local b = ember.zeros({ 2, 3, 4 })
    assert.are.same({ 2, 12 }, b:flatten(2):shape())
    assert.are.same({ 6, 4 }, b:flatten(1, 2):shape())
  end)

  it("view refuses incompatible strides, reshape copies", function()
    local t = a23():t()
    local ok, err = pcall(function() return t:view({ 6 }) end)
    assert.is_false(ok)
    assert.truthy(err:find("ember.view"))
    H.same(t:reshape({ 6 }), { 1, 4, 2, 5, 3, 6 })
    assert.has_error(function() a23():reshape({ 4, 2 }) end,
      "ember.reshape: shape {4, 2} is invalid for a tensor of 6 elements")
  end)

  it("transpose, permute, t", function()
    local a = a23()
    H.same(a:transpose(1, 2), { { 1, 4 }, { 2, 5 }, { 3, 6 } })
    H.same(a:t(), { { 1, 4 }, { 2, 5 }, { 3, 6 } })
    local b = ember.arange(24):reshape({ 2, 3, 4 })
    local p = b:permute({ 3, 1, 2 })
    assert.are.same({ 4, 2, 3 }, p:shape())
    assert.are.equal(b:tolist()[2][3][4], p:tolist()[4][2][3])
    assert.has_error(function() b:permute({ 1, 2 }) end)
  end)

  it("squeeze, unsqueeze, expand", function()
    local t = ember.zeros({ 1, 3, 1 })
    assert.are.same({ 3 }, t:squeeze():shape())
    assert.are.same({ 3, 1 }, t:squeeze(1):shape())
    assert.are.same({ 1, 3 }, t:squeeze(-1):shape())
    assert.are.same({ 1, 1, 3, 1 }, t:unsqueeze(1):shape())
    assert.are.same({ 1, 3, 1, 1 }, t:unsqueeze(-1):shape())
    local e = ember.tensor({ { 1 }, { 2 } }):expand({ 2, 3 })
    H.same(e, { { 1, 1, 1 }, { 2, 2, 2 } })
    H.same(ember.tensor({ 1, 2 }):expand({ 2, -1 }), { { 1, 2 }, { 1, 2 } })
    assert.has_error(function() ember.tensor({ 1, 2 }):expand({ 3 }) end)
  end)

  it("narrow and select are 1-based views", function()
    local a = a23()
    H.same(a:narrow(2, 2, 2), { { 2, 3 }, { 5, 6 } })
    H.same(a:select(1, 2), { 4, 5, 6 })
    H.same(a:select(2, -1), { 3, 6 })
    a:select(1, 1):fill_(0)
    H.same(a, { { 0, 0, 0 }, { 4, 5, 6 } })
    assert.has_error(function() a:narrow(2, 3, 2) end,
      "ember.narrow: start 3 and length 2 out of range for dim 2 of size 3")
    assert.has_error(function() a:select(1, 3) end,
      "ember.select: index 3 out of range for dim 1 of size 2")
  end)
end)

describe("indexing", function()
  it("index_select and gather take 1-based int64 or int32 indices", function()
    local a = a23()
    local idx = ember.tensor({ 3, 1 }, { dtype = "int64" })
    H.same(a:index_select(2, idx), { { 3, 1 }, { 6, 4 } })
    H.same(a:index_select(1, ember.tensor({ 2, 2 }, { dtype = "int32" })), { { 4, 5, 6 }, { 4, 5, 6 } })
    local g = ember.tensor({ { 1, 1 }, { 3, 2 } }, { dtype = "int64" })
    H.same(a:gather(2, g), { { 1, 1 }, { 6, 5 } })
    H.same(a:t():index_select(1, idx), { { 3, 6 }, { 1, 4 } })   -- non-contiguous input
    assert.has_error(function() a:index_select(1, ember.tensor({ 1 })) end,
      "ember.index_select: index tensor must be int64 or int32, got float32")
    local ok, err = pcall(function() return a:index_select(1, ember.tensor({ 7 }, { dtype = "int64" })) end)
    assert.is_false(ok)
    assert.truthy(err:find("out of range"))
  end)

  it("cat and stack along any dim", function()
    local x, y = ember.tensor({ { 1, 2 } }), ember.tensor({ { 3, 4 } })
    H.same(ember.cat({ x, y }), { { 1, 2 }, { 3, 4 } })
    H.same(ember.cat({ x, y }, 2), { { 1, 2, 3, 4 } })
    H.same(ember.stack({ x, y }), { { { 1, 2 } }, { { 3, 4 } } })
    assert.are.same({ 1, 2, 2 }, ember.stack({ x, y }, 2):shape())
    assert.are.equal("float64", ember.cat({ x, y:double() }).dtype)
    local ok, err = pcall(ember.cat, { x, ember.ones({ 1, 3 }) }, 1)
    assert.is_false(ok)
    assert.truthy(err:find("{1, 2}", 1, true) and err:find("{1, 3}", 1, true))
    assert.has_error(function() ember.cat({}) end, "ember.cat: expected a non-empty list of tensors")
  end)

  it("differentiate lists longer than a rule's arena (300 tensors)", function()
    local xs = {}
    for i = 1, 300 do xs[i] = ember.tensor({ i }, { dtype = "float64" }) end
    for _, op in ipairs({ "stack", "cat" }) do
      local gm = ember.autodiff.GradManager():attach(xs)
      gm:record()
      gm:backward((ember[op](xs) ^ 2):sum())
      H.same(xs[300].grad, { 600 })
      H.same(xs[7].grad, { 14 })
      for i = 1, 300 do xs[i].grad = nil end
    end
  end)
end)

describe("index_add", function()
  -- the sum a plain loop over the source gives: result[..., idx[k], ...] += src[..., k, ...]
  local function by_hand(shape, dim, idx, src)
    local out = ember.zeros(shape, { dtype = "float64" }):tolist()
    local s = src:double():tolist()
    local function walk(a, path, d)
      if type(a) ~= "table" then
        local t = out
        for i = 1, #path - 1 do t = t[i == dim and idx[path[i]] or path[i]] end
        local last = #path == dim and idx[path[#path]] or path[#path]
        t[last] = t[last] + a
        return
      end
      for i = 1, #a do path[d] = i; walk(a[i], path, d + 1) end
      path[d] = nil
    end
    walk(s, {}, 1)
    return out
  end

  it("adds rows with repeated indices along every dim, strided sources, float32 and float64", function()
    local idx = { 3, 1, 3, 2 }
    local it = ember.tensor(idx, { dtype = "int64" })
    for _, dtype in ipairs({ "float64", "float32" }) do
      for dim = 1, 3 do
        local shape = { 3, 3, 3 }
        local sshape = { 3, 3, 3 }
        sshape[dim] = #idx
        local src = ember.randn({ sshape[3], sshape[2], sshape[1] }, { dtype = dtype }):permute({ 3, 2, 1 })
        assert.is_false(src:is_contiguous())
        local got = ember.zeros(shape, { dtype = dtype }):index_add(dim, it, src)
        H.same(got, by_hand(shape, dim, idx, src), dtype == "float64" and 1e-12 or 1e-5)
      end
    end
  end)
end)
