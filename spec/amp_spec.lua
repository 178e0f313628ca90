-- ember.autocast and ember.amp.GradScaler: two small models against PyTorch
-- 1.13's CPU autocast to bfloat16 (spec/fixtures/amp_torch.lua, written by
-- gen_amp.py), forward and gradients; the op lists; scopes (nested, turned
-- off, restored after an error); the scaler's update rule on a fixed
-- sequence of found-inf flags, derived by hand from PyTorch's documented
-- rule; skipped steps that leave parameters and optimizer state untouched.
local H = require("helpers")
local ember = H.ember
local F, optim = ember.nn.functional, ember.optim
local GradManager = ember.autodiff.GradManager
local GradScaler = ember.amp.GradScaler
local CASES = dofile("spec/fixtures/amp_torch.lua")

local FORWARD = {
  mlp = function(a) return F.linear(F.relu(F.linear(a.x, a.w1, a.b1)), a.w2, a.b2) end,
  cnn = function(a)
    return F.conv1d(F.relu(F.conv2d(a.x, a.k1, a.c1, { padding = 1 })):flatten(3), a.k2, a.c2)
  end,
}
local LOSS = {
  mlp = function(out, a) return F.cross_entropy(out, a.labels) end,
  cnn = function(out, a) return F.mse_loss(out, a.target) end,
}

