-- nn.MultiheadAttention's options and the Transformer modules
-- (lua/ember/nn/transformer.lua): PyTorch 1.13's values from
-- spec/fixtures/zoo/gen.py (mha.safetensors, decoder_pre.safetensors), and
-- properties that need no reference: masks, argument forms, copies, bad input.
package.path = "./spec/support/?.lua;" .. package.path
local H = require("helpers")
local Z = require("zoo")
local ember = H.ember
local nn = ember.nn
local F64 = { dtype = "float64" }

local function err(a, b) return Z.max_err(a, b) end

describe("nn.MultiheadAttention", function()
  it("with kdim, vdim, add_bias_kv, add_zero_attn and both masks matches PyTorch", function()
    local fx = Z.fixture("mha")
    local m = nn.MultiheadAttention(8, 2, { kdim = 3, vdim = 5, add_bias_kv = true, add_zero_attn = true,
      dtype = "float64" })
    assert.are.same(H.sorted_keys(fx.sd), H.sorted_keys(m:state_dict()))
    assert.is_nil(m.in_proj_weight)
    assert.are.same({ 8, 3 }, m.k_proj_weight:shape())
    assert.are.same({ 1, 1, 8 }, m.bias_k:shape())
    m:load_state_dict(fx.sd)
    local i = fx["in"]
    local gm = ember.autodiff.GradManager():attach(m:parameters())
    gm:record()
    local y, w = m(i.q, i.k, i.v, { key_padding_mask = i.key_padding_mask, attn_mask = i.attn_mask,
      average_attn_weights = false })
    local loss = (y * i.r):sum() + (w * w):sum()
    gm:backward(loss)
    assert.are.same({ 3, 2, 4, 7 }, w:shape())   -- S = 5 keys, bias_k and the zero key
    assert.is_true(err(y, fx[""].out) < 1e-12)
    assert.is_true(err(w, fx[""].weights) < 1e-12)
    assert.is_true(err(loss, fx[""].loss) < 1e-12)
    local n = 0
    for name, p in m:named_parameters() do
      assert(err(p.grad, fx.grad[name]) < 1e-12, name)
      n = n + 1
    end
    assert.are.equal(8, n)   -- q, k, v_proj_weight, in_proj_bias, bias_k, bias_v, out_proj's two
    -- the same call positionally, as PyTorch's forward(q, k, v, key_padding_mask, need_weights, attn_mask, average)
    local y2, w2 = m(i.q, i.k, i.v, i.key_padding_mask, true, i.attn_mask, false)
    assert.are.equal(0, err(y2, y))
    assert.are.equal(0, err(w2, w))
    local _, none = m(i.q, i.k, i.v, { need_weights = false })
    assert.is_nil(none)
  end)

  it("averages the weights over heads, takes unbatched input and batch_first", function()
    ember.manual_seed(5)
    local m = nn.MultiheadAttention(6, 3, F64)
    local x = ember.randn({ 4, 2, 6 }, F64)
    local y, w = m(x, x, x)
    local _, wh = m(x, x, x, { average_attn_weights = false })
    assert.are.same({ 2, 4, 4 }, w:shape())
    assert.is_true(err(w, wh:mean(2)) < 1e-15)
    H.same(w:sum(-1), ember.ones({ 2, 4 }):tolist(), 1e-12)
    -- unbatched: the second batch entry alone
    local x2 = x:select(2, 2)
    local y2, w2 = m(x2, x2, x2)
    assert.is_true(err(y2, y:select(2, 2)) < 1e-14)
    assert.is_true(err(w2, w:select(1, 2)) < 1e-14)
    -- batch_first with the same parameters
    local bf = nn.MultiheadAttention(6, 3, { batch_first = true, dtype = "float64" })
    bf:load_state_dict(m:state_dict())
    local xb = x:transpose(1, 2)
    assert.is_true(err(bf(xb, xb, xb), y:transpose(1, 2)) < 1e-14)
  end)

  it("takes bool and float masks alike, and is_causal as the causal mask", function()
    ember.manual_seed(6)
    local m = nn.MultiheadAttention(4, 2, F64)
    local x = ember.randn({ 3, 2, 4 }, F64)
    local bool = nn.causal_mask(3)
    local float = nn.Transformer.generate_square_subsequent_mask(3, F64)
    H.same(float, { { 0, -math.huge, -math.huge }, { 0, 0, -math.huge }, { 0, 0, 0 } }, 0)
    local a = m(x, x, x, { attn_mask = bool })
    assert.are.equal(0, err(m(x, x, x, { attn_mask = float }), a))
    assert.are.equal(0, err(m(x, x, x, { is_causal = true }), a))
    -- a key padding mask, bool or additive float
    local kpm = ember.tensor({ { false, false, true }, { false, false, false } })
    local kf = ember.where(kpm, -math.huge, ember.zeros({ 2, 3 }, F64))
    local _, w = m(x, x, x, { key_padding_mask = kpm })
    assert.are.equal(0, w:select(1, 1):select(2, 3):abs():max():item())
    assert.are.equal(0, err(m(x, x, x, { key_padding_mask = kf }), m(x, x, x, { key_padding_mask = kpm })))
  end)

  it("raises on bad options, inputs and masks, naming them", function()
    local m = nn.MultiheadAttention(4, 2, F64)
    local x = ember.randn({ 3, 2, 4 }, F64)
    local function raises(f, text)
      local ok, msg = pcall(f)
      assert.is_false(ok)
      assert(tostring(msg):find(text, 1, true), tostring(msg))
    end
    raises(function() nn.MultiheadAttention(4, 2, { kdimm = 3 }) end, "unknown option 'kdimm'")
    raises(function() nn.MultiheadAttention(4, 2, 0.1, { dropout = 0.2 }) end, "dropout is given twice")
    raises(function() nn.MultiheadAttention(4, 3) end, "embed_dim 4 must be divisible by num_heads 3")
    raises(function() nn.MultiheadAttention(4, 2, { dropout = 2 }) end, "dropout must be a number in [0, 1]")
    raises(function() nn.MultiheadAttention(4, 2, { kdim = 0 }) end, "kdim must be an integer >= 1")
    raises(function() m(x, x, x, { mask = nn.causal_mask(3) }) end, "unknown option 'mask'")
    raises(function() m(x, x, x, { attn_mask = nn.causal_mask(2) }) end, "attn_mask of shape {2, 2} does not fit")
    raises(function() m(x, x, x, { attn_mask = ember.zeros({ 3, 3 }) }) end, "attn_mask is float32 but the attention scores are float64")
    raises(function() m(x, x, x, { attn_mask = ember.zeros({ 3, 3 }, { dtype = "int64" }) }) end,
      "attn_mask must be bool or floating point, got int64")
    raises(function() m(x, x, x, { key_padding_mask = ember.zeros({ 3, 2 }):gt(0) }) end,
      "key_padding_mask of shape {3, 2} does not fit: expected {2, 3}")
    raises(function() m(x, ember.randn({ 3, 2, 5 }, F64), x) end, "key of shape {3, 2, 5} does not fit")
    raises(function() m(x, x:select(2, 1), x) end, "must all be batched (3-D) or all unbatched (2-D)")
    raises(function() m(x, x, x, nil, true, nil, true, true, true) end, "ember.nn.MultiheadAttention: extra argument 9 (true): it takes 8 (query, key, value, key_padding_mask, ")
    raises(function() nn.Transformer.generate_square_subsequent_mask(0) end, "n must be an integer >= 1")
    raises(function() nn.Transformer.generate_square_subsequent_mask(3, {}, 5) end,
      "ember.nn.Transformer.generate_square_subsequent_mask: extra argument 3 (5): it takes 2 (n, opts)")
  end)

  it("names the module's forward, the argument and the shapes the user gave, never an inner op", function()
    local function raises(f, text)
      local ok, msg = pcall(f)
      assert.is_false(ok)
      msg = tostring(msg)
      assert(msg:find("ember.nn.MultiheadAttention: " .. text, 1, true), msg)
      assert.is_nil(msg:find("ember.reshape", 1, true), msg)
    end
    local m = nn.MultiheadAttention(4, 2, F64)
    local bf = nn.MultiheadAttention(4, 2, { batch_first = true, dtype = "float64" })
    local function r(...) return ember.randn({ ... }, F64) end
    raises(function() m(r(3, 2, 4), r(3, 5, 4), r(3, 5, 4)) end,
      "query {3, 2, 4}, key {3, 5, 4} and value {3, 5, 4} do not fit: key and value must have the query's batch size 2")
    raises(function() m(r(3, 2, 4), r(6, 2, 4), r(5, 2, 4)) end,
      "query {3, 2, 4}, key {6, 2, 4} and value {5, 2, 4} do not fit")
    -- batch_first: the shapes as given, not as transposed inside
    raises(function() bf(r(2, 3, 4), r(5, 3, 4), r(5, 3, 4)) end,
      "query {2, 3, 4}, key {5, 3, 4} and value {5, 3, 4} do not fit: key and value must have the query's "
      .. "batch size 2 and one length (batch_first: {N, L, E})")
    raises(function() m(r(3, 2, 4), r(3, 2, 4):float(), r(3, 2, 4)) end,
      "query (float64), key (float32) and value (float64) must have one dtype")
    raises(function() m(r(3, 4), nil, nil, { key_padding_mask = ember.zeros({ 2 }):gt(0) }) end,
      "key_padding_mask of shape {2} does not fit: expected {1, 3} (N, S) or {3}")
    -- an empty target sequence is an empty answer, as in PyTorch
    local y, w = m(r(0, 2, 4), r(3, 2, 4), r(3, 2, 4))
    assert.are.same({ 0, 2, 4 }, y:shape())
    assert.are.same({ 2, 0, 3 }, w:shape())
    -- (the product under it: a batch dim of 0 against a broadcast 1 stays 0)
    assert.are.same({ 0, 2, 4 }, ember.zeros({ 0, 2, 3 }):matmul(ember.zeros({ 3, 4 })):shape())
    assert.are.same({ 3, 0, 2, 4 }, ember.zeros({ 3, 0, 2, 3 }):matmul(ember.zeros({ 1, 3, 4 })):shape())
  end)
end)

