-- ember.errors: the one way ember raises an error. Every message reads
-- "ember.<op>: ..." with shapes written {2, 3}, and points at the user's
-- line: the level is found by walking the stack past ember's own files (this
-- folder, and the wrappers generated from source text), so no caller passes a
-- level. A method called with '.' instead of ':' (x.sum(), x.add(y)) is named
-- as such in the message about the argument it left out. No argument is
-- silently ignored: check_arity and arity_checked (the wrappers init.lua puts
-- over the public API) raise for a value past a function's parameters,
-- extra_argument is the one wording of that error for every caller, and
-- known_options raises for an unknown key of an options table. An error
-- names the public function the user's line called (init.lua registers
-- them, register_public): "ember.std: dim 3 out of range ... (in ember.var)".
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

-- The public functions by the names the user calls them: init.lua
-- registers the functions its wrappers call (one function may have several
-- names: ember.std and Tensor:std, ember.inverse and ember.linalg.inv), and
-- the constructors of classes with a function that names the class from the
-- constructor's first argument. About 70 KB of heap.
local public_fn = setmetatable({}, { __mode = "k" })   -- fn -> its name, {names...}, or a resolver
local class_names = {}                                  -- the classes' names (constructors)
local public_names, by_last   -- every public name -> true, last part -> the one name ending so or false (built
                              -- at the first error that needs them, from public_fn and class_names)
