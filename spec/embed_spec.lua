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
  if not bin then
    pending(missing)
    return
  end

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
  if not bin then
    pending(missing)
    return
  end
  local regressor = U.root .. "/examples/embed/regressor.lua"

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
    local dir = U.tmpdir()
    U.write(dir .. "/bad.lua", "function step(frame)\n  return frame:matmul(frame)\nend\n")
    local r = U.run({ bin, dir .. "/bad.lua" })
    U.rm_rf(dir)
    assert.are.equal(1, r.rc)
    assert.matches("frame 0:", r.err, 1, true)
    assert.matches("cannot be multiplied", r.err, 1, true)
    assert.matches("stack traceback", r.err, 1, true)
  end)

  it("reports a model that returns no tensor", function()
    local dir = U.tmpdir()
    U.write(dir .. "/none.lua", "function step(frame) return 'not a tensor' end\n")
    local r = U.run({ bin, dir .. "/none.lua" })
    U.rm_rf(dir)
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
  if not bin then
    pending(missing)
    return
  end

  it("passes its checks: statuses for bad input, zero-copy both ways, no leaks", function()
    local r = U.run({ bin })
    assert.are.equal(0, r.rc, r.out .. r.err)
    assert.matches("all checks passed", r.out, 1, true)
  end)
end)

describe("a C host running weights Lua trained and saved", function()
  local bin, missing = U.built("examples/embed/load_weights")
  local cmd, missing_cmd = U.built("cli/ember")
  if not (bin and cmd) then
    pending(missing or missing_cmd)
    return
  end
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
