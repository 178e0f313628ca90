-- A float tensor times a bool mask (dropout's product and its gradient)
-- reads the mask in place, without the float copy the promotion made
-- (docs/dtr.md, "Limits"): the same values bit for bit as times the mask
-- cast to the float dtype, and under a DTR budget that leaves no room for
-- that copy the product is made.
local ember = require("ember")
local F = ember.nn.functional

-- the same bits: NaN where NaN, else equal with the same sign (zeros too)
local function same_bits(a, b)
  assert.same(a:shape(), b:shape())
  assert.equal(a.dtype, b.dtype)
  local x, y = a:reshape({ -1 }):tolist(), b:reshape({ -1 }):tolist()
  for i = 1, #x do
    local u, v = x[i], y[i]
    if u ~= u then
      assert(v ~= v, ("element %d: NaN against %s"):format(i, tostring(v)))
    else
      assert(u == v and 1 / u == 1 / v, ("element %d: %s against %s"):format(i, tostring(u), tostring(v)))
    end
  end
end

local function specials(shape, dtype)
  local x = ember.randn(shape, { dtype = dtype })
  local flat = x:reshape({ -1 })
  local vals = { 0 / 0, 1 / 0, -1 / 0, -0.0, 0.0, 1e-40, -3.5 }
  for i, v in ipairs(vals) do flat[i] = v end
  return x
end

describe("mul by a bool mask", function()
  for _, dtype in ipairs({ "float32", "float64" }) do
    it("gives the bits of the mask cast to " .. dtype .. ", either operand first, broadcast and strided", function()
      ember.manual_seed(3)
      local x = specials({ 6, 9 }, dtype)
      local m = ember.rand({ 6, 9 }):ge(0.5)
      m:reshape({ -1 })[1] = true   -- NaN, inf and -0 times true and false both
      m:reshape({ -1 })[2] = false
      m:reshape({ -1 })[4] = false
      local mf = m:to(dtype)
      same_bits(x * m, x * mf)
      same_bits(m * x, mf * x)
      -- broadcast both ways, and a transposed (strided) operand
      local row = ember.rand({ 1, 9 }):ge(0.5)
      same_bits(x * row, x * row:to(dtype))
      same_bits(x[{ { 1, 1 } }] * m, x[{ { 1, 1 } }] * mf)
      same_bits(x:t() * m:t(), x:t() * mf:t())
      same_bits(x:t():contiguous() * m:t(), x:t():contiguous() * mf:t())
    end)
  end

  it("gives dropout the gradient of the float mask", function()
    ember.manual_seed(5)
    local x = ember.randn({ 4, 33 })
    local m = ember.rand({ 4, 33 }):ge(0.3)
    local gm = ember.autodiff.GradManager():attach(x)
    gm:record()
    local y = x * m
    gm:backward((y * 3):sum())
    same_bits(x.grad, (ember.ones({ 4, 33 }) * 3) * m:to("float32"))
    same_bits(y:detach(), x:detach() * m:to("float32"))
  end)

  it("makes dropout's product under a DTR budget with no room for a float copy of the mask", function()
    collectgarbage(); collectgarbage()
    local n = 2 ^ 18   -- 1 MiB of float32, a 256 KiB mask
    local x = ember.randn({ n })
    local m = ember.rand({ n }):ge(0.1)
    collectgarbage(); collectgarbage()
    local base = ember.memory_stats().bytes_in_use
    -- room for the product (1 MiB) and a little, not for the 1 MiB copy too
    ember.dtr.enable({ budget = base + n * 4 + 4096 })
    local ok, y = pcall(function() return x * m end)
    local st = ember.dtr.stats()
    ember.dtr.disable()
    assert(ok, y)
    assert.is_true(st.peak_bytes <= base + n * 4 + 4096)
    same_bits(y, x * m:to("float32"))
  end)

  it("remakes an evicted dropout mask (drawn as bool) from its own place in the Philox stream", function()
    local ffi = require("ffi")
    local out = ffi.new("ember_tensor*[1]")
    for _, dtype in ipairs({ "float32", "float64" }) do
      local x = ember.empty({ 256, 257 }, { dtype = dtype })   -- odd: the last block half used
      local function mask(p)
        assert.equal(0, ember._C.ember_dropout_mask_gen(nil, x._c, p, out))
        return ember._wrap(out[0])
      end
      ember.manual_seed(11)
      local want = {}
      for i = 1, 6 do want[i] = ember.rand_like(x):ge(0.1 * i) end
      local want_next = ember.rand({ 3 })
      local copies = {}   -- made before the budget: what reads the remade masks writes here
      for i = 1, 6 do copies[i] = ember.zeros({ 256, 257 }, { dtype = "bool" }) end
      local w = ember.randn({ 4 })
      local gm = ember.autodiff.GradManager():attach(w)
      collectgarbage(); collectgarbage()
      ember.manual_seed(11)
      ember.dtr.enable({ budget = ember.memory_stats().bytes_in_use + 4 * x:numel(), min_size = 0 })
      gm:record()
      local got = {}
      for i = 1, 6 do got[i] = mask(0.1 * i) end   -- the first ones are evicted to make room
      assert.is_true(ember.dtr.stats().evictions > 0)
      for i = 1, 6 do copies[i]:copy_(got[i]) end
      assert.is_true(ember.dtr.stats().recomputes > 0)
      gm:release()
      ember.dtr.disable()
      for i = 1, 6 do assert.is_true(ember.equal(copies[i], want[i]), dtype .. " mask " .. i) end
      assert.same(want_next:tolist(), ember.rand({ 3 }):tolist())   -- remaking drew nothing new
    end
  end)

  it("gives F.dropout's gradient through the mask", function()
    ember.manual_seed(11)
    local x = ember.randn({ 8, 64 })
    local gm = ember.autodiff.GradManager():attach(x)
    gm:record()
    local y = F.dropout(x, 0.25)
    gm:backward(y:sum())
    local kept = y:detach():ne(0)
    -- where kept, x / 0.75 and a gradient of 1 / 0.75; elsewhere 0 and 0
    same_bits(x.grad, kept:to("float32") * (1 / 0.75))
  end)
end)
