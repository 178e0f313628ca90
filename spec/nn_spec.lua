-- ember.nn: the Module class pattern, parameter order, state_dict, and each
-- layer against hand-computed values and float64 gradcheck.
local H = require("helpers")
local ember = H.ember
local nn, F = ember.nn, ember.nn.functional
local gradcheck = ember.autodiff.gradcheck
local F64 = { dtype = "float64" }

local function names(list)
  local out = {}
  for _, e in ipairs(list) do out[#out + 1] = e[1] end
  return out
end

-- gradcheck a module's output with respect to its input and every parameter
local function check_module(m, x)
  local params = m:parameters()
  local inputs = { x }
  for _, p in ipairs(params) do inputs[#inputs + 1] = p end
  return gradcheck(function(xx)
    local y = m(xx)
    return (y * y):sum()
  end, inputs)
end

describe("nn.Module", function()
  it("records parameters and submodules in assignment order", function()
    local Net = nn.Module:extend("Net")
    function Net:init(n)
      self.scale = ember.ones({ 1 })
      self.fc2 = nn.Linear(n, 2)
      self.fc1 = nn.Linear(2, n)
      self.name = "a net"
      self.offset = ember.zeros({ 2 })
    end
    function Net:forward(x) return self.fc1(self.fc2(x) * self.scale + self.offset) end
    local net = Net(3)
    assert.are.same({ "scale", "offset", "fc2.weight", "fc2.bias", "fc1.weight", "fc1.bias" },
      names(net:named_parameters()))
    assert.are.equal(6, #net:parameters())
    assert.are.equal("a net", net.name)
    assert.are.same({ 4, 3 }, net(ember.zeros({ 4, 3 })):shape())
    -- the named list also answers by name and iterates as name, tensor
    local np = net:named_parameters()
    assert.are.equal(net.fc2.weight, np["fc2.weight"])
    local seen = {}
    for name, t in np do seen[#seen + 1] = name; assert.is_true(ember.is_tensor(t)) end
    assert.are.equal(6, #seen)
    -- reassigning keeps the place; removing drops it
    net.scale = ember.full({ 1 }, 2)
    net.offset = nil
    assert.are.same({ "scale", "fc2.weight", "fc2.bias", "fc1.weight", "fc1.bias" }, names(net:named_parameters()))
    assert.are.equal(2, net.scale:item())
  end)

  it("shares one parameter once, and one module may be used twice in a graph", function()
    local lin = nn.Linear(2, 2)
    local seq = nn.Sequential(lin, nn.Tanh(), lin)
    assert.are.equal(2, #seq:parameters())
    local x = ember.randn({ 3, 2 }, F64)
    seq:double()
    assert.is_true(check_module(seq, x))
  end)

  it("switches train and eval recursively", function()
    local m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    assert.is_true(m.training and m:get(2).training)
    assert.are.equal(m, m:eval())
    assert.is_false(m.training or m:get(2).training)
    m:train()
    assert.is_true(m:get(2).training)
  end)

  it("round-trips a state_dict and names what differs", function()
    ember.manual_seed(1)
    local a = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.BatchNorm1d(4), nn.Linear(4, 2))
    local b = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.BatchNorm1d(4), nn.Linear(4, 2))
    local sd = a:state_dict()
    local keys = {}
    for k in pairs(sd) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ "1.bias", "1.weight", "3.bias", "3.num_batches_tracked", "3.running_mean", "3.running_var",
      "3.weight", "4.bias", "4.weight" }, keys)
    b:load_state_dict(sd)
    local x = ember.randn({ 5, 3 })
    a:eval(); b:eval()
    H.same(b(x), a(x):tolist(), 0)
    -- strict: missing and unexpected keys are named; nothing is copied on failure
    local before = b:get(1).weight:clone()
    local bad = { ["1.weight"] = ember.zeros({ 4, 3 }), extra = ember.zeros({ 1 }) }
    local ok, err = pcall(b.load_state_dict, b, bad)
    assert.is_false(ok)
    assert.truthy(err:find("missing keys: 1.bias", 1, true))
    assert.truthy(err:find("unexpected keys: extra", 1, true))
    H.same(b:get(1).weight, before:tolist(), 0)
    -- shapes are checked even when not strict
    ok, err = pcall(b.load_state_dict, b, { ["1.weight"] = ember.zeros({ 3, 4 }) }, false)
    assert.truthy(err:find("1.weight: the checkpoint has shape {3, 4}, the model {4, 3}", 1, true))
    local res = b:load_state_dict({ ["1.weight"] = ember.zeros({ 4, 3 }) }, false)
    H.same(b:get(1).weight, ember.zeros({ 4, 3 }):tolist(), 0)
    assert.are.equal(8, #res.missing_keys)
  end)

  it("gives a clear error for a missing forward and for bad constructor arguments", function()
    local Empty = nn.Module:extend("Empty")
    assert.has_error(function() Empty()(ember.zeros({ 1 })) end, "ember.nn.Empty: forward is not defined")
    assert.has_error(function() nn.Linear(-1, 2) end)
    assert.has_error(function() nn.Sequential(nn.ReLU(), 3) end)
    assert.has_error(function() nn.Conv2d(3, 4, 3, { groups = 2 }) end)
    assert.has_error(function() nn.Linear(2, 2, { bogus = true }) end)
  end)
end)

describe("nn layers", function()
  it("Linear computes x W^T + b and names both shapes on a mismatch", function()
    local lin = nn.Linear(2, 3, { dtype = "float64" })
    ember.no_grad(function()
      lin.weight:copy_(ember.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 } }))
      lin.bias:copy_(ember.tensor({ 1, 0, -1 }))
    end)
    H.same(lin(ember.tensor({ { 1, 1 }, { 0, 2 } }, F64)), { { 4, 7, 10 }, { 5, 8, 11 } }, 0)
    local ok, err = pcall(lin, ember.zeros({ 4, 5 }, F64))
    assert.is_false(ok)
    assert.truthy(err:find("ember.nn.Linear: input of shape {4, 5} does not fit", 1, true))
    assert.is_true(check_module(lin, ember.randn({ 2, 2 }, F64)))
    -- default init: U(-1/sqrt(in), 1/sqrt(in))
    local big = nn.Linear(100, 50)
    assert.is_true(big.weight:abs():max():item() <= 0.1)
    assert.is_nil(nn.Linear(2, 2, { bias = false }).bias)
  end)

  it("Conv2d and pooling layers", function()
    ember.manual_seed(2)
    local conv = nn.Conv2d(2, 4, 3, { padding = 1, groups = 2, dtype = "float64" })
    assert.are.same({ 4, 1, 3, 3 }, conv.weight:shape())
    local x = ember.randn({ 2, 2, 5, 5 }, F64)
    H.same(conv(x), F.conv2d(x, conv.weight, conv.bias, { padding = 1, groups = 2 }):tolist(), 0)
    assert.is_true(check_module(conv, ember.randn({ 1, 2, 4, 4 }, F64)))
    local ok, err = pcall(conv, ember.zeros({ 1, 3, 5, 5 }, F64))
    assert.truthy(err:find("ember.nn.Conv2d: input of shape {1, 3, 5, 5} does not fit: expected {N, 2, H, W}", 1, true))
    local pool = nn.MaxPool2d(2)
    H.same(pool(ember.arange(16, F64):view(1, 1, 4, 4)), { { { { 5, 7 }, { 13, 15 } } } }, 0)
    H.same(nn.AvgPool2d(2, 1)(ember.arange(9, F64):view(1, 1, 3, 3)), { { { { 2, 3 }, { 5, 6 } } } }, 0)
    assert.are.same({ 2, 20 }, nn.Flatten()(ember.zeros({ 2, 5, 2, 2 })):shape())
  end)

  it("BatchNorm2d keeps running statistics and uses them in eval", function()
    local bn = nn.BatchNorm2d(1, { dtype = "float64" })
    local x = ember.tensor({ 1, 2, 3, 4, 5, 6, 7, 8 }, F64):view(2, 1, 2, 2)
    local y = bn(x)
    -- mean 4.5, biased var 5.25
    local s = 1 / math.sqrt(5.25 + 1e-5)
    H.same(y:view(8), { -3.5 * s, -2.5 * s, -1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s, 2.5 * s, 3.5 * s }, 1e-9)
    H.same(bn.running_mean, { 0.45 }, 1e-12)
    H.same(bn.running_var, { 0.9 + 0.1 * 6 }, 1e-12)   -- unbiased var 6
    H.same(bn.num_batches_tracked, 1, 0)
    bn:eval()
    H.same(bn(x):view(8):narrow(1, 1, 1), { (1 - 0.45) / math.sqrt(1.5 + 1e-5) }, 1e-9)
    bn:train()
    assert.is_true(check_module(nn.BatchNorm2d(2, { dtype = "float64" }), ember.randn({ 2, 2, 2, 2 }, F64)))
    assert.is_true(check_module(nn.BatchNorm1d(3, { dtype = "float64" }), ember.randn({ 4, 3 }, F64)))
  end)

  it("LayerNorm, Dropout, Embedding and activations", function()
    local ln = nn.LayerNorm(3, { dtype = "float64" })
    local s = 1 / math.sqrt(2 / 3 + 1e-5)
    H.same(ln(ember.tensor({ { 1, 2, 3 } }, F64)), { { -s, 0, s } }, 1e-9)
    assert.is_true(check_module(ln, ember.randn({ 2, 3 }, F64)))
    local d = nn.Dropout(0.5)
    local x = ember.ones({ 100 })
    assert.is_true(d(x):eq(0):sum():item() > 20)
    d:eval()
    assert.are.equal(x, d(x))
    local emb = nn.Embedding(4, 2, { dtype = "float64" })
    local idx = ember.tensor({ 4, 1 }, { dtype = "int64" })
    H.same(emb(idx), { emb.weight:tolist()[4], emb.weight:tolist()[1] }, 0)
    assert.has_error(function() emb(ember.tensor({ 5 }, { dtype = "int64" })) end, "ember.nn.Embedding: index 5 is out of range 1..4")
    local v = ember.tensor({ -2, 0.5 }, F64)
    H.same(nn.ReLU()(v), { 0, 0.5 }, 0)
    H.same(nn.Tanh()(v), { math.tanh(-2), math.tanh(0.5) }, 1e-12)
    H.same(nn.Sigmoid()(v), { 1 / (1 + math.exp(2)), 1 / (1 + math.exp(-0.5)) }, 1e-12)
    H.same(nn.GELU({ approximate = "tanh" })(v), v:gelu({ approximate = "tanh" }):tolist(), 0)
  end)

  it("MultiheadAttention with a causal mask matches a per-head computation", function()
    ember.manual_seed(3)
    local E, Hh, L = 4, 2, 3
    local mha = nn.MultiheadAttention(E, Hh, { batch_first = true, dtype = "float64" })
    ember.no_grad(function() mha.in_proj_bias:normal_(); mha.out_proj.bias:normal_() end)
    local x = ember.randn({ 1, L, E }, F64)
    local out, w = mha(x, x, x, { attn_mask = nn.causal_mask(L) })
    assert.are.same({ 1, L, E }, out:shape())
    assert.are.same({ 1, L, L }, w:shape())
    -- by hand, head by head, with plain Lua loops over tolist() values
    local X = x:tolist()[1]
    local W, B = mha.in_proj_weight:tolist(), mha.in_proj_bias:tolist()
    local function proj(row, off)
      local r = {}
      for o = 1, E do
        local s = B[off + o]
        for i = 1, E do s = s + W[off + o][i] * row[i] end
        r[o] = s
      end
      return r
    end
    local Q, K, V = {}, {}, {}
    for t = 1, L do Q[t], K[t], V[t] = proj(X[t], 0), proj(X[t], E), proj(X[t], 2 * E) end
    local D = E / Hh
    local concat, avg = {}, {}
    for t = 1, L do concat[t], avg[t] = {}, { 0, 0, 0 } end
    for h = 0, Hh - 1 do
      for t = 1, L do
        local sc, m = {}, -math.huge
        for u = 1, t do
          local s = 0
          for j = 1, D do s = s + Q[t][h * D + j] * K[u][h * D + j] end
          sc[u] = s / math.sqrt(D)
          m = math.max(m, sc[u])
        end
        local z = 0
        for u = 1, t do sc[u] = math.exp(sc[u] - m); z = z + sc[u] end
        for j = 1, D do
          local s = 0
          for u = 1, t do s = s + sc[u] / z * V[u][h * D + j] end
          concat[t][h * D + j] = s
        end
        for u = 1, t do avg[t][u] = avg[t][u] + sc[u] / z / Hh end
      end
    end
    local OW, OB = mha.out_proj.weight:tolist(), mha.out_proj.bias:tolist()
    local expect = {}
    for t = 1, L do
      expect[t] = {}
      for o = 1, E do
        local s = OB[o]
        for i = 1, E do s = s + OW[o][i] * concat[t][i] end
        expect[t][o] = s
      end
    end
    H.same(out, { expect }, 1e-10)
    H.same(w, { avg }, 1e-10)
    -- is_causal gives the same; the sequence-first layout too
    H.same(mha(x, x, x, { is_causal = true }), { expect }, 1e-10)
    assert.is_true(check_module(mha, ember.randn({ 1, 2, E }, F64)))
    assert.is_true(gradcheck(function(q) return (mha(q, q, q, { is_causal = true }) ^ 2):sum() end,
      { ember.randn({ 2, 2, E }, F64) }))
  end)
end)
