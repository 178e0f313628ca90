-- ember.optim: RMSprop, Adagrad, Adamax, NAdam, LBFGS and the schedulers
-- OneCycleLR, LinearLR, SequentialLR, ReduceLROnPlateau. Trajectories and lr
-- sequences come from PyTorch 1.13 (spec/fixtures/gen_optim.py writes
-- spec/fixtures/optim_torch.json); a few first steps are worked out by hand.
local H = require("helpers")
local fx = H.read_json("spec/fixtures/optim_torch.json")
local ember = H.ember
local optim = ember.optim
local sched = optim.lr_scheduler
local F64 = { dtype = "float64" }

---------------------------------------------------------------- the problems
-- the fixture's problem as ember tensors: its parameters (in the fixture's
-- order, by name) and a function computing the loss from them
local function problem(name, dtype)
  local o = { dtype = dtype }
  if name == "lsq" then
    local X, Y = ember.tensor(fx.lsq.X, o), ember.tensor(fx.lsq.Y, o)
    local W, b = ember.tensor(fx.lsq.W, o), ember.tensor(fx.lsq.b, o)
    return { W, b }, { W = W, b = b }, function()
      local d = X:matmul(W:t()) + b - Y
      return (d * d):mean()
    end
  end
  local x = ember.tensor(fx.rosenbrock.x, o)
  return { x }, { x = x }, function()
    local x1, x2 = x:narrow(1, 1, 1), x:narrow(1, 2, 1)
    return ((1 - x1):pow(2) + (x2 - x1 * x1):pow(2) * 100):sum()
  end
end

local function flat(params)
  local views = {}
  for i, p in ipairs(params) do views[i] = p:reshape({ -1 }) end
  return ember.cat(views, 1)
end

-- a closure in ember's form: zero the gradients, record, backward, return the loss
local function closure_for(opt, gm, loss_fn)
  return function()
    opt:zero_grad()
    gm:record()
    local loss = loss_fn()
    gm:backward(loss)
    return loss
  end
end

-- runs a fixture case; calls check(step, params, loss) after every step
local function run_case(case, dtype, check)
  local params, by_name, loss_fn = problem(case.problem, dtype)
  local arg = params
  if case.groups then
    arg = {}
    for gi, g in ipairs(case.groups) do
      local group = {}
      for k, v in pairs(g) do group[k] = v end
      group.params = {}
      for i, n in ipairs(g.params) do group.params[i] = by_name[n] end
      arg[gi] = group
    end
  end
  local opt = optim[case.optimizer](arg, case.opts)
  local gm = ember.autodiff.GradManager():attach(params)
  local closure = closure_for(opt, gm, loss_fn)
  for step = 1, #case.params do
    local loss
    if case.optimizer == "LBFGS" then
      loss = opt:step(closure)
    else
      loss = closure()
      opt:step()
    end
    check(step, params, loss:item())
  end
  return opt, params
end

local function describe_opts(case)
  return case.problem .. (case.groups and ", 2 groups" or "") .. ", " .. H.opts_str(case.opts, " ")
end

describe("optimizers against PyTorch 1.13 (20 steps, float64)", function()
  for _, case in ipairs(fx.optimizers) do
    it(case.optimizer .. " (" .. describe_opts(case) .. ")", function()
      local opt, params = run_case(case, "float64", function(step, params, loss)
        assert.is_true(math.abs(loss - case.losses[step]) <= 1e-10 * (1 + math.abs(loss)),
          ("step %d: loss %.17g, PyTorch %.17g"):format(step, loss, case.losses[step]))
        H.same(flat(params), case.params[step], 1e-10)
      end)
      if case.optimizer == "LBFGS" then
        local st = opt.state[params[1]]
        assert.are.equal(case.func_evals, st.func_evals)
        assert.are.equal(case.n_iter, st.n_iter)
      end
    end)
  end

  local once = {}
  for _, case in ipairs(fx.optimizers) do
    if not once[case.optimizer] then
      once[case.optimizer] = true
      it(case.optimizer .. " in float32 follows the float64 trajectory", function()
        run_case(case, "float32", function(step, params)
          H.same(flat(params), case.params[step], 1e-4)
        end)
      end)
    end
  end
end)

