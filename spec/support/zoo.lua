-- The model zoo of spec/zoo_spec.lua: PyTorch models ported to ember, each
-- beside its PyTorch definition in spec/fixtures/zoo/gen.py (the sections
-- between the "model:" and "end" markers), and Z.run, which loads a
-- fixture's state_dict under PyTorch's names, runs the forward, the
-- backward and five AdamW steps under CosineAnnealingLR as gen.py did, and
-- returns the largest differences from PyTorch's values. Also the models
-- and training step the plan specs and benches share (Z.mlp, Z.SmallCNN,
-- Z.train_step, Z.peak_bytes; bench/mobilenetv2.lua builds on Z.conv_bn
-- and Z.InvertedResidual).
local ember = require("ember")
local nn, F = ember.nn, ember.nn.functional
local optim = ember.optim
local shape_str = require("ember.errors").shape

local Z = {}

---------------------------------------------------------------- model: encoder
function Z.encoder(norm_first)
  if norm_first then
    local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, activation = "gelu",
      batch_first = true, norm_first = true })
    return nn.TransformerEncoder(layer, 2)
  end
  local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0 })
  return nn.TransformerEncoder(layer, 2, nn.LayerNorm(8))
end
---------------------------------------------------------------- end

---------------------------------------------------------------- model: gpt
local Block = nn.Module:extend("Block")
function Block:init(d, heads)
  self.ln1 = nn.LayerNorm(d)
  self.attn = nn.MultiheadAttention(d, heads, { batch_first = true })
  self.ln2 = nn.LayerNorm(d)
  self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
end
function Block:forward(x, mask)
  local h = self.ln1(x)
  x = x + self.attn(h, h, h, { attn_mask = mask, need_weights = false })
  return x + self.mlp(self.ln2(x))
end

local GPT = nn.Module:extend("GPT")
function GPT:init(vocab, block_size, d, heads, layers, tied)
  self.tok_emb = nn.Embedding(vocab, d)
  self.pos_emb = nn.Embedding(block_size, d)
  self.blocks = nn.ModuleList()
  for _ = 1, layers do self.blocks:append(Block(d, heads)) end
  self.ln_f = nn.LayerNorm(d)
  self.tied = tied
  if not tied then self.head = nn.Linear(d, vocab, { bias = false }) end
end
-- (spec/zoo_spec.lua also ties a head module: model.head.weight = model.tok_emb.weight)
function GPT:forward(idx)   -- idx (N, T), 1-based token ids
  local T = idx:size(2)
  local mask = nn.causal_mask(T)
  local x = self.tok_emb(idx) + self.pos_emb(ember.arange(1, T + 1))
  for _, block in self.blocks:iter() do x = block(x, mask) end
  x = self.ln_f(x)
  return self.tied and F.linear(x, self.tok_emb.weight) or self.head(x)
end
---------------------------------------------------------------- end
Z.GPT = GPT

---------------------------------------------------------------- model: rnn_lm
local RNNLM = nn.Module:extend("RNNLM")
function RNNLM:init(kind, vocab, d, hidden, layers)
  self.emb = nn.Embedding(vocab, d)
  self.rnn = (kind == "lstm" and nn.LSTM or nn.GRU)(d, hidden, { num_layers = layers })
  self.fc = nn.Linear(hidden, vocab)
end
function RNNLM:forward(idx, state)
  local y, s = self.rnn(self.emb(idx), state)
  return self.fc(y), s
end
---------------------------------------------------------------- end
Z.RNNLM = RNNLM

---------------------------------------------------------------- model: resnet18
local BasicBlock = nn.Module:extend("BasicBlock")
function BasicBlock:init(cin, cout, stride)
  self.conv1 = nn.Conv2d(cin, cout, 3, { stride = stride, padding = 1, bias = false })
  self.bn1 = nn.BatchNorm2d(cout)
  self.relu = nn.ReLU()
  self.conv2 = nn.Conv2d(cout, cout, 3, { padding = 1, bias = false })
  self.bn2 = nn.BatchNorm2d(cout)
  if stride ~= 1 or cin ~= cout then
    self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, { stride = stride, bias = false }), nn.BatchNorm2d(cout))
  end
end
function BasicBlock:forward(x)
  local y = self.relu(self.bn1(self.conv1(x)))
  y = self.bn2(self.conv2(y))
  return self.relu(y + (self.downsample and self.downsample(x) or x))