describe("autocast to bfloat16 against PyTorch 1.13", function()
  for _, c in ipairs(CASES) do
    it(c.name .. ": bfloat16 output, float32 loss and float32 gradients within bfloat16's tolerance", function()
      local a, leaves = {}, {}
      for k, v in pairs(c.params) do a[k] = ember.tensor(v); leaves[#leaves + 1] = k end
      for k, v in pairs(c.inputs) do
        a[k] = ember.tensor(v, { dtype = k == "labels" and "int64" or "float32" })
        if k ~= "labels" then leaves[#leaves + 1] = k end
      end
      local attached = {}
      for i, k in ipairs(leaves) do attached[i] = a[k] end
      local gm = GradManager():attach(attached)
      gm:record()
      local out, loss = ember.autocast("bfloat16", function()
        local out = FORWARD[c.name](a)
        return out, LOSS[c.name](out, a)
      end)
      gm:backward(loss)
      assert.are.equal("bfloat16", out.dtype)
      assert.are.equal("float32", loss.dtype)
      H.same(out, c.out, 1e-2, c.out_shape)
      H.same(loss, c.loss, 1e-2)
      for _, k in ipairs(leaves) do
        assert.are.equal("float32", a[k].dtype)
        assert.are.equal("float32", a[k].grad.dtype)
        local want, scale = H.flatten(c.grads[k]), 0
        for _, v in ipairs(want) do scale = math.max(scale, math.abs(v)) end
        for i, v in ipairs(want) do want[i] = v / scale end
        H.same(a[k].grad / scale, want, 2e-2)   -- to within 2% of the largest entry
      end
    end)
  end
end)

describe("autocast's op lists", function()
  local x, w = ember.randn({ 4, 6 }), ember.randn({ 3, 6 })
  local img, k = ember.randn({ 2, 2, 5, 5 }), ember.randn({ 3, 2, 3, 3 })

  it("runs matmul, linear and the convolutions in the scope's dtype", function()
    ember.autocast("bfloat16", function()
      assert.are.equal("bfloat16", x:matmul(w:t()).dtype)
      assert.are.equal("bfloat16", ember.matmul(x, w:t()).dtype)
      assert.are.equal("bfloat16", F.linear(x, w, ember.zeros({ 3 })).dtype)
      assert.are.equal("bfloat16", F.conv2d(img, k, ember.zeros({ 3 })).dtype)
      assert.are.equal("bfloat16", F.conv1d(ember.randn({ 2, 2, 7 }), ember.randn({ 3, 2, 3 })).dtype)
      assert.are.equal("bfloat16", F.conv_transpose2d(img, ember.randn({ 2, 3, 3, 3 })).dtype)
      assert.are.equal("bfloat16", ember.nn.Linear(6, 3)(x).dtype)
      assert.are.equal("bfloat16", ember.nn.Conv2d(2, 3, 3)(img).dtype)
      assert.are.equal("bfloat16", ember.nn.Conv1d(2, 3, 3)(ember.randn({ 2, 2, 7 })).dtype)
      assert.are.equal("bfloat16", ember.nn.ConvTranspose2d(2, 3, 3)(img).dtype)
    end)
    ember.autocast("float16", function() assert.are.equal("float16", x:matmul(w:t()).dtype) end)
  end)

  it("computes a product as float32 GEMM of the rounded inputs, rounded once", function()
    local a, b = ember.randn({ 7, 33 }), ember.randn({ 33, 5 })
    local got = ember.autocast("bfloat16", function() return a:matmul(b) end)
    local r16 = function(t) return t:to("bfloat16"):to("float32") end
    local want = r16(a):matmul(r16(b)):to("bfloat16")
    assert.are.same(want:to("float32"):tolist(), got:to("float32"):tolist())
  end)

  it("runs softmax, reductions, norms and losses in float32", function()
    local h = ember.randn({ 4, 6 }):to("bfloat16")
    ember.autocast("bfloat16", function()
      for name, f in pairs({
        softmax = function() return h:softmax(2) end, log_softmax = function() return F.log_softmax(h, 2) end,
        sum = function() return h:sum() end, norm = function() return h:norm() end,
        logsumexp = function() return h:logsumexp(2) end,
        layer_norm = function() return F.layer_norm(h, { 6 }) end,
        batch_norm = function() return ember.nn.BatchNorm1d(6)(h) end,
        group_norm = function() return F.group_norm(h:view(4, 6, 1), 2) end,
        instance_norm = function() return F.instance_norm(h:view(2, 2, 6)) end,
        mse_loss = function() return F.mse_loss(h, h * 2) end,
        cross_entropy = function() return F.cross_entropy(h, ember.tensor({ 1, 2, 3, 4 }, { dtype = "int64" })) end,
        lstm_cell = function() return (F.lstm_cell(h:narrow(2, 1, 4), h:narrow(2, 3, 4), h:narrow(2, 1, 1))) end,
        gru_cell = function() return F.gru_cell(h:narrow(2, 1, 3), h:narrow(2, 4, 3), h:narrow(2, 1, 1)) end,
      }) do
        assert.are.equal("float32", f().dtype, name)
      end
    end)
  end)

  it("keeps adaptive average pooling in its input's dtype, though it is built on matmul", function()
    ember.autocast("bfloat16", function()
      assert.are.equal("float32", F.adaptive_avg_pool2d(img, 2).dtype)
      assert.are.equal("float32", ember.nn.AdaptiveAvgPool2d({ 3, 2 })(img).dtype)
    end)
    local want = F.adaptive_avg_pool2d(img, 2)
    H.same(ember.autocast("bfloat16", function() return F.adaptive_avg_pool2d(img, 2) end), want:tolist(), 1e-6)
  end)

  it("leaves float64 and everything outside a scope as it was", function()
    local d = ember.randn({ 3, 3 }, { dtype = "float64" })
    ember.autocast("bfloat16", function() assert.are.equal("float64", d:matmul(d).dtype) end)
    assert.are.equal("float32", x:matmul(w:t()).dtype)
    assert.are.equal("bfloat16", x:to("bfloat16"):softmax(2).dtype)
    assert.is_false(ember.is_autocast_enabled())
    assert.is_nil(ember.get_autocast_dtype())
  end)
end)

describe("autocast scopes", function()
  local x = ember.randn({ 2, 2 })

  it("nest, turn off inside with false or enabled = false, and return fn's results", function()
    local seen = {}
    local r1, r2 = ember.autocast("bfloat16", function(p, q)
      seen[1] = ember.get_autocast_dtype()
      ember.autocast(false, function()
        seen[2] = x:matmul(x).dtype
        ember.autocast("float16", function() seen[3] = x:matmul(x).dtype end)
      end)
      ember.autocast({ dtype = "float16", enabled = false }, function() seen[4] = ember.is_autocast_enabled() end)
      seen[5] = x:matmul(x).dtype
      return p + q, "done"
    end, 1, 2)
    assert.are.same({ "bfloat16", "float32", "float16", false, "bfloat16" }, seen)
    assert.are.equal(3, r1)
    assert.are.equal("done", r2)
  end)

  it("are left after an error in fn, which propagates", function()
    H.raises(function() ember.autocast("bfloat16", function() error("inner failure") end) end, "inner failure")
    assert.is_false(ember.is_autocast_enabled())
    assert.are.equal("float32", x:matmul(x).dtype)
  end)

  it("refuse a bad dtype or a missing function, naming the call and the value", function()
    H.raises(function() ember.autocast("float64", function() end) end,
      "ember.autocast", "\"bfloat16\" or \"float16\"", "\"float64\"")
    H.raises(function() ember.autocast({ dtype = 3 }, function() end) end, "ember.autocast", "got 3")
    H.raises(function() ember.autocast("bfloat16") end, "ember.autocast: expected a function, got nil")
    assert.is_false(ember.is_autocast_enabled())
  end)
end)

-- an optimizer over one parameter whose gradient is set by hand
local function one_param(grad)
  local p = ember.tensor({ 1, 2, 3 })
  local opt = optim.SGD({ p }, { lr = 0.1 })
  p.grad = ember.tensor(grad)
  return p, opt
end

describe("recurrent layers under autocast", function()
  -- the gates' products run in bfloat16, the fused cells in float32 (they
  -- take float32 or float64), so the layer's outputs and every gradient are
  -- float32 and within bfloat16's rounding of the float32 run
  for _, kind in ipairs({ "LSTM", "GRU" }) do
    it("nn." .. kind .. " trains under bfloat16 autocast, close to float32", function()
      ember.manual_seed(3)
      local layer = ember.nn[kind](4, 5, { num_layers = 2 })
      local x = ember.randn({ 6, 3, 4 })
      local function run(dt)
        local gm = GradManager():attach(layer:parameters())
        gm:record()
        local out = ember.autocast({ dtype = dt or "bfloat16", enabled = dt ~= nil }, function() return layer(x) end)
        gm:backward((out:float() * out:float()):sum())
        local grads = {}
        for i, p in ipairs(layer:parameters()) do grads[i] = p.grad; p.grad = nil end
        return out, grads
      end
      local want, wgrads = run(nil)
      local got, grads = run("bfloat16")
      assert.are.equal("float32", got.dtype)
      H.same(got, want:tolist(), 0.03)
      for i, g in ipairs(grads) do
        assert.are.equal("float32", g.dtype)
        local scale = wgrads[i]:abs():max():item()
        H.same(g / scale, (wgrads[i] / scale):tolist(), 0.05)
      end
    end)
  end
end)

describe("autocast's cast cache", function()
  -- the distinct ToDtypeBackward nodes of y's graph whose input is w's AccumulateGrad
  local function casts_of(y)
    local seen, found, stack = {}, 0, { y:grad_fn() }
    while #stack > 0 do
      local n = table.remove(stack)
      if not seen[n] then
        seen[n] = true
        local nexts = n:next_functions()
        if n:name() == "ToDtypeBackward" and nexts[1].node and nexts[1].node:name() == "AccumulateGrad" then
          found = found + 1
        end
        for _, e in ipairs(nexts) do if e.node then stack[#stack + 1] = e.node end end
      end
    end
    return found
  end
  -- three steps of h = tanh(h w) under autocast, recorded; the loss and w's gradient
  local function unrolled(w, opts)
    local gm = GradManager():attach({ w })
    gm:record()
    local loss, casts = ember.autocast(opts, function()
      local h = ember.full({ 2, 3 }, 0.5)
      for _ = 1, 3 do h = h:matmul(w):tanh() end
      local l = h:float():sum()
      return l, casts_of(l)
    end)
    gm:backward(loss)
    return loss:item(), w.grad, casts
  end

  -- with the cache, the three uses' gradients meet in the one bfloat16 cast
  -- and sum there, as in PyTorch; without it, each is cast to float32 first:
  -- the two agree within bfloat16's rounding
  it("casts a parameter once per scope however many ops use it, with its gradient in tolerance", function()
    local w = ember.tensor({ { 0.5, -0.25, 0.125 }, { 0.75, 0.5, -0.5 }, { -0.25, 1, 0.25 } })
    local l1, g1, n1 = unrolled(w, "bfloat16")
    w.grad = nil
    local l0, g0, n0 = unrolled(w, { dtype = "bfloat16", cache_enabled = false })
    assert.are.equal(1, n1)
    assert.are.equal(3, n0)
    assert.are.equal(l0, l1)
    H.same(g1, g0:tolist(), 0.01)
  end)

  it("casts again in each new recording within one scope, and after an in-place write", function()
    local w = ember.full({ 2, 2 }, 0.5)
    local gm = GradManager():attach({ w })
    ember.autocast("bfloat16", function()
      for _ = 1, 2 do   -- each recording gets a cast it records, so w gets its gradient
        gm:record()
        gm:backward(ember.ones({ 1, 2 }):matmul(w):matmul(w):float():sum())
        assert.are.same({ { 2, 2 }, { 2, 2 } }, w.grad:tolist())
        w.grad = nil
      end
      gm:record()
      local before = ember.ones({ 1, 2 }):matmul(w)
      w:detach():mul_(2)   -- within the recording: only w's version tells the cast is stale
      local after = ember.ones({ 1, 2 }):matmul(w)
      gm:release()
      assert.are.same({ { 1, 1 } }, before:float():tolist())
      assert.are.same({ { 2, 2 } }, after:float():tolist())
    end)
  end)

  it("is shared by nested scopes and emptied when the outermost scope returns", function()
    local w = ember.full({ 2, 2 }, 0.5)
    local gm = GradManager():attach({ w })
    gm:record()
    local function cast_node(y)   -- the cast of w feeding y = w16 @ w16 (or its matmul)
      local n = y:grad_fn()
      while n:name() ~= "ToDtypeBackward" do n = n:next_functions()[1].node end
      return n
    end
    local a, b = ember.autocast("bfloat16", function()
      local inner = ember.autocast("bfloat16", function() return w:matmul(w) end)
      return inner, w:matmul(w)
    end)
    local c = ember.autocast("bfloat16", function() return w:matmul(w) end)
    assert.is_true(rawequal(cast_node(a), cast_node(b)))
    assert.is_false(rawequal(cast_node(a), cast_node(c)))
    gm:release()
  end)
end)

describe("GradScaler", function()
  it("follows PyTorch's update rule on a fixed sequence of found-inf flags", function()
    -- growth_interval 3: three clean steps in a row double the scale, an inf
    -- halves it and restarts the count (worked out by hand from the rule)
    local flags = { false, false, false, true, false, false, true, false, false, false, false }
    local want = { 8, 8, 16, 8, 8, 8, 4, 4, 4, 8, 8 }
    local trackers = { 1, 2, 0, 0, 1, 2, 0, 1, 2, 0, 1 }
    local s = GradScaler({ init_scale = 8, growth_factor = 2, backoff_factor = 0.5, growth_interval = 3 })
    for i, inf in ipairs(flags) do
      local _, opt = one_param({ 1, inf and math.huge or 2, 3 })
      s:step(opt)
      s:update()
      assert.are.equal(want[i], s:get_scale(), "step " .. i)
      assert.are.equal(trackers[i], s:state_dict()._growth_tracker, "step " .. i)
    end
  end)

  it("rounds the scale to float32 and keeps it when growing would overflow", function()
    local s = GradScaler({ init_scale = 3e38, growth_factor = 1.5, growth_interval = 1 })
    assert.are.equal(3.0000000054977558e38, s:get_scale())   -- float32(3e38)
    local _, opt = one_param({ 1, 1, 1 })
    s:step(opt)
    s:update()
    assert.are.equal(3.0000000054977558e38, s:get_scale())
    s:update(0.1)
    assert.are.equal(0.10000000149011612, s:get_scale())
  end)

  it("scales the loss, unscales the gradients and steps on finite ones", function()
    local s = GradScaler({ init_scale = 4 })
    assert.are.equal(10, s:scale(ember.tensor(2.5)):item())
    local two = s:scale({ ember.tensor({ 1, 2 }), ember.tensor(0.5) })
    assert.are.same({ 4, 8 }, two[1]:tolist())
    assert.are.equal(2, two[2]:item())
    local p, opt = one_param({ 4, 8, -4 })
    s:unscale_(opt)
    assert.are.same({ 1, 2, -1 }, p.grad:tolist())
    s:step(opt)
    H.same(p, { 0.9, 1.8, 3.1 })
  end)

  it("scales a 0-d float16 loss in float32, as PyTorch does", function()
    local scaled = GradScaler():scale(ember.tensor(3, { dtype = "float16" }))
    assert.are.equal("float32", scaled.dtype)
    assert.are.equal(3 * 65536, scaled:item())
  end)

  for _, bad in ipairs({ math.huge, -math.huge, 0 / 0 }) do
    it("skips the step when a gradient holds " .. tostring(bad) .. ", parameters and state untouched", function()
      local p = ember.tensor({ 1, 2, 3 })
      local opt = optim.Adam({ p }, { lr = 0.1 })
      local s = GradScaler({ init_scale = 2 })
      p.grad = ember.tensor({ 1, 1, 1 })
      s:step(opt)
      s:update()
      local st = opt:state_dict().state[1]
      local before = { p:tolist(), st.step, st.exp_avg:tolist(), st.exp_avg_sq:tolist() }
      p.grad = ember.tensor({ 1, bad, 1 })
      assert.is_nil(s:step(opt))
      s:update()
      st = opt:state_dict().state[1]
      assert.are.same(before, { p:tolist(), st.step, st.exp_avg:tolist(), st.exp_avg_sq:tolist() })
      assert.are.equal(1, s:get_scale())   -- halved
    end)
  end

  it("skips the steps of a float16 autocast model whose activations overflow", function()
    ember.manual_seed(3)
    local lin = ember.nn.Linear(4, 2)
    local params = lin:parameters()
    local opt = optim.SGD(params, { lr = 0.1 })
    local gm = GradManager():attach(params)
    local s = GradScaler({ init_scale = 2 ^ 10 })
    local function step(x)
      gm:record()
      local loss = ember.autocast("float16", function() return F.mse_loss(lin(x), ember.zeros({ 3, 2 })) end)
      gm:backward(s:scale(loss))
      s:step(opt)
      s:update()
      opt:zero_grad()
    end
    local before = { lin.weight:tolist(), lin.bias:tolist() }
    step(ember.full({ 3, 4 }, 1e5))       -- float16 tops out at 65504: the product is inf
    assert.are.same(before, { lin.weight:tolist(), lin.bias:tolist() })
    assert.are.equal(2 ^ 9, s:get_scale())
    assert.are.equal("float32", lin.weight.dtype)
    step(ember.randn({ 3, 4 }))
    assert.are_not.same(before[1], lin.weight:tolist())
    assert.are.equal(2 ^ 9, s:get_scale())
  end)

  it("saves and loads its state with PyTorch's keys", function()
    local s = GradScaler({ init_scale = 16, growth_interval = 5 })
    local _, opt = one_param({ 1, 1, 1 })
    s:step(opt)
    s:update()
    local sd = s:state_dict()
    assert.are.same({ scale = 16, growth_factor = 2, backoff_factor = 0.5, growth_interval = 5, _growth_tracker = 1 }, sd)
    local t = GradScaler()
    t:load_state_dict(sd)
    assert.are.same(sd, t:state_dict())
    assert.are.same({}, GradScaler({ enabled = false }):state_dict())
  end)

  it("does nothing but step when disabled", function()
    local s = GradScaler({ enabled = false })
    local loss = ember.tensor(2)
    assert.are.equal(loss, s:scale(loss))
    local p, opt = one_param({ 1, math.huge, 1 })
    s:step(opt)
    s:update()
    assert.is_false(s:is_enabled())
    assert.are.equal(1, s:get_scale())
    assert.are.equal(-math.huge, p:tolist()[2])
  end)

  it("names the call and the value on misuse", function()
    H.raises(function() GradScaler({ growth_factor = 0.5 }) end, "ember.amp.GradScaler", "growth_factor must be a number above 1, got 0.5")
    H.raises(function() GradScaler({ init_scale = -1 }) end, "init_scale must be a positive finite number, got -1")
    H.raises(function() GradScaler({ growth_interval = 2.5 }) end, "growth_interval must be a positive integer, got 2.5")
    H.raises(function() GradScaler({ scale = 1 }) end, "unknown option 'scale'")
    H.raises(function() GradScaler(5) end, "options must be a table, got number")
    local s = GradScaler()
    H.raises(function() s:update() end, "no inf checks were recorded")
    H.raises(function() s:unscale_(42) end, "unscale_: expected an optimizer, got number")
    H.raises(function() s:scale("loss") end, "scale: expected a tensor or a list of tensors, got string")
    local _, opt = one_param({ 1, 1, 1 })
    s:unscale_(opt)
    H.raises(function() s:unscale_(opt) end, "unscale_() has already been called on this optimizer")
    s:step(opt)
    H.raises(function() s:step(opt) end, "step() has already been called since the last update()")
    H.raises(function() s:update(0) end, "new_scale must be a positive finite number, got 0")
    s:update()
    local p16 = ember.tensor({ 1, 2 }, { dtype = "float16" })
    local opt16 = optim.SGD({ p16 }, { lr = 0.1 })
    p16.grad = ember.tensor({ 1, 1 }, { dtype = "float16" })
    H.raises(function() s:unscale_(opt16) end, "attempting to unscale float16 gradients")
    H.raises(function() s:load_state_dict({}) end, "load_state_dict: expected the table state_dict() gives, got an empty table")
    H.raises(function() s:load_state_dict({ scale = 2, growth_factor = 2, backoff_factor = 2, growth_interval = 1, _growth_tracker = 0 }) end,
      "backoff_factor must be a number in (0, 1), got 2")
    assert.are.equal(65536, s:get_scale())
  end)
end)

describe("the 16-bit floats under autocast's casts", function()
  it("round float32 to nearest even, contiguous and strided, keeping inf and NaN", function()
    local v = { 1, 1 + 2 ^ -8, 1 + 3 * 2 ^ -8, -2.5, 3.4028234663852886e38, math.huge, 65519, 65520,
      2 ^ -25, 1.5 * 2 ^ -24 }
    local bf = { 1, 1, 1 + 2 ^ -6, -2.5, math.huge, math.huge, 65536, 65536, 2 ^ -25, 1.5 * 2 ^ -24 }
    local hf = { 1, 1 + 2 ^ -8, 1 + 3 * 2 ^ -8, -2.5, math.huge, math.huge, 65504, math.huge, 0, 2 ^ -23 }
    local t = ember.tensor(v)
    local strided = ember.stack({ t, t }, 2):select(2, 1)   -- stride 2
    for _, x in ipairs({ t, strided }) do
      assert.are.same(bf, x:to("bfloat16"):to("float32"):tolist())
      assert.are.same(hf, x:to("float16"):to("float32"):tolist())
      for _, dt in ipairs({ "bfloat16", "float16" }) do
        local back = x:clone():fill_(0 / 0):to(dt):to("float32")
        assert.are.equal(0, back:eq(back):sum():item())   -- NaN is not equal to itself
      end
    end
  end)

  it("add, multiply, divide and compare with the bits of the exact result rounded once", function()
    ember.manual_seed(5)
    for _, dt in ipairs({ "bfloat16", "float16" }) do
      local a, b = ember.randn({ 300 }):to(dt), ember.randn({ 300 }):to(dt)
      local a64, b64 = a:to("float64"), b:to("float64")
      for _, op in ipairs({ "add", "sub", "mul" }) do   -- exact in float64, one rounding to dt
        assert.are.same(a64[op](a64, b64):to("float32"):to(dt):tolist(), a[op](a, b):tolist(), op)
      end
      assert.are.same(a64:lt(b64):tolist(), a:lt(b):tolist())
      assert.are.equal(dt, (a / b).dtype)
    end
  end)
end)
