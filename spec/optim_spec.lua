-- ember.optim: SGD, Adam and AdamW against values computed by hand and against
-- an independent scalar Lua implementation of PyTorch's update rules (below,
-- written from the torch.optim docs, sharing no code with the optimizers);
-- clip_grad_norm, the lr schedulers, state_dict round trips and errors.
local H = require("helpers")
local ember = H.ember
local optim = ember.optim
local F64 = { dtype = "float64" }

---------------------------------------------------------------- the scalar oracle
-- w: list of numbers (modified), grads: one list per step
local function ref_sgd(w, grads, o)
  local lr, mom, damp, wd = o.lr, o.momentum or 0, o.dampening or 0, o.weight_decay or 0
  local buf = {}
  for t, g in ipairs(grads) do
    for i = 1, #w do
      local d = g[i]
      if o.maximize then d = -d end
      d = d + wd * w[i]
      if mom ~= 0 then
        if t == 1 then buf[i] = d else buf[i] = mom * buf[i] + (1 - damp) * d end
        if o.nesterov then d = d + mom * buf[i] else d = buf[i] end
      end
      w[i] = w[i] - lr * d
    end
  end
  return w
end

local function ref_adam(w, grads, o, decoupled)
  local lr, eps = o.lr or 1e-3, o.eps or 1e-8
  local b1, b2 = (o.betas or { 0.9, 0.999 })[1], (o.betas or { 0.9, 0.999 })[2]
  local wd = o.weight_decay or (decoupled and 1e-2 or 0)
  local m, v, vmax = {}, {}, {}
  for i = 1, #w do m[i], v[i], vmax[i] = 0, 0, 0 end
  for t, g in ipairs(grads) do
    for i = 1, #w do
      local gi = g[i]
      if o.maximize then gi = -gi end
      if decoupled then w[i] = w[i] * (1 - lr * wd) else gi = gi + wd * w[i] end
      m[i] = b1 * m[i] + (1 - b1) * gi
      v[i] = b2 * v[i] + (1 - b2) * gi * gi
      local vh = v[i]
      if o.amsgrad then
        vmax[i] = math.max(vmax[i], v[i])
        vh = vmax[i]
      end
      local denom = math.sqrt(vh) / math.sqrt(1 - b2 ^ t) + eps
      w[i] = w[i] - lr / (1 - b1 ^ t) * m[i] / denom
    end
  end
  return w
end

-- gives w the gradient grads[t] before the t-th step
local function run(opt, w, grads)
  for _, g in ipairs(grads) do
    w.grad = ember.tensor(g, { dtype = w.dtype })
    opt:step()
  end
  return w
end

-- steps of opt, each giving w the gradient g; w after each step is the
-- next of after (worked out by hand)
local function trajectory(opt, w, g, after, tol)
  for _, want in ipairs(after) do
    run(opt, w, { g })
    H.same(w, want, tol)
  end
end

local GRADS = { { 0.5, -1, 2 }, { -0.3, 0.2, 1.5 }, { 0.8, -0.1, -2 } }
local W0 = { 1, 2, -0.5 }

