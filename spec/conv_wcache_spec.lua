-- oneDNN's layout of a convolution weight kept between calls
-- (core/src/ops/conv_dnnl_wcache.c): the same bits as a weight seen for the
-- first time, made again after every in-place write (through the weight or
-- any view of it), counted in memory_stats and freed with the weight.
local H = require("helpers")
local ember = H.ember
local F = ember.nn.functional
local ffi = require("ffi")
local C = ember._C

local out = ffi.new("ember_tensor *[1]")
local function take(rc)
  if rc ~= 0 then error(ffi.string(C.ember_last_error())) end
  return ember._wrap(out[0])
end
-- conv2d's input gradient at stride 1, padding 1 (the public C entry)
local function backward_input(gy, w, xs)
  local one = ffi.new("int64_t[2]", 1, 1)
  return take(C.ember_conv2d_backward_input(gy._c, w._c, ffi.new("int64_t[4]", xs), one, one, one, 1, out))
end

local dnnl = ember.dnnl_enabled()
local pending_or_it = dnnl and it or pending

local function bits_equal(a, b)
  return a.dtype == b.dtype and ember.equal(a, b) and ember.equal(a:isnan(), b:isnan())
end

local function in_use()
  collectgarbage()
  collectgarbage()
  return ember.memory_stats().bytes_in_use
end