---------------------------------------------------------------- by hand
-- one step on w with gradient g
local function one_step(make, w0, g, opts)
  local w = ember.tensor(w0, F64)
  local opt = make({ w }, opts)
  w.grad = ember.tensor(g, F64)
  opt:step()
  return w, opt
end

describe("first steps by hand", function()
  it("RMSprop: v = 0.01 g^2, so p moves by lr*g/(0.1|g| + eps) = 10 lr sign(g)", function()
    local w = one_step(optim.RMSprop, { 1, 2 }, { 0.5, -4 }, { lr = 0.01 })
    H.same(w, { 1 - 0.01 * 0.5 / (0.05 + 1e-8), 2 + 0.01 * 4 / (0.4 + 1e-8) }, 1e-14)
    H.same(w, { 0.9, 2.1 }, 1e-7)
  end)

  it("RMSprop centered: avg = sqrt(0.01 g^2 - 0.0001 g^2) = 0.099499 |g|", function()
    local w, opt = one_step(optim.RMSprop, { 1 }, { 2 }, { lr = 0.01, centered = true, momentum = 0.5 })
    local avg = math.sqrt(0.01 * 4 - 0.0001 * 4) + 1e-8
    H.same(w, { 1 - 0.01 * 2 / avg }, 1e-14)
    H.same(opt.state[w].momentum_buffer, { 2 / avg }, 1e-14)
    H.same(opt.state[w].grad_avg, { 0.02 }, 1e-15)
  end)

  it("Adagrad: s = acc + g^2, p = p - lr*g/(sqrt(s) + eps); lr_decay from step 2", function()
    local w, opt = one_step(optim.Adagrad, { 1 }, { 3 },
      { lr = 0.1, initial_accumulator_value = 16, lr_decay = 0.5 })
    H.same(w, { 1 - 0.1 * 3 / (5 + 1e-10) }, 1e-15)            -- sqrt(16 + 9) = 5
    w.grad = ember.tensor({ 0 }, F64) + 12                       -- s = 25 + 144 = 169
    opt:step()
    H.same(w, { 1 - 0.3 / (5 + 1e-10) - 0.1 / 1.5 * 12 / (13 + 1e-10) }, 1e-15)
  end)

  it("Adamax: u = max(0, |g| + eps), p = p - lr/(1-b1) * (1-b1) g / u", function()
    local w = one_step(optim.Adamax, { 1, 1 }, { 0.5, -2 }, { lr = 0.1 })
    H.same(w, { 1 - 0.1 * 0.5 / (0.5 + 1e-8), 1 + 0.1 * 2 / (2 + 1e-8) }, 1e-15)
  end)

  it("NAdam: the first step with mu_1, mu_2 of momentum_decay 4e-3", function()
    local w = one_step(optim.NAdam, { 1 }, { 0.5 }, { lr = 0.1 })
    local mu1 = 0.9 * (1 - 0.5 * 0.96 ^ 0.004)
    local mu2 = 0.9 * (1 - 0.5 * 0.96 ^ 0.008)
    local denom = 0.5 + 1e-8                                     -- sqrt(0.001*0.25/0.001)
    local expect = 1 - 0.1 * (1 - mu1) / (1 - mu1) * 0.5 / denom - 0.1 * mu2 / (1 - mu1 * mu2) * 0.05 / denom
    H.same(w, { expect }, 1e-15)
  end)

  it("LBFGS: the first iteration is steepest descent with t = min(1, 1/|g|_1) * lr", function()
    -- f = (w - 3)^2 / 2 from w = 1: g = -2, t = 0.5, w = 1 + 0.5*2 = 2 after one iteration
    local w = ember.tensor({ 1 }, F64)
    local opt = optim.LBFGS({ w }, { max_iter = 1 })
    local loss = opt:step(function()
      w.grad = w - 3
      return ((w - 3):pow(2) / 2):item()
    end)
    assert.are.equal(2, loss)
    H.same(w, { 2 }, 1e-15)
    -- on a 1-d quadratic the second iteration's secant step lands on the minimum
    opt:step(function()
      w.grad = w - 3
      return ((w - 3):pow(2) / 2):item()
    end)
    H.same(w, { 3 }, 1e-15)
  end)
end)

