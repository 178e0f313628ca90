-- The graph toolbox on broadcasting graphs, hooks on AccumulateGrad nodes,
-- gradients users hand in, misuse during backward and the custom-rule
-- contract (issue 11's classes 4, 5, 8, 9, 10 and 12).
local H = require("helpers")
local ember = H.ember
local GradManager = ember.autodiff.GradManager
local graph = ember.autodiff.graph

-- an nn.Linear forward: its bias add broadcasts {5, 2} + {2}
local function linear_setup(dtype)
  local m = ember.nn.Linear(3, 2)
  if dtype == "float64" then m:to("float64") end
  local x = ember.tensor({ { 1, 2, 3 }, { 0, 1, 0 }, { -1, 0, 2 }, { 2, 2, 2 }, { 0.5, -1, 1 } }, { dtype = dtype })
  local gm = GradManager():attach(m:parameters())
  return m, x, gm
end

describe("graph tools on a broadcasting graph", function()
  for _, dtype in ipairs({ "float32", "float64" }) do
    it("node hooks and prehooks see grad_inputs in the inputs' shapes (" .. dtype .. ")", function()
      local m, x, gm = linear_setup(dtype)
      gm:record()
      local y = m(x)
      local seen
      y:grad_fn():register_hook(function(gi, go)
        seen = { gi[1] and gi[1]:shape(), gi[2] and gi[2]:shape(), go[1]:shape() }
      end)
      local pre
      y:grad_fn():register_prehook(function(go) pre = go[1]:shape() end)
      gm:backward(y:sum())
      assert.are.same({ 5, 2 }, seen[1])
      assert.are.same({ 2 }, seen[2])
      assert.are.same({ 5, 2 }, seen[3])
      assert.are.same({ 5, 2 }, pre)
      H.same(m.bias.grad, { 5, 5 })
      H.same(m.weight.grad, { { 2.5, 4, 8 }, { 2.5, 4, 8 } })
    end)
  end

  it("saved_tensors_hooks, save_on_cpu, detect_anomaly and the debug log leave the gradients alone", function()
    local want
    do
      ember.manual_seed(0)
      local m, x, gm = linear_setup("float64")
      gm:record()
      gm:backward((m(x):relu() * m(x)):sum())
      want = { m.weight.grad:tolist(), m.bias.grad:tolist() }
    end
    local function run(wrapper)
      ember.manual_seed(0)
      local m, x, gm = linear_setup("float64")
      gm:record()
      wrapper(function() gm:backward((m(x):relu() * m(x)):sum()) end)
      return m
    end
    local packed = 0
    local wrappers = {
      function(f) graph.saved_tensors_hooks(function(t) packed = packed + 1; return t:clone() end,
        function(t) return t end, f) end,
      function(f) graph.save_on_cpu(f) end,
      function(f) ember.autodiff.detect_anomaly(f) end,
      function(f)
        local log = {}
        local old = io.stderr
        io.stderr = { write = function(_, s) log[#log + 1] = s end }   -- luacheck: ignore
        ember.autodiff.set_debug(true)
        local ok, err = pcall(f)
        ember.autodiff.set_debug(false)
        io.stderr = old
        assert(ok, err)
        local text = table.concat(log)
        -- the op's own name, then the node's
        assert.matches("Executing: add %(AddBackward%) with grad_outputs: %[f64%[5, 2%]%]", text)
        assert.matches("Executing: AccumulateGrad with grad_outputs: %[f64%[2%]%]", text)
      end,
    }
    for _, w in ipairs(wrappers) do
      ember.manual_seed(0)
      local m = run(w)
      H.same(m.weight.grad, want[1], 1e-12)
      H.same(m.bias.grad, want[2], 1e-12)
    end
    assert.is_true(packed > 0)
  end)
end)

describe("hooks on AccumulateGrad nodes", function()
  it("fire in API.md's order: tensor hooks, prehooks, callbacks, hooks, .grad, post-accumulate hooks", function()
    local order = {}
    local x = ember.tensor({ 1, 2 })
    local gm = GradManager():attach(x, function(_, g) order[#order + 1] = "callback"; return g * 10 end)
    gm:record()
    local y = x * 3
    local acc = y:grad_fn():next_functions()[1].node
    assert.are.equal("AccumulateGrad", acc:name())
    x:register_hook(function(g) order[#order + 1] = "tensor hook"; return g + 1 end)
    acc:register_prehook(function(go)
      order[#order + 1] = "prehook"
      H.same(go[1], { 4, 4 })
      return { go[1] * 2 }
    end)
    acc:register_hook(function(gi, go)
      order[#order + 1] = "hook"
      assert.are.equal(0, #gi)
      H.same(go[1], { 80, 80 })
    end)
    x:register_post_accumulate_grad_hook(function(t)
      order[#order + 1] = "post"
      H.same(t.grad, { 80, 80 })
    end)
    gm:backward(y:sum())
    assert.are.same({ "tensor hook", "prehook", "callback", "hook", "post" }, order)
    H.same(x.grad, { 80, 80 })
  end)
end)

describe("gradients users hand in", function()
  it("a callback's gradient must fit its tensor", function()
    local x = ember.tensor({ 1, 2 })
    local gm = GradManager():attach(x, function() return ember.ones({ 5 }) end)
    gm:record()
    local ok, err = pcall(function() gm:backward((x * 2):sum()) end)
    assert.is_false(ok)
    assert.matches("callback returned a gradient {5} float32 on cpu for a tensor {2} float32 on cpu", err)
    assert.is_nil(x.grad)
    -- the manager is usable again
    gm = GradManager():attach(x)
    gm:record()
    gm:backward((x * 2):sum())
    H.same(x.grad, { 2, 2 })
  end)

  it("a tensor hook's gradient must fit, in dtype too", function()
    local x = ember.tensor({ 1, 2 })
    x:register_hook(function(g) return g:double() end)
    local gm = GradManager():attach(x)
    gm:record()
    local ok, err = pcall(function() gm:backward((x * 2):sum()) end)
    assert.is_false(ok)
    assert.matches("tensor hook returned a gradient {2} float64 on cpu for a tensor {2} float32 on cpu", err)
  end)

  it("an assignment to .grad is checked, and a good one is used by the next backward", function()
    local x = ember.tensor({ 1, 2 })
    for _, bad in ipairs({ 5, "g", {}, ember.ones({ 5 }), ember.ones({ 2 }, { dtype = "float64" }) }) do
      local ok, err = pcall(function() x.grad = bad end)
      assert.is_false(ok)
      assert.matches("grad", err)
      assert.matches("{2}", err)
    end
    assert.is_nil(x.grad)
    x.grad = ember.tensor({ 10, 20 })
    local gm = GradManager():attach(x)
    gm:record()
    gm:backward((x * 2):sum())
    H.same(x.grad, { 12, 22 })
    x.grad = nil
    assert.is_nil(x.grad)
  end)
end)

describe("misuse during backward", function()
  for _, what in ipairs({ "release", "record", "attach", "backward" }) do
    it(what .. " of the running manager from a callback is an error, and the manager stays usable", function()
      local x = ember.tensor({ 1, 2 })
      local gm
      gm = GradManager():attach(x, function(t, g)
        if what == "attach" then gm:attach(ember.ones({ 1 }))
        elseif what == "backward" then gm:backward(t:sum())
        else gm[what](gm) end
        return g
      end)
      gm:record()
      local ok, err = pcall(function() gm:backward((x * 2):sum()) end)
      assert.is_false(ok)
      assert.matches("GradManager%." .. what .. ": not allowed while this manager's backward is running", err)
      assert.is_nil(x.grad)
      assert.is_false(gm:is_recording())
      local gm2 = GradManager():attach(x)
      gm2:record()
      gm2:backward((x * 3):sum())
      H.same(x.grad, { 3, 3 })
    end)
  end

  it("release from inside a custom rule is an error too", function()
    local x = ember.tensor({ 1, 2 })
    local gm = GradManager():attach(x)
    local F = ember.autodiff.Function("leaky", function(a)
      return a * 2, function(dy) gm:release(); return dy * 2 end
    end)
    gm:record()
    local ok, err = pcall(function() gm:backward(F(x):sum()) end)
    assert.is_false(ok)
    assert.matches("release: not allowed", err)
  end)
end)

describe("the custom-rule contract", function()
  local function run(nin, rule)
    local a, b = ember.tensor({ 1, 2 }), ember.tensor({ 3, 4 })
    local gm = GradManager():attach({ a, b })
    local F = ember.autodiff.Function("my_op", function(...)
      local s = (...) * 1
      if nin == 2 then s = s + select(2, ...) end
      return s, rule
    end)
    gm:record()
    local y = nin == 2 and F(a, b) or F(a)
    local ok, err = pcall(function() gm:backward(y:sum()) end)
    return ok, err, a, b
  end

  it("a bare tensor answers only a one-input function", function()
    local ok, _, a = run(1, function(dy) return dy * 3 end)
    assert.is_true(ok)
    H.same(a.grad, { 3, 3 })
    local err
    ok, err = run(2, function(dy) return dy end)
    assert.is_false(ok)
    assert.matches("wrong number of grads: 1 value for 2 inputs", err)
  end)

  it("multiple return values number exactly the inputs, as Lua counts them", function()
    local ok, _, a, b = run(2, function(dy) return dy, nil end)   -- two values
    assert.is_true(ok)
    H.same(a.grad, { 1, 1 })
    assert.is_nil(b.grad)
    local err
    ok, err = run(2, function(dy) return dy, dy, dy end)
    assert.is_false(ok)
    assert.matches("wrong number of grads: 3 values for 2 inputs", err)
    ok, err = run(1, function(dy) return dy, nil end)
    assert.is_false(ok)
    assert.matches("wrong number of grads: 2 values for 1 input", err)
  end)

  it("a list may end early but not run long", function()
    local ok, _, a, b = run(2, function(dy) return { dy } end)
    assert.is_true(ok)
    H.same(a.grad, { 1, 1 })
    assert.is_nil(b.grad)
    local err
    ok, err = run(2, function(dy) return { dy, dy, dy } end)
    assert.is_false(ok)
    assert.matches("wrong number of grads: 3 in a list for 2 inputs", err)
  end)

  it("names the Function as the user gave it", function()
    local ok, err = run(2, function(dy) return dy end)
    assert.is_false(ok)
    assert.matches("Function my_op %(MyOpBackward%) returned the wrong number", err)
  end)

  it("names a node by the name the user wrote in anomaly mode, then by its node name", function()
    -- a Function whose gradient is NaN, and a rule registered for log_softmax
    -- that returns one: the error gives the name as written, so a search of
    -- the code finds it
    local x = ember.tensor({ 1, 2 }, { dtype = "float64" })
    local nanrule = ember.autodiff.Function("acc_g_nanrule", function(t)
      return t * 2, function(dy) return dy * (0 / 0) end
    end)
    local gm = GradManager():attach(x)
    local ok, err = pcall(ember.autodiff.detect_anomaly, function()
      gm:record()
      gm:backward(nanrule(x):sum())
    end)
    assert.is_false(ok)
    -- named by the call on the user's line (gm:backward), the raising function after it
    assert.matches("GradManager:backward: acc_g_nanrule %(AccGNanruleBackward%) returned nan values", err)
    assert.matches("%(in ember%.autodiff%.detect_anomaly%)", err)
    ember.autodiff.register_grad_rule("log_softmax", function(_, grads) return { grads[1] * (0 / 0) } end)
    ok, err = pcall(ember.autodiff.detect_anomaly, function()
      gm:record()
      gm:backward(x:log_softmax(1):sum())
    end)
    ember.autodiff.register_grad_rule("log_softmax", nil)
    assert.is_false(ok)
    assert.matches("GradManager:backward: log_softmax %(LogSoftmaxBackward%) returned nan values", err)
    -- the node's own name stays PyTorch's grad_fn.name()
    gm:record()
    assert.are.equal("AccGNanruleBackward", nanrule(x):grad_fn():name())
    gm:release()
  end)

  it("keeps the Function's name after the Function is collected, and checks its length", function()
    local x, gm = H.recording({ 1, 2 }, { dtype = "float64" })
    local y = (function()
      local name = "collected_" .. ("op"):rep(5)   -- a string made here, collected with the Function
      return ember.autodiff.Function(name, function(t) return t * 2, function(dy) return dy * 2 end end)(x)
    end)()
    collectgarbage("collect")
    collectgarbage("collect")
    assert.are.equal("CollectedOpopopopopBackward", y:grad_fn():name())
    gm:backward(y:sum())
    H.same(x.grad, { 2, 2 })
    local ok, err = pcall(ember.autodiff.Function, ("n"):rep(49), function(t) return t end)
    assert.is_false(ok)
    assert.matches("Function: name must be a string of 1 to 48 bytes, got 'n+' %(49 bytes%)", err)
    ok, err = pcall(ember.autodiff.Function, { name = 5, forward = function(_, t) return t end })
    assert.is_false(ok)
    assert.matches("name must be a string of 1 to 48 bytes, got number", err)
  end)

  it("backward with a different number of dy than y raises", function()
    local x, gm = H.recording({ 1, 2 })
    local y1, y2 = x * 2, x * 3
    local ok, err = pcall(function() gm:backward({ y1, y2 }, { ember.ones({ 2 }) }) end)
    assert.is_false(ok)
    assert.matches("1 dy for 2 y", err)
    ok, err = pcall(function() gm:backward({ y1 }, { ember.ones({ 2 }), ember.ones({ 2 }) }) end)
    assert.is_false(ok)
    assert.matches("2 dy for 1 y", err)
    assert.is_true(gm:is_recording())   -- the recording is still there for a corrected call
    gm:backward({ y1, y2 }, { ember.ones({ 2 }), ember.ones({ 2 }) })
    H.same(x.grad, { 5, 5 })
  end)
end)

describe("attaching a tracked intermediate during a recording", function()
  it("keeps the gradients of tensors attached upstream; its own .grad counts uses after the attach", function()
    local x, gm = H.recording({ 1, 2 }, { dtype = "float64" })
    local y = x * x
    local before = y * 10                         -- before the attach: not in y.grad
    local seen
    gm:attach(y, function(_, g) seen = g:tolist(); return g end)
    assert.are.equal("MulBackward", y:grad_fn():name())
    local z = y:sin()
    gm:backward((z + before):sum())
    -- d/dx (sin(x^2) + 10 x^2) = 2x cos(x^2) + 20x
    H.same(x.grad, { 2 * math.cos(1) + 20, 4 * math.cos(4) + 40 }, 1e-12)
    H.same(y.grad, { math.cos(1), math.cos(4) }, 1e-12)
    assert.are.same(y.grad:tolist(), seen)
  end)
end)

describe("what a recording keeps", function()
  it("frees a branch computed and dropped during the forward pass, not at release", function()
    local x = ember.randn({ 250000 })   -- 1 MB
    local gm = GradManager():attach(x)
    gm:record()
    collectgarbage()
    local base = ember.memory_stats().bytes_in_use
    local kept = x:sin()                 -- a branch that lives: sin keeps x, its result is kept by us
    for _ = 1, 10 do
      local branch = (x * 2):exp():tanh():sigmoid()   -- exp, tanh, sigmoid keep their outputs
      branch = nil                                      -- luacheck: ignore
    end
    collectgarbage()
    local grown = ember.memory_stats().bytes_in_use - base
    -- only `kept` (1 MB) and a few scalars remain: the ten branches' 40 MB are gone
    assert.is_true(grown < 1.1e6, "the recording holds " .. grown .. " bytes")
    assert.are.equal(1, ember.autodiff.stats().saved_tensors)   -- sin's x; the branches kept 30
    gm:backward(kept:sum())
    H.same(x.grad, x:cos():tolist(), 1e-6)
  end)

  it("counts a tensor as freed right after collectgarbage()", function()
    collectgarbage()
    local before = ember.memory_stats()
    local t = ember.zeros({ 1000, 1000 })
    assert.are.equal(before.live_tensors + 1, ember.memory_stats().live_tensors)
    t = nil   -- luacheck: ignore
    collectgarbage()
    local after = ember.memory_stats()
    assert.are.equal(before.live_tensors, after.live_tensors)
    assert.are.equal(before.bytes_in_use, after.bytes_in_use)
  end)

  it("keeps what a live result's graph needs, and second derivatives through kept outputs", function()
    local x = ember.tensor({ 0.3, -0.7 }, { dtype = "float64" })
    local outer = GradManager():attach(x)
    local inner = GradManager():attach(x)
    outer:record()
    inner:record()
    local y = (x:exp() * x):sum()        -- exp keeps its output; d/dx = e^x (1 + x)
    collectgarbage()
    inner:backward(y)
    local g = x.grad
    H.same(g, { math.exp(0.3) * 1.3, math.exp(-0.7) * 0.3 }, 1e-12)
    x.grad = nil
    outer:backward(g:sum())               -- d2/dx2 = e^x (2 + x)
    H.same(x.grad, { math.exp(0.3) * 2.3, math.exp(-0.7) * 1.3 }, 1e-12)
  end)
end)
