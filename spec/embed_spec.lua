-- Embedding (examples/embed/, cli/include/ember_lua.h): the example
-- hosts, the C test of the embedding API, and hosts given bad input (a
-- missing or failing Lua file, a second copy of libember, a checkpoint that
-- lacks a layer). Runs the programs
-- built under build/ (or $EMBER_BUILD_DIR).
local U = dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".")
  .. "/../cli/tests/spec_util.lua")

local function losses(out)
  local list = {}
  for v in out:gmatch("frame%s+%d+%s+loss%s+([%d.]+)") do list[#list + 1] = tonumber(v) end
  return list
end

describe("a pure C host (no Lua)", function()
  local bin, missing = U.built("examples/embed/pure_c_mlp")
  if not bin then pending(missing) return end

  it("runs forward and backward of an MLP and matches finite differences", function()
    local r = U.run({ bin })
    assert.are.equal(0, r.rc, r.out .. r.err)
    assert.matches("match finite differences", r.out, 1, true)
    assert.matches("matmul(NULL, x): status -1", r.out, 1, true)
    assert.matches("OK\n$", r.out)
  end)
end)

describe("a C host driving a Lua model", function()
  local bin, missing = U.built("examples/embed/game_loop")
  if not bin then pending(missing) return end
  local regressor = U.root .. "/examples/embed/regressor.lua"
  -- the host run on a Lua model file whose text is source
  local function run_model(source)
    local dir = U.tmpdir()
    U.write(dir .. "/model.lua", source)
    local r = U.run({ bin, dir .. "/model.lua" })
    U.rm_rf(dir)
    return r
  end

  it("trains frame by frame on a zero-copy frame buffer, and the loss falls", function()
    local r = U.run({ bin, regressor, "300" })
    assert.are.equal(0, r.rc, r.out .. r.err)
    local l = losses(r.out)
    assert.is_true(#l >= 5, r.out)
    assert.is_true(l[#l] < l[1] * 0.5, r.out)
    assert.matches("predict%(0%.5%) = [%d.-]+", r.out)
    assert.matches("OK\n$", r.out)
  end)

  it("reports a missing Lua file", function()
    local r = U.run({ bin, "/nonexistent/model.lua" })
    assert.are.equal(1, r.rc)
    assert.matches("cannot open /nonexistent/model.lua", r.err, 1, true)
  end)

  it("reports an error inside the Lua model with its traceback", function()
    local r = run_model("function step(frame)\n  return frame:matmul(frame)\nend\n")
    assert.are.equal(1, r.rc)
    assert.matches("frame 0:", r.err, 1, true)
    assert.matches("cannot be multiplied", r.err, 1, true)
    assert.matches("stack traceback", r.err, 1, true)
  end)

  it("reports a model that returns no tensor", function()
    local r = run_model("function step(frame) return 'not a tensor' end\n")
    assert.are.equal(1, r.rc)
    assert.matches("result 1 of 'step' is a string, not a tensor", r.err, 1, true)
  end)

  it("refuses a second copy of libember named by EMBER_LIB", function()
    local lib = U.build_dir() .. "/libember.so"
    local dir = U.tmpdir()
    os.execute("cp -L " .. U.quote(lib) .. " " .. U.quote(dir .. "/libember.so"))
    local r = U.run({ bin, regressor, "20" }, { env = { EMBER_LIB = dir .. "/libember.so" } })
    U.rm_rf(dir)
    assert.are.equal(1, r.rc)
    assert.matches("two copies of libember", r.err, 1, true)
  end)
end)

describe("the embedding API from C", function()
  local bin, missing = U.built("cli/test_ember_lua")
  if not bin then pending(missing) return end

  it("passes its checks: statuses for bad input, zero-copy both ways, no leaks", function()
    local r = U.run({ bin })
    assert.are.equal(0, r.rc, r.out .. r.err)
    assert.matches("all checks passed", r.out, 1, true)
  end)
end)

describe("a C host running weights Lua trained and saved", function()
  local bin, missing = U.built("examples/embed/load_weights")
  local cmd, missing_cmd = U.built("cli/ember")
  if not (bin and cmd) then pending(missing or missing_cmd) return end
  local dir
  before_each(function() dir = U.tmpdir() end)
  after_each(function() U.rm_rf(dir) end)

  it("loads the nested checkpoint through ember_load and gets Lua's outputs to the bit", function()
    local path = dir .. "/weights.safetensors"
    local r = U.run({ cmd, U.root .. "/examples/embed/save_weights.lua", path })
    assert.are.equal(0, r.rc, r.out .. r.err)
    r = U.run({ bin, path })
    assert.are.equal(0, r.rc, r.out .. r.err)
    assert.are.equal(5, select(2, r.out:gsub("%(Lua", "")))
    assert.matches("OK\n$", r.out)
  end)

  it("names a missing layer, a missing file and a damaged one", function()
    local ember = require("ember")
    local path = dir .. "/partial.safetensors"
    ember.save(path, { model = { ["1.weight"] = ember.ones({ 16, 1 }) }, probe = { x = ember.ones({ 1, 1 }) } })
    local r = U.run({ bin, path })
    assert.are.equal(1, r.rc)
    assert.matches("the checkpoint has no tensor 'probe.y'", r.err, 1, true)
    assert.matches("the checkpoint has no tensor 'model.3.bias'", r.err, 1, true)
    r = U.run({ bin, dir .. "/none.safetensors" })
    assert.are.equal(1, r.rc)
    assert.matches("cannot open", r.err, 1, true)
    U.write(path, "not a checkpoint")
    r = U.run({ bin, path })
    assert.are.equal(1, r.rc)
    assert.matches("load_weights: load: .*partial.safetensors", r.err)
  end)
end)

-- The OpenBLAS core libember chooses when OPENBLAS_CORETYPE is unset
-- (core/src/blas.c), worked out here from /proc/cpuinfo's flags; nil off
-- x86 or where the choice is OpenBLAS's own.
local function core_for_flags()
  local f = io.open("/proc/cpuinfo", "r")
  if not f then return nil end
  local flags
  for line in f:lines() do
    flags = line:match("^flags%s*:(.*)$")
    if flags then break end
  end
  f:close()
  if not flags then return nil end
  local set = {}
  for w in flags:gmatch("%S+") do set[w] = true end
  if set.avx512f and set.avx512bw and set.avx512vl and set.avx512dq then return "SkylakeX" end
  if set.avx2 and set.fma then return "Haswell" end
  if set.avx then return "Sandybridge" end
  return nil
end

describe("every host runs the kernels libember chose", function()
  local host, missing = U.built("examples/embed/pure_c_mlp")
  local cmd, missing_cmd = U.built("cli/ember")
  local weights_host, missing_w = U.built("examples/embed/load_weights")
  if not (host and cmd and weights_host) then pending(missing or missing_cmd or missing_w) return end
  local expected = core_for_flags()
  if not expected then pending("not an x86-64 CPU with AVX: OpenBLAS chooses its own core") return end
  local lua_path = U.root .. "/lua/?.lua;" .. U.root .. "/lua/?/init.lua;;"

  -- ember_blas_info() as a C host linking libember, the Lua package under
  -- luajit and the ember command report it, in the environment env
  local function infos(env)
    local r = U.run({ host }, { env = env })
    assert.are.equal(0, r.rc, r.out .. r.err)
    local c = r.out:match("BLAS: ([^\n]*)")
    local lua_env = { LUA_PATH = lua_path, EMBER_LIB = U.build_dir() .. "/libember.so" }
    for k, v in pairs(env) do lua_env[k] = v end
    r = U.run({ "luajit", "-e", "io.write(require('ember').blas_info())" }, { env = lua_env })
    assert.are.equal(0, r.rc, r.out .. r.err)
    local lua = r.out
    r = U.run({ cmd, "-v" }, { env = env })
    assert.are.equal(0, r.rc, r.out .. r.err)
    return { c = c, lua = lua, cli = r.out:match("BLAS: ([^\n]*)") }
  end

  it("with OPENBLAS_CORETYPE unset: the core the CPU's flags give, in a C host, Lua and the ember command", function()
    local got = infos({ OPENBLAS_CORETYPE = false })
    for host_kind, info in pairs(got) do
      assert.matches("(core " .. expected .. ")", info, 1, true, host_kind)
      assert.matches("ember chose " .. expected .. " from the CPU's flags", info, 1, true, host_kind)
    end
  end)

  it("with OPENBLAS_CORETYPE set: the core it names, in all three", function()
    -- Prescott's SSE3 kernels run on every x86-64 CPU
    local got = infos({ OPENBLAS_CORETYPE = "Prescott" })
    for host_kind, info in pairs(got) do
      assert.matches("(core Prescott); OPENBLAS_CORETYPE=Prescott", info, 1, true, host_kind)
    end
  end)

  -- (the global B holds the library: a collected ffi.load unloads it)
  it("uses the OpenBLAS a host loaded first, and says its core was not ember's choice", function()
    local r = U.run({ "luajit", "-e", "B = require('ffi').load('libopenblas.so.0') io.write(require('ember').blas_info())" },
      { env = { LUA_PATH = lua_path, EMBER_LIB = U.build_dir() .. "/libember.so", OPENBLAS_CORETYPE = false } })
    assert.are.equal(0, r.rc, r.out .. r.err)
    assert.matches("OpenBLAS was loaded before ember and chose its core itself", r.out, 1, true)
    r = U.run({ "luajit", "-e", "B = require('ffi').load('libopenblas.so.0') io.write(require('ember').blas_info())" },
      { env = { LUA_PATH = lua_path, EMBER_LIB = U.build_dir() .. "/libember.so", OPENBLAS_CORETYPE = "Prescott" } })
    assert.matches("(core Prescott); OpenBLAS was loaded before ember, with OPENBLAS_CORETYPE=Prescott", r.out, 1, true)
  end)

  -- load_weights checks the C host's outputs against Lua's to the bit: the
  -- same ops in the same order (ember_linear, ember_add, ember_tanh), and
  -- now the same kernels in both processes whatever the environment says
  for _, case in ipairs({ { "unset", false }, { "Prescott", "Prescott" } }) do
    it("gives the C host Lua's outputs to the bit with OPENBLAS_CORETYPE " .. case[1], function()
      local dir = U.tmpdir()
      local path = dir .. "/weights.safetensors"
      local env = { OPENBLAS_CORETYPE = case[2] }
      local r = U.run({ cmd, U.root .. "/examples/embed/save_weights.lua", path }, { env = env })
      assert.are.equal(0, r.rc, r.out .. r.err)
      r = U.run({ weights_host, path }, { env = env })
      U.rm_rf(dir)
      assert.are.equal(0, r.rc, r.out .. r.err)
      assert.matches("OK\n$", r.out)
    end)
  end
end)

describe("host threads that load ember in Lua states of their own", function()
  local bin, missing = U.built("examples/embed/thread_states")
  if not bin then pending(missing) return end

  -- before libember was kept mapped, the first thread to exit after its
  -- lua_close jumped to the unloaded TSD destructor (SIGSEGV)
  it("come and go, with ember loaded by the threads only and by the main thread too", function()
    for _, mode in ipairs({ "nomain", "main" }) do
      local r = U.run({ bin, "3", "10", mode })
      assert.are.equal(0, r.rc, mode .. ": " .. r.out .. r.err)
      assert.matches("10 rounds of 3 threads .*: OK", r.out)
    end
  end)
end)
