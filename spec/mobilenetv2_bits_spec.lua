-- MobileNetV2's modules on their fast paths (issue 30: the per-op cost
-- between kernels cut in Conv2d, BatchNorm2d, Sequential and recording)
-- give the bits they gave before: a training step's losses, gradients,
-- parameters and running statistics, and the eval outputs, hashed, against
-- the base build's (spec/fixtures/mobilenetv2_bits, where the machine is the
-- one they were made on), and against the same model run through the public
-- functions with options tables (the composition the modules stand for).
package.path = "./bench/?.lua;./spec/support/?.lua;./spec/fixtures/mobilenetv2_bits/?.lua;" .. package.path
local H = require("helpers")
local ember = H.ember
local nn, F = ember.nn, ember.nn.functional
local run = require("run")
local machine = require("machine")

-- the model's forward written out with F's public calls, as the modules
-- before the fast paths made it (BatchNorm2d then ReLU6: one F.batch_norm
-- with activation "relu6")
local function composed(model)
  local function bn(m, x, act)
    local momentum = m.momentum
    if m.training then ember.no_grad(function() m.num_batches_tracked:add_(1) end) end
    return F.batch_norm(x, m.running_mean, m.running_var, m.weight, m.bias,
      { training = m.training, momentum = momentum, eps = m.eps, activation = act })
  end
  local function seq(s, x)
    local i = 1
    while i <= #s do
      local m, r = s[i], i < #s and s[i + 1] or nil
      if getmetatable(m).__class == nn.Conv2d then
        x = F.conv2d(x, m.weight, m.bias, { stride = m.stride, padding = m.padding, dilation = m.dilation,
          groups = m.groups })
        i = i + 1
      elseif getmetatable(m).__class == nn.BatchNorm2d then
        local act = r ~= nil and getmetatable(r).__class == nn.ReLU6 and "relu6" or nil
        x = bn(m, x, act)
        i = i + (act and 2 or 1)
      elseif m.block then   -- an inverted residual
        local y = seq(m.block, x)
        x = m.use_res and x + y or y
        i = i + 1
      else
        error("unexpected module " .. m.__name)
      end
    end
    return x
  end
  return function(x)
    local z = F.adaptive_avg_pool2d(seq(model.features, x), 1):flatten(2)
    return F.linear(z, model.classifier.weight, model.classifier.bias)
  end
end

describe("MobileNetV2's bits", function()
  it("are the base build's (46e6cec) on the machine its fixture was made on", function()
    local base = dofile("spec/fixtures/mobilenetv2_bits/base.lua")
    if base.machine ~= machine() then
      pending("fixture made on " .. base.machine .. "; this machine: " .. machine())
      return
    end
    local got = run()
    assert.are.equal(#base.values, #got)
    for i, e in ipairs(base.values) do assert.are.same(e, got[i]) end
  end)

  it("are the composition's of F's public calls, in training and eval", function()
    local got = run()
    -- the same run with every module's forward replaced by the composition
    local MobileNetV2 = require("mobilenetv2")
    local forward = MobileNetV2.forward
    MobileNetV2.forward = function(self, x) return composed(self)(x) end
    local ok, want = pcall(run)
    MobileNetV2.forward = forward
    assert(ok, want)
    assert.are.equal(#want, #got)
    for i, e in ipairs(want) do assert.are.same(e, got[i]) end
  end)
end)

describe("nn.Conv2d's options kept between calls", function()
  it("follow its fields when they are set anew or changed in place", function()
    ember.manual_seed(1)
    local m = nn.Conv2d(2, 4, 3, { padding = 1 })
    local x = ember.randn({ 1, 2, 7, 7 })
    local function want(o) return F.conv2d(x, m.weight, m.bias, o) end
    assert.is_true(m(x):equal(want({ padding = 1 })))
    m.stride = 2
    assert.are.same({ 1, 4, 4, 4 }, m(x):shape())
    assert.is_true(m(x):equal(want({ stride = 2, padding = 1 })))
    m.stride = { 1, 2 }
    assert.is_true(m(x):equal(want({ stride = { 1, 2 }, padding = 1 })))
    m.stride[1] = 3   -- in place
    assert.are.same({ 1, 4, 3, 4 }, m(x):shape())
    m.padding, m.dilation = { 0, 2 }, 2
    assert.is_true(m(x):equal(want({ stride = { 3, 2 }, padding = { 0, 2 }, dilation = 2 })))
    m.stride, m.padding, m.dilation = 1, 1, 1
    assert.is_true(m(x):equal(want({ padding = 1 })))
  end)

  it("raise as F.conv2d does when a field is set to a bad value, and keep working after", function()
    local m = nn.Conv2d(2, 4, 3)
    local x = ember.randn({ 1, 2, 5, 5 })
    m(x)
    m.stride = "two"
    assert.has_error(function() m(x) end, "ember.nn.functional.conv2d: stride must be a number or an {h, w} pair, got string")
    m.stride = { 1, 2, 3 }
    assert.has_error(function() m(x) end, "ember.nn.functional.conv2d: stride must be a number or an {h, w} pair, got table")
    m.groups = "one"
    m.stride = 1
    assert.has_error(function() m(x) end, "ember.nn.functional.conv2d: groups must be a number, got string")
    m.groups = 1
    assert.are.same({ 1, 4, 3, 3 }, m(x):shape())
  end)
end)