---------------------------------------------------------------- common behaviour
local MAKERS = {
  { "RMSprop", function(ps)
    return optim.RMSprop(ps, { lr = 0.01, centered = true, momentum = 0.9, weight_decay = 0.1 })
  end },
  { "Adagrad", function(ps)
    return optim.Adagrad(ps, { lr = 0.1, lr_decay = 0.01, initial_accumulator_value = 0.1 })
  end },
  { "Adamax", function(ps) return optim.Adamax(ps, { lr = 0.05, weight_decay = 0.1 }) end },
  { "NAdam", function(ps) return optim.NAdam(ps, { lr = 0.05, weight_decay = 0.1 }) end },
  { "LBFGS", function(ps)
    return optim.LBFGS(ps, { line_search_fn = "strong_wolfe", max_iter = 3, history_size = 3 })
  end },
}

-- a state with every tensor (also in lists) replaced by its values
local function values(v)
  if ember.is_tensor(v) then return v:tolist() end
  if type(v) ~= "table" then return v end
  local c = {}
  for k, x in pairs(v) do c[k] = values(x) end
  return c
end

-- n steps of opt on the least-squares problem's params
local function steps(opt, params, loss_fn, n)
  local gm = ember.autodiff.GradManager():attach(params)
  local closure = closure_for(opt, gm, loss_fn)
  for _ = 1, n do
    if getmetatable(opt) == optim.LBFGS then opt:step(closure) else closure(); opt:step() end
  end
end

