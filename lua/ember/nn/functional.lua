-- ember.nn.functional: stateless layers and losses. Every function here is a
-- composition of recorded tensor ops or one of the C nn kernels (conv2d and
-- pooling, whose adjoints are ops of their own), so gradients of any order
-- come from the rule registry; nothing here keeps per-call state.
--
-- Options come in a last table, as in API.md: F.conv2d(x, w, b, {stride =,
-- padding =, dilation =, groups =}). Spatial options take a number or an
-- {h, w} pair. Losses reduce by mean unless {reduction = "sum" | "none"}.
local ember = require("ember")
local ffi = require("ffi")

local C = ember._C
local F = {}
local amp = require("ember.amp")   -- autocast: amp._dtype is set inside a scope

local errors = require("ember.errors")
local positional = require("ember.nn.args").positional   -- PyTorch's positional arguments and a last options table
local fail = errors.fail

local shape_str = errors.shape

local function is_tensor(x) return ember.is_tensor(x) end

local function need_tensor(op, what, x)
  if not is_tensor(x) then fail(op, "%s must be a tensor, got %s", what, type(x)) end
end

local function opts_of(op, o, allowed)
  if o == nil then return {} end
  if type(o) ~= "table" or is_tensor(o) then fail(op, "options must be a table, got %s", type(o)) end
  for k in pairs(o) do
    if not allowed[k] then fail(op, "unknown option '%s'", tostring(k)) end
  end
  return o
end

-- a number or an {h, w} pair, into a fresh int64_t[2]
local function pair(op, name, v, default)
  if v == nil then v = default end
  local p = ffi.new("int64_t[2]")
  if type(v) == "number" then
    p[0], p[1] = v, v
  elseif type(v) == "table" and #v == 2 and type(v[1]) == "number" and type(v[2]) == "number" then
    p[0], p[1] = v[1], v[2]
  else
    fail(op, "%s must be a number or an {h, w} pair, got %s", name, type(v))
  end
  for i = 0, 1 do
    if p[i] ~= math.floor(tonumber(p[i])) then fail(op, "%s must be integral", name) end
  end
  return p
end

local check = errors.check

local out1 = ffi.new("ember_tensor*[1]")
local out2 = ffi.new("ember_tensor*[2]")

---------------------------------------------------------------- linear and conv
local function linear_args(name, x, w)
  need_tensor(name, "input", x)
  need_tensor(name, "weight", w)
  if w:dim() ~= 2 then fail(name, "weight must be 2-D {out, in}, got %s", shape_str(w)) end
  local xs = x:shape()
  if #xs == 0 or xs[#xs] ~= w:size(2) then
    fail(name, "input %s does not fit weight %s (expected last dim %d)", shape_str(x), shape_str(w), w:size(2))
  end
end

function F.linear(x, w, b)
  if amp._dtype then x, w, b = amp._down(x, w, b) end
  linear_args("linear", x, w)
  check(C.ember_linear(ember._ptr("linear", x, 1), ember._ptr("linear", w, 2), out1))
  local y = ember._wrap(out1[0])
  if b ~= nil then
    need_tensor("linear", "bias", b)
    local product = y
    y = product + b   -- a yield point of a sliced step, as every add
    ember._drop(product)
  else
    ember._slice_point()
  end
  return y
end

-- relu(x w^T + b) as one op: the bias and the ReLU in the product's output pass
function F.linear_relu(x, w, b)
  if b == nil or (is_tensor(b) and b:dim() ~= 1) then
    local z = F.linear(x, w, b)
    local y = z:relu()
    ember._drop(z)
    return y
  end
  if amp._dtype then x, w, b = amp._down(x, w, b) end
  linear_args("linear_relu", x, w)
  need_tensor("linear_relu", "bias", b)
  check(C.ember_linear_relu(ember._ptr("linear_relu", x, 1), ember._ptr("linear_relu", w, 2),
    ember._ptr("linear_relu", b, 3), out1))
  local y = ember._wrap(out1[0])
  ember._slice_point()
  return y
end

