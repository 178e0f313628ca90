-- Plans on the device under test (EMBER_TEST_DEVICE, spec/support/device.lua;
-- docs/plans.md): the MLP and CNN recipes in small, model, optimizer state
-- and batches on the device, trained 20 steps eagerly and 20 through a plan
-- traced at step 2, under set_deterministic (the device's convolutions and
-- reductions in a fixed order): losses, parameters, buffers and optimizer
-- state equal bit for bit at every step, as spec/jit_spec.lua checks on the
-- CPU. Without the device each case is pending with the reason.
local ember = require("ember")
local D = require("spec.support.device")
local P = require("spec.support.plan_check")
local device, case = D.device, D.case

describe("on " .. device .. ": plans", function()
  local before
  before_each(function()
    before = ember.is_deterministic()
    ember.set_deterministic(true)
  end)
  after_each(function() ember.set_deterministic(before) end)

  case("replay the MLP recipe's step (SGD with momentum) as eager does over 20 steps", function()
    local plan = P.eager_against_plan("mlp", device)
    assert.is_true(plan:stats().ops > 20)
  end)

  case("replay the CNN recipe's step (conv, batch norm, dropout, Adam) as eager does over 20 steps", function()
    P.eager_against_plan("cnn", device)
  end)

  case("refuse inputs of another dtype or device than the example's, naming them", function()
    local xs, ys = P.batches(2, device)
    local m = P.make("mlp", device)
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