describe("a convolution weight kept in oneDNN's layout", function()
  local opts = { stride = 1, padding = 1 }
  local layouts = {
    nchw = function(t) return t end,
    channels_last = function(t) return t:contiguous({ memory_format = "channels_last" }) end,
  }

  for name, lay in pairs(layouts) do
    pending_or_it("gives the bits of a weight seen for the first time (" .. name .. ")", function()
      ember.manual_seed(1)
      local x, w = lay(ember.randn({ 2, 16, 9, 7 })), lay(ember.randn({ 24, 16, 3, 3 }))
      local fresh = F.conv2d(x, w:clone(), nil, opts)   -- a new storage: reordered for this call
      for _ = 1, 3 do assert.is_true(bits_equal(F.conv2d(x, w, nil, opts), fresh)) end
      local gy = lay(ember.randn(fresh:shape()))
      local gx = backward_input(gy, w:clone(), x:shape())
      for _ = 1, 2 do assert.is_true(bits_equal(backward_input(gy, w, x:shape()), gx)) end
    end)

    pending_or_it("sees every in-place write, through the weight or a view (" .. name .. ")", function()
      ember.manual_seed(2)
      local x, w = lay(ember.randn({ 1, 8, 6, 6 })), lay(ember.randn({ 16, 8, 3, 3 }))
      F.conv2d(x, w, nil, opts)
      w:mul_(2)
      assert.is_true(bits_equal(F.conv2d(x, w, nil, opts), F.conv2d(x, w:clone(), nil, opts)))
      w:narrow(1, 3, 2):fill_(0.5)   -- a view's write bumps the storage's version
      assert.is_true(bits_equal(F.conv2d(x, w, nil, opts), F.conv2d(x, w:clone(), nil, opts)))
      w[{ 5, 2, 2, 2 }] = -7
      assert.is_true(bits_equal(F.conv2d(x, w, nil, opts), F.conv2d(x, w:clone(), nil, opts)))
    end)
  end

  pending_or_it("keeps one copy per view: two views of one storage give their own values", function()
    ember.manual_seed(3)
    local x, both = ember.randn({ 1, 8, 5, 5 }), ember.randn({ 2, 16, 8, 3, 3 })
    local w1, w2 = both:select(1, 1), both:select(1, 2)
    for _ = 1, 2 do
      assert.is_true(bits_equal(F.conv2d(x, w1, nil, opts), F.conv2d(x, w1:clone(), nil, opts)))
      assert.is_true(bits_equal(F.conv2d(x, w2, nil, opts), F.conv2d(x, w2:clone(), nil, opts)))
    end
  end)

  pending_or_it("trains to the same bits as a weight copied each step (SGD writes in place)", function()
    local function run(copy)
      ember.manual_seed(4)
      local conv = ember.nn.Conv2d(8, 16, 3, { padding = 1 })
      local x = ember.randn({ 4, 8, 8, 8 })
      local opt = ember.optim.SGD(conv:parameters(), { lr = 0.05, momentum = 0.9 })
      local gm = ember.autodiff.GradManager():attach(conv:parameters())
      for _ = 1, 3 do
        gm:record()
        local w = copy and conv.weight:clone() or conv.weight
        -- the weight twice, the second time as a view: (8, 8, 3, 3) of its first 8 outputs
        local h = F.relu(F.conv2d(x, w, conv.bias, opts)):narrow(2, 1, 8)
        local y = F.conv2d(h, w:narrow(1, 1, 8), nil, opts)
        gm:backward((y * y):mean())
        opt:step()
        opt:zero_grad()
      end
      return conv.weight
    end
    assert.is_true(bits_equal(run(false), run(true)))
  end)

  pending_or_it("counts its bytes in memory_stats and frees them with the weight", function()
    ember.manual_seed(5)
    local x = ember.randn({ 1, 32, 8, 8 })
    local base = in_use()
    local w = ember.randn({ 64, 32, 3, 3 })
    local wbytes = in_use() - base
    assert.are.equal(64 * 32 * 9 * 4, wbytes)
    local y = F.conv2d(x, w, nil, opts)
    local ybytes = 64 * 8 * 8 * 4
    local kept = in_use() - base - wbytes - ybytes
    assert.is_true(kept >= wbytes, "kept " .. kept)   -- the blocked copy (padded to its blocks)
    F.conv2d(x, w, nil, opts)
    assert.are.equal(kept, in_use() - base - wbytes - ybytes)   -- read, not made again
    w, y = nil, nil
    assert.are.equal(base, in_use())
  end)

  it("keeps a kernel's live taps (3x3 on a 1x1 plane) while the weight keeps its version", function()
    ember.manual_seed(9)
    local x = ember.randn({ 1, 32, 1, 1 })
    -- ember keeps the scalars' tensors (-3, the index 2, the tolerances): made before base
    local _ = { (x * -3):mul_(-3), ember.zeros({ 1, 1, 2, 2 })[{ {}, {}, 2, 2 }], ember.allclose(x, x, 1e-5, 1e-5) }
    local base = in_use()
    local w = ember.randn({ 48, 32, 3, 3 })
    local y0 = F.conv2d(x, w, nil, opts)
    -- by hand: only the centre tap reads the input
    local want = (w[{ {}, {}, 2, 2 }]:matmul(x:reshape({ 32, 1 }))):reshape({ 1, 48, 1, 1 })
    assert.is_true(ember.allclose(y0, want, 1e-5, 1e-5))
    assert.is_true(bits_equal(F.conv2d(x, w, nil, opts), F.conv2d(x, w:clone(), nil, opts)))
    -- w, its 48 x 32 live taps kept (a 1x1 convolution of a 1x1 plane: one product, no oneDNN layout), y0
    assert.is_true(in_use() >= base + (48 * 32 * 9 + 48 * 32 + 48) * 4)
    w:narrow(3, 2, 1):mul_(-3)   -- the live taps written through a view
    local y1 = F.conv2d(x, w, nil, opts)
    assert.is_true(ember.allclose(y1, y0 * -3, 1e-5, 1e-5))
    assert.is_true(bits_equal(y1, F.conv2d(x, w:clone(), nil, opts)))
    w, y0, y1, want = nil, nil, nil, nil
    assert.are.equal(base, in_use())
  end)


  it("keeps live taps per view: views of one storage give their own values, other taps made again", function()
    ember.manual_seed(10)
    local x = ember.randn({ 1, 8, 1, 1 })
    local all = ember.randn({ 3, 16, 8, 3, 3 })
    local views = { all:select(1, 1), all:select(1, 2), all:select(1, 3) }   -- a third past the bound: not kept
    -- by hand: only the centre tap reads a 1x1 plane padded by 1; a 2x2 kernel padded by 1 reads its (2, 2)
    local function want(w) return w[{ {}, {}, 2, 2 }]:matmul(x:reshape({ 8, 1 })):reshape({ 1, 16, 1, 1 }) end
    for _ = 1, 2 do
      for _, w in ipairs(views) do
        local y = F.conv2d(x, w, nil, opts)
        assert.is_true(ember.allclose(y, want(w), 1e-5, 1e-5))
        assert.is_true(bits_equal(y, F.conv2d(x, w:clone(), nil, opts)))
      end
    end
    -- the same view on a 1x3 plane padded (1, 0): other live taps (its middle row), made again, then the centre's
    local x13 = ember.randn({ 1, 8, 1, 3 })
    local y13 = F.conv2d(x13, views[1], nil, { padding = { 1, 0 } })
    local want13 = views[1][{ {}, {}, 2, {} }]:reshape({ 16, 24 }):matmul(x13:reshape({ 24, 1 })):reshape({ 1, 16, 1, 1 })
    assert.is_true(ember.allclose(y13, want13, 1e-5, 1e-5))
    assert.is_true(bits_equal(F.conv2d(x, views[1], nil, opts), F.conv2d(x, views[1]:clone(), nil, opts)))
  end)
  pending_or_it("is not kept for a weight a recording tracks (training)", function()
    ember.manual_seed(8)
    local x, w = ember.randn({ 1, 8, 6, 6 }), ember.randn({ 16, 8, 3, 3 })
    local gm = ember.autodiff.GradManager():attach({ w })
    gm:record()
    local y = F.conv2d(x, w, nil, opts)
    local before = in_use()
    F.conv2d(x, w, nil, opts)
    assert.are.equal(before, in_use())
    gm:backward(y:sum())
  end)

  pending_or_it("is not kept while DTR is on (a copy it cannot evict would take its budget)", function()
    ember.manual_seed(8)
    local x, w = ember.randn({ 1, 8, 6, 6 }), ember.randn({ 16, 8, 3, 3 })
    ember.dtr.enable({ budget = 1e9 })
    local ok, err = pcall(function()
      local x1 = x[{ {}, {}, { 1, 1 }, { 1, 1 } }]:contiguous()   -- a 3x3 on a 1x1 plane: the live taps
      local before = in_use()
      local y, y1 = F.conv2d(x, w, nil, opts), F.conv2d(x1, w, nil, opts)
      assert.are.equal(before + (16 * 6 * 6 + 16) * 4, in_use())   -- the results alone
      return y, y1
    end)
    ember.dtr.disable()
    assert(ok, err)
  end)

  pending_or_it("is not kept for memory ember does not own (from_blob)", function()
    local n = 16 * 8 * 9
    local buf = ffi.new("float[?]", n)
    for i = 0, n - 1 do buf[i] = (i % 7) / 7 end
    local w = take(C.ember_from_blob(buf, 4, ffi.new("int64_t[4]", 16, 8, 3, 3), nil, C.EMBER_FLOAT32, nil, nil, out))
    local x = ember.randn({ 1, 8, 6, 6 })
    F.conv2d(x, w, nil, opts)
    buf[0] = 5   -- written behind ember's back: no version bump
    assert.is_true(bits_equal(F.conv2d(x, w, nil, opts), F.conv2d(x, w:clone(), nil, opts)))
  end)
end)

