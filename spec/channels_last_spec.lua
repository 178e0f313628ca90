-- channels_last (issue 30): PyTorch's memory format as a strided layout, an
-- NCHW-shaped tensor whose strides are NHWC. The memory-format API and its
-- errors; convolutions (oneDNN's nhwc kernels in float32, ember's kernels on
-- copies elsewhere), batch norm, eval-mode batch norm, pooling and residual
-- adds give the same values and gradients as on NCHW (float64 bit for bit
-- where the sums run in the same order, float32 within rounding) and keep
-- the layout; views and in-place writes; gradcheck through a channels_last
-- ResNet block.
package.path = "./spec/support/?.lua;" .. package.path
local H = require("helpers")
local ember = H.ember
local nn, F = ember.nn, ember.nn.functional
local CL = { memory_format = "channels_last" }

local function cl(t) return t:contiguous(CL) end
local function is_cl(t) return t:is_contiguous(CL) end
local max_diff = H.max_diff
local function same(a, b, tol)
  assert.are.same(a:shape(), b:shape())
  local d = max_diff(a, b)
  if d > tol then error(("differ by %g (tolerance %g)"):format(d, tol), 2) end
end

-- f(inputs...) -> a list of outputs, and the gradients of sum(out_i r_i)
-- with respect to the inputs, seeded alike
local function run(f, inputs, seed)
  local xs = {}
  for i, x in ipairs(inputs) do xs[i] = x:detach() end
  local gm = ember.autodiff.GradManager():attach(xs)
  gm:record()
  local outs = f(unpack(xs))
  ember.manual_seed(seed or 3)
  local rs = {}
  -- the upstream gradients in the outputs' layout, as a network's are
  for i, y in ipairs(outs) do rs[i] = ember.zeros_like(y):copy_(ember.randn(y:shape(), { dtype = y.dtype })) end
  gm:backward(outs, rs)
  local grads = {}
  for i, x in ipairs(xs) do grads[i] = x.grad end
  return outs, grads
end

-- f on NCHW inputs and on their channels_last copies (4-D ones): the same
-- outputs and gradients within tol; the outputs of want_cl channels_last
local function compare(f, inputs, tol, want_cl)
  local cli = {}
  for i, x in ipairs(inputs) do cli[i] = x:dim() == 4 and cl(x) or x end
  local o1, g1 = run(f, inputs)
  local o2, g2 = run(f, cli)
  for i = 1, #o1 do
    same(o1[i], o2[i], tol)
    if want_cl then assert.is_true(is_cl(o2[i]), "output " .. i .. " is not channels_last") end
  end
  for i = 1, #g1 do
    same(g1[i], g2[i], tol)
    -- (a tensor that is both layouts leaves the choice to the other operands)
    if want_cl and inputs[i]:dim() == 4 and not cli[i]:is_contiguous() then
      assert.is_true(is_cl(g2[i]), "gradient " .. i .. " is not channels_last")
    end
  end
end

