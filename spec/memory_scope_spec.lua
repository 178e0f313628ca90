-- ember.tidy(fn, ...) and ember.keep(t): every tensor made inside fn that fn
-- does not return (nor anybody keep) is freed when fn returns or raises;
-- memory C still holds (a view's base, the tape's saved tensors, a .grad)
-- stays; a freed tensor used later raises naming the op.
local H = require("helpers")
local ember = H.ember
local GradManager = ember.autodiff.GradManager

-- runs fn with the GC stopped (only what frees at once gives memory back),
-- restarting it whatever happens
local function without_gc(fn)
  collectgarbage("stop")
  local ok, err = pcall(fn)
  collectgarbage("restart")
  assert(ok, err)
end

local function in_use()
  collectgarbage()
  return ember.memory_stats().bytes_in_use
end

describe("ember.tidy", function()
  it("returns fn's results unchanged and passes its arguments", function()
    local a, b = ember.tensor({ 1, 2, 3 }), ember.tensor({ 4, 5, 6 })
    local s, n, c = ember.tidy(function(x, y) return ((x * y) + x):sum(), 7, x * 2 end, a, b)
    -- (1*4+1) + (2*5+2) + (3*6+3) = 38
    H.same(s, 38)
    assert.are.equal(7, n)
    H.same(c, { 2, 4, 6 })
    H.same(a, { 1, 2, 3 })   -- arguments made outside are left alone
  end)

  it("gives back the memory of every temporary at once: bytes_in_use back to its baseline", function()
    local a = ember.ones({ 1000, 100 })
    local base = in_use()
    local before = ember.memory_stats().bytes_in_use
    local s = ember.tidy(function()
      local t = a * 2
      local u = t + a
      local v = u:exp()
      assert.is_true(ember.memory_stats().bytes_in_use >= before + 3 * 400000)
      return v:sum()
    end)
    -- only the 0-d result is left (its storage is smaller than one class)
    assert.is_true(ember.memory_stats().bytes_in_use - before < 1024)
    assert.near(1000 * 100 * math.exp(3), s:item(), 1e-4 * 1000 * 100 * math.exp(3))
    s = nil
    assert.are.equal(base, in_use())
  end)

  it("frees what fn stored elsewhere: using it later raises naming the op, never crashes", function()
    local leaked
    local a = ember.tensor({ 1, 2 })
    ember.tidy(function() leaked = a * 3 end)
    H.raises(function() return leaked + 1 end, "ember.add: tensor argument 1 was freed")
    H.raises(function() return leaked:sum() end, "ember.sum: tensor argument 1 was freed")
    H.raises(function() return a + leaked end, "ember.add: tensor argument 2 was freed")
    assert.are.equal("tensor(<freed>)", tostring(leaked))
    H.raises(function() return leaked:shape() end, "ember.shape: tensor argument 1 was freed")
    H.raises(function() return ember.cat({ a, leaked }) end, "ember.cat: tensor argument 2 was freed")
    H.raises(function() a.grad = leaked end, "must be a tensor or nil, got a freed tensor")
    H.raises(function() return ember.autodiff.GradManager():attach(leaked) end, "was freed")
    local p = ember.ones({ 2 })
    p.grad = ember.tidy(function() return ember.ones({ 2 }) end)
    local opt = ember.optim.SGD({ p }, { lr = 1 })
    ember.tidy(function() p.grad = ember.ones({ 2 }) * 5 end)   -- the tidy's own .grad stays
    opt:step()
    H.same(p, { -4, -4 })
    H.same(a + 1, { 2, 3 })   -- everything else stays usable
  end)

  it("keeps what ember.keep marks, through every enclosing tidy", function()
    local kept
    local r = ember.tidy(function()
      return ember.tidy(function()
        kept = ember.keep(ember.tensor({ 5, 6 }) * 2)
        return 1
      end)
    end)
    assert.are.equal(1, r)
    H.same(kept, { 10, 12 })
    H.raises(function() ember.keep(3) end, "ember.keep")
  end)

  it("keeps tensors returned inside tables, and the .grad of a returned tensor", function()
    local out = ember.tidy(function()
      local x = ember.tensor({ 1, 2 })
      x.grad = ember.tensor({ 3, 4 })
      return { a = x + 1, list = { x * 2, { deep = x } } }
    end)
    H.same(out.a, { 2, 3 })
    H.same(out.list[1], { 2, 4 })
    H.same(out.list[2].deep.grad, { 3, 4 })
    -- an object of a class (a distribution) holds its tensors too
    local d = ember.tidy(function() return ember.distributions.Normal(ember.zeros({ 2 }) + 1, ember.ones({ 2 }) * 2) end)
    H.same(d:sample():shape() and d.loc, { 1, 1 })
    H.same(d.scale, { 2, 2 })
  end)

  it("nests: what an inner tidy returns is the outer one's, freed unless that one returns it too", function()
    local a = ember.tensor({ 1, 2, 3 })
    local inner_result, inner_temp
    local r = ember.tidy(function()
      inner_result = ember.tidy(function()
        inner_temp = a * 10
        return inner_temp + 1
      end)
      H.raises(function() return inner_temp + 0 end, "ember.add: tensor argument 1 was freed")
      H.same(inner_result, { 11, 21, 31 })   -- still usable in the outer tidy
      return inner_result * 2
    end)
    H.same(r, { 22, 42, 62 })
    H.raises(function() return inner_result + 0 end, "ember.add: tensor argument 1 was freed")
  end)

  it("frees everything made when fn raises, and the error propagates", function()
    local a = ember.ones({ 10000 })
    local base = in_use()
    local made
    local ok, err = pcall(ember.tidy, function()
      made = a * 2
      error("boom in the step")
    end)
    assert.is_false(ok)
    assert.matches("boom in the step", tostring(err))
    H.raises(function() return made + 0 end, "ember.add: tensor argument 1 was freed")
    assert.are.equal(base, in_use())
    -- an op's own error inside passes through unchanged
    assert.has_error(function()
      ember.tidy(function() return ember.ones({ 2, 3 }) + ember.ones({ 4 }) end)
    end)
    assert.are.equal(base, in_use())
    -- an error inside names the op the user's line called
    H.raises(function()
      ember.tidy(function() return ember.nn.functional.mse_loss(ember.ones({ 2, 3 }), ember.ones({ 3 })) end)
    end, "ember.nn.functional.mse_loss: input of shape {2, 3} and target of shape {3} differ")
  end)

  it("keeps a view whose base it frees: the view still holds the memory", function()
    local v = ember.tidy(function()
      local base = ember.arange(12):to("float32")
      return base:view({ 3, 4 })[2]
    end)
    H.same(v, { 4, 5, 6, 7 })
    H.same(v + 1, { 5, 6, 7, 8 })
  end)

  it("does not free tensors made before it, nor the wrappers of ops that return an argument", function()
    local a = ember.tensor({ 1, 2 })
    local r = ember.tidy(function()
      local same = a:contiguous()   -- a itself
      return same:sum()
    end)
    H.same(r, 3)
    H.same(a, { 1, 2 })
  end)

  it("in a sliced step (ember.frame) is the step's: what the host makes between slices stays", function()
    local a = ember.ones({ 8 })
    local run = ember.frame.step(function()
      return ember.tidy(function()
        local t = a * 2
        for _ = 1, 5 do t = t + 1 end   -- each add a yield point
        return t:sum():item()
      end)
    end)
    local host, slices = {}, 0
    while not run:is_done() do
      run:resume(0)
      slices = slices + 1
      host[#host + 1] = a * slices   -- made by the host between slices
    end
    assert.is_true(slices > 2)
    assert.are.equal(8 * 7, run:results())
    for i, t in ipairs(host) do H.same(t, { i, i, i, i, i, i, i, i }) end
  end)

  it("raises naming itself for a non-function", function()
    H.raises(function() ember.tidy(42) end, "ember.tidy: expected a function, got 42")
  end)
end)

describe("ember.tidy with autodiff", function()
  local function model_grads(use_tidy)
    local w = ember.tensor({ { 0.5, -1 }, { 2, 0.25 } })
    local b = ember.tensor({ 0.1, -0.2 })
    local x = ember.tensor({ { 1, 2 }, { 3, 4 }, { -1, 0.5 } })
    local gm = GradManager():attach({ w, b })
    gm:record()
    local function forward() return ((x:matmul(w) + b):tanh() * 3):sum() end
    local loss = use_tidy and ember.tidy(forward) or forward()
    gm:backward(loss)
    return loss:item(), w.grad:tolist(), b.grad:tolist()
  end

  it("a tidy inside gm:record: the tape keeps what backward needs, gradients unchanged", function()
    local l0, gw0, gb0 = model_grads(false)
    local l1, gw1, gb1 = model_grads(true)
    assert.are.equal(l0, l1)
    assert.are.same(gw0, gw1)
    assert.are.same(gb0, gb1)
    -- by hand: d/dw of sum(3 tanh(xw + b)) = x^T (3 (1 - tanh^2))
    local x = { { 1, 2 }, { 3, 4 }, { -1, 0.5 } }
    local w, b = { { 0.5, -1 }, { 2, 0.25 } }, { 0.1, -0.2 }
    for j = 1, 2 do
      local gb = 0
      for i = 1, 3 do
        local z = x[i][1] * w[1][j] + x[i][2] * w[2][j] + b[j]
        gb = gb + 3 * (1 - math.tanh(z) ^ 2)
      end
      assert.near(gb, gb0[j], 1e-5)
    end
  end)

  it("a whole step inside tidy: .grad and the optimizer's state survive, the temporaries go", function()
    local w = ember.tensor({ 1, -2, 3 })
    local gm = GradManager():attach(w)
    local opt = ember.optim.Adam({ w }, { lr = 0.1 })
    local ref = ember.tensor({ 1, -2, 3 })
    local gref = GradManager():attach(ref)
    local opt_ref = ember.optim.Adam({ ref }, { lr = 0.1 })
    local function step(p, g, o)
      o:zero_grad()
      g:record()
      g:backward((p * p):sum())
      o:step()
    end
    for _ = 1, 3 do
      ember.tidy(step, w, gm, opt)
      step(ref, gref, opt_ref)
    end
    assert.are.same(ref:tolist(), w:tolist())
    assert.are.same(ref.grad:tolist(), w.grad:tolist())
    H.same(opt.state[w].exp_avg, opt_ref.state[ref].exp_avg:tolist())
  end)

  it("a training loop with each step in tidy holds its memory steady: old gradients go at zero_grad", function()
    ember.manual_seed(0)
    local model = ember.nn.Sequential(ember.nn.Linear(20, 32), ember.nn.ReLU(), ember.nn.Linear(32, 4))
    local params = model:parameters()
    local opt = ember.optim.SGD(params, { lr = 0.01, momentum = 0.9 })
    local gm = GradManager():attach(params)
    local x, y = ember.randn({ 16, 20 }), ember.tensor({ 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4 }):long()
    local function step()
      opt:zero_grad()
      gm:record()
      local loss = ember.nn.functional.cross_entropy(model(x), y)
      gm:backward(loss)
      opt:step()
      return loss:item()
    end
    local used = {}
    without_gc(function()
      for i = 1, 30 do
        ember.tidy(step)
        used[i] = ember.memory_stats().bytes_in_use
      end
    end)
    -- from the second step on: the parameters, their .grad and the momentum buffers
    for i = 2, 30 do assert.are.equal(used[1], used[i]) end
    assert.is_not_nil(params[1].grad)
  end)

  it("a .grad a tidy made stays while it is one; the tidy that clears it frees it unless kept", function()
    local w = ember.tensor({ 1, 2 })
    local gm = GradManager():attach(w)
    ember.tidy(function()
      gm:record()
      gm:backward((w * w):sum())
    end)
    local g1 = w.grad
    H.same(g1, { 2, 4 })
    ember.tidy(function() w.grad = nil end)
    H.raises(function() return g1 + 0 end, "was freed")
    ember.tidy(function()
      gm:record()
      gm:backward((w * 3):sum())
    end)
    local g2 = ember.keep(w.grad)
    ember.tidy(function() w.grad = nil end)
    H.same(g2, { 3, 3 })
  end)

  it("a custom Function recorded inside tidy keeps its saved tensors and closure for backward", function()
    local Mul = ember.autodiff.Function{ name = "tidy_mul",
      forward = function(ctx, a, b) ctx:save_for_backward(a * 1, b * 1); return a * b end,
      backward = function(ctx, dy)
        local a, b = ctx.saved_tensors[1], ctx.saved_tensors[2]
        return dy * b, dy * a
      end }
    local Square = ember.autodiff.Function("tidy_square", function(x)
      local two_x = x * 2
      return x * x, function(dy) return two_x * dy end
    end)
    local a, b = ember.tensor({ 2, 3 }), ember.tensor({ 5, 7 })
    local gm = GradManager():attach({ a, b })
    gm:record()
    local y = ember.tidy(function() return (Mul(a, b) + Square(a)):sum() end)
    gm:backward(y)
    H.same(a.grad, { 5 + 4, 7 + 6 })
    H.same(b.grad, { 2, 3 })
  end)

  it("a module built or changed inside tidy keeps its parameters and buffers", function()
    local m = ember.tidy(function()
      local lin = ember.nn.Linear(3, 2)
      lin.extra = ember.ones({ 2 }) * 4
      lin:register_buffer("scale", ember.ones({ 2 }) * 0.5)
      return lin
    end)
    local inner = ember.nn.Linear(2, 2)
    ember.tidy(function() inner.weight = ember.ones({ 2, 2 }) * 3 end)
    H.same(m.extra, { 4, 4 })
    H.same(m.scale, { 0.5, 0.5 })
    assert.are.same({ 2, 3 }, m.weight:shape())
    H.same(inner.weight, { { 3, 3 }, { 3, 3 } })
    assert.are.same({ 1, 2 }, m(ember.ones({ 1, 3 })):shape())
  end)
end)

describe("the library's own temporaries", function()
  local nn = ember.nn

  it("Sequential frees what passes between its built-in layers once backward is done, values unchanged", function()
    ember.manual_seed(1)
    local model = nn.Sequential(nn.Linear(6, 64), nn.Tanh(), nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.5),
      nn.Linear(64, 3), nn.Flatten())
    model:eval()
    local x = ember.randn({ 200, 6 })   -- each hidden activation 51200 bytes
    local params = model:parameters()
    -- the same layers by hand
    local function by_hand()
      local h = (x:matmul(params[1]:t()) + params[2]):tanh()
      h = (h:matmul(params[3]:t()) + params[4]):relu()
      return h:matmul(params[5]:t()) + params[6]
    end
    local gm = GradManager():attach(params)
    collectgarbage()
    without_gc(function()
      local before = ember.memory_stats().bytes_in_use
      gm:record()
      local y = model(x)
      gm:backward(y:sum())
      -- left: the output, the loss and the six .grad (no GC ran)
      local grads = 0
      for _, p in ipairs(params) do grads = grads + p:numel() * 4 end
      local left = ember.memory_stats().bytes_in_use - before
      assert.is_true(left <= grads + 200 * 3 * 4 + 4096, "left " .. left .. " bytes, grads " .. grads)
      H.same(y, by_hand():tolist())
      H.same(x, x:tolist())   -- the input is the caller's: untouched
    end)
    local gw = params[1].grad:tolist()
    for _, p in ipairs(params) do p.grad = nil end
    gm:record()
    gm:backward(by_hand():sum())
    H.same(params[1].grad, gw)
  end)

  it("Sequential leaves alone what a layer of the user's own may keep", function()
    local Keep = nn.Module:extend("KeepInput")
    function Keep:forward(x)
      self.seen = x
      return x * 2
    end
    local keep = Keep()
    local model = nn.Sequential(nn.Linear(3, 4), keep, nn.ReLU(), nn.Linear(4, 2))
    local y = model(ember.ones({ 2, 3 }))
    H.same(keep.seen + 0, keep.seen:tolist())   -- the Linear's output, kept by the user's layer: usable
    assert.are.same({ 2, 2 }, y:shape())
  end)
end)

