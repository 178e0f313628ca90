-- ember.nn.loss: every loss, as a function and as a module, against PyTorch
-- 1.13 (spec/fixtures/losses_torch.lua, written by gen_losses.py): values and
-- gradients through a GradManager in float64, again in float32 and on
-- non-contiguous inputs; gradcheck on the smooth ones; bad options and inputs.
local H = require("helpers")
local ember = H.ember
local nn, F = ember.nn, ember.nn.functional
local GradManager = ember.autodiff.GradManager
local gradcheck = ember.autodiff.gradcheck
local CASES = dofile("spec/fixtures/losses_torch.lua")

local MODULE = {
  mse_loss = "MSELoss", l1_loss = "L1Loss", smooth_l1_loss = "SmoothL1Loss", huber_loss = "HuberLoss",
  binary_cross_entropy = "BCELoss", binary_cross_entropy_with_logits = "BCEWithLogitsLoss",
  kl_div = "KLDivLoss", nll_loss = "NLLLoss", cross_entropy = "CrossEntropyLoss",
}

-- the case's input, target and options as tensors of dtype, each passed through layout
local function tensors(c, dtype, layout)
  layout = layout or function(t) return t end
  local function T(v) return layout(ember.tensor(v, { dtype = dtype })) end
  local target = c.target_dtype == "int64" and ember.tensor(c.target, { dtype = "int64" }) or T(c.target)
  local opts = {}
  for k, v in pairs(c.opts) do opts[k] = type(v) == "table" and T(v) or v end
  return T(c.input), target, opts
end

-- value, input gradient and target gradient of (loss * cot):sum(), recorded
local function run(loss, c, input, target, opts)
  local gm = GradManager()
  gm:attach(c.target_grad and { input, target } or { input })
  gm:record()
  local out = loss(input, target, opts)
  gm:backward((out * ember.tensor(c.cot, { dtype = out.dtype })):sum())
  return out, input.grad, target.grad
end

local function functional(c) return F[c.fn] end
local function module(c)
  return function(input, target, opts) return nn[MODULE[c.fn]](opts)(input, target) end
end

local function matches(c, tol, out, gi, gt)
  H.same(out, c.out, tol, c.shape)
  H.same(gi, c.grad_input, tol)
  if c.grad_target then H.same(gt, c.grad_target, tol) end
end

describe("losses against PyTorch 1.13", function()
  it("has a case for every loss and every module", function()
    H.has_cases(CASES, MODULE)
    for _, m in pairs(MODULE) do assert.is_table(nn[m], m) end
  end)

  for _, c in ipairs(CASES) do
    it(c.name .. ": value and gradients in float64", function()
      matches(c, 1e-11, run(functional(c), c, tensors(c, "float64")))
    end)
    it(c.name .. ": nn." .. MODULE[c.fn] .. " gives the same", function()
      matches(c, 1e-11, run(module(c), c, tensors(c, "float64")))
    end)
    it(c.name .. ": float32", function()
      local input, target, opts = tensors(c, "float32")
      local out, gi, gt = run(functional(c), c, input, target, opts)
      assert.equal("float32", out.dtype)
      assert.equal("float32", gi.dtype)
      matches(c, 2e-5, out, gi, gt)
    end)
    it(c.name .. ": non-contiguous inputs", function()
      local input, target, opts = tensors(c, "float64", H.noncontig)
      if input:dim() >= 2 then assert.is_false(input:is_contiguous()) end
      matches(c, 1e-11, run(functional(c), c, input, target, opts))
    end)
  end
end)

