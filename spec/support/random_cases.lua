-- The draws that spec/random_bits_spec.lua pins to the bits of the build
-- before the CPU's draws were vectorised (spec/fixtures/random_bits/gen.lua
-- wrote them with f5f2abb's libember.so): every draw function, dtypes, odd
-- sizes and sizes not a multiple of the vector width, views, seeds and
-- offsets. Each case returns a tensor; `digest` names its bytes.
local ffi = require("ffi")
local bit = require("bit")

local M = {}

local function view(t) return t:t() end   -- a non-contiguous output

-- 65537 and 98311: ember__parallel_for's chunks (parallel.c) are 8193
-- elements on 2 and on 3 threads, so ranges start on odd elements
local SIZES = { 1, 2, 3, 31, 32, 33, 63, 65, 1000, 16385, 65537, 98311, 100003 }
local SEEDS = { 0, 7, 123456789012 }

function M.cases(ember)
  local F = ember.nn.functional
  local cases = {}
  local function add(name, fn) cases[#cases + 1] = { name = name, fn = fn } end
  for _, seed in ipairs(SEEDS) do
    for _, n in ipairs(SIZES) do
      local tag = ("seed %d n %d"):format(seed, n)
      -- an offset not on a block boundary: 3 uniforms use 2 blocks
      local function at(f) return function() ember.manual_seed(seed); ember.rand({ 3 }); return f() end end
      add("rand f32 " .. tag, at(function() return ember.rand({ n }) end))
      add("rand f64 " .. tag, at(function() return ember.rand({ n }, { dtype = "float64" }) end))
      add("randn f32 " .. tag, at(function() return ember.randn({ n }) end))
      add("randn f64 " .. tag, at(function() return ember.randn({ n }, { dtype = "float64" }) end))
      add("randint " .. tag, at(function() return ember.randint(-5, 1000003, { n }) end))
      add("randint int32 " .. tag, at(function() return ember.randint(0, 7, { n }, { dtype = "int32" }) end))
      add("uniform_ " .. tag, at(function() return ember.empty({ n }):uniform_(-2, 3) end))
      add("normal_ " .. tag, at(function() return ember.empty({ n }):normal_(1.5, 0.25) end))
      add("bernoulli_ " .. tag, at(function() return ember.empty({ n }):bernoulli_(0.3) end))
      add("bernoulli " .. tag, at(function() return ember.bernoulli(ember.full({ n }, 0.7)) end))
      add("dropout " .. tag, at(function() return F.dropout(ember.ones({ n }), 0.25) end))
      add("exponential_ " .. tag, at(function() return ember.empty({ n }, { dtype = "float64" }):exponential_(2) end))
      add("geometric_ " .. tag, at(function() return ember.empty({ n }):geometric_(0.2) end))
    end
    local tag = ("seed %d"):format(seed)
    local function at(f) return function() ember.manual_seed(seed); return f() end end
    for _, dt in ipairs({ "float16", "bfloat16" }) do
      add("rand " .. dt .. " " .. tag, at(function() return ember.rand({ 999 }, { dtype = dt }) end))
      add("randn " .. dt .. " " .. tag, at(function() return ember.randn({ 999 }, { dtype = dt }) end))
      add("uniform_ " .. dt .. " " .. tag, at(function() return ember.empty({ 77 }, { dtype = dt }):uniform_(-1, 1) end))
    end
    add("rand 2d " .. tag, at(function() return ember.rand({ 37, 129 }) end))
    add("uniform_ view " .. tag, at(function() local t = ember.zeros({ 33, 65 }); view(t):uniform_(0, 1); return t end))
    add("normal_ view " .. tag, at(function() local t = ember.zeros({ 33, 65 }); view(t):normal_(); return t end))
    add("bernoulli_ view " .. tag, at(function() local t = ember.zeros({ 33, 65 }); view(t):bernoulli_(0.5); return t end))
    add("uniform_ slice " .. tag, at(function() local t = ember.zeros({ 1001 }); t:narrow(1, 2, 999):uniform_(); return t end))
    add("uniform_ empty range " .. tag, at(function() return ember.empty({ 65 }):uniform_(2, 2) end))
    add("generator " .. tag, function() return ember.rand({ 4097 }, { generator = ember.Generator(seed + 1) }) end)
    add("randperm " .. tag, at(function() return ember.randperm(1003) end))
    add("multinomial " .. tag, at(function()
      return ember.multinomial(ember.tensor({ 1, 2, 3, 4 }), 300, { replacement = true })
    end))
  end
  return cases
end

-- hex of the bytes of a tensor (made contiguous) up to 256 bytes, else their
-- 64-bit FNV-1a hash and length
function M.digest(t)
  t = t:contiguous()
  local n = t:numel() * ffi.sizeof(({ float32 = "float", float64 = "double", float16 = "uint16_t",
    bfloat16 = "uint16_t", int64 = "int64_t", int32 = "int32_t", uint8 = "uint8_t", bool = "uint8_t" })[t.dtype])
  local p = ffi.cast("const uint8_t *", t:data_ptr())
  if n <= 256 then
    local hex = {}
    for i = 0, n - 1 do hex[#hex + 1] = ("%02x"):format(p[i]) end
    return table.concat(hex)
  end
  local h = 0xcbf29ce484222325ULL
  for i = 0, n - 1 do h = bit.bxor(h, p[i]) * 0x100000001b3ULL end
  return ("fnv %s len %d"):format(bit.tohex(h), n)
end

return M
