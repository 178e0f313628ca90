-- ember.jit (docs/plans.md): a traced step replayed in C gives the bits the
-- step gives eagerly, for the MLP and CNN recipes' training steps over 20
-- steps, custom Lua rules, hooks that run ops and deterministic mode; what a
-- plan cannot replay raises at trace time naming the op and the line; a
-- call with other shapes raises naming the input; budgeted runs give the
-- same bits.
package.path = "./spec/support/?.lua;" .. package.path
local H = require("helpers")
local ember = H.ember
local Z = require("zoo")
local nn, F, optim = ember.nn, ember.nn.functional, ember.optim
local GradManager = ember.autodiff.GradManager

local P = require("spec.support.plan_check")
local same, make, batches, eager_against_plan = P.same, P.make, P.batches, P.eager_against_plan

-- n batches, and the MLP recipe (or kind's) after one eager step with its
-- step traced on batch 2
local function traced_mlp(n, kind)
  local xs, ys = batches(n)
  local m = make(kind or "mlp")
  m.step(xs[1], ys[1])
  return xs, ys, m, ember.jit.trace(m.step, { xs[2], ys[2] })
end

describe("ember.jit.trace", function()
  it("replays the tiny step ((a*b)+a):sum() with its backward bit for bit, .grad included", function()
    local a, b = ember.randn({ 5, 7 }), ember.randn({ 5, 7 })
    local gm = GradManager():attach({ a })
    local function step(x, y)
      gm:record()
      local l = ((x * y) + x):sum()
      gm:backward(l)
      return l
    end
    local plan = ember.jit.trace(function(y) return step(a, y) end, { b })
    assert.is_true(plan:stats().fused >= 1)   -- a * y + a in one loop
    for _ = 1, 3 do
      local c = ember.randn({ 5, 7 })
      a.grad = nil
      local lp = plan(c)
      local gp = a.grad
      a.grad = nil
      local le = step(a, c)
      assert.is_true(same(lp, le))
      assert.is_true(same(gp, a.grad))
    end
  end)

  it("fuses an elementwise chain with the bits of the ops one by one (NaN, infinities, -0, numbers)", function()
    local function chain(x, y)
      local z = ((x * 2 - y) / y):maximum(x):relu()
      return (z:neg() + 0.5):abs():sqrt(), (x - y):minimum(y * 3)
    end
    local x0, y0 = ember.randn({ 12 }), ember.randn({ 12 })
    local plan = ember.jit.trace(chain, { x0, y0 })
    assert.is_true(plan:stats().fused >= 2)
    local x = ember.tensor({ 0 / 0, 1 / 0, -1 / 0, -0.0, 0, 1e-39, -3, 2.5, 1e30, -1e-30, 7, 0 })
    local y = ember.tensor({ 1, 2, 0 / 0, -0.0, 0, -1e-39, 3, -2.5, 1e-30, 1e30, 0, 1 / 0 })
    local function bits(t)
      local out = {}
      for i, v in ipairs(t:tolist()) do out[i] = v ~= v and "nan" or (v == 0 and 1 / v < 0) and "-0" or v end
      return out
    end
    local p1, p2 = plan(x, y)
    local e1, e2 = chain(x, y)
    assert.are.same(bits(e1), bits(p1))
    assert.are.same(bits(e2), bits(p2))
  end)

  it("replays the MLP recipe's step (SGD with momentum) as eager does over 20 steps", function()
    local plan = eager_against_plan("mlp")
    local s = plan:stats()
    assert.is_true(s.ops > 20)
    assert.is_true(s.peak_bytes > 0)
  end)

  it("holds at most the bytes the eager step holds: its temporaries in one arena planned by lifetime", function()
    for _, kind in ipairs({ "mlp", "cnn" }) do
      local xs, ys, a, plan = traced_mlp(3, kind)
      ember.manual_seed(5)
      local eager = Z.peak_bytes(function() a.step(xs[3], ys[3]) end)
      ember.manual_seed(5)
      local replay = Z.peak_bytes(function() plan(xs[3], ys[3]) end)   -- the first run allocates the arena
      local s = plan:stats()
      assert.is_true(s.arena_bytes > 0, kind)
      assert.is_true(replay <= eager, ("%s: replay %d bytes, eager %d"):format(kind, replay, eager))
      assert.is_true(s.arena_bytes <= replay, ("%s: arena %d bytes, measured %d"):format(kind, s.arena_bytes, replay))
      -- a later run makes its temporaries in the arena: what else it holds is its result and small numbers
      local later = Z.peak_bytes(function() plan(xs[3], ys[3]) end)
      assert.is_true(later < s.arena_bytes / 4, ("%s: %d bytes outside the arena of %d"):format(kind, later,
        s.arena_bytes))
    end
  end)

  it("chooses linear_relu for linear, add, relu, with the bits of the three ops (128x784x256)", function()
    ember.manual_seed(3)
    local x, w, b = ember.randn({ 128, 784 }), ember.randn({ 256, 784 }) * 0.05, ember.randn({ 256 })
    -- the fused op itself computes the chain's bits: the product is linear's, the sum and select per element
    assert.is_true(same(F.linear_relu(x, w, b), F.relu(F.linear(x, w, b))))
    local w2, b2 = ember.randn({ 10, 256 }) * 0.05, ember.randn({ 10 })
    local function fwd(v) return F.linear(F.relu(F.linear(v, w, b)), w2, b2) end
    local plan = ember.jit.trace(fwd, { x })
    local s = plan:stats()
    assert.are.equal(1, s.patterns)
    assert.is_true(s.fused >= 1)
    local x2 = ember.randn({ 128, 784 })
    assert.is_true(same(fwd(x2), plan(x2)))
    -- and in a training step (the backward reads relu's result, which the fused op still makes), as eager
    local function setup()
      ember.manual_seed(4)
      local lin1, lin2 = nn.Linear(784, 256), nn.Linear(256, 10)
      local params = { lin1.weight, lin1.bias, lin2.weight, lin2.bias }
      local function fwd(v) return lin2(F.relu(lin1(v))) end
      return params, Z.train_step(fwd, optim.SGD(params, { lr = 0.05, momentum = 0.9 }), params)
    end
    local pa, stepa = setup()
    local pb, stepb = setup()
    local y = ember.randint(1, 11, { 128 })
    local train
    for i = 1, 5 do
      local v = i % 2 == 0 and x2 or x
      local la = stepa(v, y)
      if i == 1 then stepb(v, y)
      elseif i == 2 then
        train = ember.jit.trace(stepb, { v, y })
        assert.are.equal(1, train:stats().patterns)
      else
        assert.is_true(same(la, train(v, y)), "loss at step " .. i)
      end
      for k = 1, #pa do assert.is_true(same(pa[k], pb[k]), "parameter " .. k .. " at step " .. i) end
    end
  end)

  it("replays the CNN recipe's step (conv, batch norm, dropout, Adam) as eager does over 20 steps", function()
    eager_against_plan("cnn")
  end)

  it("traces a custom Lua rule's backward as the ops it runs, and a hook that runs ops", function()
    local Softplus = ember.autodiff.Function("jit_softplus", function(x)
      local y = (x:exp() + 1):log()
      return y, function(dy) return dy * x:sigmoid() end
    end)
    local w = ember.randn({ 6 })
    local gm = GradManager():attach({ w })
    w:register_hook(function(g) return g * 3 end)
    local function step(x)
      gm:record()
      local l = (Softplus(w * x) * x):sum()
      gm:backward(l)
      return l
    end
    local plan = ember.jit.trace(step, { ember.randn({ 6 }) })
    for _ = 1, 3 do
      local x = ember.randn({ 6 })
      w.grad = nil
      local lp = plan(x)
      local gp = w.grad
      w.grad = nil
      local le = step(x)
      assert.is_true(same(lp, le))
      assert.is_true(same(gp, w.grad))
    end
  end)

  it("replays under set_deterministic as eager does", function()
    local before = ember.is_deterministic()
    ember.set_deterministic(true)
    local ok, err = pcall(eager_against_plan, "mlp")
    ember.set_deterministic(before)
    assert(ok, err)
  end)

  it("traces a module's forward alone (train = false): eval mode, no recording", function()
    local m = make("cnn").model
    local x = ember.randn({ 8, 1, 8, 8 })
    local infer = ember.jit.trace(m, { x }, { train = false })
    assert.is_true(m.training)
    local x2 = ember.randn({ 8, 1, 8, 8 })
    m:eval()
    local want = ember.no_grad(function() return m(x2) end)
    m:train()
    assert.is_true(same(infer(x2), want))
  end)

  it("runs a plan a budget at a time with the same bits (plan:start, run:step, run:result)", function()
    local xs, ys = batches(4)
    local a, b = make("mlp"), make("mlp")
    a.step(xs[1], ys[1])
    b.step(xs[1], ys[1])
    a.step(xs[2], ys[2])
    local plan = ember.jit.trace(b.step, { xs[2], ys[2] })
    local la = a.step(xs[3], ys[3])
    local run = plan:start(xs[3], ys[3])
    local slices = 0
    repeat slices = slices + 1 until run:step(0)
    assert.are.equal(plan:stats().ops, slices)   -- a zero budget runs one op a step
    assert.is_true(same(run:result(), la))
    local pa, pb = a.model:parameters(), b.model:parameters()
    for k = 1, #pa do assert.is_true(same(pa[k], pb[k])) end
    H.raises(function() run:step(0.001) end, "the run has ended")
  end)

  it("raises at trace time for a value read in the step, naming the op and the line", function()
    local a = ember.randn({ 3 })
    local ok, err = pcall(ember.jit.trace, function(x)
      local s = (x * a):sum()
      if s:item() > 0 then return s end   -- a Lua branch on a value
      return -s
    end, { ember.randn({ 3 }) })
    assert.is_false(ok)
    assert.matches("jit_spec.lua:%d+: ember.item: reads a tensor's value inside ember.jit.trace", err)
    -- the trace is closed: another one opens
    local plan = ember.jit.trace(function(x) return x * 2 end, { ember.randn({ 3 }) })
    assert.is_true(same(plan(a), a * 2))
  end)

  it("raises at trace time for a step it cannot replay: an optimizer's first step, another generator", function()
    local m = make("cnn")
    local xs, ys = batches(1)
    H.raises(function() ember.jit.trace(m.step, { xs[1], ys[1] }) end, "Adam's first step cannot be traced")
    local gen = ember.Generator(5)
    H.raises(function()
      ember.jit.trace(function(x) return x + ember.randn({ 2 }, { generator = gen }) end, { ember.randn({ 2 }) })
    end, "generator other than the default one")
    local inner = ember.jit.trace(function(x) return x * 2 end, { ember.randn({ 2 }) })
    H.raises(function() ember.jit.trace(function(x) return inner(x) end, { ember.randn({ 2 }) }) end,
      "a plan cannot run inside ember.jit.trace")
    H.raises(function()
      ember.jit.trace(function(x)
        ember.manual_seed(1)
        return x + ember.randn({ 2 })
      end, { ember.randn({ 2 }) })
    end, "manual_seed cannot be traced")
  end)

  it("replays RMSprop's step with its step count advancing; refuses the optimizers whose update uses it", function()
    local function setup(cls, opts)
      ember.manual_seed(2)
      local w = ember.randn({ 5 })
      local opt = cls({ w }, opts)
      local gm = GradManager():attach({ w })
      local function step(x)
        gm:record()
        local l = (w * x):tanh():sum()
        gm:backward(l)
        opt:step()
        opt:zero_grad()
        return l
      end
      step(ember.ones({ 5 }))
      return w, opt, step
    end
    local xs = {}
    for i = 1, 5 do xs[i] = ember.randn({ 5 }) end
    local wa, oa, sa = setup(optim.RMSprop, { lr = 0.01, centered = true, momentum = 0.5 })
    local wb, ob, sb = setup(optim.RMSprop, { lr = 0.01, centered = true, momentum = 0.5 })
    sa(xs[1])
    local plan = ember.jit.trace(sb, { xs[1] })
    for i = 2, 5 do
      assert.is_true(same(sa(xs[i]), plan(xs[i])))
      assert.is_true(same(wa, wb))
      assert.are.equal(oa.state[wa].step, ob.state[wb].step)
    end
    local _, _, adamax = setup(optim.Adamax, { lr = 0.01 })
    H.raises(function() ember.jit.trace(adamax, { xs[1] }) end, "Adamax's update cannot be traced")
  end)

  it("raises for inputs of another shape or dtype, naming the input, and for a changed learning rate", function()
    local xs, ys, m, plan = traced_mlp(3)
    H.raises(function() plan(ember.randn({ 4, 1, 8, 8 }), ys[3]) end, "input 1 is float32 {4, 1, 8, 8}")
    H.raises(function() plan(xs[3], ys[3]:to("int32")) end, "input 2 is int32")
    H.raises(function() plan(xs[3]) end, "takes 2 inputs, got 1")
    -- a plan that views an input's memory (detach) takes the example's layout only
    local viewing = ember.jit.trace(function(x) return x:detach() * 2 end, { ember.randn({ 3, 3 }) })
    local x = ember.randn({ 3, 3 })
    assert.is_true(same(viewing(x), x * 2))
    H.raises(function() viewing(x:t()) end, "input 1 is laid out in memory (strides {1, 3}, offset 0) unlike")
    m.opt.param_groups[1].lr = 0.05
    H.raises(function() plan(xs[3], ys[3]) end, "the optimizer's lr is 0.05 now")
    m.opt.param_groups[1].lr = 0.1
    assert.is_true(ember.is_tensor(plan(xs[3], ys[3])))
    local a = make("cnn")
    local bx, by = batches(2)
    a.step(bx[1], by[1])
    local adam = ember.jit.trace(a.step, { bx[2], by[2] })
    a.opt.param_groups[1].betas = { 0.9, 0.99 }
    H.raises(function() adam(bx[2], by[2]) end, "the optimizer's betas[2] is 0.99 now")
  end)
end)
