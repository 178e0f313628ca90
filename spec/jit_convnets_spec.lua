-- Real convnets through plans (docs/plans.md, "Convnets"): the zoo's
-- ResNet-18 and MobileNet (depthwise and grouped convolutions, eval-mode
-- batch norm as channel_affine with ReLU/ReLU6 folded in, squeeze and
-- excitation, hardswish, adaptive average pooling, flatten), traced in
-- eval mode, replay bit for bit what the eager forward gives at batch 1 and
-- batch 4, and a saved plan loaded back gives the same bits again.
package.path = "./spec/support/?.lua;" .. package.path
local H = require("helpers")
local ember = H.ember
local Z = require("zoo")

-- one dtype, one shape, the same values (ember.equal compares shapes too)
local function same(a, b) return a.dtype == b.dtype and ember.equal(a, b) end

-- eval mode with running statistics that are not the initial ones (batch
-- norm's scale and shift then differ from 1 and 0 per channel)
local function build(name)
  ember.manual_seed(3)
  local model = name == "resnet18" and Z.ResNet18(8, 5) or Z.MobileNet(5, 0.2)
  ember.no_grad(function()
    for _, m in ipairs(model:modules()) do
      if m.running_mean ~= nil then
        m.running_mean:copy_(ember.randn(m.running_mean:shape()) * 0.1)
        m.running_var:copy_(ember.rand(m.running_var:shape()) + 0.5)
        m.weight:copy_(ember.rand(m.weight:shape()) + 0.5)
        m.bias:copy_(ember.randn(m.bias:shape()) * 0.1)
      end
    end
  end)
  model:eval()
  return model
end

for _, name in ipairs({ "resnet18", "mobilenet" }) do
  describe("a traced " .. name .. " in eval mode", function()
    for _, batch in ipairs({ 1, 4 }) do
      it("replays the eager forward bit for bit at batch " .. batch .. ", and a saved plan too", function()
        local model = build(name)
        ember.manual_seed(5)
        local x0, x = ember.randn({ batch, 3, 32, 32 }), ember.randn({ batch, 3, 32, 32 })
        local plan = ember.jit.trace(model, { x0 }, { train = false })
        local want = ember.no_grad(function() return model(x) end)
        local got = plan(x)
        assert.is_true(same(want, got))
        assert.is_true(same(ember.no_grad(function() return model(x0) end), plan(x0)))
        local st = plan:stats()
        assert.is_true(st.ops > 0 and st.fused > 0)
        local path = H.tmpdir() .. "/" .. name .. ".plan"
        plan:save(path, { names = model:state_dict() })
        local loaded = ember.jit.load(path)
        assert.is_true(same(want, loaded(x)))
        -- the loaded plan holds its own weights: a weight changed in the
        -- model is seen by the traced plan (read in place), not by the file's
        ember.no_grad(function()
          for _, m in ipairs(model:modules()) do
            if m.running_var ~= nil then m.running_var:mul_(2) end
          end
        end)
        local want2 = ember.no_grad(function() return model(x) end)
        assert.is_false(same(want, want2))
        assert.is_true(same(want2, plan(x)))
        assert.is_true(same(want, loaded(x)))
        os.remove(path)
      end)
    end
  end)
end

describe("a saved channel_affine", function()
  it("keeps its activation's bounds (ReLU6's 0 and 6) to the bit, and a file with bad bounds is refused", function()
    local bn = ember.nn.BatchNorm2d(3)
    local model = ember.nn.Sequential(bn, ember.nn.ReLU6())
    ember.no_grad(function() bn.weight:copy_(ember.tensor({ 4, 5, 6 })) end)
    model:eval()
    local x = ember.randn({ 2, 3, 4, 4 })
    local plan = ember.jit.trace(model, { x }, { train = false })
    local path = H.tmpdir() .. "/affine.plan"
    plan:save(path)
    local want = ember.no_grad(function() return model(x) end)
    assert.are.equal(6, want:max():item())
    assert.is_true(same(want, ember.jit.load(path)(x)))
    local f = assert(io.open(path, "rb"))
    local bytes = f:read("*a")
    f:close()
    local bad = bytes:gsub('"act\\":%[0,6%]', '"act\\":[0  ]')   -- one bound (the header's length kept)
    assert.are_not.equal(bytes, bad)
    f = assert(io.open(path, "wb"))
    f:write(bad)
    f:close()
    assert.error_matches(function() ember.jit.load(path) end, "channel_affine%): bad activation bounds")
    os.remove(path)
  end)
end)

describe("a forward's plan", function()
  -- batch norm in eval mode: scale and shift from the weights and running
  -- statistics, entries that read only weights
  local function bn_net()
    ember.manual_seed(11)
    local m = ember.nn.Sequential(ember.nn.Conv2d(2, 3, 3, { bias = false }), ember.nn.BatchNorm2d(3), ember.nn.ReLU6())
    m:eval()
    return m
  end
  local function eager(m, x) return ember.no_grad(function() return m(x) end) end

  it("runs the entries that read only weights once, and again after a weight is written in place", function()
    local m, x = bn_net(), ember.randn({ 1, 2, 5, 5 })
    local plan = ember.jit.trace(m, { x }, { train = false })
    local st = plan:stats()
    assert.is_true(st.hoisted >= 3 and st.hoisted < st.ops)   -- scale and shift, not the conv
    for _ = 1, 3 do assert.is_true(same(eager(m, x), plan(x))) end
    -- written in place: an optimizer's step, load_state_dict's copy_, an in-place op on a buffer
    local sd = m:state_dict()
    local other = bn_net()
    ember.no_grad(function() other:get(2).running_mean:fill_(0.25) end)
    m:load_state_dict(other:state_dict())
    assert.is_true(same(eager(m, x), plan(x)))
    ember.no_grad(function() m:get(2).weight:add_(1) end)
    local want = eager(m, x)
    assert.is_false(same(want, eager(other, x)))
    assert.is_true(same(want, plan(x)))
    -- a budgeted run, one entry per step
    local run = plan:start(x)
    while not run:step(0) do end
    assert.is_true(same(want, run:result()))
    m:load_state_dict(sd)
    assert.is_true(same(eager(m, x), plan(x)))
  end)

  it("keeps nothing from a run that failed, and nothing in a training step", function()
    local m, x = bn_net(), ember.randn({ 1, 2, 5, 5 })
    local plan = ember.jit.trace(m, { x }, { train = false })
    local run = plan:start(x)
    run:step(0)   -- the first entries only, then abandoned
    run:cancel()
    ember.no_grad(function() m:get(2).running_var:mul_(3) end)
    assert.is_true(same(eager(m, x), plan(x)))
    m:train()
    local opt = ember.optim.SGD(m:parameters(), { lr = 0.1 })
    local gm = ember.autodiff.GradManager():attach(m:parameters())
    local function step(xx)
      gm:record()
      local loss = m(xx):sum()
      gm:backward(loss)
      opt:step()
      opt:zero_grad()
      return loss
    end
    assert.are.equal(0, ember.jit.trace(step, { x }):stats().hoisted)
  end)
end)

describe("a forward's convolution whose taps read only padding", function()
  it("reads its weight's live taps from a kept copy: the same bits, and a written weight is seen", function()
    ember.manual_seed(12)
    for _, case in ipairs({ { 1, 1, 1 }, { 1, 3, 1 }, { 1, 1, 2 } }) do   -- H, W, groups: 3x3 with padding 1
      local h, w, groups = case[1], case[2], case[3]
      local conv = ember.nn.Conv2d(4, 6, 3, { padding = 1, groups = groups, bias = false })
      local x = ember.randn({ 2, 4, h, w })
      local plan = ember.jit.trace(conv, { x }, { train = false })
      local st = plan:stats()
      assert.are.equal(3, st.ops)       -- the view of the live taps, its copy, the convolution
      assert.are.equal(2, st.hoisted)
      local function eager() return ember.no_grad(function() return conv(x) end) end
      assert.is_true(same(eager(), plan(x)))
      ember.no_grad(function() conv.weight:mul_(-2) end)
      assert.is_true(same(eager(), plan(x)))
    end
  end)
end)
