-- LuaRocks package for ember, for users outside Debian (Debian users: see
-- README.md, "Install"). From a checkout:
--
--   luarocks --lua-version=5.1 make ember-scm-1.rockspec
--
-- The build is the project's CMake build ("cmake" build type): it needs a C11
-- compiler, CMake >= 3.20, pkg-config, LuaJIT 2.1 with its headers,
-- OpenBLAS, zlib and libedit (Debian: libluajit-5.1-dev libopenblas-dev
-- zlib1g-dev libedit-dev). LuaRocks moves the Lua modules to its share/lua/5.1,
-- libember and libember_lua to lib/lua/5.1 and the `ember` command to bin;
-- ember/config.lua, the command and libember_lua find each other relative to
-- those places. EMBER_LUAROCKS builds the libraries as single files (LuaRocks
-- cannot move symlinks) and leaves out the pkg-config files (they would name
-- the rock's own lib/, which LuaRocks empties): C hosts link a CMake install.
rockspec_format = "3.0"
package = "ember"
version = "scm-1"

source = {
  -- where the project is published; `luarocks make` in a checkout does not fetch
  url = "git+https://example.invalid/ember.git",
}

description = {
  summary = "A deep learning runtime scripted in LuaJIT: C tensor and autograd core, GradManager, nn",
  detailed = [[
ember is a C11 tensor and autograd core (libember, usable from C alone) bound to
LuaJIT through the FFI. Models and training loops are plain Lua; gradients
come from a MegEngine-style GradManager. The rock also installs the `ember`
command (scripts and a REPL) and libember_lua for embedding in C hosts.
]],
  labels = { "deep-learning", "tensor", "autograd", "luajit", "ffi" },
}

dependencies = {
  "lua == 5.1",   -- LuaJIT: the package uses the FFI
}

build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    CMAKE_INSTALL_LIBDIR = "$(LIBDIR)",
    CMAKE_INSTALL_BINDIR = "$(BINDIR)",
    EMBER_INSTALL_LUADIR = "$(LUADIR)",
    EMBER_CUDA = "OFF",
    EMBER_LUAROCKS = "ON",
  },
}
