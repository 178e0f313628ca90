-- Training past memory (API.md, "Training past memory"; docs/dtr.md): with
-- DTR under a budget below the unconstrained peak, 20 steps give parameters
-- bit for bit equal to training without it, for each kind of model and
-- autodiff feature; the budget holds at every allocation; when nothing can
-- be evicted the op raises and DTR stays usable.
local ember = require("ember")
local nn, F = ember.nn, ember.nn.functional
local GradManager = ember.autodiff.GradManager
local graph = ember.autodiff.graph

local STEPS = 20

local function settle()
  collectgarbage(); collectgarbage()
  return ember.memory_stats().bytes_in_use   -- sweeps what the GC collected
end

-- Trains case() for STEPS steps: without DTR when frac is nil; with DTR
-- under no budget that binds when frac is 0 (measuring its floor: the bytes
-- in use after the first step, parameters, gradients, optimizer state and
-- the batch; and its peak P over the later steps); else under
-- floor + frac * (P - floor), frac of the activations' unconstrained peak.
local function train(case, frac, ref)
  settle()
  ember.manual_seed(7)
  local c = case()
  local base = settle()
  ember.reset_peak_memory()
  -- (the unconstrained run's budget is the peak without DTR: its GC runs as often as a constrained run's)
  local budget = frac == 0 and math.floor(base + ref.peak) or frac and math.floor(base + ref.floor + frac * (ref.peak - ref.floor))
  if budget then ember.dtr.enable({ budget = budget, min_size = 0 }) end
  local floor
  local ok, err = pcall(function()
    for i = 1, STEPS do
      c.step(i)
      local now = settle()
      if i == 1 then   -- P: the peak of the steps after the first, which made the optimizer's state
        floor = now - base
        ember.reset_peak_memory()
      end
    end
  end)
  local st = ember.dtr.stats()
  if budget then ember.dtr.disable() end
  assert(ok, err)
  local out = {}
  for i, p in ipairs(c.params) do out[i] = p:clone() end
  return out, st, budget, { floor = floor, peak = ember.memory_stats().peak_bytes - base }
end

