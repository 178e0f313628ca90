-- Dropout's keep mask is drawn straight into a bool tensor on the CPU
-- (ember_dropout_mask_gen, one kernel, no float draw beside the input):
-- the mask is the bits of rand_like(x):ge(p), the composition it replaces,
-- and the generator stands where that left it, so every later draw is the
-- same (docs/dtr.md).
local ember = require("ember")
local ffi = require("ffi")
local F = ember.nn.functional
local C = ember._C

-- the composition dropout used: the reference
local function reference_mask(x, p, g) return ember.rand_like(x, { generator = g }):ge(p) end

local function same_mask(a, b, what)
  assert.equal("bool", a.dtype, what)
  assert.same(b:shape(), a:shape(), what)
  local x, y = a:reshape({ -1 }):tolist(), b:reshape({ -1 }):tolist()
  for i = 1, #x do
    if x[i] ~= y[i] then
      error(("%s: element %d is %s, the composition's %s"):format(what, i, tostring(x[i]), tostring(y[i])))
    end
  end
end

local function mask_of(x, p, g)
  local out = ffi.new("ember_tensor*[1]")
  assert.equal(0, C.ember_dropout_mask_gen(g and g._g, x._c, p, out))
  return ember._wrap(out[0])
end

describe("dropout's bool mask", function()
  local threads
  before_each(function() threads = ember.get_num_threads() end)
  after_each(function() ember.set_num_threads(threads) end)

  for _, nt in ipairs({ 1, 2 }) do
    for _, dtype in ipairs({ "float32", "float64", "float16", "bfloat16" }) do
      it(("is rand_like(x):ge(p) bit for bit, the next draw unchanged (%s, %d thread%s)"):format(dtype, nt,
        nt > 1 and "s" or ""), function()
        ember.set_num_threads(nt)
        -- a scalar, an empty tensor, odd sizes, one past the kernel's 32-element
        -- batches, and a size that the threads split (the grain is 8192 elements)
        for _, shape in ipairs({ {}, { 0, 3 }, { 1 }, { 7 }, { 33 }, { 3, 5, 7 }, { 129, 257 } }) do
          for _, p in ipairs({ 0, 1e-3, 0.1, 1 / 3, 0.5, 0.9, 1 - 2 ^ -25, 1 }) do
            local x = ember.empty(shape, { dtype = dtype })
            ember.manual_seed(11)
            ember.rand({ 3 })   -- an odd place in the stream
            local want = reference_mask(x, p)
            local want_next = ember.rand({ 5 })
            ember.manual_seed(11)
            ember.rand({ 3 })
            local got = mask_of(x, p)
            local what = ("%s %s p=%s"):format(dtype, table.concat(shape, "x"), tostring(p))
            same_mask(got, want, what)
            assert.same(want_next:tolist(), ember.rand({ 5 }):tolist(), what .. ": the next draw")
          end
        end
      end)
    end
  end

  it("is what F.dropout applies, from the default generator or its own", function()
    local x = ember.randn({ 37, 11 })
    for _, p in ipairs({ 0.1, 0.5, 0.75 }) do
      ember.manual_seed(5)
      local want = x * reference_mask(x, p) * (1 / (1 - p))
      local want_next = ember.rand({ 4 })
      ember.manual_seed(5)
      local got = F.dropout(x, p)
      assert.same(want:tolist(), got:tolist())
      assert.same(want_next:tolist(), ember.rand({ 4 }):tolist())
      local g1, g2 = ember.Generator(9), ember.Generator(9)
      local before = ember.get_rng_state()
      local a = F.dropout(x, { p = p, generator = g1 })
      assert.same((x * reference_mask(x, p, g2) * (1 / (1 - p))):tolist(), a:tolist())
      assert.same(g2:get_state(), g1:get_state())
      assert.same(before, ember.get_rng_state())   -- the default stream left where it was
    end
  end)

  it("keeps a channels_last or strided input's shape, and the mask is contiguous", function()
    local x = ember.randn({ 2, 3, 4, 5 }):permute({ 1, 3, 4, 2 })
    ember.manual_seed(8)
    local want = reference_mask(x, 0.3)
    ember.manual_seed(8)
    local got = mask_of(x, 0.3)
    same_mask(got, want, "strided")
    assert.is_true(got:is_contiguous())
  end)

  it("refuses an integer input, p outside [0, 1] and a generator of another type, naming dropout", function()
    local out = ffi.new("ember_tensor*[1]")
    assert.is_true(C.ember_dropout_mask_gen(nil, ember.ones({ 3 }, { dtype = "int64" })._c, 0.5, out) < 0)
    assert.matches("dropout: expected a floating point input, got int64", ffi.string(C.ember_last_error()), 1, true)
    assert.is_true(C.ember_dropout_mask_gen(nil, ember.ones({ 3 })._c, 1.5, out) < 0)
    assert.matches("p must be in [0, 1], got 1.5", ffi.string(C.ember_last_error()), 1, true)
    assert.has_error(function() F.dropout(ember.ones({ 3 }), { p = 0.5, generator = 3 }) end,
      "ember.nn.functional.dropout: generator must be an ember.Generator, got number")
    assert.has_error(function() F.dropout(ember.ones({ 3 }, { dtype = "int32" }), 0.5) end)
    assert.equal(6, F.dropout(ember.ones({ 2, 3 }), 0.5):numel())   -- usable after
  end)
end)
