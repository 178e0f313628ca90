-- ember.errors: the one way ember raises an error. Every message reads
-- "ember.<op>: ..." with shapes written {2, 3}, and points at the user's
-- line: the level is found by walking the stack past ember's own files (this
-- folder, and the wrappers generated from source text), so no caller passes a
-- level. A method called with '.' instead of ':' (x.sum(), x.add(y)) is named
-- as such in the message about the argument it left out. No argument is
-- silently ignored: check_arity and arity_checked (the wrappers init.lua puts
-- over the public API) raise for a value past a function's parameters,
-- extra_argument is the one wording of that error for every caller, and
-- known_options raises for an unknown key of an options table.
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

-- Raises "ember.<op>: <msg>" at the user's line; op may carry the "ember."
-- already. With more arguments msg is a format: fail(op, "got %d", n).
function errors.fail(op, msg, ...)
  if select("#", ...) > 0 then msg = msg:format(...) end
  if op:sub(1, 6) ~= "ember." then op = "ember." .. op end
  error(op .. ": " .. msg, (user_frame()))
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

-- Raises "ember.<op>: unknown option 'k' (known: a, b, ...)" for a key of
-- the options table opts that is not in the list known; returns opts.
function errors.known_options(op, opts, known)
  if type(opts) ~= "table" then return opts end
  local set = {}
  for _, k in ipairs(known) do set[k] = true end
  for k in pairs(opts) do
    if not set[k] then
      local names = {}
      for i, n in ipairs(known) do names[i] = n end
      table.sort(names)
      error(("ember.%s: unknown option '%s' (known: %s)"):format(op, tostring(k), table.concat(names, ", ")),
        (user_frame()))
    end
  end
  return opts
end

-- An options table checked: nil gives {}, anything but a plain table raises
-- "ember.<op>: options must be a table, got <type>", and a key not in
-- allowed (a set) raises as known_options does.
function errors.options(op, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" or package.loaded.ember.is_tensor(opts) then
    error(("ember.%s: options must be a table, got %s"):format(op, type(opts)), (user_frame()))
  end
  for k in pairs(opts) do
    if not allowed[k] then
      local names = {}
      for a in pairs(allowed) do names[#names + 1] = a end
      table.sort(names)
      error(("ember.%s: unknown option '%s' (known: %s)"):format(op, tostring(k), table.concat(names, ", ")),
        (user_frame()))
    end
  end
  return opts
end

-- fn's parameter count, or false when fn is variadic (or C); through an
-- arity_checked wrapper, the wrapped function's. Nothing is cached: the
-- wrappers are many, and every table the Lua heap keeps makes each of the
-- collections ember forces cost more.
local original = setmetatable({}, { __mode = "k" })   -- arity_checked's wrapper -> fn
local function nparams(fn)
  fn = original[fn] or fn
  local info = debug.getinfo(fn, "Su")
  if info.what == "C" or info.isvararg or not info.nparams then return false end
  return info.nparams
end
-- fn's parameter names (for messages)
local function param_names(fn)
  fn = original[fn] or fn
  local out = {}
  for i = 1, nparams(fn) do out[i] = debug.getlocal(fn, i) or ("arg" .. i) end
  return out
end
errors.nparams = nparams

local function short(v)
  if type(v) == "string" then return "'" .. v .. "'" end
  if type(v) == "table" and package.loaded.ember and package.loaded.ember.is_tensor(v) then return "a tensor" end
  return type(v) == "table" and "a table" or tostring(v)
end

-- The one wording of a value past a call's arguments, raised at the user's
-- line: "<op>: extra argument <pos> (<value>): it takes <n> (<names>)<tail>"
-- (names: the arguments as the caller counts them, no self; tail: what may
-- follow them, as ", then an options table"). check_arity, nn/args.lua's
-- A.positional (and nn/signature.lua's S.parse on it) and the functions
-- that count their own arguments raise through it.
function errors.extra_argument(op, pos, value, names, tail, show)
  error(("%s: extra argument %d (%s): it takes %d (%s)%s"):format(op, pos, (show or short)(value), #names,
    table.concat(names, ", "), tail or ""), (user_frame()))
end

-- Raises when a call passes a value past fn's parameters (skip: how many of
-- them the caller does not count, 1 for self): "ember.<op>: extra argument
-- 4 (...): it takes 3 (in_features, out_features, opts)". A variadic fn
-- takes anything; trailing nils are no values. show(v) writes a value.
function errors.check_arity(op, fn, skip, show, ...)
  local n = select("#", ...)
  local np = nparams(fn)
  if not np or n + skip <= np then return end
  for i = math.max(1, np - skip + 1), n do
    local v = select(i, ...)
    if v ~= nil then
      local p, names = param_names(fn), {}
      for k = skip + 1, np do names[#names + 1] = p[k] end
      errors.extra_argument(op, i, v, names, nil, show)
    end
  end
end

-- fn behind a check that no value comes past its parameters (fn itself when
-- it is variadic); skip as for check_arity. The wrapper has fixed
-- parameters, fn's and three more (a vararg function costs LuaJIT a frame
-- set-up on every call), so it sees the first three values past fn's. LuaJIT
-- counts hotness and starts traces per prototype: one prototype shared by
-- hundreds of wrappers made calls through them cost about 0.8 us more
-- (F.linear, measured), so a wrapper of a hot function (hot = true: the ops,
-- Tensor's methods, nn.functional) is compiled from its own source; each
-- such prototype adds about 0.5 KB to the Lua heap, which every collection
-- walks, so the others share one prototype per parameter count. The wrappers
-- are remembered, so wrapping twice wraps once.
local shared = {}
local function compile(n, skip, hot)
  local key = n .. ":" .. skip
  if not hot and shared[key] then return shared[key] end
  local ps = {}
  for i = 1, n do ps[i] = "p" .. i end
  local after = {}
  for i = skip + 1, n do after[#after + 1] = "p" .. i end
  after[#after + 1] = "e1, e2, e3"
  local own = table.concat(ps, ", ")
  local src = ([[
local check = ...
return function(fn, op, skip)
  return function(%s)
    if e1 ~= nil or e2 ~= nil or e3 ~= nil then check(op, fn, skip, nil, %s) end
    return fn(%s)
  end
end]]):format(n > 0 and own .. ", e1, e2, e3" or "e1, e2, e3", table.concat(after, ", "), own)
  local make = assert(load(src, "=ember/arity"))(errors.check_arity)
  if not hot then shared[key] = make end
  return make
end

function errors.arity_checked(op, fn, skip, hot)
  if original[fn] then return fn end
  local np = nparams(fn)
  if not np then return fn end
  local w = compile(np, math.min(skip, np), hot)(fn, op, skip)
  original[w] = fn
  return w
end

-- the count of values a call of fn may pass after the skip it does not
-- count, or false when fn is variadic
function errors.arity_limit(fn, skip)
  local np = nparams(fn)
  return np and math.max(0, np - skip)
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
