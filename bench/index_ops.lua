-- bench/index_ops.lua: the indexing kernels (core/src/ops/index.c), ms per
-- call (medians of 7 rounds): gather of a 4096 x 1024 float32 tensor along
-- each dim (int64 and int32 indices) and of one label per row (as
-- cross-entropy picks), index_select of rows and of columns, an embedding's
-- forward and backward (index_select, then index_add into the weight's
-- gradient), and scatter_add along each dim. bench/index_ops_torch.py times
-- the same calls in PyTorch.
-- EMBER_LIB=path/libember.so times another build. From the repository root:
--   luajit bench/index_ops.lua
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional
local out = { bench = "index_ops", threads = ember.get_num_threads() }

local function ms(name, fn, iters) out[name] = B.ms_per_call(fn, iters or 5, 7) end

ember.manual_seed(0)
local x = ember.randn({ 4096, 1024 })
local i2 = ember.randint(1, 1025, { 4096, 1024 }, { dtype = "int64" })
local i1 = ember.randint(1, 4097, { 4096, 1024 }, { dtype = "int64" })
ms("gather_dim2_ms", function() return x:gather(2, i2) end)
ms("gather_dim1_ms", function() return x:gather(1, i1) end)
local i2_32 = i2:to("int32")
ms("gather_dim2_int32_ms", function() return x:gather(2, i2_32) end)
local logits = ember.randn({ 4096, 1000 })
local labels = ember.randint(1, 1001, { 4096, 1 }, { dtype = "int64" })
ms("gather_labels_ms", function() return logits:gather(2, labels) end, 50)
local w = ember.randn({ 30000, 256 })
local rows = ember.randint(1, 30001, { 4096 }, { dtype = "int64" })
ms("index_select_rows_ms", function() return w:index_select(1, rows) end)
local cols = ember.randint(1, 1025, { 1024 }, { dtype = "int64" })
ms("index_select_cols_ms", function() return x:index_select(2, cols) end)
local tok = ember.randint(1, 30001, { 32, 128 }, { dtype = "int64" })
ms("embedding_fwd_ms", function() return F.embedding(tok, w) end)
local gm = ember.autodiff.GradManager():attach({ w })
ms("embedding_fwd_bwd_ms", function()
  gm:record()
  gm:backward(F.embedding(tok, w):sum())
  w.grad = nil
end)
local base = ember.zeros({ 4096, 1024 })
ms("scatter_add_dim2_ms", function() return base:scatter_add(2, i2, x) end)
ms("scatter_add_dim1_ms", function() return base:scatter_add(1, i1, x) end)
print(B.json(out))