end

local ResNet18 = nn.Module:extend("ResNet18")
function ResNet18:init(width, num_classes)
  width, num_classes = width or 64, num_classes or 1000
  self.conv1 = nn.Conv2d(3, width, 7, { stride = 2, padding = 3, bias = false })
  self.bn1 = nn.BatchNorm2d(width)
  self.relu = nn.ReLU()
  self.maxpool = nn.MaxPool2d(3, { stride = 2, padding = 1 })
  local cin = width
  for i, mult in ipairs({ 1, 2, 4, 8 }) do
    local cout = width * mult
    local stride = i == 1 and 1 or 2
    self["layer" .. i] = nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1))
    cin = cout
  end
  self.avgpool = nn.AdaptiveAvgPool2d(1)
  self.fc = nn.Linear(cin, num_classes)
end
function ResNet18:forward(x)
  x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
  x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
  return self.fc(self.avgpool(x):flatten(2))
end
---------------------------------------------------------------- end
Z.ResNet18 = ResNet18

---------------------------------------------------------------- model: seq2seq
function Z.seq2seq()
  return nn.Transformer({ d_model = 8, nhead = 2, num_encoder_layers = 2, num_decoder_layers = 2,
    dim_feedforward = 16, dropout = 0 })
end
---------------------------------------------------------------- end

---------------------------------------------------------------- model: mobilenet
local SqueezeExcite = nn.Module:extend("SqueezeExcite")
function SqueezeExcite:init(c, squeeze)
  self.avgpool = nn.AdaptiveAvgPool2d(1)
  self.fc1 = nn.Conv2d(c, squeeze, 1)
  self.relu = nn.ReLU()
  self.fc2 = nn.Conv2d(squeeze, c, 1)
  self.gate = nn.Hardsigmoid()
end
function SqueezeExcite:forward(x)
  return x * self.gate(self.fc2(self.relu(self.fc1(self.avgpool(x)))))
end

