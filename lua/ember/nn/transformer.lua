-- ember.nn.transformer: MultiheadAttention and the Transformer layers, as
-- PyTorch 1.13 defines them (torch/nn/modules/activation.py and
-- transformer.py), with its parameter names, so a PyTorch state_dict loads
-- unchanged (load_state_dict(sd, {torch_names = true}) for the 0-based
-- `layers.0.` of the stacks). M.register(nn) adds
--
--   nn.MultiheadAttention(embed_dim, num_heads, {dropout, bias, add_bias_kv, add_zero_attn,
--                                                kdim, vdim, batch_first})
--   nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
--                              layer_norm_eps, batch_first, norm_first)
--   nn.TransformerDecoderLayer(the same)
--   nn.TransformerEncoder(encoder_layer, num_layers, norm)
--   nn.TransformerDecoder(decoder_layer, num_layers, norm)
--   nn.Transformer(d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward,
--                  dropout, activation, custom_encoder, custom_decoder, layer_norm_eps,
--                  batch_first, norm_first)
--   nn.Transformer.generate_square_subsequent_mask(n), nn.causal_mask(L)
--
-- The arguments after the required ones come positionally in PyTorch's
-- order, or by name in a last table (both at once as long as none is given
-- twice). Forwards take their masks the same two ways. Every op is a
-- recorded tensor op, so gradients of any order come from the rule registry.
local ember = require("ember")
local A = require("ember.nn.args")
local Sig = require("ember.nn.signature")
local errors = require("ember.errors")
local F = require("ember.nn.functional")
local init = require("ember.nn.initializers")

local M = {}
local is_tensor, fail, shape_str = ember.is_tensor, A.fail, A.shape_str

local function is_module(v) return type(v) == "table" and getmetatable(v) ~= nil and getmetatable(v).__module end

