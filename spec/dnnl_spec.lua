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

-- gradcheck (of the sum) and gradgradcheck of f(x, w, b) in float64: x of
-- shape xs, w {4, 1, 3, 3} and b {4} (a grouped convolution's)
local function conv_gradchecks(xs, f)
  local f64 = { dtype = "float64" }
  ember.manual_seed(6)
  local x, w, b = ember.randn(xs, f64), ember.randn({ 4, 1, 3, 3 }, f64), ember.randn({ 4 }, f64)
  assert.is_true(ember.autodiff.gradcheck(function(...) return f(...):sum() end, { x, w, b }))
  assert.is_true(ember.autodiff.gradgradcheck(f, { x, w, b }))
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

-- relu(conv2d(x, w) + b) as one op (F.conv2d_relu, nn.Conv2d{activation =
-- "relu"}) against the three ops it replaces, run on ember's kernels
describe("conv2d with its bias and ReLU fused", function()
  local F, graph = ember.nn.functional, ember.autodiff.graph

  -- y and the gradients of x, w and b under a random dy, for one geometry
  local function vjp(f, c, dtype)
    local xs, g = { c[1], c[2], c[3], c[4] }, c[11]
    ember.manual_seed(5)
    local o = { dtype = dtype }
    local x, w, b = ember.randn(xs, o), ember.randn({ c[5], c[2] / g, c[6], c[7] }, o), ember.randn({ c[5] }, o)
    local opts = { stride = c[8], padding = c[9], dilation = c[10], groups = g }
    local y = F.conv2d(x, w, b, opts)
    local dy = ember.randn(y:shape(), o)
    local out, grads = ember.autodiff.vjp(function(x_, w_, b_) return f(x_, w_, b_, opts) end, { x, w, b }, dy)
    return { out, grads[1], grads[2], grads[3] }
  end
  local function fused(x, w, b, opts) return F.conv2d_relu(x, w, b, opts) end
  local function unfused(x, w, b, opts) return F.conv2d(x, w, b, opts):relu() end

  local function assert_close(got, want, tol, what)
    for k = 1, 4 do
      assert.are.same(want[k]:shape(), got[k]:shape())
      local d = max_rel_diff(got[k], want[k])
      assert(d <= tol, ("%s, %s: relative difference %g"):format(what, ({ "y", "gx", "gw", "gb" })[k], d))
    end
  end

  it("match conv2d + bias + relu in the output and all three gradients", function()
    for i, c in ipairs(geometries) do
      local want = with_dnnl(false, function() return vjp(unfused, c, "float32") end)
      assert_close(with_dnnl(true, function() return vjp(fused, c, "float32") end), want, 1e-5,
        ("geometry %d through oneDNN"):format(i))
      assert_close(with_dnnl(false, function() return vjp(fused, c, "float32") end), want, 1e-6,
        ("geometry %d on ember's kernels"):format(i))
      local want64 = vjp(unfused, c, "float64")
      assert_close(vjp(fused, c, "float64"), want64, 0, ("geometry %d in float64"):format(i))
    end
  end)

  -- backward runs as one op (conv2d_relu_backward): relu's mask applied as
  -- the gradient is written in the layout oneDNN's two adjoints share; with
  -- x needing no gradient (a network's first layer) it makes only w's and b's
  it("give w's and b's gradients alone when x needs none", function()
    for i, c in ipairs(geometries) do
      local xs, g = { c[1], c[2], c[3], c[4] }, c[11]
      ember.manual_seed(7)
      local x, w, b = ember.randn(xs), ember.randn({ c[5], c[2] / g, c[6], c[7] }), ember.randn({ c[5] })
      local opts = { stride = c[8], padding = c[9], dilation = c[10], groups = g }
      local dy = ember.randn(F.conv2d(x, w, b, opts):shape())
      local function grads(f, on)
        return with_dnnl(on, function()
          local _, gr = ember.autodiff.vjp(function(w_, b_) return f(x, w_, b_, opts) end, { w, b }, dy)
          return gr
        end)
      end
      local want, got = grads(unfused, false), grads(fused, true)
      for k = 1, 2 do
        local d = max_rel_diff(got[k], want[k])
        assert(d <= 1e-5, ("geometry %d, %s: relative difference %g"):format(i, k == 1 and "gw" or "gb", d))
      end
    end
  end)

  it("pass gradcheck and gradgradcheck", function()
    conv_gradchecks({ 2, 2, 5, 5 }, function(x, w, b)
      return F.conv2d_relu(x, w, b, { padding = 1, stride = { 2, 1 }, groups = 2 })
    end)
  end)

  it("keep its output for backward: an in-place change raises the version error", function()
    local x, w, b = ember.randn({ 1, 2, 6, 6 }), ember.randn({ 3, 2, 3, 3 }), ember.randn({ 3 })
    local gm = ember.autodiff.GradManager():attach({ w, b })
    gm:record()
    local y = F.conv2d_relu(x, w, b, { padding = 1 })
    local loss = y:sum()
    y:mul_(2)
    H.raises(function() gm:backward(loss) end, "version", "Conv2dRelu")
  end)

  it("gives its saved tensors to saved-tensor hooks", function()
    local x, w, b = ember.randn({ 2, 2, 6, 6 }), ember.randn({ 3, 2, 3, 3 }), ember.randn({ 3 })
    local function loss(x_, w_, b_) return F.conv2d_relu(x_, w_, b_, { padding = 1 }):sum() end
    local packed = 0
    local _, want = ember.autodiff.vjp(loss, { x, w, b })
    local _, got = graph.saved_tensors_hooks(function(t) packed = packed + 1; return t:clone() end,
      function(t) return t end, function() return ember.autodiff.vjp(loss, { x, w, b }) end)
    assert.are.equal(3, packed)   -- x, w and the output
    for k = 1, 3 do assert.are.equal(0, (got[k] - want[k]):abs():max():item()) end
  end)

  it("is nn.Conv2d's activation = \"relu\", which falls back to conv2d + relu without a bias", function()
    ember.manual_seed(7)
    local m = ember.nn.Conv2d(2, 3, 3, { padding = 1, activation = "relu" })
    local x = ember.randn({ 2, 2, 5, 5 })
    local want = F.conv2d(x, m.weight, m.bias, { padding = 1 }):relu()
    assert(max_rel_diff(m(x), want) < 1e-6)
    assert.matches("activation=relu", tostring(m))
    local nb = ember.nn.Conv2d(2, 3, 3, { bias = false, activation = "relu" })
    assert.are.equal(0, (nb(x) - F.conv2d(x, nb.weight):relu()):abs():max():item())
    assert.has_error(function() ember.nn.Conv2d(2, 3, 3, { activation = "tanh" }) end,
      'ember.nn.Conv2d: activation must be nil or "relu", got tanh')
  end)

  it("names itself in its errors", function()
    local x, w = ember.randn({ 1, 2, 5, 5 }), ember.randn({ 3, 2, 3, 3 })
    local ok, err = pcall(F.conv2d_relu, x, w, ember.randn({ 4 }))
    assert.is_false(ok)
    assert.matches("conv2d_relu: bias must have shape {3}, got {4}", err, 1, true)
    ok, err = pcall(F.conv2d_relu, x, w, ember.randn({ 3 }, { dtype = "float64" }))
    assert.is_false(ok)
    assert.matches("conv2d_relu: bias must share the input's dtype", err, 1, true)
  end)
end)

describe("conv2d, bias, ReLU and max pooling fused (conv2d_relu_max_pool2d)", function()
  local F, graph = ember.nn.functional, ember.autodiff.graph

  -- {N, C, H, W, O, k, stride, padding, dilation, groups, pool kernel, pool stride}
  local cases = {
    { 4, 1, 28, 28, 16, 5, 1, 2, 1, 1, 2, 2 },   -- the CNN recipe's layers
    { 4, 16, 14, 14, 32, 5, 1, 2, 1, 1, 2, 2 },
    { 3, 5, 9, 7, 20, 3, 1, 1, 1, 1, 2, 2 },     -- 20 channels: a block of 16 and one of 4; odd H and W leave a row and a column
    { 2, 3, 10, 11, 7, 3, 1, 0, 1, 1, 3, 3 },    -- 3x3 windows
    { 2, 4, 12, 9, { 6, 5 }, 3, { 2, 1 }, 1, 1, 1, { 2, 3 }, { 2, 3 } }, -- uneven windows
    { 2, 4, 8, 8, 8, 3, 1, 1, 2, 2, 2, 2 },      -- dilation and groups
    { 2, 3, 9, 9, 6, 3, 1, 1, 1, 1, 3, 2 },      -- overlapping windows (stride below the kernel)
    { 2, 2, 4, 4, 3, 3, 1, 1, 1, 1, 4, 4 },      -- one window per plane
  }
  local function setup(c, dtype, seed)
    ember.manual_seed(seed or 5)
    local o = { dtype = dtype or "float32" }
    local O = type(c[5]) == "table" and c[5][1] or c[5]
    local x = ember.randn({ c[1], c[2], c[3], c[4] }, o)
    local w = ember.randn({ O, c[2] / c[10], c[6], c[6] }, o)
    local b = ember.randn({ O }, o)
    return x, w, b, { stride = c[7], padding = c[8], dilation = c[9], groups = c[10] }, c[11], { stride = c[12] }
  end
  local function fused(x, w, b, opts, k, po) return F.conv2d_relu_max_pool2d(x, w, b, opts, k, po) end
  local function unfused(x, w, b, opts, k, po) return F.max_pool2d(F.conv2d_relu(x, w, b, opts), k, po) end
  -- the pooled values and the gradients of x, w and b under a random dp
  local function run(f, c, dtype, wrt)
    local x, w, b, opts, k, po = setup(c, dtype)
    local dp = ember.randn(unfused(x, w, b, opts, k, po):shape(), { dtype = dtype or "float32" })
    local function g(...)
      local args = { x, w, b }
      for i, a in ipairs({ ... }) do args[wrt and wrt[i] or i] = a end
      return f(args[1], args[2], args[3], opts, k, po)
    end
    local inputs = {}
    for i, j in ipairs(wrt or { 1, 2, 3 }) do inputs[i] = ({ x, w, b })[j] end
    local out, grads = ember.autodiff.vjp(g, inputs, dp)
    return out, grads
  end
  local function check(got, want, tol, what)
    assert.are.same(want:shape(), got:shape())
    local d = max_rel_diff(got, want)
    assert(d <= tol, ("%s: relative difference %g"):format(what, d))
  end

  it("give max_pool2d(conv2d_relu(...))'s values, positions and gradients", function()
    for i, c in ipairs(cases) do
      for _, on in ipairs({ true, false }) do
        with_dnnl(on, function()
          local x, w, b, opts, k, po = setup(c)
          local v, ix = F.max_pool2d(F.conv2d_relu(x, w, b, opts), k, po, true)
          local p = fused(x, w, b, opts, k, po)
          assert.are.equal(0, (p - v):abs():max():item(), ("case %d: values"):format(i))
          -- the C API's positions: max_pool2d's, as int32
          local two = ffi.new("ember_tensor *[2]")
          local kk, ps = type(k) == "table" and k or { k, k }, po.stride
          ps = type(ps) == "table" and ps or { ps, ps }
          local st, pd, dl = opts.stride, opts.padding, opts.dilation
          assert.are.equal(0, C.ember_conv2d_relu_max_pool2d(x._c, w._c, b._c, pair(st), pair(pd), pair(dl), opts.groups,
            pair(kk), pair(ps), two, two + 1), ffi.string(C.ember_last_error()))
          local pc, ic = ember._wrap(two[0]), ember._wrap(two[1])
          assert.are.equal("int32", ic.dtype)
          assert.are.equal(0, (pc - v):abs():max():item())
          assert.are.equal(0, (ic:to("int64") - ix):abs():max():item(), ("case %d: positions"):format(i))
          local pf, gf = run(fused, c)
          local pu, gu = run(unfused, c)
          check(pf, pu, 0, ("case %d values"):format(i))
          for j, name in ipairs({ "gx", "gw", "gb" }) do
            check(gf[j], gu[j], 1e-5, ("case %d (oneDNN %s) %s"):format(i, tostring(on), name))
          end
          assert.are.equal("int64", ix.dtype)
        end)
      end
      -- float64 goes the composed way: the same numbers (b's gradient summed over the pooled values)
      local pf, gf = run(fused, c, "float64")
      local pu, gu = run(unfused, c, "float64")
      check(pf, pu, 0, ("case %d float64 values"):format(i))
      for j = 1, 3 do check(gf[j], gu[j], 1e-12, ("case %d float64 gradient %d"):format(i, j)) end
    end
  end)

  it("give w's and b's gradients alone when x needs none", function()
    for i, c in ipairs(cases) do
      local _, gf = run(fused, c, nil, { 2, 3 })
      local gu = with_dnnl(false, function() return select(2, run(unfused, c, nil, { 2, 3 })) end)
      check(gf[1], gu[1], 1e-5, ("case %d gw"):format(i))
      check(gf[2], gu[2], 1e-5, ("case %d gb"):format(i))
    end
  end)

  it("agree without ember's AVX-512 kernels (EMBER_NO_AVX512)", function()
    pcall(ffi.cdef, [[ int setenv(const char *name, const char *value, int overwrite); int unsetenv(const char *name); ]])
    local want = {}
    for i, c in ipairs(cases) do want[i] = { run(fused, c) } end
    ffi.C.setenv("EMBER_NO_AVX512", "1", 1)
    local ok, err = pcall(function()
      for i, c in ipairs(cases) do
        local p, g = run(fused, c)
        check(p, want[i][1], 0, ("case %d values"):format(i))
        for j = 1, 3 do check(g[j], want[i][2][j], 0, ("case %d gradient %d"):format(i, j)) end
      end
    end)
    ffi.C.unsetenv("EMBER_NO_AVX512")
    assert(ok, err)
  end)

  it("keep the first maximum of a window, as max_pool2d does", function()
    -- a 1x1 convolution with weight 1 and bias 0 is relu(x) in each of 16
    -- channels; ties (5 and 5; four zeros; 7s) and an infinity
    local x = ember.tensor({ { { { 1, 5, 2, 2 }, { 5, 4, 2, 3 }, { -1, -2, 7, 7 }, { -3, -4, 7, 1 / 0 } } } })
    local w, b = ember.ones({ 16, 1, 1, 1 }), ember.zeros({ 16 })
    for _, on in ipairs({ true, false }) do
      with_dnnl(on, function()
        local p, ix = F.max_pool2d(F.conv2d_relu(x, w, b), 2, nil, true)
        local got = fused(x, w, b, {}, 2)
        assert.are.same({ { 5, 3 }, { 0, 1 / 0 } }, got[1][16]:tolist())
        assert.are.same({ { 1, 7 }, { 8, 15 } }, ix[1][16]:tolist())
        assert.are.same(p:tolist(), got:tolist())
      end)
    end
  end)

  it("pass gradcheck and gradgradcheck", function()
    conv_gradchecks({ 2, 2, 6, 6 }, function(x, w, b) return fused(x, w, b, { padding = 1, groups = 2 }, 2) end)
  end)

  it("keeps x, w and its two results for backward, and sees an in-place change", function()
    local x, w, b = ember.randn({ 2, 2, 6, 6 }), ember.randn({ 3, 2, 3, 3 }), ember.randn({ 3 })
    local function loss(x_, w_, b_) return fused(x_, w_, b_, { padding = 1 }, 2):sum() end
    local packed = 0
    local _, want = ember.autodiff.vjp(loss, { x, w, b })
    local _, got = graph.saved_tensors_hooks(function(t) packed = packed + 1; return t:clone() end,
      function(t) return t end, function() return ember.autodiff.vjp(loss, { x, w, b }) end)
    assert.are.equal(4, packed)   -- x, w, the pooled values and their positions
    for k = 1, 3 do assert.are.equal(0, (got[k] - want[k]):abs():max():item()) end
    local gm = ember.autodiff.GradManager():attach({ w, b })
    gm:record()
    local p = fused(x, w, b, { padding = 1 }, 2)
    local l = p:sum()
    p:mul_(2)
    H.raises(function() gm:backward(l) end, "version", "Conv2dReluMaxPool2d")
  end)

  it("is what nn.Sequential runs for a Conv2d with activation \"relu\" and a MaxPool2d", function()
    ember.manual_seed(8)
    local conv, pool = ember.nn.Conv2d(2, 3, 3, { padding = 1, activation = "relu" }), ember.nn.MaxPool2d(2)
    local seq = ember.nn.Sequential(conv, pool)
    local x = ember.randn({ 2, 2, 7, 7 })
    local r = ember.profile(function() return seq(x) end)
    assert.are.equal(1, r.ops.conv2d_relu_max_pool2d.calls)
    assert.are.equal(0, (seq(x) - pool(conv(x))):abs():max():item())
    -- padding, no bias or a plain ReLU module keep the layers apart
    local padded = ember.nn.Sequential(conv, ember.nn.MaxPool2d(2, { padding = 1 }))
    r = ember.profile(function() return padded(x) end)
    assert.is_nil(r.ops.conv2d_relu_max_pool2d)
    assert.are.equal(1, r.ops.max_pool2d.calls)
  end)

  it("names itself in its errors", function()
    local x, w, b = ember.randn({ 1, 2, 5, 5 }), ember.randn({ 3, 2, 3, 3 }), ember.randn({ 3 })
    local ok, err = pcall(fused, x, w, ember.randn({ 4 }), {}, 2)
    assert.is_false(ok)
    assert.matches("conv2d_relu_max_pool2d: bias must have shape {3}, got {4}", err, 1, true)
    ok, err = pcall(fused, x, w, b, {}, 4)
    assert.is_false(ok)
    assert.matches("conv2d_relu_max_pool2d: the convolution's output {1, 3, 3, 3} is smaller than the pool kernel {4, 4}",
      err, 1, true)
    ok, err = pcall(fused, x, w, b, {}, 0)
    assert.is_false(ok)
    assert.matches("conv2d_relu_max_pool2d", err, 1, true)
  end)
end)