-- Trains case without DTR, then with DTR under the tightest of the budgets
-- FRACS (fractions of the activations' unconstrained peak) it trains in:
-- one must, evicting (and, unless no_recompute, recomputing), and the
-- parameters must be those without DTR, bit for bit.
local FRACS = { 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95 }
local function exact(case, no_recompute)
  local ref, _, _, m0 = train(case)
  local _, _, _, m = train(case, 0, m0)
  local got, st, budget, err
  for _, frac in ipairs(FRACS) do
    local ok, e = pcall(function() got, st, budget = train(case, frac, m) end)
    if ok then break end
    got, err = nil, e
    assert(tostring(e):find("would pass the DTR budget", 1, true), e)   -- only running out of budget
  end
  assert(got, "no budget under the peak trained: " .. tostring(err))
  assert.is_true(st.evictions > 0, "nothing was evicted")
  if not no_recompute then assert.is_true(st.recomputes > 0, "nothing was recomputed") end
  assert.is_true(st.peak_bytes <= budget, ("peak %d over the budget %d"):format(st.peak_bytes, budget))
  for i = 1, #ref do
    assert.is_true(ember.equal(ref[i], got[i]), "parameter or buffer " .. i .. " differs")
  end
  return st
end

-- The parameters case trains to without DTR, then case made afresh (seed
-- 7) and the bytes that leave frac of its activations' unconstrained peak.
local function fresh_case(case, frac)
  local ref, _, _, m0 = train(case)
  local _, _, _, m = train(case, 0, m0)
  settle()
  ember.manual_seed(7)
  local c = case()
  local base = settle()
  return ref, c, math.floor(base + m.floor + frac * (m.peak - m.floor))
end

-- STEPS steps of c under the DTR enabled (collecting between them when
-- collect); DTR's stats, after it is disabled
local function run_steps(c, collect)
  local ok, err = pcall(function()
    for i = 1, STEPS do
      c.step(i)
      if collect then settle() end
    end
  end)
  local st = ember.dtr.stats()
  ember.dtr.disable()
  assert(ok, err)
  return st
end

-- a model, an optimizer, a batch and a loss, one step of training
local function stepper(model, opt_fn, x, loss_fn, backward)
  local params = model:parameters()
  local opt = opt_fn(params)
  local gm = GradManager():attach(params)
  local state = {}   -- the parameters and the buffers (batch norm's running statistics)
  for i, p in ipairs(params) do state[i] = p end
  for _, b in ipairs(model:buffers()) do state[#state + 1] = b end
  return { params = state, step = function()
    gm:record()
    local loss = loss_fn(model, x)
    if backward then backward(gm, loss) else gm:backward(loss) end
    opt:step()
    opt:zero_grad()
  end }
end

local function sgd(p) return ember.optim.SGD(p, { lr = 0.05, momentum = 0.9 }) end
local function adam(p) return ember.optim.Adam(p, { lr = 1e-3 }) end

local function mlp()
  local model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.Tanh(), nn.Dropout(0.25),
    nn.Linear(128, 10))
  local x, y = ember.randn({ 512, 32 }), ember.randint(1, 11, { 512 })
  return stepper(model, sgd, x, function(m, v) return F.cross_entropy(m(v), y) end)
end

local function cnn()
  local model = nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(8, 8, 3, 1, 1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 10))
  local x, y = ember.randn({ 64, 1, 16, 16 }), ember.randint(1, 11, { 64 })
  return stepper(model, adam, x, function(m, v) return F.cross_entropy(m(v), y) end)
end

local Residual = nn.Module:extend("DtrResidual")
function Residual:init(d)
  self.norm, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
end
function Residual:forward(x) return x + self.fc2(F.gelu(self.fc1(self.norm(x)))) end

local function residual()
  local model = nn.Sequential(Residual(64), Residual(64), Residual(64), nn.Linear(64, 1))
  local x = ember.randn({ 1024, 64 })
  return stepper(model, adam, x, function(m, v) return (m(v) ^ 2):mean() end)
end

local function transformer()
  local model = nn.TransformerEncoderLayer(32, 4, 64, 0.1, "relu", 1e-5, true)
  local x = ember.randn({ 16, 64, 32 })
  return stepper(model, adam, x, function(m, v) return (m(v) ^ 2):mean() end)
end

local Scale = ember.autodiff.Function{ name = "dtr_scale",
  forward = function(ctx, a, b) ctx:save_for_backward(a, b); return a * b:sigmoid() end,
  backward = function(ctx, dy)
    local a, b = ctx.saved_tensors[1], ctx.saved_tensors[2]
    local s = b:sigmoid()
    return dy * s, dy * a * s * (1 - s)
  end }

-- the Function comes first: its saved tensors are the stalest when memory runs short
local function custom_rule()
  local l1, l2, l3 = nn.Linear(32, 128), nn.Linear(128, 128), nn.Linear(128, 1)
  local model = nn.Sequential(l1, l2, l3)
  local x = ember.randn({ 512, 32 })
  return stepper(model, sgd, x, function(_, v)
    local h = l1(v)
    h = Scale(h, h * 0.5 + 1)
    for _ = 1, 3 do h = l2(h):tanh() end
    return (l3(h) ^ 2):mean()
  end)
end

local function with_hooks(wrap)
  return function()
    local model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))
    local x = ember.randn({ 512, 32 })
    return stepper(model, sgd, x, function(m, v)
      local out
      wrap(function() out = (m(v) ^ 2):mean() end)
      return out
    end)
  end
end
local saved_hooks = with_hooks(function(fn)
  graph.saved_tensors_hooks(function(t) return { t * 1 } end, function(p) return p[1] end, fn)
end)
local on_cpu = with_hooks(function(fn) graph.save_on_cpu(fn) end)