-- The arguments after the required ones (lead: their names): positional
-- values in spec's order (all but dtype), then (optionally) a table of the
-- same names; checked and with defaults filled in (nn/signature.lua's S.parse)
local arguments = Sig.parse

local function probability(v)
  if type(v) ~= "number" or not (v >= 0 and v <= 1) then return "a number in [0, 1]" end
end
local function optional_int(v) if v ~= nil then return A.int(1)(v) end end
local function optional_module(v) if v ~= nil and not is_module(v) then return "a module" end end

---------------------------------------------------------------- masks
-- the {L, L} bool mask that is true above the diagonal (may not attend)
local function causal_mask(L)
  return ember.arange(L):view(1, L):gt(ember.arange(L):view(L, 1))
end

-- PyTorch's float form: -inf above the diagonal, 0 elsewhere
local function square_subsequent_mask(n, opts)
  local op = "ember.nn.Transformer.generate_square_subsequent_mask"
  if A.int(1)(n) then fail(op, "n must be an integer >= 1, got %s", A.value_str(n)) end
  local o = A.options(op, opts, { A.DTYPE })
  return ember.where(causal_mask(n), -math.huge, ember.zeros({ n, n }, { dtype = o.dtype }))
end

local FLOAT = { float32 = true, float64 = true, float16 = true, bfloat16 = true }

-- a mask is bool (true = may not attend) or float (added to the scores, so
-- of the scores' dtype)
local function need_mask(op, what, m, dtype)
  if not (m.dtype == "bool" or FLOAT[m.dtype]) then
    fail(op, "%s must be bool or floating point, got %s", what, m.dtype)
  end
  if m.dtype ~= "bool" and m.dtype ~= dtype then
    fail(op, "%s is %s but the attention scores are %s: convert the mask (:to(\"%s\"))", what, m.dtype, dtype, dtype)
  end
end

-- scores with the mask m applied (m broadcasts against scores)
local function apply_mask(scores, m)
  if m.dtype == "bool" then return ember.where(m, -math.huge, scores) end
  return scores + m
end

-- the mask with one more key position, never masked (for bias_k and the zero key)
local function pad_key(m)
  if m == nil then return nil end
  local s = m:shape()
  s[#s] = 1
  return ember.cat({ m, ember.zeros(s, { dtype = m.dtype }) }, #s)
end

---------------------------------------------------------------- MultiheadAttention
local MHA_SPEC = { { "dropout", 0, probability }, A.BIAS, { "add_bias_kv", false, A.boolean },
  { "add_zero_attn", false, A.boolean }, { "kdim", nil, optional_int }, { "vdim", nil, optional_int },
  { "batch_first", false, A.boolean }, A.DTYPE }
local MHA_FORWARD = { { "key_padding_mask", nil, A.optional_tensor },
  { "need_weights", true, A.boolean }, { "attn_mask", nil, A.optional_tensor },
  { "average_attn_weights", true, A.boolean }, { "is_causal", false, A.boolean } }

-- an input (L, N, d), (N, L, d) with batch_first, or unbatched (L, d): what ember.nn.MultiheadAttention
-- and the transformer layers take
local function need_sequence(op, what, x, d)
  A.need_tensor(op, what, x)
  if (x:dim() ~= 3 and x:dim() ~= 2) or x:size(-1) ~= d then
    fail(op, "%s of shape %s does not fit: expected {L, N, %d}, {N, L, %d} with batch_first, or unbatched {L, %d}",
      what, shape_str(x), d, d, d)
  end
end

local function mha_class(nn)
  local op = "ember.nn.MultiheadAttention"
  local MHA = nn.Module:extend("MultiheadAttention")

  function MHA:init(embed_dim, num_heads, ...)
    local o = arguments(op, { "embed_dim", "num_heads" }, MHA_SPEC, ...)
    for what, v in pairs({ embed_dim = embed_dim, num_heads = num_heads }) do
      if A.int(1)(v) then fail(op, "%s must be an integer >= 1, got %s", what, A.value_str(v)) end
    end
    if embed_dim % num_heads ~= 0 then
      fail(op, "embed_dim %d must be divisible by num_heads %d", embed_dim, num_heads)
    end
    local E = embed_dim
    self.embed_dim, self.num_heads, self.head_dim = E, num_heads, E / num_heads
    self.kdim, self.vdim = o.kdim or E, o.vdim or E
    self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
    self.dropout, self.batch_first, self.add_zero_attn = o.dropout, o.batch_first, o.add_zero_attn
    local dt = { dtype = o.dtype }
    -- PyTorch's _reset_parameters: xavier uniform projections, zero biases,
    -- xavier normal bias_k and bias_v
    if self._qkv_same_embed_dim then
      self.in_proj_weight = init.xavier_uniform_(ember.empty({ 3 * E, E }, dt))
    else
      self.q_proj_weight = init.xavier_uniform_(ember.empty({ E, E }, dt))
      self.k_proj_weight = init.xavier_uniform_(ember.empty({ E, self.kdim }, dt))
      self.v_proj_weight = init.xavier_uniform_(ember.empty({ E, self.vdim }, dt))
    end
    if o.bias then self.in_proj_bias = ember.zeros({ 3 * E }, dt) end
    self.out_proj = nn.Linear(E, E, { bias = o.bias, dtype = o.dtype })
    if o.bias then ember.no_grad(function() self.out_proj.bias:zero_() end) end
    if o.add_bias_kv then
      self.bias_k = init.xavier_normal_(ember.empty({ 1, 1, E }, dt))
      self.bias_v = init.xavier_normal_(ember.empty({ 1, 1, E }, dt))
    end
  end

  -- query (L, N, E), key (S, N, kdim), value (S, N, vdim); (N, L, E) ... with
  -- batch_first; or unbatched (L, E), (S, kdim), (S, vdim)
  local function forward(self, q, k, v, ...)
    local o = arguments(op, { "query", "key", "value" }, MHA_FORWARD, ...)
    k, v = k or q, v or k or q
    local E, H, D = self.embed_dim, self.num_heads, self.head_dim
    for i, t in ipairs({ q, k, v }) do
      need_sequence(op, ({ "query", "key", "value" })[i], t, ({ E, self.kdim, self.vdim })[i])
    end
    local unbatched = q:dim() == 2
    if k:dim() ~= q:dim() or v:dim() ~= q:dim() then
      fail(op, "query %s, key %s and value %s must all be batched (3-D) or all unbatched (2-D)",
        shape_str(q), shape_str(k), shape_str(v))
    end
    if k.dtype ~= q.dtype or v.dtype ~= q.dtype then
      fail(op, "query (%s), key (%s) and value (%s) must have one dtype", q.dtype, k.dtype, v.dtype)
    end
    local shown = ("query %s, key %s and value %s"):format(shape_str(q), shape_str(k), shape_str(v))
    if unbatched then q, k, v = q:unsqueeze(2), k:unsqueeze(2), v:unsqueeze(2)
    elseif self.batch_first then q, k, v = q:transpose(1, 2), k:transpose(1, 2), v:transpose(1, 2) end
    -- now (L, N, E)
    local L, N, S = q:size(1), q:size(2), k:size(1)
    if k:size(2) ~= N or v:size(2) ~= N or v:size(1) ~= S then
      fail(op, "%s do not fit: key and value must have the query's batch size %d and one length%s", shown, N,
        self.batch_first and " (batch_first: {N, L, E})" or "")
    end
    local dtype = q.dtype
    local am, kpm = o.attn_mask, o.key_padding_mask
    if am ~= nil then
      need_mask(op, "attn_mask", am, dtype)
      local ok = (am:dim() == 2 and am:size(1) == L and am:size(2) == S)
        or (am:dim() == 3 and am:size(1) == N * H and am:size(2) == L and am:size(3) == S)
      if not ok then
        fail(op, "attn_mask of shape %s does not fit: expected {%d, %d} or {%d, %d, %d} (N * num_heads, L, S)",
          shape_str(am), L, S, N * H, L, S)
      end
    end
    if kpm ~= nil then
      need_mask(op, "key_padding_mask", kpm, dtype)
      if unbatched then kpm = kpm:dim() == 1 and kpm:unsqueeze(1) or kpm end
      if kpm:dim() ~= 2 or kpm:size(1) ~= N or kpm:size(2) ~= S then
        fail(op, "key_padding_mask of shape %s does not fit: expected {%d, %d} (N, S)%s",
          shape_str(o.key_padding_mask), N, S, unbatched and (" or {%d}"):format(S) or "")
      end
    end

    -- the projections
    local b = self.in_proj_bias
    local function bias(i) return b and b:narrow(1, (i - 1) * E + 1, E) end
    local qp, kp, vp
    if self._qkv_same_embed_dim then
      local w = self.in_proj_weight
      local function weight(i) return w:narrow(1, (i - 1) * E + 1, E) end
      qp, kp, vp = F.linear(q, weight(1), bias(1)), F.linear(k, weight(2), bias(2)), F.linear(v, weight(3), bias(3))
    else
      qp = F.linear(q, self.q_proj_weight, bias(1))
      kp = F.linear(k, self.k_proj_weight, bias(2))
      vp = F.linear(v, self.v_proj_weight, bias(3))
    end
    if self.bias_k ~= nil then   -- one more key and value, the same for every batch entry
      kp = ember.cat({ kp, self.bias_k:expand({ 1, N, E }) }, 1)
      vp = ember.cat({ vp, self.bias_v:expand({ 1, N, E }) }, 1)
      am, kpm = pad_key(am), pad_key(kpm)
    end
    -- (L, N, E) -> (N, H, L, D)
    local function heads(x) return x:reshape(x:size(1), N, H, D):permute({ 2, 3, 1, 4 }) end
    local qh, kh, vh = heads(qp), heads(kp), heads(vp)
    if self.add_zero_attn then   -- one more key and value of zeros
      local z = ember.zeros({ N, H, 1, D }, { dtype = dtype })
      kh, vh = ember.cat({ kh, z }, 3), ember.cat({ vh, z }, 3)
      am, kpm = pad_key(am), pad_key(kpm)
    end
    local Sk = kh:size(3)

    -- the scores (N, H, L, Sk), scaled as PyTorch does (the query first)
    local scores = (qh * (1 / math.sqrt(D))):matmul(kh:transpose(3, 4))
    if am ~= nil then
      if am:dim() == 3 then am = am:view(N, H, L, Sk) end
      scores = apply_mask(scores, am)
    end
    if kpm ~= nil then scores = apply_mask(scores, kpm:view(N, 1, 1, Sk)) end
    if o.is_causal then scores = apply_mask(scores, causal_mask(math.max(L, Sk)):narrow(1, 1, L):narrow(2, 1, Sk)) end
    local attn = scores:softmax(-1)
    if self.dropout > 0 and self.training then attn = F.dropout(attn, self.dropout, true) end
    -- (N, H, L, D) -> (L, N, E)
    local out = self.out_proj(attn:matmul(vh):permute({ 3, 1, 2, 4 }):reshape(L, N, E))
    if unbatched then out = out:squeeze(2)
    elseif self.batch_first then out = out:transpose(1, 2) end
    local weights
    if o.need_weights then
      weights = o.average_attn_weights and attn:mean(2) or attn   -- (N, L, Sk) or (N, H, L, Sk)
      if unbatched then weights = weights:squeeze(1) end
    end
    return out, weights
  end
  -- The projections, scores and the rest go back when forward returns (the
  -- library's own ember.tidy; the tape keeps what backward needs), unless
  -- out_proj is a module of the user's own, which may keep its input.
  function MHA:forward(q, k, v, ...)
    local proj = self.out_proj
    if getmetatable(proj).__class == nn.Linear and rawget(proj, "forward") == nil then
      local out, weights = ember._tidy_own(forward, self, q, k, v, ...)
      return out, weights
    end
    return forward(self, q, k, v, ...)
  end

  function MHA:extra_repr()
    local s = ("embed_dim=%d, num_heads=%d"):format(self.embed_dim, self.num_heads)
    if not self._qkv_same_embed_dim then s = s .. (", kdim=%d, vdim=%d"):format(self.kdim, self.vdim) end
    return s
  end
  nn.MultiheadAttention = MHA
end

---------------------------------------------------------------- the layers
local ACTIVATIONS = { relu = F.relu, gelu = F.gelu }
local function activation_check(v)
  if ACTIVATIONS[v] or type(v) == "function" or is_module(v) then return nil end
  return "'relu', 'gelu', a function or a module"
end

local LAYER_SPEC = { { "dim_feedforward", 2048, A.int(1) }, { "dropout", 0.1, probability },
  { "activation", "relu", activation_check }, { "layer_norm_eps", 1e-5, A.positive },
  { "batch_first", false, A.boolean }, { "norm_first", false, A.boolean }, A.DTYPE }

-- the parts both layers share: self_attn, the feed-forward block, norm1, norm2
local function layer_init(nn, self, op, d_model, nhead, ...)
  local o = arguments(op, { "d_model", "nhead" }, LAYER_SPEC, ...)
  for what, v in pairs({ d_model = d_model, nhead = nhead }) do
    if A.int(1)(v) then fail(op, "%s must be an integer >= 1, got %s", what, A.value_str(v)) end
  end
  if d_model % nhead ~= 0 then fail(op, "d_model %d must be divisible by nhead %d", d_model, nhead) end
  rawset(self, "_args", { n = select("#", ...) + 2, d_model, nhead, ... })   -- for the stacks' copies
  self.d_model, self.nhead, self.norm_first, self.batch_first = d_model, nhead, o.norm_first, o.batch_first
  local mha = { dropout = o.dropout, batch_first = o.batch_first, dtype = o.dtype }
  self.self_attn = nn.MultiheadAttention(d_model, nhead, mha)
  return o, mha
end

local function feed_forward_init(nn, self, o)
  local d = self.d_model
  self.linear1 = nn.Linear(d, o.dim_feedforward, { dtype = o.dtype })
  self.dropout = nn.Dropout(o.dropout)
  self.linear2 = nn.Linear(o.dim_feedforward, d, { dtype = o.dtype })
  if type(o.activation) == "string" then
    self.activation_name, self.activation_fn = o.activation, ACTIVATIONS[o.activation]
  elseif is_module(o.activation) then
    self.activation = o.activation   -- a child, as in PyTorch
  else
    self.activation_fn = o.activation
  end
end

local function norm_init(nn, self, o, count)
  for i = 1, count do
    self["norm" .. i] = nn.LayerNorm(self.d_model, { eps = o.layer_norm_eps, dtype = o.dtype })
  end
  for i = 1, count do self["dropout" .. i] = nn.Dropout(o.dropout) end
end

local function feed_forward(self, x, dropout)
  local act = self.activation_fn or self.activation
  return dropout(self.linear2(self.dropout(act(self.linear1(x)))))
end

local function attend(mha, q, kv, mask, kpm, dropout)
  return dropout(mha(q, kv, kv, { attn_mask = mask, key_padding_mask = kpm, need_weights = false }))
end

-- x through a layer's sublayers in turn, sublayer i with the layer's norm<i>:
-- x + f(norm(x)) with norm_first, norm(x + f(x)) without (PyTorch's order)
local function residuals(self, x, sublayers)
  for i, f in ipairs(sublayers) do
    local norm = self["norm" .. i]
    if self.norm_first then x = x + f(norm(x)) else x = norm(x + f(x)) end
  end
  return x
end

local ENCODER_FORWARD = { { "src_mask", nil, A.optional_tensor },
  { "src_key_padding_mask", nil, A.optional_tensor } }
local DECODER_FORWARD = { { "tgt_mask", nil, A.optional_tensor }, { "memory_mask", nil, A.optional_tensor },
  { "tgt_key_padding_mask", nil, A.optional_tensor }, { "memory_key_padding_mask", nil, A.optional_tensor } }

local function layer_repr(self)
  return ("d_model=%d, nhead=%d, dim_feedforward=%d, norm_first=%s"):format(self.d_model, self.nhead,
    self.linear1.out_features, tostring(self.norm_first))
end

local function encoder_layer_class(nn)
  local op = "ember.nn.TransformerEncoderLayer"
  local L = nn.Module:extend("TransformerEncoderLayer")
  function L:init(d_model, nhead, ...)
    local o = layer_init(nn, self, op, d_model, nhead, ...)
    feed_forward_init(nn, self, o)
    norm_init(nn, self, o, 2)
  end
  -- layer(src, src_mask, src_key_padding_mask) or layer(src, {src_mask =, src_key_padding_mask =})
  function L:forward(src, ...)
    local o = arguments(op, { "src" }, ENCODER_FORWARD, ...)
    need_sequence(op, "src", src, self.d_model)
    return residuals(self, src, {
      function(h) return attend(self.self_attn, h, h, o.src_mask, o.src_key_padding_mask, self.dropout1) end,
      function(h) return feed_forward(self, h, self.dropout2) end,
    })
  end
  L.extra_repr = layer_repr
  nn.TransformerEncoderLayer = L
end

local function decoder_layer_class(nn)
  local op = "ember.nn.TransformerDecoderLayer"
  local L = nn.Module:extend("TransformerDecoderLayer")
  function L:init(d_model, nhead, ...)
    local o, mha = layer_init(nn, self, op, d_model, nhead, ...)
    self.multihead_attn = nn.MultiheadAttention(d_model, nhead, mha)
    feed_forward_init(nn, self, o)
    norm_init(nn, self, o, 3)
  end
  -- layer(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask),
  -- the masks also by name in a table
  function L:forward(tgt, memory, ...)
    local o = arguments(op, { "tgt", "memory" }, DECODER_FORWARD, ...)
    need_sequence(op, "tgt", tgt, self.d_model)
    need_sequence(op, "memory", memory, self.d_model)
    return residuals(self, tgt, {
      function(h) return attend(self.self_attn, h, h, o.tgt_mask, o.tgt_key_padding_mask, self.dropout1) end,
      function(h)
        return attend(self.multihead_attn, h, memory, o.memory_mask, o.memory_key_padding_mask, self.dropout2)
      end,
      function(h) return feed_forward(self, h, self.dropout3) end,
    })
  end
  L.extra_repr = layer_repr
  nn.TransformerDecoderLayer = L
end

---------------------------------------------------------------- the stacks
-- a copy of layer with its own parameters, equal to layer's (PyTorch's deepcopy)
local function copy_layer(op, what, layer, class)
  if not (is_module(layer) and rawget(layer, "_args")) then
    fail(op, "%s must be an nn.%s, got %s", what, class.__name, is_module(layer) and layer.__name or type(layer))
  end
  local args = rawget(layer, "_args")
  local copy = getmetatable(layer).__class(unpack(args, 1, args.n))
  local p = layer:parameters()[1]
  if p then copy:to(p.dtype) end
  copy:load_state_dict(layer:state_dict())
  return copy:train(layer.training)
end

-- PyTorch's enable_nested_tensor picks its fast path for eval() without
-- gradients, which writes zeros at padded positions; ember has only the path
-- PyTorch's enable_nested_tensor = False takes
local function no_nested(v)
  if v ~= false then return "false (ember has no nested-tensor fast path: it computes what PyTorch does without it)" end
end
local STACK = { { "norm", nil, optional_module } }
local ENCODER_STACK = { STACK[1], { "enable_nested_tensor", false, no_nested } }

-- nn.TransformerEncoder(encoder_layer, num_layers, norm?, enable_nested_tensor = false?) and
-- nn.TransformerDecoder(decoder_layer, num_layers, norm?): num_layers copies of the layer, run in
-- turn, then the norm. inputs: the forward's tensors before its options; run_layer(layer, x,
-- memory, o) runs one layer with the forward's options o.
--   encoder(src, mask, src_key_padding_mask) or encoder(src, {mask =, src_key_padding_mask =})
--   decoder(tgt, memory, tgt_mask, memory_mask, ...) or decoder(tgt, memory, {tgt_mask =, ...})
local function stack_class(nn, name, what, inputs, forward_spec, run_layer)
  local op = "ember.nn." .. name
  local S = nn.Module:extend(name)
  function S:init(layer, num_layers, ...)
    local o = arguments(op, { what, "num_layers" }, what == "encoder_layer" and ENCODER_STACK or STACK, ...)
    if A.int(1)(num_layers) then fail(op, "num_layers must be an integer >= 1, got %s", A.value_str(num_layers)) end
    local list = {}
    for i = 1, num_layers do list[i] = copy_layer(op, what, layer, nn[name .. "Layer"]) end
    self.layers = nn.ModuleList(list)
    self.num_layers = num_layers
    if o.norm then self.norm = o.norm end
  end
  function S:forward(x, ...)
    local memory = inputs[2] and (...)
    local o = arguments(op, inputs, forward_spec, select(#inputs, ...))
    for _, layer in self.layers:iter() do x = run_layer(layer, x, memory, o) end
    if self.norm then x = self.norm(x) end
    return x
  end
  nn[name] = S
end

local function encoder_class(nn)
  stack_class(nn, "TransformerEncoder", "encoder_layer", { "src" },
    { { "mask", nil, A.optional_tensor }, ENCODER_FORWARD[2] }, function(layer, x, _, o)
      return layer(x, { src_mask = o.mask, src_key_padding_mask = o.src_key_padding_mask })
    end)
end

local function decoder_class(nn)
  stack_class(nn, "TransformerDecoder", "decoder_layer", { "tgt", "memory" }, DECODER_FORWARD,
    function(layer, x, memory, o) return layer(x, memory, o) end)
end

local TRANSFORMER_SPEC = { { "d_model", 512, A.int(1) }, { "nhead", 8, A.int(1) }, { "num_encoder_layers", 6, A.int(1) },
  { "num_decoder_layers", 6, A.int(1) }, LAYER_SPEC[1], LAYER_SPEC[2], LAYER_SPEC[3],
  { "custom_encoder", nil, optional_module }, { "custom_decoder", nil, optional_module },
  LAYER_SPEC[4], LAYER_SPEC[5], LAYER_SPEC[6], A.DTYPE }
local TRANSFORMER_FORWARD = { { "src_mask", nil, A.optional_tensor }, { "tgt_mask", nil, A.optional_tensor },
  { "memory_mask", nil, A.optional_tensor }, { "src_key_padding_mask", nil, A.optional_tensor },
  { "tgt_key_padding_mask", nil, A.optional_tensor }, { "memory_key_padding_mask", nil, A.optional_tensor } }

local function transformer_class(nn)
  local op = "ember.nn.Transformer"
  local T = nn.Module:extend("Transformer")
  -- every argument has a default: nn.Transformer(), nn.Transformer(16, 2), nn.Transformer({d_model = 16})
  function T:init(...)
    local o = arguments(op, {}, TRANSFORMER_SPEC, ...)
    local d_model = o.d_model
    if d_model % o.nhead ~= 0 then fail(op, "d_model %d must be divisible by nhead %d", d_model, o.nhead) end
    local layer = { dim_feedforward = o.dim_feedforward, dropout = o.dropout, activation = o.activation,
      layer_norm_eps = o.layer_norm_eps, batch_first = o.batch_first, norm_first = o.norm_first, dtype = o.dtype }
    local norm = { eps = o.layer_norm_eps, dtype = o.dtype }
    self.encoder = o.custom_encoder or nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model, o.nhead, layer),
      o.num_encoder_layers, nn.LayerNorm(d_model, norm))
    self.decoder = o.custom_decoder or nn.TransformerDecoder(nn.TransformerDecoderLayer(d_model, o.nhead, layer),
      o.num_decoder_layers, nn.LayerNorm(d_model, norm))
    -- PyTorch's _reset_parameters: xavier uniform for every matrix
    for _, p in ipairs(self:parameters()) do
      if p:dim() > 1 then init.xavier_uniform_(p) end
    end
    self.d_model, self.nhead, self.batch_first = d_model, o.nhead, o.batch_first
  end
  -- model(src, tgt, src_mask, tgt_mask, memory_mask, src_key_padding_mask,
  -- tgt_key_padding_mask, memory_key_padding_mask), the masks also by name
  function T:forward(src, tgt, ...)
    local o = arguments(op, { "src", "tgt" }, TRANSFORMER_FORWARD, ...)
    need_sequence(op, "src", src, self.d_model)
    need_sequence(op, "tgt", tgt, self.d_model)
    local bdim = self.batch_first and 1 or 2
    if src:dim() ~= tgt:dim() or (src:dim() == 3 and src:size(bdim) ~= tgt:size(bdim)) then
      fail(op, "src %s and tgt %s must have the same batch size", shape_str(src), shape_str(tgt))
    end
    local memory = self.encoder(src, { mask = o.src_mask, src_key_padding_mask = o.src_key_padding_mask })
    return self.decoder(tgt, memory, { tgt_mask = o.tgt_mask, memory_mask = o.memory_mask,
      tgt_key_padding_mask = o.tgt_key_padding_mask, memory_key_padding_mask = o.memory_key_padding_mask })
  end
  -- a function of the class (PyTorch's static method), outside the API tables
  -- init.lua's arity wrappers cover: a value past opts raises here
  T.generate_square_subsequent_mask = errors.arity_checked(
    "ember.nn.Transformer.generate_square_subsequent_mask", square_subsequent_mask, 0)
  nn.Transformer = T
end

function M.register(nn)
  mha_class(nn)
  encoder_layer_class(nn)
  decoder_layer_class(nn)
  encoder_class(nn)
  decoder_class(nn)
  transformer_class(nn)
  nn.causal_mask = causal_mask
end

return M
