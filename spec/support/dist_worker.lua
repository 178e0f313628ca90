-- One rank of spec/distributed_spec.lua, started by mpirun:
--   mpirun -np 2 luajit spec/support/dist_worker.lua <scenario>
-- Each scenario checks its results itself (an error fails the rank, so the
-- job exits non-zero) and prints "PASS <scenario> rank <r>" at the end.
package.path = "./lua/?.lua;./lua/?/init.lua;./spec/?.lua;" .. package.path
local ember = require("ember")
local nn = ember.nn
local dist = ember.distributed
dist.init()
dist.init()   -- a second call is harmless
local R, W = dist.rank(), dist.world_size()
assert(W == 2, "the scenarios are written for 2 ranks, got " .. W)
assert(dist.local_rank() == R, "both ranks run on this machine")
local scenario = arg[1]

local function maxdiff(a, b)
  return (a:double() - b:double()):abs():max():item()
end

-- a deterministic union batch of 2 * per rows; rank r takes rows r*per+1..
local function union_batch(per, nin, dtype)
  ember.manual_seed(1234)
  local x = ember.randn({ 2 * per, nin }, { dtype = dtype })
  local y = ember.randn({ 2 * per, 3 }, { dtype = dtype })
  return x, y, x:narrow(1, R * per + 1, per), y:narrow(1, R * per + 1, per)
end

-- A float64 model and a float32 model side by side (mixed dtypes), from a
-- seed; rank 1 then scrambles its copy so broadcast_parameters has work.
local function models()
  ember.manual_seed(42)
  local m64 = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)):to("float64")
  local m32 = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3))
  return m64, m32
end

