-- Issue 33's gather and elementwise paths: a gather along the last dim
-- (16 picks a vector store, then a tail), rows picked whole from a table
-- (index_select, embedding: one copy a row, the index checked as it goes),
-- and results streamed past the cache (iter.c's non-temporal stores, for
-- operands of more than 32 MiB): each against element-by-element Lua loops
-- or the same op on pieces too small to stream (the same kernel: the same
-- bits), rows of odd lengths, several dtypes, strided operands, outputs
-- with gaps and at odd offsets, and bad indices named.
local H = require("helpers")
local ember = H.ember
local F = ember.nn.functional

-- a rows x cols index of values in [1, hi], and its values as nested tables
local function index_rows(rows, cols, hi, dtype)
  local idx = ember.randint(1, hi + 1, { rows, cols }, { dtype = dtype })
  return idx, idx:tolist()
end

describe("gather along the last dim", function()
  for _, dtype in ipairs({ "float32", "float64", "uint8", "float16", "int32" }) do
    for _, idtype in ipairs({ "int64", "int32" }) do
      it(("picks rows of 1 to 100 elements, %s from %s indices"):format(dtype, idtype), function()
        local a = ember.arange(0, 3 * 40, { dtype = dtype }):reshape({ 3, 40 })   -- exact in every dtype
        local A = a:tolist()
        for _, n in ipairs({ 1, 15, 16, 17, 31, 32, 33, 100 }) do
          local idx, I = index_rows(3, n, 40, idtype)
          local O = a:gather(2, idx):tolist()
          for i = 1, 3 do
            for j = 1, n do assert.are.equal(A[i][I[i][j]], O[i][j]) end
          end
        end
      end)
    end
  end

  it("picks from a strided input and with a strided index", function()
    local a = ember.randn({ 40, 6 }):t()   -- 6 x 40, its rows 1 element apart in storage... transposed
    local A = a:tolist()
    local idx, I = index_rows(6, 37, 40, "int64")
    local O = a:gather(2, idx):tolist()
    for i = 1, 6 do
      for j = 1, 37 do assert.are.equal(A[i][I[i][j]], O[i][j]) end
    end
    local c = a:contiguous()
    local idx_t = H.noncontig(idx)
    H.same(c:gather(2, idx_t), O, 0)
  end)

  it("names the first bad index, in the unrolled block or the tail", function()
    local a = ember.randn({ 2, 50 })
    for _, at in ipairs({ 1, 17, 32, 33, 40 }) do
      local idx = ember.ones({ 2, 40 }, { dtype = "int64" })
      idx[{ 2, at }] = 51
      if at < 40 then idx[{ 2, 40 }] = 99 end
      H.raises(function() return a:gather(2, idx) end, "gather: index 51 out of range for dim 2 of size 50")
      idx[{ 2, at }] = 0
      H.raises(function() return a:gather(2, idx) end, "gather: index 0 out of range")
    end
  end)

  it("gives the same bits on 1 and 2 threads at 4096 x 1024", function()
    local a = ember.randn({ 4096, 1024 })
    local idx = ember.randint(1, 1025, { 4096, 1024 })
    H.same_bits_on_threads(function() return { a:gather(2, idx) } end)
    local O, A, I = a:gather(2, idx):narrow(1, 4001, 3):tolist(), a:narrow(1, 4001, 3):tolist(),
      idx:narrow(1, 4001, 3):tolist()
    for i = 1, 3 do
      for j = 1, 1024 do assert.are.equal(A[i][I[i][j]], O[i][j]) end
    end
  end)
end)

describe("rows picked whole from a table", function()
  for _, idtype in ipairs({ "int64", "int32" }) do
    for _, cols in ipairs({ 1, 7, 256 }) do
      it(("index_select and embedding of rows of %d, %s indices"):format(cols, idtype), function()
        local w = ember.randn({ 50, cols })
        local W = w:tolist()
        local rows, list = index_rows(1, 70, 50, idtype)
        rows, list = rows:reshape({ 70 }), list[1]
        local O = w:index_select(1, rows):tolist()
        for k = 1, 70 do
          for j = 1, cols do assert.are.equal(W[list[k]][j], O[k][j]) end
        end
        H.same(F.embedding(rows:reshape({ 7, 10 }), w):reshape({ 70, cols }), O, 0)
      end)
    end
  end

  it("picks rows of a narrowed table (rows further apart than their length)", function()
    local big = ember.randn({ 30, 20 })
    local w = big:narrow(2, 4, 9)   -- 30 x 9, row stride 20, at an offset
    local W = w:tolist()
    local list = { 30, 1, 7, 7, 12 }
    H.same(w:index_select(1, ember.tensor(list, { dtype = "int64" })),
      { W[30], W[1], W[7], W[7], W[12] }, 0)
  end)

  it("names the first bad index wherever it is", function()
    local w = ember.randn({ 50, 16 })
    for _, at in ipairs({ 1, 2, 64, 65, 300 }) do
      local list = {}
      for k = 1, 300 do list[k] = (k % 50) + 1 end
      list[at] = 51
      if at < 300 then list[300] = 77 end
      local rows = ember.tensor(list, { dtype = "int64" })
      H.raises(function() return w:index_select(1, rows) end,
        "index_select: index 51 out of range for dim 1 of size 50")
      H.raises(function() return F.embedding(rows, w) end, "embedding", "out of range")
      list[at] = 0
      H.raises(function() return w:index_select(1, ember.tensor(list, { dtype = "int32" })) end,
        "index_select: index 0 out of range")
    end
  end)
end)

