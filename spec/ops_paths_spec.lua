-- The faster paths of issue 33's sweep against what they replace: the
-- embedding's range check fused into its copy, max pooling's plane sweeps
-- and its gathered adjoint (nn_kernels_spec.lua has the window scan).
local ember = require("ember")
local F = ember.nn.functional
local unpack = table.unpack or unpack

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

describe("max pooling's adjoint, one pass per plane", function()
  local ffi = require("ffi")
  local C = ember._C
  -- gx zeroed, then gx[idx] += g in output order, in Lua
  -- (in float32 each sum rounded to float32: the float32 sum of two floats)
  local function scatter(g, idx, xshape)
    local N, Cn, H, W = unpack(xshape)
    local round = g.dtype == "float32" and function(v) return tonumber(ffi.new("float", v)) end
      or function(v) return v end
    local gv, iv, n = g:contiguous():view(-1):tolist(), idx:contiguous():view(-1):tolist(), g:size(3) * g:size(4)
    local gx = {}
    for i = 1, N * Cn * H * W do gx[i] = 0 end
    for k = 1, #gv do
      local q = math.floor((k - 1) / n)
      local at = q * H * W + iv[k] + 1
      gx[at] = round(gx[at] + gv[k])
    end
    return gx
  end
  local function adjoint(g, idx, xshape)
    local out = ffi.new("ember_tensor*[1]")
    local rc = C.ember_max_pool2d_backward(ember._ptr("t", g, 1), ember._ptr("t", idx, 2),
      ffi.new("int64_t[4]", xshape), out)
    if rc < 0 then return nil, ffi.string(C.ember_last_error()) end
    return ember._wrap(out[0])
  end
  for _, gm in ipairs({ { 3, 2, 1 }, { 3, 2, 0 }, { 2, 2, 0 }, { 2, 1, 1 }, { 5, 3, 2 } }) do
    for _, dt in ipairs({ "float64", "float32" }) do
      it(("gives the scatter's bits (%s, kernel %d, stride %d, padding %d), on any thread count"):format(dt,
        gm[1], gm[2], gm[3]), function()
        ember.manual_seed(61)
        -- ties everywhere, so that positions win several windows
        local x = ember.randint(-2, 3, { 2, 3, 13, 12 }):to(dt)
        local _, idx = F.max_pool2d(x, gm[1], gm[2], gm[3], 1, false, true)
        local g = ember.randn(idx:shape(), { dtype = dt })
        local want = scatter(g, idx, x:shape())
        local before = ember.get_num_threads()
        for _, th in ipairs({ 1, 2, 3 }) do
          ember.set_num_threads(th)
          local gx = assert(adjoint(g, idx, x:shape()))
          assert.are.same(want, gx:view(-1):tolist())
        end
        ember.set_num_threads(before)
        -- and through autograd
        local xr = x:clone()
        local gmr = ember.autodiff.GradManager():attach({ xr })
        gmr:record()
        gmr:backward((F.max_pool2d(xr, gm[1], gm[2], gm[3]) * g):sum())
        assert.are.same(want, xr.grad:view(-1):tolist())
      end)
    end
  end
  it("fails naming an index outside the plane, and stays usable", function()
    local x = ember.randn({ 1, 2, 6, 6 })
    local _, idx = F.max_pool2d(x, 3, 2, 1, 1, false, true)
    local g = ember.ones(idx:shape())
    for _, bad in ipairs({ 36, -1 }) do
      local b = idx:clone()
      b:view(-1):narrow(1, 5, 1):fill_(bad)
      local y, e = adjoint(g, b, { 1, 2, 6, 6 })
      assert.is_nil(y)
      assert.truthy(e:find(("max_pool2d_backward: index %d is outside a 6 x 6 plane"):format(bad), 1, true), e)
    end
    assert.are.same({ 1, 2, 6, 6 }, adjoint(g, idx, { 1, 2, 6, 6 }):shape())
  end)
end)

