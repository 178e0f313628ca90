-- ember.json: a small strict JSON codec (RFC 8259), for what only Lua holds:
-- the structure of nested tables ember.save keeps in the metadata (io.lua),
-- ember.io.json's users, the JSON the benchmarks print and the fixtures specs
-- read. The safetensors header itself is read in C (core/src/io/json.c) by the
-- same rules, with the same messages. Not a general-purpose library: no
-- streaming, no options.
local byte, char, sub, find, format = string.byte, string.char, string.sub, string.find,
  string.format
local concat, sort = table.concat, table.sort
local floor = math.floor
local MAX_INT = 2 ^ 53

-- Strict RFC 8259: no comments, no trailing commas, no NaN, no leading zeros,
-- no control characters in strings, no lone surrogates, no duplicate keys.
-- Objects decode to tables with the OBJECT metatable, arrays to lists with
-- ARRAY (so {} and [] stay apart), null to json.null.
local json = {}
local OBJECT = { __name = "json object" }
local ARRAY = { __name = "json array" }
json.null = setmetatable({}, { __tostring = function() return "null" end })
json.OBJECT, json.ARRAY = OBJECT, ARRAY
local MAX_DEPTH = 64

local ESCAPES = { [34] = '"', [92] = "\\", [47] = "/", [98] = "\b", [102] = "\f", [110] = "\n",
  [114] = "\r", [116] = "\t" }