-- eval-mode batch norm's scale and shift, kept while their sources keep
-- their versions (lua/ember/nn/functional.lua's bn_eval_affine)
describe("eval-mode batch norm's kept scale and shift", function()
  local function fresh(x, bn)   -- the same formula on copies: nothing kept for them
    return F.batch_norm(x, bn.running_mean:clone(), bn.running_var:clone(), bn.weight:clone(), bn.bias:clone(),
      { training = false, eps = bn.eps })
  end

  it("follows every in-place write to the running statistics, the weight and the bias", function()
    ember.manual_seed(6)
    local bn = ember.nn.BatchNorm2d(5)
    local x = ember.randn({ 2, 5, 4, 4 })
    bn:train()
    bn(x)   -- moves the running statistics
    bn:eval()
    local y0 = ember.no_grad(function() return bn(x) end)
    assert.is_true(bits_equal(y0, fresh(x, bn)))
    assert.is_true(bits_equal(ember.no_grad(function() return bn(x) end), y0))
    local writes = {
      function() bn.running_mean:add_(0.25) end,
      function() bn.running_var:narrow(1, 2, 2):mul_(3) end,
      function() ember.no_grad(function() bn.weight:mul_(-2) end) end,
      function() ember.no_grad(function() bn.bias:fill_(1.5) end) end,
      function() bn:train(); bn(x * 2); bn:eval() end,
    }
    for _, write in ipairs(writes) do
      write()
      local y = ember.no_grad(function() return bn(x) end)
      assert.is_false(bits_equal(y, y0))
      assert.is_true(bits_equal(y, fresh(x, bn)))
      y0 = y
    end
  end)

  it("still gives gradients to the weight and bias where a recording tracks them", function()
    ember.manual_seed(7)
    local bn = ember.nn.BatchNorm2d(3)
    bn:eval()
    local x = ember.randn({ 2, 3, 3, 3 })
    ember.no_grad(function() return bn(x) end)   -- kept, untracked
    local gm = ember.autodiff.GradManager():attach(bn:parameters())
    gm:record()
    gm:backward((bn(x) * x):sum())
    local scale = (bn.running_var + bn.eps):rsqrt()
    assert.is_true(ember.allclose(bn.bias.grad, x:sum({ 1, 3, 4 })))
    assert.is_true(ember.allclose(bn.weight.grad,
      ((x - bn.running_mean:view({ 1, 3, 1, 1 })) * scale:view({ 1, 3, 1, 1 }) * x):sum({ 1, 3, 4 }), 1e-5, 1e-6))
  end)
end)
