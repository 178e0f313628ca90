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
    local ok, err = pcall(function() return a:gather(2, idx) end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("gather: index 5 out of range for dim 2 of size 4", 1, true), tostring(err))
    local ok2, err2 = pcall(function() return a:gather(2, ember.tensor({ { 0 } }, { dtype = "int64" })) end)
    assert.is_false(ok2)
    assert.truthy(tostring(err2):find("index 0 out of range", 1, true), tostring(err2))
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
        local O, A = a:index_select(dim, idx):tolist(), a:tolist()
        for k = 1, 11 do
          if dim == 1 then
            for j = 1, 9 do assert.are.equal(A[list[k]][j], O[k][j]) end
          else
            for i = 1, 7 do assert.are.equal(A[i][list[k]], O[i][k]) end
          end
        end
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

describe("the indexing kernels on threads", function()
  it("give the same bits on 1 and 2 threads, gradients included", function()
    local threads = ember.get_num_threads()
    local function run(n)
      ember.set_num_threads(n)
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
      local out = { e:sum():item(), g:sum():item(), w.grad:clone() }
      ember.set_num_threads(threads)
      return out
    end
    local one, two = run(1), run(2)
    assert.are.equal(one[1], two[1])
    assert.are.equal(one[2], two[2])
    assert.is_true(ember.equal(one[3], two[3]))
  end)
end)
