-- ember.nn.signature: PyTorch's call signatures for the layers of
-- activation.lua, pool.lua and conv3d.lua. A signature is a list of
-- {name, default, check} (loss.lua's option spec, in PyTorch's positional
-- order); a call passes its values positionally, in a table of options, or
-- both: positional values first, then one options table as the last
-- argument. An unknown option, a value given twice, an argument past the
-- last and a value its check refuses all raise, naming the call.
--
--   local o = S.parse("ember.nn.functional.elu", ELU, ...)   -- o.alpha, o.inplace
local ember = require("ember")
local A = require("ember.nn.args")

local S = {}
local fail, value_str = A.fail, A.value_str

-- a plain table without list entries ({nil, 7} is a list)
local function is_options(v)
  if type(v) ~= "table" or ember.is_tensor(v) or getmetatable(v) ~= nil then return false end
  for k in pairs(v) do if type(k) == "number" then return false end end
  return true
end

-- the values of spec from the arguments ..., defaults filled in; a list
-- value (a table with number keys) is positional, not options
function S.parse(op, spec, ...)
  local n = select("#", ...)
  while n > 0 and select(n, ...) == nil do n = n - 1 end
  local given, opts = {}, nil
  for i = 1, n do
    local v = select(i, ...)
    if i == n and is_options(v) then
      opts = v
    elseif i > #spec then
      fail(op, "takes at most %d arguments after the input (%s), got %d", #spec, S.names(spec), n)
    else
      given[spec[i][1]] = v
    end
  end
  local known = {}
  for _, s in ipairs(spec) do known[s[1]] = true end
  for k, v in pairs(opts or {}) do
    if not known[k] then fail(op, "unknown option '%s' (takes %s)", tostring(k), S.names(spec)) end
    if given[k] ~= nil then fail(op, "%s given both positionally and as an option", k) end
    given[k] = v
  end
  local out = {}
  for _, s in ipairs(spec) do
    local name, default, check = s[1], s[2], s[3]
    local v = given[name]
    if v == nil then v = default end
    local want = check and check(v)
    if want then fail(op, "%s must be %s, got %s", name, want, value_str(v)) end
    out[name] = v
  end
  return out
end

function S.names(spec)
  local list = {}
  for i, s in ipairs(spec) do list[i] = s[1] end
  return table.concat(list, ", ")
end

---------------------------------------------------------------- checks
function S.number(v)
  if type(v) ~= "number" or v ~= v then return "a number" end
end
function S.boolean(v) if type(v) ~= "boolean" then return "a boolean" end end
function S.optional(check) return function(v) if v ~= nil then return check(v) end end end
function S.integer(v)
  if type(v) ~= "number" or v ~= math.floor(v) or v ~= v or math.abs(v) >= 2 ^ 53 then return "an integer" end
end

-- an integer >= lo (and below 2^53: no inf), or a list of n of them
local function is_int(v, lo) return type(v) == "number" and v == math.floor(v) and v >= lo and v < 2 ^ 53 end
function S.ints(n, lo)
  local want = ("an integer >= %d or a list of %d of them"):format(lo, n)
  return function(v)
    if is_int(v, lo) then return nil end
    if type(v) ~= "table" or ember.is_tensor(v) or #v ~= n or table.maxn(v) ~= n then return want end
    for i = 1, n do if not is_int(v[i], lo) then return want end end
  end
end
function S.int(lo)
  return function(v) if not is_int(v, lo) then return ("an integer >= %d"):format(lo) end end
end

-- a module's forward takes one input: more raise
function S.one_input(op, ...)
  local n = select("#", ...)
  if n > 0 then fail(op, "forward takes one input, got %d more arguments", n) end
end

return S
