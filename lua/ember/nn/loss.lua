-- ember.nn.loss: the losses, as functions (ember.nn.functional re-exports
-- them). Each is a composition of recorded tensor ops, so gradients of any
-- order come from the rule registry. Losses reduce by mean unless
-- {reduction = "sum" | "none"}.
local ember = require("ember")

local L = { functional = {} }
local F = L.functional

local function fail(op, fmt, ...)
  error(("ember.%s: " .. fmt):format(op, ...), 3)
end

local function shape_str(t)
  return "{" .. table.concat(t:shape(), ", ") .. "}"
end

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

local function same_shape_of(a, b)
  local x, y = a:shape(), b:shape()
  if #x ~= #y then return false end
  for i = 1, #x do if x[i] ~= y[i] then return false end end
  return true
end

local function reduce(op, loss, reduction)
  reduction = reduction or "mean"
  if reduction == "mean" then return loss:mean() end
  if reduction == "sum" then return loss:sum() end
  if reduction == "none" then return loss end
  fail(op, "reduction must be 'mean', 'sum' or 'none', got '%s'", tostring(reduction))
end

local LOSS_OPTS = { reduction = true, ignore_index = true, label_smoothing = true, weight = true }

-- logits (N, C) or (N, C, d1, ...) or (C); labels int64 1-based of shape (N) / (N, d1, ...) / ()
local function class_layout(op, x, labels)
  need_tensor(op, "input", x)
  need_tensor(op, "labels", labels)
  if labels.dtype ~= "int64" and labels.dtype ~= "int32" then
    fail(op, "labels must be int64 or int32 class indices (1-based), got %s", labels.dtype)
  end
  local xs, ls = x:shape(), labels:shape()
  if #xs == 1 then
    if #ls ~= 0 then fail(op, "input %s needs a 0-d label, got labels %s", shape_str(x), shape_str(labels)) end
    return x:view(1, xs[1]), labels:view(1), xs[1]
  end
  local ok = #xs >= 2 and #ls == #xs - 1 and ls[1] == xs[1]
  for d = 3, #xs do ok = ok and ls[d - 1] == xs[d] end
  if not ok then
    fail(op, "input %s and labels %s do not match (expected labels of shape {N, d1, ...} for input {N, C, d1, ...})",
      shape_str(x), shape_str(labels))
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

local function check_labels(op, labels, Cn, ignore)
  if labels:numel() == 0 then return end
  local valid = labels
  if ignore ~= nil then valid = ember.where(labels:eq(ignore), 1, labels) end
  local lo, hi = valid:min():item(), valid:max():item()
  if lo < 1 or hi > Cn then
    fail(op, "label %d is out of range 1..%d (labels are 1-based class indices)", lo < 1 and lo or hi, Cn)
  end
end

-- nll over rows of log-probabilities; the shared tail of nll_loss and cross_entropy
local function nll(op, logp, labels, Cn, o)
  local ignore = o.ignore_index
  check_labels(op, labels, Cn, ignore)
  local lab = labels:to("int64")
  local mask
  if ignore ~= nil then
    mask = lab:ne(ignore)
    lab = ember.where(mask, lab, 1)
  end
  local picked = logp:gather(2, lab:view(-1, 1)):view(-1)
  local loss = -picked
  local wsum
  if o.weight ~= nil then
    local wl = o.weight:index_select(1, lab)
    if mask then wl = wl * mask:to(wl.dtype) end
    loss = loss * wl
    wsum = wl:sum()
  elseif mask then
    local mf = mask:to(loss.dtype)
    loss = loss * mf
    wsum = mf:sum()
  end
  if (o.reduction or "mean") == "mean" and wsum then return loss:sum() / wsum end
  return reduce(op, loss, o.reduction)
end

function F.nll_loss(logp, labels, opts)
  local o = opts_of("nll_loss", opts, LOSS_OPTS)
  local x, lab, Cn = class_layout("nll_loss", logp, labels)
  local loss = nll("nll_loss", x, lab, Cn, o)
  if o.reduction == "none" then return loss:view(labels:shape()) end
  return loss
end

-- F.cross_entropy(logits, labels, {reduction =, ignore_index =, label_smoothing =, weight =})
-- labels are int64 class indices, 1-based.
function F.cross_entropy(logits, labels, opts)
  local o = opts_of("cross_entropy", opts, LOSS_OPTS)
  local x, lab, Cn = class_layout("cross_entropy", logits, labels)
  local logp = x:log_softmax(2)
  local ls = o.label_smoothing or 0
  if ls == 0 then
    local loss = nll("cross_entropy", logp, lab, Cn, o)
    if o.reduction == "none" then return loss:view(labels:shape()) end
    return loss
  end
  if type(ls) ~= "number" or ls < 0 or ls > 1 then
    fail("cross_entropy", "label_smoothing must be in [0, 1], got %s", tostring(ls))
  end
  if o.weight ~= nil or o.ignore_index ~= nil then
    fail("cross_entropy", "label_smoothing does not combine with weight or ignore_index yet")
  end
  local hard = nll("cross_entropy", logp, lab, Cn, { reduction = "none" })
  local smooth = -logp:mean(2)
  local loss = hard * (1 - ls) + smooth * ls
  if o.reduction == "none" then return loss:view(labels:shape()) end
  return reduce("cross_entropy", loss, o.reduction)
end

function F.mse_loss(a, b, opts)
  need_tensor("mse_loss", "input", a)
  need_tensor("mse_loss", "target", b)
  local o = opts_of("mse_loss", opts, { reduction = true })
  if not same_shape_of(a, b) then
    fail("mse_loss", "input of shape %s and target of shape %s differ", shape_str(a), shape_str(b))
  end
  local d = a - b
  return reduce("mse_loss", d * d, o.reduction)
end

function F.l1_loss(a, b, opts)
  local o = opts_of("l1_loss", opts, { reduction = true })
  return reduce("l1_loss", (a - b):abs(), o.reduction)
end

-- binary cross-entropy on logits (numerically stable)
function F.binary_cross_entropy_with_logits(x, y, opts)
  local o = opts_of("binary_cross_entropy_with_logits", opts, { reduction = true })
  local loss = x:relu() - x * y + (-x:abs()):exp():add(1):log()
  return reduce("binary_cross_entropy_with_logits", loss, o.reduction)
end

return L
