-- The random values of the shape fuzzer (spec/support/shape_fuzz.lua): its
-- own seeded generator (so that runs repeat across LuaJIT builds), random
-- shapes, dims and dtypes, tensors of a random shape that are often
-- non-contiguous views, index tensors whose values stray out of range, and
-- the shape rules its checks compare results with.
local ember = require("ember")

local V = {}

local rng_state
local function rand(n) -- 1..n, our own generator so runs repeat across LuaJIT builds
  rng_state = rng_state * 48271 % 2147483647 -- Park-Miller: exact in doubles
  return math.floor(rng_state / 2147483647 * n) + 1
end
local function pick(t) return t[rand(#t)] end
local function chance(p) return rand(1000) <= p * 1000 end

local DTYPES = { "float32", "float32", "float32", "float32", "float64", "float16", "bfloat16", "int32", "int64",
  "uint8", "bool" }
local FLOATS = { "float32", "float32", "float32", "float64", "float16" }

local function rshape(maxrank, maxdim)
  local r = rand((maxrank or 4) + 1) - 1
  if not maxrank and chance(0.03) then r = rand(3) + 4 end -- 5 to 7 dims, now and then
  local s = {}
  for i = 1, r do s[i] = chance(0.08) and 0 or rand(chance(0.05) and 7 or (maxdim or 4)) end
  return s
end

local function numel(s)
  local n = 1
  for i = 1, #s do n = n * s[i] end
  return n
end

local function fill(t)
  if t.dtype == "bool" then return ember.rand(t:shape()):gt(0.5) end
  if t.dtype == "float32" or t.dtype == "float64" then return t:copy_(ember.randn(t:shape())) end
  return t:copy_(ember.randint(0, 5, t:shape()))
end

-- a tensor of shape s (or a random shape), often a non-contiguous view
local function rtensor(s, dtype)
  s = s or rshape()
  dtype = dtype or pick(DTYPES)
  local r = #s
  local kind = rand(7)
  if kind == 1 and r >= 2 then -- a transposed view
    local t = { unpack(s) }
    t[1], t[r] = t[r], t[1]
    local base = fill(ember.zeros(t, { dtype = dtype }))
    return base:transpose(1, r)
  elseif kind == 2 and r >= 1 then -- narrowed out of a larger tensor
    local t = { unpack(s) }
    local d = rand(r)
    t[d] = t[d] + 2
    local base = fill(ember.zeros(t, { dtype = dtype }))
    return base:narrow(d, 2, s[d])
  elseif kind == 3 and r >= 1 then -- expanded from size-1 dims
    local t = { unpack(s) }
    for i = 1, r do if chance(0.5) then t[i] = 1 end end
    local base = fill(ember.zeros(t, { dtype = dtype }))
    return base:expand(s)
  elseif kind == 4 and r >= 2 then -- permuted
    local perm = {}
    for i = 1, r do perm[i] = i end
    for i = r, 2, -1 do local j = rand(i); perm[i], perm[j] = perm[j], perm[i] end
    local t = {}
    for i = 1, r do t[perm[i]] = s[i] end
    local inv = {}
    for i = 1, r do inv[perm[i]] = i end
    local base = fill(ember.zeros(t, { dtype = dtype }))
    -- base:permute(inv)[i] has size t[inv[i]] = s[i]
    return base:permute(perm)
  elseif kind == 5 then -- a select out of a larger tensor
    local t = { 3 }
    for i = 1, r do t[i + 1] = s[i] end
    local base = fill(ember.zeros(t, { dtype = dtype }))
    return base:select(1, 2)
  end
  return fill(ember.zeros(s, { dtype = dtype }))
end

local function rdim(r) -- a dim, often valid, sometimes negative or out of range
  if chance(0.8) and r > 0 then
    local d = rand(r)
    if chance(0.3) then d = d - r - 1 end
    return d
  end
  return rand(2 * r + 5) - r - 3
end

-- an index tensor of a random (or given) shape with values near 1..size
local function rindex(size, s)
  s = s or rshape(2, 4)
  local t = ember.zeros(s, { dtype = chance(0.9) and "int64" or pick({ "int32", "float32", "uint8", "bool" }) })
  local n = numel(s)
  if n > 0 and t.dtype ~= "bool" then
    local vals = {}
    for i = 1, n do
      vals[i] = chance(0.85) and rand(math.max(size, 1)) or (rand(size + 7) - 4)
      if t.dtype == "uint8" and vals[i] < 0 then vals[i] = 0 end
    end
    t = ember.tensor(vals, { dtype = t.dtype }):reshape(#s > 0 and s or {})
    if chance(0.1) and #s >= 1 then t = t:expand(s) end
  end
  return t
end

local function same_shape(t, s)
  local ts = t:shape()
  if #ts ~= #s then return false end
  for i = 1, #s do if ts[i] ~= s[i] then return false end end
  return true
end
local function sstr(s)
  local p = {}
  for i = 1, #s do p[i] = tostring(s[i]) end
  return "{" .. table.concat(p, ", ") .. "}"
end

-- broadcast of two shapes, or nil
local function bcast(a, b)
  local n = math.max(#a, #b)
  local out = {}
  for i = 1, n do
    local x = a[#a - n + i] or 1
    local y = b[#b - n + i] or 1
    if x == y or y == 1 then out[i] = x elseif x == 1 then out[i] = y else return nil end
  end
  return out
end

-- a shape that often broadcasts against s
local function near_shape(s)
  local k = rand(4)
  if k == 1 then return rshape() end
  local t = {}
  local drop = rand(#s + 1) - 1
  for i = drop + 1, #s do t[#t + 1] = chance(0.3) and 1 or s[i] end
  if k == 2 and #t > 0 then t[rand(#t)] = rand(4) end
  return t
end

-- the generator's state: seed(state) sets it (a run's seed, or a case's state
-- to replay), state() reads it
function V.seed(state) rng_state = state end
function V.state() return rng_state end
V.rand = rand
V.pick = pick
V.chance = chance
V.DTYPES = DTYPES
V.FLOATS = FLOATS
V.rshape = rshape
V.numel = numel
V.rtensor = rtensor
V.rdim = rdim
V.rindex = rindex
V.same_shape = same_shape
V.sstr = sstr
V.bcast = bcast
V.near_shape = near_shape

return V