describe("results streamed past the cache", function()
  -- f over the whole (streamed) and over blocks of 128 rows (too small to stream)
  local function same_as_blocks(f, n, ...)
    local args = { ... }
    local whole = f(unpack(args))
    for r = 1, n, 128 do
      local part = {}
      for k, t in ipairs(args) do
        part[k] = t:dim() == 2 and t:size(1) == n and t:narrow(1, r, math.min(128, n - r + 1)) or t
      end
      local want = f(unpack(part))
      assert.is_true(ember.equal(whole:narrow(1, r, want:size(1)), want), "rows from " .. r)
    end
  end

  it("add, mul, exp and a row-broadcast add give the bits of the unstreamed kernels", function()
    ember.manual_seed(5)
    local a, b, row = ember.randn({ 2048, 2049 }), ember.randn({ 2048, 2049 }), ember.randn({ 2049 })
    same_as_blocks(function(x, y) return x + y end, 2048, a, b)
    same_as_blocks(function(x, y) return x * y end, 2048, a, b)
    same_as_blocks(function(x, y) return x + y end, 2048, a, row)
    local big = ember.randn({ 4096, 2049 }) * 30
    same_as_blocks(function(x) return x:exp() end, 4096, big)
    same_as_blocks(function(x, y) return x - y end, 4096, big, ember.randn({ 4096, 1 }))
  end)

  it("adds transposed operands", function()
    local a, b = ember.randn({ 2048, 2048 }), ember.randn({ 2048, 2048 })
    local r = a:t() + b:t()
    assert.is_true(ember.equal(r:t(), a + b))
    H.same_bits_on_threads(function() return { a:t() + b:t(), a + b } end)
  end)

  it("writes a strided or offset destination and nothing beside it", function()
    local big = ember.full({ 2048, 4096 }, -1)
    local src = ember.randn({ 2048, 2047 })
    big:narrow(2, 2, 2047):copy_(src)   -- rows at an odd offset, 4 bytes off a 16-byte unit
    assert.is_true(ember.equal(big:narrow(2, 2, 2047), src))
    assert.is_true(ember.equal(big:narrow(2, 1, 1), ember.full({ 2048, 1 }, -1)))
    assert.is_true(ember.equal(big:narrow(2, 2049, 2048), ember.full({ 2048, 2048 }, -1)))
    local pairs_ = ember.full({ 2048, 2048, 2 }, -1)
    local s2 = ember.randn({ 2048, 2048 })
    pairs_:select(3, 1):copy_(s2)   -- every other element: the gaps stay
    assert.is_true(ember.equal(pairs_:select(3, 1), s2))
    assert.is_true(ember.equal(pairs_:select(3, 2), ember.full({ 2048, 2048 }, -1)))
  end)

  it("adds in place (not streamed) as out of place", function()
    local a, b = ember.randn({ 2048, 2048 }), ember.randn({ 2048, 2048 })
    local want = a + b
    a:add_(b)
    assert.is_true(ember.equal(a, want))
  end)
end)

describe("exp in float32", function()
  it("gives ember__expf's bits where blocks skip its steps for large, small and NaN inputs", function()
    -- a dense grid over and past (-87, 88), blocks of 1024 wholly inside and
    -- mixed, at every offset: the strided input takes the unblocked loop
    local x = ember.linspace(-104, 104, 3000017)
    for _, t in ipairs({ x, x:narrow(1, 2, 2999999), x * 0.25, x:narrow(1, 1000001, 700000) }) do
      assert.is_true(ember.equal(t:exp(), H.noncontig(t):exp()))
    end
    local special = ember.tensor({ 0, -0.0, math.huge, -math.huge, 0 / 0, -87.5, -87.3365479, 88.7228391, 88.8,
      -87, 88, 1e-30, -1e-30 })
    local e = ember.cat({ ember.zeros({ 1020 }), special, ember.ones({ 2000 }) }):exp():tolist()
    local want = H.noncontig(special):exp():tolist()
    for k = 1, #want do
      local got = e[1020 + k]
      if want[k] ~= want[k] then assert.is_true(got ~= got) else assert.are.equal(want[k], got) end
    end
    assert.are.equal(1, e[1021])
    assert.are.equal(1, e[1022])
    assert.are.equal(math.huge, e[1023])
    assert.are.equal(0, e[1024])
    H.same(ember.tensor({ -1, 0.5, 2, 80 }):exp(), { math.exp(-1), math.exp(0.5), math.exp(2), math.exp(80) }, 2e-7)
  end)
end)
