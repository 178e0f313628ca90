-- ember.errors: the one way ember raises an error. Every message reads
-- "ember.<op>: ..." with shapes written {2, 3}, and points at the user's
-- line: the level is found by walking the stack past ember's own files (this
-- folder, and the wrappers generated from source text), so no caller passes a
-- level. A method called with '.' instead of ':' (x.sum(), x.add(y)) is named
-- as such in the message about the argument it left out.
local ffi = require("ffi")

local errors = {}

local here = debug.getinfo(1, "S").source:match("^(@.*[/\\])errors%.lua$") or "@ember/"
-- the chunk names of the package's files start with this (the ember command
-- defers a Ctrl-C while such code runs: cli/src/main.c, docs/hardening.md)
errors.source_prefix = here

local function is_ember(info)
  local src = info.source
  return info.what == "C" or src:sub(1, #here) == here or src:sub(1, 7) == "=ember/"
end

-- The level of the first frame that is not ember's, and of the one below it
-- (the ember function the user called), both as the caller of this function
-- counts them (error's and debug.getinfo's levels there); 0 when there is none.
local function user_frame()
  local level = 3
  while true do
    local info = debug.getinfo(level, "S")
    if info == nil then return 0 end
    if not is_ember(info) then return level - 1, level - 2 end
    level = level + 1
  end
end

-- Raises msg (already "ember.<op>: ...") at the user's line.
function errors.raise(msg)
  error(msg, (user_frame()))
end

-- Raises "ember.<op>: <msg>" at the user's line.
function errors.fail(op, msg)
  error("ember." .. op .. ": " .. msg, (user_frame()))
end

-- A shape as {2, 3}, from a list of sizes or a tensor.
function errors.shape(s)
  if type(s) == "table" and type(s.shape) == "function" then s = s:shape() end
  return "{" .. table.concat(s, ", ") .. "}"
end

-- Whether two shapes (lists of sizes or tensors) are equal.
function errors.same_shape(a, b)
  if type(a) == "table" and type(a.shape) == "function" then a = a:shape() end
  if type(b) == "table" and type(b.shape) == "function" then b = b:shape() end
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- "expected <what> as argument <n>, got <type>", and for a method called
-- with '.' the call that was meant: the user's frame called `name` as a
-- field, `name` is a Tensor method, and the argument is missing.
function errors.argument(op, n, what, value)
  local msg = "expected " .. what .. " as argument " .. n .. ", got " .. type(value)
  local level, callee = user_frame()
  if value == nil and callee then
    local info = debug.getinfo(callee, "n")
    local Tensor = package.loaded.ember and package.loaded.ember.Tensor
    if info and info.namewhat == "field" and Tensor and rawget(Tensor, info.name) then
      msg = msg .. " (a method called with '.': write x:" .. info.name .. "(...), not x." .. info.name
        .. "(...))"
    end
  end
  error("ember." .. op .. ": " .. msg, level)
end

-- Out of memory under a memory limit first runs this (the binding releases
-- the tensors the GC has collected), so the caller's next attempt sees that
-- memory.
local on_oom = function() end
function errors.set_oom_handler(fn) on_oom = fn end

-- The only place a C status becomes a Lua error: a negative rc raises
-- "ember." .. ember_last_error() at the user's line; others are returned.
function errors.check(rc)
  if rc < 0 then
    local C = package.loaded.ember._C
    local msg = "ember." .. ffi.string(C.ember_last_error())
    if rc == C.EMBER_ERR_OOM then on_oom() end
    errors.raise(msg)
  end
  return rc
end

return errors
