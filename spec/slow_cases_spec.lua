-- The last slow cases of issue 33's sweep against what they replace: the
-- global average pool's short-row sums (reduce.c's rows_sum_f32, a group of
-- rows folded and divided together) keep the order every float32 sum has:
-- 16 float lanes over the row, folded as a tree of pairs, the tail added in
-- float, the total widened to double and divided there (four rows at a time,
-- as four independent chains of adds).
local ember = require("ember")
local ffi = require("ffi")
local F = ember.nn.functional

local function f32(v) return tonumber(ffi.new("float", v)) end

-- the mean of a float32 row in that order, worked out in Lua
local function row_mean(row, n)
  local acc = {}
  for k = 1, 16 do acc[k] = 0 end
  local i = 0
  while i + 16 <= n do
    for k = 1, 16 do acc[k] = f32(acc[k] + row[i + k]) end
    i = i + 16
  end
  local w = 8
  while w >= 1 do
    for k = 1, w do acc[k] = f32(acc[k] + acc[k + w]) end
    w = w / 2
  end
  local v = acc[1]
  for j = i + 1, n do v = f32(v + row[j]) end
  return f32(v / n), v
end

describe("a mean over short float32 rows", function()
  local threads = ember.get_num_threads()
  after_each(function() ember.set_num_threads(threads) end)

  for _, hw in ipairs({ { 1, 1 }, { 3, 5 }, { 4, 4 }, { 1, 17 }, { 7, 7 }, { 10, 10 }, { 13, 23 } }) do
    it(("has the documented order's bits for %dx%d planes, on 1, 2 and 3 threads"):format(hw[1], hw[2]), function()
      local n = hw[1] * hw[2]
      local x = ember.randn({ 3, 37, hw[1], hw[2] }) * 100 + 3   -- 111 rows: a partial group of 16
      local rows = x:reshape({ 111, n }):tolist()
      local want_mean, want_sum = {}, {}
      for r = 1, 111 do want_mean[r], want_sum[r] = row_mean(rows[r], n) end
      for _, t in ipairs({ 1, 2, 3 }) do
        ember.set_num_threads(t)
        local m = F.adaptive_avg_pool2d(x, 1)
        assert.are.same({ 3, 37, 1, 1 }, m:shape())
        local got = m:reshape({ 111 }):tolist()
        local sums = x:sum({ 3, 4 }):reshape({ 111 }):tolist()
        for r = 1, 111 do
          assert.are.equal(want_mean[r], got[r])
          assert.are.equal(want_sum[r], sums[r])
        end
      end
    end)
  end

  it("matches float64's mean within float32 rounding and keeps the gradient 1/(H W)", function()
    local x = ember.randn({ 2, 5, 7, 7 })
    local gm = ember.autodiff.GradManager():attach({ x })
    gm:record()
    local m = F.adaptive_avg_pool2d(x, 1)
    local ref = x:to("float64"):mean({ 3, 4 }, true)
    assert.is_true(((m:to("float64") - ref):abs():max():item()) < 1e-6)
    gm:backward(m:sum())
    assert.are.same(ember.full({ 2, 5, 7, 7 }, f32(1 / 49)):tolist(), x.grad:tolist())
  end)
end)