describe("the Transformer modules", function()
  it("a pre-norm TransformerDecoder with masks matches PyTorch (outputs, gradients, AdamW steps)", function()
    local e = Z.run("decoder_pre", "float64")
    for what, v in pairs({ out = e.out, loss = e.loss, grad = e.grad, losses = e.losses, after = e.after }) do
      assert(v <= 1e-10, what .. " " .. v)
    end
    assert.is_true(e.key_bias <= 1e-8)
  end)

  it("takes PyTorch's arguments positionally or by name, and checks them", function()
    local a = nn.TransformerEncoderLayer(8, 2, 32, 0.2, "gelu", 1e-6, true, true)
    local b = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 32, dropout = 0.2, activation = "gelu",
      layer_norm_eps = 1e-6, batch_first = true, norm_first = true })
    for _, m in ipairs({ a, b }) do
      assert.are.equal(32, m.linear1.out_features)
      assert.are.equal(0.2, m.dropout.p)
      assert.are.equal(0.2, m.self_attn.dropout)
      assert.are.equal(1e-6, m.norm2.eps)
      assert.is_true(m.self_attn.batch_first and m.norm_first)
    end
    local d = nn.TransformerEncoderLayer(8, 2)   -- PyTorch's defaults
    assert.are.equal(2048, d.linear1.out_features)
    assert.are.equal(0.1, d.dropout1.p)
    assert.are.equal(1e-5, d.norm1.eps)
    assert.is_false(d.norm_first or d.batch_first)
    assert.are.same({ "linear1.bias", "linear1.weight", "linear2.bias", "linear2.weight", "norm1.bias",
      "norm1.weight", "norm2.bias", "norm2.weight", "self_attn.in_proj_bias", "self_attn.in_proj_weight",
      "self_attn.out_proj.bias", "self_attn.out_proj.weight" }, H.sorted_keys(d:state_dict()))
    local enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 8), 1)
    local custom = nn.Transformer({ d_model = 8, nhead = 2, custom_encoder = enc, num_decoder_layers = 1,
      dim_feedforward = 8 })
    assert.are.equal(enc, custom.encoder)
    assert.are.equal(1, custom.decoder.num_layers)
    assert.are.same({ 5, 2, 8 }, custom(ember.randn({ 3, 2, 8 }), ember.randn({ 5, 2, 8 })):shape())
    local t = nn.Transformer(16, 4, 1, 1, 32, 0)
    assert.are.same({ 1, 1 }, { t.encoder.num_layers, t.decoder.num_layers })
    assert.are.equal(16, t.decoder.layers:get(1).multihead_attn.embed_dim)
    local function raises(f, text)
      local ok, msg = pcall(f)
      assert.is_false(ok)
      assert(tostring(msg):find(text, 1, true), tostring(msg))
    end
    raises(function() nn.TransformerEncoderLayer(8, 2, { dim_feed_forward = 3 }) end,
      "ember.nn.TransformerEncoderLayer: unknown option 'dim_feed_forward'")
    raises(function() nn.TransformerEncoderLayer(8, 2, 16, { dim_feedforward = 3 }) end, "dim_feedforward is given twice")
    raises(function() nn.TransformerEncoderLayer(8, 2, 16, 0, "tanh") end,
      "activation must be 'relu', 'gelu', a function or a module, got 'tanh'")
    raises(function() nn.TransformerDecoderLayer(8, 3) end, "d_model 8 must be divisible by nhead 3")
    raises(function() nn.TransformerEncoderLayer(8, 2, 16, 0, "relu", 1e-5, false, false, true) end,
      "ember.nn.TransformerEncoderLayer: extra argument 9 (true): it takes 8 (d_model, nhead, ")
    raises(function() nn.TransformerEncoder(nn.Linear(2, 2), 2) end,
      "encoder_layer must be an nn.TransformerEncoderLayer, got Linear")
    raises(function() nn.TransformerEncoder(d, 0) end, "num_layers must be an integer >= 1, got 0")
    raises(function() nn.TransformerEncoder(d, 2, { normm = 1 }) end, "unknown option 'normm'")
    assert.are.equal(2, nn.TransformerEncoder(d, 2, nil, false).num_layers)
    raises(function() nn.TransformerEncoder(d, 2, { enable_nested_tensor = true }) end,
      "enable_nested_tensor must be false (ember has no nested-tensor fast path")
    raises(function() nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2), 2, { enable_nested_tensor = false }) end,
      "unknown option 'enable_nested_tensor'")
    raises(function() nn.Transformer({ d_model = 8, nhead = 3 }) end, "d_model 8 must be divisible by nhead 3")
    raises(function() nn.Transformer({ d_model = 8, nhead = 2, dropuot = 0 }) end, "unknown option 'dropuot'")
    raises(function() d(ember.randn({ 3, 2, 6 })) end, "src of shape {3, 2, 6} does not fit")
    raises(function() d(ember.randn({ 3, 2, 8 }), { mask = nn.causal_mask(3) }) end, "unknown option 'mask'")
    raises(function() t(ember.randn({ 3, 2, 16 }), ember.randn({ 3, 3, 16 })) end,
      "src {3, 2, 16} and tgt {3, 3, 16} must have the same batch size")
  end)

  it("stacks copies of the layer: equal at first, each with its own parameters", function()
    ember.manual_seed(9)
    local layer = nn.TransformerEncoderLayer(4, 2, 8, 0, { dtype = "float64" })
    local enc = nn.TransformerEncoder(layer, 3)
    assert.are.equal(3, #enc:parameters() / #layer:parameters())
    for name, p in layer:named_parameters() do
      for i = 1, 3 do assert.are.equal(0, err(enc.layers:get(i):state_dict()[name], p)) end
    end
    ember.no_grad(function() enc.layers:get(1).linear1.weight:add_(1) end)
    assert.are.equal(0, err(enc.layers:get(2).linear1.weight, layer.linear1.weight))
    assert.are.equal("float64", enc.layers:get(3).norm1.weight.dtype)
    -- positional and named masks, src_mask passed to every layer
    local x = ember.randn({ 3, 2, 4 }, F64)
    local mask = nn.causal_mask(3)
    local y = enc(x, mask)
    local by_hand = x
    for i = 1, 3 do by_hand = enc.layers:get(i)(by_hand, mask) end
    assert.are.equal(0, err(y, by_hand))
    assert.are.equal(0, err(enc(x, { mask = mask }), y))
  end)

  it("runs the activation given as a function or a module, unbatched input, and dropout only in training", function()
    ember.manual_seed(10)
    local a = nn.TransformerEncoderLayer(4, 2, 8, 0, "gelu", { dtype = "float64" })
    local b = nn.TransformerEncoderLayer(4, 2, 8, 0, function(x) return x:gelu() end, { dtype = "float64" })
    local c = nn.TransformerEncoderLayer(4, 2, 8, 0, nn.GELU(), { dtype = "float64" })
    b:load_state_dict(a:state_dict())
    c:load_state_dict(a:state_dict())
    local x = ember.randn({ 3, 2, 4 }, F64)
    assert.are.equal(0, err(b(x), a(x)))
    assert.are.equal(0, err(c(x), a(x)))
    assert.is_true(err(a(x:select(2, 1)), a(x):select(2, 1)) < 1e-14)
    local d = nn.TransformerEncoderLayer(4, 2, 8, 0.5, { dtype = "float64" })
    d:eval()
    assert.are.equal(0, err(d(x), d(x)))
    d:train()
    assert.is_true(err(d(x), d(x)) > 0)
  end)
end)
