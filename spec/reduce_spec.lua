-- Reductions, softmax and matmul through the Lua API: values by hand,
-- dims (1-based, negative), keepdim, non-contiguous inputs and errors.
local H = require("helpers")
local ember = H.ember

local a = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })

describe("reductions", function()
  it("sum over all, one or several dims, with keepdim", function()
    H.same(a:sum(), 21, 0, {})
    H.same(a:sum(1), { 5, 7, 9 }, 0, { 3 })
    H.same(a:sum(2), { 6, 15 }, 0, { 2 })
    H.same(a:sum(-1, true), { { 6 }, { 15 } }, 0, { 2, 1 })
    H.same(a:sum({ 1, 2 }), 21)
    H.same(ember.sum(a, 1), { 5, 7, 9 })
    assert.are.equal("int64", ember.tensor({ 1, 2 }, { dtype = "int32" }):sum().dtype)
    assert.are.equal("int64", ember.tensor({ true, true, false }):sum().dtype)
    H.same(ember.tensor({ true, true, false }):sum(), 2)
  end)

  it("mean, var (unbiased by default), std and norm", function()
    H.same(a:mean(), 3.5)
    H.same(a:mean(1), { 2.5, 3.5, 4.5 })
    H.same(a:var(), 3.5)                        -- sum of squared deviations 17.5 / 5
    H.same(a:var(nil, false, false), 17.5 / 6)
    H.same(a:var(2), { 1, 1 })
    H.same(a:std(2), { 1, 1 })
    H.same(ember.tensor({ 3, 4 }):norm(), 5)
    H.same(ember.tensor({ 3, -4 }):norm(1), 7)
    H.same(ember.tensor({ 3, -4 }):norm(math.huge), 4)
    H.same(a:norm(2, 2), { math.sqrt(14), math.sqrt(77) })
    assert.are.equal("float32", ember.tensor({ 1, 2 }, { dtype = "int64" }):mean().dtype)
  end)

  it("max and min with and without a dim, 1-based indices", function()
    H.same(a:max(), 6)
    H.same(a:min(), 1)
    local v, i = a:max(2)
    H.same(v, { 3, 6 })
    assert.are.same({ 3, 3 }, i:tolist())
    assert.are.equal("int64", i.dtype)
    v, i = a:min(1, true)
    H.same(v, { { 1, 2, 3 } }, 0, { 1, 3 })
    assert.are.same({ { 1, 1, 1 } }, i:tolist())
    local t = ember.tensor({ 1, 5, 5, 2 })
    assert.are.same(2, t:argmax():item())     -- first of the ties
    assert.are.same({ 3, 3 }, a:argmax(2):tolist())
    assert.are.same({ 1, 1 }, a:argmin(2):tolist())
    local n = ember.tensor({ 1, 0 / 0, 3 })
    assert.is_true(n:max():item() ~= n:max():item())   -- NaN propagates
  end)

  it("float32 max and min along a dim against a Lua loop: first of ties, NaN first, -0 against +0", function()
    -- rows of small integers (many ties), some with NaN, some of zeros of both signs
    local rows, len = 40, 37
    local vals = {}
    for r = 1, rows do
      vals[r] = {}
      for j = 1, len do vals[r][j] = ((r * 31 + j * 17) % 11) - 5 end
      if r % 5 == 0 then vals[r][(r * 7) % len + 1] = 0 / 0 end
      if r % 7 == 0 then for j = 1, len do vals[r][j] = (j % 3 == 0) and 0 or H.neg_zero end end
    end
    local x = ember.tensor(vals, { dtype = "float32" })
    for _, sign in ipairs({ 1, -1 }) do
      local v, i
      if sign > 0 then v, i = x:max(2) else v, i = x:min(2) end
      local vs, is = v:tolist(), i:tolist()
      for r = 1, rows do
        local best, bi = vals[r][1], 1   -- the first NaN, else the first strictly better
        if best == best then
          for j = 2, len do
            local y = vals[r][j]
            if y ~= y then best, bi = y, j; break end
            if sign * y > sign * best then best, bi = y, j end
          end
        end
        assert.are.equal(bi, is[r], "row " .. r)
        if best ~= best then assert.is_true(vs[r] ~= vs[r]) else
          assert.are.equal(1 / best, 1 / vs[r], "row " .. r)   -- the sign of a zero too
        end
      end
      assert.are.same(is, (sign > 0 and x:argmax(2) or x:argmin(2)):tolist())
    end
  end)

  it("float32 max and min of whole tensors: signs, infinities, NaN, -0 against +0", function()
    -- 100003 elements: several blocks and a ragged tail; values by hand
    local x = ember.arange(0, 100003):mul(0.5):sub(25000)   -- -25000 .. 25001
    assert.are.equal(25001, x:max():item())
    assert.are.equal(-25000, x:min():item())
    assert.are.equal(-0.5, ember.tensor({ -3, -0.5, -7 }):max():item())
    assert.are.equal(-7, ember.tensor({ -3, -0.5, -7 }):min():item())
    assert.are.equal(math.huge, ember.tensor({ 1, math.huge, -math.huge }):max():item())
    assert.are.equal(-math.huge, ember.tensor({ 1, math.huge, -math.huge }):min():item())
    local z = ember.tensor({ H.neg_zero, 0, H.neg_zero })
    assert.are.equal(math.huge, 1 / z:max():item())    -- +0 above -0
    assert.are.equal(-math.huge, 1 / z:min():item())
    local y = ember.full({ 50000 }, 2)
    y[40001] = 0 / 0
    assert.is_true(y:max():item() ~= y:max():item())
    assert.is_true(y:min():item() ~= y:min():item())
  end)

  it("logsumexp, softmax and log_softmax are stable", function()
    local x = ember.tensor({ { 1, 2, 3 }, { 1000, 1000, 1000 } }, { dtype = "float64" })
    local l = math.log(math.exp(1) + math.exp(2) + math.exp(3))
    H.same(x:logsumexp(2), { l, 1000 + math.log(3) })
    local s = x:softmax(2)
    H.same(s, { { math.exp(1 - l), math.exp(2 - l), math.exp(3 - l) }, { 1 / 3, 1 / 3, 1 / 3 } })
    H.same(x:log_softmax(-1), { { 1 - l, 2 - l, 3 - l }, { -math.log(3), -math.log(3), -math.log(3) } })
    H.same(ember.tensor({ { 1, 1 } }):softmax(1), { { 1, 1 } })
    H.same(ember.tensor({ -math.huge, -math.huge }):logsumexp(1), -math.huge)
  end)

  it("float32 softmax and log_softmax agree with float64 on long ragged rows, NaN and -inf rows", function()
    ember.manual_seed(8)
    local x = ember.randn({ 6, 1003 }) * 10   -- 1003: the eight-wide loops and their tails
    for _, op in ipairs({ "softmax", "log_softmax" }) do
      local f, d = x[op](x, 2):double(), x:double()[op](x:double(), 2)
      local err = (f - d):abs():max():item()
      assert.is_true(err < (op == "softmax" and 1e-6 or 1e-5), op .. " error " .. err)
    end
    H.same(x:softmax(2):sum(2), { 1, 1, 1, 1, 1, 1 }, 1e-5)
    local inf, nan = math.huge, 0 / 0
    local r = ember.tensor({ { 1, nan, 3, 4, 5, 6, 7, 8, 9, 10 }, { -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf },
      { -inf, 0, 0, 0, 0, 0, 0, 0, 0, 0 } }):softmax(2):tolist()
    for j = 1, 10 do assert.is_true(r[1][j] ~= r[1][j]) end   -- a NaN spreads over its row
    assert.are.equal(0, r[3][1])
    assert.is_true(math.abs(r[3][2] - 1 / 9) < 1e-7)
  end)

  it("sum and mean over outer and inner dims around kept ones (a bias gradient) against loops", function()
    -- x[n][c][h][w] = n + 10 c + 100 h + 1000 w on {2, 3, 4, 5}, float32 and float64
    for _, dt in ipairs({ "float32", "float64" }) do
      local vals = {}
      for n = 0, 1 do for c = 0, 2 do for h = 0, 3 do for w = 0, 4 do
        vals[#vals + 1] = n + 10 * c + 100 * h + 1000 * w
      end end end end
      local x = ember.tensor(vals, { dtype = dt }):view(2, 3, 4, 5)
      local want, want_ch = {}, {}
      for c = 0, 2 do
        local s = 0
        for n = 0, 1 do for h = 0, 3 do for w = 0, 4 do s = s + n + 10 * c + 100 * h + 1000 * w end end end
        want[c + 1] = s
      end
      for c = 0, 2 do
        want_ch[c + 1] = {}
        for h = 0, 3 do
          local s = 0
          for n = 0, 1 do for w = 0, 4 do s = s + n + 10 * c + 100 * h + 1000 * w end end
          want_ch[c + 1][h + 1] = s
        end
      end
      H.same(x:sum({ 1, 3, 4 }), want, 0, { 3 })
      H.same(x:sum({ 1, 3, 4 }, true):view(3), want)
      assert.are.same({ 1, 3, 1, 1 }, x:sum({ 1, 3, 4 }, true):shape())
      local mean = {}
      for i, v in ipairs(want) do mean[i] = v / 40 end
      H.same(x:mean({ 1, 3, 4 }), mean, 1e-6)
      H.same(x:sum({ 1, 4 }), want_ch, 0, { 3, 4 })   -- two kept dims
      H.same(H.noncontig(x):sum({ 1, 3, 4 }), want, 0)   -- the general path
    end
  end)

  it("sum and mean over leading dims against sums down each column in Lua", function()
    -- below 2048 rows, each column is added in order in double: a Lua loop's bits;
    -- longer and narrower ones add blocks of rows, then the blocks in order
    for _, c in ipairs({ { 37, 300, 0 }, { 2047, 5, 0 }, { 3000, 3, 1e-12 }, { 9, 513, 0 } }) do
      local rows, width, tol = c[1], c[2], c[3]
      local x = ember.randn({ rows, width }, { dtype = "float64" })
      local xs, want = x:tolist(), {}
      for j = 1, width do
        local s = 0
        for i = 1, rows do s = s + xs[i][j] end
        want[j] = s
      end
      H.same(x:sum(1), want, tol)
      local mean = {}
      for j = 1, width do mean[j] = want[j] / rows end
      H.same(x:mean(1), mean, 1e-15)   -- times 1 / rows, not divided by rows
      -- float32 sums in double and rounds once: the float64 sum of the same numbers, rounded
      local xf = x:float()
      assert.are.same(xf:double():sum(1):float():tolist(), xf:sum(1):tolist())
      assert.are.same(xf:double():view(rows, 1, width):mean({ 1, 2 }):float():tolist(),
        xf:view(rows, 1, width):mean({ 1, 2 }):tolist())
    end
  end)

  it("give the same results on non-contiguous inputs", function()
    local t = a:t()   -- {3, 2}
    H.same(t:sum(1), { 6, 15 })
    H.same(t:sum(2), { 5, 7, 9 })
    H.same(t:softmax(1):sum(1), { 1, 1 })
    local v, i = t:max(1)
    H.same(v, { 3, 6 })
    assert.are.same({ 3, 3 }, i:tolist())
    H.same(t:var(1), { 1, 1 })
  end)

  it("name the op and the shape on bad dims", function()
    assert.has_error(function() a:sum(3) end, "ember.sum: dim 3 out of range for a tensor of 2 dims")
    assert.has_error(function() a:max(0) end, "ember.max: dim 0 out of range for a tensor of 2 dims")
    assert.has_error(function() a:softmax(5) end, "ember.softmax: dim 5 out of range for a tensor of 2 dims")
    local ok, err = pcall(function() return ember.zeros({ 0, 3 }):max(1) end)
    assert.is_false(ok)
    assert.truthy(err:find("{0, 3}", 1, true))
    assert.has_error(function() a:sum_to({ 4 }) end)
  end)

  it("sum_to reverses broadcasting", function()
    H.same(a:sum_to({ 3 }), { 5, 7, 9 })
    H.same(a:sum_to({ 2, 1 }), { { 6 }, { 15 } })
    H.same(a:sum_to({}), 21)
  end)
end)

describe("matmul", function()
  it("multiplies matrices, vectors and batches", function()
    local m = ember.tensor({ { 1, 2 }, { 3, 4 } })
    local v = ember.tensor({ 1, 1 })
    H.same(m:matmul(m), { { 7, 10 }, { 15, 22 } })
    H.same(m:matmul(v), { 3, 7 }, 0, { 2 })
    H.same(v:matmul(m), { 4, 6 }, 0, { 2 })
    H.same(v:matmul(v), 2, 0, {})
    local b = ember.stack({ m, m * 2 })   -- {2, 2, 2}
    H.same(b:matmul(m), { { { 7, 10 }, { 15, 22 } }, { { 14, 20 }, { 30, 44 } } })
    H.same(m:matmul(b), { { { 7, 10 }, { 15, 22 } }, { { 14, 20 }, { 30, 44 } } })
    H.same(m:t():matmul(m), { { 10, 14 }, { 14, 20 } })          -- a transposed operand
    local d = ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "float64" })
    H.same(d:matmul(d), { { 7, 10 }, { 15, 22 } })
    local i = ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "int64" })
    assert.are.same({ { 7, 10 }, { 15, 22 } }, i:matmul(i):tolist())
  end)

  it("names both shapes when they do not fit", function()
    assert.has_error(function() ember.ones({ 2, 3 }):matmul(ember.ones({ 4, 5 })) end,
      "ember.matmul: shapes {2, 3} and {4, 5} cannot be multiplied (3 != 4)")
  end)
end)
