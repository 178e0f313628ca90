-- conv_dnnl.c runs reorders under 1 MB (the weights of these convolutions
-- below it: 32 x 32 x 3 x 3 is 36 KB) on the calling thread alone and larger
-- ones (192 x 192 x 3 x 3, 1.3 MB; an NCHW product's activations) on the
-- team. A reorder copies, so neither changes a bit: the forward and both
-- gradients on 2 threads equal those on 1 bit for bit, in NCHW and
-- channels_last, and equal float64 products of the same values within
-- float32's rounding.
local H = require("helpers")
local ember = H.ember
local F = ember.nn.functional
local cl = { memory_format = "channels_last" }

-- y = conv2d(x, w) and the gradients of sum(y * dy), as float64 tables
local function run(xs, ws, layout, dtype, threads)
  ember.set_num_threads(threads)
  ember.manual_seed(11)
  local x, w = ember.randn(xs), ember.randn(ws)
  local dy = ember.randn({ xs[1], ws[1], xs[3], xs[4] })
  if dtype then x, w, dy = x:to(dtype), w:to(dtype), dy:to(dtype) end
  if layout then x, w = x:contiguous(layout), w:contiguous(layout) end
  local gm = ember.autodiff.GradManager():attach({ x, w })
  gm:record()
  local y = F.conv2d(x, w, nil, { padding = 1 })
  gm:backward({ y }, { dy })
  return { y:contiguous():to("float64"), x.grad:contiguous():to("float64"), w.grad:contiguous():to("float64") }
end

describe("conv2d's reorders on one thread or the team", function()
  local before = ember.get_num_threads()
  after_each(function() ember.set_num_threads(before) end)
  for _, c in ipairs({
    { "a 36 KB weight (its reorder on the calling thread)", { 4, 32, 12, 12 }, { 32, 32, 3, 3 } },
    { "a 1.3 MB weight (its reorder on the team)", { 2, 192, 6, 6 }, { 192, 192, 3, 3 } },
  }) do
    for _, layout in ipairs({ false, cl }) do
      local name = c[1] .. (layout and ", channels_last" or ", NCHW")
      it("gives 2 threads the bits of 1: " .. name, function()
        local one, two = run(c[2], c[3], layout or nil, nil, 1), run(c[2], c[3], layout or nil, nil, 2)
        for i = 1, 3 do assert.are.same(one[i]:reshape({ -1 }):tolist(), two[i]:reshape({ -1 }):tolist()) end
        local ref = run(c[2], c[3], layout or nil, "float64", 2)
        for i = 1, 3 do H.same(two[i], ref[i]:tolist(), 2e-4) end
      end)
    end
  end
end)
