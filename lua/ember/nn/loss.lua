-- ember.nn.loss: the losses, each written once and offered twice, as a
-- function (ember.nn.functional re-exports L.functional) and as a module
-- (L.register(nn) makes nn.MSELoss and the others). Every loss is a
-- composition of recorded tensor ops, so gradients of any order come from the
-- rule registry, except cross_entropy's common case, one op with its own rule.
--
-- Signatures and defaults are PyTorch's, with options in a last table:
-- F.cross_entropy(logits, labels, {weight =, ignore_index = -100,
-- reduction = "mean", label_smoothing = 0}). Class labels are 1-based.
local ember = require("ember")

local ffi = require("ffi")
local C = ember._C
local out2 = ffi.new("ember_tensor*[2]")

local L = { functional = {} }
local F = L.functional
local C = ember._C
local is_tensor = ember.is_tensor
local amp = require("ember.amp")   -- autocast: amp._dtype is set inside a scope

-- "<op>: <message>" raised at the user's line (ember.errors finds it; nn.init
-- and the layers raise through this too)
local errors = require("ember.errors")
local fail = errors.fail


local shape_str, same_shape = errors.shape, errors.same_shape

local function need_tensor(op, what, x)
  if not is_tensor(x) then fail(op, "%s must be a tensor, got %s", what, type(x)) end
end

-- input and target of one shape, as the pointwise losses take them
local function need_pair(op, input, target)
  need_tensor(op, "input", input)
  need_tensor(op, "target", target)
  if not same_shape(input, target) then
    fail(op, "input of shape %s and target of shape %s differ", shape_str(input), shape_str(target))
  end
end

---------------------------------------------------------------- options
-- Each option is {name, default, check}: check(v) returns what v must be
-- when v is wrong, else nil.
local function one_of(...)
  local allowed = { ... }
  return function(v)
    for _, a in ipairs(allowed) do if v == a then return nil end end
    return "one of '" .. table.concat(allowed, "', '") .. "'"
  end
end
local function optional_tensor(v) if v ~= nil and not is_tensor(v) then return "a tensor" end end
local function number_in(lo, hi, open_lo)
  return function(v)
    if type(v) ~= "number" or v < lo or v > hi or (open_lo and v == lo) then
      return ("a number in %s%g, %g]"):format(open_lo and "(" or "[", lo, hi)
    end
  end
end
local function integer(v) if type(v) ~= "number" or v ~= math.floor(v) then return "an integer" end end
local function boolean(v) if type(v) ~= "boolean" then return "a boolean" end end

local REDUCTION = { "reduction", "mean", one_of("mean", "sum", "none") }
local WEIGHT = { "weight", nil, optional_tensor }

-- v as an error message shows it: 'text', {1, 2}, 0.5, a tensor as its dtype and shape
local function value_str(v)
  if type(v) == "string" then return "'" .. v .. "'" end
  if is_tensor(v) then return ("a %s tensor %s"):format(v.dtype, shape_str(v)) end
  if type(v) == "table" and not is_tensor(v) then
    local items = {}
    for i = 1, #v do items[i] = value_str(v[i]) end
    return "{" .. table.concat(items, ", ") .. "}"
  end
  return tostring(v)
end

-- the options table o checked against spec, with defaults filled in
local function options(op, o, spec)
  if o ~= nil and (type(o) ~= "table" or is_tensor(o)) then
    fail(op, "options must be a table, got %s", is_tensor(o) and "a tensor" or type(o))
  end
  o = o or {}
  local known = {}
  for _, s in ipairs(spec) do known[s[1]] = true end
  for k in pairs(o) do
    if not known[k] then
      local names = {}
      for i, s in ipairs(spec) do names[i] = s[1] end
      table.sort(names)
      fail(op, "unknown option '%s' (known: %s)", tostring(k), table.concat(names, ", "))
    end
  end
  local out = {}
  for _, s in ipairs(spec) do
    local name, default, check = s[1], s[2], s[3]
    local v = o[name]
    if v == nil then v = default end
    local want = check(v)
    if want then
      fail(op, "%s must be %s, got %s", name, want, value_str(v))
    end
    out[name] = v
  end
  return out
end
-- the layers of conv.lua, norm.lua and resize.lua check theirs with these
L.options, L.one_of, L.value_str = options, one_of, value_str

local function reduce(loss, reduction)
  if reduction == "mean" then return loss:mean() end
  if reduction == "sum" then return loss:sum() end
  return loss
end