describe("gather along dim 1 from a dense copy of its tile's slice", function()
  for _, dt in ipairs({ "float64", "float32", "int32" }) do
    it(("picks what the index names (%s, tiles of a source 2048 rows long), on any thread count"):format(dt),
      function()
        ember.manual_seed(71)
        local x = ember.randint(-1000, 1000, { 2048, 300 }):to(dt)
        local idx = ember.randint(1, 2049, { 40, 300 })
        local xv, iv = x:tolist(), idx:tolist()
        local want = {}
        for i = 1, 40 do
          want[i] = {}
          for j = 1, 300 do want[i][j] = xv[iv[i][j]][j] end
        end
        local before = ember.get_num_threads()
        for _, th in ipairs({ 1, 2, 3 }) do
          ember.set_num_threads(th)
          assert.are.same(want, x:gather(1, idx):tolist())
          assert.are.same(want, x:gather(1, idx:to("int32")):tolist())
        end
        ember.set_num_threads(before)
        -- a strided index, and a bad one named
        local it2 = idx:t():contiguous():t()
        assert.are.same(want, x:gather(1, it2):tolist())
        local bad = idx:clone()
        bad[{ 17, 250 }] = 2049
        local ok, e = pcall(function() return x:gather(1, bad) end)
        assert.is_false(ok)
        assert.truthy(tostring(e):find("index 2049 out of range for dim 1 of size 2048", 1, true), tostring(e))
      end)
  end
end)

describe("float32 sums and means of short rows, inlined", function()
  local ffi = require("ffi")
  local function f32(v) return tonumber(ffi.new("float", v)) end
  -- reduce.c's order: 16 float lanes, a tree of pairs, the tail, in double, rounded once
  local function lane_sum(row)
    local acc, n, i = {}, #row, 0
    for k = 1, 16 do acc[k] = 0 end
    while i + 16 <= n do
      for k = 1, 16 do acc[k] = f32(acc[k] + row[i + k]) end
      i = i + 16
    end
    local w = 8
    while w > 0 do
      for k = 1, w do acc[k] = f32(acc[k] + acc[k + w]) end
      w = w / 2
    end
    local s = acc[1]
    for j = i + 1, n do s = f32(s + row[j]) end
    return s
  end
  for _, hw in ipairs({ { 7, 7 }, { 1, 3 }, { 4, 4 }, { 5, 13 } }) do
    it(("gives reduce.c's order over %d x %d planes, and the float64 mean within rounding"):format(hw[1], hw[2]),
      function()
        ember.manual_seed(81)
        local x = ember.randn({ 3, 5, hw[1], hw[2] })
        local rows = x:view(15, hw[1] * hw[2]):tolist()
        local s, m = x:sum({ 3, 4 }):view(-1):tolist(), x:mean({ 3, 4 }, true):view(-1):tolist()
        local m64 = x:to("float64"):mean({ 3, 4 }):view(-1):tolist()
        for r = 1, 15 do
          local want = lane_sum(rows[r])
          assert.are.equal(f32(want), s[r])
          assert.are.equal(f32(want / (hw[1] * hw[2])), m[r])
          assert.is_true(math.abs(m[r] - m64[r]) <= 1e-6 * (1 + math.abs(m64[r])))
        end
        assert.are.same({ 3, 5, 1, 1 }, F.adaptive_avg_pool2d(x, 1):shape())
        assert.are.same(x:mean({ 3, 4 }, true):tolist(), F.adaptive_avg_pool2d(x, 1):tolist())
      end)
  end
end)

