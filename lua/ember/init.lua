-- ember: a Lua-scriptable deep learning runtime. This file loads libember
-- through the LuaJIT FFI, declares its C API (extracted from ember.h at build
-- time into ember/cdef.lua) and assembles the package from its modules.
local ffi = require("ffi")

local ember = { _VERSION = "0.1.0" }

-- ember/cdef.lua and ember/optable.lua are written by the build
local function generated(name)
  local ok, mod = pcall(require, "ember." .. name)
  if not ok then
    error("ember: lua/ember/" .. name .. ".lua is missing; build the project first "
      .. "(cmake -S . -B build && cmake --build build)", 0)
  end
  return mod
end

-- Where libember is looked for, the host's set_library call and the error
-- that lists every path tried: lua/ember/loader.lua (docs/hosts.md).
local function load_library()
  ember.loader = require("ember.loader")
  return ember.loader._load()
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
bound_openmp_spin()
local C, libpath = load_library()
ember._C = C
ember._libpath = libpath

-- submodules may require("ember") while the package is being assembled
package.loaded.ember = ember
local core = require("ember.tensor")(ember)
require("ember.factories")(ember, core)
require("ember.ops")(ember, core)
require("ember.tensorlib")(ember, core)
require("ember.random")(ember, core)   -- generators; the random methods' options
require("ember.indexing")(ember)
require("ember.profile")(ember)
require("ember.tidy")(ember)
for _, name in ipairs({ "autodiff", "amp", "nn", "optim", "frame", "data", "io", "cuda", "distributed", "distributions", "jit", "dtr" }) do
  local ok, mod = pcall(require, "ember." .. name)
  if ok then
    if type(mod) == "function" then mod = mod(ember) end
    if mod ~= nil and ember[name] == nil then ember[name] = mod end
  elseif not tostring(mod):find("module 'ember%." .. name .. "' not found") then
    error(mod, 0)
  end
end
ember.help = require("ember.doc").help
-- No value past a public function's parameters is ignored: every function
-- of the API reference's tables (and of the plain tables of functions in
-- them, such as ember.io.json), every constructor (a class's __call) and
-- every method of its classes raises for one (errors.arity_checked;
-- variadic functions are left as they are), and the argument kinds and
-- options tables listed in lua/ember/options.lua are checked.
do
  local doc, errors = require("ember.doc"), require("ember.errors")
  local checks = require("ember.options")
  local is_tensor = ember.is_tensor
  -- whether v is of kind (lua/ember/options.lua's ARGUMENTS); WORDS: the kinds in words
  local function fits(kind, v)
    if kind == "tensor" then return is_tensor(v) end
    if kind == "tensors" then
      if type(v) ~= "table" or is_tensor(v) then return false end
      for _, t in ipairs(v) do if not is_tensor(t) then return false end end
      return true
    end
    return type(v) == kind
  end
  local WORDS = { tensors = "a list of tensors", ["function"] = "a function", table = "a table", tensor = "a tensor",
    boolean = "a boolean", string = "a string", number = "a number" }
  -- fn behind the checks of checks.OPTIONS[name] and checks.ARGUMENTS[name]
  local function checked(name, fn, skip)
    local o, kinds = checks.OPTIONS[name], checks.ARGUMENTS[name]
    if not o and not kinds then return fn end
    local op, pos, allowed = name:gsub("^ember%.", ""), nil, {}
    if o then
      pos = o[1] + skip
      for _, k in ipairs(o[2]) do allowed[k] = true end
    end
    return function(...)
      errors.check_arity(name, fn, skip, nil, select(skip + 1, ...))   -- an extra argument is named first
      for i, kind in ipairs(kinds or {}) do
        local v = select(i + skip, ...)
        local want, optional = kind:match("^(%a+)(%??)$")
        if not (fits(want, v) or (optional == "?" and v == nil)) then
          if want == "tensors" and type(v) == "table" then   -- the entry that is not a tensor
            for k, t in ipairs(v) do
              if not is_tensor(t) then
                errors.fail(op, ("argument %d: entry %d is %s, not a tensor"):format(i, k, errors.show(t)))
              end
            end
          end
          errors.argument(op, i, WORDS[want] .. (optional == "?" and " or nil" or ""), v)
        end
      end
      if pos and select("#", ...) >= pos then errors.options(op, (select(pos, ...)), allowed) end
      return fn(...)
    end
  end
  local class_name = setmetatable({}, { __mode = "k" })
  local function wrap_call(mt)
    local call = mt.__call
    if type(call) ~= "function" or not errors.nparams(call) then return end
    local limit = math.max(0, errors.nparams(call) - 1)
    mt.__call = function(c, ...)
      if select("#", ...) > limit then errors.check_arity(class_name[c] or "ember.call", call, 1, nil, ...) end
      return call(c, ...)
    end
    -- a constructor's errors name its class (errors.lua)
    errors.register_public(call, function(c) return class_name[c] end)
  end
  local done = {}
  local hot = { [ember] = true, [ember.Tensor] = true }   -- the ops: their own prototypes (errors.lua)
  local function wrap_all(t, prefix, sep, skip)
    if type(t) ~= "table" or done[t] then return end
    done[t] = true
    for k, v in pairs(t) do
      if type(k) == "string" and k:sub(1, 1) ~= "_" then
        if type(v) == "function" then
          local name = prefix .. sep .. k
          t[k] = checked(name, errors.arity_checked(name, v, skip, hot[t]), skip)
          -- its errors name what the user called (errors.lua): the wrappers tail-call v (v may be a wrapper
          -- already: nn's layers make some), so v's frame is the one below the user's, and the wrappers'
          -- own errors name the call. A class's new is named by the class it makes (nn.Linear).
          errors.register_public(errors.unwrapped(v), k == "new" and function(c) return class_name[c] end or name)
        elseif type(v) == "table" and skip == 0 and not ember.is_tensor(v) then
          local mt = getmetatable(v)
          if mt == nil then
            wrap_all(v, prefix .. sep .. k, ".", 0)   -- a plain table of functions (ember.io.json)
          elseif type(mt) == "table" and rawget(mt, "__call") and not class_name[v] then
            class_name[v] = prefix .. sep .. k
            errors.register_public(nil, class_name[v])
            wrap_call(mt)
          end
        end
      end
    end
  end
  for _, c in ipairs(doc.CLASSES) do
    local class = doc.resolve(ember, c[2])
    wrap_all(class, "ember." .. c[1], ":", 1)
    local mt = getmetatable(class)
    if type(mt) == "table" and type(rawget(mt, "__index")) == "table" then
      wrap_all(rawget(mt, "__index"), "ember." .. c[1], ":", 1)
    end
  end
  -- after the classes, so a class found in a table (ember.Tensor) keeps its methods' numbering
  for _, path in ipairs(doc.TABLES) do wrap_all(doc.resolve(ember, path), path, ".", 0) end
end
require("ember.suggest").apply(ember)   -- from here on a misspelt ember.xxx raises

return ember