local function params(m64, m32)
  local list = {}
  for _, p in ipairs(m64:parameters()) do list[#list + 1] = p end
  for _, p in ipairs(m32:parameters()) do list[#list + 1] = p end
  return list
end

local function loss_of(m64, m32, x64, y64)
  local l64 = ((m64(x64) - y64) ^ 2):mean()
  local l32 = ((m32(x64:float()) - y64:float()) ^ 2):mean()
  return l64 + l32:double()
end

local function grads_once(op, bucket_mb)
  local m64, m32 = models()
  if R == 1 then for _, p in ipairs(params(m64, m32)) do ember.no_grad(function() p:add_(1) end) end end
  dist.broadcast_parameters(m64, 0)
  dist.broadcast_parameters(m32:parameters(), 0)
  -- the reference: one process, no communication, on the union batch
  local xa, ya, xr, yr = union_batch(4, 5, "float64")
  local ref = {}
  do
    local gm = ember.autodiff.GradManager()
    local ps = params(m64, m32)
    gm:attach(ps)
    gm:record()
    local l = loss_of(m64, m32, xa, ya)
    if op == "sum" then l = l * 2 end   -- the sum of two half-batch means
    gm:backward(l)
    gm:release()
    for i, p in ipairs(ps) do ref[i] = p.grad:clone(); p.grad = nil end
  end
  local gm = ember.autodiff.GradManager()
  local cb = dist.make_allreduce_cb(op, { bucket_mb = bucket_mb })
  local ps = params(m64, m32)
  gm:attach(ps, cb)
  gm:record()
  gm:backward(loss_of(m64, m32, xr, yr))
  gm:release()
  for i, p in ipairs(ps) do
    local tol = p.dtype == "float64" and 1e-12 or 1e-6
    local d = maxdiff(p.grad, ref[i])
    assert(d <= tol * (1 + ref[i]:abs():max():item()),
      ("%s, bucket_mb %g: parameter %d (%s) differs from the single process by %g"):format(op, bucket_mb, i, p.dtype, d))
  end
  return cb
end

local S = {}

function S.grads()
  -- in backward order, float64 gradients of 3, 21, 7, 35 elements (24, 168, 56,
  -- 280 bytes) and float32 ones of 3, 12, 4, 20 (12, 48, 16, 80 bytes)
  local tiny = grads_once("mean", 1e-6)           -- a cap smaller than any one gradient
  assert(tiny.stats.buckets == 8, "one bucket per gradient, got " .. tiny.stats.buckets)
  -- 200 bytes: float64 {3, 21, 7} and {35} are full, float32's one bucket is
  -- partial and goes out at the flush
  local mid = grads_once("mean", 200 / 2 ^ 20)
  assert(mid.stats.buckets == 3, "got " .. mid.stats.buckets .. " buckets")
  local one = grads_once("mean", 25)               -- everything in the last partial buckets
  assert(one.stats.buckets == 2, "one bucket per dtype, got " .. one.stats.buckets)
  grads_once("sum", 1e-3)
end

function S.sgd()
  local m64, m32 = models()
  if R == 1 then for _, p in ipairs(params(m64, m32)) do ember.no_grad(function() p:mul_(-3) end) end end
  local ps = params(m64, m32)
  dist.broadcast_parameters(ps, 0)
  local start = {}
  for i, p in ipairs(ps) do start[i] = p:clone() end
  local opt = ember.optim.SGD(ps, { lr = 0.1, momentum = 0.9 })
  local gm = ember.autodiff.GradManager():attach(ps, dist.make_allreduce_cb("mean", { bucket_mb = 300 / 2 ^ 20 }))
  ember.manual_seed(100 + R)   -- different data on every rank
  for _ = 1, 20 do
    local x, y = ember.randn({ 6, 5 }, { dtype = "float64" }), ember.randn({ 6, 3 }, { dtype = "float64" })
    gm:record()
    gm:backward(loss_of(m64, m32, x, y))
    gm:release()
    opt:step()
    opt:zero_grad()
  end
  for i, p in ipairs(ps) do
    local all = dist.all_gather(p)
    assert(maxdiff(all[1], all[2]) == 0, "parameter " .. i .. " differs between the ranks after 20 steps")
    assert(maxdiff(p, start[i]) > 0, "parameter " .. i .. " did not move")
  end
end

function S.mismatch()
  local m64, m32 = models()
  local ps = params(m64, m32)
  if R == 1 then ps[#ps] = nil end   -- rank 1 leaves the last float32 bias out
  local gm = ember.autodiff.GradManager():attach(ps, dist.make_allreduce_cb("mean", { bucket_mb = 25 }))
  local x, y = ember.randn({ 4, 5 }, { dtype = "float64" }), ember.randn({ 4, 3 }, { dtype = "float64" })
  gm:record()
  local ok, err = pcall(gm.backward, gm, loss_of(m64, m32, x, y))
  gm:release()
  assert(not ok, "a mismatch went unnoticed")
  assert(tostring(err):find("attach different gradients", 1, true), "unexpected error: " .. tostring(err))
  print("rank " .. R .. ": " .. tostring(err))
end

function S.crash()
  if R == 1 then error("rank 1 fails on purpose") end
  dist.all_reduce(ember.ones({ 3 }), "sum")   -- never completes
  error("rank 0 got past an all-reduce its peer never joined")
end

function S.ops()
  local t = ember.tensor({ 1, 2, 3 }, { dtype = "float64" }) * (R + 1)
  dist.all_reduce(t, "sum")
  assert(maxdiff(t, ember.tensor({ 3, 6, 9 })) == 0)
  -- a transposed (non-contiguous) float32 tensor: mean, copied in and out
  local m = (ember.tensor({ { 1, 2 }, { 3, 4 } }) * (R + 1)):t()
  assert(not m:is_contiguous())
  dist.all_reduce(m, "mean")
  assert(maxdiff(m, ember.tensor({ { 1.5, 4.5 }, { 3, 6 } })) == 0)
  for _, dt in ipairs({ "int32", "int64", "uint8" }) do
    local a = ember.tensor({ 5, R, 7 * R }, { dtype = dt })
    local mx, mn, sm = a:clone(), a:clone(), a:clone()
    dist.all_reduce(mx, "max"); dist.all_reduce(mn, "min"); dist.all_reduce(sm, "sum")
    assert(mx.dtype == dt)
    assert(table.concat(mx:tolist(), " ") == "5 1 7", dt .. " max " .. table.concat(mx:tolist(), " "))
    assert(table.concat(mn:tolist(), " ") == "5 0 0", dt .. " min")
    assert(table.concat(sm:tolist(), " ") == "10 1 7", dt .. " sum")
  end
  local ok, err = pcall(dist.all_reduce, ember.ones({ 2 }, { dtype = "int32" }), "mean")
  assert(not ok and err:find("all_reduce: mean needs a float32 or float64 tensor, got int32", 1, true), err)
  ok, err = pcall(dist.all_reduce, ember.ones({ 2 }, { dtype = "float16" }), "sum")
  assert(not ok and err:find("all_reduce: MPI cannot reduce float16", 1, true), err)
  ok, err = pcall(dist.all_reduce, ember.ones({ 2 }), "prod")
  assert(not ok and err:find("unknown op 'prod'", 1, true), err)
  -- broadcast from rank 1 into a strided column
  local b = ember.tensor({ { 10 * R, 1 }, { 20 * R, 2 } })
  dist.broadcast(b:select(2, 1), 1)
  assert(maxdiff(b, ember.tensor({ { 10, 1 }, { 20, 2 } })) == 0)
  ok, err = pcall(dist.broadcast, b, 2)
  assert(not ok and err:find("root 2 is not a rank of a world of 2", 1, true), err)
  -- all_gather
  local g = dist.all_gather(ember.tensor({ R, R + 10 }, { dtype = "int64" }))
  assert(#g == 2 and table.concat(g[1]:tolist(), " ") == "0 10" and table.concat(g[2]:tolist(), " ") == "1 11")
  -- the non-blocking forms, several in flight at once
  local hs, ts = {}, {}
  for k = 1, 4 do
    ts[k] = ember.full({ 1000 }, k * (R + 1), { dtype = "float64" })
    hs[k] = dist.all_reduce(ts[k], k % 2 == 0 and "mean" or "sum", { async = true })
  end
  local hb = dist.broadcast(ember.full({ 3 }, R), 0, { async = true })
  local hg = dist.all_gather(ember.full({ 2 }, R + 5), { async = true })
  for k = 4, 1, -1 do
    local want = k % 2 == 0 and k * 1.5 or k * 3
    assert(hs[k]:wait() == ts[k] and ts[k]:min():item() == want and ts[k]:max():item() == want)
  end
  assert(hb:wait():sum():item() == 0)
  local gl = hg:wait()
  assert(gl[1]:sum():item() == 10 and gl[2]:sum():item() == 12)
  dist.barrier()
end

function S.loader()
  local n, bs = 23, 3
  local x = ember.arange(1, n + 1, 1, { dtype = "int64" })
  local ds = ember.data.TensorDataset(x, x)
  local dl = ember.data.DataLoader(ds, { batch_size = bs, shuffle = true, distributed = true,
    seed = R == 0 and 7 or nil })   -- rank 1 has no seed of its own: rank 0's is taken
  ember.manual_seed(5 + R)
  local ref = ember.data.DataLoader(ds, { batch_size = bs, shuffle = true, seed = 7 })
  for epoch = 1, 2 do
    local mine, count = {}, 0
    for xb in dl:iter() do
      count = count + 1
      assert(xb:numel() >= 1)
      for _, v in ipairs(xb:tolist()) do mine[#mine + 1] = v end
    end
    assert(count == dl:size(), "batches " .. count .. " vs size " .. dl:size())
    -- every rank the same number of batches
    local c = dist.all_gather(ember.tensor({ count }, { dtype = "int64" }))
    assert(c[1]:item() == c[2]:item())
    -- shards: pad to n with 0 and gather
    local pad = {}
    for i = 1, n do pad[i] = mine[i] or 0 end
    local padded = ember.tensor(pad, { dtype = "int64" })
    local all = dist.all_gather(padded)
    local seen = {}
    for r = 1, 2 do
      for _, v in ipairs(all[r]:tolist()) do
        if v ~= 0 then
          assert(not seen[v], "sample " .. v .. " on two ranks (epoch " .. epoch .. ")")
          seen[v] = r
        end
      end
    end
    for v = 1, n do assert(seen[v], "sample " .. v .. " on no rank (epoch " .. epoch .. ")") end
    -- the union, batch by batch, is the single loader's epoch order
    local order = {}
    for xb in ref:iter() do for _, v in ipairs(xb:tolist()) do order[#order + 1] = v end end
    local pos = {}
    for i, v in ipairs(order) do pos[v] = i end
    local last = 0
    for _, v in ipairs(mine) do
      assert(pos[v] > last, "this rank's samples are not in the epoch's order")
      last = pos[v]
    end
  end
end

-- NCCL's start where no rank has a GPU: every rank learns over MPI that
-- NCCL cannot start and raises with its reason; MPI stays in step after it
function S.nccl_start()
  local T = dist._nccl()
  local h = require("ffi").new("int[1]")
  local ok, err = pcall(T.all_reduce, ember.zeros({ 2 }), "sum", h)
  assert(not ok and err:find("ember.distributed.all_reduce: NCCL could not start: cudaGetDeviceCount: ", 1, true), err)
  ok, err = pcall(T.broadcast, ember.zeros({ 2 }), 0, h)   -- said again, without a second exchange
  assert(not ok and err:find("ember.distributed.broadcast: NCCL could not start: cudaGetDeviceCount: ", 1, true), err)
  assert(dist.all_reduce(ember.tensor({ R + 1 }), "sum"):item() == 3)
  local gm = ember.autodiff.GradManager()
  local w = ember.tensor({ 1, 2 }, { dtype = "float64" }) * (R + 1)
  gm:attach({ w }, dist.make_allreduce_cb("sum"))
  gm:record()
  gm:backward((w * w):sum())
  assert(maxdiff(w.grad, ember.tensor({ 6, 12 })) == 0)
end

S[scenario]()
io.stdout:write("PASS " .. scenario .. " rank " .. R .. "\n")
io.stdout:flush()
