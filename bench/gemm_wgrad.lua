-- bench/gemm_wgrad.lua: a linear layer's weight-gradient product against
-- its forward at the same multiply-adds, at the MLP recipe's shapes (batch
-- 128: 784 -> 256 and 256 -> 128) and the CNN recipe's classifier (batch 64,
-- 1568 -> 10), in the formulations reachable through matmul, timed in
-- alternation round by round:
--   fwd        linear(x, w): x w^T, the forward (the reference time)
--   wgrad      matmul(dy:t(), x): dW = dy^T x, as the autograd rule runs it
--              (A read transposed, gemm.c's route: oneDNN, AVX-512 loops
--              or OpenBLAS by its policy)
--   wgrad_t    matmul(x:t(), dy):t():contiguous(): the transposed problem
--              dW^T = x^T dy, then the copy into dW's layout
--   wgrad_blas the wgrad with set_dnnl_matmul_enabled(false): OpenBLAS
-- Times are of the calling thread's CPU (CLOCK_THREAD_CPUTIME_ID), the
-- lower quartile of the rounds: on a loaded machine wall time mostly
-- measures the neighbours, and with 1 thread (the default here) the product
-- runs on the calling thread alone. Each result is freed at once, so its
-- block comes back from the allocator's cache (as a plan's arena gives
-- it); left to the collector, the 800 KB results pile up and each call
-- faults in fresh pages (100 us of the 128x784x256 product). Prints one JSON line a shape, in
-- microseconds, with each formulation's bits checked against wgrad's.
--   luajit bench/gemm_wgrad.lua [rounds [threads]]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local ffi = require("ffi")

local rounds = tonumber(arg and arg[1]) or 15
ember.set_num_threads(tonumber(arg and arg[2]) or 1)
local ts = ffi.new("struct ember_timespec")
local function cpu()
  ffi.C.clock_gettime(3, ts)   -- CLOCK_THREAD_CPUTIME_ID
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local function lower_quartile(t)
  table.sort(t)
  return t[math.ceil(#t / 4)]
end

local dnnl_before = ember.dnnl_matmul_enabled()
for _, sh in ipairs({ { 128, 784, 256 }, { 128, 256, 128 }, { 64, 1568, 10 } }) do
  local n, din, dout = sh[1], sh[2], sh[3]
  ember.manual_seed(0)
  local x, dy, w = ember.randn({ n, din }), ember.randn({ n, dout }), ember.randn({ dout, din })
  local ways = {
    { "fwd", function() return ember.nn.functional.linear(x, w) end },
    { "wgrad", function() return ember.matmul(dy:t(), x) end },
    { "wgrad_t", function() return ember.matmul(x:t(), dy):t():contiguous() end },
    { "wgrad_blas", function()
      ember.set_dnnl_matmul_enabled(false)
      local r = ember.matmul(dy:t(), x)
      ember.set_dnnl_matmul_enabled(dnnl_before)
      return r
    end },
  }
  local ref = ember.matmul(dy:t(), x)
  local times, same = {}, {}
  for _, way in ipairs(ways) do
    times[way[1]] = {}
    if way[1] ~= "fwd" then same[way[1]] = ember.equal(way[2](), ref) end
  end
  local iters = 20
  for r = 1, rounds do
    for _, way in ipairs(ways) do
      local f = way[2]
      f():free()
      local t0 = cpu()
      for _ = 1, iters do f():free() end   -- each result's block back to the cache at once
      times[way[1]][r] = (cpu() - t0) / iters * 1e6
    end
  end
  local out = { bench = "gemm_wgrad", shape = ("x %dx%d, dy %dx%d"):format(n, din, n, dout),
    threads = ember.get_num_threads(), openblas_core = B.blas_core(ember) }
  for _, way in ipairs(ways) do out[way[1] .. "_us"] = lower_quartile(times[way[1]]) end
  out.wgrad_vs_fwd = out.wgrad_us / out.fwd_us
  for k, v in pairs(same) do out[k .. "_same_bits"] = v end
  print(B.json(out))
end
