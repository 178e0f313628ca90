-- The CPU iterator (core/src/ops/iter.c) against PyTorch 1.13: elementwise
-- results on transposed, permuted, broadcast, expanded, narrowed and
-- channels-last operands, in every dtype, have PyTorch's values and its
-- TensorIterator's strides (what :stride() and :is_contiguous() show), and
-- in-place ops on such tensors write in place. The programs and PyTorch's
-- results are in spec/fixtures/iter/layouts.json (spec/fixtures/iter/gen.py).
local H = require("helpers")
local ember = H.ember
local FX = H.read_json("spec/fixtures/iter/layouts.json").cases

local function base_values(n, dtype)   -- gen.py's base_values
  local v = {}
  for i = 0, n - 1 do
    if dtype == "bool" then v[i + 1] = i % 3 == 0 and 1 or 0
    elseif dtype == "uint8" then v[i + 1] = i * 7 % 23
    else
      v[i + 1] = i * 7 % 23 - 11
      if dtype:find("float") then v[i + 1] = v[i + 1] * 0.5 end
    end
  end
  return v
end

local function build(spec, dtype)
  local n = 1
  for _, s in ipairs(spec.shape) do n = n * s end
  local t = ember.tensor(base_values(n, dtype), { dtype = "float64" }):reshape(spec.shape):to(dtype)
  if spec.perm then
    local p = {}
    for i, d in ipairs(spec.perm) do p[i] = d + 1 end
    t = t:permute(p)
  end
  if spec.narrow then t = t:narrow(spec.narrow[1] + 1, spec.narrow[2] + 1, spec.narrow[3]) end
  if spec.expand then t = t:expand(spec.expand) end
  return t
end

local TOL = { float32 = 1e-6, float64 = 1e-12, float16 = 1e-3, bfloat16 = 8e-3 }

describe("elementwise results laid out as PyTorch's TensorIterator lays them out", function()
  for _, c in ipairs(FX) do
    it(("%s on %s (%s, %s)"):format(c.op, c.layout, c.a_dtype, c.b_dtype), function()
      local a, b = build(c.a, c.a_dtype), build(c.b, c.b_dtype)
      local a_strides = a:stride()
      local f = assert(load("local ember, a, b = ...; return " .. c.lua))
      local r = f(ember, a, b)
      assert.are.same(c.shape, r:shape())
      assert.are.same(c.strides, r:stride())
      assert.are.equal(c.dtype, r.dtype)
      if c.op:sub(-1) == "_" then   -- in place: a itself, its layout kept
        assert.is_true(rawequal(a, r))
        assert.are.same(a_strides, r:stride())
      end
      H.same(r:to("float64"):reshape({ -1 }), c.values, TOL[c.dtype] or 0)
    end)
  end

  it("lays out large transposed and permuted results (split over threads) as their inputs, with the same values", function()
    local a = ember.randn({ 300, 200 }, { dtype = "float64" })
    local b = ember.randn({ 300, 200 }, { dtype = "float64" })
    local r = a:t() + b:t()
    assert.are.same({ 1, 200 }, r:stride())
    H.same(r:t(), (a + b):tolist(), 0)
    local p = ember.randn({ 6, 50, 70 }, { dtype = "float64" }):permute({ 3, 1, 2 })
    local e = p:exp()
    assert.are.same(p:stride(), e:stride())
    H.same(e, p:contiguous():exp():tolist(), 0)
  end)
end)