function errors.register_public(fn, name)
  if type(name) == "function" then public_fn[fn] = name return end
  public_names, by_last = nil, nil
  if fn == nil then class_names[#class_names + 1] = name return end   -- a class: its name only
  local had = public_fn[fn]
  if had == nil then public_fn[fn] = name return end
  if had == name or type(had) == "function" then return end
  if type(had) == "table" then
    for _, n in ipairs(had) do if n == name then return end end
  end
  -- several names (a table only then: one per public function would weigh on every collection);
  -- a function's name first: both ember.std(x) and x:std() read as it
  local names = type(had) == "table" and had or { had }
  if name:find(":", 1, true) or names[1]:find(":", 1, true) == nil then
    names[#names + 1] = name
  else
    table.insert(names, 1, name)
  end
  public_fn[fn] = names
end

-- fn's names as a list that is also a set, or nil
local function names_of(fn)
  local v = public_fn[fn]
  if type(v) == "string" then return { v, [v] = true } end
  if type(v) == "table" then
    local set = {}
    for i, n in ipairs(v) do set[i], set[n] = n, true end
    return set
  end
end

local function last_part(name) return name:match("[^.:]+$") end
-- a method named by its class, dotted or not ("ember.GradManager.backward",
-- "ember.nn.Linear:to"): already what the user called, as the class writes it
local function class_method(op) return op:match("[.:]%u[%w_]*[.:][%w_]+$") ~= nil end

-- op as a public name: itself, or the one public name ending as it does
-- (ember.linear -> ember.nn.functional.linear, ember.optim.StepLR ->
-- ember.optim.lr_scheduler.StepLR); Tensor's methods are left out: their
-- errors keep reading "ember.<op>" (ember.add_, ember.t), as the docs write them
local function qualified(op)
  if not public_names then
    public_names, by_last = {}, {}
    for _, v in pairs(public_fn) do
      if type(v) == "string" then public_names[v] = true end
      if type(v) == "table" then for _, n in ipairs(v) do public_names[n] = true end end
    end
    for _, n in ipairs(class_names) do public_names[n] = true end
    for n in pairs(public_names) do
      local l = last_part(n)
      if n:sub(1, 13) == "ember.Tensor:" then l = false end   -- a method's errors read ember.<op> (the header)
      if l then by_last[l] = by_last[l] == nil and n or false end
    end
  end
  if public_names[op] or class_method(op) then return op end
  return by_last[last_part(op)] or op
end

-- msg ("ember.<op>: text") as the user called it: names, the names of the
-- public function the user's line called (or nil). A message naming
-- another function (ember.std raising through ember.var, F.linear through
-- ember.linear) names the called one, "ember.std: text (in ember.var)",
-- without the "(in ...)" when both end alike (the same op under its public
-- path). A method raising under its object's class ("ember.nn.Linear: ..."
-- from a module's load_state_dict) keeps it; so does a message naming one of
-- the called function's own names.
local function as_called(msg, names)
  local op, text = msg:match("^(ember%.[%w_.:]+): (.*)$")
  if not op then return msg end
  if names and not names[op] then
    local name = names[1]
    local same = last_part(op) == last_part(name)
    if same and (name:sub(1, 13) == "ember.Tensor:" or class_method(op)) then return msg end   -- "ember.add_: ..."
    if not (name:find(":", 1, true) and last_part(op):match("^%u")) then
      return name .. ": " .. text .. (same and "" or " (in " .. qualified(op) .. ")")
    end
  end
  local q = qualified(op)
  return q == op and msg or q .. ": " .. text
end

-- The names of the public function the user's line called: of ember's
-- frames below the user's (level, as the caller counts it), the one nearest
-- the user's that is public (a tail call replaces a frame by the callee's:
-- then the callee is the nearest).
local function called_from(level)
  local names
  for l = 3, level > 0 and level or math.huge do   -- 0: no user frame (a coroutine of ember's calls)
    local info = debug.getinfo(l, "f")
    if not info then break end
    local v = public_fn[info.func]
    if type(v) == "function" then
      local _, first = debug.getlocal(l, 1)
      v = v(first)
      if v then names = { v, [v] = true } end
    elseif v then
      names = names_of(info.func)
    end
  end
  return names
end

-- The name of the public function the user's line called when its frame
-- is the one right below the user's, C frames aside (nil otherwise): a
-- function that words its errors for ember's own callers can tell a call of
-- the user's (json.lua).
function errors.called()
  local level = user_frame()
  for l = level - 1, 2, -1 do   -- past C frames (the user's pcall)
    local info = debug.getinfo(l, "fS")
    if info.what ~= "C" then
      local names = type(public_fn[info.func]) ~= "function" and names_of(info.func)
      return names and names[1] or nil
    end
  end
end

-- Raises msg at the user's line, naming the public function called there.
local function throw(msg)
  local level = user_frame()
  error(as_called(msg, called_from(level)), level)
end

-- Raises msg (already "ember.<op>: ...") at the user's line.
function errors.raise(msg)
  throw(msg)
end

-- Raises "ember.<op>: <msg>" at the user's line; op may carry the "ember."
-- already. With more arguments msg is a format: fail(op, "got %d", n).
function errors.fail(op, msg, ...)
  if select("#", ...) > 0 then msg = msg:format(...) end
  if op:sub(1, 6) ~= "ember." then op = "ember." .. op end
  throw(op .. ": " .. msg)
end

-- A shape as {2, 3}, from a list of sizes or a tensor.
function errors.shape(s)
  if type(s) == "table" and type(s.shape) == "function" then s = s:shape() end
  return "{" .. table.concat(s, ", ") .. "}"
end

-- The smallest and largest values of a tensor as messages show them ("-1",
-- "1.5"; "none" for an empty tensor).
function errors.extremes(t)
  if t:numel() == 0 then return "none", "none" end
  local f = t:detach():to("float64")
  return ("%.6g"):format(f:min():item()), ("%.6g"):format(f:max():item())
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
  error(as_called("ember." .. op .. ": " .. msg, called_from(level)), level)
end

-- Raises "ember.<op>: unknown option 'k' (known: a, b, ...)" for the first key of
-- opts that is not in the set allowed
local function only_allowed(op, opts, allowed)
  for k in pairs(opts) do
    if not allowed[k] then
      local names = {}
      for a in pairs(allowed) do names[#names + 1] = a end
      table.sort(names)
      throw(("ember.%s: unknown option '%s' (known: %s)"):format(op, tostring(k), table.concat(names, ", ")))
    end
  end
end

-- Raises as only_allowed does for a key of the options table opts that is not
-- in the list known; returns opts.
function errors.known_options(op, opts, known)
  if type(opts) ~= "table" then return opts end
  local set = {}
  for _, k in ipairs(known) do set[k] = true end
  only_allowed(op, opts, set)
  return opts
end

-- An options table checked: nil gives {}, anything but a plain table raises
-- "ember.<op>: options must be a table, got <type>", and a key not in
-- allowed (a set) raises as known_options does.
function errors.options(op, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" or package.loaded.ember.is_tensor(opts) then
    throw(("ember.%s: options must be a table, got %s"):format(op, type(opts)))
  end
  only_allowed(op, opts, allowed)
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
-- the function behind an arity_checked wrapper (fn itself when it is none)
function errors.unwrapped(fn) return original[fn] or fn end

-- a value as a message shows it: 'text', 5, nil, a table, a tensor
local function short(v)
  if type(v) == "string" then return "'" .. v .. "'" end
  if type(v) == "table" and package.loaded.ember and package.loaded.ember.is_tensor(v) then return "a tensor" end
  return type(v) == "table" and "a table" or tostring(v)
end
errors.show = short

-- A flag: nil (false) or a boolean, anything else raises "ember.<op>: <what>
-- must be a boolean, got <value>" (a truthy "yes" or 0 is not taken as
-- true). Returns the flag as a boolean.
function errors.boolean(op, what, v)
  if v ~= nil and type(v) ~= "boolean" then
    throw(("ember.%s: %s must be a boolean, got %s"):format(op, what, short(v)))
  end
  return v == true
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
