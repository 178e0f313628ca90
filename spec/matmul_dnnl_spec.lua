-- float32 matrix products through oneDNN's sgemm (core/src/ops/matmul_dnnl.c)
-- at the shape classes it takes, against OpenBLAS (the switch off) and a
-- float64 product as the oracle.
local H = require("helpers")
local ember = H.ember

local function with_matmul_dnnl(on, f)
  return H.with_switch(ember.set_dnnl_matmul_enabled, ember.dnnl_matmul_enabled, on, f)
end

-- a (M, K) and b (K, N) operands, either stored transposed, seeded
local function operands(M, N, K, ta, tb)
  ember.manual_seed(M + 7 * N + 13 * K)
  local a = ta and ember.randn({ K, M }):t() or ember.randn({ M, K })
  local b = tb and ember.randn({ N, K }):t() or ember.randn({ K, N })
  return a, b
end

-- the float32 GEMM bound: |error| <= K * eps32 * (|a| |b|) elementwise, with room
local function within_gemm_tolerance(got, a, b)
  local want = a:double():matmul(b:double())
  local scale = a:double():abs():matmul(b:double():abs())
  local K = a:size(-1)
  local excess = ((got:double() - want):abs() - scale * (2 * K * 2 ^ -24)):max():item()
  return excess <= 0, excess
end

-- {M, N, K, a transposed, b transposed}: the MLP's products (batch 128, 784-256-128-10,
-- forward x w^T, input gradient g w, weight gradient g^T x), small, square, tall and skinny
local shapes = {
  { 128, 256, 784, false, true }, { 128, 128, 256, false, true }, { 128, 10, 128, false, true },
  { 128, 256, 128, false, false }, { 128, 128, 10, false, false },
  { 256, 784, 128, true, false }, { 128, 256, 128, true, false }, { 10, 128, 128, true, false },
  { 8, 8, 8, false, false }, { 32, 32, 32, false, false }, { 33, 17, 40, true, true },
  { 256, 256, 256, false, false }, { 512, 512, 512, false, false },
  { 4096, 64, 64, false, false }, { 64, 64, 4096, true, false },
}

describe("matrix products through oneDNN", function()
  it("has a switch of its own, under set_dnnl_enabled", function()
    local conv = ember.dnnl_enabled()
    with_matmul_dnnl(false, function() assert.is_false(ember.dnnl_matmul_enabled()) end)
    with_matmul_dnnl(true, function() assert.are.equal(conv, ember.dnnl_matmul_enabled()) end)
    ember.set_dnnl_enabled(false)
    local off = ember.dnnl_matmul_enabled()
    ember.set_dnnl_enabled(conv)
    assert.is_false(off)
  end)

  it("agree with OpenBLAS and a float64 product at every shape class", function()
    for _, s in ipairs(shapes) do
      local a, b = operands(s[1], s[2], s[3], s[4], s[5])
      local on = with_matmul_dnnl(true, function() return a:matmul(b) end)
      local off = with_matmul_dnnl(false, function() return a:matmul(b) end)
      assert.are.same({ s[1], s[2] }, on:shape())
      for _, got in ipairs({ on, off }) do
        local ok, excess = within_gemm_tolerance(got, a, b)
        assert(ok, ("shape %d x %d x %d: %g past the float32 bound"):format(s[1], s[2], s[3], excess))
      end
    end
  end)

  it("give linear's gradients as OpenBLAS does", function()
    local function grads(on)
      return with_matmul_dnnl(on, function()
        ember.manual_seed(5)
        local x, w = ember.randn({ 128, 784 }), ember.randn({ 256, 784 })
        local gm = ember.autodiff.GradManager():attach({ x, w })
        gm:record()
        gm:backward(ember.nn.functional.linear(x, w):pow(2):sum())
        return { x.grad, w.grad }
      end)
    end
    local on, off = grads(true), grads(false)
    for k = 1, 2 do
      local d = (on[k] - off[k]):abs():max():item() / off[k]:abs():max():item()
      assert(d < 1e-4, ("gradient %d: relative difference %g"):format(k, d))
    end
  end)

  -- libgomp's workers do not survive fork: a child's products go to OpenBLAS
  it("runs a forked child's products, after the parent ran oneDNN's", function()
    local a, b = operands(128, 256, 784, false, true)
    local want = a:matmul(b)
    H.in_forked_child("its product", function()
      return (a:matmul(b) - want):abs():max():item() <= 1e-3 * want:abs():max():item()
    end, 10)
  end)

  it("is left out under deterministic mode: bits as with the switch off", function()
    local a, b = operands(128, 256, 784, false, true)
    ember.set_deterministic(true)
    local on = with_matmul_dnnl(true, function() return a:matmul(b) end)
    local off = with_matmul_dnnl(false, function() return a:matmul(b) end)
    ember.set_deterministic(false)
    assert.are.equal(0, (on - off):abs():max():item())
  end)
end)
