-- bench/autograd.lua: the cost of recording, of a tiny forward + backward, and
-- the peak memory of forward + backward through a 100-layer MLP against the
-- bytes that must be kept (parameters + the activations backward needs).
-- Run from the repository root after building: luajit bench/autograd.lua
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local GradManager = ember.autodiff.GradManager
local out = {}

-- recording: a 4-element mul on a tracked tensor (released every 100 ops so
-- the tape stays in cache, as in a training step)
local x, c = ember.rand({ 4 }), ember.rand({ 4 })
local gm = GradManager():attach(x)
out.record_mul4_us = B.time(function(n)
  for _ = 1, n / 100 do
    gm:record()
    for _ = 1, 100 do local _ = x * c end
    gm:release()
  end
end, 200000, 7) * 1e6
out.untracked_mul4_us = B.time(function(n) for _ = 1, n do local _ = x * c end end, 200000, 7) * 1e6

-- tiny forward + backward: y = ((a * b) + a):sum()
local a, b = ember.rand({ 4 }), ember.rand({ 4 })
local gm2 = GradManager():attach({ a, b })
out.tiny_fwd_bwd_us = B.time(function(n)
  for _ = 1, n do
    gm2:record()
    gm2:backward(((a * b) + a):sum())
  end
end, 20000, 7) * 1e6

-- peak memory of a 100-layer MLP (width 512, batch 64, tanh)
local L, W, N = 100, 512, 64
local ws = {}
for i = 1, L do ws[i] = ember.randn({ W, W }) * (1 / math.sqrt(W)) end
local input = ember.randn({ N, W })
local gm3 = GradManager():attach(ws)
collectgarbage(); collectgarbage(); ember._sweep()
ember.reset_peak_memory()
local base = ember.memory_stats().bytes_in_use
gm3:record()
local h = input
for i = 1, L do h = h:matmul(ws[i]):tanh() end
gm3:backward(h:sum())
h = nil
local peak = ember.memory_stats().peak_bytes
local param_bytes = L * W * W * 4
-- what must exist at the end of backward: the parameters, the activations
-- backward keeps (per layer, the matmul's input (N x W) and tanh's output
-- (N x W), freed as backward passes them) and the gradients it produces (one
-- per parameter; they reach .grad when backward completes)
local act_bytes = L * 2 * N * W * 4
local must_keep = param_bytes + act_bytes + param_bytes + N * W * 4
out.mlp100_peak_mb = peak / 2 ^ 20
out.mlp100_must_keep_mb = must_keep / 2 ^ 20
out.mlp100_peak_ratio = peak / must_keep
out.mlp100_base_mb = base / 2 ^ 20
print(B.json(out))