local function utf8_char(cp)
  if cp < 0x80 then return char(cp) end
  if cp < 0x800 then return char(0xC0 + floor(cp / 64), 0x80 + cp % 64) end
  if cp < 0x10000 then
    return char(0xE0 + floor(cp / 4096), 0x80 + floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return char(0xF0 + floor(cp / 262144), 0x80 + floor(cp / 4096) % 64,
    0x80 + floor(cp / 64) % 64, 0x80 + cp % 64)
end

-- f(v) as the public json.decode or json.encode (op): json.lua's errors are
-- bare strings for io.lua to word, and name ember.io.json.<op> when that is
-- the call the user's line made (errors.called)
local function public(op, f, v)
  local ok, r = pcall(f, v)
  if ok then return r end
  local errors = require("ember.errors")
  if errors.called() == "ember.io.json." .. op then errors.fail("io.json." .. op, (r:gsub("^json%.encode: ", ""))) end
  error(r, 0)
end

-- Raises a string "invalid JSON: <what> at byte <k>" (level 0: no position prefix).
local function decode(s)
  if type(s) ~= "string" then error("invalid JSON: expected a string, got " .. type(s), 0) end
  local pos, len, depth = 1, #s, 0

  local function fail(what, at)
    error(format("invalid JSON: %s at byte %d", what, at or pos), 0)
  end
  local function skip_ws()
    pos = find(s, "[^ \t\r\n]", pos) or len + 1
  end

  local function parse_string()
    local i = pos + 1   -- s[pos] is the opening quote
    local parts, np = {}, 0
    while true do
      local j = find(s, '["\\%z\1-\31]', i)
      if not j then fail("unterminated string", pos) end
      if j > i then np = np + 1; parts[np] = sub(s, i, j - 1) end
      local c = byte(s, j)
      if c == 34 then
        pos = j + 1
        return concat(parts)
      elseif c == 92 then
        local e = byte(s, j + 1)
        if e == 117 then   -- \uXXXX
          local hex = sub(s, j + 2, j + 5)
          if not find(hex, "^%x%x%x%x$") then fail("bad \\u escape", j) end
          local cp = tonumber(hex, 16)
          i = j + 6
          if cp >= 0xD800 and cp <= 0xDBFF then
            local lo = sub(s, i, i + 1) == "\\u" and sub(s, i + 2, i + 5)
            local lcp = lo and find(lo, "^%x%x%x%x$") and tonumber(lo, 16)
            if not lcp or lcp < 0xDC00 or lcp > 0xDFFF then fail("lone surrogate", j) end
            cp = 0x10000 + (cp - 0xD800) * 1024 + (lcp - 0xDC00)
            i = i + 6
          elseif cp >= 0xDC00 and cp <= 0xDFFF then
            fail("lone surrogate", j)
          end
          np = np + 1; parts[np] = utf8_char(cp)
        else
          local r = e and ESCAPES[e]
          if not r then fail("bad escape", j) end
          np = np + 1; parts[np] = r
          i = j + 2
        end
      else
        fail("control character in string", j)
      end
    end
  end

  local function parse_number()
    local start = pos
    local i = pos
    if byte(s, i) == 45 then i = i + 1 end   -- -
    local c = byte(s, i)
    if c == 48 then   -- 0: no leading zeros
      i = i + 1
    elseif c and c >= 49 and c <= 57 then
      local _, e = find(s, "^%d+", i)
      i = e + 1
    else
      fail("bad number", start)
    end
    if byte(s, i) == 46 then   -- .
      local _, e = find(s, "^%d+", i + 1)
      if not e then fail("bad number", start) end
      i = e + 1
    end
    c = byte(s, i)
    if c == 101 or c == 69 then   -- e E
      i = i + 1
      c = byte(s, i)
      if c == 43 or c == 45 then i = i + 1 end
      local _, e = find(s, "^%d+", i)
      if not e then fail("bad number", start) end
      i = e + 1
    end
    pos = i
    local v = tonumber(sub(s, start, i - 1))
    if not v or v ~= v or v == math.huge or v == -math.huge then fail("number out of range", start) end
    return v
  end

  local parse_value
  -- [item, ...] or {item, ...}: read_item(t) reads one element into t
  local function parse_container(mt, close, read_item)
    depth = depth + 1
    if depth > MAX_DEPTH then fail("nesting deeper than " .. MAX_DEPTH) end
    local t = setmetatable({}, mt)
    pos = pos + 1
    skip_ws()
    if byte(s, pos) ~= close then
      while true do
        read_item(t)
        skip_ws()
        local c = byte(s, pos)
        if c == close then break end
        if c ~= 44 then fail(format("expected ',' or '%s'", char(close))) end
        pos = pos + 1
        skip_ws()
      end
    end
    pos = pos + 1
    depth = depth - 1
    return t
  end
  local function array_item(t) t[#t + 1] = parse_value() end
  local function object_item(t)
    if byte(s, pos) ~= 34 then fail("expected a string key") end
    local kpos = pos
    local k = parse_string()
    if rawget(t, k) ~= nil then fail(format("duplicate key %q", k), kpos) end
    skip_ws()
    if byte(s, pos) ~= 58 then fail("expected ':'") end
    pos = pos + 1
    skip_ws()
    rawset(t, k, parse_value())
  end

  function parse_value()
    local c = byte(s, pos)
    if c == 123 then return parse_container(OBJECT, 125, object_item)
    elseif c == 91 then return parse_container(ARRAY, 93, array_item)
    elseif c == 34 then return parse_string()
    elseif c == 45 or (c and c >= 48 and c <= 57) then return parse_number()
    elseif c == 116 and sub(s, pos, pos + 3) == "true" then pos = pos + 4; return true
    elseif c == 102 and sub(s, pos, pos + 4) == "false" then pos = pos + 5; return false
    elseif c == 110 and sub(s, pos, pos + 3) == "null" then pos = pos + 4; return json.null
    elseif c == nil then fail("unexpected end")
    end
    fail("unexpected character " .. format("%q", char(c)))
  end

  skip_ws()
  local v = parse_value()
  skip_ws()
  if pos <= len then fail("trailing characters") end
  return v
end

-- Whether s is valid UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF):
-- a safetensors header must be, or other readers refuse the file.
local function valid_utf8(s)
  if not find(s, "[\128-\255]") then return true end
  local i, n = 1, #s
  while i <= n do
    local c = byte(s, i)
    local need, lo, hi = 0, 0x80, 0xBF
    if c < 0x80 then need = 0
    elseif c >= 0xC2 and c <= 0xDF then need = 1
    elseif c >= 0xE0 and c <= 0xEF then
      need = 2
      if c == 0xE0 then lo = 0xA0 elseif c == 0xED then hi = 0x9F end
    elseif c >= 0xF0 and c <= 0xF4 then
      need = 3
      if c == 0xF0 then lo = 0x90 elseif c == 0xF4 then hi = 0x8F end
    else
      return false
    end
    for k = 1, need do
      local cc = byte(s, i + k)
      if not cc or cc < (k == 1 and lo or 0x80) or cc > (k == 1 and hi or 0xBF) then return false end
    end
    i = i + need + 1
  end
  return true
end
json.valid_utf8 = valid_utf8

local function encode_string(s)
  return '"' .. s:gsub('[%z\1-\31"\\]', function(c)
    local b = byte(c)
    if b == 34 then return '\\"' elseif b == 92 then return "\\\\"
    elseif b == 10 then return "\\n" elseif b == 9 then return "\\t" elseif b == 13 then return "\\r"
    end
    return format("\\u%04x", b)
  end) .. '"'
end
json.encode_string = encode_string

-- Compact encoding. Tables with the ARRAY metatable, or a [1], are arrays; the
-- rest are objects, written with their keys sorted (deterministic output).
function json.decode(s) return (public("decode", decode, s)) end   -- (not a tail call: its frame tells)

local encode
-- json.encode(v): v as JSON text
local function encode_top(v) return encode(v, 0) end
function json.encode(v) return (public("encode", encode_top, v)) end
function encode(v, depth)
  if depth > MAX_DEPTH then error("json.encode: nesting deeper than " .. MAX_DEPTH, 0) end
  local tv = type(v)
  if v == json.null or v == nil then return "null"
  elseif tv == "boolean" then return v and "true" or "false"
  elseif tv == "string" then return encode_string(v)
  elseif tv == "number" then
    if v ~= v or v == math.huge or v == -math.huge then error("json.encode: cannot encode " .. v, 0) end
    if v == floor(v) and v >= -MAX_INT and v <= MAX_INT then return format("%.0f", v) end
    return format("%.17g", v)
  elseif tv == "table" then
    local parts, mt = {}, getmetatable(v)
    if mt == ARRAY or (mt ~= OBJECT and v[1] ~= nil) then
      for i = 1, #v do parts[i] = encode(v[i], depth + 1) end
      return "[" .. concat(parts, ",") .. "]"
    end
    local keys = {}
    for k in pairs(v) do
      if type(k) ~= "string" then error("json.encode: object keys must be strings", 0) end
      keys[#keys + 1] = k
    end
    sort(keys)
    for i, k in ipairs(keys) do parts[i] = encode_string(k) .. ":" .. encode(v[k], depth + 1) end
    return "{" .. concat(parts, ",") .. "}"
  end
  error("json.encode: cannot encode a " .. tv, 0)
end

return json
