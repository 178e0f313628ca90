-- tostring(t): the numbers laid out as PyTorch 1.13 prints them (80-column
-- rows with aligned continuation lines, summarised past 1000 elements),
-- compared with PyTorch's own text (spec/fixtures/print_torch.lua, written by
-- gen_print.py); ember's dtype and shape suffixes, wrapped the same way.
local H = require("helpers")
local ember = H.ember
local cases = dofile("spec/fixtures/print_torch.lua")

-- the values gen_print.py describes, in the same order
local function values(shape, gen)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local v = {}
  for i = 0, n - 1 do
    if gen.kind == "sin" then v[i + 1] = gen.scale * math.sin(gen.a * i + gen.b)
    elseif gen.kind == "decade" then v[i + 1] = math.sin(i + 1) * 10 ^ (i % 9 - 5)
    elseif gen.kind == "range" then v[i + 1] = gen.start + gen.step * i
    else
      local x = gen.values[i + 1]
      v[i + 1] = x == "nan" and 0 / 0 or x == "inf" and math.huge or x == "-inf" and -math.huge or x
    end
  end
  return v
end

local function build(case)
  local v = values(case.shape, case.gen)
  if case.dtype == "bool" then
    for i = 1, #v do v[i] = v[i] % 3 == 0 end
    return ember.tensor(v):reshape(case.shape)
  end
  return ember.tensor(v, { dtype = case.dtype }):reshape(case.shape)
end

-- "tensor(" and the numbers, up to the last ']' (or the 0-d value)
local function numbers(text)
  local last = text:match("^.*()%]")
  if last then return text:sub(1, last) end
  return text:match("^(tensor%([^,)]*)")
end

describe("tostring(t) against PyTorch 1.13", function()
  for _, case in ipairs(cases) do
    it(case.name .. " {" .. table.concat(case.shape, ",") .. "} " .. case.dtype, function()
      local want = assert(numbers(case.text), case.text)
      if case.dtype == "bool" then want = want:gsub("True", "true"):gsub("False", "false") end
      assert.are.equal(want, numbers(tostring(build(case))))
    end)
  end
end)

describe("tostring(t)", function()
  it("keeps every line within 80 columns", function()
    for _, case in ipairs(cases) do
      for line in (tostring(build(case)) .. "\n"):gmatch("([^\n]*)\n") do
        assert(#line <= 80, case.name .. ": " .. #line .. " columns: " .. line)
      end
    end
  end)

  it("puts dtype and shape after the numbers, on a new line when the last one is full", function()
    assert.are.equal("tensor([1., 2.], dtype=float32, shape={2})", tostring(ember.tensor({ 1, 2 })))
    local s = tostring(ember.arange(14, { dtype = "float32" }) + 10)
    assert.are.equal("tensor([10., 11., 12., 13., 14., 15., 16., 17., 18., 19., 20., 21., 22., "
      .. "23.],\n"
      .. "       dtype=float32, shape={14})", s)
    s = tostring(ember.arange(12, { dtype = "float32" }) + 10)
    assert.are.equal("tensor([10., 11., 12., 13., 14., 15., 16., 17., 18., 19., 20., 21.],\n"
      .. "       dtype=float32, shape={12})", s)
    assert.are.equal("tensor([10., 11., 12., 13., 14., 15., 16., 17., 18., 19.], dtype=float32,\n"
      .. "       shape={10})", tostring(ember.arange(10, { dtype = "float32" }) + 10))
  end)

  it("prints non-contiguous views and empty tensors", function()
    local m = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "int64" })
    assert.are.equal("tensor([[1, 4],\n        [2, 5],\n        [3, 6]], dtype=int64, shape={3, 2})",
      tostring(m:t()))
    assert.are.equal("tensor([], dtype=float32, shape={0, 3})", tostring(ember.zeros({ 0, 3 })))
  end)

  it("prints int64 values beyond 2^53 exactly", function()
    local big = ember.full({ 1 }, 2 ^ 53, { dtype = "int64" }) + 1
    assert.are.equal("tensor([9007199254740993], dtype=int64, shape={1})", tostring(big))
  end)
end)
