-- bench/ops.lua: per-op costs of the tensor core, each beside the same work
-- done by a plain C loop or a direct cblas_sgemm call in the same run.
-- Run from the repository root after building: luajit bench/ops.lua
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ffi = require("ffi")
local ember = require("ember")
local C = ember._C

ffi.cdef [[
void ref_add_f32(const float *a, const float *b, float *out, int64_t n);
float ref_sum_f32(const float *a, int64_t n);
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);
]]
local ref = ffi.load(os.getenv("EMBER_BUILD_DIR") and (os.getenv("EMBER_BUILD_DIR") .. "/libember_benchref.so")
  or "./build/libember_benchref.so")
local blas = ffi.load("openblas")

local out = {}

-- Each pair is timed in alternation (B.time_pair); the ratios are medians of
-- per-round ratios, so a noisy neighbour slows both sides alike.

-- 4-element add through the whole Lua API
local a4, b4 = ember.rand({ 4 }), ember.rand({ 4 })
local pa, pb = ffi.cast("float *", a4:data_ptr()), ffi.cast("float *", b4:data_ptr())
local pc = ffi.new("float[4]")
local t, tc, r = B.time_pair(function(n) for _ = 1, n do local _ = a4 + b4 end end,
  function(n) for _ = 1, n do ref.ref_add_f32(pa, pb, pc, 4) end end, 1000000, 7)
out.add4_us, out.add4_c_us, out.add4_vs_c = t * 1e6, tc * 1e6, r

-- 1M-element add and sum (ember uses its thread pool; the C loops one thread)
local N = 1000000
local a, b = ember.rand({ N }), ember.rand({ N })
local fa, fb = ffi.cast("float *", a:data_ptr()), ffi.cast("float *", b:data_ptr())
local fc = ffi.new("float[?]", N)
t, tc, r = B.time_pair(function(n) for _ = 1, n do local _ = a + b end end,
  function(n) for _ = 1, n do ref.ref_add_f32(fa, fb, fc, N) end end, 200, 7)
out.add1m_us, out.add1m_c_us, out.add1m_vs_c = t * 1e6, tc * 1e6, r
t, tc, r = B.time_pair(function(n) for _ = 1, n do local _ = a:sum() end end,
  function(n) for _ = 1, n do ref.ref_sum_f32(fa, N) end end, 200, 7)
out.sum1m_us, out.sum1m_c_us, out.sum1m_vs_c = t * 1e6, tc * 1e6, r

-- 1M-element float32 kernels with no C counterpart here: the fast exp, tanh
-- and erf (and what uses them) and the reductions, in microseconds
local unary = { "exp", "tanh", "sigmoid", "erf", "gelu", "silu", "relu", "sqrt" }
for _, op in ipairs(unary) do
  out[op .. "1m_us"] = B.time(function(n) for _ = 1, n do local _ = a[op](a) end end, 100, 7) * 1e6
end
out.mul1m_us = B.time(function(n) for _ = 1, n do local _ = a * b end end, 100, 7) * 1e6
out.max1m_us = B.time(function(n) for _ = 1, n do local _ = a:max() end end, 100, 7) * 1e6
local rows = a:reshape(1000, 1000)
out.softmax1m_us = B.time(function(n) for _ = 1, n do local _ = rows:softmax(2) end end, 100, 7) * 1e6
out.log_softmax1m_us = B.time(function(n) for _ = 1, n do local _ = rows:log_softmax(2) end end, 100, 7) * 1e6
out.sum_rows1m_us = B.time(function(n) for _ = 1, n do local _ = rows:sum(2) end end, 100, 7) * 1e6

-- 1024 x 1024 float32 matmul
local M = 1024
local x, y = ember.rand({ M, M }), ember.rand({ M, M })
local flops = 2 * M * M * M
local px, py = ffi.cast("float *", x:data_ptr()), ffi.cast("float *", y:data_ptr())
local pz = ffi.new("float[?]", M * M)
t, tc, r = B.time_pair(function(n) for _ = 1, n do local _ = x:matmul(y) end end,
  function(n)
    for _ = 1, n do blas.cblas_sgemm(101, 111, 111, M, M, M, 1, px, M, py, M, 0, pz, M) end
  end, 3, 9)
out.matmul1024_gflops = flops / t / 1e9
out.sgemm1024_gflops = flops / tc / 1e9
out.matmul_vs_sgemm = 1 / r   -- throughput ratio: ember's GFLOP/s over sgemm's

-- optimizer steps over 256K float32 parameters in four tensors (fused one-pass kernels)
local params = {}
for i = 1, 4 do
  local w = ember.randn({ 256, 256 })
  w.grad = ember.randn({ 256, 256 })
  params[i] = w
end
local sgd = ember.optim.SGD(params, { lr = 1e-3, momentum = 0.9 })
local adam = ember.optim.Adam(params, { lr = 1e-3 })
out.sgd_step_256k_us = B.time(function(n) for _ = 1, n do sgd:step() end end, 100, 7) * 1e6
out.adam_step_256k_us = B.time(function(n) for _ = 1, n do adam:step() end end, 100, 7) * 1e6

out.threads = ember.get_num_threads()
out.openblas_core = B.blas_core(ember)
print(B.json(out))