-- a gradient penalty: an inner manager's gradient, differentiated by the outer
local function nested()
  local model = nn.Sequential(nn.Linear(16, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(), nn.Linear(128, 1))
  local params = model:parameters()
  local opt = adam(params)
  local x = ember.randn({ 512, 16 })
  return { params = params, step = function()
    local xi = x:clone()
    local outer, inner = GradManager():attach(params), GradManager():attach(xi)
    outer:record()
    inner:record()
    local y = model(xi):sum()
    inner:backward(y)
    local penalty = (xi.grad ^ 2):mean()
    outer:backward(penalty + y / 64)
    opt:step()
    opt:zero_grad()
  end }
end

local function checkpointed()
  local a = nn.Sequential(nn.Linear(32, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh())
  local b = nn.Linear(128, 1)
  local model = nn.Sequential(a, b)
  local x = ember.randn({ 512, 32 })
  return stepper(model, sgd, x, function(_, v)
    return (b(ember.autodiff.checkpoint(function(t) return a(t) end, v)) ^ 2):mean()
  end)
end


describe("DTR", function()
  after_each(function()
    if ember.dtr.is_enabled() then ember.dtr.disable() end
  end)

  it("trains the MLP recipe's model (with dropout) bit for bit under a budget", function() exact(mlp) end)
  it("trains the CNN recipe's model bit for bit under a budget", function() exact(cnn) end)
  it("trains a residual net bit for bit under a budget", function() exact(residual) end)
  it("trains a transformer block bit for bit under a budget", function() exact(transformer) end)
  it("remakes a custom Lua rule's saved tensors", function() exact(custom_rule) end)
  it("works under saved-tensor hooks", function() exact(saved_hooks) end)
  it("works under save_on_cpu", function() exact(on_cpu) end)
  it("works through nested managers (a gradient penalty)", function() exact(nested) end)
  it("works with checkpoint", function() exact(checkpointed, true) end)

  it("works with set_deterministic", function()
    local was = ember.is_deterministic()
    ember.set_deterministic(true)
    local ok, err = pcall(exact, mlp, 0.6)
    ember.set_deterministic(was)
    assert(ok, err)
  end)

  it("works with a budgeted backward in a frame loop (backward_steps)", function()
    local function case()
      ember.manual_seed(7)
      local m = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.Tanh(), nn.Linear(128, 10))
      local x, y = ember.randn({ 512, 32 }), ember.randint(1, 11, { 512 })
      return stepper(m, sgd, x, function(mm, v) return F.cross_entropy(mm(v), y) end, function(gm, loss)
        local run = gm:backward_steps(loss)
        local n = 0
        while not run:step(0) do n = n + 1 end
        assert.is_true(n > 1, "the run took one step")
      end)
    end
    exact(case)
  end)

  it("raises the out-of-memory error when nothing can be evicted, and stays usable", function()
    local ref, _, _, m0 = train(mlp)
    local _, _, _, m = train(mlp, 0, m0)
    local c = mlp()
    ember.dtr.enable({ budget = settle() + 4096, min_size = 0 })
    local ok, err = pcall(c.step, 1)
    assert.is_false(ok)
    -- the bytes in use split into what the running ops read and what DTR never evicts
    local n, b, u, l, o = tostring(err):match("out of memory: (%d+) bytes would pass the DTR budget of (%d+) bytes "
      .. "%((%d+) in use, nothing left to evict: (%d+) read by the ops running, (%d+) with no recipe or under min_size%)")
    assert(n, tostring(err))
    assert.equal(tonumber(u), tonumber(l) + tonumber(o))
    assert.is_true(tonumber(n) + tonumber(u) > tonumber(b))
    ember.dtr.disable()
    c = nil
    -- the same training again under a budget that fits: the same parameters
    local got, st = train(mlp, 0.7, m)
    assert.is_true(st.evictions > 0)
    for i = 1, #ref do assert.is_true(ember.equal(ref[i], got[i]), "parameter or buffer " .. i .. " differs") end
  end)

  it("has the GC collect dead tensors it cannot evict before they fill the budget", function()
    -- tensors made outside a recording have no recipe: only the GC frees
    -- them once their wrappers die, and a budget under the GC's usual
    -- allowance (24 MiB) fills first unless DTR asks for a collection
    local base = settle()
    ember.dtr.enable({ budget = base + 16 * 2 ^ 20 })
    local ok, err = pcall(function()
      for _ = 1, 100 do local _ = ember.zeros(2 ^ 20) + 1 end   -- 4 MiB each, twice
    end)
    local st = ember.dtr.stats()
    ember.dtr.disable()
    assert(ok, err)
    assert.is_true(st.peak_bytes <= base + 16 * 2 ^ 20)
  end)

  it("trains with no collection between steps, bit for bit", function()
    local ref, c, budget = fresh_case(cnn, 0.9)
    ember.dtr.enable({ budget = budget, min_size = 0 })
    local st = run_steps(c, false)
    assert.is_true(st.evictions > 0)
    assert.is_true(st.peak_bytes <= budget)
    for i = 1, #ref do assert.is_true(ember.equal(ref[i], c.params[i]), "parameter " .. i .. " differs") end
  end)

  it("evicts before set_memory_limit's limit raises", function()
    local ref, c, limit = fresh_case(mlp, 0.7)
    ember.set_memory_limit(limit)
    ember.dtr.enable({ budget = 2 ^ 50, min_size = 0 })   -- never the lower ceiling
    local ok, st = pcall(run_steps, c, true)
    ember.set_memory_limit(nil)
    assert(ok, st)
    assert.is_true(st.evictions > 0)
    assert.is_true(st.peak_bytes <= limit)
    for i = 1, #ref do assert.is_true(ember.equal(ref[i], c.params[i]), "parameter " .. i .. " differs") end
  end)

  it("remakes an evicted tensor the user holds when it is read, and on disable", function()
    ember.manual_seed(3)
    local w, x0 = ember.randn({ 256, 256 }) * 0.05, ember.randn({ 256, 256 })
    local want, h = {}, x0
    for i = 1, 6 do h = h:matmul(w):tanh(); want[i] = h end
    local gm = GradManager():attach(w)
    local act = 256 * 256 * 4
    ember.dtr.enable({ budget = settle() + 6 * act, min_size = 0 })
    gm:record()
    local hs = {}
    h = x0
    for i = 1, 6 do h = h:matmul(w):tanh(); hs[i] = h end
    local st = ember.dtr.stats()
    assert.is_true(st.evictions > 0 and st.evicted > 0)
    for i = 1, 6 do assert.is_true(ember.equal(hs[i], want[i]), "activation " .. i) end   -- each remade as read
    assert.is_true(ember.dtr.stats().recomputes > 0)
    gm:backward(h:sum())
    -- printing reads what is evicted: remade first
    assert.is_true(ember.dtr.stats().evicted > 0)
    for i = 1, 6 do assert.are.equal(tostring(want[i]), tostring(hs[i])) end
    ember.dtr.disable()   -- what the user still holds is remade
    for i = 1, 6 do assert.are.equal(want[i]:sum():item(), hs[i]:sum():item()) end
    -- saving too
    hs, h = {}, nil
    gm = GradManager():attach(w)
    ember.dtr.enable({ budget = settle() + 6 * act, min_size = 0 })
    gm:record()
    h = x0
    for i = 1, 6 do h = h:matmul(w):tanh(); hs[i] = h end
    assert.is_true(ember.dtr.stats().evicted > 0)
    local path = os.tmpname()
    ember.save(path, hs)
    gm:backward(h:sum())
    ember.dtr.disable()
    local back = ember.load(path)
    os.remove(path)
    for i = 1, 6 do assert.is_true(ember.equal(back[i], want[i]), "saved activation " .. i) end
  end)

  it("evicts first what the running backward no longer needs, remaking nothing", function()
    -- six tanh layers of 1 MiB activations that the caller keeps, as
    -- wrappers the GC has not collected keep a step's activations; the
    -- budget leaves backward 1.5 MiB above them: room is made from the
    -- activations of the layers backward has passed (and the products tanh
    -- did not save), not from the first layers', which it still needs
    ember.manual_seed(3)
    local ws, x = {}, ember.randn({ 1024, 256 })
    for i = 1, 6 do ws[i] = ember.randn({ 256, 256 }) * 0.06 end
    local function run(budget)
      local gm = GradManager():attach(ws)
      local keep = {}
      -- the twelve activations of 1 MiB and the room above them
      if budget then ember.dtr.enable({ budget = settle() + 12 * 2 ^ 20 + budget, min_size = 0 }) end
      gm:record()
      local h = x
      for i = 1, 6 do
        keep[#keep + 1] = h:matmul(ws[i])
        h = keep[#keep]:tanh()
        keep[#keep + 1] = h
      end
      gm:backward(h:sum())
      local st = ember.dtr.stats()
      keep = nil
      settle()
      if budget then ember.dtr.disable() end
      local grads = {}
      for i = 1, 6 do grads[i], ws[i].grad = ws[i].grad, nil end
      return grads, st
    end
    local want = run()
    local got, st = run(1.5 * 2 ^ 20)
    assert.is_true(st.evictions > 0, "nothing was evicted")
    assert.are.equal(0, st.recomputes)
    for i = 1, 6 do assert.is_true(ember.equal(want[i], got[i]), "gradient " .. i) end
  end)

  it("evicts a parameter's gradient far larger than its inputs and remakes it by one op", function()
    -- two 512x512 weights on a batch of 4: each weight's gradient (1 MiB) is
    -- one matmul of two 8 KiB tensors, which DTR keeps while the gradient is
    -- held; a budget with room for one gradient evicts the other
    local function run(room)
      ember.manual_seed(5)
      local w1, w2 = ember.randn({ 512, 512 }) * 0.05, ember.randn({ 512, 512 }) * 0.05
      local x = ember.randn({ 4, 512 })
      local gm = GradManager():attach({ w1, w2 })
      if room then ember.dtr.enable({ budget = settle() + room, min_size = 0 }) end
      gm:record()
      gm:backward(x:matmul(w1):relu():matmul(w2):sum())
      return w1, w2, room and ember.dtr.stats()
    end
    local want1, want2 = run()
    want1, want2 = want1.grad:clone(), want2.grad:clone()
    local w1, w2, st = run(1.5 * 2 ^ 20)
    assert.is_true(st.evicted >= 1, "a gradient is evicted")
    -- reading w2's (evicted as w1's was made) remakes it by one matmul from
    -- the inputs kept for it, not by its chain (matmul, relu, matmul)
    w2.grad:sum():item()
    assert.equal(1, ember.dtr.stats().recomputes - st.recomputes)
    ember.dtr.disable()
    assert.is_true(ember.equal(want1, w1.grad) and ember.equal(want2, w2.grad))
  end)

  it("remakes a random draw from its own place in the Philox stream", function()
    local act = 256 * 256 * 4
    ember.manual_seed(11)
    local want = {}
    for i = 1, 6 do want[i] = ember.rand({ 256, 256 }) end
    local x = ember.randn({ 4 })
    local gm = GradManager():attach(x)
    ember.manual_seed(11)
    ember.dtr.enable({ budget = settle() + 4 * act, min_size = 0 })
    gm:record()
    local got = {}
    for i = 1, 6 do got[i] = ember.rand({ 256, 256 }) end   -- the first ones are evicted to make room
    assert.is_true(ember.dtr.stats().evictions > 0)
    for i = 1, 6 do assert.is_true(ember.equal(got[i], want[i]), "draw " .. i) end
    assert.is_true(ember.dtr.stats().recomputes > 0)
    gm:release()
    ember.dtr.disable()
  end)

  it("keeps an input's old value for an evicted result when the input is written in place", function()
    local act = 256 * 256 * 4
    ember.manual_seed(5)
    local w, a0 = ember.randn({ 256, 256 }) * 0.05, ember.randn({ 256, 256 })
    local want_a = a0:matmul(w)
    local want_b = want_a:tanh()
    want_a = want_a + 1
    local gm = GradManager():attach(w)
    ember.dtr.enable({ budget = settle() + 5 * act, min_size = 0 })
    gm:record()
    local a = a0:matmul(w)
    local b = a:tanh()   -- b's recipe reads a
    local keep = {}
    for i = 1, 8 do keep[i] = ember.randn({ 256, 256 }):matmul(w) end   -- b, stale, is evicted
    assert.is_true(ember.dtr.stats().evicted > 2)
    a:add_(1)   -- a written: b is remade from a's old value (kept), not the new one
    assert.is_true(ember.equal(b, want_b))
    assert.is_true(ember.equal(a, want_a))
    gm:release()
    ember.dtr.disable()
  end)

  it("builds, runs and frees a 150,000-deep graph (its recipes are cut without recursion)", function()
    local x = ember.tensor({ 1.0 })
    local gm = GradManager():attach(x)
    ember.dtr.enable({ budget = 2 ^ 50 })
    gm:record()
    local y = x
    for _ = 1, 150000 do y = y * 1.0 end
    gm:backward(y:sum())
    assert.are.equal(1, x.grad:item())
    y = nil
    collectgarbage()
    collectgarbage()
    ember.dtr.disable()
    assert.are.equal(0, ember.dtr.stats().tracked)
  end)

  -- dropout's product saves the bool mask (1 byte an element), not a float
  -- copy of it: what DTR keeps or remakes for it is a quarter of the bytes,
  -- and the values and gradients are those of x * mask:to(dtype) * scale
  it("dropout saves its bool mask, with the float mask's bits", function()
    local graph = ember.autodiff.graph
    for _, dt in ipairs({ "float32", "float64" }) do
      ember.manual_seed(5)
      local x0 = ember.randn({ 6, 50 }, { dtype = dt })
      x0:view(-1):narrow(1, 1, 4):copy_(ember.tensor({ math.huge, -math.huge, 0 / 0, -0.0 }, { dtype = dt }))
      local res = {}
      for k, f in ipairs({
        function(x) return ember.nn.functional.dropout(x, 0.3) end,
        function(x) return x * ember.rand_like(x):ge(0.3):to(x.dtype) * (1 / (1 - 0.3)) end,
      }) do
        local x = x0:clone()
        local gm, saved = GradManager():attach({ x }), {}
        ember.manual_seed(9)
        local y
        graph.saved_tensors_hooks(function(t) saved[#saved + 1] = t.dtype; return t end, function(t) return t end,
          function()
            gm:record()
            y = f(x)
            gm:backward((y * ember.arange(1, 301, 1, { dtype = dt }):view(6, 50)):sum())
          end)
        res[k] = { y = y, g = x.grad, saved = table.concat(saved, " ") }
      end
      assert.truthy(res[1].saved:find("bool"), res[1].saved)
      assert.falsy(res[2].saved:find("bool"), res[2].saved)
      for _, what in ipairs({ "y", "g" }) do
        local a, b = res[1][what]:view(-1):tolist(), res[2][what]:view(-1):tolist()
        for i = 1, #b do
          local same = (a[i] ~= a[i] and b[i] ~= b[i]) or (a[i] == b[i] and (a[i] ~= 0 or 1 / a[i] == 1 / b[i]))
          assert(same, ("%s %s element %d: %s against %s"):format(dt, what, i, tostring(a[i]), tostring(b[i])))
        end
      end
    end
  end)

  it("checks its options", function()
    assert.error_matches(function() ember.dtr.enable({}) end, "budget (bytes) is required", 1, true)
    assert.error_matches(function() ember.dtr.enable({ budget = -1 }) end, "budget must be a whole number", 1, true)
    assert.error_matches(function() ember.dtr.enable({ budget = 1.5 }) end, "budget must be a whole number", 1, true)
    assert.error_matches(function() ember.dtr.enable({ budget = 1e6, min_size = -2 }) end, "min_size must be", 1, true)
    assert.error_matches(function() ember.dtr.enable({ budget = 1e6, bogus = 1 }) end, "unknown option", 1, true)
    assert.error_matches(function() ember.dtr.enable(5) end, "options must be a table", 1, true)
    assert.is_false(ember.dtr.is_enabled())
  end)
end)