local function copy(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  return c
end

---------------------------------------------------------------- SGD
describe("ember.optim.SGD", function()
  it("plain: p = p - lr*g (by hand, 3 steps)", function()
    local w = ember.tensor({ 1, 2 })
    local opt = optim.SGD({ w }, { lr = 0.1 })
    -- g = {0.5, -1} each step: w moves by {-0.05, +0.1}
    trajectory(opt, w, { 0.5, -1 }, { { 0.95, 2.1 }, { 0.9, 2.2 }, { 0.85, 2.3 } })
  end)

  it("momentum: b = g first, then b = m*b + g (by hand)", function()
    local w = ember.tensor({ 1, 2 })
    local opt = optim.SGD({ w }, { lr = 0.1, momentum = 0.9 })
    -- b1 = 0.5 -> 0.95; b2 = 0.45 + 0.5 = 0.95 -> 0.855; b3 = 0.855 + 0.5 = 1.355 -> 0.7195
    -- b1 = -1 -> 2.1;   b2 = -1.9 -> 2.29;             b3 = -2.71 -> 2.561
    trajectory(opt, w, { 0.5, -1 }, { { 0.95, 2.1 }, { 0.855, 2.29 }, { 0.7195, 2.561 } })
  end)

  it("dampening scales the new gradient, not the first one (by hand)", function()
    local w = ember.tensor({ 1 })
    local opt = optim.SGD({ w }, { lr = 0.1, momentum = 0.9, dampening = 0.5 })
    -- b1 = 0.5 -> 0.95; b2 = 0.45 + 0.25 = 0.7 -> 0.88; b3 = 0.63 + 0.25 = 0.88 -> 0.792
    trajectory(opt, w, { 0.5 }, { { 0.95 }, { 0.88 }, { 0.792 } })
  end)

  it("nesterov: d = g + m*b (by hand)", function()
    local w = ember.tensor({ 1 })
    local opt = optim.SGD({ w }, { lr = 0.1, momentum = 0.9, nesterov = true })
    -- b1 = 0.5, d = 0.5 + 0.45 = 0.95 -> 0.905; b2 = 0.95, d = 0.5 + 0.855 = 1.355 -> 0.7695
    trajectory(opt, w, { 0.5 }, { { 0.905 }, { 0.7695 } })
  end)

  it("weight decay: d = g + wd*p (by hand)", function()
    local w = ember.tensor({ 1 })
    local opt = optim.SGD({ w }, { lr = 0.1, weight_decay = 0.1 })
    -- d = 0.6 -> 0.94; d = 0.594 -> 0.8806; d = 0.58806 -> 0.821794
    trajectory(opt, w, { 0.5 }, { { 0.94 }, { 0.8806 }, { 0.821794 } })
  end)

  for _, o in ipairs({
    { lr = 0.1 },
    { lr = 0.05, momentum = 0.9 },
    { lr = 0.05, momentum = 0.5, dampening = 0.3, weight_decay = 0.1 },
    { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01 },
    { lr = 0.1, momentum = 0.9, nesterov = true },
    { lr = 0.1, momentum = 0.8, maximize = true },
    { lr = 0.1, weight_decay = 0.2, maximize = true },
  }) do
    it("matches the scalar oracle (" .. H.opts_str(o, ", ") .. ")", function()
      local w = ember.tensor(W0, F64)
      run(optim.SGD({ w }, o), w, GRADS)
      H.same(w, ref_sgd(copy(W0), GRADS, o), 1e-12)
      local w32 = ember.tensor(W0)
      run(optim.SGD({ w32 }, o), w32, GRADS)
      H.same(w32, ref_sgd(copy(W0), GRADS, o), 1e-5)
    end)
  end

  it("updates in place and skips parameters without a gradient", function()
    local a, b = ember.tensor({ 1, 2 }), ember.tensor({ 3 })
    local ptr, v = a:data_ptr(), a:version()
    local opt = optim.SGD({ a, b }, { lr = 1, momentum = 0.9 })
    a.grad = ember.tensor({ 1, 1 })
    opt:step()
    H.same(a, { 0, 1 })
    H.same(b, { 3 })
    assert.are.equal(ptr, a:data_ptr())
    assert.is_true(a:version() > v)
    assert.is_nil(opt.state[b])
    assert.is_not_nil(opt.state[a].momentum_buffer)
    -- the momentum buffer is a copy: the gradient is not aliased
    a.grad:fill_(5)
    H.same(opt.state[a].momentum_buffer, { 1, 1 })
  end)

  it("flushes a decaying momentum buffer to 0 below the smallest normal float", function()
    -- b = 1e-37, then b = 0.9 b under zero gradients: 0.9^20 b = 1.2158e-38 is
    -- still normal (FLT_MIN = 1.1755e-38), 0.9^21 b = 1.094e-38 is not: 0, not
    -- a subnormal that would slow every later step
    local w = ember.tensor({ 1 })
    local opt = optim.SGD({ w }, { lr = 0.1, momentum = 0.9 })
    run(opt, w, { { 1e-37 } })
    for _ = 1, 20 do run(opt, w, { { 0 } }) end
    local b = opt.state[w].momentum_buffer:item()
    assert.is_true(b > 1.1754944e-38 and math.abs(b / (1e-37 * 0.9 ^ 20) - 1) < 1e-5, tostring(b))
    run(opt, w, { { 0 } })
    assert.are.equal(0, opt.state[w].momentum_buffer:item())
  end)

  it("does not record the update while a GradManager records", function()
    local w = ember.tensor({ 1, 2 })
    local gm = ember.autodiff.GradManager():attach({ w })
    local opt = optim.SGD({ w }, { lr = 0.1, momentum = 0.9, weight_decay = 0.1 })
    w.grad = ember.tensor({ 1, 1 })
    opt:step()
    gm:record()
    local loss = w:sum()
    local nodes = ember.autodiff.stats().live_nodes
    opt:step()
    assert.are.equal(nodes, ember.autodiff.stats().live_nodes)
    assert.is_true(ember.is_grad_enabled())
    opt:zero_grad()
    gm:backward(loss)
    H.same(w.grad, { 1, 1 })
  end)

  it("trains a linear model with a GradManager (loss falls)", function()
    ember.manual_seed(3)
    local x = ember.randn({ 64, 3 })
    local y = x:matmul(ember.tensor({ { 1 }, { -2 }, { 0.5 } })) + 0.3
    local w, b = ember.zeros({ 3, 1 }), ember.zeros({ 1 })
    local gm = ember.autodiff.GradManager():attach({ w, b })
    local opt = optim.SGD({ w, b }, { lr = 0.1, momentum = 0.9 })
    local first, last
    for i = 1, 200 do
      gm:record()
      local d = x:matmul(w) + b - y
      local loss = (d * d):mean()
      gm:backward(loss)
      opt:step()
      opt:zero_grad()
      if i == 1 then first = loss:item() end
      last = loss:item()
    end
    assert.is_true(last < first * 1e-3)
    H.same(w, { { 1 }, { -2 }, { 0.5 } }, 1e-2)
  end)

  it("zero_grad sets .grad to nil, or zeroes it in place", function()
    local w = ember.tensor({ 1, 2 })
    local opt = optim.SGD({ w }, { lr = 0.1 })
    local g = ember.tensor({ 3, 4 })
    w.grad = g
    opt:zero_grad(false)
    assert.are.equal(g, w.grad)
    H.same(g, { 0, 0 })
    opt:zero_grad()
    assert.is_nil(w.grad)
  end)

  it("takes parameter groups with their own options", function()
    local a, b = ember.tensor({ 1 }), ember.tensor({ 1 })
    local opt = optim.SGD({ { params = { a } }, { params = { b }, lr = 0.5 } }, { lr = 0.1 })
    assert.are.equal(2, #opt.param_groups)
    assert.are.equal(0.1, opt.param_groups[1].lr)
    assert.are.equal(0.5, opt.param_groups[2].lr)
    a.grad, b.grad = ember.tensor({ 1 }), ember.tensor({ 1 })
    opt:step()
    H.same(a, { 0.9 })
    H.same(b, { 0.5 })
    -- a scheduler-style change of lr is used by the next step
    opt.param_groups[1].lr = 0.2
    opt:step()
    H.same(a, { 0.7 })
    local c = ember.tensor({ 2 })
    opt:add_param_group({ params = { c }, momentum = 0.5 })
    assert.are.equal(0.1, opt.param_groups[3].lr)
    assert.are.equal(0.5, opt.param_groups[3].momentum)
  end)

  it("calls a closure with gradients enabled and returns its result", function()
    local w = ember.tensor({ 1 })
    local opt = optim.SGD({ w }, { lr = 0.1 })
    local loss = opt:step(function()
      assert.is_true(ember.is_grad_enabled())
      w.grad = ember.tensor({ 2 })
      return 42
    end)
    assert.are.equal(42, loss)
    H.same(w, { 0.8 })
  end)
end)

---------------------------------------------------------------- Adam, AdamW
describe("ember.optim.Adam", function()
  it("moves each weight by lr*sign(g) under a constant gradient (by hand)", function()
    -- m_t/(1-b1^t) = g and v_t/(1-b2^t) = g^2 exactly, so each step is
    -- lr * g / (|g| + eps), i.e. lr * sign(g) up to eps
    local w = ember.tensor({ 1, 2 }, F64)
    local opt = optim.Adam({ w }, { lr = 0.1 })
    trajectory(opt, w, { 0.5, -1 }, { { 0.9, 2.1 }, { 0.8, 2.2 }, { 0.7, 2.3 } }, 1e-7)
    assert.are.equal(3, opt.state[w].step)
  end)

  it("keeps PyTorch's defaults", function()
    local opt = optim.Adam({ ember.zeros({ 1 }) })
    local g = opt.param_groups[1]
    assert.are.equal(1e-3, g.lr)
    assert.are.same({ 0.9, 0.999 }, g.betas)
    assert.are.equal(1e-8, g.eps)
    assert.are.equal(0, g.weight_decay)
    assert.is_false(g.amsgrad)
    assert.are.equal(1e-2, optim.AdamW({ ember.zeros({ 1 }) }).param_groups[1].weight_decay)
  end)

  it("second step by hand", function()
    -- w = 1, g1 = 1, g2 = 0.5, lr = 0.1, betas (0.9, 0.999), eps 1e-8
    -- step 1: w = 0.9 (up to eps)
    -- step 2: m = 0.09 + 0.05 = 0.14, mhat = 0.14/0.19; v = 0.000999 + 0.00025 = 0.001249,
    --         vhat = 0.001249/0.001999; w = 0.9 - 0.1 * 0.7368421 / 0.7904550 = 0.80678204
    local w = ember.tensor({ 1 }, F64)
    run(optim.Adam({ w }, { lr = 0.1 }), w, { { 1 }, { 0.5 } })
    local w1 = 1 - 0.1 / (1 + 1e-8)
    local expect = w1 - 0.1 * (0.14 / 0.19) / (math.sqrt(0.001249 / 0.001999) + 1e-8)
    H.same(w, { expect }, 1e-12)
    H.same(w, { 0.80678204 }, 1e-7)
  end)

  for _, o in ipairs({
    { lr = 0.1 },
    { lr = 0.05, betas = { 0.8, 0.99 }, eps = 1e-3 },
    { lr = 0.1, weight_decay = 0.1 },
    { lr = 0.1, amsgrad = true },
    { lr = 0.01, amsgrad = true, weight_decay = 0.05, betas = { 0.5, 0.9 } },
    { lr = 0.1, maximize = true },
  }) do
    it("matches the scalar oracle (" .. H.opts_str(o, ", ") .. ")", function()
      local w = ember.tensor(W0, F64)
      run(optim.Adam({ w }, o), w, GRADS)
      H.same(w, ref_adam(copy(W0), GRADS, o, false), 1e-12)
      local w32 = ember.tensor(W0)
      run(optim.Adam({ w32 }, o), w32, GRADS)
      H.same(w32, ref_adam(copy(W0), GRADS, o, false), 1e-5)
    end)
  end

  it("amsgrad uses the running maximum of v (differs from plain Adam)", function()
    -- a large gradient then small ones with b2 = 0.5: v falls (0.5, 0.25005, 0.125075, ...),
    -- max(v) stays at 0.5
    local grads = { { 1 }, { 0.01 }, { 0.01 }, { 0.01 } }
    local o = { lr = 0.1, amsgrad = true, betas = { 0.9, 0.5 } }
    local a, b = ember.tensor({ 0 }, F64), ember.tensor({ 0 }, F64)
    local oa = optim.Adam({ a }, o)
    run(oa, a, grads)
    run(optim.Adam({ b }, { lr = 0.1, betas = { 0.9, 0.5 } }), b, grads)
    H.same(a, ref_adam({ 0 }, grads, o), 1e-12)
    H.same(b, ref_adam({ 0 }, grads, { lr = 0.1, betas = { 0.9, 0.5 } }), 1e-12)
    assert.is_true(math.abs(a:item() - b:item()) > 1e-2)
    H.same(oa.state[a].max_exp_avg_sq, { 0.5 }, 1e-12)
    H.same(oa.state[a].exp_avg_sq, { 0.0625 + (0.125 + 0.25 + 0.5) * 1e-4 }, 1e-12)
  end)

  it("updates in place, skips parameters without a gradient, keeps state tensors", function()
    local a, b = ember.tensor({ 1, 2 }), ember.tensor({ 3 })
    local ptr = a:data_ptr()
    local opt = optim.Adam({ a, b }, { lr = 0.1 })
    a.grad = ember.tensor({ 1, -1 })
    opt:step()
    local m = opt.state[a].exp_avg
    opt:step()
    assert.are.equal(m, opt.state[a].exp_avg)   -- the same tensor, updated in place
    assert.are.equal(ptr, a:data_ptr())
    H.same(b, { 3 })
    assert.is_nil(opt.state[b])
  end)
  it("flushes decaying moments to 0 below the smallest normal float", function()
    -- m = 0.1 g = 1e-37 after the first step, then m = 0.9 m: as for SGD,
    -- normal after 20 zero-gradient steps, 0 after 21; v = 0.001 g^2 is 0 at once
    local w = ember.tensor({ 1 })
    local opt = optim.Adam({ w }, { lr = 0.1 })
    run(opt, w, { { 1e-36 } })
    for _ = 1, 20 do run(opt, w, { { 0 } }) end
    local m = opt.state[w].exp_avg:item()
    assert.is_true(m > 1.1754944e-38 and math.abs(m / (1e-37 * 0.9 ^ 20) - 1) < 1e-5, tostring(m))
    assert.are.equal(0, opt.state[w].exp_avg_sq:item())
    run(opt, w, { { 0 } })
    assert.are.equal(0, opt.state[w].exp_avg:item())
  end)
end)

describe("ember.optim.AdamW", function()
  it("decays the weights by p*(1 - lr*wd) before the Adam step (by hand)", function()
    -- w = 1, g = 0.5 constant, lr = 0.1, wd = 0.1: each step w = w*0.99 - 0.1
    -- 0.89, 0.7811, 0.673289
    local w = ember.tensor({ 1 }, F64)
    local opt = optim.AdamW({ w }, { lr = 0.1, weight_decay = 0.1 })
    trajectory(opt, w, { 0.5 }, { { 0.89 }, { 0.7811 }, { 0.673289 } }, 1e-7)
  end)

  for _, o in ipairs({
    { lr = 0.1 },
    { lr = 0.1, weight_decay = 0.3, betas = { 0.8, 0.9 } },
    { lr = 0.05, weight_decay = 0.1, amsgrad = true },
  }) do
    it("matches the scalar oracle (" .. H.opts_str(o, ", ") .. ")", function()
      local w = ember.tensor(W0, F64)
      run(optim.AdamW({ w }, o), w, GRADS)
      H.same(w, ref_adam(copy(W0), GRADS, o, true), 1e-12)
    end)
  end

  it("does not decay parameters without a gradient", function()
    local w = ember.tensor({ 1 })
    local opt = optim.AdamW({ w }, { lr = 0.1, weight_decay = 0.5 })
    opt:step()
    H.same(w, { 1 })
  end)
end)

---------------------------------------------------------------- clip_grad_norm
describe("ember.optim.clip_grad_norm", function()
  it("scales the gradients by max_norm/(total + 1e-6) and returns the total", function()
    local a, b = ember.tensor({ 0, 0 }), ember.tensor({ 0 })
    a.grad, b.grad = ember.tensor({ 3, 4 }), ember.tensor({ 12 })
    local ga = a.grad
    local total = optim.clip_grad_norm({ a, b }, 6.5)   -- sqrt(9 + 16 + 144) = 13
    assert.are.equal("number", type(total))
    assert.is_true(math.abs(total - 13) < 1e-5)
    local c = 6.5 / (13 + 1e-6)
    H.same(a.grad, { 3 * c, 4 * c })
    H.same(b.grad, { 12 * c })
    assert.are.equal(ga, a.grad)   -- in place
  end)

  it("leaves small gradients alone", function()
    local a = ember.tensor({ 0, 0 })
    a.grad = ember.tensor({ 3, 4 })
    assert.is_true(math.abs(optim.clip_grad_norm(a, 10) - 5) < 1e-6)
    H.same(a.grad, { 3, 4 })
  end)

  it("takes other norm types and skips parameters without a gradient", function()
    local a, b, c = ember.tensor({ 0, 0 }), ember.tensor({ 0 }), ember.tensor({ 0 })
    a.grad, b.grad = ember.tensor({ 3, -4 }), ember.tensor({ 12 })
    assert.is_true(math.abs(optim.clip_grad_norm({ a, b, c }, 100, 1) - 19) < 1e-5)
    assert.is_true(math.abs(optim.clip_grad_norm({ a, b, c }, 100, math.huge) - 12) < 1e-6)
    assert.is_true(math.abs(optim.clip_grad_norm({ a, b, c }, 6, "inf") - 12) < 1e-6)
    H.same(a.grad, { 3 * 6 / (12 + 1e-6), -4 * 6 / (12 + 1e-6) })
    assert.are.equal(0, optim.clip_grad_norm({ c }, 1))
  end)

  it("rejects bad arguments", function()
    local a = ember.tensor({ 0 })
    assert.has_error(function() optim.clip_grad_norm({ a }, -1) end,
      "ember.optim.clip_grad_norm: max_norm must be a non-negative number, got -1")
    assert.has_error(function() optim.clip_grad_norm({ a }, 1, 0) end,
      "ember.optim.clip_grad_norm: norm_type must be a positive number or math.huge, got 0")
    assert.has_error(function() optim.clip_grad_norm({ 1 }, 1) end,
      "ember.optim.clip_grad_norm: params[1] must be a tensor, got 1")
    assert.has_error(function() optim.clip_grad_norm("w", 1) end,
      'ember.optim.clip_grad_norm: params must be a tensor or a list of tensors, got "w"')
  end)

  it("clip_grad_value clamps in place", function()
    local a = ember.tensor({ 0, 0, 0 })
    a.grad = ember.tensor({ -3, 0.5, 2 })
    optim.clip_grad_value({ a }, 1)
    H.same(a.grad, { -1, 0.5, 1 })
  end)
end)

---------------------------------------------------------------- lr schedulers
describe("ember.optim.lr_scheduler", function()
  local function sgd(lr) return optim.SGD({ ember.zeros({ 1 }) }, { lr = lr }) end

  it("ember.optim.lr_scheduler.StepLR: lr = base * gamma^floor(epoch/step_size)", function()
    local opt = sgd(1)
    local s = optim.lr_scheduler.StepLR(opt, { step_size = 2, gamma = 0.5 })
    assert.are.same({ 1 }, s:get_last_lr())
    local seen = {}
    for i = 1, 5 do
      s:step()
      seen[i] = s:get_last_lr()[1]
      assert.are.equal(seen[i], opt.param_groups[1].lr)
    end
    assert.are.same({ 1, 0.5, 0.5, 0.25, 0.25 }, seen)
  end)

  it("StepLR defaults gamma to 0.1 and handles several groups", function()
    local a, b = ember.zeros({ 1 }), ember.zeros({ 1 })
    local opt = optim.SGD({ { params = { a }, lr = 1 }, { params = { b }, lr = 0.5 } })
    local s = optim.lr_scheduler.StepLR(opt, { step_size = 1 })
    s:step()
    local lrs = s:get_last_lr()
    assert.is_true(math.abs(lrs[1] - 0.1) < 1e-15 and math.abs(lrs[2] - 0.05) < 1e-15)
  end)

  it("ember.optim.lr_scheduler.CosineAnnealingLR: eta_min + (base - eta_min)(1 + cos(pi t/T_max))/2", function()
    local opt = sgd(1)
    local s = optim.lr_scheduler.CosineAnnealingLR(opt, { T_max = 4, eta_min = 0.1 })
    -- t = 0..5: 1, 0.1 + 0.9*0.8535534, 0.55, 0.1 + 0.9*0.1464466, 0.1, back up
    local expect = { 1, 0.86819805, 0.55, 0.23180195, 0.1, 0.23180195 }
    assert.is_true(math.abs(s:get_last_lr()[1] - expect[1]) < 1e-8)
    for t = 1, 5 do
      s:step()
      assert.is_true(math.abs(opt.param_groups[1].lr - expect[t + 1]) < 1e-8,
        ("t=%d: %.9g"):format(t, opt.param_groups[1].lr))
    end
  end)

  it("CosineAnnealingLR defaults eta_min to 0 and drives the optimizer", function()
    local w = ember.tensor({ 0 })
    local opt = optim.SGD({ w }, { lr = 1 })
    local s = optim.lr_scheduler.CosineAnnealingLR(opt, { T_max = 2 })
    w.grad = ember.tensor({ 1 })
    opt:step()                 -- lr 1
    s:step()
    opt:step()                 -- lr 0.5
    s:step()
    opt:step()                 -- lr 0
    H.same(w, { -1.5 })
  end)

  it("state_dict round trip continues identically", function()
    local opt1 = sgd(1)
    local s1 = optim.lr_scheduler.CosineAnnealingLR(opt1, { T_max = 10, eta_min = 0.01 })
    for _ = 1, 3 do s1:step() end
    local opt2 = sgd(1)
    local s2 = optim.lr_scheduler.CosineAnnealingLR(opt2, { T_max = 5 })
    s2:load_state_dict(s1:state_dict())
    assert.are.same(s1:get_last_lr(), s2:get_last_lr())
    for _ = 1, 4 do
      s1:step(); s2:step()
      assert.are.equal(opt1.param_groups[1].lr, opt2.param_groups[1].lr)
    end
    local st = optim.lr_scheduler.StepLR(sgd(1), { step_size = 3, gamma = 0.5 })
    st:step()
    local st2 = optim.lr_scheduler.StepLR(sgd(1), { step_size = 1 })
    st2:load_state_dict(st:state_dict())
    assert.are.equal(3, st2.step_size)
    st:step(); st:step(); st2:step(); st2:step()
    assert.are.same(st:get_last_lr(), st2:get_last_lr())
    assert.are.same({ 0.5 }, st2:get_last_lr())
  end)

  it("rejects bad arguments", function()
    local opt = sgd(1)
    assert.has_error(function() optim.lr_scheduler.StepLR(opt, {}) end,
      "ember.optim.lr_scheduler.StepLR: step_size must be a positive integer, got nil")
    assert.has_error(function() optim.lr_scheduler.StepLR(opt, { step_size = 0 }) end,
      "ember.optim.lr_scheduler.StepLR: step_size must be a positive integer, got 0")
    assert.has_error(function() optim.lr_scheduler.StepLR(opt, { step_size = 1, gama = 1 }) end,
      "ember.optim.lr_scheduler.StepLR: unknown option 'gama'")
    assert.has_error(function() optim.lr_scheduler.StepLR({}, { step_size = 1 }) end,
      "ember.optim.lr_scheduler.StepLR: expected an optimizer, got a table")
    assert.has_error(function() optim.lr_scheduler.CosineAnnealingLR(opt, { eta_min = 0 }) end,
      "ember.optim.lr_scheduler.CosineAnnealingLR: T_max must be a positive integer, got nil")
    assert.has_error(function() optim.lr_scheduler.CosineAnnealingLR(opt, { T_max = 2, eta_min = "0" }) end,
      'ember.optim.lr_scheduler.CosineAnnealingLR: eta_min must be a finite number, got "0"')
  end)
end)

---------------------------------------------------------------- state_dict
describe("optimizer state_dict", function()
  -- runs opt1 for 2 steps, loads its state into a fresh optimizer on a copy of
  -- the weights, then steps both 2 more times with the same gradients
  local function round_trip(make, opts, fresh_opts)
    local w1 = ember.tensor(W0, F64)
    local o1 = make({ w1 }, opts)
    run(o1, w1, { GRADS[1], GRADS[2] })
    local sd = o1:state_dict()
    local w2 = w1:clone()
    local o2 = make({ w2 }, fresh_opts or {})
    o2:load_state_dict(sd)
    for k, v in pairs(o1.param_groups[1]) do
      if k ~= "params" then assert.are.same(v, o2.param_groups[1][k]) end
    end
    run(o1, w1, { GRADS[3], GRADS[1] })
    run(o2, w2, { GRADS[3], GRADS[1] })
    H.same(w2, w1:tolist(), 0)
    return o1, o2, sd, w1, w2
  end

  it("SGD with momentum: a loaded optimizer continues identically", function()
    local o1, o2, sd, w1, w2 = round_trip(optim.SGD, { lr = 0.1, momentum = 0.9, weight_decay = 0.01 },
      { lr = 0.5 })
    assert.are.equal(0.1, o2.param_groups[1].lr)
    assert.are.same({ 1 }, sd.param_groups[1].params)
    assert.is_true(ember.is_tensor(sd.state[1].momentum_buffer))
    -- the state tensors are copies, both ways
    assert.is_false(rawequal(sd.state[1].momentum_buffer, o1.state[w1].momentum_buffer))
    assert.is_false(rawequal(sd.state[1].momentum_buffer, o2.state[w2].momentum_buffer))
    local before = sd.state[1].momentum_buffer:tolist()
    run(o1, w1, { GRADS[2] })
    H.same(sd.state[1].momentum_buffer, before, 0)
  end)

  it("Adam with amsgrad: step count and moments survive the round trip", function()
    local _, o2, sd, _, w2 = round_trip(optim.Adam, { lr = 0.05, amsgrad = true, betas = { 0.8, 0.99 } })
    assert.are.equal(2, sd.state[1].step)
    assert.are.equal(4, o2.state[w2].step)
    assert.are.same({ 0.8, 0.99 }, o2.param_groups[1].betas)
  end)

  it("ember.optim.AdamW: round trip", function()
    round_trip(optim.AdamW, { lr = 0.05, weight_decay = 0.2 })
  end)

  it("matches parameters by position across groups; missing state stays missing", function()
    local a, b, c = ember.tensor({ 1 }), ember.tensor({ 2, 3 }), ember.tensor({ 4 })
    local o1 = optim.Adam({ { params = { a, b } }, { params = { c }, lr = 0.5 } })
    b.grad, c.grad = ember.tensor({ 1, 1 }), ember.tensor({ 1 })
    o1:step()
    local sd = o1:state_dict()
    assert.are.same({ 1, 2 }, sd.param_groups[1].params)
    assert.are.same({ 3 }, sd.param_groups[2].params)
    assert.is_nil(sd.state[1])
    assert.are.same({ 2 }, sd.state[2].exp_avg:shape())
    local a2, b2, c2 = ember.tensor({ 1 }), ember.tensor({ 2, 3 }), ember.tensor({ 4 })
    local o2 = optim.Adam({ { params = { a2, b2 } }, { params = { c2 } } })
    o2:load_state_dict(sd)
    assert.are.equal(0.5, o2.param_groups[2].lr)
    assert.is_nil(o2.state[a2])
    H.same(o2.state[b2].exp_avg, sd.state[2].exp_avg:tolist(), 0)
    assert.are.equal(1, o2.state[c2].step)
  end)

  it("gives clear errors for a state that does not fit", function()
    local w1, w2 = ember.tensor({ 1, 2 }), ember.tensor({ 3 })
    local o = optim.SGD({ w1, w2 }, { lr = 0.1, momentum = 0.9 })
    w1.grad, w2.grad = ember.tensor({ 1, 1 }), ember.tensor({ 1 })
    o:step()
    local sd = o:state_dict()
    local one = optim.SGD({ ember.tensor({ 1, 2 }) }, { lr = 0.1 })
    assert.has_error(function() one:load_state_dict(sd) end,
      "ember.optim.SGD: load_state_dict: parameter group 1 has 2 parameter(s) in the state and 1 in the optimizer")
    local swapped = optim.SGD({ ember.tensor({ 3 }), ember.tensor({ 1, 2 }) }, { lr = 0.1 })
    assert.has_error(function() swapped:load_state_dict(sd) end,
      "ember.optim.SGD: load_state_dict: state[1].momentum_buffer has shape {2}, its parameter {1}")
    assert.is_nil(next(swapped.state))   -- nothing changed
    local two = optim.SGD({ { params = { ember.tensor({ 1, 2 }) } }, { params = { ember.tensor({ 3 }) } } })
    assert.has_error(function() two:load_state_dict(sd) end,
      "ember.optim.SGD: load_state_dict: the state has 1 parameter group(s), the optimizer has 2")
    local adam = optim.Adam({ ember.tensor({ 1, 2 }), ember.tensor({ 3 }) })
    assert.has_error(function() adam:load_state_dict(sd) end,
      "ember.optim.Adam: unknown option 'dampening' in param_groups[1] of the loaded state")
    assert.has_error(function() one:load_state_dict(42) end,
      "ember.optim.SGD: load_state_dict: expected a table with state and param_groups, got 42")
  end)
end)

---------------------------------------------------------------- errors
describe("optimizer argument errors", function()
  local w = ember.tensor({ 1 })
  local cases = {
    { function() optim.SGD(5) end, "ember.optim.SGD: params must be a list of tensors or of parameter groups, got 5" },
    { function() optim.SGD("w") end, 'ember.optim.SGD: params must be a list of tensors or of parameter groups, got "w"' },
    { function() optim.SGD({ 1, 2 }) end, "ember.optim.SGD: params[1] must be a tensor, got 1" },
    { function() optim.SGD({ w, "x" }) end, 'ember.optim.SGD: params[2] must be a tensor, got "x"' },
    { function() optim.SGD({}) end, "ember.optim.SGD: got an empty parameter list" },
    { function() optim.SGD({ w, w }) end, "ember.optim.SGD: params[2] appears more than once in the optimizer" },
    { function() optim.SGD({ ember.tensor({ 1 }, { dtype = "int64" }) }) end,
      "ember.optim.SGD: params[1] is a int64 tensor; only floating point tensors can be optimized" },
    { function() optim.SGD({ w }, { lr = -1 }) end, "ember.optim.SGD: lr must be a non-negative number, got -1" },
    { function() optim.SGD({ w }, { lr = "0.1" }) end, 'ember.optim.SGD: lr must be a non-negative number, got "0.1"' },
    { function() optim.SGD({ w }, { lr = 0 / 0 }) end, "ember.optim.SGD: lr must be a non-negative number, got nan" },
    { function() optim.SGD({ w }, { lrr = 0.1 }) end, "ember.optim.SGD: unknown option 'lrr'" },
    { function() optim.SGD({ w }, 0.1) end, "ember.optim.SGD: options must be a table, got 0.1" },
    { function() optim.SGD({ w }, { momentum = -0.5 }) end,
      "ember.optim.SGD: momentum must be a non-negative number, got -0.5" },
    { function() optim.SGD({ w }, { nesterov = 1 }) end, "ember.optim.SGD: nesterov must be a boolean, got 1" },
    { function() optim.SGD({ w }, { nesterov = true }) end,
      "ember.optim.SGD: nesterov momentum requires a momentum > 0 and zero dampening" },
    { function() optim.SGD({ w }, { nesterov = true, momentum = 0.9, dampening = 0.1 }) end,
      "ember.optim.SGD: nesterov momentum requires a momentum > 0 and zero dampening" },
    { function() optim.SGD({ { params = { w } }, { params = { ember.tensor({ 2 }) }, lr = -2 } }) end,
      "ember.optim.SGD: lr must be a non-negative number, got -2 in parameter group 2" },
    { function() optim.SGD({ { params = { w, 3 } } }) end,
      "ember.optim.SGD: param_groups[1].params[2] must be a tensor, got 3" },
    { function() optim.Adam({ w }, { betas = { 0.9 } }) end,
      "ember.optim.Adam: betas must be a list of two numbers in [0, 1), got a table" },
    { function() optim.Adam({ w }, { betas = { 0.9, 1 } }) end,
      "ember.optim.Adam: betas must be a list of two numbers in [0, 1) (betas[2] is 1), got a table" },
    { function() optim.Adam({ w }, { eps = -1e-8 }) end, "ember.optim.Adam: eps must be a non-negative number, got -1e-08" },
    { function() optim.Adam({ w }, { amsgrad = "yes" }) end, 'ember.optim.Adam: amsgrad must be a boolean, got "yes"' },
    { function() optim.Adam({ w }, { momentum = 0.9 }) end, "ember.optim.Adam: unknown option 'momentum'" },
    { function() optim.AdamW({ w }, { weight_decay = -0.01 }) end,
      "ember.optim.AdamW: weight_decay must be a non-negative number, got -0.01" },
    { function() optim.AdamW(nil) end, "ember.optim.AdamW: params must be a list of tensors or of parameter groups, got nil" },
    { function() optim.SGD({ w }):step(5) end, "ember.optim.SGD: step: closure must be a function, got 5" },
  }
  H.error_cases(it, cases)

  it("accepts a single tensor as params, as GradManager:attach does", function()
    local t = ember.tensor({ 1 })
    local opt = optim.SGD(t, { lr = 1 })
    t.grad = ember.tensor({ 1 })
    opt:step()
    H.same(t, { 0 })
  end)
end)

-- The fused C kernels take contiguous float parameters; anything else runs the
-- composed ops. Both paths must give the same numbers.
describe("fused and composed updates", function()
  local function run(make, contiguous)
    ember.manual_seed(21)
    local base = ember.randn({ 3, 4 }, { dtype = "float64" })
    local p = contiguous and base:clone() or base:t():contiguous():t()   -- same values, transposed layout
    assert.are.equal(contiguous, p:is_contiguous())
    local opt = make({ p })
    for step = 1, 3 do
      p.grad = (base * step + 0.5):sin()
      opt:step()
    end
    return p:tolist()
  end
  for _, case in ipairs({
    { "SGD momentum nesterov wd", function(ps) return ember.optim.SGD(ps, { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01 }) end },
    { "SGD dampening", function(ps) return ember.optim.SGD(ps, { lr = 0.1, momentum = 0.5, dampening = 0.3 }) end },
    { "Adam amsgrad wd", function(ps) return ember.optim.Adam(ps, { lr = 0.01, weight_decay = 0.1, amsgrad = true }) end },
    { "AdamW maximize", function(ps) return ember.optim.AdamW(ps, { lr = 0.01, maximize = true }) end },
  }) do
    it("agree for " .. case[1], function()
      H.same(ember.tensor(run(case[2], false), { dtype = "float64" }), run(case[2], true), 1e-12)
    end)
  end

  it("the C kernels reject what they do not take", function()
    local C = ember._C
    local p, g = ember.zeros({ 2 }), ember.zeros({ 3 })
    assert.are.equal(-2, C.ember_sgd_step_(p._c, g._c, nil, 0.1, 0, 0, 0, 0, 0, 0))   -- shapes differ
    assert.are.equal(-6, C.ember_sgd_step_(ember.zeros({ 2 }, { dtype = "int64" })._c, g._c, nil, 0.1, 0, 0, 0, 0, 0, 0))
    assert.are.equal(-1, C.ember_sgd_step_(p._c, p._c, nil, 0.1, 0, 0, 0, 0, 0, 0))   -- aliasing
    assert.are.equal(-1, C.ember_adam_step_(p._c, ember.zeros({ 2 })._c, ember.zeros({ 2 })._c, ember.zeros({ 2 })._c,
      nil, 0.1, 0.9, 0.999, 1e-8, 0, 0, 0, 0))   -- step 0
  end)
end)
