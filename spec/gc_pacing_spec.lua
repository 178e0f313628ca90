-- The binding paces the Lua GC by the C memory tensors hold (lua/ember/tensor.lua,
-- docs/performance.md "When a temporary's memory comes back"): incremental
-- steps as the tensor bytes in use grow, a cycle within a budget, the dead
-- wrappers' slots swept as soon as a cycle has cleared them. Dropped
-- results come back without collectgarbage() or ember.tidy; nothing a
-- program still reaches is freed; a stopped GC stays stopped.
local H = require("helpers")
local ember = H.ember

local MB = 2 ^ 20
local function stats() return ember.memory_stats() end
-- the budget between cycles: 24 MB, or twice the Lua heap when that is larger;
-- the garbage may pass a budget and a half by one step (a sixteenth) and one tensor
local function budget() return math.max(24 * MB, collectgarbage("count") * 2048) end
local function bound() return 1.5 * budget() + budget() / 16 + MB end
local function settle()
  collectgarbage()
  ember._sweep()
  return stats().bytes_in_use
end

describe("the GC paced by tensor memory", function()
  it("gives dropped results back within a budget and a half, by steps, not full collections", function()
    local base = settle()
    local s0 = stats()
    -- 12 budgets of results (300 MB at the least), each dropped at once; the
    -- budget is larger when earlier specs left a large Lua heap
    local n = math.max(300, math.ceil(12 * budget() / MB))
    local peak = 0
    for _ = 1, n do
      local _ = ember.zeros({ 2 ^ 18 })
      peak = math.max(peak, stats().bytes_in_use - base)
    end
    local s1 = stats()
    assert.is_true(peak <= bound(), ("%.1f MB of garbage piled up"):format(peak / MB))
    -- a step per sixteenth of a budget, a cycle within some three quarters of
    -- one (half of each counted here); a full collection at most now and then
    local budgets = n * MB / budget()
    local steps, sweeps = s1.gc_steps - s0.gc_steps, s1.gc_sweeps - s0.gc_sweeps
    assert.is_true(steps >= 8 * budgets, ("steps %d in %.1f budgets"):format(steps, budgets))
    assert.is_true(sweeps >= budgets / 1.5 / 2, ("sweeps %d in %.1f budgets"):format(sweeps, budgets))
    assert.is_true(s1.gc_collections - s0.gc_collections <= 3, "full collections " .. (s1.gc_collections - s0.gc_collections))
  end)

  it("never frees what the program still reaches, through many cycles", function()
    local a = ember.arange(1, 1001):float()   -- sum 500500
    local t = { x = a * 2 }                     -- sum 1001000
    local up = a + 1                            -- sum 501500, an upvalue
    local function f() return up:sum():item() end
    local make = function() local c = a * 3; return function() return c:sum():item() end end
    local g = make()                            -- a closure holding 1501500
    local view = (a * 4):narrow(1, 1, 10)       -- its base dropped: the view keeps it (4 * 55)
    local s0 = stats()
    -- 2 MB of garbage a turn, until 5 sweeps (8 budgets at the most)
    for _ = 1, math.ceil(4 * budget() / MB) do
      local _ = ember.ones({ 2 ^ 18 }) + 1
      if stats().gc_sweeps - s0.gc_sweeps >= 5 then break end
    end
    local s1 = stats()
    assert.is_true(s1.gc_sweeps - s0.gc_sweeps >= 5, "sweeps " .. (s1.gc_sweeps - s0.gc_sweeps))
    assert.are.equal(500500, a:sum():item())
    assert.are.equal(1001000, t.x:sum():item())
    assert.are.equal(501500, f())
    assert.are.equal(1501500, g())
    assert.are.equal(220, view:sum():item())
    H.same(view, { 4, 8, 12, 16, 20, 24, 28, 32, 36, 40 })
  end)

  it("runs no steps in a loop that frees its temporaries at once (ember.tidy, t:free())", function()
    settle()
    local x = ember.ones({ 2 ^ 16 })   -- 256 KB results, 100 MB in all
    local s0 = stats()
    for _ = 1, 100 do
      ember.tidy(function() local _ = (x + 1) * 2 end)
      local y = x + 3
      y:free()
    end
    local s1 = stats()
    -- each tidy's 512 KB and each freed 256 KB never raise the level by a step (1.5 MB)
    assert.are.equal(s0.gc_steps, s1.gc_steps)
    assert.are.equal(s0.gc_collections, s1.gc_collections)
  end)

  it("leaves a stopped GC stopped, and still bounds the garbage by full collections", function()
    local base = settle()
    local s0 = stats()
    collectgarbage("stop")
    local ok, err = pcall(function()
      local peak = 0
      for _ = 1, math.max(120, math.ceil(3 * budget() / MB)) do   -- past a budget and a half, twice
        local _ = ember.zeros({ 2 ^ 18 })
        peak = math.max(peak, stats().bytes_in_use - base)
      end
      assert.is_false(collectgarbage("isrunning"))
      assert.is_true(peak <= bound(), ("%.1f MB of garbage piled up"):format(peak / MB))
      assert.are.equal(s0.gc_steps, stats().gc_steps)   -- no step while stopped
      assert.is_true(stats().gc_collections > s0.gc_collections)
    end)
    collectgarbage("restart")
    assert(ok, err)
  end)

  it("gives the same values whether results are dropped, freed or tidied", function()
    local x = ember.linspace(-3, 3, 1000)
    local function chain() return ((x * x + 1):log():relu() * 0.5):sum():item() end
    local want = 0
    for i = 0, 999 do
      local v = -3 + 6 * i / 999
      want = want + 0.5 * math.log(v * v + 1)
    end
    local dropped
    for _ = 1, 2000 do dropped = chain() end
    local tidied = ember.tidy(chain)
    assert.are.equal(dropped, tidied)
    assert.near(want, dropped, 1e-4 * want)
  end)
end)
