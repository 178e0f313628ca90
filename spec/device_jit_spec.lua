-- Plans on the device under test (EMBER_TEST_DEVICE, spec/support/device.lua;
-- docs/plans.md): the MLP and CNN recipes in small, model, optimizer state
-- and batches on the device, trained 20 steps eagerly and 20 through a plan
-- traced at step 2, under set_deterministic (the device's convolutions and
-- reductions in a fixed order): losses, parameters, buffers and optimizer
-- state equal bit for bit at every step, as spec/jit_spec.lua checks on the
-- CPU. Without the device each case is pending with the reason.
local ember = require("ember")
local Z = require("spec.support.zoo")
local D = require("spec.support.device")
local device, case = D.device, D.case
local optim = ember.optim

local function same(a, b)
  return a.dtype == b.dtype and a.device == b.device
    and table.concat(a:shape(), ",") == table.concat(b:shape(), ",") and ember.equal(a, b)
end

local function make(kind)
  ember.manual_seed(1)
  local model = kind == "mlp" and Z.mlp({ 64, 32, 16, 10 }, true) or Z.SmallCNN()
  model:to({ device = device })
  local params = model:parameters()
  local opt = kind == "mlp" and optim.SGD(params, { lr = 0.1, momentum = 0.9 }) or optim.Adam(params, { lr = 1e-2 })
  return { model = model, opt = opt, step = Z.train_step(model, opt) }
end

local function batches(n)
  ember.manual_seed(7)
  local xs, ys = {}, {}
  for i = 1, n do
    xs[i] = ember.randn({ 8, 1, 8, 8 }):to(device)
    ys[i] = ember.randint(1, 11, { 8 }):to(device)
  end
  return xs, ys
end

local function eager_against_plan(kind)
  local xs, ys = batches(20)
  local a, b = make(kind), make(kind)
  local plan
  for i = 1, 20 do
    ember.manual_seed(100 + i)
    local la = a.step(xs[i], ys[i])
    ember.manual_seed(100 + i)
    local lb
    if i == 1 then lb = b.step(xs[i], ys[i])
    elseif i == 2 then plan = ember.jit.trace(b.step, { xs[i], ys[i] })
    else lb = plan(xs[i], ys[i]) end
    if lb then
      assert.are.equal(device, lb.device)
      assert.is_true(same(la, lb), kind .. " loss at step " .. i)
    end
    local sa, sb = a.model:state_dict(), b.model:state_dict()
    for k, v in pairs(sa) do assert.is_true(same(v, sb[k]), kind .. " " .. k .. " at step " .. i) end
    local pa, pb = a.model:parameters(), b.model:parameters()
    for k = 1, #pa do
      for name, v in pairs(a.opt.state[pa[k]]) do
        local w = b.opt.state[pb[k]][name]
        if ember.is_tensor(v) then assert.is_true(same(v, w), kind .. " " .. name .. " at step " .. i)
        else assert.are.equal(v, w) end
      end
    end
  end
  return plan
end

describe("on " .. device .. ": plans", function()
  local before
  before_each(function()
    before = ember.is_deterministic()
    ember.set_deterministic(true)
  end)
  after_each(function() ember.set_deterministic(before) end)

  case("replay the MLP recipe's step (SGD with momentum) as eager does over 20 steps", function()
    local plan = eager_against_plan("mlp")
    assert.is_true(plan:stats().ops > 20)
  end)

  case("replay the CNN recipe's step (conv, batch norm, dropout, Adam) as eager does over 20 steps", function()
    eager_against_plan("cnn")
  end)

  case("refuse inputs of another dtype or device than the example's, naming them", function()
    local xs, ys = batches(2)
    local m = make("mlp")
    m.step(xs[1], ys[1])
    local plan = ember.jit.trace(m.step, { xs[2], ys[2] })
    local ok, err = pcall(plan, xs[2]:to("float64"), ys[2])
    assert.is_false(ok)
    assert.matches("float64", tostring(err))
    if device ~= "cpu" then
      ok, err = pcall(plan, xs[2]:to("cpu"), ys[2])
      assert.is_false(ok)
      assert.matches("cpu", tostring(err))
    end
  end)
end)