describe("the channels_last memory format", function()
  it("is a strided layout: strides NHWC, shape, values and views as NCHW", function()
    local x = ember.arange(0, 2 * 3 * 4 * 5):reshape({ 2, 3, 4, 5 })
    local c = cl(x)
    assert.are.same({ 60, 1, 15, 3 }, c:stride())
    assert.are.same({ 2, 3, 4, 5 }, c:shape())
    assert.is_true(c:is_contiguous(CL))
    assert.is_false(c:is_contiguous())
    assert.is_true(x:is_contiguous())
    assert.is_false(x:is_contiguous(CL))
    assert.are.same(x:tolist(), c:tolist())
    assert.are.same(x[{ 2, 3 }]:tolist(), c[{ 2, 3 }]:tolist())
    assert.are.same(x:transpose(2, 4):tolist(), c:transpose(2, 4):tolist())
    assert.equal(c, c:contiguous(CL))                     -- itself when it is already
    assert.equal(c, c:to(CL))
    local back = c:contiguous()                           -- no argument: row-major NCHW
    assert.is_true(back:is_contiguous())
    assert.are.same(x:tolist(), back:tolist())
    assert.is_true(c:to({ memory_format = "contiguous_format" }):is_contiguous())
    assert.equal(c, c:to({ memory_format = "preserve_format" }))
    -- a tensor of one channel or a 1x1 plane is both, as PyTorch's; a transpose neither
    local one = ember.randn({ 2, 1, 3, 3 })
    assert.is_true(one:is_contiguous(CL) and one:is_contiguous())
    assert.is_false(ember.randn({ 2, 3, 4, 5 }):transpose(3, 4):is_contiguous(CL))
    assert.is_true(ember.randn({ 2, 3, 1, 1 }):is_contiguous(CL))
  end)

  it("converts with dtype and keeps it in the _like factories", function()
    local c = cl(ember.randn({ 2, 3, 4, 5 }))
    local d = c:to({ dtype = "float64", memory_format = "channels_last" })
    assert.equal("float64", d.dtype)
    assert.is_true(is_cl(d))
    for _, name in ipairs({ "zeros_like", "ones_like", "empty_like" }) do
      assert.is_true(is_cl(ember[name](c)), name)
      assert.is_true(ember[name](c, { memory_format = "contiguous_format" }):is_contiguous(), name)
      assert.is_true(is_cl(ember[name](ember.randn({ 2, 3, 4, 5 }), CL)), name)
    end
    local f = ember.full_like(c, 7)
    assert.is_true(is_cl(f))
    assert.equal(7, f[{ 2, 3, 4, 5 }])
    assert.is_true(ember.zeros_like(ember.randn({ 2, 3 })):is_contiguous())
  end)

  it("raises for an unknown format, a rank other than 4 and preserve_format where no layout is meant", function()
    local x, v = ember.randn({ 2, 3, 4, 5 }), ember.randn({ 3, 4 })
    H.raises(function() x:contiguous({ memory_format = "channels_fast" }) end,
      "ember.contiguous: unknown memory_format 'channels_fast'")
    H.raises(function() x:is_contiguous({ memory_format = "nhwc" }) end, "unknown memory_format 'nhwc'")
    H.raises(function() x:to({ memory_format = 3 }) end, "ember.to: unknown memory_format 3")
    H.raises(function() x:contiguous({ memory_format = "channels_last_3d" }) end, "'channels_last_3d' is not supported")
    H.raises(function() v:contiguous(CL) end, "needs a 4-D tensor (N, C, H, W), got shape {3, 4}")
    H.raises(function() v:to(CL) end, "ember.to: memory_format 'channels_last' needs a 4-D tensor")
    H.raises(function() ember.zeros_like(v, CL) end, "needs a 4-D tensor")
    H.raises(function() x:contiguous({ memory_format = "preserve_format" }) end, "'preserve_format'")
    H.raises(function() x:contiguous({ layout = 1 }) end, "unknown option 'layout'")
    H.raises(function() x:contiguous("channels_last") end, "options must be a table")
    H.raises(function() nn.Conv2d(3, 4, 3):to({ memory_format = "sideways" }) end, "unknown memory_format 'sideways'")
  end)

  it("model:to converts the 4-D parameters (conv weights) and leaves the rest", function()
    ember.manual_seed(1)
    local m = nn.Sequential(nn.Conv2d(3, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU())
    local w = m[1].weight
    local before = w:tolist()
    local x = ember.randn({ 2, 3, 6, 6 })
    local y0 = m(x)
    m:to(CL)
    assert.equal(w, m[1].weight)                           -- the same tensor object, converted in place
    assert.is_true(is_cl(m[1].weight))
    assert.are.same(before, m[1].weight:tolist())
    assert.is_true(m[1].bias:is_contiguous() and m[2].weight:is_contiguous())
    local y1 = m(cl(x))
    assert.is_true(is_cl(y1))
    same(y0, y1, 1e-5)
    -- optimizer steps (the fused ones, over memory) on channels_last weights, as on NCHW ones
    ember.manual_seed(1)
    local m0 = nn.Sequential(nn.Conv2d(3, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU())
    for _, make in ipairs({ function(p) return ember.optim.SGD(p, { lr = 0.1, momentum = 0.9 }) end,
      function(p) return ember.optim.Adam(p, { lr = 0.01 }) end }) do
      local o0, o1 = make(m0:parameters()), make(m:parameters())
      for _ = 1, 2 do
        for k, pair in ipairs({ { m0, o0, x }, { m, o1, cl(x) } }) do
          local gm = ember.autodiff.GradManager():attach(pair[1]:parameters())
          gm:record()
          gm:backward((pair[1](pair[3]) ^ 2):sum())
          if k == 2 then assert.is_true(is_cl(m[1].weight.grad)) end
          pair[2]:step()
          pair[2]:zero_grad()
        end
      end
      assert.is_true(is_cl(m[1].weight))
      same(m0[1].weight, m[1].weight, 1e-5)
      same(m0[2].weight, m[2].weight, 1e-5)
    end
  end)

  it("writes in place through views of a channels_last tensor", function()
    local x = ember.randn({ 2, 3, 4, 5 }, { dtype = "float64" })
    local c = cl(x)
    c[{ {}, 2 }] = 0                                      -- one channel, a strided view
    x[{ {}, 2 }] = 0
    assert.are.same(x:tolist(), c:tolist())
    c:narrow(3, 2, 2):mul_(3)
    x:narrow(3, 2, 2):mul_(3)
    assert.are.same(x:tolist(), c:tolist())
    c:add_(1)
    assert.is_true(is_cl(c))
    assert.are.same((x + 1):tolist(), c:tolist())
    -- elementwise ops and residual adds keep the layout
    assert.is_true(is_cl(c + c) and is_cl(c:relu()) and is_cl(c * 2))
  end)
end)

describe("ops on channels_last tensors", function()
  H.keep_thread_setting(before_each, after_each)

  local CONVS = {   -- N, C, H, W, O, k, stride, padding, groups
    { 2, 8, 9, 9, 16, 3, 1, 1, 1 }, { 2, 8, 9, 7, 12, 3, 2, 1, 1 }, { 3, 8, 5, 5, 6, 1, 1, 0, 1 },
    { 2, 8, 7, 7, 12, 3, 1, 1, 4 }, { 2, 6, 8, 8, 6, 3, 1, 1, 6 }, { 2, 6, 8, 8, 12, 3, 2, 1, 6 },
    { 2, 3, 11, 11, 8, 7, 2, 3, 1 }, { 3, 8, 1, 1, 6, 3, 1, 1, 1 },
  }
  for _, c in ipairs(CONVS) do
    local name = ("conv2d %s"):format(table.concat(c, "x"))
    it(name .. ": values and both gradients as on NCHW, the results channels_last", function()
      ember.manual_seed(11)
      local opts = { stride = c[7], padding = c[8], groups = c[9] }
      local x = ember.randn({ c[1], c[2], c[3], c[4] }, { dtype = "float64" })
      local w = ember.randn({ c[5], c[2] / c[9], c[6], c[6] }, { dtype = "float64" })
      local f = function(a, b) return { F.conv2d(a, b, nil, opts) } end
      -- (on 1x1 planes x and its gradient are both layouts: the weight's gradient follows the weight)
      local want = true
      compare(f, { x, w }, 0, want)                       -- float64: ember's kernels on copies, the same sums
      compare(f, { x:float(), w:float() }, 1e-4, want)   -- float32: oneDNN's nhwc kernels against its blocked ones
      -- the input alone channels_last, the weight contiguous: the output channels_last, the
      -- weight's gradient contiguous as the weight (what the fused optimizer steps want)
      for _, dt in ipairs({ "float64", "float32" }) do
        local o1, g1 = run(f, { x:to(dt), w:to(dt) })
        local o2, g2 = run(f, { cl(x:to(dt)), w:to(dt) })
        same(o1[1], o2[1], dt == "float64" and 0 or 1e-4)
        assert.is_true(is_cl(o2[1]) and is_cl(g2[1]) and g2[2]:is_contiguous())
        same(g1[1], g2[1], dt == "float64" and 0 or 1e-4)
        same(g1[2], g2[2], dt == "float64" and 0 or 1e-4)
      end
      local b = ember.randn({ c[5] })
      compare(function(a, ww, bb) return { F.conv2d(a, ww, bb, opts):relu() } end, { x:float(), w:float(), b }, 1e-4, want)
    end)
  end

  it("conv2d_relu and conv2d_relu_max_pool2d (fused, with a bias) as on NCHW, in channels_last", function()
    ember.manual_seed(5)
    local x, w, b = ember.randn({ 2, 8, 8, 8 }), ember.randn({ 16, 8, 3, 3 }), ember.randn({ 16 })
    compare(function(a, ww, bb) return { F.conv2d_relu(a, ww, bb, { padding = 1 }) } end, { x, w, b }, 1e-4, true)
    compare(function(a, ww, bb) return { F.conv2d_relu_max_pool2d(a, ww, bb, { padding = 1 }, 2) } end, { x, w, b },
      1e-4, true)
    -- in float64 (ember's kernels on copies)
    compare(function(a, ww, bb) return { F.conv2d_relu(a, ww, bb, { padding = 1 }) } end,
      { x:double(), w:double(), b:double() }, 1e-12, true)
  end)

  it("batch norm in training (with its ReLU) and in eval mode as on NCHW", function()
    ember.manual_seed(6)
    for _, dt in ipairs({ "float64", "float32" }) do
      local tol = dt == "float64" and 1e-12 or 1e-5
      local x = ember.randn({ 4, 24, 5, 6 }, { dtype = dt }) * 3 + 1
      local w, b = ember.rand({ 24 }, { dtype = dt }) + 0.5, ember.randn({ 24 }, { dtype = dt })
      compare(function(a, ww, bb) return { F.batch_norm(a, nil, nil, ww, bb, { training = true }) } end, { x, w, b }, tol, true)
      compare(function(a, ww, bb) return { F.batch_norm(a, nil, nil, ww, bb, { training = true, activation = "relu" }) } end, { x, w, b }, tol, true)
      local m = nn.BatchNorm2d(24):to(dt)
      local r1 = m(x)
      local r2 = m(cl(x))
      same(r1, r2, tol)
      assert.is_true(is_cl(r2))
      m:eval()
      compare(function(a) return { m(a) } end, { x }, tol, true)
      compare(function(a) return { F.relu6(m(a)) } end, { x }, tol, true)
    end
  end)

  it("max, average and adaptive pooling as on NCHW, bit for bit, with their gradients", function()
    ember.manual_seed(7)
    for _, dt in ipairs({ "float64", "float32" }) do
      local x = ember.randn({ 2, 20, 9, 8 }, { dtype = dt })
      x[{ 1, 3, 2, 2 }] = 0 / 0                          -- NaN wins, as on NCHW
      x[{ 2, 4, 1, { 1, 2 } }] = 5                        -- a tie: the first maximum
      compare(function(a) return { F.max_pool2d(a, 2) } end, { x }, 0, true)
      compare(function(a) return { F.max_pool2d(a, 3, { stride = 2, padding = 1 }) } end, { x }, 0, true)
      local y, i1 = F.max_pool2d(x, 3, { stride = 2, padding = 1, return_indices = true })
      local yc, i2 = F.max_pool2d(cl(x), 3, { stride = 2, padding = 1, return_indices = true })
      assert.are.same(i1:tolist(), i2:tolist())
      assert.is_true(is_cl(yc))
      local xf = ember.randn({ 2, 20, 9, 8 }, { dtype = dt })
      local tol = dt == "float64" and 1e-15 or 1e-6
      compare(function(a) return { F.avg_pool2d(a, 2) } end, { xf }, tol, true)
      compare(function(a) return { F.avg_pool2d(a, 3, { stride = 2, padding = 1 }) } end, { xf }, tol, true)
      compare(function(a) return { F.adaptive_avg_pool2d(a, 1) } end, { xf }, tol, false)
      compare(function(a) return { F.adaptive_avg_pool2d(a, 3) } end, { xf }, tol, false)
      compare(function(a) return { F.adaptive_max_pool2d(a, 2) } end, { xf }, 0, false)
    end
  end)

  it("a ResNet block: the same values and gradients, and gradcheck in channels_last", function()
    local Z = require("zoo")
    ember.manual_seed(8)
    local net = nn.Sequential(nn.Conv2d(3, 8, 3, { padding = 1, bias = false }), nn.BatchNorm2d(8), nn.ReLU(),
      nn.MaxPool2d(2))
    local x = ember.randn({ 2, 3, 8, 8 }, { dtype = "float64" })
    net:double()
    local y0 = net(x)
    net:to(CL)
    local y1 = net(cl(x))
    same(y0, y1, 1e-12)
    assert.is_true(is_cl(y1))
    -- gradcheck in float64 through conv, batch norm, relu, the residual add, all channels_last
    local conv1 = cl(ember.randn({ 4, 4, 3, 3 }, { dtype = "float64" }) * 0.3)
    local conv2 = cl(ember.randn({ 4, 4, 3, 3 }, { dtype = "float64" }) * 0.3)
    local g1, b1 = ember.rand({ 4 }, { dtype = "float64" }) + 0.5, ember.randn({ 4 }, { dtype = "float64" })
    local function basic_block(a, w1, w2, g, b)
      local h = F.batch_norm(F.conv2d(a, w1, nil, { padding = 1 }), nil, nil, g, b, { training = true }):relu()
      h = F.batch_norm(F.conv2d(h, w2, nil, { padding = 1 }), nil, nil, g, b, { training = true })
      return (h + a):relu()
    end
    local a = cl(ember.randn({ 2, 4, 4, 4 }, { dtype = "float64" }))
    assert.is_true(is_cl(basic_block(a, conv1, conv2, g1, b1)))
    assert.is_true(ember.autodiff.gradcheck(basic_block, { a, conv1, conv2, g1, b1 }))
    -- the zoo's block as a module, converted
    local zb = Z.ResNet18(4, 3).layer2:double()
    local xb = ember.randn({ 2, 4, 6, 6 }, { dtype = "float64" })
    local z0 = zb(xb)
    zb:to(CL)
    same(z0, zb(cl(xb)), 1e-12)
  end)
end)
