-- bench/tensorlib.lua: the tensor library's kernels and compositions, in ms
-- per call (medians of 7 rounds): cumsum and sort of 1000 x 1000 float32
-- along each dim, topk, prod, einsum against the bmm it becomes, and the
-- LAPACK ops on 256 x 256 float64. bench/tensorlib_torch.py times the same
-- calls in PyTorch. Run from the repository root after building:
--   luajit bench/tensorlib.lua
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local json = require("ember.json")
local out = { bench = "tensorlib", threads = ember.get_num_threads() }

local function ms(name, fn, iters) out[name] = B.ms_per_call(fn, iters or 5, 7) end

ember.manual_seed(0)
local x = ember.randn({ 1000, 1000 })
ms("cumsum_dim2_ms", function() return x:cumsum(2) end)
ms("cumsum_dim1_ms", function() return x:cumsum(1) end)
ms("sort_dim2_ms", function() return x:sort(2) end)
ms("sort_dim1_ms", function() return x:sort(1) end)
ms("topk10_dim2_ms", function() return x:topk(10) end)
ms("prod_dim2_ms", function() return x:prod(2) end)
local a, b = ember.randn({ 32, 64, 64 }), ember.randn({ 32, 64, 64 })
ms("einsum_bij_bjk_ms", function() return ember.einsum("bij,bjk->bik", a, b) end, 20)
ms("bmm_ms", function() return ember.bmm(a, b) end, 20)
local m = ember.randn({ 256, 256 }, { dtype = "float64" }) + ember.eye(256, 256, { dtype = "float64" }) * 16
local spd = m:matmul(m:t())
ms("inv_256_ms", function() return ember.linalg.inv(m) end)
ms("solve_256_ms", function() return ember.linalg.solve(m, spd) end)
ms("cholesky_256_ms", function() return ember.linalg.cholesky(spd) end)
ms("eigh_256_ms", function() return ember.linalg.eigh(spd) end)
ms("svd_256_ms", function() return ember.linalg.svd(m) end)
ms("qr_256_ms", function() return ember.linalg.qr(m) end)
print(json.encode(out))