describe("losses pass gradcheck in float64", function()
  local R = function(...) return ember.randn({ ... }, { dtype = "float64" }) end
  local probs = R(3, 4):sigmoid()
  local labels = ember.tensor({ 2, -100, 4 }, { dtype = "int64" })
  local w = ember.tensor({ 0.5, 2, 1, 3 }, { dtype = "float64" })
  local cases = {
    smooth_l1_loss = function(x, y) return F.smooth_l1_loss(x, y, { beta = 0.3 }) end,
    huber_loss = function(x, y) return F.huber_loss(x, y, { delta = 0.4, reduction = "sum" }) end,
    binary_cross_entropy = function(x, y) return F.binary_cross_entropy(x:sigmoid(), y:sigmoid()) end,
    binary_cross_entropy_with_logits = function(x, y)
      return F.binary_cross_entropy_with_logits(x, y:sigmoid(), { pos_weight = w, weight = probs })
    end,
    kl_div = function(x, y) return F.kl_div(x:log_softmax(2), y:softmax(2), { reduction = "batchmean" }) end,
    cross_entropy = function(x) return F.cross_entropy(x, labels, { weight = w, label_smoothing = 0.2 }) end,
    ["cross_entropy probabilities"] = function(x, y)
      return F.cross_entropy(x, y:softmax(2), { weight = w })
    end,
  }
  for name, f in pairs(cases) do
    it(name, function() assert.is_true(gradcheck(f, { R(3, 4), R(3, 4) })) end)
  end
end)

