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

-- 4-element add through the whole Lua API
local a4, b4 = ember.rand({ 4 }), ember.rand({ 4 })
out.add4_us = B.time(function(n) for _ = 1, n do local _ = a4 + b4 end end, 1000000, 7) * 1e6
local pa, pb = ffi.cast("float *", a4:data_ptr()), ffi.cast("float *", b4:data_ptr())
local pc = ffi.new("float[4]")
out.add4_c_us = B.time(function(n) for _ = 1, n do ref.ref_add_f32(pa, pb, pc, 4) end end, 1000000, 7) * 1e6

-- 1M-element add and sum
local N = 1000000
local a, b = ember.rand({ N }), ember.rand({ N })
out.add1m_us = B.time(function(n) for _ = 1, n do local _ = a + b end end, 200, 7) * 1e6
local fa, fb = ffi.cast("float *", a:data_ptr()), ffi.cast("float *", b:data_ptr())
local fc = ffi.new("float[?]", N)
out.add1m_c_us = B.time(function(n) for _ = 1, n do ref.ref_add_f32(fa, fb, fc, N) end end, 200, 7) * 1e6
out.sum1m_us = B.time(function(n) for _ = 1, n do local _ = a:sum() end end, 200, 7) * 1e6
out.sum1m_c_us = B.time(function(n) for _ = 1, n do ref.ref_sum_f32(fa, N) end end, 200, 7) * 1e6

-- 1024 x 1024 float32 matmul
local M = 1024
local x, y = ember.rand({ M, M }), ember.rand({ M, M })
local flops = 2 * M * M * M
local t_mm = B.time(function(n) for _ = 1, n do local _ = x:matmul(y) end end, 5, 5)
local px, py = ffi.cast("float *", x:data_ptr()), ffi.cast("float *", y:data_ptr())
local pz = ffi.new("float[?]", M * M)
local t_blas = B.time(function(n)
  for _ = 1, n do blas.cblas_sgemm(101, 111, 111, M, M, M, 1, px, M, py, M, 0, pz, M) end
end, 5, 5)
out.matmul1024_gflops = flops / t_mm / 1e9
out.sgemm1024_gflops = flops / t_blas / 1e9

out.add4_vs_c = out.add4_us / out.add4_c_us
out.add1m_vs_c = out.add1m_us / out.add1m_c_us
out.sum1m_vs_c = out.sum1m_us / out.sum1m_c_us
out.matmul_vs_sgemm = out.matmul1024_gflops / out.sgemm1024_gflops
out.threads = ember.get_num_threads()
out.openblas_core = B.blas_core(ember)
print(B.json(out))
