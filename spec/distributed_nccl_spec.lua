-- ember.distributed on CUDA tensors (NCCL, docs/distributed.md). Without a
-- GPU this checks the load path and its messages; the cases that need one
-- report pending with NCCL's reason. On a machine with one GPU the file runs
-- unchanged as a world of one (plain busted, or under mpirun -np 1).
local H = require("helpers")
local ember = H.ember
local dist = ember.distributed

local nccl_ok, nccl_why = dist.is_nccl_available()

-- it() when NCCL and a device can be used, else pending() with the reason
local function gpu_case(name, fn)
  if nccl_ok then it(name, fn) else pending(name .. " [" .. nccl_why .. "]") end
end

local function beside_libember(name)
  local f = io.open(ember._libpath:match("^(.*)/[^/]*$") .. "/" .. name, "rb")
  if f then f:close() end
  return f ~= nil
end

-- runs a Lua chunk in a fresh luajit with env set; returns its output
local function run_lua(env, code)
  return H.output(("%s luajit -e %q 2>&1"):format(env,
    "package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path; " .. code))
end

describe("ember.distributed with NCCL: without a GPU", function()
  it("says why CUDA tensors cannot be reduced here", function()
    if nccl_ok then
      assert.is_nil(nccl_why)
    elseif not beside_libember("libember_nccl.so") then
      assert.matches("libember_nccl.so not found", nccl_why, 1, true)
    else
      assert.is_false(ember.cuda.is_available())
      assert.equal("no CUDA device: " .. ember.cuda.status(), nccl_why)
    end
  end)

  it("says so in a build without NCCL", function()
    -- libember alone in a folder: what a build that found no NCCL installs
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute(("mkdir -p %s && ln -s \"$(readlink -f %s)\" %s/libember.so"):format(dir, ember._libpath, dir)) == 0)
    local out = run_lua("EMBER_LIB=" .. dir .. "/libember.so",
      "local ok, why = require('ember').distributed.is_nccl_available(); print(ok, why)")
    os.execute("rm -rf " .. dir)
    assert.matches("false\tlibember_nccl.so not found (this build found no NCCL beside the CUDA Toolkit)", out, 1, true)
  end)

  -- the start of the communicator, reached as a collective reaches it
  local no_device = not nccl_ok and beside_libember("libember_nccl.so") and it
    or function(name) pending(name .. " [needs libember_nccl and no CUDA device]") end
  no_device("a failed start names the op, says why, and leaves the process usable", function()
    local T = dist._nccl()
    local h = require("ffi").new("int[1]")
    local why = "NCCL could not start: cudaGetDeviceCount: "
    local ok, err = pcall(T.all_reduce, ember.zeros({ 2 }), "sum", h)
    assert.is_false(ok)
    assert.matches("ember.distributed.all_reduce: " .. why, err, 1, true)
    ok, err = pcall(T.broadcast, ember.zeros({ 2 }), 0, h)
    assert.matches("ember.distributed.broadcast: " .. why, err, 1, true)
    H.same(dist.all_reduce(ember.tensor({ 3 }), "max"), { 3 }, 0)
  end)

  it("leaves CPU tensors to MPI, with MPI's messages", function()
    H.same(dist.all_reduce(ember.tensor({ 1, 2 }), "sum"), { 1, 2 }, 0)
    assert.has_error(function() dist.all_reduce(ember.tensor({ 1 }, { dtype = "float16" })) end,
      "ember.distributed.all_reduce: MPI cannot reduce float16 tensors; convert with :float() first")
  end)
end)

