-- boot.lua: run by ember_lua_open (cli/src/ember_lua.c) in a fresh LuaJIT
-- state, compiled into libember_lua. It puts the ember package on
-- package.path, makes require("ember") load the libember this process is
-- linked with, loads ember and checks that C and Lua share one library.
-- Arguments: the package dir ("" if none found), the path of the linked
-- libember ("" if unknown), a probe string, and the dirs that were searched
-- (for the error message).
local dir, libpath, probe, searched = ...

if dir ~= "" then
  package.path = dir .. "/?.lua;" .. dir .. "/?/init.lua;" .. package.path
end
if libpath ~= "" then
  -- init.lua asks ember.config where libember is; answer with the library
  -- already loaded in this process (ffi.load of its path reuses it)
  package.preload["ember.config"] = function() return { libpath = libpath } end
end

local ok, ember = pcall(require, "ember")
if not ok then
  local msg = tostring(ember)
  if msg:find("module 'ember' not found", 1, true) then
    msg = "cannot find the ember Lua package (looked in " .. searched
      .. " and on package.path)\n" .. msg
  end
  error(msg, 0)
end
_G.ember = ember

-- The probe goes through the FFI into the library Lua loaded; the C side then
-- reads it back from the library it links: two copies keep two messages.
ember._C.ember_set_error(probe)
return ember._libpath
