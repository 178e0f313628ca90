-- ember.suggest: "did you mean ...?" for misspelt names. Reading a field
-- that does not exist from ember, ember.nn, ember.nn.functional or
-- ember.optim raises an error naming the field and the closest public names
-- (by edit distance), instead of handing back a nil that fails later.
-- What stays nil: private names (a leading '_') and the optional parts of
-- the package, which code may probe for (`if ember.cuda then`); probing any
-- other name goes through rawget. This module adds no names of its own.
local M = {}

-- optional fields of each guarded table: reading them never raises
M.OPTIONAL = {
  ember = { cuda = true, distributed = true },
}

-- Optimal string alignment distance (Levenshtein plus adjacent swaps),
-- case-insensitive: "Linaer" and "linear" are both 1 from "Linear".
function M.distance(a, b)
  a, b = a:lower(), b:lower()
  local prev2, prev, cur = {}, {}, {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    cur = { [0] = i }
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      local d = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
      if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        d = math.min(d, prev2[j - 2] + 1)
      end
      cur[j] = d
    end
    prev2, prev = prev, cur
  end
  return prev[#b]
end

-- the public keys of t (strings without a leading '_'), sorted
function M.public_names(t)
  local names = {}
  for k in pairs(t) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" then names[#names + 1] = k end
  end
  table.sort(names)
  return names
end

-- The names closest to `name`: those that start with it (the shortest
-- first), else all at the smallest edit distance when that distance is
-- small for the name's length (a third of it, at least 1); at most 3.
function M.closest(name, candidates)
  local found = {}
  if #name >= 2 then
    for _, c in ipairs(candidates) do
      if c:lower():sub(1, #name) == name:lower() then found[#found + 1] = c end
    end
    table.sort(found, function(a, b) return #a < #b or (#a == #b and a < b) end)
  end
  if #found == 0 then
    local best = math.max(1, math.floor(#name / 3))
    for _, c in ipairs(candidates) do
      local d = M.distance(name, c)
      if d < best then best, found = d, { c }
      elseif d == best then found[#found + 1] = c end
    end
  end
  while #found > 3 do table.remove(found) end
  return found
end

-- " (did you mean a, b or c?)", or "" for no names
function M.phrase(names)
  local n = #names
  if n == 0 then return "" end
  local list = n == 1 and names[1] or table.concat(names, ", ", 1, n - 1) .. " or " .. names[n]
  return " (did you mean " .. list .. "?)"
end

-- Gives table t (reached as `path`) an __index that raises for a missing
-- public name, after any __index it already had. `elsewhere` (optional)
-- lists other tables, by path, where the name may live instead:
-- `ember.Linear` points to ember.nn.Linear.
function M.guard(t, path, elsewhere)
  local optional = M.OPTIONAL[path] or {}
  local mt = getmetatable(t) or {}
  local prev = mt.__index
  mt.__index = function(tbl, key)
    if prev ~= nil then
      local v
      if type(prev) == "function" then v = prev(tbl, key) else v = prev[key] end
      if v ~= nil then return v end
    end
    if type(key) ~= "string" or key:sub(1, 1) == "_" or optional[key] then return nil end
    local hint = M.closest(key, M.public_names(t))
    if #hint == 0 then
      for _, other in ipairs(elsewhere or {}) do
        if rawget(other[2], key) ~= nil then hint[#hint + 1] = other[1] .. "." .. key end
      end
    end
    error(("%s: no field '%s'%s"):format(path, key, M.phrase(hint)), 2)
  end
  return setmetatable(t, mt)
end

-- the guards ember puts on itself once its modules are loaded
function M.apply(ember)
  local nn, optim = rawget(ember, "nn"), rawget(ember, "optim")
  local F = nn and rawget(nn, "functional")
  local elsewhere = {}
  if nn then elsewhere[#elsewhere + 1] = { "ember.nn", nn } end
  if F then elsewhere[#elsewhere + 1] = { "ember.nn.functional", F } end
  if optim then elsewhere[#elsewhere + 1] = { "ember.optim", optim } end
  if nn then M.guard(nn, "ember.nn") end
  if F then M.guard(F, "ember.nn.functional") end
  if optim then M.guard(optim, "ember.optim") end
  M.guard(ember, "ember", elsewhere)
end

return M
