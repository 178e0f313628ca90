-- ember.nn's recurrent layers: nn.RNN (tanh or relu), nn.LSTM and nn.GRU over
-- whole sequences, their one-step cells nn.RNNCell, nn.LSTMCell and
-- nn.GRUCell, and the fused cell ops F.lstm_cell and F.gru_cell. Signatures,
-- defaults, parameter names (weight_ih_l0, ..., "_reverse" for the backward
-- direction), weight layouts, gate order (i, f, g, o; r, z, n) and
-- initialisation are PyTorch's, so state_dicts match.
--
-- The input's gates for every time step come from one GEMM before the loop
-- (as PyTorch and cuDNN do); a step is then one GEMM for the hidden state's
-- gates and one fused C op (RNN: an add and tanh/relu); an LSTM with
-- proj_size then projects h by weight_hr. Not here: packed sequences.
local ember = require("ember")
local ffi = require("ffi")
local autodiff = require("ember.autodiff")
local amp = require("ember.amp")   -- autocast: the cells run in float32, as the norms and losses do

local C = ember._C
local out1 = ffi.new("ember_tensor*[1]")
local out2 = ffi.new("ember_tensor*[2]")

local errors = require("ember.errors")
local shape_str, check = errors.shape, errors.check
local A = require("ember.nn.args")

-- x (T, ...) -> its T slices (views)
local function slices(ctx, x)
  ctx.slice_shape, ctx.dtype = x[1]:shape(), x.dtype
  local parts = {}
  for t = 1, x:size(1) do parts[t] = x:select(1, t) end
  return unpack(parts)
end

-- the slices' gradients (zeros where none came), stacked
local function stacked(ctx, ...)
  local g, zero = { ... }, nil
  for t = 1, select("#", ...) do
    if g[t] == nil then
      zero = zero or ember.zeros(ctx.slice_shape, { dtype = ctx.dtype })
      g[t] = zero
    end
  end
  return ember.stack(g, 1)
end

-- unbind(x): one node for the whole sequence, whose backward stacks the
-- slices' gradients once (a select per step would pad each step's gradient
-- to the whole sequence)
local unbind = autodiff.Function{ name = "unbind", forward = slices, backward = stacked }

-- unbind_recurrent(xg, w_hh, hs) slices the input's gates xg (T, N, G H) as
-- unbind does, while the steps multiply by a detached w_hh and put in hs[t]
-- the h that step t multiplied. As the gates' gradient at step t is also
-- that of h W_hh^T, w_hh's gradient is then one GEMM, sum_t dgates_t^T hs[t],
-- instead of T thin ones and T - 1 accumulations.
local unbind_recurrent = autodiff.Function{ name = "unbind_recurrent",
  forward = function(ctx, xg, _, hs)
    ctx.hs = hs
    return slices(ctx, xg)
  end,
  backward = function(ctx, ...)
    local dxg = stacked(ctx, ...)
    local dw
    if ctx.needs_input_grad[2] then
      local hs = ember.stack(ctx.hs, 1)
      dw = dxg:reshape(-1, dxg:size(3)):t():matmul(hs:reshape(-1, hs:size(3)))
    end
    return dxg, dw
  end }

