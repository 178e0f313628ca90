-- A plan runs an optimizer's consecutive SGD updates as one job on the
-- thread pool (core/src/plan/updates.c, docs/plans.md "Replay"): the bits
-- are eager's and those of the same plan with its updates one by one
-- (EMBER_PLAN_NO_GROUP), on 1 thread and on 2; it is one large job where
-- there were six; a saved and loaded plan does the same; and an update the
-- group cannot run fails as the update alone fails.
package.path = "./spec/support/?.lua;" .. package.path
local H = require("helpers")
local ember = H.ember
local Z = require("zoo")
local ffi = require("ffi")
ffi.cdef("int setenv(const char *, const char *, int); int unsetenv(const char *);")

-- the MLP recipe at its real widths (the updates' 235146 elements are
-- several of the job's pieces), after one eager step
local function recipe(opts)
  ember.manual_seed(3)
  local model = Z.mlp({ 784, 256, 128, 10 }, true)
  local opt = ember.optim.SGD(model:parameters(), opts or { lr = 0.05, momentum = 0.9 })
  return { model = model, step = Z.train_step(model, opt) }
end

local function trace(m, x, y, one_by_one)
  if one_by_one then ffi.C.setenv("EMBER_PLAN_NO_GROUP", "1", 1) end
  local ok, plan = pcall(ember.jit.trace, m.step, { x, y })
  ffi.C.unsetenv("EMBER_PLAN_NO_GROUP")
  assert(ok, plan)
  return plan
end

local function same_models(a, b, what)
  local sa, sb = a.model:state_dict(), b.model:state_dict()
  for k, v in pairs(sa) do assert.is_true(ember.equal(v, sb[k]), what .. ": " .. k) end
end

local function large_jobs()
  local s = ember.thread_stats()
  return s.jobs_sampled + s.jobs_team
end

describe("a plan's SGD updates as one job", function()
  after_each(function() ember.set_num_threads("auto") end)   -- the default policy

  for _, opts in ipairs({ { lr = 0.05, momentum = 0.9 }, { lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 1e-3 },
    { lr = 0.05, weight_decay = 1e-2, maximize = true } }) do
    local name = ("momentum %s%s%s"):format(opts.momentum or 0, opts.nesterov and ", nesterov" or "",
      opts.maximize and ", maximize" or "")
    it("gives eager's bits and the one-by-one plan's, on 1 and 2 threads (" .. name .. ")", function()
      ember.manual_seed(11)
      local xs, ys = {}, {}
      for i = 1, 6 do xs[i], ys[i] = ember.randn({ 128, 1, 28, 28 }), ember.randint(1, 11, { 128 }) end
      local e, g, o = recipe(opts), recipe(opts), recipe(opts)
      for _, m in ipairs({ e, g, o }) do m.step(xs[1], ys[1]) end
      local pg, po = trace(g, xs[2], ys[2]), trace(o, xs[2], ys[2], true)
      e.step(xs[2], ys[2])
      for i = 3, 6 do
        ember.set_num_threads(i % 2 + 1)
        local le, lg = e.step(xs[i], ys[i]), pg(xs[i], ys[i])
        ember.set_num_threads(2 - i % 2)
        local lo = po(xs[i], ys[i])
        assert.is_true(ember.equal(le, lg) and ember.equal(le, lo), "loss at step " .. i)
        same_models(e, g, "grouped, step " .. i)
        same_models(e, o, "one by one, step " .. i)
      end
    end)
  end

  it("is one large job of the pool where the updates were six", function()
    ember.set_num_threads("auto")
    if ember.get_num_threads() < 2 then return pending("a pool of one thread runs every job inline, uncounted") end
    local x, y = ember.randn({ 128, 1, 28, 28 }), ember.randint(1, 11, { 128 })
    local g, o = recipe(), recipe()
    g.step(x, y)
    o.step(x, y)
    local pg, po = trace(g, x, y), trace(o, x, y, true)
    pg(x, y)
    po(x, y)
    local j0 = large_jobs()
    pg(x, y)
    local j1 = large_jobs()
    po(x, y)
    local j2 = large_jobs()
    assert.are.equal(j2 - j1 + 1, j1 - j0)
  end)

  it("runs the same group in a saved and loaded plan", function()
    local x, y = ember.randn({ 128, 1, 28, 28 }), ember.randint(1, 11, { 128 })
    local e, g = recipe(), recipe()
    e.step(x, y)
    g.step(x, y)
    local path = os.tmpname()
    trace(g, x, y):save(path, { names = g.model:state_dict() })
    local loaded = ember.jit.load(path)
    os.remove(path)
    e.step(x, y)   -- the traced step
    ember.set_num_threads(2)
    for _ = 1, 3 do
      local le, ll = e.step(x, y), loaded(x, y)
      assert.is_true(ember.equal(le, ll))
    end
    local sd = e.model:state_dict()
    for k, v in pairs(sd) do assert.is_true(ember.equal(v, loaded:tensor(k)), k) end
  end)

  it("fails as the update alone fails where the group cannot run (a parameter a backward run holds)", function()
    local x, y = ember.randn({ 128, 1, 28, 28 }), ember.randint(1, 11, { 128 })
    local g = recipe()
    g.step(x, y)
    local plan = trace(g, x, y)
    local w = g.model:parameters()[3]
    local gm = ember.autodiff.GradManager():attach({ w })
    gm:record()
    local run = gm:backward_steps((w * w):sum())   -- saves w: pinned until the run ends
    local ok, err = pcall(plan, x, y)
    assert.is_false(ok)
    local eok, eerr = pcall(g.step, x, y)
    assert.is_false(eok)
    assert.matches("the parameter %(shape {128, 256}%) is needed by a backward run", tostring(eerr))
    assert.matches("the parameter %(shape {128, 256}%) is needed by a backward run", tostring(err))
    run:cancel()
    gm:release()
  end)
end)
