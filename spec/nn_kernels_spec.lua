-- The fused nn kernels against the compositions of recorded ops they
-- replace: layer norm (and RMS norm) forward and backward. Values agree
-- within rounding (the kernels add in another order), gradients by finite
-- differences to second order, the statistics' own gradient, bits that do
-- not depend on the thread count, and bad input.
local H = require("helpers")
local ember = H.ember
local ffi = require("ffi")
local F = ember.nn.functional
local C = ember._C
local F64 = { dtype = "float64" }

local out2 = ffi.new("ember_tensor*[2]")
local check = H.check_rc

local max_diff = H.max_diff

-- run() (a list of tensors) on one thread and on four (as many as the pool
-- has, where fewer: a build without OpenMP sizes it by the CPUs) gives the
-- same bits
local function same_bits_on_threads(run)
  local threads = ember.get_num_threads()
  ember.set_num_threads(1)
  local one = run()
  ember.set_num_threads(math.min(4, ember.thread_stats().max_threads))
  local many = run()
  ember.set_num_threads(threads)
  for i = 1, #one do assert.are.equal(0, max_diff(one[i], many[i]), "result " .. i) end
end

-- the last k dims of x's shape, and their numbers (1-based)
local function last_dims(x, k)
  local xs, shape, dims = x:shape(), {}, {}
  for i = 1, k do
    shape[i] = xs[#xs - k + i]
    dims[i] = #xs - k + i
  end
  return shape, dims
end

-- the compositions the kernels replace
local function composed_ln(x, k, w, b, eps, rms)
  local _, dims = last_dims(x, k)
  local xc = rms and x or x - x:mean(dims, true)
  local y = xc * ((xc * xc):mean(dims, true) + eps):rsqrt()
  if w then y = y * w end
  if b then y = y + b end
  return y
end

-- the op itself: y and stats
local function ln(x, k, w, b, eps, rms)
  check(C.ember_layer_norm(x._c, w._c, b._c, k, rms and 1 or 0, eps or 1e-5, out2, out2 + 1))
  return ember._wrap(out2[0]), ember._wrap(out2[1])
end

describe("layer_norm kernel", function()
  local cases = {
    { "float64", { 4, 3, 5 }, 1, 1e-14 }, { "float64", { 2, 3, 4, 6 }, 2, 1e-14 },
    { "float32", { 32, 77 }, 1, 3e-6 }, { "float32", { 3, 5, 768 }, 1, 3e-6 }, { "float32", { 6, 1 }, 1, 3e-6 },
  }
  for _, case in ipairs(cases) do
    local dt, shape, k, tol = case[1], case[2], case[3], case[4]
    for _, rms in ipairs({ false, true }) do
      it(("gives the composition's y, mean and rstd (%s, {%s}, %d dims%s)"):format(dt,
        table.concat(shape, ", "), k, rms and ", rms" or ""), function()
        ember.manual_seed(#shape + k)
        local x = (ember.randn(shape, F64) * 2 + 0.7):to(dt)
        local ws = last_dims(x, k)
        local w, b = ember.randn(ws, F64):to(dt), rms and ember.zeros(ws, F64):to(dt) or ember.randn(ws, F64):to(dt)
        local y, st = ln(x, k, w, b, 1e-5, rms)
        assert.are.equal(dt, y.dtype)
        assert.are.same(shape, y:shape())
        local x64, ref = x:to("float64"), composed_ln(x:to("float64"), k, w:to("float64"), b:to("float64"), 1e-5, rms)
        assert.is_true(max_diff(y, ref) <= tol * 10, "y " .. max_diff(y, ref))
        local _, dims = last_dims(x, k)
        local rows = x:numel() / w:numel()
        assert.are.same({ 2, rows }, st:shape())
        local mean = rms and ember.zeros({ rows }, F64) or x64:mean(dims):reshape({ rows })
        local xc = x64 - (rms and 0 or x64:mean(dims, true))
        local rstd = ((xc * xc):mean(dims) + 1e-5):rsqrt():reshape({ rows })
        assert.is_true(max_diff(st[1], mean) <= tol * 10)
        assert.is_true(max_diff(st[2], rstd) <= math.max(tol, 1e-14) * 10 * rstd:abs():max():item())
      end)
    end
  end

  it("F.layer_norm without weights, strided input and nn.LayerNorm go through the kernel", function()
    ember.manual_seed(5)
    local x = ember.randn({ 5, 8, 6 }, F64):transpose(2, 3)   -- (5, 6, 8), strided
    assert.is_false(x:is_contiguous())
    local ref = composed_ln(x, 1, nil, nil, 1e-5)
    assert.is_true(max_diff(F.layer_norm(x, { 8 }), ref) <= 1e-14)
    local m = ember.nn.LayerNorm(8, { dtype = "float64", eps = 1e-3 })
    assert.is_true(max_diff(m(x), composed_ln(x, 1, nil, nil, 1e-3)) <= 1e-14)
    -- a weight that only broadcasts, or of another dtype, is the composition's case
    local w1 = ember.randn({ 1 }, F64)
    assert.is_true(max_diff(F.layer_norm(x, { 8 }, w1), ref * w1) <= 1e-14)
    local w32 = ember.randn({ 8 })
    assert.is_true(max_diff(F.layer_norm(x, { 8 }, w32), composed_ln(x, 1, w32, nil, 1e-5)) <= 1e-14)
  end)

  it("F.rms_norm and nn.RMSNorm: the kernel and the composition, eps the dtype's epsilon by default", function()
    ember.manual_seed(4)
    for _, dt in ipairs({ "float64", "float32" }) do
      local x = ember.randn({ 3, 4, 10 }, F64):to(dt)
      local w = ember.randn({ 4, 10 }, F64):to(dt)
      local eps = dt == "float64" and 2 ^ -52 or 2 ^ -23
      local tol = dt == "float64" and 1e-14 or 3e-6
      local ref = composed_ln(x:to("float64"), 2, w:to("float64"), nil, eps, true)
      assert.is_true(max_diff(F.rms_norm(x, { 4, 10 }, w), ref) <= tol * 10)
      assert.is_true(max_diff(F.rms_norm(x, { 4, 10 }, w, { eps = 0.5 }),
        composed_ln(x:to("float64"), 2, w:to("float64"), nil, 0.5, true)) <= tol * 10)
      -- a weight that only broadcasts is the composition's case
      local w1 = ember.randn({ 1 }, F64):to(dt)
      assert.is_true(max_diff(F.rms_norm(x, 10, w1), composed_ln(x:to("float64"), 1, w1:to("float64"), nil, eps, true))
        <= tol * 10)
      local m = ember.nn.RMSNorm({ 4, 10 }, { dtype = dt })
      assert.are.same({ 4, 10 }, m.weight:shape())
      assert.is_true(max_diff(m(x), composed_ln(x:to("float64"), 2, nil, nil, eps, true)) <= tol * 10)
      assert.are.equal("RMSNorm({4, 10}, eps=None)", tostring(m))
    end
    local x, w = ember.randn({ 3, 5 }, F64), ember.randn({ 5 }, F64)
    assert.is_true(ember.autodiff.gradgradcheck(function(a, b) return F.rms_norm(a, 5, b) end, { x, w }))
    local ok, e = pcall(F.rms_norm, x, { 4 })
    assert.is_false(ok)
    assert.truthy(tostring(e):find("rms_norm: input {3, 5} does not end with normalized_shape {4}", 1, true))
  end)

  it("backward gives the composition's gradients of x, w and b", function()
    ember.manual_seed(6)
    for _, dt in ipairs({ "float64", "float32" }) do
      local tol = dt == "float64" and 1e-13 or 2e-5
      for _, rms in ipairs({ false, true }) do
        local function grads(fused)
          local x = ember.randn({ 7, 3, 40 }, F64):to(dt)
          local w, b = ember.randn({ 3, 40 }, F64):to(dt), ember.randn({ 3, 40 }, F64):to(dt)
          local r = ember.randn({ 7, 3, 40 }, F64):to(dt)
          local gm = ember.autodiff.GradManager():attach({ x, w, b })
          gm:record()
          local y = fused and ln(x, 2, w, b, 1e-5, rms) or composed_ln(x, 2, w, b, 1e-5, rms)
          gm:backward((y * r):sum())
          return { x.grad, w.grad, b.grad }
        end
        ember.manual_seed(7)
        local a = grads(true)
        ember.manual_seed(7)
        local c = grads(false)
        for i = 1, 3 do
          local scale = math.max(1, c[i]:abs():max():item())
          assert.is_true(max_diff(a[i], c[i]) <= tol * scale, ("%s %s grad %d: %g"):format(dt, tostring(rms), i,
            max_diff(a[i], c[i])))
        end
      end
    end
  end)

  it("gradients by finite differences, first and second order (layer norm and RMS norm)", function()
    ember.manual_seed(8)
    local x, w, b = ember.randn({ 3, 2, 5 }, F64), ember.randn({ 5 }, F64), ember.randn({ 5 }, F64)
    local r = ember.randn({ 3, 2, 5 }, F64)
    local function f(x_, w_, b_) return F.layer_norm(x_, 5, w_, b_) end
    assert.is_true(ember.autodiff.gradcheck(function(...) return (f(...) ^ 3 * r):sum() end, { x, w, b }))
    assert.is_true(ember.autodiff.gradgradcheck(f, { x, w, b }))
    local x2, w2 = ember.randn({ 2, 3, 4 }, F64), ember.randn({ 3, 4 }, F64)
    local function g(x_, w_, b_) return (ln(x_, 2, w_, b_, 1e-5, true)) end
    local z = ember.zeros({ 3, 4 }, F64)
    assert.is_true(ember.autodiff.gradcheck(g, { x2, w2, z }))
    assert.is_true(ember.autodiff.gradgradcheck(g, { x2, w2, z }))
  end)

  it("backward through the statistics output adds their gradient", function()
    ember.manual_seed(9)
    local x, w, b = ember.randn({ 4, 6 }, F64), ember.randn({ 6 }, F64), ember.randn({ 6 }, F64)
    local cm, cr = ember.randn({ 4 }, F64), ember.randn({ 4 }, F64)
    for _, rms in ipairs({ false, true }) do
      assert.is_true(ember.autodiff.gradcheck(function(x_, w_, b_)
        local y, st = ln(x_, 1, w_, b_, 1e-5, rms)
        return (y * y):sum() + (st[1] * cm):sum() + (st[2] * cr):sum()
      end, { x, w, b }))
      assert.is_true(ember.autodiff.gradcheck(function(x_)
        local _, st = ln(x_, 1, w, b, 1e-5, rms)
        return (st[2] * cr):sum()
      end, { x }))
    end
  end)

  it("gives the same bits on one thread and on many", function()
    same_bits_on_threads(function()
      ember.manual_seed(10)
      local x, w, b = ember.randn({ 300, 256 }), ember.randn({ 256 }), ember.randn({ 256 })
      local g = ember.randn({ 300, 256 })
      local y, st = ln(x, 1, w, b)
      check(C.ember_layer_norm_backward(g._c, x._c, w._c, st._c, 1, 0, 1e-5, out2, out2 + 1))
      return { y, st, ember._wrap(out2[0]), ember._wrap(out2[1]) }
    end)
  end)

  it("fails on bad input naming the op and leaves the tensors usable", function()
    local x, w = ember.randn({ 2, 3 }), ember.ones({ 3 })
    local function err(f) local ok, e = pcall(f); assert.is_false(ok); return tostring(e) end
    assert.truthy(err(function() ln(x, 1, ember.ones({ 2 }), w) end):find(
      "layer_norm: weight {2} and bias {3} must have the shape of input {2, 3}'s last 1 dims", 1, true))
    assert.truthy(err(function() ln(x, 3, w, w) end):find("layer_norm: 3 normalised dims for input {2, 3}", 1, true))
    assert.truthy(err(function() ln(x, 1, w:to("float64"), w) end):find(
      "layer_norm: expected float32 or float64 tensors of one dtype, got input float32, weight float64", 1, true))
    assert.truthy(err(function() ln(x, 1, w, w, -1) end):find("layer_norm: eps must be >= 0, got -1", 1, true))
    local y, st = ln(x, 1, w, w)
    assert.truthy(err(function()
      check(C.ember_layer_norm_backward(w._c, x._c, w._c, st._c, 1, 0, 1e-5, out2, out2 + 1))
    end):find("layer_norm_backward: gradient {3}, input {2, 3} and stats {2, 2} do not match", 1, true))
    assert.truthy(err(function() F.layer_norm(x, { 3 }, w, nil, { eps = -1 }) end):find("eps must be >= 0", 1, true))
    assert.are.same({ 2, 3 }, (y + x):shape())
  end)
end)

describe("softmax and log_softmax backward kernels", function()
  local out1 = ffi.new("ember_tensor*[1]")
  local function adjoint(log, g, y, dim)
    check((log and C.ember_log_softmax_backward or C.ember_softmax_backward)(g._c, y._c, dim - 1, out1))
    return ember._wrap(out1[0])
  end
  -- the four ops the rules composed before
  local composed = dofile("spec/support/composed.lua").softmax_backward

  for _, dt in ipairs({ "float64", "float32" }) do
    for _, case in ipairs({ { { 6, 37 }, 2 }, { { 6, 37 }, 1 }, { { 3, 4, 300 }, 2 }, { { 5, 2, 3 }, 3 }, { { 2, 1, 9 }, 2 } }) do
      local shape, dim = case[1], case[2]
      it(("give the composition's values (%s, {%s}, dim %d)"):format(dt, table.concat(shape, ", "), dim), function()
        ember.manual_seed(dim + #shape)
        local x, g = ember.randn(shape, F64):to(dt), ember.randn(shape, F64):to(dt)
        for _, log in ipairs({ false, true }) do
          local y = log and x:log_softmax(dim) or x:softmax(dim)
          local got, ref = adjoint(log, g, y, dim), composed(log, g:to("float64"), y:to("float64"), dim)
          assert.are.equal(dt, got.dtype)
          local tol = (dt == "float64" and 1e-15 or 1e-6) * math.max(1, ref:abs():max():item())
          assert.is_true(max_diff(got, ref) <= tol, ("%s: %g"):format(tostring(log), max_diff(got, ref)))
        end
      end)
    end
  end

  it("take strided operands, other dtypes and mixed dtypes (composed), and 0-d ones", function()
    ember.manual_seed(21)
    local x = ember.randn({ 7, 5 }, F64):t()   -- (5, 7), strided
    local g = ember.randn({ 7, 5 }, F64):t()
    for _, log in ipairs({ false, true }) do
      local y = log and x:log_softmax(2) or x:softmax(2)
      local ref = composed(log, g, y, 2)
      assert.is_true(max_diff(adjoint(log, g, y, 2), ref) <= 1e-15)
      assert.is_true(max_diff(adjoint(log, g:to("float32"), y, 2), ref) <= 1e-6)
      local h = adjoint(log, g:to("float16"), y:to("float16"), 2)
      assert.are.equal("float16", h.dtype)
      assert.is_true(max_diff(h, ref) <= 1e-2)
      local z = ember.tensor(2.5, F64)
      assert.are.equal(0, adjoint(log, z, log and ember.tensor(0, F64) or ember.tensor(1, F64), 1):item())
    end
  end)

  it("are what softmax's and log_softmax's gradients run, to second order", function()
    ember.manual_seed(22)
    local x, r = ember.randn({ 3, 4, 5 }, F64), ember.randn({ 3, 4, 5 }, F64)
    for dim = 1, 3 do
      for _, op in ipairs({ "softmax", "log_softmax" }) do
        local function f(a) return a[op](a, dim) end
        assert.is_true(ember.autodiff.gradcheck(function(a) return (f(a) * r):sum() end, { x }))
        assert.is_true(ember.autodiff.gradgradcheck(f, { x }))
      end
    end
    -- the adjoints' own rules, in g and in y
    local g = ember.randn({ 3, 4, 5 }, F64)
    local y = x:softmax(2)
    assert.is_true(ember.autodiff.gradcheck(function(a, b) return adjoint(false, a, b, 2) end, { g, y }))
    assert.is_true(ember.autodiff.gradcheck(function(a, b) return adjoint(true, a, b, 2) end, { g, x:log_softmax(2) }))
  end)

  it("give the same bits on one thread and on many", function()
    same_bits_on_threads(function()
      ember.manual_seed(23)
      local x, g = ember.randn({ 512, 300 }), ember.randn({ 512, 300 })
      return { adjoint(false, g, x:softmax(2), 2), adjoint(true, g, x:log_softmax(1), 1) }
    end)
  end)

  it("fail on bad input naming the op", function()
    local y = ember.randn({ 2, 3 })
    local ok, e = pcall(adjoint, false, ember.randn({ 3 }), y, 2)
    assert.is_false(ok)
    assert.truthy(tostring(e):find("softmax_backward: gradient {3} and output {2, 3} differ in shape", 1, true))
    ok, e = pcall(adjoint, true, y, y, 3)
    assert.is_false(ok)
    assert.truthy(tostring(e):find("log_softmax_backward: dim 3 out of range for shape {2, 3}", 1, true))
    ok, e = pcall(adjoint, true, y:to("int32"), y, 1)
    assert.truthy(tostring(e):find("expected floating tensors, got gradient int32 and output float32", 1, true))
  end)
end)

describe("cross_entropy kernel", function()
  local I = function(t) return ember.tensor(t, { dtype = "int64" }) end
  -- the composition F.cross_entropy ran before (class dim 2, labels 1-based)
  local function reference(x, labels, o)
    o = o or {}
    local Cn = x:size(2)
    local perm = { 1 }
    for d = 3, x:dim() do perm[#perm + 1] = d end
    perm[#perm + 1] = 2
    local rows = x:permute(perm):reshape(-1, Cn)
    local lab = labels:reshape(-1):to("int64")
    local ig = o.ignore_index or -100
    local mask = lab:ne(ig):to(x.dtype)
    lab = ember.where(lab:ne(ig), lab, 1)
    local wc = o.weight or ember.ones({ Cn }, { dtype = x.dtype })
    local w = wc:index_select(1, lab) * mask
    local logp = rows:log_softmax(2)
    local l = -logp:gather(2, lab:view(-1, 1)):view(-1) * w
    local ls = o.label_smoothing or 0
    if ls > 0 then l = l * (1 - ls) + (-(logp * wc:view(1, Cn)):sum(2) * mask) * (ls / Cn) end
    local red = o.reduction or "mean"
    if red == "none" then return l:view(labels:shape()) end
    if red == "sum" then return l:sum() end
    return l:sum() / w:sum()
  end

  local cases = {
    { "plain", {} }, { "sum", { reduction = "sum" } }, { "none", { reduction = "none" } },
    { "ignore_index", { ignore_index = 3 } }, { "smoothing", { label_smoothing = 0.2 } },
    { "weights, smoothing and ignore_index", { weight = true, label_smoothing = 0.1, ignore_index = -1 } },
  }
  for _, dt in ipairs({ "float64", "float32" }) do
    for _, case in ipairs(cases) do
      it(("gives the composition's loss and gradient (%s, %s)"):format(dt, case[1]), function()
        ember.manual_seed(31)
        local o = {}
        for k, v in pairs(case[2]) do o[k] = v end
        if o.weight then o.weight = ember.rand({ 37 }, F64):add(0.5):to(dt) end
        for _, shape in ipairs({ { 50, 37 }, { 4, 37, 3 } }) do
          local x = ember.randn(shape, F64):mul(3):to(dt)
          local lshape = { shape[1], shape[3] }
          local labels = ember.randint(1, 38, lshape, { dtype = "int64" })
          if o.ignore_index then labels[1]:fill_(o.ignore_index) end
          local function run(f)
            local xx = x:clone()
            local gm = ember.autodiff.GradManager():attach({ xx })
            gm:record()
            local l = f(xx)
            gm:backward((l * ember.randn(l:shape(), F64):to(dt)):sum())
            return l, xx.grad
          end
          ember.manual_seed(32)
          local l1, g1 = run(function(xx) return F.cross_entropy(xx, labels, o) end)
          ember.manual_seed(32)
          local l2, g2 = run(function(xx) return reference(xx, labels, o) end)
          local tol = dt == "float64" and 1e-13 or 2e-5
          assert.are.equal(dt, l1.dtype)
          assert.are.same(l2:shape(), l1:shape())
          assert.is_true(max_diff(l1, l2) <= tol * math.max(1, l2:abs():max():item()), "loss " .. max_diff(l1, l2))
          assert.is_true(max_diff(g1, g2) <= tol, "grad " .. max_diff(g1, g2))
          -- int32 labels alike
          assert.is_true(max_diff(F.cross_entropy(x, labels:to("int32"), o), l1) <= 0)
        end
      end)
    end
  end

  it("gradients by finite differences, first and second order", function()
    ember.manual_seed(33)
    local x = ember.randn({ 5, 4 }, F64)
    local labels = I({ 2, -100, 4, 1, 3 })
    local w = ember.tensor({ 0.5, 2, 1, 3 }, F64)
    for _, o in ipairs({ {}, { weight = w, label_smoothing = 0.2 }, { reduction = "none", label_smoothing = 0.3 } }) do
      local function f(a) return F.cross_entropy(a, labels, o) end
      assert.is_true(ember.autodiff.gradcheck(f, { x }))
      assert.is_true(ember.autodiff.gradgradcheck(f, { x }))
    end
    -- the log-sum-exp in stats carries its gradient (C API)
    local lab0 = I({ 1, 0, 3, 0, 2 })
    local cr = ember.randn({ 5 }, F64)
    assert.is_true(ember.autodiff.gradcheck(function(a)
      check(C.ember_cross_entropy(a._c, lab0._c, w._c, 0, -100, 0.1, out2, out2 + 1))
      local rows, st = ember._wrap(out2[0]), ember._wrap(out2[1])
      return (rows * rows):sum() + (st[1] * cr):sum()
    end, { x }))
  end)

  it("gives tracked class weights their gradient through the composition", function()
    ember.manual_seed(34)
    local x = ember.randn({ 6, 3 }, F64)
    local labels = I({ 1, 2, 3, 3, 2, 1 })
    local w = ember.tensor({ 0.5, 2, 1 }, F64)
    assert.is_true(ember.autodiff.gradcheck(function(a, b)
      return F.cross_entropy(a, labels, { weight = b, label_smoothing = 0.1 })
    end, { x, w }))
  end)

  it("gives the same bits on one thread and on many", function()
    same_bits_on_threads(function()
      ember.manual_seed(35)
      local x = ember.randn({ 2048, 100 })
      local labels = ember.randint(1, 101, { 2048 }, { dtype = "int64" })
      local gm = ember.autodiff.GradManager():attach({ x })
      gm:record()
      local l = F.cross_entropy(x, labels, { label_smoothing = 0.1 })
      gm:backward(l)
      return { l, x.grad }
    end)
  end)

  it("fails on a label out of range, naming the first one, and on bad shapes", function()
    local x = ember.randn({ 4, 3 })
    local function err(f) local ok, e = pcall(f); assert.is_false(ok); return tostring(e) end
    assert.truthy(err(function() F.cross_entropy(x, I({ 1, 5, 0, 2 })) end):find(
      "ember.nn.functional.cross_entropy: label 5 is out of range 1..3 (labels are 1-based class indices)", 1, true))
    assert.truthy(err(function() F.cross_entropy(x, I({ 1, -100, -7, 2 })) end):find("label -7 is out of range", 1, true))
    local w3 = ember.ones({ 3 })
    assert.truthy(err(function()
      check(C.ember_cross_entropy(x._c, I({ 1, 2 })._c, w3._c, 0, -100, 0, out2, out2 + 1))
    end):find("cross_entropy: logits {4, 3}, labels {2} and weight {3} do not match", 1, true))
    assert.truthy(err(function()
      check(C.ember_cross_entropy(x._c, I({ 1, 2, 0, 0 })._c, w3._c, 0, -100, 2, out2, out2 + 1))
    end):find("label_smoothing must be in [0, 1], got 2", 1, true))
    local lab = I({ 0, 1, 2, 0 })
    check(C.ember_cross_entropy(x._c, lab._c, w3._c, 0, -100, 0, out2, out2 + 1))
    local _, st = ember._wrap(out2[0]), ember._wrap(out2[1])
    local gx = ffi.new("ember_tensor*[1]")
    assert.truthy(err(function()
      check(C.ember_cross_entropy_backward(w3._c, x._c, lab._c, w3._c, st._c, 0, -100, 0, gx))
    end):find("cross_entropy_backward: gradient {3} and stats {2, 4} do not fit logits {4, 3}", 1, true))
    -- everything stays usable
    assert.are.equal(0, F.cross_entropy(x, I({ 1, 2, 3, 1 }), { reduction = "none" }):lt(0):sum():item())
  end)
end)

describe("gelu backward kernel", function()
  local out1 = ffi.new("ember_tensor*[1]")
  local function adjoint(g, x, tanh_form)
    check(C.ember_gelu_backward(g._c, x._c, tanh_form and 1 or 0, out1))
    return ember._wrap(out1[0])
  end
  -- the slope as the rule composed it before, in float64
  local slope = dofile("spec/support/composed.lua").gelu_slope

  for _, dt in ipairs({ "float64", "float32", "float16" }) do
    for _, tanh_form in ipairs({ false, true }) do
      it(("gives g times the composed slope (%s, %s form)"):format(dt, tanh_form and "tanh" or "erf"), function()
        ember.manual_seed(41)
        local x = (ember.randn({ 1000, 37 }, F64) * 3):to(dt)
        local g = ember.randn({ 1000, 37 }, F64):to(dt)
        local got = adjoint(g, x, tanh_form)
        assert.are.equal(dt, got.dtype)
        local ref = g:to("float64") * slope(x:to("float64"), tanh_form)
        local tol = ({ float64 = 1e-14, float32 = 2e-6, float16 = 2e-3 })[dt]
        assert.is_true(max_diff(got, ref) <= tol * math.max(1, ref:abs():max():item()), tostring(max_diff(got, ref)))
      end)
    end
  end

  it("takes broadcast and strided gradients and mixed dtypes", function()
    ember.manual_seed(42)
    local x = ember.randn({ 6, 5 }, F64):t()   -- (5, 6), strided
    local g = ember.randn({ 6 }, F64):expand({ 5, 6 })
    local ref = g * slope(x, false)
    assert.is_true(max_diff(adjoint(g, x, false), ref) <= 1e-15)
    local mixed = adjoint(g:to("float32"), x, false)
    assert.are.equal("float64", mixed.dtype)
    assert.is_true(max_diff(mixed, ref) <= 1e-6)
  end)

  it("is gelu's gradient, and differentiable itself, in both forms", function()
    ember.manual_seed(43)
    local x, g = ember.randn({ 4, 5 }, F64) * 2, ember.randn({ 4, 5 }, F64)
    for _, ap in ipairs({ "none", "tanh" }) do
      local function f(a) return a:gelu({ approximate = ap }) end
      assert.is_true(ember.autodiff.gradcheck(f, { x }))
      assert.is_true(ember.autodiff.gradgradcheck(f, { x }))
      assert.is_true(ember.autodiff.gradcheck(function(a, b) return adjoint(a, b, ap == "tanh") end, { g, x }))
    end
  end)

  it("gives the same bits on one thread and on many", function()
    same_bits_on_threads(function()
      ember.manual_seed(44)
      local x, g = ember.randn({ 300000 }), ember.randn({ 300000 })
      return { adjoint(g, x, false), adjoint(g, x, true) }
    end)
  end)

  it("fails on bad input naming the op", function()
    local ok, e = pcall(adjoint, ember.randn({ 3 }), ember.randn({ 2, 3 }), false)
    assert.is_false(ok)
    assert.truthy(tostring(e):find("gelu_backward: gradient {3} and input {2, 3} differ in shape", 1, true))
    ok, e = pcall(adjoint, ember.ones({ 3 }, { dtype = "int32" }), ember.randn({ 3 }), false)
    assert.truthy(tostring(e):find("gelu_backward: expected floating tensors, got gradient int32", 1, true))
  end)
end)

-- pooling of x (N, C, H, W) one window at a time: each output's window (kernel k, stride s,
-- padding pd) clipped to the plane, in row-major order, folded from init by
-- fold(acc, value, position in the plane, 0-based); the outputs in order and their shape
local function window_scan(x, k, s, pd, init, fold)
  local N, Cn, H, W = unpack(x:shape())
  local Ho, Wo = math.floor((H + 2 * pd[1] - k[1]) / s[1]) + 1, math.floor((W + 2 * pd[2] - k[2]) / s[2]) + 1
  local v, ys = x:contiguous():view(-1):tolist(), {}
  for q = 0, N * Cn - 1 do
    for oh = 0, Ho - 1 do
      for ow = 0, Wo - 1 do
        local acc = init
        for h = math.max(0, oh * s[1] - pd[1]), math.min(H, oh * s[1] - pd[1] + k[1]) - 1 do
          for w = math.max(0, ow * s[2] - pd[2]), math.min(W, ow * s[2] - pd[2] + k[2]) - 1 do
            acc = fold(acc, v[q * H * W + h * W + w + 1], h * W + w)
          end
        end
        ys[#ys + 1] = acc
      end
    end
  end
  return ys, { N, Cn, Ho, Wo }
end

describe("max pooling for any window", function()
  -- the first maximum, or the last NaN, and its position
  local function reference(x, k, s, pd)
    local best, shape = window_scan(x, k, s, pd, nil, function(b, e, at)
      if b == nil or e > b[1] or e ~= e then return { e, at } end
      return b
    end)
    local ys, is = {}, {}
    for i, b in ipairs(best) do ys[i], is[i] = b[1], b[2] end
    return ys, is, shape
  end
  local function same_values(got, want)
    for i = 1, #want do
      local a, b = got[i], want[i]
      if not ((a ~= a and b ~= b) or a == b) then return false, i end
    end
    return #got == #want
  end

  local geoms = { { { 3, 3 }, { 2, 2 }, { 1, 1 } }, { { 3, 3 }, { 2, 2 }, { 0, 0 } }, { { 2, 3 }, { 1, 2 }, { 1, 0 } },
    { { 5, 4 }, { 3, 1 }, { 2, 2 } }, { { 1, 1 }, { 2, 3 }, { 0, 0 } }, { { 7, 7 }, { 1, 1 }, { 3, 3 } },
    { { 2, 2 }, { 2, 2 }, { 0, 0 } }, { { 12, 3 }, { 1, 1 }, { 6, 1 } }, { { 4, 6 }, { 1, 4 }, { 2, 3 } } }
  for _, dt in ipairs({ "float32", "float64" }) do
    for _, gm in ipairs(geoms) do
      local k, s, pd = gm[1], gm[2], gm[3]
      it(("gives the window scan's values and positions, ties and NaNs too (%s, kernel {%d, %d}, stride {%d, %d}, "
        .. "padding {%d, %d})"):format(dt, k[1], k[2], s[1], s[2], pd[1], pd[2]), function()
        ember.manual_seed(51)
        -- few distinct values (ties everywhere), some NaNs, a width past a vector
        local x = ember.randint(-3, 4, { 2, 3, 11, 37 }):to(dt)
        x:view(-1):narrow(1, 100, 1):fill_(0 / 0)
        x:view(-1):narrow(1, 777, 1):fill_(0 / 0)
        x:view(-1):narrow(1, 779, 1):fill_(0 / 0)
        local y, idx = F.max_pool2d(x, k, s, pd, 1, false, true)
        local ry, ri, shape = reference(x, k, s, pd)
        assert.are.same(shape, y:shape())
        assert.is_true(same_values(y:contiguous():view(-1):tolist(), ry))
        -- positions are 0-based flat positions in the plane, as PyTorch's
        assert.is_true(same_values(idx:view(-1):tolist(), ri))
      end)
    end
  end

  it("passes gradcheck through its positions", function()
    ember.manual_seed(52)
    local x = ember.randn({ 2, 2, 9, 8 }, F64)
    assert.is_true(ember.autodiff.gradcheck(function(a) return F.max_pool2d(a, 3, 2, 1) end, { x }))
  end)
end)

describe("average pooling for any window", function()
  -- the sum of the window clipped to the plane (padding adds zeros) over kh kw
  local function reference(x, k, s, pd)
    local sums, shape = window_scan(x, k, s, pd, 0, function(sum, e) return sum + e end)
    for i, v in ipairs(sums) do sums[i] = v / (k[1] * k[2]) end
    return ember.tensor(sums, F64):view(shape)
  end

  for _, dt in ipairs({ "float32", "float64" }) do
    for _, gm in ipairs({ { { 3, 3 }, { 2, 2 }, { 1, 1 } }, { { 2, 3 }, { 1, 2 }, { 1, 0 } }, { { 5, 4 }, { 3, 1 }, { 2, 2 } },
      { { 2, 2 }, { 2, 2 }, { 0, 0 } }, { { 1, 1 }, { 1, 1 }, { 0, 0 } } }) do
      local k, s, pd = gm[1], gm[2], gm[3]
      it(("gives the window sums and its adjoint's (%s, kernel {%d, %d}, stride {%d, %d}, padding {%d, %d})")
        :format(dt, k[1], k[2], s[1], s[2], pd[1], pd[2]), function()
        ember.manual_seed(61)
        local x = ember.randn({ 2, 3, 11, 37 }, F64):to(dt)
        local y = F.avg_pool2d(x, k, s, pd)
        local tol = dt == "float64" and 1e-14 or 2e-6
        assert.is_true(max_diff(y, reference(x:to("float64"), k, s, pd)) <= tol)
        -- the adjoint: <avg(x), g> = <x, avg'(g)>
        local g = ember.randn(y:shape(), F64):to(dt)
        local gm_ = ember.autodiff.GradManager():attach({ x })
        gm_:record()
        gm_:backward((F.avg_pool2d(x, k, s, pd) * g):sum())
        local lhs = (y:to("float64") * g:to("float64")):sum():item()
        local rhs = (x:to("float64") * x.grad:to("float64")):sum():item()
        assert.is_true(math.abs(lhs - rhs) <= tol * 100 * math.max(1, math.abs(lhs)), lhs .. " " .. rhs)
      end)
    end
  end

  it("passes gradcheck and gradgradcheck", function()
    ember.manual_seed(62)
    local x = ember.randn({ 1, 2, 7, 9 }, F64)
    local function f(a) return F.avg_pool2d(a, 3, 2, 1) end
    assert.is_true(ember.autodiff.gradcheck(f, { x }))
    assert.is_true(ember.autodiff.gradgradcheck(f, { x }))
  end)
end)