describe("loss modules", function()
  it("keep weight and pos_weight as buffers, not parameters", function()
    local w = ember.tensor({ 1, 2, 3 })
    local m = nn.BCEWithLogitsLoss({ weight = w, pos_weight = ember.tensor({ 2, 2, 2 }) })
    assert.equal(0, #m:parameters())
    assert.equal(2, #m:buffers())
    assert.equal(w, m.weight)
    local sd = m:state_dict()
    H.same(sd.weight, { 1, 2, 3 }, 0)
    H.same(sd.pos_weight, { 2, 2, 2 }, 0)
    m:double()
    assert.equal("float64", m.weight.dtype)
    assert.equal("float64", m.pos_weight.dtype)
  end)

  it("keep their options as fields, defaults as PyTorch's", function()
    local ce = nn.CrossEntropyLoss()
    assert.equal("mean", ce.reduction)
    assert.equal(-100, ce.ignore_index)
    assert.equal(0, ce.label_smoothing)
    assert.is_nil(ce.weight)
    assert.equal(1, nn.SmoothL1Loss().beta)
    assert.equal(1, nn.HuberLoss().delta)
    assert.is_false(nn.KLDivLoss().log_target)
    assert.equal("CrossEntropyLoss(reduction=mean)", tostring(ce))
    -- a changed field is used, and checked, at the next call
    local x, y = ember.tensor({ 1, 2 }), ember.tensor({ 0, 0 })
    local l1 = nn.L1Loss()
    l1.reduction = "sum"
    H.same(l1(x, y), 3, 0)
    l1.reduction = "avg"
    assert.has_error(function() l1(x, y) end,
      "ember.nn.L1Loss: reduction must be one of 'mean', 'sum', 'none', got 'avg'")
  end)
end)

describe("losses reject bad input with a clear message", function()
  local x23, y23 = ember.randn({ 2, 3 }), ember.rand({ 2, 3 })
  local labels = ember.tensor({ 1, 3 }, { dtype = "int64" })
  local raises = H.raises

  it("names the function, the option and the value", function()
    raises(function() F.mse_loss(x23, y23, { reduction = "avg" }) end,
      "ember.nn.functional.mse_loss: reduction must be one of 'mean', 'sum', 'none', got 'avg'")
    raises(function() F.l1_loss(x23, y23, { reduce = "sum" }) end,
      "ember.nn.functional.l1_loss: unknown option 'reduce'")
    raises(function() F.l1_loss(x23, y23, "sum") end,
      "ember.nn.functional.l1_loss: options must be a table, got string")
    raises(function() F.smooth_l1_loss(x23, y23, { beta = -1 }) end,
      "ember.nn.functional.smooth_l1_loss: beta must be a number in [0, inf], got -1")
    raises(function() F.huber_loss(x23, y23, { delta = 0 }) end,
      "ember.nn.functional.huber_loss: delta must be a number in (0, inf], got 0")
    raises(function() F.kl_div(x23, y23, { log_target = 1 }) end,
      "ember.nn.functional.kl_div: log_target must be a boolean, got 1")
    raises(function() F.binary_cross_entropy_with_logits(x23, y23, { pos_weight = { 1, 2, 3 } }) end,
      "binary_cross_entropy_with_logits: pos_weight must be a tensor")
    raises(function() F.cross_entropy(x23, labels, { label_smoothing = 1.5 }) end,
      "cross_entropy: label_smoothing must be a number in [0, 1], got 1.5")
    raises(function() F.nll_loss(x23, labels, { ignore_index = 0.5 }) end,
      "nll_loss: ignore_index must be an integer, got 0.5")
    raises(function() nn.CrossEntropyLoss({ reduction = "batchmean" }) end,
      "ember.nn.CrossEntropyLoss: reduction must be one of 'mean', 'sum', 'none', got 'batchmean'")
  end)

  it("names the shapes, dtypes and values that do not fit", function()
    local I = function(v) return ember.tensor(v, { dtype = "int64" }) end
    raises(function() F.mse_loss(x23, ember.randn({ 3, 2 })) end,
      "ember.nn.functional.mse_loss: input of shape {2, 3} and target of shape {3, 2} differ")
    raises(function() F.kl_div(x23, 2) end, "ember.nn.functional.kl_div: target must be a tensor, got number")
    raises(function() F.binary_cross_entropy(x23, y23) end,
      "ember.nn.functional.binary_cross_entropy: input values must be probabilities in [0, 1]")
    raises(function() F.cross_entropy(x23, labels, { weight = ember.ones({ 2 }) }) end,
      "cross_entropy: weight must have one entry per class, shape {3}, got {2}")
    raises(function() F.nll_loss(x23, I({ 1, 4 })) end,
      "ember.nn.functional.nll_loss: label 4 is out of range 1..3")
    raises(function() F.cross_entropy(x23, I({ 0, 1 })) end, "label 0 is out of range 1..3")
    -- an ignore_index only skips its own label
    raises(function() F.cross_entropy(x23, I({ -100, 0 })) end, "label 0")
    raises(function() F.cross_entropy(x23, ember.tensor({ 1.0, 2.0 })) end, "int64 or int32", "float32 {2}")
    raises(function() F.cross_entropy(x23, I({ 1, 2, 3 })) end, "{2, 3}", "{3}")
    raises(function() nn.MSELoss()(x23, ember.ones({ 3 })) end, "ember.nn.MSELoss: input of shape {2, 3}")
  end)

  it("points at the caller's line and leaves ember usable", function()
    local ok, err = pcall(function() local l = F.mse_loss(x23, y23, { reduction = "avg" }); return l end)
    assert.is_false(ok)
    assert.truthy(err:find("loss_spec.lua:%d+: ember.nn.functional.mse_loss"), err)
    H.same(F.mse_loss(ember.tensor({ 1, 2 }), ember.tensor({ 0, 0 })), 2.5, 0)
  end)

  it("binary_cross_entropy floors the log at -100 and keeps saturated gradients finite", function()
    local p = ember.tensor({ 0, 1, 1, 0 }, { dtype = "float64" })
    local gm = GradManager()
    gm:attach({ p })
    gm:record()
    local y = ember.tensor({ 0, 1, 0, 1 }, { dtype = "float64" })
    local l = F.binary_cross_entropy(p, y, { reduction = "none" })
    gm:backward(l:sum())
    H.same(l, { 0, 0, 100, 100 }, 1e-12)
    -- 1/(1 - p) and -1/p where the target agrees; 0 on the floor, where PyTorch divides by 1e-12
    H.same(p.grad, { 1, -1, 0, 0 }, 0)
  end)

  it("gives NaN for a mean over nothing, as PyTorch", function()
    local all_ignored = ember.tensor({ -100, -100 }, { dtype = "int64" })
    local v = F.cross_entropy(x23, all_ignored):item()
    assert.is_true(v ~= v)
    H.same(F.cross_entropy(x23, all_ignored, { reduction = "sum" }), 0, 0)
  end)
end)