describe("ember.distributed with NCCL: a world of one on the GPU", function()
  local DTYPES = { "float32", "float64", "float16", "bfloat16", "int32", "int64" }
  local function values(dtype)
    return ember.tensor({ { 1, -2, 3 }, { 4, 5, -6 } }, { dtype = dtype })
  end

  gpu_case("all_reduce sum, mean, max and min in place on every dtype NCCL carries", function()
    for _, dt in ipairs(DTYPES) do
      for _, op in ipairs({ "sum", "mean", "max", "min" }) do
        if op ~= "mean" or not dt:match("^int") then
          local t = values(dt):cuda()
          assert.equal(t, dist.all_reduce(t, op))
          assert.equal("cuda:0", t.device)
          assert.equal(dt, t.dtype)
          H.same(t:cpu():double(), { { 1, -2, 3 }, { 4, 5, -6 } }, 0)
        end
      end
    end
  end)

  gpu_case("takes empty tensors (no collective is made for them)", function()
    local e = ember.zeros({ 0, 3 }):cuda()
    assert.equal(e, dist.all_reduce(e, "sum"))
    assert.equal(e, dist.broadcast(e, 0))
    assert.same({ 0, 3 }, dist.all_gather(e)[1]:shape())
  end)

  gpu_case("reduces a strided view through a contiguous copy, in place", function()
    local base = ember.arange(12, { dtype = "float32" }):reshape({ 3, 4 }):cuda()
    local col = base:transpose(1, 2)
    dist.all_reduce(col, "sum")
    H.same(base:cpu(), ember.arange(12, { dtype = "float32" }):reshape({ 3, 4 }), 0)
  end)

  gpu_case("broadcast and all_gather", function()
    local t = values("float64"):cuda()
    assert.equal(t, dist.broadcast(t, 0))
    H.same(t:cpu(), values("float64"), 0)
    local g = dist.all_gather(values("int64"):cuda())
    assert.equal(1, #g)
    assert.equal("cuda:0", g[1].device)
    H.same(g[1]:cpu(), values("int64"), 0)
  end)

  gpu_case("non-blocking forms return a handle whose wait() waits for the event", function()
    local t = values("float32"):cuda()
    local h = dist.all_reduce(t, "sum", { async = true })
    assert.equal(t, h:wait())
    assert.is_true(h:is_completed())
    local y = t * 2   -- queued after the collective on the same stream
    H.same(y:cpu(), { { 2, -4, 6 }, { 8, 10, -12 } }, 0)
    local hb = dist.broadcast(t, 0, { async = true })
    while not hb:is_completed() do end
    H.same(hb:wait():cpu(), values("float32"), 0)
  end)

  gpu_case("refuses the dtypes NCCL does not carry here, by name", function()
    assert.has_error(function() dist.all_reduce(ember.tensor({ 1, 2 }, { dtype = "uint8" }):cuda(), "max") end,
      "ember.distributed.all_reduce: NCCL does not carry uint8 tensors here (float32, float64, float16, "
      .. "bfloat16, int32 and int64 only); convert with :to(\"float32\") or :to(\"int32\") first")
    assert.has_error(function() dist.all_reduce(values("int32"):cuda(), "mean") end,
      "ember.distributed.all_reduce: mean needs a float32, float64, float16 or bfloat16 tensor, got int32")
    -- and stays usable
    H.same(dist.all_reduce(values("float32"):cuda()):cpu(), values("float32"), 0)
  end)

  gpu_case("make_allreduce_cb gives device gradients equal to the CPU's", function()
    local function grads(device)
      ember.manual_seed(7)
      local m = ember.nn.Linear(4, 3, { dtype = "float64" })
      local x = ember.randn({ 5, 4 }, { dtype = "float64" })
      if device ~= "cpu" then m:to(device); x = x:to(device) end
      local gm = ember.autodiff.GradManager():attach(m:parameters(), dist.make_allreduce_cb("mean"))
      gm:record()
      gm:backward((m(x) ^ 2):sum())
      local out = {}
      for i, p in ipairs(m:parameters()) do out[i] = p.grad end
      return out
    end
    local want, got = grads("cpu"), grads("cuda")
    for i = 1, #want do
      assert.equal("cuda:0", got[i].device)
      assert.is_true((got[i]:cpu() - want[i]):abs():max():item() <= 1e-12)
    end
  end)
end)