describe("the new optimizers", function()
  for _, m in ipairs(MAKERS) do
    local name, make = m[1], m[2]

    it(name .. ": state_dict round trip continues identically", function()
      local p1, _, loss1 = problem("lsq", "float64")
      local o1 = make(p1)
      steps(o1, p1, loss1, 4)
      local sd = o1:state_dict()
      local p2, _, loss2 = problem("lsq", "float64")
      for i, p in ipairs(p2) do p:copy_(p1[i]) end
      local o2 = make(p2)
      o2:load_state_dict(sd)
      local saved = values(sd.state)
      steps(o1, p1, loss1, 4)
      steps(o2, p2, loss2, 4)
      H.same(flat(p2), flat(p1):tolist(), 0)
      assert.are.same(saved, values(sd.state))   -- the saved state is a copy
    end)

    it(name .. ": updates in place, is not recorded, skips a parameter without a gradient", function()
      local params = problem("lsq", "float64")
      local W, b = params[1], params[2]
      local ptr, v, b0 = W:data_ptr(), W:version(), b:tolist()
      local opt = make(params)
      local function closure()   -- gives W a gradient, b none
        return ember.no_grad(function()
          W.grad = W * 0.5 + 1
          return (W * W):sum():item()
        end)
      end
      local gm = ember.autodiff.GradManager():attach({ W })
      gm:record()
      local probe = W:sum()
      local nodes = ember.autodiff.stats().live_nodes
      for _ = 1, 2 do
        if name == "LBFGS" then opt:step(closure) else closure(); opt:step() end
      end
      assert.are.equal(nodes, ember.autodiff.stats().live_nodes)
      assert.are.equal(ptr, W:data_ptr())
      assert.is_true(W:version() > v)
      H.same(b, b0, 0)
      if name ~= "LBFGS" then assert.is_nil(opt.state[b]) end
      opt:zero_grad()
      gm:backward(probe)
      H.same(W.grad, { { 1, 1, 1 }, { 1, 1, 1 } }, 0)
    end)
  end

  for _, m in ipairs(MAKERS) do
    it(m[1] .. ": a non-contiguous parameter moves as a contiguous one does", function()
      local function run(contiguous)
        ember.manual_seed(21)
        local base = ember.randn({ 3, 4 }, F64)
        local p = contiguous and base:clone() or base:t():contiguous():t()
        assert.are.equal(contiguous, p:is_contiguous())
        local opt = m[2]({ p })
        local function closure()   -- f = sum(p^4/4 - p), grad p^3 - 1
          return ember.no_grad(function()
            p.grad = p:pow(3) - 1
            return (p:pow(4) / 4 - p):sum():item()
          end)
        end
        for _ = 1, 3 do
          if m[1] == "LBFGS" then opt:step(closure) else closure(); opt:step() end
        end
        return p
      end
      H.same(run(false), run(true):tolist(), 1e-14)
    end)
  end

  it("keep PyTorch's defaults", function()
    local w = ember.zeros({ 1 })
    local function defaults(cls) return cls({ w }).param_groups[1] end
    local r = defaults(optim.RMSprop)
    assert.are.same({ 1e-2, 0.99, 1e-8, 0, 0, false, false },
      { r.lr, r.alpha, r.eps, r.weight_decay, r.momentum, r.centered, r.maximize })
    local a = defaults(optim.Adagrad)
    assert.are.same({ 1e-2, 0, 0, 0, 1e-10, false },
      { a.lr, a.lr_decay, a.weight_decay, a.initial_accumulator_value, a.eps, a.maximize })
    local x = defaults(optim.Adamax)
    assert.are.same({ 2e-3, { 0.9, 0.999 }, 1e-8, 0, false }, { x.lr, x.betas, x.eps, x.weight_decay, x.maximize })
    local n = defaults(optim.NAdam)
    assert.are.same({ 2e-3, { 0.9, 0.999 }, 1e-8, 0, 4e-3 }, { n.lr, n.betas, n.eps, n.weight_decay, n.momentum_decay })
    local l = defaults(optim.LBFGS)
    assert.are.same({ 1, 20, 25, 1e-7, 1e-9, 100 },
      { l.lr, l.max_iter, l.max_eval, l.tolerance_grad, l.tolerance_change, l.history_size })
    assert.is_nil(l.line_search_fn)
    assert.are.equal(12, optim.LBFGS({ w }, { max_iter = 10 }).param_groups[1].max_eval)
  end)

  it("LBFGS takes a closure that returns a number, and stops at once at a minimum", function()
    local w = ember.tensor({ 3 }, F64)
    local opt = optim.LBFGS({ w })
    local calls = 0
    local loss = opt:step(function()
      calls = calls + 1
      w.grad = w - 3
      return 0
    end)
    assert.are.equal(0, loss)
    assert.are.equal(1, calls)
    assert.are.same({ func_evals = 1, n_iter = 0 }, opt.state[w])
  end)

  it("LBFGS state_dict holds the history as copies", function()
    local params, _, loss_fn = problem("rosenbrock", "float64")
    local opt = optim.LBFGS(params, { line_search_fn = "strong_wolfe", max_iter = 4, history_size = 2 })
    steps(opt, params, loss_fn, 3)
    local sd = opt:state_dict()
    local st = sd.state[1]
    assert.are.equal(2, #st.old_dirs)
    assert.are.equal(2, #st.ro)
    assert.is_false(rawequal(st.old_dirs[1], opt.state[params[1]].old_dirs[1]))
    assert.is_false(rawequal(st.prev_flat_grad, opt.state[params[1]].prev_flat_grad))
    assert.are.same({ 2 }, st.d:shape())
  end)
end)

---------------------------------------------------------------- schedulers
local function optimizer_for(kind, lrs)
  local groups = {}
  for gi, lr in ipairs(lrs) do groups[gi] = { params = { ember.zeros({ 1 }, F64) }, lr = lr } end
  if kind == "SGD" then return optim.SGD(groups, { momentum = 0.9 }) end
  return optim.Adam(groups)
end

local function make_scheduler(case, opt)
  if case.scheduler == "SequentialLR" then
    local subs = {}
    for i, s in ipairs(case.opts.schedulers) do subs[i] = sched[s[1]](opt, s[2]) end
    return sched.SequentialLR(opt, subs, case.opts.milestones)
  end
  return sched[case.scheduler](opt, case.opts)
end

local function momenta(opt)
  local m = {}
  for gi, g in ipairs(opt.param_groups) do m[gi] = g.betas and g.betas[1] or g.momentum end
  return m
end

describe("lr schedulers against PyTorch 1.13", function()
  for ci, case in ipairs(fx.schedulers) do
    it(("%s (case %d, %d steps)"):format(case.scheduler, ci, #case.lrs - 1), function()
      local opt = optimizer_for(case.optimizer, case.group_lrs)
      local s = make_scheduler(case, opt)
      for step = 0, #case.lrs - 1 do
        if step > 0 then
          if case.metrics then s:step(case.metrics[step]) else s:step() end
        end
        local lrs = s:get_last_lr()
        for gi, lr in ipairs(case.lrs[step + 1]) do
          assert.is_true(math.abs(lrs[gi] - lr) <= 1e-12 * math.abs(lr)
            and opt.param_groups[gi].lr == lrs[gi],
            ("step %d group %d: %.17g, PyTorch %.17g"):format(step, gi, lrs[gi], lr))
        end
        if case.momenta then
          H.same(ember.tensor(momenta(opt), F64), case.momenta[step + 1], 1e-12)
        end
      end
    end)
  end
end)

describe("lr schedulers", function()
  it("LinearLR: PyTorch's documented example (0.05, start_factor 0.5, total_iters 4)", function()
    local opt = optim.SGD({ ember.zeros({ 1 }) }, { lr = 0.05 })
    local s = sched.LinearLR(opt, { start_factor = 0.5, total_iters = 4 })
    local seen = { s:get_last_lr()[1] }
    for i = 2, 6 do s:step(); seen[i] = s:get_last_lr()[1] end
    H.same(ember.tensor(seen, F64), { 0.025, 0.03125, 0.0375, 0.04375, 0.05, 0.05 }, 1e-15)
  end)

  it("ReduceLROnPlateau: patience 1 halves the lr after two bad epochs (by hand)", function()
    local opt = optim.SGD({ ember.zeros({ 1 }) }, { lr = 1 })
    local s = sched.ReduceLROnPlateau(opt, { factor = 0.5, patience = 1 })
    local lrs = {}
    for i, metric in ipairs({ 5, 4, 4, 4, 3.9999, 4, 4, 1 }) do
      s:step(ember.tensor({ metric }))
      lrs[i] = opt.param_groups[1].lr
    end
    -- best 5, 4; 4 bad (1), 4 bad (2 > 1: halve); 3.9999 is not below 4*(1 - 1e-4): bad, bad, halve
    assert.are.same({ 1, 1, 1, 0.5, 0.5, 0.25, 0.25, 0.25 }, lrs)
    assert.are.same({ 0.25 }, s:get_last_lr())
  end)

  it("OneCycleLR sets each group's beta1 with Adam, and stops after total_steps", function()
    local opt = optim.Adam({ ember.zeros({ 1 }) }, { lr = 0.1, betas = { 0.9, 0.99 } })
    local s = sched.OneCycleLR(opt, { max_lr = 1, total_steps = 10 })
    assert.are.same({ 0.95, 0.99 }, opt.param_groups[1].betas)
    assert.are.equal(0.04, opt.param_groups[1].initial_lr)
    for _ = 1, 10 do s:step() end
    assert.has_error(function() s:step() end,
      "ember.optim.lr_scheduler.OneCycleLR: step: the schedule ends at total_steps = 10; epoch 11 is past it")
    assert.are.equal(10, s.last_epoch)
  end)

  -- runs a scheduler k steps, saves it, loads into a fresh one on a fresh optimizer,
  -- and checks both give the same lrs for 6 more steps
  local function round_trip(make, metrics)
    local o1, o2 = optimizer_for("SGD", { 1, 0.5 }), optimizer_for("SGD", { 1, 0.5 })
    local s1 = make(o1)
    local function step(s, i)
      if metrics then s:step(metrics[i]) else s:step() end
    end
    for i = 1, 5 do step(s1, i) end
    local s2 = make(o2)
    o2:load_state_dict(o1:state_dict())
    s2:load_state_dict(s1:state_dict())
    assert.are.same(s1:get_last_lr(), s2:get_last_lr())
    for i = 6, 11 do
      step(s1, i); step(s2, i)
      assert.are.same(s1:get_last_lr(), s2:get_last_lr())
      assert.are.same(momenta(o1), momenta(o2))
    end
  end

  it("OneCycleLR: state_dict round trip", function()
    round_trip(function(o)
      return sched.OneCycleLR(o, { max_lr = { 1, 2 }, total_steps = 12, three_phase = true })
    end)
  end)
  it("LinearLR: state_dict round trip", function()
    round_trip(function(o) return sched.LinearLR(o, { total_iters = 8, end_factor = 0.5 }) end)
  end)
  it("SequentialLR: state_dict round trip across the milestone", function()
    round_trip(function(o)
      return sched.SequentialLR(o, { sched.LinearLR(o, { start_factor = 0.1, total_iters = 3 }),
        sched.StepLR(o, { step_size = 2 }) }, { 4 })
    end)
  end)
  it("ReduceLROnPlateau: state_dict round trip keeps the counters", function()
    local metrics = { 3, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1 }
    round_trip(function(o)
      return sched.ReduceLROnPlateau(o, { patience = 1, cooldown = 1, min_lr = { 0.05, 0 } })
    end, metrics)
    local s = sched.ReduceLROnPlateau(optimizer_for("SGD", { 1 }), { patience = 3 })
    s:step(2); s:step(2)
    local sd = s:state_dict()
    assert.are.same({ 2, 1, 0, 2 }, { sd.best, sd.num_bad_epochs, sd.cooldown_counter, sd.last_epoch })
  end)
end)

---------------------------------------------------------------- errors
describe("errors of the new optimizers and schedulers", function()
  local w = ember.tensor({ 1 })
  local function sgd() return optim.SGD({ ember.zeros({ 1 }) }, { lr = 1 }) end
  local cases = {
    { function() optim.RMSprop({ w }, { lr = -1 }) end, "ember.optim.RMSprop: lr must be a non-negative number, got -1" },
    { function() optim.RMSprop({ w }, { alpha = "x" }) end, 'ember.optim.RMSprop: alpha must be a non-negative number, got "x"' },
    { function() optim.RMSprop({ w }, { centered = 1 }) end, "ember.optim.RMSprop: centered must be a boolean, got 1" },
    { function() optim.RMSprop({ w }, { betas = { 0.9, 0.99 } }) end, "ember.optim.RMSprop: unknown option 'betas'" },
    { function() optim.Adagrad({ w }, { lr_decay = -0.1 }) end,
      "ember.optim.Adagrad: lr_decay must be a non-negative number, got -0.1" },
    { function() optim.Adagrad({ w }, { initial_accumulator_value = 0 / 0 }) end,
      "ember.optim.Adagrad: initial_accumulator_value must be a non-negative number, got nan" },
    { function() optim.Adamax({ w }, { betas = { 1, 0.9 } }) end,
      "ember.optim.Adamax: betas must be a list of two numbers in [0, 1) (betas[1] is 1), got a table" },
    { function() optim.NAdam({ w }, { momentum_decay = -1 }) end,
      "ember.optim.NAdam: momentum_decay must be a non-negative number, got -1" },
    { function() optim.NAdam({ w }, { maximize = true }) end, "ember.optim.NAdam: unknown option 'maximize'" },
    { function() optim.NAdam({ { params = { w } }, { params = { ember.zeros({ 1 }) }, eps = -1 } }) end,
      "ember.optim.NAdam: eps must be a non-negative number, got -1 in parameter group 2" },
    { function() optim.LBFGS({ w }, { line_search_fn = "armijo" }) end,
      'ember.optim.LBFGS: line_search_fn must be nil or "strong_wolfe", got "armijo"' },
    { function() optim.LBFGS({ w }, { max_iter = 0 }) end, "ember.optim.LBFGS: max_iter must be a positive integer, got 0" },
    { function() optim.LBFGS({ w }, { history_size = 2.5 }) end,
      "ember.optim.LBFGS: history_size must be a positive integer, got 2.5" },
    { function() optim.LBFGS({ { params = { w } }, { params = { ember.zeros({ 1 }) } } }) end,
      "ember.optim.LBFGS: takes one parameter group (all the parameters form one vector), got a second" },
    { function() optim.LBFGS({ w }):step() end,
      "ember.optim.LBFGS: step: a closure that computes the loss and the gradients is required, got nil" },
    { function() optim.LBFGS({ w }):step(function() return ember.zeros({ 2 }) end) end,
      "ember.optim.LBFGS: step: the closure must return the loss (a number or a one-element tensor), got a tensor of 2 elements" },
    { function() optim.LBFGS({ w }):load_state_dict({ param_groups = {}, state = {} }) end,
      "ember.optim.LBFGS: load_state_dict: the state has 0 parameter group(s), the optimizer has 1" },
    { function()
      local o = optim.LBFGS({ w })
      local sd = o:state_dict()
      sd.state[1] = { func_evals = 1, n_iter = 0, d = ember.zeros({ 3 }) }
      o:load_state_dict(sd)
    end, "ember.optim.LBFGS: load_state_dict: state[1].d must be a tensor of shape {1} (all the parameters' elements), got shape {3}" },
    { function()
      local o = optim.LBFGS({ w })
      o:load_state_dict({ param_groups = o:state_dict().param_groups, state = { { n_iter = 2 } } })
    end, "ember.optim.LBFGS: load_state_dict: state[1].func_evals must be a non-negative integer, got nil" },
    { function()
      local o = optim.LBFGS({ w })
      local sd = o:state_dict()
      sd.state[1] = { func_evals = 3, n_iter = 2, d = ember.zeros({ 1 }), t = 1 }
      o:load_state_dict(sd)
    end, "ember.optim.LBFGS: load_state_dict: state[1] has n_iter = 2 but no H_diag" },
    { function() sched.LinearLR(sgd(), { start_factor = 1.5 }) end,
      "ember.optim.lr_scheduler.LinearLR: start_factor must be a number in [0, 1], got 1.5" },
    { function() sched.LinearLR(sgd(), { total_iters = 0 }) end,
      "ember.optim.lr_scheduler.LinearLR: total_iters must be a positive integer, got 0" },
    { function() sched.OneCycleLR(sgd(), { total_steps = 10 }) end,
      "ember.optim.lr_scheduler.OneCycleLR: max_lr must be a non-negative number or a list of them, one for each parameter group, got nil" },
    { function() sched.OneCycleLR(sgd(), { max_lr = 1 }) end,
      "ember.optim.lr_scheduler.OneCycleLR: give total_steps, or epochs and steps_per_epoch" },
    { function() sched.OneCycleLR(sgd(), { max_lr = { 1, 2 }, total_steps = 5 }) end,
      "ember.optim.lr_scheduler.OneCycleLR: max_lr lists 2 values; the optimizer has 1 parameter group(s)" },
    { function() sched.OneCycleLR(sgd(), { max_lr = 1, total_steps = 5, anneal_strategy = "exp" }) end,
      'ember.optim.lr_scheduler.OneCycleLR: anneal_strategy must be "cos" or "linear", got "exp"' },
    { function() sched.OneCycleLR(sgd(), { max_lr = 1, total_steps = 5, pct_start = 1.2 }) end,
      "ember.optim.lr_scheduler.OneCycleLR: pct_start must be a number in [0, 1], got 1.2" },
    { function() sched.OneCycleLR(optim.Adagrad({ w }), { max_lr = 1, total_steps = 5 }) end,
      "ember.optim.lr_scheduler.OneCycleLR: cycle_momentum needs an optimizer with a momentum or betas option "
        .. "(Adagrad has neither); pass cycle_momentum = false" },
    { function() sched.ReduceLROnPlateau(sgd(), { mode = "minimum" }) end,
      'ember.optim.lr_scheduler.ReduceLROnPlateau: mode must be "min" or "max", got "minimum"' },
    { function() sched.ReduceLROnPlateau(sgd(), { factor = 1 }) end,
      "ember.optim.lr_scheduler.ReduceLROnPlateau: factor must be a number in [0, 1), got 1" },
    { function() sched.ReduceLROnPlateau(sgd(), { min_lr = { 0, 0 } }) end,
      "ember.optim.lr_scheduler.ReduceLROnPlateau: min_lr lists 2 values; the optimizer has 1 parameter group(s)" },
    { function() sched.ReduceLROnPlateau(sgd(), { patience = -1 }) end,
      "ember.optim.lr_scheduler.ReduceLROnPlateau: patience must be a non-negative integer, got -1" },
    { function() sched.ReduceLROnPlateau(sgd(), { verbose = true }) end,
      "ember.optim.lr_scheduler.ReduceLROnPlateau: unknown option 'verbose'" },
    { function() sched.ReduceLROnPlateau(sgd()):step("low") end,
      'ember.optim.lr_scheduler.ReduceLROnPlateau: step: the metric must be a number or a one-element tensor, got "low"' },
    { function() sched.ReduceLROnPlateau(sgd()):load_state_dict({ best = 1 }) end,
      "ember.optim.lr_scheduler.ReduceLROnPlateau: load_state_dict: num_bad_epochs must be a number, got nil" },
    { function()
      local o = sgd()
      sched.SequentialLR(o, { sched.LinearLR(o), sched.LinearLR(o) }, { 2, 3 })
    end, "ember.optim.lr_scheduler.SequentialLR: milestones must list 1 epoch(s), one fewer than the schedulers, got a table" },
    { function()
      local o = sgd()
      sched.SequentialLR(o, { sched.LinearLR(o), sched.LinearLR(sgd()) }, { 2 })
    end, "ember.optim.lr_scheduler.SequentialLR: schedulers[2] belongs to another optimizer" },
    { function()
      local o = sgd()
      sched.SequentialLR(o, { sched.LinearLR(o), sched.ReduceLROnPlateau(o) }, { 2 })
    end, "ember.optim.lr_scheduler.SequentialLR: schedulers[2] is a ReduceLROnPlateau, which steps on a metric" },
    { function()
      local o = sgd()
      sched.SequentialLR(o, { sched.LinearLR(o), sched.LinearLR(o), sched.LinearLR(o) }, { 3, 3 })
    end, "ember.optim.lr_scheduler.SequentialLR: milestones must be increasing positive integers (milestones[2] is 3)" },
    { function() sched.SequentialLR(sgd(), {}, {}) end,
      "ember.optim.lr_scheduler.SequentialLR: schedulers must be a non-empty list of lr schedulers, got a table" },
  }
  H.error_cases(it, cases)

  it("a failed load leaves the optimizer as it was", function()
    local params, _, loss_fn = problem("rosenbrock", "float64")
    local opt = optim.LBFGS(params, { max_iter = 2 })
    steps(opt, params, loss_fn, 2)
    local before = opt:state_dict()
    local bad = opt:state_dict()
    bad.state[1].old_stps[1] = ember.zeros({ 5 }, F64)
    bad.param_groups[1].lr = 0.5
    assert.has_error(function() opt:load_state_dict(bad) end,
      "ember.optim.LBFGS: load_state_dict: state[1].old_stps[1] must be a tensor of shape {2} "
        .. "(all the parameters' elements), got shape {5}")
    assert.are.equal(1, opt.param_groups[1].lr)
    assert.are.equal(before.state[1].n_iter, opt.state[params[1]].n_iter)
    steps(opt, params, loss_fn, 1)
  end)
end)
