-- Install (`cmake --install BUILD --prefix DIR`): the libraries, headers, Lua
-- package (with cdef.lua and the generated config.lua), the ember command and
-- the pkg-config files land under DIR; a plain luajit with only LUA_PATH set
-- (no EMBER_LIB, no LD_LIBRARY_PATH) requires ember from there, DIR/bin/ember
-- runs with no environment at all, and a C host built with pkg-config's flags
-- alone runs. Then the rock: `luarocks make` from a copy of the checkout into
-- a fresh tree, and ember required from that tree.
local U = dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".")
  .. "/../cli/tests/spec_util.lua")

-- luajit -e code, with LUA_PATH naming only the share/lua/5.1 given
local function luajit_from(share, code, cwd)
  return U.run({ "luajit", "-e", code }, { cwd = cwd, env = {
    LUA_PATH = share .. "/?.lua;" .. share .. "/?/init.lua;;", LUA_CPATH = false, LD_LIBRARY_PATH = false } })
end
-- an installed program with no LUA_PATH, LUA_CPATH or LD_LIBRARY_PATH
local function run_bare(argv, cwd)
  return U.run(argv, { cwd = cwd, env = { LUA_PATH = false, LUA_CPATH = false, LD_LIBRARY_PATH = false } })
end

describe("cmake --install into a fresh prefix", function()
  local built, missing = U.built("cli/ember")
  if not built then pending(missing) return end

  local prefix, work, install
  setup(function()
    prefix, work = U.tmpdir(), U.tmpdir()
    install = U.run({ "cmake", "--install", U.build_dir(), "--prefix", prefix })
  end)
  teardown(function()
    U.rm_rf(prefix)
    U.rm_rf(work)
  end)

  local function find(pattern)
    local r = U.run("find " .. U.quote(prefix) .. " -name " .. U.quote(pattern))
    return (r.out:match("[^\n]+"))
  end
  local lua_dir = function() return prefix .. "/share/lua/5.1" end

  it("installs the libraries, headers, Lua modules, command and pkg-config files", function()
    assert.are.equal(0, install.rc, install.out .. install.err)
    for _, rel in ipairs({ "bin/ember", "include/ember.h", "include/ember/ops.h",
      "include/ember_lua.h", "share/lua/5.1/ember/init.lua", "share/lua/5.1/ember/tensor.lua",
      "share/lua/5.1/ember/cdef.lua", "share/lua/5.1/ember/cdef/ops.lua",
      "share/lua/5.1/ember/config.lua",
      "share/lua/5.1/ember/autodiff/init.lua" }) do
      assert.is_true(U.exists(prefix .. "/" .. rel), rel .. " is missing")
    end
    assert.is_truthy(find("libember.so*"), "libember")
    assert.is_truthy(find("libember_lua.so*"), "libember_lua")
    assert.is_truthy(find("ember.pc"), "ember.pc")
    assert.is_truthy(find("ember_lua.pc"), "ember_lua.pc")
  end)

  it("records the installed library in ember/config.lua", function()
    local cfg = dofile(lua_dir() .. "/ember/config.lua")
    assert.are.equal(prefix, cfg.libpath:sub(1, #prefix))
    assert.is_true(U.exists(cfg.libpath))
  end)

  it("lets a plain luajit require ember with only LUA_PATH set", function()
    local r = luajit_from(lua_dir(), [[
      local ember = require("ember")
      print(ember._libpath)
      print((ember.ones({2, 2}) * 3):sum():item())
      local w = ember.tensor({2.0})
      local gm = ember.autodiff.GradManager():attach({w})
      gm:record()
      gm:backward((w * w):sum())
      print(w.grad:item())
      -- luajit closes the state at the end: libember stays mapped (it is
      -- linked -z nodelete), so its pool threads and TSD destructor survive
    ]], work)
    assert.are.equal(0, r.rc, r.err)
    local libpath, sum, grad = r.out:match("^([^\n]+)\n([^\n]+)\n([^\n]+)\n$")
    assert.are.equal(prefix, (libpath or ""):sub(1, #prefix), r.out)
    assert.are.equal("12", sum)
    assert.are.equal("4", grad)
  end)

  it("runs <prefix>/bin/ember with no environment variables", function()
    local r = run_bare({ prefix .. "/bin/ember", "-e", "print(ember._libpath); print(ember.arange(4):sum():item())" },
      work)
    assert.are.equal(0, r.rc, r.err)
    assert.are.equal(prefix, r.out:sub(1, #prefix), r.out)
    assert.matches("\n6\n$", r.out)
    r = U.run({ prefix .. "/bin/ember", "-v" }, { cwd = work, env = { LUA_PATH = false } })
    assert.are.equal(0, r.rc, r.err)
    assert.matches("Lua package: " .. lua_dir(), r.out, 1, true)
  end)

  it("gives pkg-config flags for the prefix", function()
    local pc_dir = find("ember.pc"):match("^(.*)/[^/]*$")
    local r = U.run({ "pkg-config", "--cflags", "--libs", "ember" }, { env = { PKG_CONFIG_PATH = pc_dir } })
    if r.rc == 127 then pending("pkg-config is not installed") return end
    assert.are.equal(0, r.rc, r.err)
    local libdir = find("libember.so"):match("^(.*)/[^/]*$")
    assert.matches("-I" .. prefix .. "/include", r.out, 1, true)
    assert.matches("-Wl,-rpath," .. libdir .. " -lember", r.out, 1, true)
  end)

  -- a host built with pkg-config's flags and nothing else runs without
  -- LD_LIBRARY_PATH (linking the sanitized library from an uninstrumented
  -- build is out of scope: #noasan)
  it("builds and runs an embedding host against the installed tree #noasan", function()
    local pc_dir = find("ember.pc"):match("^(.*)/[^/]*$")
    local exe = work .. "/game_loop"
    local r = U.run("cc -std=c11 -Wall -o " .. U.quote(exe) .. " "
      .. U.quote(U.root .. "/examples/embed/game_loop.c") .. " $(pkg-config --cflags --libs ember_lua) -lm",
      { env = { PKG_CONFIG_PATH = pc_dir } })
    assert.are.equal(0, r.rc, r.err)
    r = U.run({ exe, U.root .. "/examples/embed/regressor.lua", "60" },
      { cwd = work, env = { LUA_PATH = false, LD_LIBRARY_PATH = false } })
    assert.are.equal(0, r.rc, r.out .. r.err)
    assert.matches("OK\n$", r.out)
  end)
end)

-- Another project building against ember: spec/support/consumer (consumer.c
-- through libember alone, consumer_lua.c through libember_lua) built with
-- pkg-config's flags and with CMake's find_package(ember), and run with no
-- LD_LIBRARY_PATH or EMBER_LIB. ember_dir: the folder of emberConfig.cmake;
-- pc_dir: the folder of ember.pc (or the build tree's ember-uninstalled.pc).
-- Sanitized libraries cannot be linked into uninstrumented programs (#noasan).
local consumer_src = U.root .. "/spec/support/consumer"
local bare = { LUA_PATH = false, LUA_CPATH = false, LD_LIBRARY_PATH = false }

-- runs the two programs in dir; libdir: the folder their libember must come from
local function check_consumer(dir, what, libdir)
  local r = U.run({ dir .. "/consumer" }, { env = bare })
  assert.are.equal(0, r.rc, what .. ": " .. r.out .. r.err)
  assert.are.equal("135\n", r.out, what)
  r = U.run({ dir .. "/consumer_lua" }, { env = bare })
  assert.are.equal(0, r.rc, what .. ": " .. r.out .. r.err)
  assert.are.equal("6\n", r.out, what)
  r = U.run({ "ldd", dir .. "/consumer" }, { env = bare })
  assert.matches("libember.so.0 => " .. libdir .. "/libember.so.0", r.out, 1, true)
end

local function builds_with_pkg_config(pc_dir, work, libdir)
  local env = { PKG_CONFIG_PATH = pc_dir }
  for _, name in ipairs({ "consumer", "consumer_lua" }) do
    local r = U.run("cc -std=c11 -Wall -Werror -o " .. U.quote(work .. "/" .. name) .. " "
      .. U.quote(consumer_src .. "/" .. name .. ".c") .. " $(pkg-config --cflags --libs "
      .. (name == "consumer" and "ember" or "ember_lua") .. ")", { env = env })
    assert.are.equal(0, r.rc, name .. ": " .. r.out .. r.err)
  end
  check_consumer(work, "pkg-config " .. pc_dir, libdir)
end

-- bin: the consumer's CMake build folder, configured again for each ember_dir
-- (its compiler checks are cached: the second configure is quick)
local function builds_with_find_package(ember_dir, bin, libdir)
  local r = U.run({ "cmake", "-S", consumer_src, "-B", bin, "-Dember_DIR=" .. ember_dir })
  assert.are.equal(0, r.rc, r.out .. r.err)
  r = U.run({ "cmake", "--build", bin })
  assert.are.equal(0, r.rc, r.out .. r.err)
  check_consumer(bin, "find_package(ember) from " .. ember_dir, libdir)
end

describe("another project built against ember #noasan", function()
  local built, missing = U.built("cli/ember")
  if not built then pending(missing) return end
  local work, prefix
  setup(function()
    work, prefix = U.tmpdir(), U.tmpdir()
  end)
  teardown(function()
    U.rm_rf(work)
    U.rm_rf(prefix)
  end)
  local function sub(name)
    os.execute("mkdir -p " .. U.quote(work .. "/" .. name))
    return work .. "/" .. name
  end

  it("finds the build tree with pkg-config (ember-uninstalled.pc) and find_package(ember)", function()
    builds_with_pkg_config(U.build_dir() .. "/pkgconfig", sub("pc_build"), U.build_dir())
    builds_with_find_package(U.build_dir(), work .. "/cmake", U.build_dir())
  end)

  it("finds an install with pkg-config and with find_package(ember)", function()
    local install = U.run({ "cmake", "--install", U.build_dir(), "--prefix", prefix })
    assert.are.equal(0, install.rc, install.out .. install.err)
    local config = U.run("find " .. U.quote(prefix) .. " -name emberConfig.cmake").out:match("[^\n]+")
    assert.is_truthy(config, "emberConfig.cmake is not installed")
    local pc = U.run("find " .. U.quote(prefix) .. " -name ember.pc").out:match("[^\n]+")
    local libdir = U.run("find " .. U.quote(prefix) .. " -name libember.so.0").out:match("^(.*)/[^/\n]*\n")
    builds_with_pkg_config(pc:match("^(.*)/[^/]*$"), sub("pc_install"), libdir)
    builds_with_find_package(config:match("^(.*)/[^/]*$"), work .. "/cmake", libdir)
  end)
end)

-- The rock builds its own release library, so the sanitized pass skips it
-- (#noasan). About 20 s on 2 cores.
local function have(cmd)
  local r = os.execute("command -v " .. cmd .. " > /dev/null 2>&1")
  return r == 0 or r == true
end

describe("luarocks make into a fresh tree #noasan", function()
  if not have("luarocks") then
    pending("luarocks is not installed (Debian package luarocks; scripts/setup.sh installs it): "
      .. "the rock is not tested")
    return
  end
  if not have("git") then
    pending("git is not installed: no clean copy of the checkout to build the rock from")
    return
  end

  local src, tree, work, make
  setup(function()
    src, tree, work = U.tmpdir(), U.tmpdir(), U.tmpdir()
    -- a clean checkout: the tracked and new files of this one, no build folders
    local copy = U.run("(git ls-files -z -co --exclude-standard | tar -c --null -T - | tar -x -C "
      .. U.quote(src) .. ")", { cwd = U.root })
    assert.are.equal(0, copy.rc, copy.err)
    make = U.run({ "luarocks", "--lua-version=5.1", "--tree=" .. tree, "make", "ember-scm-1.rockspec" },
      { cwd = src, env = { CMAKE_BUILD_PARALLEL_LEVEL = "2" } })
  end)
  teardown(function()
    U.rm_rf(src)
    U.rm_rf(tree)
    U.rm_rf(work)
  end)

  it("installs the rock", function()
    assert.are.equal(0, make.rc, make.out .. make.err)
    for _, rel in ipairs({ "bin/ember", "lib/lua/5.1/libember.so", "lib/lua/5.1/libember_lua.so",
      "share/lua/5.1/ember/init.lua", "share/lua/5.1/ember/cdef.lua", "share/lua/5.1/ember/config.lua" }) do
      assert.is_true(U.exists(tree .. "/" .. rel), rel .. " is missing")
    end
  end)

  it("lets luajit require ember from the tree's share/lua/5.1", function()
    local r = luajit_from(tree .. "/share/lua/5.1", [[
      local ember = require("ember")
      print(ember._libpath)
      print((ember.arange(4) * 2):sum():item())
      io.stdout:flush()
      os.exit(0)
    ]], work)
    assert.are.equal(0, r.rc, r.err)
    local libpath, sum = r.out:match("^([^\n]+)\n([^\n]+)\n$")
    assert.are.equal(tree, (libpath or ""):sub(1, #tree), r.out)
    assert.matches("/lib/lua/5.1/libember.so$", libpath)
    assert.are.equal("12", sum)
  end)

  it("runs the tree's ember command with no environment variables", function()
    local r = run_bare({ tree .. "/bin/ember", "-e", "print(ember._libpath); print(ember.eye(3):sum():item())" }, work)
    assert.are.equal(0, r.rc, r.err)
    assert.are.equal(tree .. "/lib/lua/5.1/libember.so\n3\n", r.out)
  end)
end)
