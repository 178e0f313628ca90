-- Budgeted backward (API.md, "In a host's frame loop"): gm:backward_steps and
-- run:step(seconds) leave exactly what gm:backward leaves, whatever the budget.
local H = require("helpers")
local ember = H.ember
local GradManager = ember.autodiff.GradManager
local nn, F = ember.nn, ember.nn.functional

-- A small CNN step with a custom rule, a tensor hook, a node hook and a
-- callback; returns the gradients and the order things happened in.
local Square = ember.autodiff.Function("square", function(x)
  return x * x, function(dy) return 2 * x * dy end
end)

local function cnn_step(drive)
  ember.manual_seed(7)
  local conv = nn.Conv2d(1, 3, 3, { padding = 1 })
  local fc = nn.Linear(3 * 4 * 4, 5)
  local x = ember.randn({ 2, 1, 8, 8 })
  local labels = ember.tensor({ 2, 5 }, { dtype = "int64" })
  local log = {}
  local params = {}
  for _, p in ipairs(conv:parameters()) do params[#params + 1] = p end
  for _, p in ipairs(fc:parameters()) do params[#params + 1] = p end
  local gm = GradManager():attach(params, function(t, g) log[#log + 1] = "cb" .. #t:shape(); return g end)
  fc.weight:register_hook(function(g) log[#log + 1] = "hook"; return g * 1 end)
  gm:record()
  local h = F.max_pool2d(Square(conv(x)):relu(), 2)
  h:grad_fn():register_hook(function() log[#log + 1] = "node" end)
  local loss = F.cross_entropy(fc(h:reshape({ 2, 48 })), labels)
  drive(gm, loss)
  local grads = {}
  for i, p in ipairs(params) do grads[i] = p.grad:tolist() end
  return grads, log
end

local function one_shot(gm, loss) gm:backward(loss) end

describe("budgeted backward", function()
  local want, want_log = cnn_step(one_shot)

  for _, budget in ipairs({ 0, 1e-6, 1e-4, 1e-2, math.huge }) do
    it(("gives one-shot backward's gradients and order with a budget of %g s"):format(budget), function()
      local steps = 0
      local grads, log = cnn_step(function(gm, loss)
        local run = gm:backward_steps(loss)
        while not run:step(budget) do steps = steps + 1 end
        assert.is_true(run:is_done())
      end)
      for i = 1, #want do H.same(ember.tensor(grads[i]), want[i], 0) end
      assert.are.same(want_log, log)
      if budget == 0 then assert.is_true(steps >= 5, "a zero budget runs one node a step, ran " .. steps) end
      if budget == math.huge then assert.are.equal(0, steps) end
    end)
  end

  it("cancel leaves every .grad as it was, and the manager usable", function()
    local w = ember.tensor({ 1, 2, 3 })
    w.grad = ember.tensor({ 10, 10, 10 })
    local gm = GradManager():attach(w)
    gm:record()
    local run = gm:backward_steps((w:sin() * w):exp():sum())
    assert.is_false(run:step(0))
    run:cancel()
    run:cancel()   -- twice is fine
    H.same(w.grad, { 10, 10, 10 })
    assert.is_false(gm:is_recording())
    local ok, err = pcall(function() run:step(1) end)
    assert.is_false(ok)
    assert.matches("the run has ended", err)
    gm:record()
    gm:backward((w * 2):sum())
    H.same(w.grad, { 12, 12, 12 })
  end)

  it("refuses record, attach, another backward and in-place writes to what the run needs", function()
    local w = ember.tensor({ 1, 2, 3 })
    local gm = GradManager():attach(w)
    gm:record()
    local y = w * w
    local e = y:exp()                 -- kept by exp (its output) and by the product
    local z = (e * w):sum()
    local run = gm:backward_steps(z)
    for what, f in pairs({
      record = function() gm:record() end,
      attach = function() gm:attach(ember.ones({ 1 })) end,
      backward = function() gm:backward(z) end,
      backward_steps = function() gm:backward_steps(z) end,
    }) do
      local ok, err = pcall(f)
      assert.is_false(ok)
      assert.matches("GradManager%." .. what .. ": not allowed while this manager's backward is running", err)
    end
    y:add_(1)   -- y itself is kept by no node: writing it spoils nothing
    y:sub_(1)
    for _, f in ipairs({ function() w:mul_(2) end, function() w:zero_() end, function() e:add_(1) end,
      function() ember.optim.SGD({ w }, { lr = 0.1 }):step() end }) do
      w.grad = ember.ones({ 3 })
      local ok, err = pcall(f)
      assert.is_false(ok)
      assert.matches("needed by a backward run that has not finished", err)
    end
    w.grad = nil
    H.same(w, { 1, 2, 3 })
    assert.is_true(run:step(math.huge))
    -- d/dw sum(exp(w^2) w) = exp(w^2) (2 w^2 + 1)
    local want = {}
    for i = 1, 3 do want[i] = math.exp(i * i) * (2 * i * i + 1) end
    H.same(w.grad, want, 1e-5)
    w:mul_(2)   -- the run is over: writes are fine again
    H.same(w, { 2, 4, 6 })
  end)

  it("a failing step ends the run and leaves .grad alone", function()
    local w = ember.tensor({ 1, 2 })
    local fail = true
    local gm = GradManager():attach(w, function(_, g) if fail then error("callback failed on purpose") end; return g end)
    gm:record()
    local run = gm:backward_steps((w * 3):sum())
    local ok, err = pcall(function() while not run:step(0) do end end)
    assert.is_false(ok)
    assert.matches("callback failed on purpose", err)
    assert.is_true(run:is_done())
    assert.is_nil(w.grad)
    fail = false
    gm:record()
    gm:backward((w * 3):sum())
    H.same(w.grad, { 3, 3 })
  end)

  it("works for a nested higher-order case", function()
    local function hvp(stepwise)
      local x = ember.tensor({ 0.5, -1.5, 2 }, { dtype = "float64" })
      local outer = GradManager():attach(x)
      local inner = GradManager():attach(x)
      outer:record()
      inner:record()
      local y = (x:sin() * x * x):sum()
      if stepwise then
        local run = inner:backward_steps(y)
        while not run:step(0) do end
      else
        inner:backward(y)
      end
      local g = x.grad
      x.grad = nil
      if stepwise then
        local run = outer:backward_steps((g * ember.tensor({ 1, 2, 3 }, { dtype = "float64" })):sum())
        while not run:step(0) do end
      else
        outer:backward((g * ember.tensor({ 1, 2, 3 }, { dtype = "float64" })):sum())
      end
      return g:tolist(), x.grad:tolist()
    end
    local g1, h1 = hvp(false)
    local g2, h2 = hvp(true)
    assert.are.same(g1, g2)
    assert.are.same(h1, h2)
    -- d2/dx2 (x^2 sin x) = 2 sin x + 4 x cos x - x^2 sin x
    local want = {}
    for i, x in ipairs({ 0.5, -1.5, 2 }) do
      want[i] = i * (2 * math.sin(x) + 4 * x * math.cos(x) - x * x * math.sin(x))
    end
    H.same(ember.tensor(h2, { dtype = "float64" }), want, 1e-12)
  end)

  it("checks its budget argument", function()
    local w = ember.tensor({ 1, 2 })
    local gm = GradManager():attach(w)
    gm:record()
    local run = gm:backward_steps((w * 3):sum())
    for _, bad in ipairs({ -1, 0 / 0, "1", {} }) do
      local ok, err = pcall(function() run:step(bad) end)
      assert.is_false(ok)
      assert.matches("expected a budget in seconds >= 0", err)
    end
    assert.is_true(run:step(math.huge))
  end)
end)
