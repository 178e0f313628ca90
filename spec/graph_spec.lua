-- The graph toolbox (PyTorch's torch.autograd.graph on ember's engine), with
-- exact values.
local H = require("helpers")
local ember = H.ember
local ad = ember.autodiff
local graph = ad.graph
local GradManager = ad.GradManager
local F64 = { dtype = "float64" }

local function live_nodes()
  collectgarbage(); collectgarbage()
  return ad.stats().live_nodes
end

describe("nodes", function()
  it("name themselves and list their next functions", function()
    local x, c = ember.tensor({ 1, 2 }), ember.tensor({ 3, 4 })
    local gm = GradManager():attach(x)
    gm:record()
    local y = x * c
    local z = y + x
    local cl = z:clone()
    assert.are.equal("MulBackward", y:grad_fn():name())
    assert.are.equal("AddBackward", z:grad_fn():name())
    assert.are.equal("CloneBackward", cl:grad_fn():name())
    assert.is_nil(x:grad_fn())
    assert.is_nil(c:grad_fn())
    local nf = y:grad_fn():next_functions()
    assert.are.equal(2, #nf)
    assert.are.equal("AccumulateGrad", nf[1].node:name())
    assert.are.equal(1, nf[1].output_nr)
    assert.is_nil(nf[2].node)                      -- c is not tracked
    assert.are.equal(nf[1].node, nf[1][1])          -- also readable as [1], [2]
    local zn = z:grad_fn():next_functions()
    assert.is_true(rawequal(zn[1].node, y:grad_fn()))
    assert.is_true(rawequal(y:grad_fn(), y:grad_fn()))
    assert.is_true(rawequal(z:grad_fn():metadata(), z:grad_fn():metadata()))
    local n3 = (x * 2):grad_fn():next_functions()
    assert.is_nil(n3[2].node)                       -- a number operand
    gm:release()
  end)

  it("run hooks and prehooks that may replace gradients, removable", function()
    local x, gm = H.recording({ 1, 2 })
    local y = x * 3
    local n = y:grad_fn()
    local seen = {}
    n:register_prehook(function(go) seen[#seen + 1] = go[1]:tolist()[1]; return { go[1] * 2 } end)
    local h = n:register_hook(function(gi, go) seen[#seen + 1] = gi[1]:tolist()[1]; return { gi[1] + 1 } end)
    local dead = n:register_hook(function() error("removed hooks must not run") end)
    dead:remove(); dead:remove()
    gm:backward(y, ember.tensor({ 1, 1 }))
    -- the prehook sees dy = 1 and doubles it: grad = 2 * 3 = 6, then the hook adds 1
    assert.are.same({ 1, 6 }, seen)
    H.same(x.grad, { 7, 7 })
    h:remove()
  end)

  it("keep a hook removed during backward running for the executing node", function()
    local x, gm = H.recording({ 1 })
    local y = x * 5
    local n = y:grad_fn()
    local h
    local ran = false
    n:register_prehook(function() h:remove() end)
    h = n:register_hook(function() ran = true end)
    gm:backward(y, ember.tensor({ 1 }))
    assert.is_true(ran)
  end)

  it("report a hook returning the wrong shape or type, and leave the manager usable", function()
    local x, gm = H.recording({ 1, 2 })
    local y = x * 3
    y:grad_fn():register_hook(function() return { ember.ones({ 5 }) } end)
    local ok, err = pcall(gm.backward, gm, y, ember.ones({ 2 }))
    assert.is_false(ok)
    assert.truthy(err:find("MulBackward") and err:find("{5}", 1, true) and err:find("{2}", 1, true))
    gm:record()
    local y2 = x * 3
    y2:grad_fn():register_prehook(function() return 7 end)
    ok, err = pcall(gm.backward, gm, y2, ember.ones({ 2 }))
    assert.is_false(ok)
    assert.truthy(err:find("MulBackward") and err:find("number"))
    assert.is_nil(x.grad)
    gm:record(); gm:backward((x * 3):sum())
    H.same(x.grad, { 3, 3 })
    assert.are.equal(0, live_nodes())
  end)
end)

describe("tensor hooks", function()
  it("run in the documented order", function()
    local x = ember.tensor({ 2 })
    local order = {}
    local gm = GradManager():attach(x, function(_, g) order[#order + 1] = "callback " .. g:item(); return g end)
    x:register_hook(function(g) order[#order + 1] = "hook " .. g:item(); return g * 10 end)
    x:register_post_accumulate_grad_hook(function(t) order[#order + 1] = "post " .. t.grad:item() end)
    gm:record()
    local y = x * 3
    y:register_hook(function(g) order[#order + 1] = "y hook " .. g:item() end)
    y:grad_fn():register_prehook(function() order[#order + 1] = "prehook" end)
    gm:backward(y, ember.tensor({ 1 }))
    assert.are.same({ "y hook 1", "prehook", "hook 3", "callback 30", "post 30" }, order)
  end)

  it("registered before an in-place op stay with the old node", function()
    local x, gm = H.recording({ 1 })
    local y = x * 2
    local got = {}
    y:register_hook(function(g) got[#got + 1] = g:item() end)
    y:mul_(5)                 -- y's history moves on; the hook stays on MulBackward of x * 2
    gm:backward(y, ember.tensor({ 1 }))
    assert.are.same({ 5 }, got)
    H.same(x.grad, { 10 })
  end)
end)

describe("gradient edges and versions", function()
  it("get_gradient_edge gives the node a tensor's gradient flows into", function()
    local x, gm = H.recording({ 1 })
    local y = x * 2
    local e = graph.get_gradient_edge(y)
    assert.is_true(rawequal(e.node, y:grad_fn()))
    assert.are.equal(1, e.output_nr)
    assert.are.equal("AccumulateGrad", graph.get_gradient_edge(x).node:name())
    gm:release()
  end)

  it("share versions between views; increment_version bumps them", function()
    local t = ember.zeros({ 4 })
    local v = t:narrow(1, 2, 2)
    assert.are.equal(0, t:version())
    graph.increment_version(v)
    assert.are.equal(1, t:version())
    t:add_(1)
    assert.are.equal(2, v:version())
  end)

  it("make a saved tensor modified in place fail with both versions", function()
    local x, gm = H.recording({ 1, 2 })
    local a = x:exp()          -- ExpBackward keeps its output
    local y = a * 1
    a:mul_(2)
    local ok, err = pcall(gm.backward, gm, y:sum())
    assert.is_false(ok)
    assert.truthy(err:find("ExpBackward") and err:find("version 1") and err:find("version 0"))
  end)
end)

describe("saved-tensor hooks", function()
  it("pack once per saved tensor at forward and unpack at backward", function()
    local x, gm = H.recording({ 1, 2 })
    local packed, unpacked = 0, 0
    local y = graph.saved_tensors_hooks(
      function(t) packed = packed + 1; return { t:clone() } end,
      function(box) unpacked = unpacked + 1; return box[1] end,
      function() return x * x end)
    assert.are.equal(2, packed)
    assert.are.equal(0, unpacked)
    gm:backward(y, ember.ones({ 2 }))
    assert.are.equal(2, unpacked)
    H.same(x.grad, { 2, 4 })
  end)

  it("raise at forward when a pack hook modifies its argument, naming the op", function()
    local x, gm = H.recording({ 1, 2 })
    local ok, err = pcall(graph.saved_tensors_hooks,
      function(t) t:add_(1); return t end, function(t) return t end,
      function() return x:exp() end)
    assert.is_false(ok)
    assert.truthy(err:find("ExpBackward"))
    gm:release()
  end)

  it("save_on_cpu is the identity for CPU tensors", function()
    local x, gm = H.recording({ 3 })
    local y = graph.save_on_cpu({ pin_memory = false }, function() return x * x end)
    gm:backward(y, ember.ones({ 1 }))
    H.same(x.grad, { 6 })
  end)

  it("disable_saved_tensors_hooks raises with its message", function()
    local x, gm = H.recording({ 1 })
    local ok, err = pcall(graph.disable_saved_tensors_hooks, "no hooks here", function()
      return graph.saved_tensors_hooks(function(t) return t end, function(t) return t end, function() return x * x end)
    end)
    assert.is_false(ok)
    assert.truthy(err:find("no hooks here"))
    -- the setting is restored
    local y = graph.saved_tensors_hooks(function(t) return t end, function(t) return t end, function() return x * x end)
    gm:backward(y, ember.ones({ 1 }))
    H.same(x.grad, { 2 })
  end)
end)

describe("multi-grad hooks", function()
  it("mode all calls once with nil for tensors that got no gradient", function()
    local a, b = ember.tensor({ 1 }), ember.tensor({ 2 })
    local gm = GradManager():attach({ a, b })
    local calls = {}
    local h = graph.register_multi_grad_hook({ a, b }, function(grads)
      calls[#calls + 1] = { grads.n, grads[1] and grads[1]:item() or "nil", grads[2] and grads[2]:item() or "nil" }
    end)
    gm:record(); gm:backward((a * 3):sum())
    gm:record(); gm:backward((a * b):sum())
    assert.are.same({ { 2, 3, "nil" }, { 2, 2, 1 } }, calls)
    h:remove(); h:remove()
    gm:record(); gm:backward((a * b):sum())
    assert.are.equal(2, #calls)
  end)

  it("mode any calls once with the first gradient", function()
    local a, b = ember.tensor({ 1 }), ember.tensor({ 2 })
    local gm = GradManager():attach({ a, b })
    local n = 0
    graph.register_multi_grad_hook({ a, b }, function(g) n = n + 1; assert.is_true(ember.is_tensor(g)) end,
      { mode = "any" })
    gm:record(); gm:backward((a * b):sum())
    assert.are.equal(1, n)
    assert.has_error(function() graph.register_multi_grad_hook({ a }, function() end, { mode = "some" }) end)
  end)
end)

describe("mutation of saved tensors", function()
  it("lets backward see the value before the mutation", function()
    local x = ember.tensor({ 1, 2 })
    local gm = GradManager():attach(x)
    graph.allow_mutation_on_saved_tensors(function()
      gm:record()
      local a = x * 1
      local y = a * a
      a:add_(10)
      gm:backward(y, ember.ones({ 2 }))
    end)
    H.same(x.grad, { 2, 4 })
  end)

  it("refuses nesting and backward outside the context", function()
    assert.has_error(function()
      graph.allow_mutation_on_saved_tensors(function() graph.allow_mutation_on_saved_tensors(function() end) end)
    end)
    local x = ember.tensor({ 1 })
    local gm = GradManager():attach(x)
    local y = graph.allow_mutation_on_saved_tensors(function() gm:record(); return x * x end)
    local ok, err = pcall(gm.backward, gm, y, ember.ones({ 1 }))
    assert.is_false(ok)
    assert.truthy(err:find("allow_mutation_on_saved_tensors"))
  end)
end)

describe("debug and anomaly", function()
  it("detect_anomaly names the node and the forward's file:line", function()
    local x, gm = H.recording({ 0 })
    local ok, err = pcall(ad.detect_anomaly, function()
      local y = x:sqrt()   -- d sqrt at 0 is inf
      gm:backward(y:sum())
    end)
    assert.is_false(ok)
    assert.truthy(err:find("SqrtBackward"))
    assert.truthy(err:find("inf"))
    assert.truthy(err:find("graph_spec.lua:%d+"))
  end)

  it("set_debug logs executed nodes", function()
    -- the log goes to stderr; here we only check that it runs and leaves results alone
    local x = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    local gm = GradManager():attach(x)
    ad.set_debug(true)
    gm:record(); gm:backward((x * x):sum())
    ad.set_debug(false)
    H.same(x.grad, { { 2, 4, 6 }, { 8, 10, 12 } })
  end)
end)

describe("checkpoint and functional forms", function()
  it("checkpoint recomputes, with the same gradients and fewer saved tensors", function()
    local function block(a) return ((a * a):exp() * a):sin() end
    local x, gm = H.recording({ 0.1, 0.2, 0.3 }, F64)
    local y = block(x):sum()
    local plain_saved = ad.stats().saved_tensors
    gm:backward(y)
    local g1 = x.grad:tolist()
    x.grad = nil
    gm:record()
    local y2 = ad.checkpoint(block, x):sum()
    local ck_saved = ad.stats().saved_tensors
    gm:backward(y2)
    H.same(x.grad, g1, 1e-12)
    assert.is_true(ck_saved < plain_saved, ck_saved .. " < " .. plain_saved)
  end)

  it("grad composes: grad(grad(x^3)) at 3 is 18", function()
    local f = function(x) return x * x * x end
    H.same(ad.grad(f)(ember.tensor(3.0, F64)), 27)
    H.same(ad.grad(ad.grad(f))(ember.tensor(3.0, F64)), 18)
  end)

  it("vjp gives outputs and vector-Jacobian products", function()
    local x = ember.tensor({ 1, 2, 3 })
    local y, grads = ad.vjp(function(a) return a * a end, { x }, ember.tensor({ 1, 0, 2 }))
    H.same(y, { 1, 4, 9 })
    H.same(grads[1], { 2, 0, 12 })
    assert.is_nil(x.grad)
  end)
end)

describe("no leaks", function()
  it("hooks keep neither tensors nor graphs alive", function()
    collectgarbage(); ember._sweep()
    local weak = setmetatable({}, { __mode = "v" })
    local before = ember.memory_stats().live_tensors
    for i = 1, 1000 do
      local x = ember.ones({ 8 })
      local gm = GradManager():attach(x)
      gm:record()
      local y = x * 2
      y:register_hook(function(g) return g end)
      y:grad_fn():register_hook(function() end)
      x:register_hook(function(g) return g end)
      weak[i] = y
      if i % 2 == 0 then gm:backward(y:sum()) else gm:release() end
    end
    collectgarbage(); collectgarbage(); ember._sweep()
    assert.is_nil(next(weak))
    assert.is_true(ember.memory_stats().live_tensors <= before + 4)
    assert.are.equal(0, live_nodes())
  end)
end)