-- appends to layers a k x k convolution without bias ("same" padding), a
-- BatchNorm2d with options bn and, given its constructor act, an
-- activation; returns layers (bench/mobilenetv2.lua's MobileNetV2 too)
function Z.conv_bn(layers, cin, cout, k, stride, groups, act, bn)
  layers[#layers + 1] = nn.Conv2d(cin, cout, k, { stride = stride or 1, padding = (k - 1) / 2, groups = groups or 1,
    bias = false })
  layers[#layers + 1] = nn.BatchNorm2d(cout, bn or {})
  if act then layers[#layers + 1] = act() end
  return layers
end
local function conv_bn(layers, cin, cout, k, stride, groups, act)
  return Z.conv_bn(layers, cin, cout, k, stride, groups, act, { eps = 0.001, momentum = 0.01 })
end

local InvertedResidual = nn.Module:extend("InvertedResidual")
function InvertedResidual:init(cin, exp, cout, k, stride, se, act)
  local layers = exp ~= cin and conv_bn({}, cin, exp, 1, 1, 1, act) or {}
  conv_bn(layers, exp, exp, k, stride, exp, act)   -- depthwise
  if se then layers[#layers + 1] = SqueezeExcite(exp, math.floor(exp / 4)) end
  self.block = nn.Sequential(unpack(conv_bn(layers, exp, cout, 1)))
  self.use_res = stride == 1 and cin == cout
end
function InvertedResidual:forward(x)
  local y = self.block(x)
  return self.use_res and x + y or y
end

local MobileNet = nn.Module:extend("MobileNet")
function MobileNet:init(num_classes, dropout)
  -- in, expanded, out channels, kernel, stride, squeeze-and-excitation, activation
  local blocks = { { 8, 8, 8, 3, 1, true, nn.ReLU6 }, { 8, 24, 12, 3, 2, false, nn.ReLU6 },
    { 12, 36, 12, 5, 1, true, nn.Hardswish }, { 12, 36, 16, 5, 2, true, nn.Hardswish } }
  self.features = nn.Sequential(nn.Sequential(unpack(conv_bn({}, 3, 8, 3, 2, 1, nn.Hardswish))))
  for _, b in ipairs(blocks) do self.features:append(InvertedResidual(unpack(b))) end
  self.features:append(nn.Sequential(unpack(conv_bn({}, 16, 48, 1, 1, 1, nn.Hardswish))))
  self.avgpool = nn.AdaptiveAvgPool2d(1)
  self.classifier = nn.Sequential(nn.Linear(48, 32), nn.Hardswish(), nn.Dropout(dropout),
    nn.Linear(32, num_classes))
end
function MobileNet:forward(x)
  return self.classifier(self.avgpool(self.features(x)):flatten(2))
end
---------------------------------------------------------------- end
Z.MobileNet = MobileNet
Z.InvertedResidual = InvertedResidual

---------------------------------------------------------------- model: unet
local function double_conv(cin, cout)
  return nn.Sequential(nn.Conv2d(cin, cout, 3, { padding = 1, bias = false }), nn.GroupNorm(2, cout),
    nn.LeakyReLU(0.1, true), nn.Conv2d(cout, cout, 3, { padding = 1, bias = false }),
    nn.GroupNorm(2, cout), nn.LeakyReLU(0.1, true))
end

local UNet = nn.Module:extend("UNet")
function UNet:init(cin, classes, w)
  self.inc = double_conv(cin, w)
  self.pool = nn.MaxPool2d(2)
  self.down1 = double_conv(w, 2 * w)
  self.down2 = double_conv(2 * w, 4 * w)
  self.up1 = nn.ConvTranspose2d(4 * w, 2 * w, 2, { stride = 2 })
  self.dec1 = double_conv(4 * w, 2 * w)
  self.up2 = nn.Sequential(nn.Conv2d(2 * w, 4 * w, 3, { padding = 1 }), nn.PixelShuffle(2))
  self.dec2 = double_conv(2 * w, w)
  self.head = nn.Conv2d(w, classes, 1)
end
function UNet:forward(x)
  local x1 = self.inc(x)
  local x2 = self.down1(self.pool(x1))
  local y = self.down2(self.pool(x2))
  y = self.dec1(ember.cat({ self.up1(y, x2:shape()), x2 }, 2))   -- odd sizes: output_padding
  y = self.dec2(ember.cat({ self.up2(y), x1 }, 2))
  return self.head(y)
end
---------------------------------------------------------------- end
Z.UNet = UNet

-- The MLP recipe in any size, for the plan specs and benches (bench/jit_*.lua):
-- Linear layers over widths with ReLU between them, after a Flatten when
-- flatten is set
function Z.mlp(widths, flatten)
  local layers = flatten and { nn.Flatten() } or {}
  for i = 2, #widths do
    if i > 2 then layers[#layers + 1] = nn.ReLU() end
    layers[#layers + 1] = nn.Linear(widths[i - 1], widths[i])
  end
  return nn.Sequential(unpack(layers))
end

-- The CNN recipe in small, for the plan specs: a 3 x 3 convolution 1 -> 4,
-- batch norm, ReLU and 2 x 2 max pooling over 8 x 8 inputs, then Linear
-- 64 -> 16, ReLU, dropout 0.3 and Linear 16 -> 10
local SmallCNN = nn.Module:extend("SmallCNN")
function SmallCNN:init()
  self.conv1 = nn.Conv2d(1, 4, 3, { padding = 1 })
  self.bn1 = nn.BatchNorm2d(4)
  self.pool = nn.MaxPool2d(2)
  self.fc1 = nn.Linear(4 * 4 * 4, 16)
  self.drop = nn.Dropout(0.3)
  self.fc2 = nn.Linear(16, 10)
end
function SmallCNN:forward(x)
  x = self.pool(F.relu(self.bn1(self.conv1(x))))
  x = self.drop(F.relu(self.fc1(x:flatten(2))))
  return self.fc2(x)
end
Z.SmallCNN = SmallCNN

-- A classifier's training step: step(x, y) records model(x), takes the
-- cross-entropy's gradients for params (model:parameters() when not
-- given: model may be any function when they are), runs opt:step() and
-- opt:zero_grad(), and returns the loss
function Z.train_step(model, opt, params)
  local gm = ember.autodiff.GradManager():attach(params or model:parameters())
  return function(x, y)
    gm:record()
    local loss = F.cross_entropy(model(x), y)
    gm:backward(loss)
    opt:step()
    opt:zero_grad()
    return loss
  end
end

-- the most bytes f() holds at once above what was live before it
function Z.peak_bytes(f)
  collectgarbage()
  collectgarbage()
  ember.reset_peak_memory()
  local base = ember.memory_stats().bytes_in_use
  f()
  return ember.memory_stats().peak_bytes - base
end

local function lm_loss(logits, targets)
  return F.cross_entropy(logits:reshape(-1, logits:size(-1)), targets:reshape(-1))
end
local function weighted_sum(y, r) return (y * r):sum() end

-- name -> {build(), loss(model, inputs) -> output, loss; eval(model, inputs)?,
-- null_grads = {PyTorch's names of parameters with no gradient in exact arithmetic}?}
Z.models = {
  encoder_post = { build = function() return Z.encoder(false) end, loss = function(m, i)
    local y = m(i.src, { mask = i.mask, src_key_padding_mask = i.src_key_padding_mask })
    return y, weighted_sum(y, i.r)
  end },
  encoder_pre = { build = function() return Z.encoder(true) end, loss = function(m, i)
    local y = m(i.src, i.mask)
    return y, weighted_sum(y, i.r)
  end },
  gpt_tied = { build = function() return GPT(11, 6, 8, 2, 2, true) end, loss = function(m, i)
    local y = m(i.idx)
    return y, lm_loss(y, i.targets)
  end },
  gpt = { build = function() return GPT(11, 6, 8, 2, 2, false) end, loss = function(m, i)
    local y = m(i.idx)
    return y, lm_loss(y, i.targets)
  end },
  lstm_lm = { build = function() return RNNLM("lstm", 11, 6, 7, 2) end, loss = function(m, i)
    local y = m(i.idx, { i.h0, i.c0 })
    return y, lm_loss(y, i.targets)
  end },
  gru_lm = { build = function() return RNNLM("gru", 11, 6, 7, 2) end, loss = function(m, i)
    local y = m(i.idx, i.h0)
    return y, lm_loss(y, i.targets)
  end },
  resnet18 = { build = function() return ResNet18(4, 5) end, loss = function(m, i)
    local y = m(i.x)
    return y, F.cross_entropy(y, i.labels)
  end, eval = function(m, i) return m(i.x) end },
  seq2seq = { build = Z.seq2seq, loss = function(m, i)
    local y = m(i.src, i.tgt, { tgt_mask = i.tgt_mask, src_key_padding_mask = i.src_key_padding_mask,
      memory_key_padding_mask = i.src_key_padding_mask })
    return y, weighted_sum(y, i.r)
  end },
  mobilenet = { build = function() return MobileNet(5, 0) end, loss = function(m, i)
    local y = m(i.x)
    return y, F.cross_entropy(y, i.labels, { label_smoothing = 0.1 })
  end, eval = function(m, i) return m(i.x) end,
    -- each block's last BatchNorm (the linear bottleneck, no activation
    -- after it): its bias adds a constant per channel, which the next 1x1
    -- convolution turns into a constant per channel, which the BatchNorm
    -- after that (in training) takes away with the mean: no gradient
    null_grads = { "features.1.block.5.bias", "features.2.block.7.bias", "features.3.block.8.bias",
      "features.4.block.8.bias" } },
  unet = { build = function() return UNet(3, 3, 4) end, loss = function(m, i)
    local y = m(i.x)
    return y, F.cross_entropy(y, i.labels)
  end },
}
-- not a zoo model: the decoder side with norm_first (spec/transformer_spec.lua)
Z.models.decoder_pre = { build = function()
  local layer = nn.TransformerDecoderLayer(8, 2, 12, 0, "gelu", 1e-6, true, true)
  return nn.TransformerDecoder(layer, 2, nn.LayerNorm(8))
end, loss = function(m, i)
  local y = m(i.tgt, i.memory, i.tgt_mask, i.memory_mask, i.tgt_key_padding_mask)
  return y, weighted_sum(y, i.r)
end }
Z.order = { "encoder_post", "encoder_pre", "gpt_tied", "gpt", "lstm_lm", "gru_lm", "resnet18", "seq2seq",
  "mobilenet", "unet" }

-- the fixture's entries by prefix: {sd = {...}, ["in"] = {...}, grad = ..., after = ..., [""] = {out =, loss =}}
function Z.fixture(name)
  local fx = ember.load("spec/fixtures/zoo/" .. name .. ".safetensors")
  local parts = { [""] = {} }
  for k, t in pairs(fx) do
    local prefix, rest = k:match("^(%a+)%.(.+)$")
    if prefix and prefix ~= "loss" then
      parts[prefix] = parts[prefix] or {}
      parts[prefix][rest] = t
    else
      parts[""][k] = t
    end
  end
  return parts
end

-- the largest |a - b| over two tensors of one shape (b the reference)
function Z.max_err(a, b)
  local same = a:dim() == b:dim()
  for d = 1, a:dim() do same = same and a:size(d) == b:size(d) end
  assert(same, ("shapes %s and %s differ"):format(shape_str(a), shape_str(b)))
  if a:numel() == 0 then return 0 end
  return (a:to("float64") - b:to("float64")):abs():max():item()
end

local function is_module(v) return type(v) == "table" and getmetatable(v) and getmetatable(v).__module end

-- a parameter's name in PyTorch's naming: Sequential's and ModuleList's
-- children numbered from 0
-- Runs model `name` in dtype ("float64" or "float32") from PyTorch's
-- state_dict. Returns {out =, loss =, grad =, grads = {name -> err},
-- losses =, after =, eval =}: the largest absolute differences, and the
-- model.
function Z.run(name, dtype)
  local spec, fx = Z.models[name], Z.fixture(name)
  local model = spec.build():double()
  model:load_state_dict(fx.sd, { torch_names = true })
  if dtype ~= "float64" then model:to(dtype) end
  local inputs = {}
  for k, t in pairs(fx["in"]) do
    if t.dtype == "int64" then inputs[k] = t + 1   -- token ids and labels: 1-based
    elseif t.dtype == "float64" then inputs[k] = t:to(dtype)
    else inputs[k] = t end
  end
  model:train()
  local named = model:named_parameters()
  local torch_named = model:named_parameters({ torch_names = true })   -- the same order, PyTorch's names
  local params = model:parameters()
  local opt = optim.AdamW(params, { lr = 1e-2, weight_decay = 0.1 })
  local sched = optim.lr_scheduler.CosineAnnealingLR(opt, { T_max = 5 })
  local gm = ember.autodiff.GradManager():attach(params)
  local err = { grads = {}, grad = 0, losses = 0, after = 0 }
  for step = 1, 5 do
    gm:record()
    local y, loss = spec.loss(model, inputs)
    gm:backward(loss)
    if step == 1 then
      err.out, err.loss = Z.max_err(y, fx[""].out), Z.max_err(loss, fx[""].loss)
      for i, e in ipairs(named) do
        local key, tname = e[1], torch_named[i][1]
        assert(fx.grad[tname], "no PyTorch gradient for " .. tname)
        local g = e[2].grad
        assert(g ~= nil, "no gradient for " .. key)
        err.grads[tname] = Z.max_err(g, fx.grad[tname])
        err.n_grads = (err.n_grads or 0) + 1
        err.grad = math.max(err.grad, err.grads[tname])
      end
    end
    err.losses = math.max(err.losses, Z.max_err(loss, fx[""]["loss." .. step]))
    opt:step()
    opt:zero_grad()
    sched:step()
  end
  -- The keys' share of in_proj_bias has no gradient (q . b_k is the same for
  -- every key, and softmax ignores it), so what PyTorch and ember compute is
  -- rounding noise, which Adam's g / sqrt(v) scales up to steps of lr: its
  -- values after the steps are err.key_bias, apart from err.after. The
  -- parameters a model lists in null_grads are alike: their values after
  -- the steps are err.null.
  err.key_bias, err.null = 0, 0
  local null = {}
  for _, k in ipairs(spec.null_grads or {}) do null[k] = true end
  for k, t in pairs(model:state_dict({ torch_names = true })) do
    local ref = fx.after[k]
    assert(ref, "no PyTorch value after the steps for " .. k)
    if null[k] then
      err.null = math.max(err.null, Z.max_err(t, ref))
    elseif k:match("in_proj_bias$") then
      local E = t:size(1) / 3
      for part = 1, 3 do
        local e = Z.max_err(t:narrow(1, (part - 1) * E + 1, E), ref:narrow(1, (part - 1) * E + 1, E))
        if part == 2 then err.key_bias = math.max(err.key_bias, e) else err.after = math.max(err.after, e) end
      end
    else
      err.after = math.max(err.after, Z.max_err(t, ref))
    end
  end
  if spec.eval then
    model:eval()
    err.eval = Z.max_err(ember.no_grad(function() return spec.eval(model, inputs) end), fx[""].eval_out)
  end
  return err, model
end

return Z
