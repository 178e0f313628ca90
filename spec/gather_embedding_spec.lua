-- F.embedding's lookup (nn/functional.lua): index_select over the index as
-- 1-D and a view to idx's shape .. {dim}, made in C with one wrapper. Its
-- results against an element-by-element Lua lookup (the same copies: the
-- same bits), for indices of 0 to 7 dims, int64 and int32, strided and
-- empty, on 1 thread and on 2; its gradient against counts worked out by
-- hand; padding_idx and max_norm; and its errors, which name embedding and
-- the index.
local H = require("helpers")
local ember = H.ember
local F = ember.nn.functional

-- idx's values as a flat Lua list (row-major)
local function flat_list(idx)
  if idx:numel() == 0 then return {} end
  return idx:reshape(-1):tolist()
end

-- F.embedding(idx, w) against W[idx[k]] for every k, shape included
local function check_lookup(idx, w)
  local W, I = w:tolist(), flat_list(idx)
  local r = F.embedding(idx, w)
  local want = idx:shape()
  want[#want + 1] = w:size(2)
  assert.is_true(H.shape_is(r, want), "shape " .. H.opts_str(r:shape()))
  local R = #I > 0 and r:reshape(-1, w:size(2)):tolist() or {}
  assert.are.equal(#I, #R)
  for k = 1, #I do
    for j = 1, w:size(2) do assert.are.equal(W[I[k]][j], R[k][j]) end
  end
  return r
end

describe("F.embedding's lookup", function()
  H.keep_thread_setting(before_each, after_each)

  for _, idtype in ipairs({ "int64", "int32" }) do
    for _, dtype in ipairs({ "float32", "float64" }) do
      it(("picks rows for indices of 0 to 7 dims, %s from %s indices"):format(dtype, idtype), function()
        ember.manual_seed(3)
        local w = ember.randn({ 40, 9 }, { dtype = dtype })
        check_lookup(ember.tensor(7, { dtype = idtype }), w)
        for _, shape in ipairs({ { 5 }, { 3, 4 }, { 2, 3, 2 }, { 1, 2, 1, 3 }, { 2, 1, 2, 1, 2, 1, 2 } }) do
          check_lookup(ember.randint(1, 41, shape, { dtype = idtype }), w)
        end
      end)
    end
  end

  it("reads a strided index and a strided or offset table where they lie", function()
    ember.manual_seed(4)
    local w = ember.randn({ 30, 12 })
    local idx = ember.randint(1, 31, { 6, 5 })
    check_lookup(idx:t(), w)                         -- a transposed index
    check_lookup(H.noncontig(ember.randint(1, 31, { 17 })), w)   -- every other element
    check_lookup(ember.randint(1, 21, { 6, 5 }), w:narrow(1, 3, 20):narrow(2, 2, 7))   -- part of a bigger table
    check_lookup(ember.randint(1, 13, { 4, 3 }), w:t())   -- a transposed table: 12 rows of 30
  end)

  it("returns an empty result of the right shape for an empty index", function()
    local w = ember.randn({ 5, 3 })
    for _, shape in ipairs({ { 0 }, { 2, 0 }, { 0, 4, 2 } }) do
      local r = check_lookup(ember.zeros(shape, { dtype = "int64" }), w)
      assert.are.equal(0, r:numel())
    end
  end)

  it("gives the same bits on 1 thread and on 2, at sizes the pool splits", function()
    ember.manual_seed(5)
    local w = ember.randn({ 3000, 256 })
    local tok = ember.randint(1, 3001, { 32, 128 })
    local tok32 = tok:int()
    H.same_bits_on_threads(function()
      return { F.embedding(tok, w), F.embedding(tok32, w), w:index_select(1, tok:reshape(-1)) }
    end)
    assert.is_true(ember.equal(F.embedding(tok, w):view(-1, 256), w:index_select(1, tok:reshape(-1))))
  end)

  it("passes the gradient: each row gets the sum of its lookups' gradients", function()
    local w = ember.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, { dtype = "float64" })
    local idx = ember.tensor({ { 3, 1, 3 }, { 3, 2, 1 } }, { dtype = "int64" })
    local gm = ember.autodiff.GradManager():attach({ w })
    gm:record()
    -- weights 1..12 on the 6 lookups x 2 columns: row 3 is looked up at
    -- (1,1), (1,3), (2,1); row 1 at (1,2), (2,3); row 2 at (2,2)
    local g = ember.arange(1, 13, { dtype = "float64" }):view(2, 3, 2)
    gm:backward((F.embedding(idx, w) * g):sum())
    H.same(w.grad, { { 3 + 11, 4 + 12 }, { 9, 10 }, { 1 + 5 + 7, 2 + 6 + 8 } }, 0)
  end)

  it("keeps padding_idx's row out of the gradient and max_norm's renorm", function()
    local w = ember.tensor({ { 3, 4 }, { 0.3, 0.4 }, { 6, 8 } }, { dtype = "float64" })
    local idx = ember.tensor({ { 1, 2 }, { 2, 3 } }, { dtype = "int64" })
    local gm = ember.autodiff.GradManager():attach({ w })
    gm:record()
    local y = F.embedding(idx, w, { padding_idx = 2 })
    H.same(y, { { { 3, 4 }, { 0.3, 0.4 } }, { { 0.3, 0.4 }, { 6, 8 } } }, 0, { 2, 2, 2 })
    gm:backward(y:sum())
    H.same(w.grad, { { 1, 1 }, { 0, 0 }, { 1, 1 } }, 0)
    -- max_norm 2: rows 1 (norm 5) and 3 (norm 10) scaled to norm 2, row 2 (0.5) kept
    local w2 = w:detach():clone()
    local y2 = F.embedding(idx, w2, nil, 2)
    local s1, s3 = 2 / (5 + 1e-7), 2 / (10 + 1e-7)
    H.same(w2, { { 3 * s1, 4 * s1 }, { 0.3, 0.4 }, { 6 * s3, 8 * s3 } }, 1e-12)
    H.same(y2, { { { 3 * s1, 4 * s1 }, { 0.3, 0.4 } }, { { 0.3, 0.4 }, { 6 * s3, 8 * s3 } } }, 1e-12)
  end)

  it("names embedding, the index and the table in its errors, and stays usable", function()
    local w = ember.randn({ 10, 4 })
    H.raises(function() return F.embedding(ember.tensor({ { 1, 11 } }, { dtype = "int64" }), w) end,
      "ember.nn.functional.embedding: index 11 out of range 1..10 of a weight of shape {10, 4}")
    H.raises(function() return F.embedding(ember.tensor({ 0, 3 }, { dtype = "int32" }), w) end,
      "embedding: index 0 out of range 1..10")
    H.raises(function() return F.embedding(ember.tensor(-3, { dtype = "int64" }), w) end,
      "embedding: index -3 out of range 1..10")
    H.raises(function() return F.embedding(ember.tensor({ 11 }, { dtype = "int64" }), w, { max_norm = 1 }) end,
      "embedding: index 11 out of range 1..10")
    H.raises(function() return F.embedding(ember.ones({ 1, 1, 1, 1, 1, 1, 1, 1 }, { dtype = "int64" }), w) end,
      "embedding: indices of 8 dims would give a result of 9, at most 8")
    H.raises(function() return F.embedding(ember.tensor({ 1.5 }), w) end,
      "embedding: indices must be int64 or int32, got float32")
    check_lookup(ember.tensor({ 10, 1 }, { dtype = "int64" }), w)
  end)
end)
