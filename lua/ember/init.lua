-- ember: a Lua-scriptable deep learning runtime. This file loads libember
-- through the LuaJIT FFI, declares its C API (extracted from ember.h at build
-- time into ember/cdef.lua) and assembles the package from its modules.
local ffi = require("ffi")

local ember = { _VERSION = "0.1.0" }

local function here()
  local src = debug.getinfo(1, "S").source
  return (src:sub(1, 1) == "@" and src:sub(2) or src):match("^(.*)/[^/]*$") or "."
end

-- Where libember lives, in order: $EMBER_LIB; the path recorded at install
-- time (ember/config.lua); the build folder of a source checkout
-- (lua/ember/../../build); the usual install locations relative to
-- <prefix>/share/lua/5.1/ember; the system linker's search path.
local function candidates()
  local dir, list = here(), {}
  local env = os.getenv("EMBER_LIB")
  if env and env ~= "" then list[#list + 1] = env end
  local ok, cfg = pcall(require, "ember.config")
  if ok and type(cfg) == "table" and cfg.libpath then list[#list + 1] = cfg.libpath end
  list[#list + 1] = dir .. "/../../build/libember.so"
  for _, rel in ipairs({ "lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu" }) do
    list[#list + 1] = dir .. "/../../../../" .. rel .. "/libember.so"
  end
  list[#list + 1] = "ember"
  return list
end

-- ember/cdef.lua and ember/optable.lua are written by the build
local function generated(name)
  local ok, mod = pcall(require, "ember." .. name)
  if not ok then
    error("ember: lua/ember/" .. name .. ".lua is missing; build the project first "
      .. "(cmake -S . -B build && cmake --build build)", 0)
  end
  return mod
end

local function load_library()
  local errors = {}
  for _, path in ipairs(candidates()) do
    local f = path == "ember" or io.open(path, "rb")
    if f then
      if f ~= true then f:close() end
      local ok, lib = pcall(ffi.load, path)
      if ok then return lib, path end
      errors[#errors + 1] = tostring(lib)
    end
  end
  error("ember: cannot load libember (set EMBER_LIB to its path): "
    .. table.concat(errors, "; "), 0)
end

-- OpenBLAS picks its kernels from the CPU model when it is loaded, and
-- OpenBLAS 0.3.21 (Debian 12) does not know the generic "Intel Xeon
-- Processor" model that virtual machines report: it falls back to its SSE3
-- (Prescott) kernels, a third of the speed the CPU can give. When the user
-- has not chosen (OPENBLAS_CORETYPE unset), choose from the CPU's feature
-- flags before libember pulls OpenBLAS in. C hosts that link libember
-- directly set OPENBLAS_CORETYPE themselves.
local function choose_openblas_core()
  if os.getenv("OPENBLAS_CORETYPE") then return end
  local f = io.open("/proc/cpuinfo", "r")
  if not f then return end
  local flags = ""
  for line in f:lines() do
    if line:match("^flags") then flags = " " .. line:gsub("^[^:]*:", "") .. " " break end
  end
  f:close()
  local function has(x) return flags:find(" " .. x .. " ", 1, true) ~= nil end
  local core
  if has("avx512f") and has("avx512bw") and has("avx512vl") and has("avx512dq") then core = "SkylakeX"
  elseif has("avx2") and has("fma") then core = "Haswell" end
  if not core then return end
  pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite);")
  pcall(function() ffi.C.setenv("OPENBLAS_CORETYPE", core, 0) end)
end

-- oneDNN and ember's own kernels run on libgomp's team (core/src/parallel.c).
-- Its workers sleep between jobs under OMP_WAIT_POLICY=passive, and waking
-- one costs 60-70 us on a VM, more than a 128x256x128 product takes; by
-- default they spin for 300000 rounds (some 4 ms of a core) after each
-- job. libgomp reads the setting when it is loaded, with libember: unless the
-- user has chosen one, the team spins 30000 rounds (about 0.6 ms), enough
-- for the next op of a training step to find it awake (docs/nn.md, "Threads").
local function bound_openmp_spin()
  if os.getenv("OMP_WAIT_POLICY") or os.getenv("GOMP_SPINCOUNT") then return end
  pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite);")
  pcall(function() ffi.C.setenv("GOMP_SPINCOUNT", "30000", 0) end)
end

ffi.cdef(generated("cdef"))
generated("optable")
choose_openblas_core()
bound_openmp_spin()
local C, libpath = load_library()
ember._C = C
ember._libpath = libpath

-- submodules may require("ember") while the package is being assembled
package.loaded.ember = ember
local core = require("ember.tensor")(ember)
require("ember.factories")(ember, core)
require("ember.ops")(ember, core)
require("ember.random")(ember, core)   -- generators; the random methods' options
require("ember.indexing")(ember)
require("ember.profile")(ember)
for _, name in ipairs({ "autodiff", "amp", "nn", "optim", "data", "io", "cuda", "distributed", "distributions" }) do
  local ok, mod = pcall(require, "ember." .. name)
  if ok then
    if type(mod) == "function" then mod = mod(ember) end
    if mod ~= nil and ember[name] == nil then ember[name] = mod end
  elseif not tostring(mod):find("module 'ember%." .. name .. "' not found") then
    error(mod, 0)
  end
end
ember.help = require("ember.doc").help
require("ember.suggest").apply(ember)   -- from here on a misspelt ember.xxx raises

return ember
