-- max_pool2d by rows (issue 33): the values-only forward (what runs where
-- no gradient wants the positions) against a window scan in Lua and bit for
-- bit against the forward that also returns the positions; both layouts,
-- padding, strides past 2, dilation and ceil_mode (composed around the
-- kernel), NaN, -inf and signed zeros; the positions and the gradient where
-- a recording keeps them; gradcheck through the backward; the same bits on
-- one thread and on several. (avg_pool2d's rows: ops_paths_spec.lua, its
-- order bit for bit.)
local H = require("helpers")
local ember = H.ember
local F = ember.nn.functional
local CL = { memory_format = "channels_last" }

-- PyTorch's output size along one dim
local function out_size(L, k, s, p, d, ceil)
  local n = L + 2 * p - d * (k - 1) - 1
  local o = (ceil and math.floor((n + s - 1) / s) or math.floor(n / s)) + 1
  if ceil and (o - 1) * s >= L + p then o = o - 1 end
  return o
end

-- max pooling of x (N, C, H, W) one window at a time in row-major order:
-- the first maximum or the last NaN, and its 0-based flat position in the
-- plane; g = {k, s, p, d, ceil} with pairs k, s, p, d
local function reference(x, g)
  local N, Cn, Hh, W = unpack(x:shape())
  local Ho = out_size(Hh, g.k[1], g.s[1], g.p[1], g.d[1], g.ceil)
  local Wo = out_size(W, g.k[2], g.s[2], g.p[2], g.d[2], g.ceil)
  local v, ys, is = x:contiguous():view(-1):tolist(), {}, {}
  for q = 0, N * Cn - 1 do
    for oh = 0, Ho - 1 do
      for ow = 0, Wo - 1 do
        local best, at
        for i = 0, g.k[1] - 1 do
          local h = oh * g.s[1] - g.p[1] + i * g.d[1]
          for j = 0, g.k[2] - 1 do
            local w = ow * g.s[2] - g.p[2] + j * g.d[2]
            if h >= 0 and h < Hh and w >= 0 and w < W then
              local e = v[q * Hh * W + h * W + w + 1]
              if best == nil or e > best or e ~= e then best, at = e, h * W + w end
            end
          end
        end
        ys[#ys + 1], is[#is + 1] = best, at
      end
    end
  end
  return ys, is, { N, Cn, Ho, Wo }
end

-- a == b where NaNs match and zeros keep their sign
local function same(a, b)
  if a ~= a or b ~= b then return a ~= a and b ~= b end
  return a == b and (a ~= 0 or 1 / a == 1 / b)
end
local function same_list(got, want, what)
  assert.are.equal(#want, #got, what)
  for i = 1, #want do
    if not same(got[i], want[i]) then
      error(("%s: element %d is %s, expected %s"):format(what, i, tostring(got[i]), tostring(want[i])), 2)
    end
  end
end
local function flat(t) return t:contiguous():view(-1):tolist() end

local function pool(x, g, ri) return F.max_pool2d(x, g.k, g.s, g.p, g.d, g.ceil, ri) end

-- few distinct values (ties everywhere), signed zeros, NaNs (unless no_nan) and -inf
local function input(shape, dt, seed, no_nan)
  ember.manual_seed(seed)
  local x = ember.randint(-2, 3, shape):to(dt)
  local v = x:view(-1)
  local n = v:size(1)
  v:narrow(1, 1 + (7 % n), 1):fill_(-0.0)
  if not no_nan then
    v:narrow(1, 1 + (31 % n), 1):fill_(0 / 0)
    v:narrow(1, 1 + (33 % n), 1):fill_(0 / 0)
  end
  v:narrow(1, 1 + (90 % n), 1):fill_(-math.huge)
  return x
end

local geoms = {
  { k = { 3, 3 }, s = { 2, 2 }, p = { 0, 0 } }, { k = { 3, 3 }, s = { 2, 2 }, p = { 1, 1 } },
  { k = { 2, 2 }, s = { 2, 2 }, p = { 0, 0 } }, { k = { 2, 2 }, s = { 1, 1 }, p = { 1, 0 } },
  { k = { 3, 2 }, s = { 3, 3 }, p = { 1, 1 } }, { k = { 5, 4 }, s = { 2, 3 }, p = { 2, 2 } },
  { k = { 1, 1 }, s = { 2, 2 }, p = { 0, 0 } }, { k = { 4, 7 }, s = { 1, 5 }, p = { 2, 3 } },
  { k = { 3, 3 }, s = { 2, 2 }, p = { 1, 1 }, ceil = true }, { k = { 2, 3 }, s = { 2, 2 }, p = { 0, 1 }, ceil = true },
  { k = { 3, 3 }, s = { 2, 2 }, p = { 1, 1 }, d = { 2, 2 } }, { k = { 2, 3 }, s = { 1, 2 }, p = { 0, 1 }, d = { 1, 2 } },
}
-- odd sizes, widths below a vector, across one, and rows past the padded loops
local shapes = { { 2, 3, 9, 11 }, { 1, 2, 17, 40 }, { 1, 1, 5, 70 }, { 3, 1, 8, 8 } }

describe("max_pool2d by rows", function()
  for _, dt in ipairs({ "float32", "float64" }) do
    for gi, g in ipairs(geoms) do
      g.d = g.d or { 1, 1 }
      it(("gives the window scan's values with and without positions, bit for bit (%s, case %d)"):format(dt, gi),
        function()
          -- a dilation within the plane is composed of recorded ops, whose max keeps a window's
          -- first NaN, not its last: the positions there are checked without NaNs
          local dilated = g.d[1] > 1 or g.d[2] > 1
          for si, shape in ipairs(shapes) do
            local x = input(shape, dt, 60 + si, dilated)
            local ry, ri, rs = reference(x, g)
            for _, layout in ipairs({ "nchw", "channels_last" }) do
              local xl = layout == "nchw" and x or x:contiguous(CL)
              local what = ("%s %s shape %d"):format(dt, layout, si)
              local y = pool(xl, g)
              assert.are.same(rs, y:shape())
              same_list(flat(y), ry, what .. " values")
              local y2, idx = pool(xl, g, true)
              same_list(flat(y2), ry, what .. " values beside positions")
              same_list(flat(idx), ri, what .. " positions")
            end
          end
        end)
    end
  end

  it("keeps windows of -inf only at their first element, padding or not", function()
    local x = ember.full({ 1, 2, 7, 9 }, -math.huge)
    for _, g in ipairs({ geoms[2], geoms[6] }) do
      local ry, ri = reference(x, g)
      same_list(flat(pool(x, g)), ry, "values")
      local _, idx = pool(x, g, true)
      same_list(flat(idx), ri, "positions")
    end
  end)

  it("rounds the half dtypes as the float32 result does, with or without positions", function()
    local x = input({ 2, 2, 13, 21 }, "float32", 70)
    for _, dt in ipairs({ "float16", "bfloat16" }) do
      local g = geoms[2]
      local want = flat(pool(x:to(dt):to("float32"), g))
      same_list(flat(pool(x:to(dt), g):to("float32")), want, dt)
      same_list(flat(pool(x:to(dt), g, true):to("float32")), want, dt .. " beside positions")
    end
  end)

  it("gives the positions' gradient where a recording keeps them", function()
    for _, g in ipairs({ geoms[1], geoms[2], geoms[5], geoms[8] }) do
      for _, layout in ipairs({ "nchw", "channels_last" }) do
        local x = ember.randn({ 2, 3, 11, 13 }, { dtype = "float64" })
        if layout == "channels_last" then x = x:contiguous(CL) end
        local _, ri, rs = reference(x, g)
        local gm = ember.autodiff.GradManager():attach({ x })
        gm:record()
        local y = pool(x, g)
        local w = ember.arange(1, y:numel() + 1, 1, { dtype = "float64" }):view(y:shape())
        gm:backward((y * w):sum())
        -- each output's weight lands on its window's maximum
        local want, plane = {}, x:size(3) * x:size(4)
        for i = 1, x:numel() do want[i] = 0 end
        local per = rs[3] * rs[4]
        for i, at in ipairs(ri) do
          local q = math.floor((i - 1) / per)
          want[q * plane + at + 1] = want[q * plane + at + 1] + i
        end
        same_list(flat(x.grad), want, layout .. " gradient")
      end
    end
  end)

  it("passes gradcheck and gradgradcheck through the positions", function()
    ember.manual_seed(71)
    local x = ember.randn({ 2, 2, 9, 10 }, { dtype = "float64" })
    for _, g in ipairs({ geoms[2], geoms[5], geoms[9], geoms[11] }) do
      local f = function(a) return pool(a, g) end
      assert.is_true(ember.autodiff.gradcheck(f, { x }))
      assert.is_true(ember.autodiff.gradgradcheck(f, { x }))
      assert.is_true(ember.autodiff.gradcheck(f, { x:contiguous(CL) }))
    end
  end)

  it("gives the same bits on one thread and on several, with and without positions", function()
    local x = input({ 4, 16, 30, 45 }, "float32", 72)
    local threads = ember.get_num_threads()
    local runs = {}
    for i, n in ipairs({ 1, math.min(4, ember.thread_stats().max_threads) }) do
      ember.set_num_threads(n)
      local y2, idx = pool(x, geoms[2], true)
      runs[i] = { flat(pool(x, geoms[2])), flat(y2), flat(idx) }
    end
    ember.set_num_threads(threads)
    for j = 1, 3 do same_list(runs[2][j], runs[1][j], "result " .. j) end
    same_list(runs[1][1], runs[1][2], "values without and with positions")
  end)

  it("leaves the C entry point's indices out only where the caller asks none", function()
    local ffi = require("ffi")
    local C = ember._C
    local out = ffi.new("ember_tensor*[2]")
    local k, s, p = ffi.new("int64_t[2]", 3, 3), ffi.new("int64_t[2]", 2, 2), ffi.new("int64_t[2]", 1, 1)
    local x = input({ 1, 2, 9, 9 }, "float32", 73)
    assert.are.equal(0, C.ember_max_pool2d(ember._ptr("spec", x, 1), k, s, p, out, out + 1))
    local y, idx = ember._wrap(out[0]), ember._wrap(out[1])
    assert.are.same({ 1, 2, 5, 5 }, idx:shape())
    assert.are.equal("int64", idx.dtype)
    assert.are.equal(0, C.ember_max_pool2d(ember._ptr("spec", x, 1), k, s, p, out, nil))
    same_list(flat(ember._wrap(out[0])), flat(y), "values without positions")
  end)

  -- The positions a recording saves for the backward are int32 where the
  -- caller asked for none (half the bytes held until backward); the public
  -- return_indices result stays int64. The gradients match bit for bit.
  it("saves int32 positions where the caller asks for none, with the same gradient bits", function()
    local graph = ember.autodiff.graph
    for _, dt in ipairs({ "float32", "float64" }) do
      for gi, g in ipairs({ geoms[3], geoms[2], geoms[6], geoms[9] }) do
        g.d = g.d or { 1, 1 }
        for _, layout in ipairs({ "nchw", "channels_last" }) do
          local x0 = input({ 2, 3, 12, 14 }, dt, 80 + gi)   -- ties, a NaN window, -inf, -0
          if layout == "channels_last" then x0 = x0:contiguous(CL) end
          local what = ("%s case %d %s"):format(dt, gi, layout)
          local grads, kinds = {}, {}
          for _, ri in ipairs({ false, true }) do
            local x = x0:clone()
            local gm, seen = ember.autodiff.GradManager():attach({ x }), {}
            graph.saved_tensors_hooks(function(t) seen[#seen + 1] = t.dtype; return t end, function(t) return t end,
              function()
                gm:record()
                local y = pool(x, g, ri)
                local w = ember.arange(1, y:numel() + 1, 1, { dtype = dt }):view(y:shape())
                gm:backward((y * w):sum())
              end)
            grads[#grads + 1], kinds[#kinds + 1] = x.grad, table.concat(seen, " ")
          end
          assert.truthy(kinds[1]:find("int32"), what .. ": saved " .. kinds[1])
          assert.falsy(kinds[1]:find("int64"), what .. ": saved " .. kinds[1])
          assert.truthy(kinds[2]:find("int64"), what .. ": saved " .. kinds[2])
          same_list(flat(grads[1]), flat(grads[2]), what .. " gradient")
        end
      end
    end
  end)

  it("reads int32 positions in max_pool2d_backward as it reads int64 ones, and checks them", function()
    local ffi = require("ffi")
    local C = ember._C
    for gi, g in ipairs({ geoms[3], geoms[2] }) do   -- the 2x2 windows' path and the general one
      g.d = g.d or { 1, 1 }
      local x = input({ 2, 3, 10, 14 }, "float32", 90 + gi)
      local y, idx = pool(x, g, true)
      local gy = ember.randn(y:shape())
      local xs = ffi.new("int64_t[4]", x:shape())
      local out = ffi.new("ember_tensor*[1]")
      local res = {}
      for i, ix in ipairs({ idx, idx:to("int32") }) do
        assert.are.equal(0, C.ember_max_pool2d_backward(ember._ptr("spec", gy, 1), ember._ptr("spec", ix, 2), xs, out))
        res[i] = flat(ember._wrap(out[0]))
      end
      same_list(res[2], res[1], "int32 against int64, case " .. gi)
      local bad = idx:to("int32"):clone()
      bad:view(-1):narrow(1, 5, 1):fill_(10 * 14)
      assert.are_not.equal(0, C.ember_max_pool2d_backward(ember._ptr("spec", gy, 1), ember._ptr("spec", bad, 2), xs, out))
      assert.truthy(ffi.string(C.ember_last_error()):find("index 140 is outside a 10 x 14 plane", 1, true))
    end
  end)
end)
