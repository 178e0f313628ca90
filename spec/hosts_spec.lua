-- ember inside real hosts, shipped the way a user ships it (docs/hosts.md):
-- the loader (lua/ember/loader.lua) on a vendored copy made by
-- scripts/vendor.sh, with set_library, and its error when nothing loads;
-- LÖVE 11 headless under xvfb-run (examples/love: training in love.update in
-- budgeted slices, and in a love.thread); Neovim headless (training on the
-- main thread in slices driven by a libuv timer, and in a vim.loop.new_thread
-- worker). Each host run is checked for its exit status, the library it
-- loaded, the losses and the frame times it printed. The hosts come from
-- scripts/setup.sh (love, xvfb, xauth, neovim); a missing one is pending.
-- About 15 s on 2 loaded cores. The LÖVE love.thread run and the Neovim
-- worker-only run end a thread whose Lua state alone loaded libember: they
-- need libember linked with -z nodelete (threads.c's key destructor must stay
-- mapped after that state unloads it).
local U = dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".")
  .. "/../cli/tests/spec_util.lua")
-- ember.json from this checkout, without leaving package.path changed: a later
-- spec file would load ember's modules from two spellings of one folder, and
-- errors.lua tells ember's frames from the user's by their path
local json
do
  local path = package.path
  package.path = U.root .. "/lua/?.lua;" .. path
  json = require("ember.json")
  package.path = path
end

local function have(cmd)
  local r = os.execute("command -v " .. cmd .. " > /dev/null 2>&1")
  return r == 0 or r == true
end

-- every process below runs without the environment a developer may have set
local bare = { LUA_PATH = false, LUA_CPATH = false, LD_LIBRARY_PATH = false }
local function env_with(t)
  local e = {}
  for k, v in pairs(bare) do e[k] = v end
  for k, v in pairs(t or {}) do e[k] = v end
  return e
end

-- scripts/vendor.sh dest; asserts it worked
local function vendor(dest)
  local r = U.run({ U.root .. "/scripts/vendor.sh", dest, U.build_dir() })
  assert.are.equal(0, r.rc, r.out .. r.err)
end

-- luajit -e code with package.path naming only the folder lua_dir
local function luajit_in(lua_dir, code, cwd)
  return U.run({ "luajit", "-e", code }, { cwd = cwd or lua_dir, env = env_with({
    LUA_PATH = lua_dir .. "/?.lua;" .. lua_dir .. "/?/init.lua" }) })
end

-- the JSON after "<tag> " on a line of out
local function report(out, tag)
  local text = out:match(tag .. " (%b{})")
  assert.is_truthy(text, "no '" .. tag .. "' line in:\n" .. out)
  return json.decode(text)
end

-- 0 < median <= p99 <= max, in milliseconds
local function check_times(t, what)
  assert.is_true(type(t.median) == "number" and t.median >= 0, what)
  assert.is_true(t.median <= t.p99 and t.p99 <= t.max, what .. ": median <= p99 <= max")
end

