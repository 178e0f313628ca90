-- The CUDA backend's load path (cuda/, core/src/device.c): t:cuda() names why
-- it cannot run (no backend library, no CUDA driver, no device) and leaves
-- the tensor usable; ember.cuda reports the same. On a machine with a GPU the
-- same cases check that a tensor goes to the device and back unchanged. The
-- backend loads once per process, so the cases that need another backend
-- path run in a child luajit.
local U = dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".")
  .. "/../cli/tests/spec_util.lua")
local ember = require("ember")
local cuda = require("ember.cuda")

local backend_built = U.exists(U.build_dir() .. "/libember_cuda.so")

-- runs `code` in a child luajit with ember from this tree and the given env
local function child(code, env)
  env = env or {}
  env.EMBER_LIB = U.build_dir() .. "/libember.so"
  local prelude = "package.path = " .. string.format("%q", U.root .. "/lua/?.lua;" .. U.root .. "/lua/?/init.lua;")
    .. " .. package.path; local ember = require('ember'); "
  return U.run({ "luajit", "-e", prelude .. code }, { env = env })
end

describe("ember.cuda", function()
  it("says whether CUDA can be used, and why not", function()
    local status = cuda.status()
    if cuda.is_available() then
      assert.are.equal("available", status)
      assert.is_true(cuda.device_count() > 0)
    elseif backend_built then
      assert.is_truthy(status:find("^no CUDA driver") or status:find("^no CUDA device"), status)
      assert.are.equal(0, cuda.device_count())
    else
      assert.matches("the CUDA backend could not be loaded", status, 1, true)
    end
  end)

  it("t:cuda() fails naming the device and the reason, and the tensor stays usable", function()
    local x = ember.tensor({ 1, 2, 3 })
    if cuda.is_available() then
      assert.are.same({ 1, 2, 3 }, x:cuda():cpu():tolist())
      local ok, err = pcall(function() return x:to("cuda:1") end)   -- cuda:0 only, for now
      assert.is_false(ok)
      assert.matches("device cuda:1 is not available: the CUDA backend drives 1 device(s)", err, 1, true)
      return
    end
    local ok, err = pcall(function() return x:cuda() end)
    assert.is_false(ok)
    assert.matches("cuda:0 is not available: " .. cuda.status(), err, 1, true)
    assert.are.equal(6, x:sum():item())
  end)

  it("memory_stats, empty_cache and synchronize name the reason when CUDA cannot be used", function()
    if cuda.is_available() then pending("only without a usable CUDA device") end
    for _, f in ipairs({ "memory_stats", "empty_cache", "synchronize" }) do
      local ok, err = pcall(cuda[f])
      assert.is_false(ok)
      assert.matches("ember.cuda." .. f .. ": device cuda:0 is not available: " .. cuda.status(), err, 1, true)
    end
    local ok, err = pcall(ember.memory_stats, "cuda")
    assert.is_false(ok)
    assert.matches("ember.cuda.memory_stats: device cuda:0 is not available", err, 1, true)
  end)

  it("ember.memory_stats takes cpu or cuda and names anything else", function()
    assert.is_number(ember.memory_stats("cpu").live_tensors)
    local ok, err = pcall(ember.memory_stats, "tpu")
    assert.is_false(ok)
    assert.matches('ember.memory_stats: expected nil, "cpu" or "cuda", got tpu', err, 1, true)
  end)

  it("names a backend library that cannot be opened", function()
    local r = child("print(select(2, pcall(function() return ember.ones({ 2 }):cuda() end)))",
      { EMBER_CUDA_BACKEND = "/nonexistent/libember_cuda.so" })
    assert.are.equal(0, r.rc, r.err)
    assert.matches("cuda:0 is not available: the CUDA backend could not be loaded "
      .. "(/nonexistent/libember_cuda.so: cannot open shared object file", r.out, 1, true)
  end)

  it("refuses a library that is not a CUDA backend", function()
    local r = child("print(require('ember.cuda').status())",
      { EMBER_CUDA_BACKEND = U.build_dir() .. "/libember_benchref.so" })
    assert.are.equal(0, r.rc, r.err)
    assert.matches("libember_benchref.so has no ember_cuda_backend_init", r.out, 1, true)
  end)
end)

describe("the CUDA caching allocator", function()
  if not cuda.is_available() then pending("needs a CUDA device [" .. cuda.status() .. "]") return end

  it("hands a freed block to the next request of its size class, without cudaMalloc", function()
    cuda.synchronize()
    collectgarbage()
    local x = ember.zeros({ 1000 }, { device = "cuda" })   -- 4000 bytes: the 4096-byte class
    local before = cuda.memory_stats()
    x:free()
    local after_free = cuda.memory_stats()
    assert.are.equal(before.bytes_in_use - 4096, after_free.bytes_in_use)
    assert.are.equal(before.bytes_cached + 4096, after_free.bytes_cached)
    local y = ember.ones({ 1010 }, { device = "cuda" })   -- 4040 bytes: the same class
    local again = cuda.memory_stats()
    assert.are.equal(before.device_allocs, again.device_allocs)
    assert.are.equal(after_free.cache_hits + 1, again.cache_hits)
    assert.are.equal(1010, y:cpu():sum():item())
    y:free()
    cuda.empty_cache()
    assert.are.equal(0, cuda.memory_stats().bytes_cached)
  end)
end)
