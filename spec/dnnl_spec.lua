-- conv2d and its two adjoints through oneDNN (core/src/ops/conv_dnnl.c),
-- against ember's own im2col + GEMM kernels as the oracle.
local H = require("helpers")
local ember = H.ember
local ffi = require("ffi")
local C = ember._C

local out = ffi.new("ember_tensor *[1]")
local function pair(v) v = type(v) == "table" and v or { v, v }; return ffi.new("int64_t[2]", v[1], v[2]) end
local function take(rc)
  if rc ~= 0 then error(ffi.string(C.ember_last_error())) end
  return ember._wrap(out[0])
end

-- y, gx and gw of one geometry {N, C, H, W, O, kH, kW, stride, padding, dilation, groups}
local function products(c, dtype)
  local xs, g = { c[1], c[2], c[3], c[4] }, c[11]
  local ws = { c[5], c[2] / g, c[6], c[7] }
  ember.manual_seed(3)
  local x, w = ember.randn(xs, { dtype = dtype }), ember.randn(ws, { dtype = dtype })
  local st, pd, dl = pair(c[8]), pair(c[9]), pair(c[10])
  local y = take(C.ember_conv2d(x._c, w._c, st, pd, dl, g, out))
  local gy = ember.randn(y:shape(), { dtype = dtype })
  local gx = take(C.ember_conv2d_backward_input(gy._c, w._c, ffi.new("int64_t[4]", xs), st, pd, dl, g, out))
  local gw = take(C.ember_conv2d_backward_weight(x._c, gy._c, ffi.new("int64_t[4]", ws), st, pd, dl, g, out))
  return { y, gx, gw }
end

local function with_dnnl(on, f) return H.with_switch(ember.set_dnnl_enabled, ember.dnnl_enabled, on, f) end

-- the three products of one geometry, through oneDNN (on) or ember's kernels
local function run(on, c, dtype)
  return with_dnnl(on, function() return products(c, dtype or "float32") end)
end

local function assert_same_bits(a, b)
  for k = 1, 3 do assert.are.equal(0, (a[k] - b[k]):abs():max():item()) end
end

local function max_rel_diff(a, b)
  return (a - b):abs():max():item() / math.max(1, b:abs():max():item())
end

local geometries = {
  { 2, 3, 9, 9, 4, 3, 3, 1, 1, 1, 1 },                       -- "same" 3x3
  { 1, 1, 28, 28, 16, 5, 5, 1, 2, 1, 1 },                    -- the CNN recipe's first layer
  { 8, 16, 14, 14, 32, 5, 5, 1, 2, 1, 1 },                   -- and its second
  { 2, 4, 11, 10, 6, 3, 2, { 2, 1 }, { 1, 0 }, { 2, 1 }, 2 }, -- uneven stride, padding, dilation; groups
  { 3, 6, 8, 8, 6, 1, 1, 1, 0, 1, 6 },                       -- depthwise 1x1
  { 2, 8, 7, 7, 8, 3, 3, 2, 1, 1, 4 },
  { 2, 4, 7, 7, 8, 3, 3, 3, 2, 2, 1 },                       -- stride 3 skips input rows
  { 2, 3, 5, 5, 4, 5, 5, 1, 0, 1, 1 },                       -- a 1x1 output
  { 2, 3, 8, 9, 5, 3, 3, 2, 1, 1, 1 },                       -- the last input row and column unused
}

describe("oneDNN convolutions", function()
  it("says whether it is built in", function()
    assert.is_string(ember.dnnl_info())
    assert.is_boolean(ember.dnnl_enabled())
    if not ember.dnnl_enabled() then assert.matches("^none", ember.dnnl_info()) end
  end)

  it("match ember's kernels in all three products (float32)", function()
    for _, c in ipairs(geometries) do
      local got, want = run(true, c), run(false, c)
      for k = 1, 3 do
        assert.are.same(want[k]:shape(), got[k]:shape())
        local d = max_rel_diff(got[k], want[k])
        assert(d < 1e-5, ("geometry %d, product %d: relative difference %g"):format(_, k, d))
      end
    end
  end)

  it("repeat a geometry from the primitive made once", function()
    assert_same_bits(run(true, geometries[3]), run(true, geometries[3]))
  end)

  it("leave float64 and deterministic mode to ember's kernels", function()
    assert_same_bits(run(true, geometries[4], "float64"), run(false, geometries[4], "float64"))
    ember.set_deterministic(true)
    local ok, r = pcall(function() assert_same_bits(run(true, geometries[3]), run(false, geometries[3])) end)
    ember.set_deterministic(false)
    assert(ok, r)
  end)

  it("follow the thread count", function()
    local threads = ember.get_num_threads()
    local c = geometries[3]
    local ok, r = pcall(function()
      local want = run(false, c)
      for _, n in ipairs({ 1, 2 }) do
        ember.set_num_threads(n)
        local got = run(true, c)
        for k = 1, 3 do assert(max_rel_diff(got[k], want[k]) < 1e-5) end
      end
    end)
    ember.set_num_threads(threads)
    assert(ok, r)
  end)
end)

describe("oneDNN after fork", function()
  -- libgomp's workers do not survive fork; a child that ran oneDNN on them
  -- would wait for them forever
  it("runs a forked child's convolutions", function()
    local F = ember.nn.functional
    local x, w = ember.randn({ 4, 16, 14, 14 }), ember.randn({ 32, 16, 5, 5 })
    local want = F.conv2d(x, w, nil, { padding = 2 })
    H.in_forked_child("its convolution", function()
      return max_rel_diff(F.conv2d(x, w, nil, { padding = 2 }), want) < 1e-5
    end, 10)
  end)
end)
