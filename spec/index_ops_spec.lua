-- The indexing kernels (core/src/ops/index.c): gather, index_select,
-- scatter_add and index_add against element-by-element Lua loops over
-- tolist(), for strided and transposed operands, int32 and int64 indices and
-- several dtypes; the same bits on 1 and 2 threads; the first bad index named.
local H = require("helpers")
local ember = H.ember

-- a deterministic pseudo-random integer in [1, n]
local function lcg(seed)
  local s = seed
  return function(n)
    s = (s * 1103515245 + 12345) % 2147483648
    return s % n + 1
  end
end

local function index_tensor(rows, cols, hi, dtype, seed)
  local r, t = lcg(seed), {}
  for i = 1, rows do
    t[i] = {}
    for j = 1, cols do t[i][j] = r(hi) end
  end
  return ember.tensor(t, { dtype = dtype })
end

local function values(rows, cols, dtype)
  return ember.arange(1, rows * cols + 1, { dtype = dtype }):reshape({ rows, cols })
end

-- O (index_select's result, as nested tables) holds list's rows (dim 1) or
-- columns (dim 2) of the matrix A, in list's order
local function picks(A, O, dim, list)
  for k, at in ipairs(list) do
    if dim == 1 then
      for j = 1, #A[1] do assert.are.equal(A[at][j], O[k][j]) end
    else
      for i = 1, #A do assert.are.equal(A[i][at], O[i][k]) end
    end
  end
end

describe("gather", function()
  for _, case in ipairs({
    { dim = 2, idtype = "int64", dtype = "float32" },
    { dim = 1, idtype = "int32", dtype = "float64" },
    { dim = 2, idtype = "int32", dtype = "int64" },
    { dim = 1, idtype = "int64", dtype = "float16" },
  }) do
    it(("along dim %d, %s indices, %s values, contiguous and transposed"):format(case.dim, case.idtype, case.dtype),
      function()
        for _, transposed in ipairs({ false, true }) do
          local a = values(7, 9, case.dtype)
          if transposed then a = values(9, 7, case.dtype):t() end   -- 7 x 9, strided
          local hi = a:size(case.dim)
          local idx = index_tensor(5, 6, hi, case.idtype, 7)
          local out = a:gather(case.dim, idx)
          local A, I, O = a:tolist(), idx:tolist(), out:tolist()
          for i = 1, 5 do
            for j = 1, 6 do
              local want = case.dim == 1 and A[I[i][j]][j] or A[i][I[i][j]]
              assert.are.equal(want, O[i][j])
            end
          end
          local idx_t = index_tensor(6, 5, hi, case.idtype, 11):t()   -- a strided index
          local O2, I2 = a:gather(case.dim, idx_t):tolist(), idx_t:tolist()
          for i = 1, 5 do
            for j = 1, 6 do
              assert.are.equal(case.dim == 1 and A[I2[i][j]][j] or A[i][I2[i][j]], O2[i][j])
            end
          end
        end
      end)
  end

  it("gathers in 3 dims along the middle one", function()
    local a = ember.arange(1, 2 * 5 * 4 + 1, { dtype = "float32" }):reshape({ 2, 5, 4 })
    local r, t = lcg(3), {}
    for i = 1, 2 do
      t[i] = {}
      for k = 1, 3 do
        t[i][k] = {}
        for j = 1, 4 do t[i][k][j] = r(5) end
      end
    end
    local idx = ember.tensor(t, { dtype = "int64" })
    local O, A = a:gather(2, idx):tolist(), a:tolist()
    for i = 1, 2 do
      for k = 1, 3 do
        for j = 1, 4 do assert.are.equal(A[i][t[i][k][j]][j], O[i][k][j]) end
      end
    end
  end)

  it("names the first index out of range, 1-based, and its dim", function()
    local a = values(3, 4, "float32")
    local idx = ember.tensor({ { 1, 2 }, { 5, 9 } }, { dtype = "int64" })
    H.raises(function() return a:gather(2, idx) end, "gather: index 5 out of range for dim 2 of size 4")
    H.raises(function() return a:gather(2, ember.tensor({ { 0 } }, { dtype = "int64" })) end,
      "index 0 out of range")
  end)
end)

describe("index_select", function()
  for _, dim in ipairs({ 1, 2 }) do
    for _, transposed in ipairs({ false, true }) do
      it(("picks along dim %d of a %s tensor"):format(dim, transposed and "transposed" or "contiguous"), function()
        local a = transposed and values(9, 7, "float64"):t() or values(7, 9, "float64")
        local r, list = lcg(5), {}
        for k = 1, 11 do list[k] = r(a:size(dim)) end
        local idx = ember.tensor(list, { dtype = "int32" })
        picks(a:tolist(), a:index_select(dim, idx):tolist(), dim, list)
      end)
    end
  end
end)

describe("scatter_add and index_add", function()
  for _, dtype in ipairs({ "float32", "float64", "int64", "int32", "float16" }) do
    it("add every term in the source's order, " .. dtype, function()
      for _, dim in ipairs({ 1, 2 }) do
        local src = values(5, 6, dtype)
        local idx = index_tensor(5, 6, dim == 1 and 4 or 3, "int64", 13)
        local base = ember.zeros(dim == 1 and { 4, 6 } or { 5, 3 }, { dtype = dtype })
        local out = base:scatter_add(dim, idx, src)
        local want = base:tolist()
        local S, I = src:tolist(), idx:tolist()
        for i = 1, 5 do
          for j = 1, 6 do
            if dim == 1 then want[I[i][j]][j] = want[I[i][j]][j] + S[i][j]
            else want[i][I[i][j]] = want[i][I[i][j]] + S[i][j] end
          end
        end
        H.same(out, want)
        local list = { 2, 1, 2, 3, 1 }
        local rows = ember.tensor(list, { dtype = "int64" })
        local into = ember.zeros({ 3, 6 }, { dtype = dtype })
        local got = into:index_add(1, rows, src)
        local w2 = into:tolist()
        for k = 1, 5 do
          for j = 1, 6 do w2[list[k]][j] = w2[list[k]][j] + S[k][j] end
        end
        H.same(got, w2)
      end
    end)
  end
end)

describe("the index a gradient needs", function()
  it("is the caller's own, so changing it in place before backward raises (as in PyTorch)", function()
    local w = ember.randn({ 5, 3 })
    local gm = ember.autodiff.GradManager():attach({ w })
    local idx = ember.tensor({ 1, 2, 2 }, { dtype = "int64" })
    gm:record()
    local y = w:index_select(1, idx):sum()
    idx:fill_(5)
    H.raises(function() gm:backward(y) end, "needed by index_select", "was modified in place")
  end)
end)

describe("the indexing kernels on threads", function()
  it("give the same bits on 1 and 2 threads, gradients included", function()
    H.same_bits_on_threads(function()
      ember.manual_seed(4)
      local w = ember.randn({ 3000, 64 })
      local gm = ember.autodiff.GradManager():attach({ w })
      local idx = ember.randint(1, 3001, { 4096 }, { dtype = "int64" })
      local g2 = ember.randint(1, 65, { 3000, 200 }, { dtype = "int64" })
      gm:record()
      local e = w:index_select(1, idx)
      local g = w:gather(2, g2)
      local loss = (e * e):sum() + (g * g):mean() * 3
      gm:backward(loss)
      return { e:sum():item(), g:sum():item(), w.grad:clone() }
    end)
  end)

  it("give the same bits on 1 and 2 threads: scatter_add's float sums, a tiled gather, index_add across columns", function()
    H.same_bits_on_threads(function()
      ember.manual_seed(6)
      local src = ember.randn({ 256, 1024 })
      local idx = ember.randint(1, 33, { 256, 1024 }, { dtype = "int32" })   -- many terms per place
      local rows = ember.randint(1, 9, { 4000 }, { dtype = "int64" })
      local a = ember.randn({ 4096, 200 })
      local out = {
        ember.zeros({ 256, 32 }):scatter_add(2, idx, src),
        ember.zeros({ 40, 1024 }):scatter_add(1, idx:narrow(1, 1, 200), src:narrow(1, 1, 200)),
        a:gather(1, ember.randint(1, 4097, { 300, 200 }, { dtype = "int64" })),
        ember.zeros({ 8, 200 }):index_add(1, rows, ember.randn({ 4000, 200 })),
        -- columns in tiles, split across threads
        ember.zeros({ 5000, 100 }):scatter_add(1, ember.randint(1, 5, { 3000, 100 }, { dtype = "int64" }) * 1000,
          ember.randn({ 3000, 100 })),
      }
      return out
    end)
  end)
end)

describe("gather and index_select of every dtype", function()
  for _, dtype in ipairs({ "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool" }) do
    it(dtype .. ", int32 and int64 indices, along each dim", function()
      local t = {}
      for i = 1, 4 do
        t[i] = {}
        for j = 1, 5 do
          if dtype == "bool" then t[i][j] = (i + 2 * j) % 3 == 0 else t[i][j] = (i * 5 + j) % 200 end
        end
      end
      local a = ember.tensor(t, { dtype = dtype })
      for _, idtype in ipairs({ "int32", "int64" }) do
        for dim = 1, 2 do
          local idx = index_tensor(3, 4, a:size(dim), idtype, 17 + dim)
          local O, I = a:gather(dim, idx):tolist(), idx:tolist()
          for i = 1, 3 do
            for j = 1, 4 do
              local want = t[i][I[i][j]]   -- (an `and or` would lose a false)
              if dim == 1 then want = t[I[i][j]][j] end
              assert.are.equal(want, O[i][j])
            end
          end
          local list = { a:size(dim), 1, 2, a:size(dim), 1 }
          picks(t, a:index_select(dim, ember.tensor(list, { dtype = idtype })):tolist(), dim, list)
        end
      end
    end)
  end
end)

describe("gather along a leading dim, in column tiles", function()
  -- a {2, 4096, 70} float32: a slice of 4096 x 64 floats fills the 1 MiB a
  -- tile may take, so the 70 columns go in two tiles
  ember.manual_seed(9)
  local a = ember.randn({ 2, 4096, 70 })
  local idx = ember.randint(1, 4097, { 2, 50, 70 }, { dtype = "int32" })

  it("picks what the last-dim path picks from the transposed views, and what brackets read", function()
    local out = a:gather(2, idx)
    local other = a:transpose(2, 3):gather(3, idx:transpose(2, 3)):transpose(2, 3)
    assert.is_true(ember.equal(out, other))
    local r = lcg(21)
    for _ = 1, 60 do
      local b, k, c = r(2), r(50), r(70)
      assert.are.equal(a[{ b, idx[{ b, k, c }], c }], out[{ b, k, c }])
    end
    local a2 = a:select(1, 2)   -- 2-D, every row in one tile's task
    assert.is_true(ember.equal(a2:gather(1, idx:select(1, 2):to("int64")), out:select(1, 2)))
  end)

  it("names the first bad index in the result's order, whichever tile holds it", function()
    local bad = idx:clone()
    bad[{ 1, 3, 70 }] = 5000   -- second tile, row 3
    bad[{ 1, 5, 1 }] = 0       -- first tile, a later row
    H.raises(function() return a:gather(2, bad) end, "gather: index 5000 out of range for dim 2 of size 4096")
  end)
end)

describe("gather of one element a row", function()
  -- the last dim (of size 1) is dropped: the rows become one row
  it("a label a row, along the last dim and along the first, 2-D and 3-D, strided", function()
    local a = values(6, 5, "float32")
    local A = a:tolist()
    local lab = ember.tensor({ { 2 }, { 5 }, { 1 }, { 5 }, { 3 }, { 4 } }, { dtype = "int64" })
    local L = lab:tolist()
    H.same(a:gather(2, lab), { { A[1][2] }, { A[2][5] }, { A[3][1] }, { A[4][5] }, { A[5][3] }, { A[6][4] } })
    H.same(a:t():gather(1, lab:t()), { { A[1][2], A[2][5], A[3][1], A[4][5], A[5][3], A[6][4] } })
    H.same(a:gather(1, ember.tensor({ { 6 }, { 1 }, { 3 } }, { dtype = "int32" })), { { A[6][1] }, { A[1][1] }, { A[3][1] } })
    local b = ember.arange(1, 2 * 3 * 4 + 1, { dtype = "float64" }):reshape({ 2, 3, 4 })
    local B = b:tolist()
    local k = ember.tensor({ { { 3 }, { 1 }, { 2 } }, { { 3 }, { 2 }, { 1 } } }, { dtype = "int64" })
    local K = k:tolist()
    local O, O2 = b:gather(3, k):tolist(), b:gather(2, k):tolist()
    for i = 1, 2 do
      for j = 1, 3 do
        assert.are.equal(B[i][j][K[i][j][1]], O[i][j][1])
        assert.are.equal(B[i][K[i][j][1]][1], O2[i][j][1])
      end
    end
    for i = 1, 6 do assert.are.equal(A[i][L[i][1]], a:gather(2, lab)[{ i, 1 }]) end
    H.raises(function() return a:gather(2, ember.tensor({ { 1 }, { 6 } }, { dtype = "int64" })) end,
      "gather: index 6 out of range for dim 2 of size 5")
  end)
end)

describe("index_select of strided operands", function()
  it("a transposed 3-D tensor along its middle dim, a strided int32 index", function()
    local a = ember.arange(1, 3 * 4 * 5 + 1, { dtype = "float64" }):reshape({ 5, 4, 3 }):permute({ 3, 2, 1 })   -- 3 x 4 x 5
    local pairs_ = ember.tensor({ { 4, 9 }, { 1, 9 }, { 4, 9 }, { 2, 9 }, { 3, 9 }, { 1, 9 } }, { dtype = "int32" })
    local idx = pairs_:select(2, 1)   -- {4, 1, 4, 2, 3, 1}, stride 2
    local O, A, list = a:index_select(2, idx):tolist(), a:tolist(), idx:tolist()
    for i = 1, 3 do
      for k = 1, 6 do
        for j = 1, 5 do assert.are.equal(A[i][list[k]][j], O[i][k][j]) end
      end
    end
  end)

  -- the kernel merges a's dims where it steps evenly over them and drops
  -- those of size 1 (a data set's (n, 1, 28, 28) batch is n rows of 784):
  -- every dim picked, of contiguous, sliced and permuted 4-D tensors
  it("4-D tensors with dims of size 1, contiguous, sliced and permuted, along every dim", function()
    local base = ember.arange(1, 6 * 1 * 4 * 5 + 1, { dtype = "float32" }):reshape({ 6, 1, 4, 5 })
    local cases = { base, base:narrow(4, 2, 3), base:permute({ 3, 2, 1, 4 }), base:permute({ 2, 4, 1, 3 }) }
    for _, a in ipairs(cases) do
      local A = a:tolist()
      for dim = 1, 4 do
        local r, list = lcg(dim), {}
        for k = 1, 7 do list[k] = r(a:size(dim)) end
        local O = a:index_select(dim, ember.tensor(list, { dtype = "int64" })):tolist()
        local n = { a:size(1), a:size(2), a:size(3), a:size(4) }
        n[dim] = #list
        for i1 = 1, n[1] do
          for i2 = 1, n[2] do
            for i3 = 1, n[3] do
              for i4 = 1, n[4] do
                local at = { i1, i2, i3, i4 }
                at[dim] = list[at[dim]]
                assert.are.equal(A[at[1]][at[2]][at[3]][at[4]], O[i1][i2][i3][i4])
              end
            end
          end
        end
      end
    end
  end)

  it("names the first bad index, once for every row", function()
    for dim = 1, 2 do
      H.raises(function()
        return values(3, 4, "float32"):index_select(dim, ember.tensor({ 2, 9, 0 }, { dtype = "int32" }))
      end, "index_select: index 9 out of range for dim " .. dim)
    end
  end)

  it("checks the index even when the result is empty", function()
    H.raises(function() return ember.zeros({ 3, 0 }):index_select(1, ember.tensor({ 2, 4 }, { dtype = "int64" })) end,
      "index_select: index 4 out of range for dim 1 of size 3")
  end)
end)

describe("scatter_add's paths", function()
  -- Lua's sums of small integers, in the source's order
  local function scatter_ref(shape, dim, I, S, dims)
    local want = ember.zeros(shape, { dtype = "float64" }):tolist()
    for i = 1, dims[1] do
      for j = 1, dims[2] do
        for k = 1, dims[3] do
          local p = I[i][j][k]
          if dim == 1 then want[p][j][k] = want[p][j][k] + S[i][j][k]
          elseif dim == 2 then want[i][p][k] = want[i][p][k] + S[i][j][k]
          else want[i][j][p] = want[i][j][p] + S[i][j][k] end
        end
      end
    end
    return want
  end
  local function index3(dims, hi, dtype, seed)
    local r, t = lcg(seed), {}
    for i = 1, dims[1] do
      t[i] = {}
      for j = 1, dims[2] do
        t[i][j] = {}
        for k = 1, dims[3] do t[i][j][k] = r(hi) end
      end
    end
    return ember.tensor(t, { dtype = dtype }), t
  end

  for _, case in ipairs({
    { name = "along the middle dim", dims = { 3, 4, 5 }, shape = { 3, 6, 5 }, dim = 2 },
    { name = "along the last dim, a result larger off dim", dims = { 3, 4, 5 }, shape = { 4, 5, 7 }, dim = 3 },
    { name = "split over the inner dims (few outer)", dims = { 2, 3, 100 }, shape = { 2, 4, 100 }, dim = 2 },
    { name = "along the first dim", dims = { 4, 3, 2 }, shape = { 5, 3, 2 }, dim = 1 },
  }) do
    for _, dtype in ipairs({ "float32", "float64", "int32", "bfloat16" }) do
      it(case.name .. ", " .. dtype .. ", int32 indices", function()
        local n = case.dims[1] * case.dims[2] * case.dims[3]
        local flat = {}
        for e = 1, n do flat[e] = e % 7 + 1 end
        local src = ember.tensor(flat, { dtype = dtype }):reshape(case.dims)
        local idx, I = index3(case.dims, case.shape[case.dim], "int32", 31)
        local base = ember.zeros(case.shape, { dtype = dtype })
        H.same(base:scatter_add(case.dim, idx, src), scatter_ref(case.shape, case.dim, I, src:tolist(), case.dims))
      end)
    end
  end

  -- a result of 5000 float64s along dim: its columns go in tiles of 32, each
  -- zeroed by the block that adds into it; the last-dim path of the
  -- transposed problem, with no tiles, must give the same bits
  for _, case in ipairs({
    { name = "over the outer dims", dims = { 8, 3, 40 }, shape = { 8, 5000, 40 }, dim = 2 },
    { name = "over the columns", dims = { 3, 100 }, shape = { 5000, 100 }, dim = 1 },
  }) do
    it("in column tiles " .. case.name .. ", as the transposed problem", function()
      ember.manual_seed(12)
      local src = ember.randn(case.dims, { dtype = "float64" })
      local idx = ember.randint(1, 11, case.dims, { dtype = "int64" }) * 500   -- repeats
      local out = ember.zeros(case.shape, { dtype = "float64" }):scatter_add(case.dim, idx, src)
      local nd = #case.dims
      local tshape = {}
      for d = 1, nd do tshape[d] = case.shape[d] end
      tshape[case.dim], tshape[nd] = tshape[nd], tshape[case.dim]
      local other = ember.zeros(tshape, { dtype = "float64" })
        :scatter_add(nd, idx:transpose(case.dim, nd), src:transpose(case.dim, nd)):transpose(case.dim, nd)
      assert.is_true(ember.equal(out, other))
      -- Lua's sums, in the source's order, at every place written
      local S, I, acc, at = src:reshape({ -1 }):tolist(), idx:reshape({ -1 }):tolist(), {}, {}
      local inner = nd == 3 and case.dims[3] or case.dims[2]
      local n = case.dims[case.dim]
      for e = 1, #S do
        local c, rest = (e - 1) % inner, math.floor((e - 1) / inner)
        local b = math.floor(rest / n)
        local key = (b * case.shape[case.dim] + I[e] - 1) * inner + c + 1
        acc[key] = (acc[key] or 0) + S[e]
        at[#at + 1] = key
      end
      local flat = out:reshape({ -1 })
      for _, key in ipairs(at) do assert.are.equal(acc[key], flat[{ key }]) end
      assert.is_true(out:ne(0):sum():item() <= #S)
    end)
  end

  it("names the first bad index in the source's order", function()
    local src = ember.ones({ 3, 4, 5 })
    local idx = index3({ 3, 4, 5 }, 4, "int64", 5)
    idx[{ 2, 1, 3 }] = 9
    idx[{ 3, 2, 1 }] = -2
    for _, dim in ipairs({ 2, 3 }) do
      H.raises(function() return ember.zeros({ 3, 4, 5 }):scatter_add(dim, idx, src) end,
        "scatter_add: index 9 out of range for dim " .. dim)
    end
  end)
end)