local CONV_OPTS = { stride = true, padding = true, dilation = true, groups = true }
-- conv2d's tensors checked (op names the caller): x, w and b, after autocast
local function conv_tensors(op, x, w, b)
  if amp._dtype then x, w, b = amp._down(x, w, b) end
  need_tensor(op, "input", x)
  need_tensor(op, "weight", w)
  if b ~= nil then
    need_tensor(op, "bias", b)
    if b:dim() ~= 1 or b:size(1) ~= w:size(1) then
      fail(op, "bias must have shape {%d}, got %s", w:size(1), shape_str(b))
    end
  end
  return x, w, b
end

-- conv2d's arguments checked: the tensors, then the C call's stride,
-- padding, dilation and groups
-- stride, padding and dilation as the C call's int64_t[2] pairs, and groups,
-- checked (nil: the default)
local function conv_options(op, stride, padding, dilation, groups)
  groups = groups or 1
  if type(groups) ~= "number" then fail(op, "groups must be a number, got %s", type(groups)) end
  return pair(op, "stride", stride, 1), pair(op, "padding", padding, 0), pair(op, "dilation", dilation, 1), groups
end
F._conv_options = conv_options

local function conv_args(op, x, w, b, opts)
  if is_tensor(b) == false and type(b) == "table" and opts == nil then b, opts = nil, b end
  x, w, b = conv_tensors(op, x, w, b)
  opts = opts_of(op, opts, CONV_OPTS)
  return x, w, b, conv_options(op, opts.stride, opts.padding, opts.dilation, opts.groups)
end

-- conv2d(x, w) + b, without the bias when b is nil
local function conv2d_plus(op, x, w, b, stride, padding, dilation, groups)
  check(C.ember_conv2d(ember._ptr(op, x, 1), ember._ptr(op, w, 2), stride, padding, dilation, groups, out1))
  local y = ember._wrap(out1[0])
  if b ~= nil then y = y + b:view(1, -1, 1, 1) end
  return y
end

-- conv2d of checked arguments; relu: relu(conv2d(...)), with a bias, on the
-- CPU, one op: the convolution adds the bias and applies the ReLU as it
-- writes its output
local function conv2d_call(op, relu, x, w, b, stride, padding, dilation, groups)
  if not relu then return conv2d_plus(op, x, w, b, stride, padding, dilation, groups) end
  if b == nil then return conv2d_plus(op, x, w, b, stride, padding, dilation, groups):relu() end
  check(C.ember_conv2d_relu(ember._ptr(op, x, 1), ember._ptr(op, w, 2), ember._ptr(op, b, 3), stride, padding,
    dilation, groups, out1))
  return ember._wrap(out1[0])
end

function F.conv2d(x, w, b, opts)
  return conv2d_call("conv2d", false, conv_args("conv2d", x, w, b, opts))
end

-- relu(conv2d(x, w, b, opts)) (one op with a bias: conv2d_call)
function F.conv2d_relu(x, w, b, opts)
  return conv2d_call("conv2d_relu", true, conv_args("conv2d_relu", x, w, b, opts))
end

-- F.conv2d (relu: F.conv2d_relu) with the options already checked: stride,
-- padding and dilation int64_t[2] pairs of whole numbers, groups a number
-- (nn.Conv2d keeps them while its fields stay the same: no options table,
-- no pairs made per call)
function F._conv2d_pairs(x, w, b, stride, padding, dilation, groups, relu)
  local op = relu and "conv2d_relu" or "conv2d"
  x, w, b = conv_tensors(op, x, w, b)
  return conv2d_call(op, relu, x, w, b, stride, padding, dilation, groups)
end

-- max_pool2d(relu(conv2d(x, w, b, opts)), kernel, pool_opts) (pool_opts:
-- {stride = kernel}; no padding), one op with a bias: on the CPU the
-- convolution's output is pooled as oneDNN writes it, and backward keeps
-- the pooled values, not the convolution's output
function F.conv2d_relu_max_pool2d(x, w, b, opts, kernel, pool_opts)
  local op = "conv2d_relu_max_pool2d"
  local stride, padding, dilation, groups
  x, w, b, stride, padding, dilation, groups = conv_args(op, x, w, b, opts)
  pool_opts = opts_of(op, pool_opts, { stride = true })
  local k = pair(op, "kernel", kernel)
  local ps = pair(op, "stride", pool_opts.stride, kernel)
  if b == nil then
    return F.max_pool2d(conv2d_plus(op, x, w, b, stride, padding, dilation, groups):relu(), kernel,
      { stride = pool_opts.stride })
  end
  check(C.ember_conv2d_relu_max_pool2d(ember._ptr(op, x, 1), ember._ptr(op, w, 2), ember._ptr(op, b, 3), stride,
    padding, dilation, groups, k, ps, out2, nil))
  return ember._wrap(out2[0])
