-- ember.loader: where require("ember") finds libember, and the one call a host
-- makes to name it from Lua (no environment variable needed). It loads
-- nothing itself until lua/ember/init.lua asks; it needs no libember, so a
-- host may require it first:
--   require("ember.loader").set_library(dir .. "/libember.so")  -- or the folder
--   local ember = require("ember")
-- Each Lua state (a LÖVE thread, a Neovim worker) has its own loader and calls
-- set_library again if it needs to. docs/hosts.md says how each host ships it.
local ffi = require("ffi")
local errors = require("ember.errors")

local loader = {}

-- libember's file name as the OS names it (CMakeLists.txt: ember.dll on Windows)
local LIBNAME = ffi.os == "Windows" and "ember.dll" or ffi.os == "OSX" and "libember.dylib" or "libember.so"
local SEPS = ffi.os == "Windows" and "/\\" or "/"   -- folder separators, in a pattern's [...]

local chosen          -- set_library's path, or nil
local loaded          -- the path libember was loaded from, once it is

-- the folder of this file as its chunk name gives it ("ember" in LÖVE, where
-- chunk names are relative to the game's folder)
local function here()
  local src = debug.getinfo(1, "S").source
  return (src:sub(1, 1) == "@" and src:sub(2) or src):match("^(.*)[" .. SEPS .. "][^" .. SEPS .. "]*$") or "."
end

-- "/x"; on Windows also "C:\x", "C:/x" and "\\server\x"
local function is_absolute(p)
  return p:sub(1, 1) == "/" or (ffi.os == "Windows" and (p:find("^%a:[/\\]") ~= nil or p:sub(1, 1) == "\\"))
end
-- holds a folder separator ('/', and '\' on Windows)
local function has_sep(p) return p:find("[" .. SEPS .. "]") ~= nil end

-- nil for a missing path, else "file" or "directory" (reading a folder fails with EISDIR)
local function kind(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local _, _, code = f:read(0)
  f:close()
  return code == 21 and "directory" or "file"
end

-- Sets the libember require("ember") loads: a file, or a folder that holds
-- libember.so (ember.dll on Windows). Before the first require("ember") in
-- this Lua state; after it, only the path already loaded is accepted
-- (anything else raises).
function loader.set_library(path, ...)
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if v ~= nil then errors.extra_argument("ember.loader.set_library", i + 1, v, { "path" }) end
  end
  if type(path) ~= "string" or path == "" then
    errors.fail("loader.set_library", "expected the path of libember (a file or its folder) as "
      .. "argument 1, got " .. (path == "" and "an empty string" or type(path)))
  end
  local file = path
  if kind(path) == "directory" then file = path:gsub("[" .. SEPS .. "]+$", "") .. "/" .. LIBNAME end
  -- as _load spells it: a bare file name is a path in the current folder
  if not has_sep(file) then file = "./" .. file end
  if loaded then
    if file ~= loaded then
      errors.fail("loader.set_library", "ember is already loaded in this Lua state from " .. loaded
        .. "; call set_library before the first require(\"ember\") (asked for " .. file .. ")")
    end
    return file
  end
  chosen = file
  return file
end

-- The paths require("ember") tries, in order, each {path =, from =} (from
-- says where the path came from). $EMBER_LIB, when set, is the only one; then
-- set_library's, the only one; else the path an install recorded
-- (ember/config.lua), libember.so beside these Lua files (a vendored copy),
-- the build folder of a source checkout, the usual install locations
-- relative to <prefix>/share/lua/5.1, and the system linker's search path.
-- In LÖVE, whose chunk names are relative to the game, libember.so beside
-- the Lua files is found through love.filesystem (the game's folder or the
-- save folder), and for a game in a .love archive or fused, beside it,
-- instead of the checkout and prefix paths. A path that cannot be used at
-- all (a library inside a .love archive) comes with why, in .problem.
function loader.candidates()
  local list = {}
  local function add(path, from, problem)
    list[#list + 1] = { path = path, from = from, problem = problem }
    return list[#list]
  end
  local env = os.getenv("EMBER_LIB")
  if env and env ~= "" then
    add(env, "$EMBER_LIB")
    return list
  end
  if chosen then
    add(chosen, "ember.loader.set_library")
    return list
  end
  local ok, cfg = pcall(require, "ember.config")
  if ok and type(cfg) == "table" and cfg.libpath then add(cfg.libpath, "ember/config.lua") end
  local dir = here()
  local love = rawget(_G, "love")   -- LÖVE's global, when this runs inside LÖVE
  local lfs = type(love) == "table" and love.filesystem
  if not is_absolute(dir) and type(lfs) == "table" and lfs.getRealDirectory then
    -- LÖVE loads Lua files from its own filesystem (the game's folder or
    -- archive, the save folder): the chunk name is relative to it, not to
    -- the process's folder, so only LÖVE's places are looked at
    local from = "beside the Lua files (LÖVE's filesystem)"
    local rel = dir .. "/" .. LIBNAME
    local real = lfs.getRealDirectory(rel)
    if not real then
      add(rel, from, "not found in the game's folder or save folder")
    elseif kind(real) == "file" then
      add(real .. "/" .. rel, from, "inside the archive " .. real .. ": the system cannot load a "
        .. "library from a .love")
    else
      add(real .. "/" .. rel, from)
    end
    -- a .love or a fused game: the folder holding it (or the executable)
    if lfs.getSourceBaseDirectory and (not real or kind(real) == "file") then
      add(lfs.getSourceBaseDirectory() .. "/" .. LIBNAME, "beside the .love archive or fused game")
    end
  else
    add(dir .. "/" .. LIBNAME, "beside the Lua files")
    add(dir .. "/../../build/" .. LIBNAME, "the source checkout's build folder")
    -- a Windows install keeps its DLLs in <prefix>/bin
    local libdirs = ffi.os == "Windows" and { "bin", "lib" }
      or { "lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu" }
    for _, rel in ipairs(libdirs) do
      add(dir .. "/../../../../" .. rel .. "/" .. LIBNAME, "<prefix>/" .. rel)
    end
  end
  add("ember", "the system linker's search path").system = true
  return list
end

-- Loads libember: the first candidate that exists and loads. Raises, listing
-- every path tried and why each failed.
function loader._load()
  local tried = {}
  for _, c in ipairs(loader.candidates()) do
    local why, path = c.problem, c.path
    -- ffi.load takes a bare file name for a library name: a relative path keeps its ./
    if not c.system and not has_sep(path) then path = "./" .. path end
    if not why then
      if not c.system and not kind(path) then
        why = "no such file"
      elseif not c.system and kind(path) == "directory" then
        why = "is a folder"
      else
        local ok, lib = pcall(ffi.load, path)
        if ok then
          loaded = path
          return lib, path
        end
        why = tostring(lib)
      end
    end
    tried[#tried + 1] = "  " .. c.path .. " (" .. c.from .. "): " .. why
  end
  error("ember: cannot load libember; tried, in order:\n" .. table.concat(tried, "\n")
    .. "\n(name it with require(\"ember.loader\").set_library(path) before require(\"ember\"), "
    .. "or $EMBER_LIB; docs/hosts.md)", 0)
end

-- the path libember was loaded from in this Lua state, or nil
function loader.loaded() return loaded end

return loader
