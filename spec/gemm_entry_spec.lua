-- matmul's and conv2d's products go through one GEMM entry (core/src/ops/gemm.c)
-- with one policy: the skinny loops, oneDNN, OpenBLAS's threads, and
-- deterministic mode's fixed blocks of 64 rows. conv2d's im2col path (oneDNN
-- switched off) is checked against convolutions written out here as loops, at
-- shapes that reach the skinny loops (a weight gradient with 9 columns) and
-- the deterministic blocks (an input gradient with 400 rows), and its bits
-- under deterministic mode must not depend on the thread count.
local H = require("helpers")
local ember = H.ember
local F = ember.nn.functional

local function with_dnnl(on, f) return H.with_switch(ember.set_dnnl_enabled, ember.dnnl_enabled, on, f) end
local function with_det(on, f) return H.with_switch(ember.set_deterministic, ember.is_deterministic, on, f) end
-- fn() on n threads, then the thread setting as it was (a count, or "auto")
local function with_threads(n, fn)
  local before = ember._C.ember_threads_auto() ~= 0 and "auto" or ember.get_num_threads()
  ember.set_num_threads(n)
  local ok, r = pcall(fn)
  ember.set_num_threads(before)
  if not ok then error(r, 0) end
  return r
end

-- an a x b x c x d table of zeros
local function zeros4(a, b, c, d)
  local t = {}
  for i = 1, a do
    t[i] = {}
    for j = 1, b do
      t[i][j] = {}
      for k = 1, c do
        t[i][j][k] = {}
        for l = 1, d do t[i][j][k][l] = 0 end
      end
    end
  end
  return t
end

-- y, gx, gw of a stride-1 convolution without padding, written out
local function conv_by_loops(x, w, gy)
  local N, C, Hh, W = #x, #x[1], #x[1][1], #x[1][1][1]
  local O, kH, kW = #w, #w[1][1], #w[1][1][1]
  local Ho, Wo = Hh - kH + 1, W - kW + 1
  local y, gx, gw = zeros4(N, O, Ho, Wo), zeros4(N, C, Hh, W), zeros4(O, C, kH, kW)
  for n = 1, N do
    for o = 1, O do
      for oh = 1, Ho do
        for ow = 1, Wo do
          local s, g = 0, gy[n][o][oh][ow]
          for c = 1, C do
            local xc, wc, gxc, gwc = x[n][c], w[o][c], gx[n][c], gw[o][c]
            for i = 1, kH do
              for j = 1, kW do
                s = s + xc[oh + i - 1][ow + j - 1] * wc[i][j]
                gxc[oh + i - 1][ow + j - 1] = gxc[oh + i - 1][ow + j - 1] + g * wc[i][j]
                gwc[i][j] = gwc[i][j] + g * xc[oh + i - 1][ow + j - 1]
              end
            end
          end
          y[n][o][oh][ow] = s
        end
      end
    end
  end
  return y, gx, gw
end

-- y, gx, gw of F.conv2d(x, w) with gy as y's gradient
local function conv_by_ember(x, w, gy)
  x, w = x:clone(), w:clone()
  local gm = ember.autodiff.GradManager():attach({ x, w })
  gm:record()
  local y = F.conv2d(x, w)
  gm:backward((y * gy):sum())
  return y, x.grad, w.grad
end

local function check_shape(xs, ws, tol)
  ember.manual_seed(3)
  local x, w = ember.randn(xs), ember.randn(ws)
  local gy = ember.randn({ xs[1], ws[1], xs[3] - ws[3] + 1, xs[4] - ws[4] + 1 })
  local ry, rgx, rgw = conv_by_loops(x:tolist(), w:tolist(), gy:tolist())
  local y, gx, gw = unpack(with_dnnl(false, function() return { conv_by_ember(x, w, gy) } end))
  H.same(y, ry, tol)
  H.same(gx, rgx, tol)
  H.same(gw, rgw, tol)
  return x, w, gy
end

describe("one GEMM entry for matmul and conv2d", function()
  it("a weight gradient of 9 columns (the skinny loops' shape) agrees with the loops", function()
    check_shape({ 4, 1, 20, 20 }, { 8, 1, 3, 3 }, 1e-4)
  end)

  it("an input gradient of 400 rows agrees with the loops, and in deterministic mode for any thread count", function()
    local x, w, gy = check_shape({ 4, 16, 9, 9 }, { 6, 16, 5, 5 }, 1e-4)
    local function run(n)
      return with_threads(n, function()
        local r = with_dnnl(false, function() return { conv_by_ember(x, w, gy) } end)
        return { r[1]:tolist(), r[2]:tolist(), r[3]:tolist() }
      end)
    end
    local one, two = unpack(with_det(true, function() return { run(1), run(2) } end))
    assert.are.same(one, two)
  end)

  it("matmul in deterministic mode gives the same bits for 1 and 2 threads at 200 rows", function()
    ember.manual_seed(4)
    local a, b = ember.randn({ 200, 300 }), ember.randn({ 300, 100 })
    local function run(n) return with_threads(n, function() return a:matmul(b):tolist() end) end
    local one, two = unpack(with_det(true, function() return { run(1), run(2) } end))
    assert.are.same(one, two)
    H.same(a:to("float64"):matmul(b:to("float64")), one, 2e-4)   -- 300 float32 terms of about 1
  end)

  -- gemm.c cuts a product of 2^18 multiply-adds or more into a power of two
  -- of blocks, dealt in pieces of 16 along its larger side: 784 columns in 4
  -- blocks of 192-208, 130 rows in 2 of 64 and 66, 1000 in 8 of 112-128.
  -- Every element must come from the block that owns it, with either operand
  -- read transposed, on 1 and on 2 threads alike.
  it("a product cut into uneven blocks agrees with float64, read transposed or not, on 1 and 2 threads", function()
    ember.manual_seed(5)
    for _, s in ipairs({ { 256, 784, 128, true, false }, { 784, 96, 130, false, true }, { 130, 1000, 300, false, false },
      { 1000, 130, 300, true, true }, { 130, 120, 64, false, false } }) do
      local M, N, K, ta, tb = unpack(s)
      local a = ta and ember.randn({ K, M }):t() or ember.randn({ M, K })
      local b = tb and ember.randn({ N, K }):t() or ember.randn({ K, N })
      local function run(n) return with_threads(n, function() return a:matmul(b):tolist() end) end
      local one, two = run(1), run(2)
      assert.are.same(one, two)
      H.same(a:to("float64"):matmul(b:to("float64")), one, 4e-4)   -- up to 300 float32 terms of about 1
    end
  end)
end)