-- LOSSES[i] = {functional name, module name, option spec, fn(op, input, target, o)}
local LOSSES = {}
-- A loss runs in the library's own ember.tidy: its temporaries go back when
-- it returns (what backward needs stays with the tape). Not a tail call: an
-- error names the loss the user called, not the tidy (errors.lua).
local function loss(fname, mname, spec, fn)
  LOSSES[#LOSSES + 1] = { fname, mname, spec, fn }
  local op = "ember.nn.functional." .. fname
  local function run(input, target, opts)
    if amp._dtype then input, target = amp._up(input, target) end
    return fn(op, input, target, options(op, opts, spec))
  end
  F[fname] = function(input, target, opts)
    local l = ember._tidy_own(run, input, target, opts)
    return l
  end
end

---------------------------------------------------------------- regression
loss("mse_loss", "MSELoss", { REDUCTION }, function(op, input, target, o)
  need_pair(op, input, target)
  local d = input - target
  return reduce(d * d, o.reduction)
end)

loss("l1_loss", "L1Loss", { REDUCTION }, function(op, input, target, o)
  need_pair(op, input, target)
  return reduce((input - target):abs(), o.reduction)
end)

-- 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta; beta = 0 is L1
loss("smooth_l1_loss", "SmoothL1Loss", { REDUCTION, { "beta", 1, number_in(0, math.huge) } },
  function(op, input, target, o)
    need_pair(op, input, target)
    local d = input - target
    local ad, beta = d:abs(), o.beta
    if beta == 0 then return reduce(ad, o.reduction) end
    return reduce(ember.where(ad:lt(beta), d * d * (0.5 / beta), ad - 0.5 * beta), o.reduction)
  end)

-- 0.5 d^2 where |d| <= delta, else delta (|d| - 0.5 delta): smooth L1 times delta
loss("huber_loss", "HuberLoss", { REDUCTION, { "delta", 1, number_in(0, math.huge, true) } },
  function(op, input, target, o)
    need_pair(op, input, target)
    local d = input - target
    local ad, delta = d:abs(), o.delta
    return reduce(ember.where(ad:le(delta), d * d * 0.5, (ad - 0.5 * delta) * delta), o.reduction)
  end)

---------------------------------------------------------------- binary
-- log(x) floored at -100, as PyTorch's binary_cross_entropy; the floor is
-- taken on x, so a saturated x of exactly 0 gives a 0 gradient, not 0/0
local LOG_FLOOR = math.exp(-100)
local function floored_log(x) return x:clamp(LOG_FLOOR):log() end

loss("binary_cross_entropy", "BCELoss", { WEIGHT, REDUCTION }, function(op, input, target, o)
  need_pair(op, input, target)
  if input:numel() > 0 then
    local lo, hi = input:min():item(), input:max():item()
    if not (lo >= 0 and hi <= 1) then
      fail(op, "input values must be probabilities in [0, 1], got %g", (lo >= 0 and hi or lo))
    end
  end
  local l = -(target * floored_log(input) + (1 - target) * floored_log(1 - input))
  if o.weight then l = l * o.weight end
  return reduce(l, o.reduction)
end)

-- (1 - y) x + lw softplus(-x), lw = 1 + (pos_weight - 1) y. softplus(-x) is
-- max(-x, 0) + log(1 + exp(-|x|)): no overflow, and at x = 0 maximum splits
-- its gradient, which gives softplus' -1/2.
loss("binary_cross_entropy_with_logits", "BCEWithLogitsLoss",
  { WEIGHT, REDUCTION, { "pos_weight", nil, optional_tensor } }, function(op, input, target, o)
    need_pair(op, input, target)
    local sp = ember.maximum(-input, 0) + (-input:abs()):exp():add(1):log()
    if o.pos_weight then sp = sp * ((o.pos_weight - 1) * target + 1) end
    local l = (1 - target) * input + sp
    if o.weight then l = l * o.weight end
    return reduce(l, o.reduction)
  end)

---------------------------------------------------------------- distributions
-- target (log target - input) pointwise; t log t is 0 where t = 0.
-- "batchmean" divides the sum by the batch size, as the KL divergence means.
loss("kl_div", "KLDivLoss", { { "reduction", "mean", one_of("mean", "sum", "none", "batchmean") },
  { "log_target", false, boolean } }, function(op, input, target, o)
    need_pair(op, input, target)
    local l
    if o.log_target then
      l = target:exp() * (target - input)
    else
      l = target * (ember.where(target:eq(0), 1, target):log() - input)
    end
    if o.reduction == "batchmean" then
      return input:dim() > 0 and l:sum() / input:size(1) or l:sum()
    end
    return reduce(l, o.reduction)
  end)

---------------------------------------------------------------- classification
local IGNORE_INDEX = { "ignore_index", -100, integer }

-- input (N, C), (N, C, d1, ...) or (C); labels of shape (N) / (N, d1, ...) / ().
-- Returns the input as rows (M, C) with the class dim last, labels (M), C.
local function class_layout(op, x, labels)
  local xs, ls = x:shape(), labels:shape()
  if #xs == 1 then
    if #ls ~= 0 then
      fail(op, "input %s needs a 0-d label, got labels %s", shape_str(x), shape_str(labels))
    end
    return x:view(1, xs[1]), labels:view(1), xs[1]
  end
  local ok = #xs >= 2 and #ls == #xs - 1 and ls[1] == xs[1]
  for d = 3, #xs do ok = ok and ls[d - 1] == xs[d] end
  if not ok then
    fail(op, "input %s and labels %s do not match (expected labels of shape {N, d1, ...} "
      .. "for input {N, C, d1, ...})", shape_str(x), shape_str(labels))
  end
  local Cn = xs[2]
  if #xs > 2 then   -- move the class dim last and flatten the rest
    local perm = { 1 }
    for d = 3, #xs do perm[#perm + 1] = d end
    perm[#perm + 1] = 2
    x = x:permute(perm):reshape(-1, Cn)
  end
  return x, labels:reshape(-1), Cn
end

local function check_weight(op, w, Cn)
  if w ~= nil and (w:dim() ~= 1 or w:size(1) ~= Cn) then
    fail(op, "weight must have one entry per class, shape {%d}, got %s", Cn, shape_str(w))
  end
end

-- The labels (M) as the int64 rows to pick, ignored ones pointed at class 1;
-- the weight of each row, its class weight times the mask (PyTorch's mean
-- divides by their sum), nil when every row counts 1; the mask of dtype,
-- 1 where a row counts and 0 where it is ignored, nil when none is.
local function targets(op, labels, Cn, o, dtype)
  local lab = labels:to("int64")
  local mask
  if lab:numel() > 0 then
    -- under ember.jit.trace these reads are a check (docs/plans.md); an
    -- ignore_index that is a class would make the rows counted depend on them
    local ig = o.ignore_index
    if ig >= 1 and ig <= Cn then
      ember._jit_refuse(op .. " with an ignore_index that is a class", "which rows count would depend on the labels")
    end
    C.ember_trace_allow_reads(1)
    local lo, hi = lab:min():item(), lab:max():item()
    C.ember_trace_allow_reads(-1)
    if ig >= lo and ig <= hi then
      mask = lab:ne(ig)
      lab = ember.where(mask, lab, 1)
      lo, hi = lab:min():item(), lab:max():item()
    end
    if lo < 1 or hi > Cn then
      fail(op, "label %d is out of range 1..%d (labels are 1-based class indices)", lo < 1 and lo or hi, Cn)
    end
  end
  local w = o.weight and o.weight:index_select(1, lab)
  if mask then
    mask = mask:to(dtype)
    w = w and w * mask or mask
  end
  return lab, w, mask
end

-- rows (M) of per-row losses, reduced as nll_loss reduces them
local function reduce_rows(rows, w, reduction, labels)
  if reduction == "none" then return rows:view(labels:shape()) end
  if reduction == "mean" and w then return rows:sum() / w:sum() end
  return reduce(rows, reduction)
end

-- -logp[label] weighted; logp rows (M, C)
local function nll_rows(logp, lab, w)
  local rows = -logp:gather(2, lab:view(-1, 1)):view(-1)
  if w then rows = rows * w end
  return rows
end

local function need_labels(op, input, labels)
  need_tensor(op, "input", input)
  need_tensor(op, "labels", labels)
  if labels.dtype ~= "int64" and labels.dtype ~= "int32" then
    fail(op, "labels must be int64 or int32 class indices (1-based), got %s %s", labels.dtype,
      shape_str(labels))
  end
end

loss("nll_loss", "NLLLoss", { WEIGHT, IGNORE_INDEX, REDUCTION }, function(op, input, labels, o)
  need_labels(op, input, labels)
  local logp, lab, Cn = class_layout(op, input, labels)
  check_weight(op, o.weight, Cn)
  local w
  lab, w = targets(op, lab, Cn, o, logp.dtype)
  return reduce_rows(nll_rows(logp, lab, w), w, o.reduction, labels)
end)


-- probabilities (same shape as the input) smoothed towards uniform:
-- -sum_c w_c t_c log p_c per sample, a mean dividing by the number of samples
local function soft_cross_entropy(input, target, o)
  local cdim = input:dim() == 1 and 1 or 2
  local Cn = input:size(cdim)
  local ls = o.label_smoothing
  if ls > 0 then target = target * (1 - ls) + ls / Cn end
  local prod = input:log_softmax(cdim) * target
  if o.weight then
    local shape = {}
    for d = 1, input:dim() do shape[d] = d == cdim and Cn or 1 end
    prod = prod * o.weight:view(shape)
  end
  if o.reduction == "none" then return -prod:sum(cdim) end
  if o.reduction == "sum" then return -prod:sum() end
  return -prod:sum() / (input:numel() / Cn)
end

-- The common case in one op (C ember_cross_entropy: log-softmax, the picked
-- label's loss, smoothing, weights and the label range check in one pass
-- per row, its adjoint one more): logits (M, C) float32 or float64 on the
-- CPU, class weights (if any) of their dtype that need no gradient. nil
-- elsewhere, where the caller composes recorded ops.
local function fused_cross_entropy(op, x, lab, Cn, o, labels)
  local dt, w = x.dtype, o.weight
  if x.device ~= "cpu" or (dt ~= "float32" and dt ~= "float64") or lab.device ~= "cpu" then return nil end
  if w and (w.dtype ~= dt or w.device ~= "cpu" or C.ember_is_tracked(w._c) ~= 0) then return nil end
  w = w or ember.ones({ Cn }, { dtype = dt })
  local rc = C.ember_cross_entropy(ember._ptr(op, x, 1), ember._ptr(op, lab, 2), ember._ptr(op, w, 3), 1,
    o.ignore_index, o.label_smoothing, out2, out2 + 1)
  if rc < 0 then
    local range = ffi.string(C.ember_last_error()):match("^cross_entropy: (label .* is out of range .*)$")
    if range then fail(op, "%s (labels are 1-based class indices)", range) end
    errors.check(rc)
  end
  local rows, stats = ember._wrap(out2[0]), ember._wrap(out2[1])
  if o.reduction == "none" then return rows:view(labels:shape()) end
  if o.reduction == "sum" then return rows:sum() end
  return rows:sum() / stats:detach()[2]:sum()   -- the rows' weights: a mean over the labels that count
end

-- class indices: (1 - ls) nll + ls / C * (-sum_c w_c log p_c), both over the
-- non-ignored rows and divided by the same weight in a mean (PyTorch 1.13)
loss("cross_entropy", "CrossEntropyLoss",
  { WEIGHT, IGNORE_INDEX, REDUCTION, { "label_smoothing", 0, number_in(0, 1) } },
  function(op, input, labels, o)
    need_tensor(op, "input", input)
    need_tensor(op, "labels", labels)
    if labels.dtype ~= "int64" and labels.dtype ~= "int32" and same_shape(input, labels) then
      check_weight(op, o.weight, input:size(input:dim() == 1 and 1 or 2))
      return soft_cross_entropy(input, labels, o)
    end
    need_labels(op, input, labels)
    local x, lab, Cn = class_layout(op, input, labels)
    check_weight(op, o.weight, Cn)
    local fused = fused_cross_entropy(op, x, lab, Cn, o, labels)
    if fused then return fused end
    local w, mask
    lab, w, mask = targets(op, lab, Cn, o, x.dtype)
    local logp = x:log_softmax(2)
    local rows = nll_rows(logp, lab, w)
    local ls = o.label_smoothing
    if ls > 0 then
      local smooth = o.weight and -(logp * o.weight:view(1, Cn)):sum(2) or -logp:sum(2)
      if mask then smooth = smooth * mask end
      rows = rows * (1 - ls) + smooth * (ls / Cn)
    end
    return reduce_rows(rows, w, o.reduction, labels)
  end)

---------------------------------------------------------------- modules
-- nn.CrossEntropyLoss({weight =, ...}) and the others: the options of the
-- function, kept as fields; weight and pos_weight are buffers, so they are
-- saved in state_dict and converted by :to(), but are not parameters.
function L.register(nn)
  for _, entry in ipairs(LOSSES) do
    local _, mname, spec, fn = unpack(entry)
    local op = "ember.nn." .. mname
    local M = nn.Module:extend(mname)
    function M:init(opts)
      local o = options(op, opts, spec)
      for _, s in ipairs(spec) do
        local v = o[s[1]]
        if is_tensor(v) then self:register_buffer(s[1], v) else self[s[1]] = v end
      end
    end
    function M:forward(input, target)
      local o = {}
      for _, s in ipairs(spec) do o[s[1]] = self[s[1]] end
      local l = ember._tidy_own(fn, op, input, target, options(op, o, spec))
      return l
    end
    function M:extra_repr() return "reduction=" .. self.reduction end
    nn[mname] = M
  end
end

return L
