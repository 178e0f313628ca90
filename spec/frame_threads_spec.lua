-- The thread policy (docs/frame_loop.md, "Threads"): "auto" by default (and
-- with set_num_threads("auto")), a fixed count with set_num_threads(n); under
-- auto small jobs run on the calling thread; results do not depend on the
-- setting (spec/thread_bits_spec.lua checks each op).
local H = require("helpers")
local ember = H.ember
local nn = ember.nn

local function child(code, env)
  local cmd = ("%s LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit -e %q 2>&1"):format(env or "", code)
  return H.output(cmd)
end

describe("thread policy", function()
  H.keep_thread_setting(before_each, after_each)

  it("is auto over the usable CPUs by default, fixed by set_num_threads(n), auto again with \"auto\"", function()
    local out = child([[local e = require("ember"); local s = e.thread_stats()
      io.write(s.policy, " ", s.threads, " ", tostring(s.threads == e.get_num_threads()))]])
    assert.matches("^auto %d+ true$", out)
    out = child([[local e = require("ember"); local s = e.thread_stats(); io.write(s.policy, " ", s.threads)]],
      "EMBER_NUM_THREADS=1")
    assert.are.equal("fixed 1", out)
    out = child([[local e = require("ember"); io.write(e.thread_stats().policy)]], "EMBER_NUM_THREADS=auto")
    assert.are.equal("auto", out)
    out = child([[local ok, e = pcall(require, "ember"); io.write(tostring(ok), " ", tostring(e))]], "EMBER_NUM_THREADS=2x")
    assert.are.equal('false ember: EMBER_NUM_THREADS must be a whole number >= 1 or "auto", got "2x"', out)
    ember.set_num_threads(1)
    assert.are.equal("fixed", ember.thread_stats().policy)
    assert.are.equal(1, ember.get_num_threads())
    ember.set_num_threads("auto")
    local st = ember.thread_stats()
    assert.are.equal("auto", st.policy)
    assert.is_true(st.threads >= 1 and st.threads <= st.max_threads)
    assert.is_true(st.online_cpus >= 1)
  end)

  it("refuses a count that is not a whole number from 1 to the maximum", function()
    local max, policy = ember.thread_stats().max_threads, ember.thread_stats().policy
    local msg = "ember.set_num_threads: expected a whole number of threads from 1 to " .. max .. " or \"auto\", got "
    for _, bad in ipairs({ 0, -1, 1.5, max + 1, 0 / 0 }) do
      assert.has_error(function() ember.set_num_threads(bad) end, msg .. tostring(bad))
    end
    assert.has_error(function() ember.set_num_threads("two") end, msg .. '"two"')
    assert.has_error(function() ember.set_num_threads() end, msg .. "nil")
    assert.are.equal(policy, ember.thread_stats().policy)   -- unchanged
  end)

  it("runs small jobs on the calling thread and counts what it decided", function()
    ember.set_num_threads("auto")
    local before = ember.thread_stats()
    local a = ember.randn({ 32, 32 })
    for _ = 1, 10 do a:matmul(a) end   -- 32^3 multiply-adds: under 2^18
    local mid = ember.thread_stats()
    if before.threads > 1 then
      assert.is_true(mid.jobs_inline_small >= before.jobs_inline_small + 10)
      assert.are.equal(before.jobs_parallel, mid.jobs_parallel)
      local big = ember.randn({ 256, 512 })
      local w = ember.randn({ 512, 512 })
      mid = ember.thread_stats()
      big:matmul(w)   -- 2^26: takes threads when cores are spare, else runs inline as busy
      local after = ember.thread_stats()
      assert.are.equal(1, (after.jobs_parallel - mid.jobs_parallel) + (after.jobs_inline_busy - mid.jobs_inline_busy))
      assert.is_true(after.spare >= 1 and after.spare <= after.online_cpus)
    end
    -- fixed: nothing is counted
    ember.set_num_threads(1)
    local f0 = ember.thread_stats()
    a:matmul(a)
    local f1 = ember.thread_stats()
    assert.are.equal(f0.jobs_inline_small, f1.jobs_inline_small)
  end)

  it("times each large job under auto for its measured choice and says which arm won", function()
    ember.set_num_threads("auto")
    local big, w = ember.randn({ 256, 512 }), ember.randn({ 512, 512 })
    local before = ember.thread_stats()
    for _ = 1, 40 do big:matmul(w) end   -- 2^26 multiply-adds each
    local after = ember.thread_stats()
    assert.is_true(after.arm == "sampled" or after.arm == "team")
    assert.are.equal("boolean", type(after.trial))
    if after.threads > 1 then
      local timed = after.jobs_sampled + after.jobs_team - before.jobs_sampled - before.jobs_team
      assert.are.equal(40, timed)
      assert.is_true(after.kinds >= 1)
    end
    assert.is_true(after.trials_won + after.trials_stopped <= after.trials)
    assert.is_true(after.last_trial_ratio >= 0)
    assert.is_true(after.trials_postponed >= 0)
    assert.are.equal("boolean", type(after.crowded))
    -- fixed: nothing is timed
    ember.set_num_threads(1)
    big:matmul(w)
    local fixed = ember.thread_stats()
    assert.are.equal(after.jobs_sampled + after.jobs_team, fixed.jobs_sampled + fixed.jobs_team)
  end)

  -- a busy process per core: the load samples find others' threads on every
  -- core (the calling thread itself shares one), and the trials of the team,
  -- due after the first 16 large jobs, are put off (docs/frame_loop.md, "Threads")
  -- EMBER_POLICY_NO_CROWD (a bench's switch) turns the rule off: the trial runs
  it("puts off trials of the team while other threads fill every core, unless EMBER_POLICY_NO_CROWD is set", function()
    local st = ember.thread_stats()
    if st.max_threads < 2 then return pending("one CPU: no team to try") end
    if st.online_cpus > 8 then return pending("spawns a busy process per core: over 8 cores here") end
    local pids = {}
    local code = [[local e = require("ember")
        local big, w = e.randn({256, 512}), e.randn({512, 512})
        for _ = 1, 64 do big:matmul(w) end
        local s = e.thread_stats()
        io.write(tostring(s.crowded), " ", s.trials_postponed, " ", s.trials, " ", s.jobs_team)]]
    local ok, out, off = pcall(function()
      for i = 1, st.online_cpus do
        local p = assert(io.popen("luajit -e 'while true do end' >/dev/null 2>&1 & echo $!"))
        pids[i] = assert(tonumber(p:read("*l")))
        p:close()
      end
      return child(code, "EMBER_NUM_THREADS=auto"), child(code, "EMBER_NUM_THREADS=auto EMBER_POLICY_NO_CROWD=1")
    end)
    for _, pid in ipairs(pids) do os.execute("kill " .. pid) end   -- never outlive the spec
    assert(ok, out)
    local crowded, postponed, trials, team = out:match("^(%a+) (%d+) (%d+) (%d+)$")
    assert(crowded, out)
    assert.are.equal("true", crowded)
    assert.is_true(tonumber(postponed) >= 1)   -- the first trial came due at job 17
    assert.are.equal(0, tonumber(trials))
    assert.are.equal(0, tonumber(team))
    crowded, postponed, trials, team = off:match("^(%a+) (%d+) (%d+) (%d+)$")
    -- crowded is not checked here: a sample just after the trial's team jobs
    -- takes away the workers as still spinning, which may be asleep already
    assert(crowded, off)
    assert.are.equal(0, tonumber(postponed))
    assert.is_true(tonumber(trials) >= 1)   -- jobs 17 to 32 (or fewer, stopped early)
    assert.is_true(tonumber(team) >= 1)
  end)

  -- back to auto after a fixed count: what the measured choice learned stays
  -- (docs/frame_loop.md, "Threads"); the bench alternates the settings step by step on it
  it("keeps the measured choice's state across set_num_threads calls", function()
    ember.set_num_threads("auto")
    local big, w = ember.randn({ 256, 512 }), ember.randn({ 512, 512 })
    for _ = 1, 8 do big:matmul(w) end
    local before = ember.thread_stats()
    ember.set_num_threads(1)
    for _ = 1, 4 do big:matmul(w) end
    ember.set_num_threads(2 <= before.max_threads and 2 or 1)
    big:matmul(w)
    ember.set_num_threads("auto")
    local back = ember.thread_stats()
    for _, k in ipairs({ "arm", "jobs_sampled", "jobs_team", "trials", "trials_won", "trials_stopped",
      "team_cuts", "trials_postponed", "kinds", "last_trial_ratio" }) do
      assert.are.equal(before[k], back[k], k)
    end
    big:matmul(w)
    local after = ember.thread_stats()
    if after.threads > 1 then
      assert.are.equal(1, after.jobs_sampled + after.jobs_team - back.jobs_sampled - back.jobs_team)
    end
  end)

  -- every setting gives the same bits, with deterministic mode and without
  it("gives the same bits as 1 thread to a small and a medium step under auto, and under deterministic mode", function()
    local function train(setting, widths, batch)
      ember.set_num_threads(setting)
      ember.manual_seed(5)
      local layers = {}
      for i = 1, #widths - 1 do
        layers[#layers + 1] = nn.Linear(widths[i], widths[i + 1])
        if i < #widths - 1 then layers[#layers + 1] = nn.ReLU() end
      end
      local model = nn.Sequential(unpack(layers))
      return H.train_steps(model, ember.randn({ batch, widths[1] }), ember.randint(1, widths[#widths] + 1, { batch }), 3)
    end
    local small = { 32, 64, 64, 10 }
    assert.are.same(train(1, small, 32), train("auto", small, 32))
    local medium = { 784, 256, 128, 10 }
    assert.are.same(train(1, medium, 128), train("auto", medium, 128))
    ember.set_deterministic(true)
    local ok, err = pcall(function()
      local one = train(1, medium, 128)
      assert.are.same(one, train("auto", medium, 128))
      if ember.thread_stats().max_threads >= 2 then assert.are.same(one, train(2, medium, 128)) end
    end)
    ember.set_deterministic(false)
    assert(ok, err)
  end)
end)