describe("the library loader", function()
  local built, missing = U.built("libember.so")
  if not built then pending(missing) return end
  local work
  setup(function() work = U.tmpdir() end)
  teardown(function() U.rm_rf(work) end)

  it("finds libember beside a vendored copy, with no environment variable", function()
    local game = work .. "/game"
    vendor(game)
    for _, f in ipairs({ "init.lua", "loader.lua", "cdef.lua", "optable.lua", "libember.so", "nn/init.lua" }) do
      assert.is_true(U.exists(game .. "/ember/" .. f), f .. " is not in the vendored copy")
    end
    assert.is_false(U.exists(game .. "/ember/config.lua"))
    -- run from another folder: the path is found from the Lua files' own
    local r = luajit_in(game, [[
      local ember = require("ember")
      print(ember._libpath)
      print(ember.loader.loaded() == ember._libpath)
      local w = ember.tensor({ 2.0, -1.0 })
      local gm = ember.autodiff.GradManager():attach({ w })
      gm:record()
      gm:backward((w * w * w):sum())
      print(w.grad[1]:item(), w.grad[2]:item())
      io.stdout:flush()
      os.exit(0, true)   -- closes the state: its tensors are freed (the leak check sees them otherwise)
    ]], "/")
    assert.are.equal(0, r.rc, r.err)
    assert.are.equal(game .. "/ember/libember.so\ntrue\n12\t3\n", r.out)
  end)

  it("loads the library set_library names, as a file or a folder, and only it", function()
    local lua_only = work .. "/lua_only"
    vendor(lua_only)
    os.remove(lua_only .. "/ember/libember.so")
    local lib = U.build_dir() .. "/libember.so"
    for _, arg in ipairs({ lib, U.build_dir(), U.build_dir() .. "/" }) do
      local r = luajit_in(lua_only, ([[
        local loader = require("ember.loader")
        local path = loader.set_library(%q)
        local ember = require("ember")
        print(path == ember._libpath, ember._libpath)
        print(ember.arange(5):sum():item())
        -- after loading: the same path is accepted, another raises
        assert(loader.set_library(ember._libpath) == ember._libpath)
        local ok, err = pcall(loader.set_library, "/elsewhere/libember.so")
        print(ok, err)
        io.stdout:flush()
        os.exit(0, true)   -- closes the state: its tensors are freed (the leak check sees them otherwise)
      ]]):format(arg))
      assert.are.equal(0, r.rc, r.err)
      local lines = {}
      for l in r.out:gmatch("[^\n]+") do lines[#lines + 1] = l end
      assert.are.equal("true\t" .. lib, lines[1])
      assert.are.equal("10", lines[2])
      assert.matches("false\t.*ember.loader.set_library: ember is already loaded in this Lua state from "
        .. lib:gsub("%p", "%%%0") .. "; call set_library before the first require%(\"ember\"%) %(asked for "
        .. "/elsewhere/libember.so%)", lines[3])
    end
  end)

  it("refuses a bad argument to set_library, naming it", function()
    local r = luajit_in(U.root .. "/lua", [[
      local loader = require("ember.loader")
      for _, args in ipairs({ { 42 }, { "" }, { nil }, { "a", "b" } }) do
        local ok, err = pcall(loader.set_library, unpack(args, 1, args[2] and 2 or 1))
        print(ok, err)
      end
      io.stdout:flush()
      os.exit(0, true)   -- closes the state: its tensors are freed (the leak check sees them otherwise)
    ]])
    assert.are.equal(0, r.rc, r.err)
    assert.matches("false\t[^\n]*ember.loader.set_library: expected the path of libember %(a file or its "
      .. "folder%) as argument 1, got number\n", r.out)
    assert.matches("got an empty string\n", r.out, 1, true)
    assert.matches("as argument 1, got nil\n", r.out, 1, true)
    assert.matches("ember.loader.set_library: extra argument 2 ('b'): it takes 1 (path)\n", r.out, 1, true)
  end)

  it("lists every path it tried and why each failed", function()
    local lua_only = work .. "/nolib"
    vendor(lua_only)
    os.remove(lua_only .. "/ember/libember.so")
    local r = luajit_in(lua_only, [[ require("ember") ]])
    assert.are_not.equal(0, r.rc)
    assert.matches("ember: cannot load libember; tried, in order:\n", r.err, 1, true)
    local dir = lua_only .. "/ember"
    assert.matches("  " .. dir .. "/libember.so (beside the Lua files): no such file\n", r.err, 1, true)
    assert.matches("  " .. dir .. "/../../build/libember.so (the source checkout's build folder): no such file\n",
      r.err, 1, true)
    assert.matches("  " .. dir .. "/../../../../lib64/libember.so (<prefix>/lib64): no such file\n", r.err, 1, true)
    assert.matches("  ember (the system linker's search path): libember.so: cannot open shared object",
      r.err, 1, true)
    assert.matches("set_library(path) before require(\"ember\"), or $EMBER_LIB; docs/hosts.md)", r.err, 1, true)

    -- a file that is not a library: the loader's own reason
    U.write(lua_only .. "/ember/libember.so", ("not a library\n"):rep(20))
    r = luajit_in(lua_only, [[ require("ember") ]])
    assert.matches("  " .. dir:gsub("%p", "%%%0") .. "/libember.so %(beside the Lua files%): [^\n]*libember.so: "
      .. "[^\n]*invalid ELF header\n", r.err)

    -- set_library's path is the only one tried
    r = luajit_in(lua_only, [[
      require("ember.loader").set_library("/nonexistent/libember.so")
      require("ember")
    ]])
    assert.matches("tried, in order:\n  /nonexistent/libember.so (ember.loader.set_library): no such file\n(",
      r.err, 1, true)
    -- and so is $EMBER_LIB's
    r = U.run({ "luajit", "-e", "require('ember')" }, { cwd = lua_only, env = env_with({
      LUA_PATH = "./?.lua;./?/init.lua", EMBER_LIB = work }) })
    assert.matches("tried, in order:\n  " .. work .. " ($EMBER_LIB): is a folder\n(", r.err, 1, true)
  end)
end)

-- The hosts (and Xvfb) are not run with the sanitizer runtime preloaded, as
-- scripts/test.sh's ASan pass would do: #noasan
describe("LÖVE 11, headless, with ember vendored in the game #noasan", function()
  local built, missing = U.built("libember.so")
  if not built then pending(missing) return end
  if not (have("love") and have("xvfb-run")) then
    pending("love or xvfb-run is not installed (scripts/setup.sh installs love, xvfb, xauth)")
    return
  end
  local game
  setup(function()
    game = U.tmpdir()
    local r = U.run("cp " .. U.quote(U.root) .. "/examples/love/*.lua " .. U.quote(game))
    assert.are.equal(0, r.rc, r.err)
    vendor(game)
  end)
  teardown(function() U.rm_rf(game) end)

  -- the game for n frames in mode; its report
  local function play(mode, frames, extra)
    local argv = { "timeout", "120", "xvfb-run", "-a", "love", game, "--mode", mode, "--frames", tostring(frames) }
    for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
    local r = U.run(argv, { cwd = "/", env = bare })
    assert.are.equal(0, r.rc, r.out .. r.err)
    local rep = report(r.out, "ember%-love")
    assert.are.equal(game .. "/ember/libember.so", rep.libpath)
    assert.is_true(rep.frames > frames, "frames: " .. rep.frames)
    check_times(rep.frame_ms, mode .. " frame_ms")
    check_times(rep.update_ms, mode .. " update_ms")
    return rep
  end

  -- the losses of 40 steps of examples/love/model.lua in plain luajit on one
  -- thread: every mode of the game must give these, bit for bit
  local reference
  local function reference_losses()
    if reference then return reference end
    local r = U.run({ "luajit", "-e", [[
      local ember = require("ember")
      ember.set_num_threads(1)
      local model = require("model")
      local x, y = model.data(1)
      local m = model.new(2)
      for _ = 1, 40 do print(string.format("%.9g", (model.step(m, x, y)))) end
      io.stdout:flush()
      os.exit(0, true)   -- closes the state: its tensors are freed (the leak check sees them otherwise)
    ]] }, { env = env_with({ LUA_PATH = game .. "/?.lua;" .. game .. "/?/init.lua" }) })
    assert.are.equal(0, r.rc, r.err)
    reference = {}
    for l in r.out:gmatch("[^\n]+") do reference[#reference + 1] = l end
    assert.are.equal(40, #reference)
    return reference
  end
  local function same_losses(rep)
    local ref = reference_losses()
    assert.are.equal(40, rep.steps)
    assert.are.equal(40, #rep.losses)
    for i = 1, 40 do
      assert.are.equal(ref[i], ("%.9g"):format(rep.losses[i]), "loss of step " .. i)
    end
    -- and training works: the untrained model's loss (the curve's mean
    -- square, 0.298) falls under a quarter of it by step 40 (0.058)
    assert.is_true(rep.losses[40] < rep.losses[1] / 4, ("loss %g -> %g"):format(rep.losses[1], rep.losses[40]))
  end

  it("trains in love.update in budgeted slices (gm:backward_steps), or a step a frame, and quits with 0",
    function()
    local budget = play("budget", 30, { "--steps", "40", "--budget-ms", "3" })
    assert.are.equal("budget", budget.mode)
    same_losses(budget)
    local oneshot = play("oneshot", 30, { "--steps", "40" })
    assert.are.equal("oneshot", oneshot.mode)
    same_losses(oneshot)
    -- the budget holds love.update's time down: a step (some 14-70 ms on
    -- the loaded 2-core machine, 4 layers of 512x512 products forward and
    -- back) takes several 3 ms slices
    assert.is_true(budget.frames > budget.steps, "budget: " .. budget.frames .. " frames")
    assert.is_true(budget.update_ms.median < oneshot.update_ms.median / 2,
      ("median update: budgeted %.2f ms, one-shot %.2f ms"):format(budget.update_ms.median,
        oneshot.update_ms.median))
  end)

  it("trains in a love.thread while the main thread draws, and quits with 0", function()
    local rep = play("thread", 30, { "--steps", "40" })
    assert.are.equal("thread", rep.mode)
    same_losses(rep)
    -- the main thread only reads the channel: its update takes well under a millisecond
    assert.is_true(rep.update_ms.median < 1, "update median " .. rep.update_ms.median .. " ms")
  end)

  it("runs from a .love archive with libember beside it, and says why when it is missing", function()
    local dir = U.tmpdir()
    local r = U.run("zip -qr " .. U.quote(dir .. "/game.love") .. " . -x 'ember/*.so'", { cwd = game })
    if r.rc == 127 then
      U.rm_rf(dir)
      pending("zip is not installed")
      return
    end
    assert.are.equal(0, r.rc, r.err)
    r = U.run({ "timeout", "60", "xvfb-run", "-a", "love", dir .. "/game.love", "--frames", "3" },
      { cwd = "/", env = bare })
    assert.are.equal(1, r.rc, r.out .. r.err)
    assert.matches("  ember/libember.so (beside the Lua files (LÖVE's filesystem)): not found in the game's "
      .. "folder or save folder\n  " .. dir .. "/libember.so (beside the .love archive or fused game): no such file\n",
      r.err, 1, true)
    r = U.run({ "cp", game .. "/ember/libember.so", dir .. "/libember.so" })
    assert.are.equal(0, r.rc, r.err)
    r = U.run({ "timeout", "60", "xvfb-run", "-a", "love", dir .. "/game.love", "--frames", "3", "--steps", "2" },
      { cwd = "/", env = bare })
    U.rm_rf(dir)
    assert.are.equal(0, r.rc, r.out .. r.err)
    local rep = report(r.out, "ember%-love")
    assert.are.equal(dir .. "/libember.so", rep.libpath)
    -- the same first two losses as plain luajit computes with this ember
    local ref = reference_losses()
    assert.are.same({ ref[1], ref[2] }, { ("%.9g"):format(rep.losses[1]), ("%.9g"):format(rep.losses[2]) })
  end)

  it("refuses an unknown argument, exiting 1 with the usage", function()
    local r = U.run({ "timeout", "60", "xvfb-run", "-a", "love", game, "--frames", "5", "--speed", "2" },
      { cwd = "/", env = bare })
    assert.are.equal(1, r.rc, r.out .. r.err)
    assert.matches("examples/love: unknown argument --speed\nusage: love examples/love", r.err, 1, true)
  end)
end)

describe("Neovim, headless, with ember vendored in a plugin #noasan", function()
  local built, missing = U.built("libember.so")
  if not built then pending(missing) return end
  if not have("nvim") then pending("nvim is not installed (scripts/setup.sh installs neovim)") return end
  local plugin
  setup(function()
    plugin = U.tmpdir()
    os.execute("mkdir -p " .. U.quote(plugin .. "/lua"))
    vendor(plugin .. "/lua")
  end)
  teardown(function() U.rm_rf(plugin) end)

  local lib
  local function nvim(extra)
    local argv = { "timeout", "120", "nvim", "--headless", "-u", "NONE", "--cmd", "set rtp+=" .. plugin }
    for _, a in ipairs(extra) do argv[#argv + 1] = a end
    argv[#argv + 1] = "-c"
    argv[#argv + 1] = "luafile " .. U.root .. "/spec/support/nvim_host.lua"
    local r = U.run(argv, { cwd = "/", env = bare })
    assert.are.equal(0, r.rc, r.out .. r.err)
    lib = plugin .. "/lua/ember/libember.so"
    return report(r.out, "ember%-nvim")
  end
  local function check_worker(rep)
    -- its own Lua state, the same library file, y = 3x - 2 learnt
    assert.is_true(rep.thread_started)
    assert.are.equal(lib, rep.worker.libpath)
    assert.are.equal(150, rep.worker.steps)
    assert.is_true(rep.worker.last < 0.05 and rep.worker.last < rep.worker.first / 100,
      ("worker: loss %g -> %g"):format(rep.worker.first, rep.worker.last))
  end

  it("trains on the main thread in timer-driven slices and in a vim.loop.new_thread worker", function()
    local rep = nvim({})
    assert.are.equal(lib, rep.libpath)
    -- main thread: 60 steps, one slice of 1 ms (at least one node) a tick
    local main = rep.main
    assert.are.equal(60, #main.losses)
    assert.is_true(main.ticks >= 60)
    assert.are.equal(main.ticks, #main.slice_ms)
    assert.is_true(main.losses[60] < main.losses[1] / 20,
      ("main thread: loss %g -> %g"):format(main.losses[1], main.losses[60]))
    local sorted = {}
    for i, v in ipairs(main.slice_ms) do sorted[i] = v end
    table.sort(sorted)
    check_times({ median = sorted[math.ceil(#sorted / 2)], p99 = sorted[math.ceil(#sorted * 0.99)],
      max = sorted[#sorted] }, "slice_ms")
    check_worker(rep)
  end)

  it("trains in a worker thread when the main thread never loads ember, and exits with 0", function()
    -- the worker's state loads libember and unloads it when the thread ends
    local rep = nvim({ "--cmd", "let g:ember_worker_only = 1" })
    assert.is_true(rep.worker_only)
    assert.is_nil(rep.main)
    check_worker(rep)
  end)
end)
