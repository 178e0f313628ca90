-- ember.frame.step (docs/frame_loop.md, "A whole step in slices"): a whole
-- training step resumed a budget at a time leaves the same bits as one call,
-- pauses at the first yield point after its budget, surfaces errors with the
-- step's traceback and leaves the managers usable.
local H = require("helpers")
local ember = H.ember
local GradManager = ember.autodiff.GradManager
local nn, F = ember.nn, ember.nn.functional

-- an MLP with dropout, Adam and a manager, from a fixed seed
local function make()
  ember.manual_seed(3)
  local model = nn.Sequential(nn.Linear(20, 48), nn.ReLU(), nn.Dropout(0.25), nn.Linear(48, 32), nn.Tanh(),
    nn.Linear(32, 5))
  local opt = ember.optim.Adam(model:parameters(), { lr = 1e-2, weight_decay = 1e-3 })
  local gm = GradManager():attach(model:parameters())
  return { model = model, opt = opt, gm = gm }
end

local x = ember.randn({ 24, 20 })
local y = ember.tensor({ 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 4 }, { dtype = "int64" })

local function train_step(s)
  s.gm:record()
  local loss = F.cross_entropy(s.model(x), y)
  s.gm:backward(loss)
  s.opt:step()
  s.opt:zero_grad()
  return loss:item(), "tag"
end

