-- The row kernels of layer norm and softmax (issue 33's second pass):
-- layer_norm_backward and softmax's adjoints reading their gradient in place
-- (a broadcast one, as a sum's gradient is, and strided rows) give the bits
-- of a contiguous gradient; odd row lengths (the 32 lanes' tails), one row
-- and one column, strided input and other dims against the float64
-- composition; softmax's rows split across threads keep their bits.
local H = require("helpers")
local ember = H.ember
local ffi = require("ffi")
local C = ember._C
local F64 = { dtype = "float64" }

local out2 = ffi.new("ember_tensor*[2]")
local check = H.check_rc

local max_diff = H.max_diff

-- layer_norm(x, w, b) over the last dim, and its adjoint for g: y, stats, gx, gwb
local function ln(x, w, b, rms)
  check(C.ember_layer_norm(x._c, w._c, b._c, 1, rms and 1 or 0, 1e-5, out2, out2 + 1))
  return ember._wrap(out2[0]), ember._wrap(out2[1])
end
local function ln_backward(g, x, w, st, rms)
  check(C.ember_layer_norm_backward(g._c, x._c, w._c, st._c, 1, rms and 1 or 0, 1e-5, out2, out2 + 1))
  return ember._wrap(out2[0]), ember._wrap(out2[1])
end

describe("layer_norm_backward's gradient read in place", function()
  -- 4097 is above the longest row a broadcast gradient is read in place for
  for _, dt in ipairs({ "float32", "float64" }) do
    for _, d in ipairs({ 1, 5, 37, 768, 4097 }) do
      it(("gives a contiguous gradient's bits for broadcast and strided ones (%s, rows of %d)"):format(dt, d),
        function()
        ember.manual_seed(d)
        local x = ember.randn({ 3, 4, d }, F64):to(dt)
        local w, b = ember.randn({ d }, F64):to(dt), ember.randn({ d }, F64):to(dt)
        for _, rms in ipairs({ false, true }) do
          local _, st = ln(x, w, b, rms)
          local grads = {
            ember.full({}, 0.75, { dtype = dt }):expand({ 3, 4, d }),          -- all strides 0
            ember.randn({ 3, 1, 1 }, F64):to(dt):expand({ 3, 4, d }),          -- a value per row block
            ember.randn({ 3, 4, d + 3 }, F64):to(dt):narrow(3, 2, d),          -- strided rows
            ember.randn({ 4, 3, d }, F64):to(dt):transpose(1, 2),              -- leading dims permuted
          }
          for i, g in ipairs(grads) do
            local gx, gwb = ln_backward(g, x, w, st, rms)
            local cx, cwb = ln_backward(g:contiguous(), x, w, st, rms)
            assert.are.equal(0, max_diff(gx, cx), "gx, gradient " .. i)
            assert.are.equal(0, max_diff(gwb, cwb), "gwb, gradient " .. i)
          end
        end
      end)
    end
  end

  it("one row and one column, against the float64 composition", function()
    ember.manual_seed(3)
    for _, shape in ipairs({ { 1, 37 }, { 9, 1 }, { 1, 1 }, { 2, 3, 33 } }) do
      local d = shape[#shape]
      local x = ember.randn(shape, F64) * 3 + 1
      local w, b = ember.randn({ d }, F64), ember.randn({ d }, F64)
      local r = ember.randn(shape, F64)
      local gm = ember.autodiff.GradManager():attach({ x, w, b })
      gm:record()
      gm:backward((ember.nn.functional.layer_norm(x, { d }, w, b) * r):sum())
      local fused = { x.grad, w.grad, b.grad }
      local x2, w2, b2 = x:clone(), w:clone(), b:clone()
      local gm2 = ember.autodiff.GradManager():attach({ x2, w2, b2 })
      gm2:record()
      local xc = x2 - x2:mean(#shape, true)
      local y = xc * ((xc * xc):mean(#shape, true) + 1e-5):rsqrt() * w2 + b2
      gm2:backward((y * r):sum())
      for i, ref in ipairs({ x2.grad, w2.grad, b2.grad }) do
        assert.is_true(max_diff(fused[i], ref) <= 1e-13 * math.max(1, ref:abs():max():item()),
          ("{%s} grad %d: %g"):format(table.concat(shape, ", "), i, max_diff(fused[i], ref)))
      end
    end
  end)
end)

describe("softmax and log_softmax rows", function()
  local out1 = ffi.new("ember_tensor*[1]")
  local function adjoint(log, g, y, dim)
    check((log and C.ember_log_softmax_backward or C.ember_softmax_backward)(g._c, y._c, dim - 1, out1))
    return ember._wrap(out1[0])
  end
  -- softmax along dim in float64, from x's values
  local function ref(x, dim, log)
    local x64 = x:to("float64")
    local z = x64 - x64:max(dim, true)
    local lse = z:exp():sum(dim, true):log()
    return log and z - lse or (z - lse):exp()
  end

  -- lengths about the 32 lanes of the row sums and the vector widths
  for _, case in ipairs({ { { 1, 1000 }, 2 }, { { 7, 1 }, 2 }, { { 1, 33 }, 2 }, { { 5, 31 }, 2 }, { { 3, 32 }, 2 },
    { { 33, 6 }, 1 }, { { 4, 7, 65 }, 2 }, { { 256, 1000 }, 2 } }) do
    local shape, dim = case[1], case[2]
    it(("float32 forward and backward within rounding of float64 ({%s}, dim %d)"):format(
      table.concat(shape, ", "), dim), function()
        ember.manual_seed(#shape * 100 + shape[#shape])
        local x, g = ember.randn(shape) * 4, ember.randn(shape)
        for _, log in ipairs({ false, true }) do
          local y = log and x:log_softmax(dim) or x:softmax(dim)
          local r = ref(x, dim, log)
          assert.is_true(max_diff(y, r) <= (log and 2e-6 or 3e-7),
            ("%s forward: %g"):format(tostring(log), max_diff(y, r)))
          local want = (log and g:to("float64") - r:exp() * g:to("float64"):sum(dim, true)
            or r * (g:to("float64") - (g:to("float64") * r):sum(dim, true)))
          local tol = 2e-6 * math.max(1, want:abs():max():item())
          assert.is_true(max_diff(adjoint(log, g, y, dim), want) <= tol, tostring(log) .. " backward")
        end
      end)
  end

  it("the adjoints read broadcast and strided gradients in place with a contiguous one's bits", function()
    for _, dt in ipairs({ "float32", "float64" }) do
      for _, n in ipairs({ 1, 37, 1000, 4097 }) do
        ember.manual_seed(n)
        local x = ember.randn({ 3, 4, n }, F64):to(dt)
        local grads = {
          ember.full({}, 1.5, { dtype = dt }):expand({ 3, 4, n }),
          ember.randn({ 3, 1, 1 }, F64):to(dt):expand({ 3, 4, n }),
          ember.randn({ 3, 4, n + 2 }, F64):to(dt):narrow(3, 3, n),
          ember.randn({ 4, 3, n }, F64):to(dt):transpose(1, 2),
        }
        for _, log in ipairs({ false, true }) do
          local y = log and x:log_softmax(3) or x:softmax(3)
          for i, g in ipairs(grads) do
            assert.are.equal(0, max_diff(adjoint(log, g, y, 3), adjoint(log, g:contiguous(), y, 3)),
              ("%s, rows of %d, %s, gradient %d"):format(dt, n, tostring(log), i))
          end
        end
      end
    end
    -- trailing dims of 1 after the dim: still rows
    local x, g = ember.randn({ 5, 6, 1 }), ember.full({}, 2):expand({ 5, 6, 1 })
    local y = x:softmax(2)
    assert.are.equal(0, max_diff(adjoint(false, g, y, 2), adjoint(false, g:contiguous(), y, 2)))
  end)

  it("log_softmax_backward: rows with values above 0, infinities and NaN take the whole exp", function()
    local g = ember.tensor({ { 1, 2, 3 }, { 1, 1, 1 }, { 1, 1, 1 }, { 0.5, 1, 2 } })
    local y = ember.tensor({ { -1, 0.5, -2 }, { -math.huge, -1, 0 }, { 0 / 0, -1, -2 }, { -100, -0.0, -3 } })
    local got = adjoint(true, g, y, 2)
    local want = g:to("float64") - y:to("float64"):exp() * g:to("float64"):sum(2, true)
    local a, b = got:tolist(), want:tolist()
    for i = 1, 4 do
      for j = 1, 3 do
        if b[i][j] ~= b[i][j] then assert.is_true(a[i][j] ~= a[i][j], ("NaN at %d, %d"):format(i, j))
        else
          assert.is_true(math.abs(a[i][j] - b[i][j]) <= 1e-6 * math.max(1, math.abs(b[i][j])), ("%d, %d"):format(i, j))
        end
      end
    end
  end)

  it("non-contiguous input and a dim other than the last", function()
    ember.manual_seed(12)
    local x = ember.randn({ 40, 33 }):t()   -- (33, 40), strided
    for _, log in ipairs({ false, true }) do
      for dim = 1, 2 do
        local y = log and x:log_softmax(dim) or x:softmax(dim)
        assert.is_true(max_diff(y, ref(x, dim, log)) <= 2e-6)
      end
    end
  end)

  it("give the same bits on one thread and on two, rows split across them", function()
    H.same_bits_on_threads(function()
      ember.manual_seed(13)
      local x, g = ember.randn({ 256, 1000 }), ember.randn({ 256, 1000 })
      local y, ly = x:softmax(2), x:log_softmax(2)
      return { y, ly, adjoint(false, g, y, 2), adjoint(true, g, ly, 2) }
    end)
  end)
end)