-- A sum over a long float32 row runs blocks of 16384 four at a time (four
-- independent chains of adds, reduce.c's sum4_blocks_f32): each block's float
-- sum keeps the order above, and the blocks' sums add in double in order
describe("a float32 sum over whole blocks, four at a time", function()
  local threads = ember.get_num_threads()
  after_each(function() ember.set_num_threads(threads) end)
  for _, n in ipairs({ 16384 * 4, 16384 * 9 + 100, 16384 * 6 }) do
    it(("has the documented order's bits over %d elements, on 1, 2 and 3 threads"):format(n), function()
      local x = ember.randn({ n }) * 10 + 1
      local v, total = x:tolist(), 0
      for b = 0, n - 1, 16384 do
        local m = math.min(16384, n - b)
        local block = {}
        for i = 1, m do block[i] = v[b + i] end
        local _, s = row_mean(block, m)
        total = total + s
      end
      for _, t in ipairs({ 1, 2, 3 }) do
        ember.set_num_threads(t)
        assert.are.equal(f32(total), x:sum():item())
        assert.are.equal(f32(total / n), x:mean():item())
      end
    end)
  end
end)

-- index_select and embedding fetch a table row a few picks ahead while they
-- copy the current one (index.c's PICK_AHEAD): the rows must be the ones
-- picked, whatever the thread count and index dtype
describe("rows picked from a table", function()
  local threads = ember.get_num_threads()
  after_each(function() ember.set_num_threads(threads) end)

  it("are the rows the indices name, on 1, 2 and 3 threads", function()
    local w = ember.randn({ 50, 37 })
    local rows = w:tolist()
    local picks = {}
    for i = 1, 300 do picks[i] = (i * 7919) % 50 + 1 end
    picks[5], picks[6], picks[299], picks[300] = 1, 50, 50, 1
    for _, dt in ipairs({ "int64", "int32" }) do
      local idx = ember.tensor(picks, { dtype = dt })
      for _, t in ipairs({ 1, 2, 3 }) do
        ember.set_num_threads(t)
        local got = w:index_select(1, idx):tolist()
        local emb = F.embedding(idx:view(20, 15), w):view(300, 37):tolist()
        for i = 1, 300 do
          assert.are.same(rows[picks[i]], got[i])
          assert.are.same(rows[picks[i]], emb[i])
        end
      end
    end
  end)
end)

-- softmax's forward takes exp(x - max) with the exp's steps for x <= 0 only
-- (softmax.c's expf_nonpos): the same bits as the exp op, then the sum in
-- double over 32 lanes (lane_sums.h's ROW_LANES), the tail on the first,
-- folded as a tree of pairs
describe("softmax and log_softmax over float32 rows", function()
  local threads = ember.get_num_threads()
  after_each(function() ember.set_num_threads(threads) end)

  local function expected(rows, n)
    local sm, lsm = {}, {}
    for r, row in ipairs(rows) do
      local m = -math.huge
      for i = 1, n do m = math.max(m, row[i]) end
      local d = {}
      for i = 1, n do d[i] = f32(row[i] - m) end
      local e = ember.tensor(d):exp():tolist()
      local acc = {}
      for k = 1, 32 do acc[k] = 0 end
      local i = 0
      while i + 32 <= n do
        for k = 1, 32 do acc[k] = acc[k] + e[i + k] end
        i = i + 32
      end
      for j = i + 1, n do acc[1] = acc[1] + e[j] end
      local w = 16
      while w >= 1 do
        for k = 1, w do acc[k] = acc[k] + acc[k + w] end
        w = w / 2
      end
      local inv, ls = f32(1 / acc[1]), f32(math.log(acc[1]))
      sm[r], lsm[r] = {}, {}
      for j = 1, n do
        sm[r][j] = f32(e[j] * inv)
        lsm[r][j] = f32(d[j] - ls)
      end
    end
    return sm, lsm
  end

  for _, n in ipairs({ 1000, 13 }) do
    it(("has the bits of exp, the double sum and the scaling, rows of %d, on 1, 2 and 3 threads"):format(n), function()
      local x = ember.randn({ 40, n }) * 30
      x[{ 3, 5 }] = -1e30   -- exp of a value far below the others is 0
      x[{ 4, 2 }] = 80      -- and a row dominated by one value
      local rows = x:tolist()
      local sm, lsm = expected(rows, n)
      for _, t in ipairs({ 1, 2, 3 }) do
        ember.set_num_threads(t)
        assert.are.same(sm, x:softmax(2):tolist())
        assert.are.same(lsm, x:log_softmax(2):tolist())
      end
    end)
  end

  it("keeps rows of -inf, NaN and inf as the exp op gives them", function()
    local inf = math.huge
    local x = ember.tensor({ { -inf, -inf }, { 0 / 0, 1 }, { inf, 1 }, { -inf, 1 }, { -100, 0 } })
    local y, ly = x:softmax(2):tolist(), x:log_softmax(2):tolist()
    for r = 1, 3 do
      for j = 1, 2 do assert.is_true(y[r][j] ~= y[r][j] and ly[r][j] ~= ly[r][j]) end
    end
    assert.are.same({ { 0, 1 }, { 0, 1 } }, { y[4], y[5] })
    assert.are.same({ { -inf, 0 }, { -100, 0 } }, { ly[4], ly[5] })
  end)
end)