local function bits(s)
  local out = {}
  local ps = s.model:parameters()
  for i, p in ipairs(ps) do out[i] = p:tolist() end
  for _, p in ipairs(ps) do out[#out + 1] = s.opt.state[p].exp_avg:tolist() end
  return out
end

-- resumes run with budget until done; returns the results and the slice count
local function drive(run, budget)
  local n = 0
  while true do
    n = n + 1
    local r = { run:resume(budget) }
    if r[1] then return r, n end
    assert.is_false(run:is_done())
  end
end

describe("ember.frame.step", function()
  it("leaves the same bits as one call, for an MLP step with dropout and Adam, at any budget", function()
    local ref = make()
    local losses = {}
    for i = 1, 4 do losses[i] = train_step(ref) end
    local want = bits(ref)
    for _, budget in ipairs({ 0, 1e-5, 2e-4, 1e-3, math.huge }) do
      local s = make()
      local slices = 0
      for i = 1, 4 do
        local run = ember.frame.step(train_step, s)
        local r, n = drive(run, budget)
        slices = slices + n
        assert.are.equal(losses[i], r[2])
        assert.are.equal("tag", r[3])
        assert.is_true(run:is_done())
        local l, tag = run:results()
        assert.are.equal(losses[i], l)
        assert.are.equal("tag", tag)
      end
      assert.are.same(want, bits(s))
      if budget == 0 then assert.is_true(slices > 4 * 20) end   -- forward, backward and update all in slices
      if budget == math.huge then assert.are.equal(4, slices) end
    end
  end)

  it("pauses at every yield point with a budget of 0, across metamethods and pcall", function()
    local a, b = ember.ones({ 3 }), ember.full({ 3 }, 2)
    local run = ember.frame.step(function()
      local c = a + b                       -- 1 (a metamethod)
      local ok, d = pcall(function() return c * b end)   -- 2 (inside pcall)
      assert(ok)
      local e = d:exp()                     -- 3
      return e:sum():item()                 -- sum is no yield point
    end)
    local r, n = drive(run, 0)
    assert.are.equal(4, n)
    assert.is_true(math.abs(r[2] - 3 * math.exp(6)) < 1e-3 * 3 * math.exp(6))
    assert.are.same({ state = "done", slices = 4, seconds = run:stats().seconds, longest = run:stats().longest },
      run:stats())
  end)

  it("runs on where the step sits under a C function (a sort comparator)", function()
    local v = ember.tensor({ 3, 1, 2 })
    local run = ember.frame.step(function()
      local t = { 3, 1, 2 }
      table.sort(t, function(p, q) return (v * p):sum():item() < (v * q):sum():item() end)
      return t[1], t[3]
    end)
    local r = drive(run, 0)
    assert.are.same({ true, 1, 3 }, r)
  end)

  it("ends a slice at the first yield point after its budget", function()
    -- units of work of a known length: a module whose forward takes 3 ms
    local ends = {}
    local Slow = nn.Module:extend("Slow")
    function Slow:forward(t)
      local t0 = ember.clock()
      while ember.clock() - t0 < 0.003 do end
      ends[#ends + 1] = ember.clock()   -- the yield point reads the clock after this
      return t
    end
    local units = 12
    local mods = {}
    for i = 1, units do mods[i] = Slow() end
    local seq = nn.Sequential(unpack(mods))
    local x0 = ember.zeros({ 1 })
    -- 2 ms: each slice runs exactly one unit (the first point after it is past the budget)
    local run = ember.frame.step(function() return seq(x0) end)
    local _, n = drive(run, 0.002)
    assert.are.equal(units + 1, n)
    -- 7 ms: within a slice every unit but the last ended before the slice's
    -- deadline (a unit that ended after it was followed by a point that paused)
    ends = {}
    run = ember.frame.step(function() return seq(x0) end)
    local slices = 0
    while true do
      local first = #ends + 1
      local done = run:resume(0.007)
      slices = slices + 1
      local deadline = ember._slicer.deadline
      if done then break end
      assert.is_true(#ends >= first, "a slice ran no unit")
      for j = first, #ends - 1 do assert.is_true(ends[j] < deadline, "ran on past a point after the budget") end
    end
    assert.are.equal(units, #ends)
    assert.is_true(slices >= 2 and slices <= units + 1)
  end)

  it("runs gm:backward a budget at a time, as backward_steps does", function()
    local s = make()
    s.gm:record()
    local loss = F.cross_entropy(s.model(x), y)
    local seen_paused = false
    local run = ember.frame.step(function() s.gm:backward(loss) end)
    while not run:resume(0) do
      if s.gm._running then seen_paused = true end
    end
    assert.is_true(seen_paused)   -- paused inside backward
    local want = make()
    want.gm:record()
    want.gm:backward(F.cross_entropy(want.model(x), y))
    for i, p in ipairs(s.model:parameters()) do
      assert.are.same(want.model:parameters()[i].grad:tolist(), p.grad:tolist())
    end
  end)

  it("runs a forward under no_grad in slices, and ops between slices use the model unrecorded", function()
    local s = make()
    s.model:eval()
    local want = ember.no_grad(function() return s.model(x) end):tolist()
    local run = ember.frame.step(function() return ember.no_grad(function() return s.model(x) end) end)
    local r = drive(run, 0)
    assert.are.same(want, r[2]:tolist())
    -- a training step while the frame runs the same model between slices
    s.model:train()
    local ref = make()
    ember.manual_seed(11)
    local want_loss = train_step(ref)
    ember.manual_seed(11)
    run = ember.frame.step(train_step, s)
    local outer = {}
    local done, loss
    repeat
      s.model:train()
      done, loss = run:resume(0)
      if not done then
        s.model:eval()   -- no dropout draws between slices
        outer[#outer + 1] = s.model(x):sum():item()   -- rendering with the model
      end
    until done
    assert.is_true(#outer > 3)
    assert.are.equal(want_loss, loss)
    assert.are.same(bits(ref), bits(s))
  end)

  it("turns grad mode off between slices and leaves it as the step left it", function()
    local inside = {}
    local a = ember.ones({ 2 })
    local run = ember.frame.step(function()
      inside[#inside + 1] = ember.is_grad_enabled()
      local b = a + 1
      inside[#inside + 1] = ember.is_grad_enabled()
      return b
    end)
    assert.is_true(ember.is_grad_enabled())
    assert.is_false(run:resume(0))
    assert.is_false(ember.is_grad_enabled())   -- between slices
    assert.is_true(run:resume(0))
    assert.is_true(ember.is_grad_enabled())
    assert.are.same({ true, true }, inside)
  end)

  it("raises a step's error from resume with the step's traceback and leaves the manager usable", function()
    local s = make()
    local before = {}
    for i, p in ipairs(s.model:parameters()) do before[i] = p:tolist() end
    local function failing_step()
      s.gm:record()
      local h = s.model(x)
      local bad = h:matmul(ember.ones({ 7, 2 }))   -- {24,5} x {7,2}: a shape error
      return bad
    end
    local run = ember.frame.step(failing_step)
    local ok, err
    repeat ok, err = pcall(run.resume, run, 0) until not ok or err == true
    assert.is_false(ok)
    assert.matches("matmul", err)
    assert.matches("ember.frame.step", err, 1, true)
    assert.matches("stack traceback:", err, 1, true)
    assert.matches("frame_step_spec.lua:%d+: in function"  , err)   -- the step's own frames
    assert.are.equal("failed", run:stats().state)
    assert.is_false(s.gm:is_recording())
    assert.is_true(ember.is_grad_enabled())
    assert.has_error(function() run:resume(0) end, "ember.frame.StepRun.resume: the run has ended (failed)")
    -- a failure inside backward: every .grad as it was
    local Boom = ember.autodiff.Function("boom", function(t)
      return t * 1, function() error("boom in backward") end
    end)
    run = ember.frame.step(function()
      s.gm:record()
      s.gm:backward(Boom(s.model(x)):sum())
    end)
    ok, err = pcall(drive, run, 0)
    assert.is_false(ok)
    assert.matches("boom in backward", err)
    for _, p in ipairs(s.model:parameters()) do assert.is_nil(p.grad) end
    -- the manager and the model go on: a whole step gives what one call gives
    run = ember.frame.step(train_step, s)
    ember.manual_seed(11)   -- dropout's draws as the reference's
    local r = drive(run, 1e-4)
    local ref = make()
    ember.manual_seed(11)
    assert.are.equal(train_step(ref), r[2])
    assert.are.same(bits(ref), bits(s))
    for i, p in ipairs(s.model:parameters()) do assert.are_not.same(before[i], p:tolist()) end
  end)

  it("cancels a run mid-forward and mid-backward, leaving grads as they were", function()
    local s = make()
    local run = ember.frame.step(train_step, s)
    assert.is_false(run:resume(0))
    assert.is_true(s.gm:is_recording())
    run:cancel()
    assert.is_false(s.gm:is_recording())
    assert.is_true(ember.is_grad_enabled())
    assert.are.equal("cancelled", run:stats().state)
    run:cancel()   -- again: nothing
    -- mid-backward
    run = ember.frame.step(function()
      s.gm:record()
      s.gm:backward(F.cross_entropy(s.model(x), y))
    end)
    repeat assert.is_false(run:resume(0)) until s.gm._running
    run:cancel()
    for _, p in ipairs(s.model:parameters()) do assert.is_nil(p.grad) end
    assert.is_false(s.gm:is_recording())
    local ref = make()
    ember.manual_seed(11)
    local want = train_step(ref)
    ember.manual_seed(11)   -- dropout's draws as the reference's
    local r = drive(ember.frame.step(train_step, s), 0)
    assert.are.equal(want, r[2])
    assert.are.same(bits(ref), bits(s))
  end)

  it("refuses a second open run, a nested run and a resume inside a step", function()
    local run = ember.frame.step(function() return (ember.ones({ 1 }) + 1):item() end)
    assert.has_error(function() ember.frame.step(function() end) end,
      "ember.frame.step: another step run is open; one run at a time: resume it until it is done, or cancel it, first")
    run:cancel()
    local inner_err
    run = ember.frame.step(function()
      local ok, e = pcall(ember.frame.step, function() end)
      inner_err = e
      local ok2, e2 = pcall(run.resume, run, 0)
      return ok, ok2, e2
    end)
    local r = drive(run, math.huge)
    assert.is_false(r[2])
    assert.matches("called inside a running step", inner_err, 1, true)
    assert.is_false(r[3])
    assert.matches("ember.frame.StepRun.resume: called inside a running step", r[4], 1, true)
  end)

  it("checks its arguments and refuses a step that yields by itself", function()
    assert.has_error(function() ember.frame.step(42) end, "ember.frame.step: expected a function, got number")
    local run = ember.frame.step(function() coroutine.yield(1) end)
    for _, bad in ipairs({ -1, 0 / 0, "1" }) do
      assert.has_error(function() run:resume(bad) end)
    end
    assert.has_error(function() run.resume({}, 1) end, "ember.frame.StepRun.resume: call it as run:resume(...)")
    assert.has_error(function() run:results() end, "ember.frame.StepRun.results: the run is open, not done")
    assert.has_error(function() run:resume(1) end,
      "ember.frame.StepRun.resume: the step yielded by itself (coroutine.yield inside the step); a step may not yield")
    assert.are.equal("failed", run:stats().state)
    -- a step's own coroutines may yield to it
    run = ember.frame.step(function()
      local gen = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(ember.full({ 1 }, i) * 2) end end)
      return gen():item() + gen():item() + gen():item()
    end)
    assert.are.same({ true, 12 }, drive(run, 0))
  end)
end)