describe("average pooling's plane sweeps", function()
  local ffi = require("ffi")
  -- each window's rows summed left to right, the rows top to bottom, times 1 / (kh kw)
  local function reference(x, k, s, pd)
    local N, Cn, H, W = unpack(x:shape())
    local r = x.dtype == "float32" and function(v) return tonumber(ffi.new("float", v)) end or function(v) return v end
    local Ho, Wo = math.floor((H + 2 * pd - k) / s) + 1, math.floor((W + 2 * pd - k) / s) + 1
    local v, ys, inv = x:view(-1):tolist(), {}, r(1 / (k * k))
    for q = 0, N * Cn - 1 do
      for oh = 0, Ho - 1 do
        for ow = 0, Wo - 1 do
          local tot
          for h = math.max(0, oh * s - pd), math.min(H, oh * s - pd + k) - 1 do
            local w0, w1 = math.max(0, ow * s - pd), math.min(W, ow * s - pd + k) - 1
            local rs = v[q * H * W + h * W + w0 + 1]
            for w = w0 + 1, w1 do rs = r(rs + v[q * H * W + h * W + w + 1]) end
            tot = tot and r(tot + rs) or rs
          end
          ys[#ys + 1] = r(tot * inv)
        end
      end
    end
    return ys
  end
  for _, dt in ipairs({ "float64", "float32" }) do
    for _, g in ipairs({ { 2, 2, 0 }, { 3, 2, 1 }, { 3, 1, 1 }, { 5, 3, 2 }, { 1, 1, 0 }, { 4, 4, 2 } }) do
      it(("adds in the window scan's order, bit for bit (%s, kernel %d, stride %d, padding %d)"):format(dt, g[1], g[2],
        g[3]), function()
        ember.manual_seed(91)
        -- planes narrower than a vector's 16 lanes, across one, and wide (pool_window.c's padded rows)
        for _, shape in ipairs({ { 2, 3, 13, 17 }, { 1, 2, 9, 70 }, { 1, 3, 16, 7 } }) do
          local x = ember.randn(shape, { dtype = dt })
          assert.are.same(reference(x, g[1], g[2], g[3]), F.avg_pool2d(x, g[1], g[2], g[3]):view(-1):tolist())
        end
      end)
    end
    -- 2 x 2 at stride 2 with every window inside: pool_window.c's avg2x2, on even and odd planes
    it(("adds a 2 x 2 window at stride 2 in the same order, bit for bit (%s)"):format(dt), function()
      ember.manual_seed(92)
      for _, hw in ipairs({ { 12, 16 }, { 2, 2 }, { 7, 5 }, { 56, 56 } }) do
        local x = ember.randn({ 2, 3, hw[1], hw[2] }, { dtype = dt })
        assert.are.same(reference(x, 2, 2, 0), F.avg_pool2d(x, 2):view(-1):tolist())
      end
    end)
  end
end)

describe("binary ops on two operands of one shape and dtype, skipping promotion and layout", function()
  -- the general path's result: a with a leading dim of 1, so the operands'
  -- shapes differ and the broadcast, the promotion and the layout rule run
  local function general(op, a, b)
    return ember[op](a:unsqueeze(1), b):reshape(a:shape())
  end
  local cases = {
    { "float32", { "add", "sub", "mul", "div", "pow", "maximum", "minimum", "lt", "eq" } },
    { "float64", { "add", "sub", "mul", "div", "pow", "maximum", "minimum", "ge", "ne" } },
    { "int32", { "add", "sub", "mul", "div", "maximum", "lt" } },
    { "int64", { "add", "sub", "mul", "div", "minimum", "le" } },
    { "uint8", { "add", "sub", "mul", "gt" } },
  }
  for _, c in ipairs(cases) do
    local dt = c[1]
    for _, shape in ipairs({ { 7 }, { 3, 5 }, { 2, 3, 4 }, {}, { 0, 3 }, { 300, 500 } }) do
      it(("gives the general path's dtype and bits (%s, shape {%s})"):format(dt, table.concat(shape, ",")), function()
        ember.manual_seed(3)
        local a, b
        if dt:find("float") then
          a, b = ember.randn(shape, { dtype = dt }), ember.randn(shape, { dtype = dt }):abs() + 0.5
        else
          a, b = ember.randint(0, 200, shape, { dtype = dt }), ember.randint(1, 200, shape, { dtype = dt })
        end
        for _, op in ipairs(c[2]) do
          local x = op == "pow" and a:abs() or a   -- no NaN from a negative base
          local fast, slow = ember[op](x, b), general(op, x, b)
          assert.are.equal(slow.dtype, fast.dtype, op)
          assert.are.same(slow:shape(), fast:shape(), op)
          assert.is_true(fast:is_contiguous(), op)
          assert.is_true(ember.equal(fast, slow) or fast:numel() == 0, op)
          if dt == "float64" and fast:numel() > 0 then
            -- float64 element by element, exactly
            assert.are.same(slow:tolist(), fast:tolist(), op)
          end
        end
      end)
    end
  end
  it("keeps integers wrapping as the general path does, and records the gradient", function()
    local a = ember.tensor({ 2 ^ 31 - 1, -2 ^ 31 }, { dtype = "int32" })
    assert.are.same({ -2 ^ 31, 2 ^ 31 - 1 }, (a + ember.tensor({ 1, -1 }, { dtype = "int32" })):tolist())
    local x, y = ember.randn({ 4, 3 }, { dtype = "float64" }), ember.randn({ 4, 3 }, { dtype = "float64" })
    local gm = ember.autodiff.GradManager():attach({ x, y })
    gm:record()
    gm:backward((x * y + x):sum())
    assert.are.same((y + 1):tolist(), x.grad:tolist())
    assert.are.same(x:tolist(), y.grad:tolist())
  end)
end)