end

---------------------------------------------------------------- activations
-- (the input is checked here: x:relu() of a non-tensor would be Lua's error; a
-- call in parentheses is not a tail call, so an error names F's function, errors.lua)
function F.relu(x) need_tensor("relu", "input", x) return x:relu() end
function F.gelu(x, opts) need_tensor("gelu", "input", x) return (x:gelu(opts)) end
function F.tanh(x) need_tensor("tanh", "input", x) return x:tanh() end
function F.sigmoid(x) need_tensor("sigmoid", "input", x) return x:sigmoid() end
function F.silu(x) need_tensor("silu", "input", x) return x:silu() end
function F.softmax(x, dim) need_tensor("softmax", "input", x) return (x:softmax(dim)) end
function F.log_softmax(x, dim) need_tensor("log_softmax", "input", x) return (x:log_softmax(dim)) end

-- F.dropout(x, p = 0.5, training = true); also F.dropout(x, {p =, training =,
-- generator =}) and F.dropout(x, p, {training =, generator =})
local DROPOUT_OPTS = { p = true, training = true, generator = true }
function F.dropout(x, p, training)
  local generator
  if type(p) == "table" then
    opts_of("dropout", p, DROPOUT_OPTS)
    p, training, generator = p.p, p.training, p.generator
  end
  if type(training) == "table" then
    opts_of("dropout", training, { training = true, generator = true })
    training, generator = training.training, training.generator
  end
  p = p == nil and 0.5 or p
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then fail("dropout", "p must be in [0, 1], got %s", errors.show(p)) end
  need_tensor("dropout", "input", x)
  if training == false or p == 0 then return x end
  if p == 1 then return x * 0 end
  if generator ~= nil and not ember.is_generator(generator) then
    local got = is_tensor(generator) and "a tensor" or type(generator)
    fail("dropout", "generator must be an ember.Generator, got %s", got)
  end
  -- the keep mask, rand_like(x, {generator =}):ge(p) in one kernel on the CPU
  -- (the same bits and place in the stream, no float draw beside x)
  check(C.ember_dropout_mask_gen(generator and generator._g, ember._ptr("dropout", x, 1), p, out1))
  local keep = ember._wrap(out1[0])
  -- the bool mask, not a float copy of it, is what the product saves for
  -- backward (1 byte an element; x * true is x * 1, x * false is x * 0:
  -- the same bits, NaN and signed zeros included)
  return x * keep * (1 / (1 - p))
end

-- F.one_hot(t, num_classes = -1, {dtype = "int64"}): t holds 1-based class
-- indices (an integer tensor); the result has t's shape and one more last
-- dim of num_classes (max(t) when -1), 1 at each class and 0 elsewhere
local ONE_HOT_OPTS = { dtype = true }
function F.one_hot(t, num_classes, opts)
  if type(num_classes) == "table" then num_classes, opts = nil, num_classes end
  opts = opts_of("one_hot", opts, ONE_HOT_OPTS)
  need_tensor("one_hot", "input", t)
  if t.dtype ~= "int64" and t.dtype ~= "int32" and t.dtype ~= "uint8" then
    fail("one_hot", "expected an integer tensor of class indices, got %s", t.dtype)
  end
  num_classes = num_classes == nil and -1 or num_classes
  if type(num_classes) ~= "number" or num_classes ~= math.floor(num_classes) or (num_classes < 1 and num_classes ~= -1) then
    fail("one_hot", "num_classes must be a positive integer or -1, got %s", tostring(num_classes))
  end
  local n = t:numel()
  local lo, hi = n > 0 and t:min():item() or 1, n > 0 and t:max():item() or 0
  if num_classes == -1 then
    if n == 0 then fail("one_hot", "cannot infer num_classes from an empty tensor; pass it") end
    num_classes = hi
  end
  if n > 0 and (lo < 1 or hi > num_classes) then
    fail("one_hot", "class indices must lie in 1..%d, got values in %d..%d", num_classes, lo, hi)
  end
  local classes = ember.arange(1, num_classes + 1, { dtype = t.dtype, device = t.device })
  return t:unsqueeze(-1):eq(classes):to(opts.dtype or "int64")
end

---------------------------------------------------------------- normalisation
-- On the CPU, float32 or float64 operands of one dtype whose weight and bias
-- (where given) have normalized_shape are one op (C ember_layer_norm, with
-- rms for RMS norm) whose backward is one kernel; nil elsewhere (other
-- devices and dtypes, weights that only broadcast), where the callers
-- compose recorded ops.
local function norm_op(x, shape, w, b, rms, eps)
  local dt = x.dtype
  if #shape == 0 or x.device ~= "cpu" or (dt ~= "float32" and dt ~= "float64") then return nil end
  for _, t in pairs({ w, b }) do
    if not is_tensor(t) or t.dtype ~= dt or t.device ~= "cpu" or t:dim() ~= #shape then return nil end
    for i = 1, #shape do
      if t:size(i) ~= shape[i] then return nil end
    end
  end
  w = w or ember.ones(shape, { dtype = dt })
  b = b or ember.zeros(shape, { dtype = dt })
  local op = rms and "rms_norm" or "layer_norm"
  check(C.ember_layer_norm(ember._ptr(op, x, 1), ember._ptr(op, w, 3), ember._ptr(op, b, 4), #shape, rms and 1 or 0,
    eps, out2, out2 + 1))
  C.ember_tensor_release(out2[1])   -- the stats: the node keeps its own reference where one is recorded
  return ember._wrap(out2[0])
end

-- the dims of x that normalized_shape (a number or a list) names, its last
-- ones, or an error naming op
local function trailing_dims(op, x, normalized_shape)
  if type(normalized_shape) == "number" then normalized_shape = { normalized_shape } end
  local xs, n = x:shape(), #normalized_shape
  local ok = n <= #xs
  for i = 1, n do ok = ok and xs[#xs - n + i] == normalized_shape[i] end
  if not ok then
    fail(op, "input %s does not end with normalized_shape {%s}", shape_str(x), table.concat(normalized_shape, ", "))
  end
  local dims = {}
  for i = 1, n do dims[i] = #xs - n + i end
  return normalized_shape, dims
end

local LN_OPTS = { eps = true }
function F.layer_norm(x, normalized_shape, w, b, opts)
  if amp._dtype then x, w, b = amp._up(x, w, b) end
  need_tensor("layer_norm", "input", x)
  if type(w) == "table" and not is_tensor(w) and b == nil and opts == nil then w, opts = nil, w end
  if type(b) == "table" and not is_tensor(b) and opts == nil then b, opts = nil, b end
  opts = opts_of("layer_norm", opts, LN_OPTS)
  local shape, dims = trailing_dims("layer_norm", x, normalized_shape)
  local eps = opts.eps or 1e-5
  local y = norm_op(x, shape, w, b, false, eps)
  if y then return y end
  local mean = x:mean(dims, true)
  local xc = x - mean
  local var = (xc * xc):mean(dims, true)
  y = xc * (var + eps):rsqrt()
  if w ~= nil then y = y * w end
  if b ~= nil then y = y + b end
  return y
end

-- x / sqrt(mean(x^2) + eps) * w over the last dims; eps defaults to the
-- dtype's machine epsilon, as PyTorch's rms_norm
local FINFO_EPS = { float32 = 2 ^ -23, float64 = 2 ^ -52, float16 = 2 ^ -10, bfloat16 = 2 ^ -7 }
local RMS_OPTS = { eps = true }
function F.rms_norm(x, normalized_shape, w, opts)
  if amp._dtype then x, w = amp._up(x, w) end
  need_tensor("rms_norm", "input", x)
  if type(w) == "table" and not is_tensor(w) and opts == nil then w, opts = nil, w end
  opts = opts_of("rms_norm", opts, RMS_OPTS)
  local shape, dims = trailing_dims("rms_norm", x, normalized_shape)
  local eps = opts.eps or FINFO_EPS[x.dtype] or FINFO_EPS.float32
  local y = norm_op(x, shape, w, nil, true, eps)
  if y then return y end
  y = x * ((x * x):mean(dims, true) + eps):rsqrt()
  if w ~= nil then y = y * w end
  return y
end

local BN_OPTS = { training = true, momentum = true, eps = true, activation = true }
-- activation = "relu" / "relu6": the op batch_norm_act's code and bounds
local BN_ACTS = { relu = { 1, 0, 0 }, relu6 = { 2, 0, 6 } }

-- the running statistics moved by momentum m towards the batch's, run by
-- ember.no_grad (a function of its own, not a closure: making one in
-- F.batch_norm would stop LuaJIT's trace on every call, eval mode's included)
-- Its factors are 0-d tensors of the running statistics' dtype, kept per
-- value (at most 64 a dtype; on the CPU): a Lua number would be converted
-- to that dtype by each op, an op more each time, to the same bits.
local bn_factors, bn_factors_n = {}, {}
local function bn_factor(v, like)
  if like.device ~= "cpu" then return v end
  local dtype = like.dtype
  local kept = bn_factors[dtype]
  if kept == nil then
    kept = {}
    bn_factors[dtype], bn_factors_n[dtype] = kept, 0
  end
  local t = kept[v]
  if t == nil then
    t = ember.tensor(v, { dtype = dtype })
    if bn_factors_n[dtype] < 64 then
      ember.keep(t)   -- an ember.tidy around the call leaves it alone
      kept[v], bn_factors_n[dtype] = t, bn_factors_n[dtype] + 1
    end
  end
  return t
end
local function bn_update_running(running_mean, running_var, stats, m, count)
  stats = stats:detach()
  local rm, rv = running_mean, running_var
  rm:mul_(bn_factor(1 - m, rm)):add_(stats[1]:to(rm.dtype) * bn_factor(m, rm))
  rv:mul_(bn_factor(1 - m, rv)):add_(stats[2]:to(rv.dtype) * bn_factor(m * count / (count - 1), rv))
end

-- Eval-mode batch norm's scale = w / sqrt(running_var + eps) and shift = b -
-- running_mean scale, kept on running_var (weak keys: collected with it)
-- while the four sources keep their versions, eps and the dtype are the same
-- and no recording tracks w or b (which would need the ops recorded): in
-- inference they are worked out once, not in five ops each call (MobileNetV2
-- at batch 1: 260 of its 480 op calls). The same values as made anew.
local bn_kept = setmetatable({}, { __mode = "k" })
local function version_of(t) return t ~= nil and tonumber(C.ember_tensor_version(t._c)) or -1 end
local function bn_eval_affine(x, running_mean, running_var, w, b, eps)
  local plain = (w == nil or C.ember_is_tracked(w._c) == 0) and (b == nil or C.ember_is_tracked(b._c) == 0)
  local e = plain and bn_kept[running_var]
  if e and e.eps == eps and e.dtype == x.dtype and e.m == running_mean and e.w == w and e.b == b
    and e.vm == version_of(running_mean) and e.vv == version_of(running_var) and e.vw == version_of(w)
    and e.vb == version_of(b) then
    return e.scale, e.shift
  end
  local scale = (running_var + eps):rsqrt()
  if w ~= nil then scale = scale * w end
  local shift = -running_mean * scale
  if b ~= nil then shift = shift + b end
  if scale.dtype ~= x.dtype then scale, shift = scale:to(x.dtype), shift:to(x.dtype) end
  if plain then
    ember.keep(scale)   -- an ember.tidy around the call leaves them alone
    ember.keep(shift)
    bn_kept[running_var] = { eps = eps, dtype = x.dtype, m = running_mean, w = w, b = b, scale = scale, shift = shift,
      vm = version_of(running_mean), vv = version_of(running_var), vw = version_of(w), vb = version_of(b) }
  end
  return scale, shift
end
-- one argument of batch_norm (i: its position): one value per channel
local function bn_per_channel(x, i, t, Cn)
  need_tensor("batch_norm", "argument " .. i, t)
  if t:numel() ~= Cn then
    fail("batch_norm", "argument %d of shape %s does not fit input %s: expected %d values, one per channel (dim 2)",
      i, shape_str(t), shape_str(x), Cn)
  end
end
local NO_ACT = { 0, 0, 0 }

-- F.batch_norm with its options as arguments (training a boolean or nil;
-- momentum a number; eps a number, nil: 1e-5; act nil, "relu" or "relu6"):
-- nn.BatchNorm1d/2d's call, no options table made per call
function F._batch_norm(x, running_mean, running_var, w, b, training, momentum, eps, act)
  eps = eps or 1e-5
  if amp._dtype then x, w, b = amp._up(x, w, b) end
  need_tensor("batch_norm", "input", x)
  local nd = x:dim()
  if nd < 2 then fail("batch_norm", "input must have at least 2 dims (N, C, ...), got %s", shape_str(x)) end
  local Cn = x:size(2)
  -- the statistics and the affine parameters: one value per channel
  if running_mean ~= nil then bn_per_channel(x, 2, running_mean, Cn) end
  if running_var ~= nil then bn_per_channel(x, 3, running_var, Cn) end
  if w ~= nil then bn_per_channel(x, 4, w, Cn) end
  if b ~= nil then bn_per_channel(x, 5, b, Cn) end
  if act ~= nil and BN_ACTS[act] == nil then
    fail("batch_norm", "activation must be nil, \"relu\" or \"relu6\", got %s", require("ember.nn.args").value_str(act))
  end
  if training == nil then training = running_mean == nil end
  if training then
    local count = x:numel() / Cn
    if count <= 1 then
      fail("batch_norm", "expected more than 1 value per channel when training, got input %s", shape_str(x))
    end
    -- one op, batch_norm (C ember_batch_norm): y and stats = (mean, biased var)
    if w == nil then w = ember.ones({ Cn }, { dtype = x.dtype, device = x.device }) end
    if b == nil then b = ember.zeros({ Cn }, { dtype = x.dtype, device = x.device }) end
    if act then
      local a = BN_ACTS[act]
      check(C.ember_batch_norm_act(ember._ptr("batch_norm", x, 1), ember._ptr("batch_norm", w, 4),
        ember._ptr("batch_norm", b, 5), eps, a[1], a[2], a[3], out2, out2 + 1))
    else
      check(C.ember_batch_norm(ember._ptr("batch_norm", x, 1), ember._ptr("batch_norm", w, 4),
        ember._ptr("batch_norm", b, 5), eps, out2, out2 + 1))
    end
    local y, stats = ember._wrap(out2[0]), ember._wrap(out2[1])
    if running_mean ~= nil then ember.no_grad(bn_update_running, running_mean, running_var, stats, momentum, count) end
    return y
  end
  if running_mean == nil or running_var == nil then
    fail("batch_norm", "running_mean and running_var are needed outside training")
  end
  -- one op, channel_affine: x scale + shift (and the activation), scale and
  -- shift worked out on the C values (kept while their sources last)
  local scale, shift = bn_eval_affine(x, running_mean, running_var, w, b, eps)
  local a = BN_ACTS[act] or NO_ACT
  check(C.ember_channel_affine(ember._ptr("batch_norm", x, 1), scale._c, shift._c, a[1], a[2], a[3], out2))
  return ember._wrap(out2[0])
end

-- F.batch_norm(x, running_mean, running_var, weight?, bias?, {training =, momentum = 0.1, eps = 1e-5,
-- activation = nil | "relu" | "relu6"})
-- Normalises over every dim but the channel dim 2. In training the batch
-- statistics are used and the running ones (when given) updated in place with
-- the unbiased variance, as in PyTorch. With an activation, y is F.relu or
-- F.relu6 of that, applied as y is written in training (one op,
-- batch_norm_act, whose backward takes the mask from y: docs/nn.md).
function F.batch_norm(x, running_mean, running_var, w, b, opts)
  opts = opts_of("batch_norm", opts, BN_OPTS)
  return F._batch_norm(x, running_mean, running_var, w, b, opts.training, opts.momentum or 0.1, opts.eps,
    opts.activation)
end

---------------------------------------------------------------- embedding
-- padding_idx (1-based, negative from the end) as a row number of weight
local function padding_row(op, padding_idx, num)
  if padding_idx == nil then return nil end
  if type(padding_idx) ~= "number" or padding_idx ~= math.floor(padding_idx) or padding_idx == 0
    or padding_idx < -num or padding_idx > num then
    fail(op, "padding_idx must be an integer in 1..%d or -%d..-1, got %s", num, num, tostring(padding_idx))
  end
  return padding_idx < 0 and num + 1 + padding_idx or padding_idx
end
F._embedding_padding_row = padding_row

-- max_norm: each row idx looks up, scaled in place (no gradient) to norm
-- max_norm where its norm_type-norm is larger, as PyTorch's embedding_renorm_
local function renorm_rows(flat, weight, max_norm, norm_type)
  local seen, rows = {}, {}
  for _, i in ipairs(flat:tolist()) do
    if not seen[i] then seen[i] = true; rows[#rows + 1] = i end
  end
  if #rows == 0 then return end
  ember.no_grad(function()
    local idx = ember.tensor(rows, { dtype = "int64", device = weight.device })
    local w = weight:index_select(1, idx)
    local norms = w:norm(norm_type, 2, true)
    local scale = ember.where(norms:gt(max_norm), max_norm / (norms + 1e-7), 1)
    weight:index_add_(1, idx, w * (scale - 1))
  end)
end

local EMBEDDING = { "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse" }
local NO_OPTIONS = {}   -- read only: a call without options

-- a bad index as F.embedding names it (weight:index_select, which checks the
-- range in its copy, failed): the smallest or largest index, as the user wrote
-- it; nothing when the range is not what failed
local function range_error(op, idx, weight)
  if idx:numel() == 0 then return end
  local flat = idx:reshape(-1)
  local lo, hi = flat:min():item(), flat:max():item()
  if lo < 1 or hi > weight:size(1) then
    fail(op, "index %d out of range 1..%d of a weight of shape %s", lo < 1 and lo or hi, weight:size(1),
      shape_str(weight))
  end
end

-- weight's rows idx picks, of shape idx's shape .. {dim}: index_select over
-- idx as 1-D and a view, in C, so that only the result gets a wrapper (the
-- flattened index and the 2-D rows were two more, and a third of the Lua
-- function's cost)
local lookup_flat = ffi.new("int64_t[1]", -1)
local lookup_shape = ffi.new("int64_t[?]", C.EMBER_MAX_DIMS + 1)
local lookup_tmp = ffi.new("ember_tensor*[1]")
local function lookup(op, idx, weight)
  local ic, wc = ember._ptr(op, idx, 1), ember._ptr(op, weight, 2)
  local nd = C.ember_tensor_ndim(ic)
  if nd >= C.EMBER_MAX_DIMS then
    fail(op, "indices of %d dims would give a result of %d, at most %d", nd, nd + 1, C.EMBER_MAX_DIMS)
  end
  local flat = ic
  if nd ~= 1 then
    check(C.ember_reshape(ic, 1, lookup_flat, lookup_tmp))
    flat = lookup_tmp[0]
  end
  local rc = C.ember_index_select_base(wc, 0, flat, 1, out1)
  if nd ~= 1 then C.ember_tensor_release(flat) end
  if rc < 0 then
    range_error(op, idx, weight)
    check(rc)
  end
  if nd ~= 1 then
    local rows, s = out1[0], C.ember_tensor_shape(ic)
    for i = 0, nd - 1 do lookup_shape[i] = s[i] end
    lookup_shape[nd] = C.ember_tensor_shape(wc)[1]
    rc = C.ember_view(rows, nd + 1, lookup_shape, out1)
    C.ember_tensor_release(rows)
    check(rc)
  end
  return ember._wrap(out1[0])
end

-- F.embedding(idx, weight, padding_idx, max_norm, norm_type = 2, scale_grad_by_freq = false,
-- sparse = false), positionally or in a last options table. idx: int64 or int32
-- 1-based indices of any shape; weight {num, dim}. padding_idx's rows get no
-- gradient; max_norm renormalises the rows looked up, in place.
function F.embedding(idx, weight, ...)
  local op = "embedding"
  -- the arguments first: one past sparse raises before anything else is read
  local o = NO_OPTIONS
  if select("#", ...) > 0 then
    o = positional("ember." .. op, { "idx", "weight" }, EMBEDDING, ...)
    errors.known_options(op, o, EMBEDDING)
  end
  need_tensor(op, "indices", idx)
  need_tensor(op, "weight", weight)
  if weight:dim() ~= 2 then fail(op, "weight must be 2-D {num, dim}, got %s", shape_str(weight)) end
  local pad, norm_type
  if o ~= NO_OPTIONS then
    for _, k in ipairs({ "scale_grad_by_freq", "sparse" }) do
      if o[k] ~= nil and type(o[k]) ~= "boolean" then fail(op, "%s must be a boolean, got %s", k, tostring(o[k])) end
    end
    if o.scale_grad_by_freq or o.sparse then
      fail(op, "%s is not supported (dense gradients, unscaled)", o.sparse and "sparse" or "scale_grad_by_freq")
    end
    if o.max_norm ~= nil and (type(o.max_norm) ~= "number" or not (o.max_norm >= 0)) then
      fail(op, "max_norm must be a number >= 0, got %s", tostring(o.max_norm))
    end
    norm_type = o.norm_type == nil and 2 or o.norm_type
    if type(norm_type) ~= "number" or norm_type ~= norm_type then
      fail(op, "norm_type must be a number, got %s", tostring(norm_type))
    end
    pad = padding_row(op, o.padding_idx, weight:size(1))
  end
  if idx.dtype ~= "int64" and idx.dtype ~= "int32" then
    fail(op, "indices must be int64 or int32, got %s", idx.dtype)
  end
  if o.max_norm ~= nil then   -- the range first: renorm_rows reads the rows
    range_error(op, idx, weight)
    renorm_rows(idx:reshape(-1), weight, o.max_norm, norm_type)
  end
  local rows = lookup(op, idx, weight)
  if pad ~= nil then   -- the same values; the padding row's lookups pass no gradient
    rows = ember.where(idx:ne(pad):unsqueeze(-1), rows, rows:detach())
  end
  return rows
end

---------------------------------------------------------------- the other files' functions
for _, file in ipairs({ "loss", "conv", "norm", "resize", "activation", "pool", "conv3d", "shape" }) do
  for name, f in pairs(require("ember.nn." .. file).functional) do F[name] = f end
end

---------------------------------------------------------------- attention
-- q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv). mask: bool (true = masked out,
-- as PyTorch's attn_mask) or an additive float tensor; is_causal masks j > i.
local SDPA_OPTS = { attn_mask = true, is_causal = true, scale = true, dropout = true, training = true }
function F.scaled_dot_product_attention(q, k, v, opts)
  local op = "scaled_dot_product_attention"
  opts = opts_of(op, opts, SDPA_OPTS)
  need_tensor(op, "query", q)
  need_tensor(op, "key", k)
  need_tensor(op, "value", v)
  if q:dim() < 2 or k:dim() ~= q:dim() or v:dim() ~= q:dim() or q:size(-1) ~= k:size(-1) or k:size(-2) ~= v:size(-2) then
    fail(op, "query %s, key %s and value %s do not fit: expected (..., L, E), (..., S, E) and (..., S, Ev)",
      shape_str(q), shape_str(k), shape_str(v))
  end
  local d = q:size(-1)
  local scores = q:matmul(k:transpose(-2, -1)) * (opts.scale or 1 / math.sqrt(d))
  local Lq, Lk = q:size(-2), k:size(-2)
  if opts.is_causal then
    local i = ember.arange(Lq):view(Lq, 1)
    local j = ember.arange(Lk):view(1, Lk)
    scores = ember.where(j:gt(i), -math.huge, scores)
  end
  local m = opts.attn_mask
  if m ~= nil then
    if m.dtype == "bool" then scores = ember.where(m, -math.huge, scores)
    else scores = scores + m end
  end
  local attn = scores:softmax(-1)
  if opts.dropout and opts.dropout > 0 and opts.training ~= false then attn = F.dropout(attn, opts.dropout) end
  return attn:matmul(v), attn
end

return F
