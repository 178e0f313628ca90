-- bridge.lua: the Lua half of libember_lua (cli/src/ember_lua.c), compiled
-- into the library and run once per Lua state with the loaded ember module.
-- Tensor pointers cross as light userdata: C keeps ownership of its
-- references, Lua retains before wrapping (ember._wrap takes one reference)
-- and retains what it writes into the host's out array.
-- Errors about the host's arguments are raised as { arg = message } so the C
-- side reports EMBER_ERR_ARG without a traceback; anything else raised while
-- the user's function runs is a Lua error with its traceback.
local ember = ...
local ffi = require("ffi")

local C = ember._C
local is_tensor, wrap, lookup = ember.is_tensor, ember._wrap, ember._lookup
local tensor_ptr, tensor_pptr = ffi.typeof("ember_tensor *"), ffi.typeof("ember_tensor **")
local type, select, error, rawget = type, select, error, rawget

local B = {}

local function argerror(msg) error({ arg = msg }, 0) end

local NAME = "^[%a_][%w_]*$"
-- the value at a global name or dotted path ("model.step"); raises for a bad name
local function resolve(api, name)
  local v, path = _G, nil
  for part in (name .. "."):gmatch("([^.]*)%.") do
    if not part:match(NAME) then argerror(api .. ": bad name '" .. name .. "'") end
    if path and type(v) ~= "table" then
      argerror(api .. ": '" .. path .. "' is a " .. type(v) .. ", not a table")
    end
    if v == nil then break end
    v = v[part]
    path = path and path .. "." .. part or part
  end
  return v
end

-- The Lua tensor sharing the C tensor behind light userdata ud.
function B.wrap(api, ud)
  local p = ffi.cast(tensor_ptr, ud)
  if C.ember_tensor_lua_slot(p) ~= 0 then
    local t = lookup(p)
    if t == nil or rawget(t, "_c") ~= p then
      ember._sweep()   -- our own wrapper may have died without being swept yet
      t = lookup(p)
      if C.ember_tensor_lua_slot(p) ~= 0 and (t == nil or rawget(t, "_c") ~= p) then
        argerror(api .. ": the tensor is already shared with another ember Lua state")
      end
    end
  end
  C.ember_tensor_retain(p)
  return wrap(p)
end

local function as_result(api, what, v, missing)
  if type(v) == "number" then v = ember.tensor(v) end
  if not is_tensor(v) then
    local is = missing and "missing" or v == nil and "nil" or "a " .. type(v)
    argerror(api .. ": " .. what .. " is " .. is .. ", not a tensor")
  end
  local c = rawget(v, "_c")
  if c == nil then argerror(api .. ": " .. what .. " is a freed tensor") end
  return c
end

-- Writes the first nout values into the host's array, each retained; all
-- are checked before any is written, so a failure leaves the array NULL.
local function collect(api, fname, out_ud, nout, ...)
  local n = select("#", ...)
  local ptrs = {}
  for i = 1, nout do
    ptrs[i] = as_result(api, "result " .. i .. " of '" .. fname .. "'", (select(i, ...)), i > n)
  end
  local out = ffi.cast(tensor_pptr, out_ud)
  for i = 1, nout do
    C.ember_tensor_retain(ptrs[i])
    out[i - 1] = ptrs[i]
  end
end

function B.call(fname, out_ud, nout, ...)
  local api = "ember_lua_call"
  local f = resolve(api, fname)
  local mt = getmetatable(f)
  if type(f) ~= "function" and not (type(mt) == "table" and mt.__call) then
    argerror(api .. ": '" .. fname .. "' is " .. (f == nil and "not defined" or "a " .. type(f))
      .. ", not a function")
  end
  local nin = select("#", ...)
  local args = { ... }
  for i = 1, nin do
    if args[i] ~= nil then args[i] = B.wrap(api, args[i]) end
  end
  return collect(api, fname, out_ud, nout, f(unpack(args, 1, nin)))
end

function B.set(name, ud)
  local api = "ember_lua_set_tensor"
  local parent, key = name:match("^(.*)%.([^.]*)$")
  local t = _G
  if parent then
    t = resolve(api, parent)
    if type(t) ~= "table" then
      argerror(api .. ": '" .. parent .. "' is " .. (t == nil and "not defined" or "a " .. type(t))
        .. ", not a table")
    end
  else
    key = name
  end
  if not key:match(NAME) then argerror(api .. ": bad name '" .. name .. "'") end
  t[key] = ud ~= nil and B.wrap(api, ud) or nil
end

function B.get(name, out_ud)
  local api = "ember_lua_get_tensor"
  local v = resolve(api, name)
  local c = as_result(api, "'" .. name .. "'", v, false)
  C.ember_tensor_retain(c)
  ffi.cast(tensor_pptr, out_ud)[0] = c
end

-- Borrowed pointer of the tensor v into out_ud[0] (left NULL otherwise).
function B.peek(v, out_ud)
  if is_tensor(v) then
    local c = rawget(v, "_c")
    if c ~= nil then ffi.cast(tensor_pptr, out_ud)[0] = c end
  end
end

-- sets the core's message through the FFI: the C side reads it back to
-- check that Lua and C use one libember
function B.probe(s) C.ember_set_error(s) end

return B
