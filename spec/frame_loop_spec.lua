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
    local w, gm = H.recording({ 1, 2, 3 })
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
    local w, gm = H.recording({ 1, 2 })
    local run = gm:backward_steps((w * 3):sum())
    for _, bad in ipairs({ -1, 0 / 0, "1", {} }) do
      local ok, err = pcall(function() run:step(bad) end)
      assert.is_false(ok)
      assert.matches("expected a budget in seconds >= 0", err)
    end
    assert.is_true(run:step(math.huge))
  end)
end)

describe("the memory ceiling", function()
  after_each(function() ember.set_memory_limit(nil) end)

  it("refuses an allocation past it, naming the op, the bytes and the limit", function()
    collectgarbage()
    local base = ember.memory_stats().bytes_in_use
    ember.set_memory_limit(base + 4e6 + 1000)
    assert.are.equal(base + 4e6 + 1000, ember.memory_stats().limit)
    local a = ember.ones({ 1000, 1000 })          -- 4 MB: fits
    local ok, err = pcall(function() return a * 2 end)
    assert.is_false(ok)
    assert.matches("ember%.mul: out of memory: 4000000 bytes would pass the memory limit of " .. (base + 4e6 + 1000), err)
    assert.matches("shape {1000, 1000}", err)
    ok, err = pcall(ember.zeros, { 2000, 2000 })
    assert.is_false(ok)
    assert.matches("ember%.zeros: out of memory: 16000000 bytes", err)   -- the call made, not its inner full
    H.same(a:sum(), 1e6)                          -- a is whole and usable
    a = nil   -- luacheck: ignore
    collectgarbage()
    local b = ember.ones({ 1000, 1000 })          -- dropping a made room at once
    b:mul_(2)
    H.same(b:sum(), 2e6)
    ember.set_memory_limit(nil)
    assert.is_nil(ember.memory_stats().limit)
    local ok2, err2 = pcall(ember.set_memory_limit, -1)
    assert.is_false(ok2)
    assert.matches("set_memory_limit: expected a whole number of bytes >= 0", err2)
  end)

  it("leaves an in-place write and a backward that ran out untouched, and the manager usable", function()
    collectgarbage()
    local x = ember.ones({ 500, 500 })            -- 1 MB
    local gm = GradManager():attach(x)
    gm:record()
    local y = x * 3
    ember.set_memory_limit(ember.memory_stats().bytes_in_use + 1e5)
    local ok, err = pcall(function() y:mul_(x) end)  -- needs a temporary under recording
    assert.is_false(ok)
    assert.matches("out of memory", err)
    ember.set_memory_limit(nil)
    H.same(y:narrow(1, 1, 1):narrow(2, 1, 3), { { 3, 3, 3 } })
    assert.are.equal(0, y:version())
    local loss = (y * y):sum()
    ember.set_memory_limit(ember.memory_stats().bytes_in_use + 1e5)
    ok, err = pcall(function() gm:backward(loss) end)
    assert.is_false(ok)
    assert.matches("out of memory", err)
    assert.is_nil(x.grad)
    ember.set_memory_limit(nil)
    gm:record()
    gm:backward(((x * 3) * (x * 3)):sum())
    H.same(x.grad:narrow(1, 1, 1):narrow(2, 1, 2), { { 18, 18 } })
  end)

  it("fails and recovers 1,000 times without a leak", function()
    collectgarbage()
    local keep = ember.ones({ 256, 256 })
    local _ = keep:narrow(1, 1, 8) * 3   -- the number 3 is cached as a tensor from now on
    ember.set_memory_limit(ember.memory_stats().bytes_in_use + 300000)
    collectgarbage()
    local start = ember.memory_stats()
    for i = 1, 1000 do
      local ok = pcall(function() return keep:matmul(keep) * keep end)   -- the second temporary does not fit
      assert.is_false(ok)
      local small = keep:narrow(1, 1, 8) * 3                               -- a small one does
      assert.are.equal(256 * 3, small:sum():item() / 8)
    end
    collectgarbage()
    local stop = ember.memory_stats()
    assert.are.equal(start.bytes_in_use, stop.bytes_in_use)
    assert.are.equal(start.live_tensors, stop.live_tensors)
  end)
end)

describe("budgeted backward and the flush point", function()
  it("runs before-backward-returns hooks once at completion, with false when cancelled", function()
    local w = ember.tensor({ 1, 2 })
    local gm = GradManager():attach(w)
    local seen = {}
    gm:register_before_backward_returns(function(ok)
      seen[#seen + 1] = { ok, w.grad == nil }   -- before .grad is written
    end)
    gm:record()
    local run = gm:backward_steps((w * w):sum())
    while not run:step(0) do end
    assert.are.same({ { true, true } }, seen)
    H.same(w.grad, { 2, 4 })
    w.grad = nil
    gm:record()
    run = gm:backward_steps((w * 3):sum())
    run:cancel()
    assert.are.same({ { true, true }, { false, true } }, seen)
    assert.is_nil(w.grad)
  end)
end)
