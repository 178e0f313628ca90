-- The model zoo: PyTorch 1.13 models ported to ember (spec/support/zoo.lua,
-- beside their PyTorch definitions in spec/fixtures/zoo/gen.py), each loaded
-- from PyTorch's state_dict under PyTorch's names, then compared with
-- PyTorch's output, loss and the gradient of every parameter, the losses of
-- five AdamW steps under CosineAnnealingLR and every parameter and buffer
-- after them (BatchNorm's running statistics included), in float64 within
-- 1e-10 and in float32 within float32's rounding. The fixtures' PyTorch
-- runs have no dropout (p = 0), whose masks the frameworks draw apart.
package.path = "./spec/support/?.lua;" .. package.path
local H = require("helpers")
local Z = require("zoo")
local ember = H.ember

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local DESCRIPTION = {
  encoder_post = "PyTorch's TransformerEncoder (2 post-norm layers, a final LayerNorm, a float causal mask, "
    .. "a bool key padding mask)",
  encoder_pre = "PyTorch's TransformerEncoder (2 pre-norm GELU layers, batch_first, a bool attention mask)",
  gpt_tied = "a GPT-style LM, the output projection tied to the token embedding",
  gpt = "a GPT-style LM with its own output projection",
  lstm_lm = "an LSTM LM (2 layers, initial states)",
  gru_lm = "a GRU LM (2 layers, an initial state)",
  resnet18 = "ResNet-18 (width 4, 64x64 images, BatchNorm in training, then eval)",
  seq2seq = "nn.Transformer (2 + 2 layers, a float tgt_mask, bool key padding masks)",
  mobilenet = "a MobileNetV3-style net (inverted residuals, depthwise convolutions, squeeze-and-excitation, "
    .. "ReLU6, Hardswish, Hardsigmoid, label smoothing; BatchNorm in training, then eval)",
  unet = "a U-Net (GroupNorm, in-place LeakyReLU, MaxPool2d, ConvTranspose2d and PixelShuffle up, skip cats, "
    .. "a per-pixel cross entropy)",
}

describe("the model zoo against PyTorch 1.13", function()
  for _, name in ipairs(Z.order) do
    it(DESCRIPTION[name] .. ": float64 within 1e-10", function()
      local fx = Z.fixture(name)
      local err = Z.run(name, "float64")
      assert.are.equal(count(fx.grad), err.n_grads)   -- every parameter's gradient was compared
      for what, e in pairs({ out = err.out, loss = err.loss, grad = err.grad, losses = err.losses,
        after = err.after, eval = err.eval }) do
        assert(e <= 1e-10, ("%s: %s differs from PyTorch's by %g"):format(name, what, e))
      end
      -- the keys' share of in_proj_bias: no gradient in exact arithmetic
      -- (PyTorch's is rounding noise too), values after Adam's steps near
      for k, g in pairs(fx.grad) do
        if k:match("in_proj_bias$") then
          local E = g:size(1) / 3
          assert(g:narrow(1, E + 1, E):abs():max():item() < 1e-13, k)
        end
      end
      assert(err.key_bias <= 1e-8, ("%s: key bias after the steps differs by %g"):format(name, err.key_bias))
      -- the parameters the model lists as having no gradient: rounding noise
      -- on both sides, values after Adam's steps near (as the keys' bias)
      for _, k in ipairs(Z.models[name].null_grads or {}) do
        assert(fx.grad[k]:abs():max():item() < 1e-13 and err.grads[k] < 1e-13, k)
      end
      assert(err.null <= 1e-8, ("%s: the null_grads parameters after the steps differ by %g"):format(name, err.null))
    end)

    it(DESCRIPTION[name] .. ": float32 within float32's rounding", function()
      local err = Z.run(name, "float32")
      -- eval runs the parameters after the steps, so it takes their
      -- tolerance (MobileNet's BatchNorm in eval: 4.7e-5 with OpenBLAS's
      -- Haswell kernels, 1.6e-4 with SkylakeX's)
      for what, tol in pairs({ out = 1e-4, loss = 1e-4, grad = 1e-4, losses = 1e-3, after = 1e-3, eval = 1e-3 }) do
        local e = err[what]
        if e then assert(e <= tol, ("%s: float32 %s differs from PyTorch's float64 by %g"):format(name, what, e)) end
      end
    end)
  end

  it("ties a head module's weight to the embedding as PyTorch does: state_dict keys both names", function()
    local fx = Z.fixture("gpt_tied")
    local model = Z.GPT(11, 6, 8, 2, 2, false):double()
    model.head.weight = model.tok_emb.weight   -- PyTorch: self.head.weight = self.tok_emb.weight
    local sd = {}
    for k, t in pairs(fx.sd) do sd[k] = t end
    sd["head.weight"] = fx.sd["tok_emb.weight"]   -- what PyTorch's state_dict of that model holds
    local keys = H.sorted_keys(model:state_dict({ torch_names = true }))
    assert.are.same(H.sorted_keys(sd), keys)
    model:load_state_dict(sd, { torch_names = true })
    assert.are.equal(#keys - 1, #model:parameters())   -- one parameter under two names
    local gm = ember.autodiff.GradManager():attach(model:parameters())
    gm:record()
    local y = model(fx["in"].idx + 1)
    gm:backward(ember.nn.functional.cross_entropy(y:reshape(-1, 11), (fx["in"].targets + 1):reshape(-1)))
    assert.is_true(Z.max_err(y, fx[""].out) < 1e-10)
    assert.is_true(Z.max_err(model.tok_emb.weight.grad, fx.grad["tok_emb.weight"]) < 1e-10)
  end)

  it("MobileNet with its classifier's Dropout at p = 0.2 gives PyTorch's output in eval()", function()
    -- the zoo's runs take p = 0 (the two frameworks draw different masks);
    -- in eval() dropout is the identity, whatever p
    local fx = Z.fixture("mobilenet")
    local model = Z.MobileNet(5, 0.2):double()
    model:load_state_dict(fx.after, { torch_names = true })
    model:eval()
    local y = ember.no_grad(function() return model(fx["in"].x) end)
    assert.is_true(Z.max_err(y, fx[""].eval_out) < 1e-10)
  end)

  it("loads the fixtures' state_dicts by PyTorch's keys, unchanged", function()
    local fx = Z.fixture("encoder_post")
    local model = Z.models.encoder_post.build():double()
    local names = H.sorted_keys(model:state_dict({ torch_names = true }))
    assert.are.same(H.sorted_keys(fx.sd), names)
    assert.are.equal("layers.0.linear1.bias", names[1])
    -- without torch_names the keys are ember's (1-based), and the error says what to do
    assert.has_error(function() model:load_state_dict(fx.sd) end)
    local ok, msg = pcall(model.load_state_dict, model, fx.sd)
    assert.is_false(ok)
    assert.truthy(tostring(msg):find("torch_names = true", 1, true))
    -- a safetensors file written by ember loads back into PyTorch's naming
    local path = os.tmpname()
    model:load_state_dict(fx.sd, { torch_names = true })
    ember.save(path, model:state_dict({ torch_names = true }))
    local back = ember.load(path)
    os.remove(path)
    for k, t in pairs(fx.sd) do assert.are.equal(0, Z.max_err(back[k], t)) end
  end)
end)
