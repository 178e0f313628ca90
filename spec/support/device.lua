-- What every device spec shares: the device under test (EMBER_TEST_DEVICE,
-- "cuda" by default; "cpu" runs the suite against the CPU itself, which
-- checks the specs), why it cannot be used when it cannot, one tolerance per
-- dtype, and cases that report pending with that reason instead of passing.
-- spec/device_spec.lua and spec/device_*_spec.lua use it; docs/cuda.md.
local ember = require("ember")
local assert = require("luassert")

local D = {}

local device = os.getenv("EMBER_TEST_DEVICE") or "cuda"
local unavailable
if device ~= "cpu" then
  local ok, err = pcall(function() return ember.zeros({ 1 }):to(device) end)
  if not ok then unavailable = tostring(err):gsub("^.-ember%.device ", "") end
end

-- |device - cpu| <= atol + rtol |cpu| per dtype: float32 allows the few ulp
-- between CUDA's math library and the CPU's polynomial exp/tanh/erf; float16
-- and bfloat16 compute in float32 on the device, in double on the CPU, so one
-- rounding of the result may differ; integers and bool are exact
local TOL = {
  float32 = { rtol = 2e-6, atol = 1e-30 }, float64 = { rtol = 1e-13, atol = 1e-300 },
  float16 = { rtol = 1e-3, atol = 6e-8 }, bfloat16 = { rtol = 8e-3, atol = 1e-30 },
  int32 = { rtol = 0, atol = 0 }, int64 = { rtol = 0, atol = 0 }, uint8 = { rtol = 0, atol = 0 },
  bool = { rtol = 0, atol = 0 },
}
local DTYPES = { "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool" }
local FLOATS = { float32 = true, float64 = true, float16 = true, bfloat16 = true }

-- it() or, where the device cannot be used, pending() with the reason; both
-- are the calling spec's (busted gives each spec file its own environment)
local function case(name, fn)
  local env = getfenv(2)
  if unavailable then
    env.pending(name .. " [" .. unavailable .. "]")
  else
    env.it(name, fn)
  end
end

-- the device result, back on the CPU, against the CPU's (tol: TOL's entry by default)
local function agrees(got, want, tol)
  assert.are.equal(device, got.device)
  assert.are.equal(want.dtype, got.dtype)
  assert.are.same(want:shape(), got:shape())
  tol = tol or TOL[want.dtype]
  local g, w = got:cpu():double():tolist(), want:double():tolist()
  local function walk(a, b, where)
    if type(b) == "table" then
      for i = 1, #b do walk(a[i], b[i], where .. "[" .. i .. "]") end
      return
    end
    local same = (a ~= a and b ~= b) or a == b or math.abs(a - b) <= tol.atol + tol.rtol * math.abs(b)
    assert(same, string.format("%s: %s got %.17g, cpu %.17g", want.dtype, where, a, b))
  end
  walk(g, w, "")
end

-- a {4, 3, 5} operand (the transpose of a {5, 3, 4} one) and a {3, 1} one,
-- with values every dtype holds: broadcast, strided and contiguous at once
local function operands(dtype)
  local va, vb = {}, {}
  for i = 1, 5 do
    va[i] = {}
    for j = 1, 3 do
      va[i][j] = {}
      for k = 1, 4 do va[i][j][k] = ((i * 37 + j * 11 + k * 7) % 23) * 0.5 - 5 end
    end
  end
  for j = 1, 3 do vb[j] = { j + (FLOATS[dtype] and 0.25 or 0) } end
  if dtype == "uint8" or dtype == "bool" then
    for i = 1, 5 do for j = 1, 3 do for k = 1, 4 do va[i][j][k] = math.abs(va[i][j][k]) end end end
  end
  return ember.tensor(va, { dtype = dtype }):transpose(1, 3), ember.tensor(vb, { dtype = dtype })
end

D.device, D.unavailable = device, unavailable
D.TOL, D.DTYPES, D.FLOATS = TOL, DTYPES, FLOATS
D.case, D.agrees, D.operands = case, agrees, operands

return D