describe("MultiheadAttention", function()
  it("gives its projections and scores back when forward returns, values and gradients unchanged", function()
    ember.manual_seed(3)
    local mha = ember.nn.MultiheadAttention(16, 4)
    local x = ember.randn({ 32, 2, 16 })   -- scores {2, 4, 32, 32}: 32768 bytes
    local params = mha:parameters()
    local gm = GradManager():attach(params)
    collectgarbage()
    without_gc(function()
      local before = ember.memory_stats().bytes_in_use
      gm:record()
      local y, w = mha(x, x, x)
      gm:backward(y:sum())
      local grads = 0
      for _, p in ipairs(params) do grads = grads + p:numel() * 4 end
      -- left: y {32, 2, 16}, the averaged weights {2, 32, 32}, the loss and the .grads
      local left = ember.memory_stats().bytes_in_use - before - grads - y:numel() * 4 - w:numel() * 4
      assert.is_true(left >= 0 and left < 1024, "left " .. left)
    end)
    -- the same forward with out_proj a module of the user's own that keeps its input
    local Keep = ember.nn.Module:extend("KeepProj")
    function Keep:init(lin) self.lin = lin end
    function Keep:forward(t) self.seen = t; return self.lin(t) end
    local y1 = mha(x, x, x)
    mha.out_proj = Keep(mha.out_proj)
    local y2 = mha(x, x, x)
    H.same(y2, y1:tolist())
    assert.are.same({ 32, 2, 16 }, mha.out_proj.seen:shape())   -- still usable
  end)
end)

describe("the optimizers composed in Lua", function()
  for _, case in ipairs({ { "RMSprop", { momentum = 0.9, centered = true }, 3 }, { "Adagrad", {}, 1 },
      { "Adamax", {}, 2 }, { "NAdam", {}, 2 } }) do
    it(case[1] .. " gives its temporaries back within the step: only its state stays", function()
      local p = ember.randn({ 64, 64 })
      p.grad = ember.randn({ 64, 64 })
      local opt = ember.optim[case[1]]({ p }, case[2])
      collectgarbage()
      without_gc(function()
        local before = ember.memory_stats().bytes_in_use
        for _ = 1, 3 do opt:step() end
        -- case[3] state buffers of 64x64 float32 (16384 bytes each), and the
        -- step's new constants in the scalar cache (8 bytes each); each
        -- temporary would be 16384 bytes
        local extra = ember.memory_stats().bytes_in_use - before - case[3] * 64 * 64 * 4
        assert.is_true(extra >= 0 and extra < 1024, "extra " .. extra)
      end)
    end)
  end
end)
