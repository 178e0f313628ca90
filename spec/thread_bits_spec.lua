-- Which results depend on the thread count (docs/frame_loop.md, "Threads"):
-- every op is computed with 1 and with 2 threads and compared bit for bit.
-- The default policy gives a job as many threads as the machine's load
-- leaves free, so an op whose bits followed the count would make two runs of
-- a script differ on a busy and an idle machine; these checks fail then.
-- Before 2026-11-27 OpenBLAS's sgemm (a 128 x 784 x 256 product: 4840 of
-- 32768 values differed), oneDNN's convolution weight gradient (71 of 72 at
-- the CNN recipe's first layer) and ember's own conv2d weight gradient did.
local H = require("helpers")
local ember = H.ember
local nn, F = ember.nn, ember.nn.functional

-- every value of the tensors fn returns, as Lua numbers (exact for float32
-- and float64), computed on `threads` threads from seed 7
local function values(fn, threads)
  ember.set_num_threads(threads)
  ember.manual_seed(7)
  local out = {}
  for _, t in ipairs(fn()) do
    for _, v in ipairs(t:contiguous():reshape({ -1 }):tolist()) do out[#out + 1] = v end
  end
  return out
end

-- y = f(args...) and the gradients of sum(y * dy) for a random dy
local function with_grads(f, ...)
  local args = { ... }
  local gm = ember.autodiff.GradManager():attach(args)
  gm:record()
  local y = f(unpack(args))
  gm:backward({ y }, { ember.randn_like(y) })
  local out = { y }
  for _, a in ipairs(args) do out[#out + 1] = a.grad end
  return out
end

local function without_dnnl(which, fn)
  return function() return H.with_switch(ember["set_" .. which], ember[which], false, fn) end
end

local function conv(x, w, b, opts) return function() return with_grads(function(x_, w_, b_)
  return F.conv2d(x_, w_, b_, opts) end, ember.randn(x), ember.randn(w), b and ember.randn(b) or nil) end end

local function product(a, b, opts)
  return function() return { ember.randn(a, opts):matmul(ember.randn(b, opts)) } end
end

local cases = {
  { "sgemm 128x784x256 (oneDNN on AVX-512 CPUs)", product({ 128, 784 }, { 784, 256 }) },
  { "sgemm 128x784x256 on OpenBLAS", without_dnnl("dnnl_matmul_enabled", product({ 128, 784 }, { 784, 256 })) },
  { "sgemm 1024x1024x10 (OpenBLAS)", product({ 1024, 1024 }, { 1024, 10 }) },
  { "sgemm 32x2048x1024 (column blocks)", product({ 32, 2048 }, { 2048, 1024 }) },
  { "sgemm 512x512x512 (OpenBLAS on AVX-512 CPUs)", product({ 512, 512 }, { 512, 512 }) },
  { "sgemm A^T B, 784x128 by 128x256", function() return { ember.randn({ 128, 784 }):t():matmul(ember.randn({ 128, 256 })) } end },
  { "dgemm 256x512x256", product({ 256, 512 }, { 512, 256 }, { dtype = "float64" }) },
  { "matrix-vector 2048x2048", function() return { ember.randn({ 2048, 2048 }):matmul(ember.randn({ 2048 })) } end },
  { "linear_relu and its backward", function()
    return with_grads(function(x, w, b) return F.linear_relu(x, w, b) end, ember.randn({ 128, 784 }),
      ember.randn({ 256, 784 }), ember.randn({ 256 })) end },
  { "conv2d and its adjoints (oneDNN), the CNN recipe's first layer", conv({ 32, 1, 28, 28 }, { 8, 1, 3, 3 }, { 8 }, { padding = 1 }) },
  { "conv2d and its adjoints (oneDNN), 64 channels, 13 samples", conv({ 13, 64, 16, 16 }, { 64, 64, 3, 3 }, nil, { padding = 1 }) },
  { "conv2d and its adjoints (ember's kernels)", without_dnnl("dnnl_enabled", conv({ 32, 8, 14, 14 }, { 16, 8, 3, 3 }, { 16 }, { padding = 1 })) },
  { "conv2d_relu_max_pool2d and its backward", function()
    return with_grads(function(x, w, b) return F.conv2d_relu_max_pool2d(x, w, b, { padding = 1 }, 2) end,
      ember.randn({ 32, 8, 14, 14 }), ember.randn({ 16, 8, 3, 3 }), ember.randn({ 16 })) end },
  { "batch_norm (training) and its backward", function()
    local bn = nn.BatchNorm2d(16)
    return with_grads(function(x) return bn(x) end, ember.randn({ 64, 16, 32, 32 })) end },
  { "max_pool2d, avg_pool2d and their backward", function()
    return with_grads(function(x) return F.max_pool2d(x, 2) + F.avg_pool2d(x, 2) end, ember.randn({ 64, 16, 32, 32 })) end },
  { "sum, mean, var, sums over each dim", function()
    local x = ember.randn({ 2048, 1024 })
    return { x:sum(), x:mean(), x:var(), x:sum(1), x:sum(2), ember.randn({ 50000, 6 }):sum(1),
      ember.randn({ 3000, 700 }, { dtype = "float64" }):mean(1) } end },
  { "log_softmax and its backward, cumsum", function()
    local out = with_grads(function(x) return x:log_softmax(2) end, ember.randn({ 1024, 1000 }))
    out[#out + 1] = ember.randn({ 1024, 1024 }):cumsum(2)
    return out end },
  { "elementwise", function()
    local a, b = ember.randn({ 1024, 1024 }), ember.randn({ 1024, 1024 })
    return { (a * b + a):tanh():exp() } end },
  { "layer_norm and its backward", function()
    return with_grads(function(x) return F.layer_norm(x, { 1024 }) end, ember.randn({ 1024, 1024 })) end },
  { "an LSTM and its backward", function()
    local l = nn.LSTM(64, 128)
    return with_grads(function(x) return l(x) end, ember.randn({ 16, 32, 64 })) end },
  { "Adam's step", function()
    local p = ember.randn({ 1024, 1024 })
    p.grad = ember.randn({ 1024, 1024 })
    local o = ember.optim.Adam({ p }, { lr = 1e-3 })
    o:step()
    o:step()
    return { p } end },
}

describe("results and the thread count", function()
  H.keep_thread_setting(before_each, after_each)

  for _, c in ipairs(cases) do
    it(c[1] .. ": the same bits on 1 and 2 threads", function()
      local one, two = values(c[2], 1), values(c[2], 2)
      assert.are.equal(#one, #two)
      local differ, first = 0, nil
      for i = 1, #one do
        if one[i] ~= two[i] and not (one[i] ~= one[i] and two[i] ~= two[i]) then
          differ, first = differ + 1, first or i
        end
      end
      assert(differ == 0, ("%d of %d values differ; the first, [%d]: %.9g on 1 thread, %.9g on 2")
        :format(differ, #one, first or 0, one[first or 1], two[first or 1]))
    end)
  end

  -- training steps under the default policy ("auto", whose count follows the
  -- load) end on the same bits as on 1 and on 2 fixed threads
  it("gives an MLP's and a CNN's training steps the same bits under the default policy as on 1 and 2 threads", function()
    local function train(setting, recipe)
      ember.set_num_threads(setting)
      ember.manual_seed(5)
      local model, x, y
      if recipe == "mlp" then
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
        x, y = ember.randn({ 128, 784 }), ember.randint(1, 11, { 128 })
      else
        model = nn.Sequential(nn.Conv2d(1, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
          nn.Conv2d(8, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
        x, y = ember.randn({ 32, 1, 28, 28 }), ember.randint(1, 11, { 32 })
      end
      return H.train_steps(model, x, y, 3)
    end
    for _, recipe in ipairs({ "mlp", "cnn" }) do
      local one = train(1, recipe)
      assert.are.same(one, train(2, recipe))
      assert.are.same(one, train("auto", recipe))
    end
  end)

  -- a forked child runs jobs on ember's own pool (libgomp's does not survive
  -- fork): oneDNN's weight gradient in sample groups there too, same bits
  it("gives a forked child's convolution gradients the parent's bits", function()
    local function grads()
      ember.manual_seed(3)
      return with_grads(function(x, w) return F.conv2d(x, w, nil, { padding = 1 }) end,
        ember.randn({ 13, 8, 14, 14 }), ember.randn({ 16, 8, 3, 3 }))
    end
    ember.set_num_threads(2)
    local want = values(grads, 2)
    H.in_forked_child("a convolution's gradients", function()
      local got = values(grads, 2)
      for i = 1, #want do
        if got[i] ~= want[i] then return false end
      end
      return #got == #want
    end, 60)
  end)
end)
