-- The row kernels of layer norm and softmax (issue 33's second pass):
-- layer_norm_backward reading its gradient in place (a broadcast one, as a
-- sum's gradient is, and strided rows) gives the bits of a contiguous
-- gradient; odd row lengths (the vector tails), one row and one column
-- against the float64 composition.
local H = require("helpers")
local ember = H.ember
local ffi = require("ffi")
local C = ember._C
local F64 = { dtype = "float64" }

local out2 = ffi.new("ember_tensor*[2]")
local function check(rc) if rc ~= 0 then error(ffi.string(C.ember_last_error()), 2) end end

local function max_diff(a, b)
  return (a:to("float64") - b:to("float64")):abs():max():item()
end

-- layer_norm(x, w, b) over the last dim, and its adjoint for g: y, stats, gx, gwb
local function ln(x, w, b, rms)
  check(C.ember_layer_norm(x._c, w._c, b._c, 1, rms and 1 or 0, 1e-5, out2, out2 + 1))
  return ember._wrap(out2[0]), ember._wrap(out2[1])
end
local function ln_backward(g, x, w, st, rms)
  check(C.ember_layer_norm_backward(g._c, x._c, w._c, st._c, 1, rms and 1 or 0, 1e-5, out2, out2 + 1))
  return ember._wrap(out2[0]), ember._wrap(out2[1])
end

describe("layer_norm_backward's gradient read in place", function()
  -- 4097 is above the longest row a broadcast gradient is read in place for
  for _, dt in ipairs({ "float32", "float64" }) do
    for _, d in ipairs({ 1, 5, 37, 768, 4097 }) do
      it(("gives a contiguous gradient's bits for broadcast and strided ones (%s, rows of %d)"):format(dt, d), function()
        ember.manual_seed(d)
        local x = ember.randn({ 3, 4, d }, F64):to(dt)
        local w, b = ember.randn({ d }, F64):to(dt), ember.randn({ d }, F64):to(dt)
        for _, rms in ipairs({ false, true }) do
          local _, st = ln(x, w, b, rms)
          local grads = {
            ember.full({}, 0.75, { dtype = dt }):expand({ 3, 4, d }),          -- all strides 0
            ember.randn({ 3, 1, 1 }, F64):to(dt):expand({ 3, 4, d }),          -- a value per row block
            ember.randn({ 3, 4, d + 3 }, F64):to(dt):narrow(3, 2, d),          -- strided rows
            ember.randn({ 4, 3, d }, F64):to(dt):transpose(1, 2),              -- leading dims permuted
          }
          for i, g in ipairs(grads) do
            local gx, gwb = ln_backward(g, x, w, st, rms)
            local cx, cwb = ln_backward(g:contiguous(), x, w, st, rms)
            assert.are.equal(0, max_diff(gx, cx), "gx, gradient " .. i)
            assert.are.equal(0, max_diff(gwb, cwb), "gwb, gradient " .. i)
          end
        end
      end)
    end
  end

  it("one row and one column, against the float64 composition", function()
    ember.manual_seed(3)
    for _, shape in ipairs({ { 1, 37 }, { 9, 1 }, { 1, 1 }, { 2, 3, 33 } }) do
      local d = shape[#shape]
      local x = ember.randn(shape, F64) * 3 + 1
      local w, b = ember.randn({ d }, F64), ember.randn({ d }, F64)
      local r = ember.randn(shape, F64)
      local gm = ember.autodiff.GradManager():attach({ x, w, b })
      gm:record()
      gm:backward((ember.nn.functional.layer_norm(x, { d }, w, b) * r):sum())
      local fused = { x.grad, w.grad, b.grad }
      local x2, w2, b2 = x:clone(), w:clone(), b:clone()
      local gm2 = ember.autodiff.GradManager():attach({ x2, w2, b2 })
      gm2:record()
      local xc = x2 - x2:mean(#shape, true)
      local y = xc * ((xc * xc):mean(#shape, true) + 1e-5):rsqrt() * w2 + b2
      gm2:backward((y * r):sum())
      for i, ref in ipairs({ x2.grad, w2.grad, b2.grad }) do
        assert.is_true(max_diff(fused[i], ref) <= 1e-13 * math.max(1, ref:abs():max():item()),
          ("{%s} grad %d: %g"):format(table.concat(shape, ", "), i, max_diff(fused[i], ref)))
      end
    end
  end)
end)
