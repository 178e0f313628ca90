-- repl.lua: the Lua half of the ember REPL (cli/src/repl.c), compiled into the
-- ember command: compiling a line (as an expression first; `= expr` and
-- `?name` as below), telling an incomplete chunk from a wrong one, printing
-- values, help, and tab completion. Line editing, history and signals are C's.
local R = {}

local type, tostring, pairs, pcall, select = type, tostring, pairs, pcall, select
local getmetatable = debug.getmetatable   -- sees through __metatable
local concat, sort, format = table.concat, table.sort, string.format

---------------------------------------------------------------- compiling
-- Returns the function, or nil, the message and whether more input may
-- complete the chunk (the parser stopped at the end: "... near '<eof>'").
-- Code typed at the prompt runs in the interpreter (jit.off), so that Ctrl-C
-- can stop a loop written here; compiled traces never check for it.
local function at_end(msg) return msg:sub(-7) == "'<eof>'" end

-- `?name`: the documentation of a public name, or of the value an
-- expression gives (`?x.sum`, `?model`)
local function help_line(expr)
  local doc = require("ember.doc")
  local entry = expr ~= "" and doc.find(expr)
  if not entry and expr ~= "" then
    local f = loadstring("return " .. expr, "=stdin")
    local ok, v = false, nil
    if f then ok, v = pcall(f) end
    if ok and v ~= nil then entry = doc.find_value(v) end
  end
  io.write(entry and doc.show(entry) or doc.text(expr ~= "" and expr or nil), "\n")
end

-- `= expr`: the values printed by print, tab-separated, as plain LuaJIT's
-- prompt prints them (tables as their addresses, nothing for no values)
local function plain(src)
  local f, err = loadstring("return " .. src, "=stdin")
  if not f then return nil, err, at_end(err) end
  if jit then jit.off(f, true) end
  local function show(...)
    if select("#", ...) > 0 then print(...) end
  end
  return function() return show(f()) end
end

function R.compile(src)
  local doc_expr = src:match("^%s*%?%s*(.-)%s*$")
  if doc_expr then return function() help_line(doc_expr) end end
  if src:sub(1, 1) == "=" then return plain(src:sub(2)) end
  local f, err_expr = loadstring("return " .. src, "=stdin")
  local err
  if f then
    -- the same expressions as arguments: `return error("x")` would be a tail
    -- call, which loses the line the error names. The ')' goes on a line of
    -- its own only after a comment: there, errors in the last expression
    -- would name that line.
    local close = src:find("--", 1, true) and "\n)" or ")"
    f = loadstring("return (function(...) return ... end)(" .. src .. close, "=stdin") or f
  else
    f, err = loadstring(src, "=stdin")
  end
  if f then
    if jit then jit.off(f, true) end
    return f
  end
  return nil, err, at_end(err) or at_end(err_expr)
end

---------------------------------------------------------------- printing
local IDENT = "^[%a_][%w_]*$"
local MAX_ITEMS = 40

local function is_tensor(v)
  local e = package.loaded.ember
  return type(e) == "table" and type(e.is_tensor) == "function" and e.is_tensor(v)
end

local function has_tostring(v)
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__tostring ~= nil
end

local function safe_tostring(v)
  local ok, s = pcall(tostring, v)
  return ok and tostring(s) or "<" .. type(v) .. ": __tostring failed>"
end

-- one value inside a table: nothing is expanded
local function short(v)
  local tv = type(v)
  if tv == "string" then return (format("%q", v):gsub("\\\n", "\\n")) end
  if is_tensor(v) then
    local ok, s = pcall(function() return "tensor(" .. v.dtype .. ", {" .. concat(v:shape(), ",") .. "})" end)
    return ok and s or safe_tostring(v)
  end
  if tv == "table" then return has_tostring(v) and safe_tostring(v) or "{...}" end
  return safe_tostring(v)
end

-- public names before private ones ('_'), then by type and value
local function key_order(a, b)
  local function private(k) return type(k) == "string" and k:sub(1, 1) == "_" end
  if private(a) ~= private(b) then return private(b) end
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

-- a table, one level deep: {1, 2, x = 3}
local function show_table(t)
  local parts, n = {}, #t
  for i = 1, math.min(n, MAX_ITEMS) do parts[i] = short(t[i]) end
  local keys = {}
  for k in pairs(t) do
    if not (type(k) == "number" and k >= 1 and k <= n and k == math.floor(k)) then
      keys[#keys + 1] = k
    end
  end
  sort(keys, key_order)
  for _, k in ipairs(keys) do
    if #parts >= MAX_ITEMS then break end
    local ks = (type(k) == "string" and k:match(IDENT)) and k or "[" .. short(k) .. "]"
    parts[#parts + 1] = ks .. " = " .. short(t[k])
  end
  if n + #keys > #parts then parts[#parts + 1] = "..." end
  return "{" .. concat(parts, ", ") .. "}"
end

function R.show_value(v)
  if type(v) == "table" and not has_tostring(v) then return show_table(v) end
  return safe_tostring(v)
end

-- the text printed for the values a line returned ("" for none)
function R.show(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = R.show_value((select(i, ...))) end
  return concat(parts, "\t")
end

---------------------------------------------------------------- completion
local KEYWORDS = { "and", "break", "do", "else", "elseif", "end", "false", "for", "function",
  "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until",
  "while" }

local function index(v, k)
  local ok, r = pcall(function() return v[k] end)
  if ok then return r end
  return nil
end

-- names reachable from v with '.' or ':': its own keys, then the __index
-- tables of its metatables (a class's methods); when __index is a function,
-- the metatable's own functions (ember's Tensor)
local function names(v, methods_only, show_private, out)
  local seen = 0
  local function add_from(t)
    for k, x in pairs(t) do
      if type(k) == "string" and k:match(IDENT) and (show_private or k:sub(1, 1) ~= "_")
        and (not methods_only or type(x) == "function"
          or (type(getmetatable(x)) == "table" and getmetatable(x).__call)) then
        out[k] = true
      end
    end
  end
  if type(v) == "table" then add_from(v) end
  while seen < 8 do
    seen = seen + 1
    local mt = getmetatable(v)
    if type(mt) ~= "table" then break end
    local idx = rawget(mt, "__index")
    if type(idx) == "table" then
      add_from(idx)
      v = idx
    else
      if type(idx) == "function" then add_from(mt) end
      break
    end
  end
end

-- every completion of `text` ("ember.nn.Li" -> {"ember.nn.Linear"}), sorted
function R.complete(text)
  local prefix, sep, partial = text:match("^(.-)([.:])([%w_]*)$")
  local base, found = _G, {}
  if prefix then
    for part in (prefix .. "."):gmatch("([^.:]*)[.:]") do
      if not part:match(IDENT) then return {} end
      base = index(base, part)
      if base == nil then return {} end
    end
    if prefix:find(":", 1, true) then return {} end
  else
    prefix, sep, partial = "", "", text
    if not partial:match("^[%w_]*$") then return {} end
    for _, kw in ipairs(KEYWORDS) do found[kw] = true end
  end
  names(base, sep == ":", partial:sub(1, 1) == "_" or base == _G, found)
  local list = {}
  for name in pairs(found) do
    if name:sub(1, #partial) == partial then list[#list + 1] = prefix .. sep .. name end
  end
  sort(list)
  return list
end

-- `help(x)` at the prompt, unless the user has a global of that name
if rawget(_G, "help") == nil and package.loaded.ember then _G.help = package.loaded.ember.help end

return R