return function(nn, h)
  local F = nn.functional

  -- (gi, gh, c) -> h, c: gi, gh (N, 4H) the gates from the input and the
  -- hidden state, in the order i, f, g, o; c (N, H)
  function F.lstm_cell(gi, gh, c)
    if amp._dtype then gi, gh, c = amp._up(gi, gh, c) end
    check(C.ember_lstm_cell(ember._ptr("lstm_cell", gi, 1, 2), ember._ptr("lstm_cell", gh, 2, 2),
      ember._ptr("lstm_cell", c, 3, 2), out2, out2 + 1))
    local hy = ember._wrap(out2[0])
    return hy, ember._wrap(out2[1])
  end

  -- (gi, gh, hx) -> h: gi, gh (N, 3H) in the order r, z, n (gh with b_hh: r scales it)
  function F.gru_cell(gi, gh, hx)
    if amp._dtype then gi, gh, hx = amp._up(gi, gh, hx) end
    check(C.ember_gru_cell(ember._ptr("gru_cell", gi, 1, 2), ember._ptr("gru_cell", gh, 2, 2),
      ember._ptr("gru_cell", hx, 3, 2), out1))
    return ember._wrap(out1[0])
  end

  local GATES = { RNN_TANH = 1, RNN_RELU = 1, LSTM = 4, GRU = 3 }

  -- x W_ih^T + b_ih, with b_hh folded in where it is a plain sum (every mode
  -- but GRU's, whose r scales h W_hh^T + b_hh)
  local function input_gates(mode, x, p)
    local b = p.b_ih
    if b and mode ~= "GRU" then b = b + p.b_hh end
    return F.linear(x, p.w_ih, b)
  end

  -- one step from the input's gates xg (N, G H): h', and c' for the LSTM
  -- (h' projected by w_hr where the LSTM has proj_size)
  local function step(mode, xg, hx, c, p)
    if mode == "GRU" then return F.gru_cell(xg, F.linear(hx, p.w_hh, p.b_hh), hx) end
    local hg = F.linear(hx, p.w_hh)
    if mode == "LSTM" then
      local hy, cy = F.lstm_cell(xg, hg, c)
      if p.w_hr then hy = F.linear(hy, p.w_hr) end
      return hy, cy
    end
    if mode == "RNN_TANH" then return (xg + hg):tanh() end
    return (xg + hg):relu()
  end

  -- one layer in one direction over x (T, N, I): outputs (T, N, H), last h,
  -- last c. When a single recording sees the forward, nothing differentiates
  -- its backward, and w_hh's gradient comes from unbind_recurrent (not for
  -- the GRU, whose r scales h W_hh^T: its gates' gradients differ).
  local function sweep(mode, x, hx, c, p, reverse)
    local xg, hs = input_gates(mode, x, p), nil
    local xs
    if mode ~= "GRU" and C.ember_num_recording() == 1 then
      hs = {}
      xs = { unbind_recurrent(xg, p.w_hh, hs) }
      p = { w_hh = p.w_hh:detach(), w_hr = p.w_hr }
    else
      xs = { unbind(xg) }
    end
    local T, outs = #xs, {}
    for s = 1, T do
      local t = reverse and T + 1 - s or s
      if hs then hs[t] = hx end
      hx, c = step(mode, xs[t], hx, c, p)
      outs[t] = hx
    end
    return ember.stack(outs, 1), hx, c
  end

  -- Registers weight_ih<sfx>, weight_hh<sfx> and, with bias, bias_ih<sfx>,
  -- bias_hh<sfx>, then with proj_size P > 0 weight_hr<sfx> (P, H) (weight_hh
  -- then (G H, P)), drawn from U(-1/sqrt(H), 1/sqrt(H)); returns their names.
  local function add_params(self, G, nin, H, bias, dtype, sfx, P)
    local bound = H > 0 and 1 / math.sqrt(H) or 0
    local names = { w_ih = "weight_ih" .. sfx, w_hh = "weight_hh" .. sfx }
    self[names.w_ih] = h.uniform({ G * H, nin }, bound, dtype)
    self[names.w_hh] = h.uniform({ G * H, (P or 0) > 0 and P or H }, bound, dtype)
    if bias then
      names.b_ih, names.b_hh = "bias_ih" .. sfx, "bias_hh" .. sfx
      self[names.b_ih] = h.uniform({ G * H }, bound, dtype)
      self[names.b_hh] = h.uniform({ G * H }, bound, dtype)
    end
    if (P or 0) > 0 then
      names.w_hr = "weight_hr" .. sfx
      self[names.w_hr] = h.uniform({ P, H }, bound, dtype)
    end
    return names
  end

  local function params_of(self, names)
    local p = {}
    for k, name in pairs(names) do p[k] = self[name] end
    return p
  end

  local function fail(layer, fmt, ...) errors.fail("nn." .. layer, fmt, ...) end

  local function check_dtype(layer, what, t, w)
    if t.dtype ~= w.dtype then
      fail(layer, "%s is %s but the parameters are %s", what, t.dtype, w.dtype)
    end
  end

  -- a given initial state of `shape`, or zeros
  local function state(layer, what, t, shape, w)
    if t == nil then return ember.zeros(shape, { dtype = w.dtype }) end
    if not ember.is_tensor(t) then fail(layer, "%s must be a tensor, got %s", what, type(t)) end
    local s = t:shape()
    local ok = #s == #shape
    for i = 1, #shape do ok = ok and s[i] == shape[i] end
    if not ok then
      fail(layer, "%s of shape %s does not fit: expected {%s}", what, shape_str(t), table.concat(shape, ", "))
    end
    check_dtype(layer, what, t, w)
    return t
  end

  -- hx as given (the LSTM's a table {h, c}) -> the initial h and c, zeros where not given
  -- (hshape: h's shape where it differs from c's, the LSTM's with proj_size)
  local function initial_states(layer, mode, hx, shape, w, hname, cname, hshape)
    if mode ~= "LSTM" then return state(layer, hname, hx, shape, w) end
    if hx ~= nil and (type(hx) ~= "table" or ember.is_tensor(hx)) then
      fail(layer, "hx must be a table {%s, %s}, got %s", hname, cname, ember.is_tensor(hx) and "a tensor" or type(hx))
    end
    return state(layer, hname, hx and hx[1], hshape or shape, w), state(layer, cname, hx and hx[2], shape, w)
  end

  -- what layers and cells share: mode ("RNN_TANH", "RNN_RELU", "LSTM",
  -- "GRU"), sizes and bias, from the constructor's arguments
  local function init_common(self, layer, kind, opts, input_size, hidden_size)
    local nl = opts.nonlinearity
    if kind ~= "RNN" and nl ~= nil then error(("ember.nn.%s: unknown option 'nonlinearity'"):format(layer), 4) end
    nl = nl or "tanh"
    if nl ~= "tanh" and nl ~= "relu" then
      error(("ember.nn.%s: nonlinearity must be 'tanh' or 'relu', got '%s'"):format(layer, tostring(nl)), 4)
    end
    self.mode = kind == "RNN" and "RNN_" .. nl:upper() or kind
    self.input_size = h.check_int(layer, "input_size", input_size, 0)
    self.hidden_size = h.check_int(layer, "hidden_size", hidden_size, 1)
    self.bias = opts.bias ~= false
  end

  ---------------------------------------------------------------- the layers
  -- nn.LSTM(input_size, hidden_size, {num_layers = 1, bias = true,
  -- batch_first = false, dropout = 0, bidirectional = false, dtype}) (RNN
  -- also takes nonlinearity = "tanh" | "relu"); num_layers may also come
  -- third. forward(input, hx) -> output, h_n (LSTM: output, {h_n, c_n}, with
  -- hx = {h_0, c_0}). input (L, N, I), (N, L, I) with batch_first or (L, I);
  -- states (num_layers * directions, N, H), or without N when unbatched. The
  -- LSTM's proj_size P (0: none, else below H) makes h, h_n and the output's
  -- features P wide (c stays H), as PyTorch's.
  local LAYER_OPTS = { num_layers = true, bias = true, batch_first = true, dropout = true,
    bidirectional = true, dtype = true, nonlinearity = true, proj_size = true }

  local function layer_class(kind)
    local R = nn.Module:extend(kind)
    nn[kind] = R

    -- the options may come positionally in PyTorch's order (LSTM(10, 20, 2)
    -- for two layers), an options table after them
    function R:init(input_size, hidden_size, ...)
      local opts = A.positional("ember.nn." .. kind, { "input_size", "hidden_size" },
        { "num_layers", "bias", "batch_first", "dropout", "bidirectional" }, ...)
      opts = h.check_opts(kind, opts, LAYER_OPTS)
      init_common(self, kind, kind, opts, input_size, hidden_size)
      self.num_layers = h.check_int(kind, "num_layers", opts.num_layers or 1, 1)
      local p = opts.dropout or 0
      if type(p) ~= "number" or not (p >= 0 and p <= 1) then
        error(("ember.nn.%s: dropout must be in [0, 1], got %s"):format(kind, tostring(p)), 3)
      end
      self.dropout = p
      local P = opts.proj_size or 0
      if P ~= 0 and kind ~= "LSTM" then
        error(("ember.nn.%s: proj_size is only supported for LSTM, not RNN or GRU"):format(kind), 3)
      end
      h.check_int(kind, "proj_size", P, 0)
      if P >= hidden_size then
        error(("ember.nn.%s: proj_size %d must be smaller than hidden_size %d"):format(kind, P, hidden_size), 3)
      end
      self.proj_size = P
      self.batch_first, self.bidirectional = opts.batch_first == true, opts.bidirectional == true
      local D, H = self.bidirectional and 2 or 1, hidden_size
      local out_width = P > 0 and P or H
      self._names = {}
      for l = 1, self.num_layers do
        for d = 1, D do
          local sfx = ("_l%d%s"):format(l - 1, d == 2 and "_reverse" or "")
          self._names[#self._names + 1] = add_params(self, GATES[self.mode], l == 1 and input_size or D * out_width,
            H, self.bias, opts.dtype, sfx, P)
        end
      end
    end

    function R:forward(input, hx)
      local I, H, L = self.input_size, self.hidden_size, self.num_layers
      local D = self.bidirectional and 2 or 1
      h.need_input(kind, input, function(t) return (t:dim() == 2 or t:dim() == 3) and t:size(-1) == I end,
        ("{L, N, %d}, {N, L, %d} with batch_first, or {L, %d}"):format(I, I, I))
      local w = self[self._names[1].w_ih]
      check_dtype(kind, "input", input, w)
      local x, unbatched = input, input:dim() == 2
      if unbatched then x = x:unsqueeze(2) elseif self.batch_first then x = x:transpose(1, 2) end
      if x:size(1) == 0 then fail(kind, "input %s has no time steps", shape_str(input)) end
      local shape = unbatched and { L * D, H } or { L * D, x:size(2), H }
      local h0, c0
      if (self.proj_size or 0) > 0 then   -- h is proj_size wide, c hidden_size
        local hshape = unbatched and { L * D, self.proj_size } or { L * D, x:size(2), self.proj_size }
        h0, c0 = initial_states(kind, self.mode, hx, shape, w, "h_0", "c_0", hshape)
      else
        h0, c0 = initial_states(kind, self.mode, hx, shape, w, "h_0", "c_0")
      end
      if unbatched then h0, c0 = h0:unsqueeze(2), c0 and c0:unsqueeze(2) end
      local hn, cn = {}, {}
      for l = 1, L do
        local outs = {}
        for d = 1, D do
          local k = (l - 1) * D + d
          outs[d], hn[k], cn[k] = sweep(self.mode, x, h0:select(1, k), c0 and c0:select(1, k),
            params_of(self, self._names[k]), d == 2)
        end
        x = D == 2 and ember.cat(outs, 3) or outs[1]
        if l < L and self.dropout > 0 and self.training then x = F.dropout(x, self.dropout, true) end
      end
      local h_n, c_n = ember.stack(hn, 1), c0 and ember.stack(cn, 1)
      if unbatched then
        x, h_n, c_n = x:squeeze(2), h_n:squeeze(2), c_n and c_n:squeeze(2)
      elseif self.batch_first then
        x = x:transpose(1, 2)
      end
      if self.mode == "LSTM" then return x, { h_n, c_n } end
      return x, h_n
    end

    function R:extra_repr()
      local s = ("%d, %d"):format(self.input_size, self.hidden_size)
      if self.num_layers ~= 1 then s = s .. (", num_layers=%d"):format(self.num_layers) end
      if self.mode == "RNN_RELU" then s = s .. ", nonlinearity=relu" end
      if not self.bias then s = s .. ", bias=false" end
      if self.batch_first then s = s .. ", batch_first=true" end
      if self.dropout ~= 0 then s = s .. (", dropout=%g"):format(self.dropout) end
      if self.bidirectional then s = s .. ", bidirectional=true" end
      if (self.proj_size or 0) > 0 then s = s .. (", proj_size=%d"):format(self.proj_size) end
      return s
    end
  end
  layer_class("RNN")
  layer_class("LSTM")
  layer_class("GRU")

  ---------------------------------------------------------------- the cells
  -- nn.LSTMCell(input_size, hidden_size, {bias = true, dtype}) (RNNCell also
  -- takes nonlinearity): forward(x, hx) -> h' (LSTMCell: h', c' with hx =
  -- {h, c}). x (N, I) or (I); states (N, H) or (H); nil hx means zeros.
  local CELL_OPTS = { bias = true, dtype = true, nonlinearity = true }

  local function cell_class(kind, name)
    local R = nn.Module:extend(name)
    nn[name] = R

    function R:init(input_size, hidden_size, opts)
      if type(opts) == "boolean" then opts = { bias = opts } end
      opts = h.check_opts(name, opts, CELL_OPTS)
      init_common(self, name, kind, opts, input_size, hidden_size)
      self._names = add_params(self, GATES[self.mode], input_size, hidden_size, self.bias, opts.dtype, "")
    end

    function R:forward(input, hx)
      local I, H = self.input_size, self.hidden_size
      h.need_input(name, input, function(t) return (t:dim() == 1 or t:dim() == 2) and t:size(-1) == I end,
        ("{N, %d} or {%d}"):format(I, I))
      local p = params_of(self, self._names)
      check_dtype(name, "input", input, p.w_ih)
      local unbatched = input:dim() == 1
      local x = unbatched and input:unsqueeze(1) or input
      local shape = unbatched and { H } or { x:size(1), H }
      local h0, c0 = initial_states(name, self.mode, hx, shape, p.w_ih, "h", "c")
      if unbatched then h0, c0 = h0:unsqueeze(1), c0 and c0:unsqueeze(1) end
      local hy, cy = step(self.mode, input_gates(self.mode, x, p), h0, c0, p)
      if unbatched then hy, cy = hy:squeeze(1), cy and cy:squeeze(1) end
      return hy, cy
    end

    function R:extra_repr()
      local s = ("%d, %d"):format(self.input_size, self.hidden_size)
      if self.mode == "RNN_RELU" then s = s .. ", nonlinearity=relu" end
      if not self.bias then s = s .. ", bias=false" end
      return s
    end
  end
  cell_class("RNN", "RNNCell")
  cell_class("LSTM", "LSTMCell")
  cell_class("GRU", "GRUCell")
end
