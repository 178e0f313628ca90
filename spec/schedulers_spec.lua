-- ember.optim.lr_scheduler: ExponentialLR, MultiStepLR, PolynomialLR,
-- LambdaLR, MultiplicativeLR and CyclicLR against PyTorch 1.13's lr (and
-- CyclicLR's momentum) sequences (spec/fixtures/schedulers/cases.json,
-- written by gen.py there); state_dict round trips; option errors.
local H = require("helpers")
local ember = H.ember
local optim = ember.optim
local sched = optim.lr_scheduler

local read = H.read_json
local CASES = read("spec/fixtures/schedulers/cases.json")

-- the fixture's lambdas, by name
local LAMBDAS = {
  decay95 = function(e) return 0.95 ^ e end,
  inverse = function(e) return 1 / (e + 1) end,
  warmup = function(e) return math.min(1, (e + 1) / 4) end,
  half_on_odd = function(e) return e % 2 == 1 and 0.5 or 1 end,
}

local function optimizer(lrs)
  local groups = {}
  for i, lr in ipairs(lrs) do groups[i] = { params = { ember.zeros({ 1 }) }, lr = lr } end
  return optim.SGD(groups, { lr = lrs[1], momentum = 0.9 })
end

local function options(c)
  local o = {}
  for k, v in pairs(c.opts) do o[k] = v end
  if o.lr_lambda then
    if type(o.lr_lambda) == "table" then
      local fs = {}
      for i, n in ipairs(o.lr_lambda) do fs[i] = LAMBDAS[n] end
      o.lr_lambda = fs
    else
      o.lr_lambda = LAMBDAS[o.lr_lambda]
    end
  end
  return o
end

local function near(got, want, what)
  for i = 1, #want do
    assert(math.abs(got[i] - want[i]) <= 1e-12 * (1 + math.abs(want[i])),
      ("%s group %d: got %.17g, expected %.17g"):format(what, i, got[i], want[i]))
  end
end

local function lrs_of(opt, key)
  local out = {}
  for i, g in ipairs(opt.param_groups) do out[i] = g[key or "lr"] end
  return out
end

describe("lr schedulers against PyTorch 1.13", function()
  for ci, c in ipairs(CASES) do
    it(("%s (case %d): lr sequence%s"):format(c.name, ci, c.name == "CyclicLR" and " and momentum" or ""), function()
      local opt = optimizer(c.lrs)
      local s = sched[c.name](opt, options(c))
      for step = 1, #c.lr do
        if step > 1 then s:step() end
        local what = ("%s step %d"):format(c.name, step - 1)
        near(lrs_of(opt), c.lr[step], what)
        near(s:get_last_lr(), c.lr[step], what)
        near(lrs_of(opt, "momentum"), c.momentum[step], what .. " momentum")
      end
    end)

    it(("%s (case %d): state_dict round trip mid-schedule"):format(c.name, ci), function()
      local opt = optimizer(c.lrs)
      local s = sched[c.name](opt, options(c))
      for _ = 1, 3 do s:step() end
      local state = s:state_dict()
      assert.is_nil(state.lr_lambda)        -- functions are left out, as PyTorch's
      local opt2 = optimizer(c.lrs)
      local s2 = sched[c.name](opt2, options(c))
      s2:load_state_dict(state)
      for step = 5, #c.lr do
        s2:step()
        near(lrs_of(opt2), c.lr[step], c.name .. " resumed at step " .. (step - 1))
      end
    end)
  end

  it("MultiplicativeLR jumps with step(epoch) to the product up to that epoch", function()
    local opt = optimizer({ 1 })
    local s = sched.MultiplicativeLR(opt, { lr_lambda = LAMBDAS.inverse })
    s:step(3)
    near(lrs_of(opt), { 1 / 2 * 1 / 3 * 1 / 4 }, "epoch 3")
    s:step(1)
    near(lrs_of(opt), { 1 / 2 }, "epoch 1")
  end)

  it("raises for bad options, naming the scheduler", function()
    local opt = optimizer({ 0.1, 0.2 })
    H.raises(function() sched.ExponentialLR(opt, {}) end, "ExponentialLR", "gamma")
    H.raises(function() sched.ExponentialLR(opt, { gamma = 0.9, gama = 1 }) end, "unknown option 'gama'")
    H.raises(function() sched.MultiStepLR(opt, { milestones = { 1.5 } }) end, "MultiStepLR", "non-negative integer epochs")
    H.raises(function() sched.LambdaLR(opt, { lr_lambda = 0.5 }) end, "LambdaLR", "must be a function")
    H.raises(function() sched.LambdaLR(opt, { lr_lambda = { LAMBDAS.inverse } }) end, "lr_lambda lists 1 values")
    H.raises(function() sched.LambdaLR(opt, { lr_lambda = function() return 0 / 0 end }) end,
      "lr_lambda(0) for group 1 returned nan")
    H.raises(function() sched.CyclicLR(opt, { base_lr = 0.1 }) end, "CyclicLR", "max_lr")
    H.raises(function() sched.CyclicLR(opt, { base_lr = 0.1, max_lr = 1, mode = "sine" }) end, "mode must be")
    H.raises(function()
      sched.CyclicLR(optim.Adam({ ember.zeros({ 1 }) }), { base_lr = 0.1, max_lr = 1 })
    end, "cycle_momentum needs an optimizer with a momentum option")
    H.raises(function() sched.PolynomialLR(opt, { total_iters = 0 }) end, "PolynomialLR", "total_iters")
  end)
end)
