-- ember.distributed: a world of one in this process, and 2 ranks under
-- mpirun (spec/support/dist_worker.lua checks each scenario on both ranks).
-- The 2-rank cases are pending when Open MPI or libember_dist is missing.
local H = require("helpers")
local ember = H.ember
local dist = ember.distributed

local function have_mpirun() return H.output("command -v mpirun 2>/dev/null") ~= "" end
local available, why = dist.is_available()
local missing = not have_mpirun() and "mpirun is not installed (scripts/setup.sh installs openmpi-bin)"
  or not available and ("libember_dist is not built: " .. tostring(why)) or nil

-- runs a scenario on 2 ranks; returns exit status, output, seconds
local function launch(scenario, limit)
  local t0 = os.time()
  local cmd = ("timeout -k 5 %d mpirun -np 2 --oversubscribe --allow-run-as-root "
    .. "--mca btl self,vader luajit spec/support/dist_worker.lua %s 2>&1; echo \"rc=$?\"")
    :format(limit or 120, scenario)
  local out = H.output(cmd)
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, out, os.time() - t0
end

local function passes(scenario)
  local rc, out = launch(scenario)
  assert(rc == 0, scenario .. " on 2 ranks exited with " .. tostring(rc) .. ":\n" .. out)
  assert(out:find("PASS " .. scenario .. " rank 0", 1, true) and out:find("PASS " .. scenario .. " rank 1", 1, true),
    out)
  return out
end

describe("ember.distributed in one process (a world of one)", function()
  it("has rank 0 of 1 and is idempotent to init", function()
    dist.init(); dist.init()
    assert.equal(0, dist.rank())
    assert.equal(1, dist.world_size())
    assert.equal(0, dist.local_rank())
    dist.barrier()
  end)
  it("reduces, broadcasts and gathers as the identity", function()
    local t = ember.tensor({ 1, 2, 3 }, { dtype = "float64" })
    assert.equal(t, dist.all_reduce(t, "mean"))
    H.same(t, { 1, 2, 3 }, 0)
    local i = ember.tensor({ 4, 5 }, { dtype = "int64" })
    H.same(dist.all_reduce(i, "max"), { 4, 5 }, 0)
    H.same(dist.broadcast(ember.tensor({ 7 }), 0), { 7 }, 0)
    local g = dist.all_gather(ember.tensor({ 1, 2 }))
    assert.equal(1, #g)
    H.same(g[1], { 1, 2 }, 0)
    local h = dist.all_reduce(ember.ones({ 2 }), "sum", { async = true })
    H.same(h:wait(), { 1, 1 }, 0)
  end)
  it("names the op in its errors", function()
    assert.has_error(function() dist.all_reduce(ember.ones({ 2 }, { dtype = "float16" }), "sum") end,
      "ember.distributed.all_reduce: MPI cannot reduce float16 tensors; convert with :float() first")
    assert.has_error(function() dist.all_reduce(ember.ones({ 2 }, { dtype = "int32" }), "mean") end,
      "ember.distributed.all_reduce: mean needs a float32 or float64 tensor, got int32")
    assert.has_error(function() dist.broadcast(ember.ones({ 2 }), 1) end,
      "ember.distributed.broadcast: root 1 is not a rank of a world of 1")
    assert.has_error(function() dist.make_allreduce_cb("max") end,
      "ember.distributed.make_allreduce_cb: op must be 'sum' or 'mean', got max")
  end)
  it("make_allreduce_cb leaves .grad as the local gradient, registered as a flush hook", function()
    local w = ember.tensor({ 1, 2 }, { dtype = "float64" })
    local gm = ember.autodiff.GradManager():attach({ w }, dist.make_allreduce_cb("mean", { bucket_mb = 1e-6 }))
    gm:record()
    gm:backward((w * w):sum())
    gm:release()
    H.same(w.grad, { 2, 4 }, 0)
    assert.equal(1, #gm._flush)
  end)
  it("a distributed DataLoader of one rank is the plain loader", function()
    local x = ember.arange(1, 11, 1, { dtype = "int64" })
    local ds = ember.data.TensorDataset(x, x)
    local a = ember.data.DataLoader(ds, { batch_size = 3, shuffle = true, seed = 3, distributed = true })
    local b = ember.data.DataLoader(ds, { batch_size = 3, shuffle = true, seed = 3 })
    assert.equal(b:size(), a:size())
    local ia, ib = a:iter(), b:iter()
    for _ = 1, b:size() do H.same(ia(), ib():tolist(), 0) end
  end)
end)

describe("ember.distributed on 2 ranks (mpirun)", function()
  if missing then
    it("needs Open MPI", function() pending(missing) end)
    return
  end
  it("all_reduce sum/mean/max/min on float32, float64 and integer tensors, non-contiguous ones, "
    .. "broadcast, all_gather, non-blocking handles, barrier", function()
    passes("ops")
  end)
  it("bucketed gradients equal one process's on the union batch (float64 1e-12, mixed dtypes, "
    .. "a cap below one gradient, a partial last bucket, sum and mean)", function()
    passes("grads")
  end)
  it("20 SGD steps leave the ranks' parameters identical to the bit", function()
    passes("sgd")
  end)
  it("a distributed DataLoader gives disjoint shards of the same shuffle that cover the epoch", function()
    passes("loader")
  end)
  it("ranks that attach different parameters get an error naming the mismatch, not a deadlock", function()
    local out = passes("mismatch")
    assert.truthy(out:find("attach different gradients", 1, true))
  end)
  it("where no rank has a GPU, NCCL's start fails on every rank with the reason and MPI stays in step", function()
    local ok, why = dist.is_nccl_available()
    if ok or not why:find("^no CUDA device") then
      pending("needs libember_nccl and no CUDA device: " .. (why or "NCCL is available"))
      return
    end
    passes("nccl_start")
  end)
  it("a rank raising an uncaught error ends the job non-zero within seconds", function()
    local rc, out, secs = launch("crash", 60)
    assert.truthy(rc ~= 0 and rc ~= 124, "exit status " .. tostring(rc) .. ":\n" .. out)
    assert.truthy(out:find("rank 1 fails on purpose", 1, true), out)
    assert.truthy(secs <= 15, "took " .. secs .. " s")
    assert.falsy(out:find("got past an all-reduce", 1, true))
  end)
end)
