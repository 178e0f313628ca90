-- Recurrent layers and their fused cells: nn.RNN/LSTM/GRU and the cells
-- against PyTorch 1.13 (spec/fixtures/rnn_torch.json, written by
-- gen_rnn.py) in float64, forward and backward; the fused ops lstm_cell and
-- gru_cell by hand, by gradcheck and gradgradcheck, on strided float32
-- input; bad input.
local H = require("helpers")
local ember = H.ember
local nn, F = ember.nn, ember.nn.functional
local GradManager = ember.autodiff.GradManager
local gradcheck, gradgradcheck = ember.autodiff.gradcheck, ember.autodiff.gradgradcheck
local fx = H.read_json("spec/fixtures/rnn_torch.json")
local F64 = { dtype = "float64" }

local function t64(v) return ember.tensor(v, F64) end
local function randn(shape, dtype) return ember.randn(shape, { dtype = dtype or "float64" }) end

local function load(c)
  local opts = { dtype = "float64" }
  for k, v in pairs(c.opts) do opts[k] = v end
  local m = nn[c.class](c.input_size, c.hidden_size, opts)
  local sd = {}
  for k, v in pairs(c.params) do sd[k] = t64(v) end
  m:load_state_dict(sd)
  return m
end

-- runs fixture case c through ember: outputs and gradients beside PyTorch's
local function check_case(c, is_cell)
  local m = load(c)
  local x = t64(c.x)
  local h0, c0 = c.h0 and t64(c.h0), c.c0 and t64(c.c0)
  local attached = { x }
  for _, p in ipairs(m:parameters()) do attached[#attached + 1] = p end
  if h0 then attached[#attached + 1] = h0 end
  if c0 then attached[#attached + 1] = c0 end
  local gm = GradManager():attach(attached)
  gm:record()
  local hx = h0
  if c.class:find("LSTM") then hx = h0 and { h0, c0 } end
  local out, hn, cn
  if is_cell then
    hn, cn = m(x, hx)
  else
    local st
    out, st = m(x, hx)
    if c.class == "LSTM" then hn, cn = st[1], st[2] else hn = st end
  end
  local loss = (hn * t64(c.w_hn)):sum()
  if out then loss = loss + (out * t64(c.w_out)):sum() end
  if cn then loss = loss + (cn * t64(c.w_cn)):sum() end
  gm:backward(loss)
  if out then H.same(out, c.out, 1e-12) end
  H.same(hn, c.hn, 1e-12)
  if cn then H.same(cn, c.cn, 1e-12) end
  for name, g in pairs(c.grad_params) do
    local p = m:named_parameters()[name]
    assert(p, name)
    H.same(p.grad, g, 1e-11)
  end
  H.same(x.grad, c.grad_x, 1e-11)
  if h0 then H.same(h0.grad, c.grad_h0, 1e-11) end
  if c0 then H.same(c0.grad, c.grad_c0, 1e-11) end
end

describe("nn.RNN, nn.LSTM, nn.GRU", function()
  for _, c in ipairs(fx.layers) do
    it("match PyTorch forward and backward: " .. c.name, function() check_case(c, false) end)
  end

  it("name their parameters as PyTorch does, in its order", function()
    local m = nn.LSTM(3, 4, 2, { bidirectional = true })
    local names = {}
    for name, p in m:named_parameters() do names[#names + 1] = name .. "=" .. table.concat(p:shape(), "x") end
    assert.are.same({ "weight_ih_l0=16x3", "weight_hh_l0=16x4", "bias_ih_l0=16", "bias_hh_l0=16",
      "weight_ih_l0_reverse=16x3", "weight_hh_l0_reverse=16x4", "bias_ih_l0_reverse=16", "bias_hh_l0_reverse=16",
      "weight_ih_l1=16x8", "weight_hh_l1=16x4", "bias_ih_l1=16", "bias_hh_l1=16",
      "weight_ih_l1_reverse=16x8", "weight_hh_l1_reverse=16x4", "bias_ih_l1_reverse=16", "bias_hh_l1_reverse=16" },
      names)
    assert.are.equal(12, #nn.GRU(2, 4):parameters()[1]:tolist())
    assert.are.equal(2, #nn.RNN(2, 4, { bias = false }):parameters())
    -- U(-1/sqrt(H), 1/sqrt(H))
    local w = nn.GRU(2, 100).weight_hh_l0
    assert.is_true(w:abs():max():item() <= 0.1 and w:abs():max():item() > 0.09)
  end)

  it("apply dropout between layers in training only", function()
    ember.manual_seed(3)
    local m = nn.GRU(3, 8, { num_layers = 2, dropout = 0.5, dtype = "float64" })
    local x = randn({ 4, 2, 3 })
    local y1 = m(x)
    m:eval()
    local y2, y3 = m(x), m(x)
    H.same(y2, y3:tolist(), 0)
    assert.is_true((y1 - y2):abs():max():item() > 1e-3)
    -- no dropout after the last layer: one layer ignores it
    local one = nn.LSTM(3, 4, { dropout = 0.5, dtype = "float64" })
    H.same(one(x), one:eval()(x):tolist(), 0)
  end)

  it("run float32 on a non-contiguous input as on its contiguous copy", function()
    ember.manual_seed(4)
    for _, kind in ipairs({ "RNN", "LSTM", "GRU" }) do
      local m = nn[kind](5, 6, { num_layers = 2, bidirectional = true })
      local x = ember.randn({ 3, 7, 5 })
      local xt = x:transpose(1, 2)   -- (7, 3, 5), strided
      assert.is_false(xt:is_contiguous())
      local a, b = m(xt), m(xt:contiguous())
      H.same(a, b:tolist(), 1e-6)
      local bf = nn[kind](5, 6, { batch_first = true })
      bf:load_state_dict(m:state_dict(), false)
      H.same(bf(x), bf(x:contiguous()):tolist(), 1e-6)
    end
  end)

  it("differentiate twice (gradgradcheck through a 2-layer LSTM and GRU)", function()
    ember.manual_seed(5)
    for _, kind in ipairs({ "LSTM", "GRU" }) do
      local m = nn[kind](2, 3, { num_layers = 2, dtype = "float64" })
      local w = m.weight_hh_l1
      assert.is_true(gradgradcheck(function(x, h0)
        local out = m(x, kind == "LSTM" and { h0, h0 * 0.5 } or h0)
        return (out * out):sum()
      end, { randn({ 3, 2, 2 }), randn({ 2, 2, 3 }) }))
      assert.is_true(w.grad == nil)
    end
  end)

  it("reject bad input, naming the layer and the shapes", function()
    local m = nn.LSTM(3, 4, { num_layers = 2 })
    assert.error_matches(function() m(ember.zeros({ 5, 2, 7 })) end,
      "ember.nn.LSTM: input of shape {5, 2, 7} does not fit: expected {L, N, 3}", 1, true)
    assert.error_matches(function() m(ember.zeros({ 5, 2, 3 }), { ember.zeros({ 1, 2, 4 }) }) end,
      "ember.nn.LSTM: h_0 of shape {1, 2, 4} does not fit: expected {2, 2, 4}", 1, true)
    assert.error_matches(function() m(ember.zeros({ 5, 2, 3 }), ember.zeros({ 2, 2, 4 })) end,
      "ember.nn.LSTM: hx must be a table {h_0, c_0}, got a tensor", 1, true)
    assert.error_matches(function() m(ember.zeros({ 5, 2, 3 }, F64)) end,
      "ember.nn.LSTM: input is float64 but the parameters are float32", 1, true)
    assert.error_matches(function() m(ember.zeros({ 0, 2, 3 })) end,
      "ember.nn.LSTM: input {0, 2, 3} has no time steps", 1, true)
    assert.error_matches(function() nn.GRU(3, 4)(ember.zeros({ 5, 2, 3 }), ember.zeros({ 1, 3, 4 })) end,
      "ember.nn.GRU: h_0 of shape {1, 3, 4} does not fit: expected {1, 2, 4}", 1, true)
    assert.error_matches(function() nn.RNN(3, 4, { nonlinearity = "sigmoid" }) end,
      "ember.nn.RNN: nonlinearity must be 'tanh' or 'relu', got 'sigmoid'", 1, true)
    assert.error_matches(function() nn.GRU(3, 4, { nonlinearity = "relu" }) end,
      "ember.nn.GRU: unknown option 'nonlinearity'", 1, true)
    assert.error_matches(function() nn.LSTM(3, 0) end, "ember.nn.LSTM: hidden_size must be an integer >= 1", 1, true)
    assert.error_matches(function() nn.LSTM(3, 4, { dropout = 2 }) end,
      "ember.nn.LSTM: dropout must be in [0, 1], got 2", 1, true)
    assert.error_matches(function() nn.LSTM(3, 4, { layers = 2 }) end, "ember.nn.LSTM: unknown option 'layers'", 1, true)
    -- still usable
    H.shape_is(m(ember.zeros({ 5, 2, 3 })), { 5, 2, 4 })
  end)
end)

describe("nn.RNNCell, nn.LSTMCell, nn.GRUCell", function()
  for _, c in ipairs(fx.cells) do
    it("match PyTorch forward and backward: " .. c.name, function() check_case(c, true) end)
  end

  it("reject bad input", function()
    assert.error_matches(function() nn.GRUCell(3, 4)(ember.zeros({ 2, 5 })) end,
      "ember.nn.GRUCell: input of shape {2, 5} does not fit: expected {N, 3} or {3}", 1, true)
    assert.error_matches(function() nn.LSTMCell(3, 4)(ember.zeros({ 2, 3 }), { ember.zeros({ 2, 4 }), ember.zeros({ 4 }) }) end,
      "ember.nn.LSTMCell: c of shape {4} does not fit: expected {2, 4}", 1, true)
    assert.error_matches(function() nn.RNNCell(3, 4)(ember.zeros({ 2, 3 }), ember.zeros({ 2, 4 }, F64)) end,
      "ember.nn.RNNCell: h is float64 but the parameters are float32", 1, true)
  end)
end)

describe("the fused cell ops", function()
  it("lstm_cell matches its formula by hand", function()
    -- one unit: gates i, f, g, o = 0, ln 3, 0.5, -1 split between gi and gh
    local gi, gh, c = t64({ { 0, 1, 0.25, -1 } }), t64({ { 0, math.log(3) - 1, 0.25, 0 } }), t64({ { 2 } })
    local h, cy = F.lstm_cell(gi, gh, c)
    local sig = function(v) return 1 / (1 + math.exp(-v)) end
    local cexp = 0.75 * 2 + 0.5 * math.tanh(0.5)
    H.same(cy, { { cexp } }, 1e-15)
    H.same(h, { { sig(-1) * math.tanh(cexp) } }, 1e-15)
  end)

  it("gru_cell matches its formula by hand, r scaling gh_n", function()
    local gi, gh, hp = t64({ { 0, 0, 0.5 } }), t64({ { 0, math.log(3), 2 } }), t64({ { -1 } })
    -- r = 1/2, z = 3/4, n = tanh(0.5 + 0.5 * 2)
    local n = math.tanh(1.5)
    H.same(F.gru_cell(gi, gh, hp), { { 0.25 * n + 0.75 * -1 } }, 1e-15)
  end)

  it("pass gradcheck and gradgradcheck in float64", function()
    ember.manual_seed(6)
    local function lstm(gi, gh, c)
      local h, cy = F.lstm_cell(gi, gh, c)
      return (h * h):sum() + (cy * h):sum() + cy:sum()
    end
    local function gru(gi, gh, h) local y = F.gru_cell(gi, gh, h) return (y * y):sum() + y:sum() end
    local lin = { randn({ 3, 8 }), randn({ 3, 8 }), randn({ 3, 2 }) }
    local gin = { randn({ 3, 6 }), randn({ 3, 6 }), randn({ 3, 2 }) }
    assert.is_true(gradcheck(lstm, lin))
    assert.is_true(gradcheck(gru, gin))
    assert.is_true(gradgradcheck(lstm, lin))
    assert.is_true(gradgradcheck(gru, gin))
  end)

  it("give the same first-order gradient from the one-pass kernel and, under an outer manager, from public ops", function()
    ember.manual_seed(8)
    local function lstm(a, b, s) local h, cy = F.lstm_cell(a, b, s) return (h * h):sum() + (cy * h):sum() end
    local function gru(a, b, s) local h = F.gru_cell(a, b, s) return (h * h * s):sum() end
    for _, case in ipairs({ { lstm, 8 }, { gru, 6 } }) do
      local f, inputs = case[1], { randn({ 3, case[2] }), randn({ 3, case[2] }), randn({ 3, 2 }) }
      local plain = { ember.autodiff.grad(f, { 1, 2, 3 })(unpack(inputs)) }
      local outer = GradManager():attach({ inputs[1] })
      outer:record()
      local nested = { ember.autodiff.grad(f, { 1, 2, 3 })(unpack(inputs)) }
      assert.is_not_nil(nested[1]:grad_fn())   -- recorded: the public-op form ran
      outer:release()
      for k = 1, 3 do H.same(nested[k], plain[k]:tolist(), 1e-14) end
    end
  end)

  it("take strided float32 operands", function()
    ember.manual_seed(7)
    local gi, gh, c = ember.randn({ 8, 5 }), ember.randn({ 8, 5 }), ember.randn({ 2, 5 })
    local h, cy = F.lstm_cell(gi:t(), gh:t(), c:t())
    local h2, c2 = F.lstm_cell(gi:t():contiguous(), gh:t():contiguous(), c:t():contiguous())
    H.same(h, h2:tolist(), 1e-7)
    H.same(cy, c2:tolist(), 1e-7)
    local g6, k6, s = ember.randn({ 6, 5 }), ember.randn({ 6, 5 }), ember.randn({ 2, 5 })
    local y = F.gru_cell(H.noncontig(g6:t():contiguous()), k6:t(), s:t())
    H.same(y, F.gru_cell(g6:t():contiguous(), k6:t():contiguous(), s:t():contiguous()):tolist(), 1e-7)
    -- float32 against float64, to float32's precision of exp and tanh
    local h64 = F.lstm_cell(gi:t():double(), gh:t():double(), c:t():double())
    H.same(h, h64:tolist(), 1e-6)
  end)

  it("reject mismatched shapes and dtypes, naming them", function()
    assert.error_matches(function() F.lstm_cell(ember.zeros({ 2, 8 }), ember.zeros({ 2, 8 }), ember.zeros({ 2, 3 })) end,
      "ember.nn.functional.lstm_cell: gates {2, 8} and {2, 8} and state {2, 3} do not fit: expected (N, 4 H), (N, 4 H), (N, H)", 1, true)
    assert.error_matches(function() F.gru_cell(ember.zeros({ 2, 6 }), ember.zeros({ 2, 6 }, F64), ember.zeros({ 2, 2 })) end,
      "ember.nn.functional.gru_cell: gates float32 and float64 and state float32 must share one dtype, float32 or float64", 1, true)
    assert.error_matches(function() F.gru_cell(ember.zeros({ 6 }), ember.zeros({ 6 }), ember.zeros({ 2 })) end,
      "ember.nn.functional.gru_cell: gates {6} and {6} and state {2} do not fit", 1, true)
    assert.error_matches(function() F.lstm_cell(ember.zeros({ 1, 4 }, { dtype = "int64" }),
      ember.zeros({ 1, 4 }, { dtype = "int64" }), ember.zeros({ 1, 1 }, { dtype = "int64" })) end,
      "must share one dtype, float32 or float64", 1, true)
    -- still usable
    local h = F.lstm_cell(ember.zeros({ 1, 4 }), ember.zeros({ 1, 4 }), ember.ones({ 1, 1 }))
    H.same(h, { { 0.5 * math.tanh(0.5) } }, 1e-6)
  end)
end)
