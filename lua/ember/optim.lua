-- ember.optim: the Optimizer and LRScheduler machinery (PyTorch's update
-- rules, parameter groups and state_dict layout), SGD, Adam and AdamW with
-- their fused kernels, gradient clipping, StepLR and CosineAnnealingLR. The
-- other optimizers and schedulers live in lua/ember/optim/ and plug in through
-- the `internal` table at the end. Updates are in-place tensor ops run under
-- no_grad, so they are never recorded and the parameters keep their identity.
-- Not here: foreach/fused multi-tensor kernels, sparse gradients.
local ember = require("ember")

local is_tensor = ember.is_tensor
local type, pairs, ipairs, tostring, error, rawget, setmetatable, getmetatable =
  type, pairs, ipairs, tostring, error, rawget, setmetatable, getmetatable
local sqrt, cos, floor, pi, huge = math.sqrt, math.cos, math.floor, math.pi, math.huge

local optim = {}

---------------------------------------------------------------- checks
local errors = require("ember.errors")
local function fail(name, fmt, ...) errors.fail("optim." .. name, fmt, ...) end

local function show(v)
  if type(v) == "number" then return tostring(v) end
  if type(v) == "string" then return ("%q"):format(v) end
  if is_tensor(v) then return "a tensor" end
  if v == nil then return "nil" end
  return "a " .. type(v)
end

local FLOAT = { float32 = true, float64 = true, float16 = true, bfloat16 = true }

local function finite(v) return type(v) == "number" and v == v and v > -huge and v < huge end

local function nonneg(v)
  if not (finite(v) and v >= 0) then return "must be a non-negative number" end
end
local function number(v)
  if not finite(v) then return "must be a finite number" end
end
local function boolean(v)
  if type(v) ~= "boolean" then return "must be a boolean" end
end
local function betas(v)
  if type(v) ~= "table" or is_tensor(v) or #v ~= 2 then
    return "must be a list of two numbers in [0, 1)"
  end
  for i = 1, 2 do
    if not (finite(v[i]) and v[i] >= 0 and v[i] < 1) then
      return ("must be a list of two numbers in [0, 1) (betas[%d] is %s)"):format(i, show(v[i]))
    end
  end
end

-- the keys of t in a fixed order, so the first bad option reported does not
-- depend on the hash order
local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

local function copy_value(v)
  if type(v) == "table" and not is_tensor(v) then
    local c = {}
    for k, x in pairs(v) do c[k] = copy_value(x) end
    return c
  end
  return v
end

-- checks one option against the class's spec; `where` says where it came from
local function check_option(cls, key, v, where)
  local spec = cls._spec_by_key[key]
  if spec == nil then
    if key == "initial_lr" then spec = { key, nil, nonneg }   -- set by the lr schedulers
    else fail(cls._name, "unknown option '%s'%s", tostring(key), where) end
  end
  local msg = spec[3](v)
  if msg then fail(cls._name, "%s %s, got %s%s", key, msg, show(v), where) end
end

---------------------------------------------------------------- Optimizer
local Optimizer = {}
Optimizer.__index = Optimizer
optim.Optimizer = Optimizer

local function as_param_list(name, list, what)
  if is_tensor(list) then list = { list } end
  if type(list) ~= "table" then
    fail(name, "%s must be a list of tensors, got %s", what, show(list))
  end
  local out = {}
  for i = 1, #list do
    local p = list[i]
    if not is_tensor(p) then
      fail(name, "%s[%d] must be a tensor, got %s", what, i, show(p))
    end
    if not FLOAT[p.dtype] then
      fail(name, "%s[%d] is a %s tensor; only floating point tensors can be optimized",
        what, i, p.dtype)
    end
    out[i] = p
  end
  return out
end

-- Class:add_param_group({params = {...}, lr = ...}): options left out take
-- the optimizer's defaults.
function Optimizer:add_param_group(group)
  local cls = getmetatable(self)
  local name = cls._name
  local gi = #self.param_groups + 1
  if type(group) ~= "table" or is_tensor(group) then
    fail(name, "a parameter group must be a table with a params list, got %s", show(group))
  end
  local where = (self._grouped or gi > 1) and (" in parameter group %d"):format(gi) or ""
  local params = as_param_list(name, group.params,
    (self._grouped or gi > 1) and ("param_groups[%d].params"):format(gi) or "params")
  local new = {}
  for _, k in ipairs(sorted_keys(group)) do
    if k ~= "params" then
      check_option(cls, k, group[k], where)
      new[k] = copy_value(group[k])
    end
  end
  for _, spec in ipairs(cls._spec) do
    if new[spec[1]] == nil then new[spec[1]] = copy_value(self.defaults[spec[1]]) end
  end
  if cls._check_group then
    local msg = cls._check_group(new)
    if msg then fail(name, "%s%s", msg, where) end
  end
  local seen, here = self._seen, {}
  for i, p in ipairs(params) do
    if seen[p] or here[p] then
      fail(name, "params[%d]%s appears more than once in the optimizer", i, where)
    end
    here[p] = true
  end
  for _, p in ipairs(params) do seen[p] = true end
  new.params = params
  self.param_groups[gi] = new
  return self
end

-- an options argument: nil is {}, anything but a plain table an error
local function options_table(name, opts)
  if opts == nil then return {} end
  if type(opts) ~= "table" or is_tensor(opts) then
    fail(name, "options must be a table, got %s", show(opts))
  end
  return opts
end

local function new_optimizer(cls, params, opts)
  local name = cls._name
  if type(params) ~= "table" then
    fail(name, "params must be a list of tensors or of parameter groups, got %s", show(params))
  end
  opts = options_table(name, opts)
  local defaults = {}
  for _, spec in ipairs(cls._spec) do defaults[spec[1]] = copy_value(spec[2]) end
  for _, k in ipairs(sorted_keys(opts)) do
    check_option(cls, k, opts[k], "")
    defaults[k] = copy_value(opts[k])
  end
  local self = setmetatable({ defaults = defaults, param_groups = {}, state = {}, _seen = {} }, cls)
  local groups
  if not is_tensor(params) and type(params[1]) == "table" and not is_tensor(params[1]) then
    groups, self._grouped = params, true
  else
    groups = { { params = params } }
  end
  if #groups == 0 then fail(name, "got an empty parameter list") end
  for _, g in ipairs(groups) do self:add_param_group(g) end
  local n = 0
  for _, g in ipairs(self.param_groups) do n = n + #g.params end
  if n == 0 then fail(name, "got an empty parameter list") end
  return self
end

-- opt:step(closure?): one update of every parameter that has a .grad. The
-- closure, when given, is called first (with gradients enabled) and its
-- result returned, as in PyTorch.
function Optimizer:step(closure)
  local loss
  if closure ~= nil then
    if type(closure) ~= "function" then
      fail(getmetatable(self)._name, "step: closure must be a function, got %s", show(closure))
    end
    loss = ember.enable_grad(closure)
  end
  ember.no_grad(self._update, self)
  ember._keep_reachable(self.state)   -- state made inside an ember.tidy outlives it
  return loss
end

-- opt:zero_grad(set_to_none = true): p.grad = nil, or zero it in place
function Optimizer:zero_grad(set_to_none)
  errors.boolean("Optimizer:zero_grad", "set_to_none", set_to_none)   -- nil: true, as PyTorch's default
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      if set_to_none == false then
        local g = rawget(p, "_grad")
        if g ~= nil then ember.no_grad(g.zero_, g) end
      else
        p.grad = nil
      end
    end
  end
end

-- { state = {[i] = {step =, exp_avg =, ...}}, param_groups = {{lr =, ..., params = {i, ...}}} }
-- i numbers the parameters 1..n across the groups in order; tensors are clones.
function Optimizer:state_dict()
  local index, groups, n = {}, {}, 0
  for gi, group in ipairs(self.param_groups) do
    local g, ids = {}, {}
    for k, v in pairs(group) do
      if k ~= "params" then g[k] = copy_value(v) end
    end
    for j, p in ipairs(group.params) do
      n = n + 1
      ids[j] = n
      index[p] = n
    end
    g.params = ids
    groups[gi] = g
  end
  local state = {}
  ember.no_grad(function()
    for p, st in pairs(self.state) do
      local i = index[p]
      if i then
        local c = {}
        for k, v in pairs(st) do c[k] = is_tensor(v) and v:clone() or copy_value(v) end
        state[i] = c
      end
    end
  end)
  return { state = state, param_groups = groups }
end

local same_shape = errors.same_shape
local shape_str = errors.shape

-- Restores what state_dict returned, matching parameters by position. Every
-- check runs before anything changes, so a bad state leaves the optimizer as it was.
function Optimizer:load_state_dict(sd)
  local cls = getmetatable(self)
  local name = cls._name
  if type(sd) ~= "table" or is_tensor(sd) or type(sd.param_groups) ~= "table" then
    fail(name, "load_state_dict: expected a table with state and param_groups, got %s", show(sd))
  end
  local groups, state = sd.param_groups, sd.state or {}
  if type(state) ~= "table" then fail(name, "load_state_dict: state must be a table, got %s", show(state)) end
  if #groups ~= #self.param_groups then
    fail(name, "load_state_dict: the state has %d parameter group(s), the optimizer has %d",
      #groups, #self.param_groups)
  end
  local by_id = {}
  for gi, g in ipairs(groups) do
    local mine = self.param_groups[gi]
    if type(g) ~= "table" or type(g.params) ~= "table" then
      fail(name, "load_state_dict: param_groups[%d] must be a table with a params list", gi)
    end
    if #g.params ~= #mine.params then
      fail(name, "load_state_dict: parameter group %d has %d parameter(s) in the state and %d "
        .. "in the optimizer", gi, #g.params, #mine.params)
    end
    for j, id in ipairs(g.params) do by_id[id] = mine.params[j] end
    local merged = {}
    for k, v in pairs(mine) do merged[k] = v end
    for _, k in ipairs(sorted_keys(g)) do
      if k ~= "params" then
        check_option(cls, k, g[k], (" in param_groups[%d] of the loaded state"):format(gi))
        merged[k] = g[k]
      end
    end
    if cls._check_group then
      local msg = cls._check_group(merged)
      if msg then fail(name, "load_state_dict: %s in param_groups[%d]", msg, gi) end
    end
  end
  local new_state = {}
  ember.no_grad(function()
    for id, st in pairs(state) do
      local p = by_id[id] or by_id[tonumber(id)]
      if p == nil then
        fail(name, "load_state_dict: the state has an entry for parameter %s, which no "
          .. "parameter group lists", tostring(id))
      end
      if type(st) ~= "table" then
        fail(name, "load_state_dict: state[%s] must be a table, got %s", tostring(id), show(st))
      end
      local c = {}
      for k, v in pairs(st) do
        if is_tensor(v) then
          if not same_shape(v:shape(), p:shape()) then
            fail(name, "load_state_dict: state[%s].%s has shape %s, its parameter %s",
              tostring(id), tostring(k), shape_str(v:shape()), shape_str(p:shape()))
          end
          local t = v:to(p.device):to(p.dtype)
          c[k] = rawequal(t, v) and v:clone() or t
        elseif type(v) == "number" or type(v) == "boolean" then
          c[k] = v
        else
          fail(name, "load_state_dict: state[%s].%s must be a tensor or a number, got %s",
            tostring(id), tostring(k), show(v))
        end
      end
      new_state[p] = c
    end
  end)
  for gi, g in ipairs(groups) do
    local mine = self.param_groups[gi]
    for k, v in pairs(g) do
      if k ~= "params" then mine[k] = copy_value(v) end
    end
  end
  self.state = new_state
end

function Optimizer:__tostring()
  local cls = getmetatable(self)
  local lines = { cls._name .. " (" }
  for gi, g in ipairs(self.param_groups) do
    lines[#lines + 1] = ("Parameter Group %d"):format(gi - 1)
    local keys = {}
    for k in pairs(g) do if k ~= "params" then keys[#keys + 1] = tostring(k) end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = g[k]
      if type(v) == "table" then v = "{" .. table.concat(v, ", ") .. "}" end
      lines[#lines + 1] = ("    %s: %s"):format(k, tostring(v))
    end
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- spec: list of { option, default, check }; update(self) runs under no_grad
local function class(name, spec, update, check_group)
  local cls = { _name = name, _spec = spec, _spec_by_key = {}, _update = update,
    _check_group = check_group, __tostring = Optimizer.__tostring }
  for _, s in ipairs(spec) do cls._spec_by_key[s[1]] = s end
  cls.__index = cls
  return setmetatable(cls, {
    __index = Optimizer,
    __call = function(c, params, opts) return new_optimizer(c, params, opts) end,
    __tostring = function() return "ember.optim." .. name end,
  })
end

---------------------------------------------------------------- SGD
-- d = g + wd*p; b = momentum*b + (1 - dampening)*d (b = d on the first step);
-- d = nesterov and d + momentum*b or b; p = p - lr*d
-- The fused C kernels (ember_sgd_step_, ember_adam_step_) do an update in one
-- pass; they take contiguous CPU float32/float64 operands of one dtype and
-- answer EMBER_ERR_UNSUPPORTED otherwise, and the composed ops below run.
local C = ember._C
local ERR_UNSUPPORTED = -6
local function fused(rc)
  if rc == 0 then return true end
  if rc ~= ERR_UNSUPPORTED then errors.check(rc) end
  return false
end

local function sgd_update(self)
  local state = self.state
  for _, group in ipairs(self.param_groups) do
    local lr, mom, damp, wd = group.lr, group.momentum, group.dampening, group.weight_decay
    local nesterov, maximize = group.nesterov, group.maximize
    if ember._jit_tracing() then ember._jit_group(group) end
    for _, p in ipairs(group.params) do
      local g = rawget(p, "_grad")
      local done = false
      if g ~= nil then
        local st, buf, first = nil, nil, false
        if mom ~= 0 then
          st = state[p]
          buf = st and st.momentum_buffer
          if buf == nil then buf, first = ember.empty_like(p), true end
        end
        done = fused(C.ember_sgd_step_(p._c, g._c, buf and buf._c, lr, mom, damp, wd,
          nesterov and 1 or 0, maximize and 1 or 0, first and 1 or 0))
        if done and first then
          if st == nil then st = {}; state[p] = st end
          st.momentum_buffer = buf
        end
      end
      if g ~= nil and not done then
        local d, owned = g, false       -- owned: d is a temporary this step may overwrite
        if wd ~= 0 then
          d, owned = p * wd, true
          if maximize then d:sub_(g) else d:add_(g) end
        elseif maximize then
          d, owned = -g, true
        end
        if mom ~= 0 then
          local st = state[p]
          if st == nil then st = {}; state[p] = st end
          local buf = st.momentum_buffer
          if buf == nil then
            ember._jit_refuse("SGD's first step with momentum", "it makes the momentum buffer, which later steps "
              .. "update; run one step eagerly before tracing")
            buf = (owned and not nesterov) and d or d:clone()
            st.momentum_buffer = buf
          else
            buf:mul_(mom)
            if damp ~= 0 then buf:add_(d * (1 - damp)) else buf:add_(d) end
          end
          if nesterov then
            if owned then d:add_(buf * mom)
            else d, owned = buf * mom, true; d:add_(g) end
          else
            d, owned = buf, false
          end
        end
        if owned then p:sub_(d:mul_(lr)) else p:sub_(d * lr) end
      end
      ember._slice_point()   -- a sliced step (ember.frame) may pause between parameters
    end
  end
end

optim.SGD = class("SGD", {
  { "lr", 1e-3, nonneg },
  { "momentum", 0, nonneg },
  { "dampening", 0, number },
  { "weight_decay", 0, nonneg },
  { "nesterov", false, boolean },
  { "maximize", false, boolean },
}, sgd_update, function(g)
  if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
    return "nesterov momentum requires a momentum > 0 and zero dampening"
  end
end)

---------------------------------------------------------------- Adam, AdamW
-- (Adam: g = g + wd*p; AdamW: p = p*(1 - lr*wd))
-- m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; (amsgrad: vmax = max(vmax, v), used for v)
-- p = p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
-- p's Adam state, made zero on first use (max_exp_avg_sq with amsgrad)
local function adam_state(state, p, amsgrad)
  local st = state[p]
  if st == nil then
    ember._jit_refuse("Adam's first step", "it makes the optimizer's state, which later steps update; run one "
      .. "step eagerly before tracing")
    st = { step = 0, exp_avg = ember.zeros_like(p), exp_avg_sq = ember.zeros_like(p) }
    state[p] = st
  end
  if amsgrad and st.max_exp_avg_sq == nil then st.max_exp_avg_sq = ember.zeros_like(p) end
  return st
end

local function adam_update(self, decoupled)
  local state = self.state
  for _, group in ipairs(self.param_groups) do
    local lr, eps, wd = group.lr, group.eps, group.weight_decay
    local b1, b2 = group.betas[1], group.betas[2]
    local amsgrad, maximize = group.amsgrad, group.maximize
    if ember._jit_tracing() then ember._jit_group(group) end
    for _, p in ipairs(group.params) do
      local g = rawget(p, "_grad")
      if g ~= nil then
        local st = adam_state(state, p, amsgrad)
        local vmax = amsgrad and st.max_exp_avg_sq or nil
        ember._jit_counter(st, p)
        if fused(C.ember_adam_step_(p._c, g._c, st.exp_avg._c, st.exp_avg_sq._c, vmax and vmax._c, lr, b1, b2,
            eps, wd, decoupled and 1 or 0, maximize and 1 or 0, st.step + 1)) then
          st.step = st.step + 1
          g = nil
        end
      end
      if g ~= nil then
        ember._jit_refuse("Adam's composed update (a parameter the fused kernel does not take)",
          "its bias correction is a Lua number of the step count")
        if maximize then g = -g end
        if wd ~= 0 then
          if decoupled then p:mul_(1 - lr * wd)
          else local d = p * wd; d:add_(g); g = d end
        end
        local st = adam_state(state, p, amsgrad)
        local t = st.step + 1
        st.step = t
        local m, v = st.exp_avg, st.exp_avg_sq
        -- 4 temporaries, 13 passes over the data (the in-place ops are not fused)
        m:mul_(b1):add_(g * (1 - b1))
        v:mul_(b2):add_((g * g):mul_(1 - b2))
        if amsgrad then
          local vmax = st.max_exp_avg_sq
          vmax:copy_(ember.maximum(vmax, v))
          v = vmax
        end
        local denom = v:sqrt():div_(sqrt(1 - b2 ^ t)):add_(eps)
        p:sub_((m / denom):mul_(lr / (1 - b1 ^ t)))
      end
      ember._slice_point()   -- a sliced step (ember.frame) may pause between parameters
    end
  end
end

-- the options of Adam and its variants (AdamW, Adamax, NAdam): lr, betas, eps
-- and weight_decay with these defaults, then the variant's own
local function adam_spec(lr, wd, ...)
  local spec = {
    { "lr", lr, nonneg },
    { "betas", { 0.9, 0.999 }, betas },
    { "eps", 1e-8, nonneg },
    { "weight_decay", wd, nonneg },
  }
  for _, own in ipairs({ ... }) do spec[#spec + 1] = own end
  return spec
end
local AMSGRAD, MAXIMIZE = { "amsgrad", false, boolean }, { "maximize", false, boolean }

optim.Adam = class("Adam", adam_spec(1e-3, 0, AMSGRAD, MAXIMIZE), function(self) adam_update(self, false) end)
optim.AdamW = class("AdamW", adam_spec(1e-3, 1e-2, AMSGRAD, MAXIMIZE), function(self) adam_update(self, true) end)

---------------------------------------------------------------- gradient clipping
local function grads_of(name, params)
  if is_tensor(params) then params = { params } end
  if type(params) ~= "table" then
    fail(name, "params must be a tensor or a list of tensors, got %s", show(params))
  end
  local grads = {}
  for i = 1, #params do
    local p = params[i]
    if not is_tensor(p) then fail(name, "params[%d] must be a tensor, got %s", i, show(p)) end
    local g = rawget(p, "_grad")
    if g ~= nil then grads[#grads + 1] = g end
  end
  return grads
end

-- Scales every .grad in place by max_norm / (total + 1e-6) when that is below
-- 1, total being the norm of all the gradients together; returns total.
function optim.clip_grad_norm(params, max_norm, norm_type)
  local name = "clip_grad_norm"
  if not (type(max_norm) == "number" and max_norm >= 0) then
    fail(name, "max_norm must be a non-negative number, got %s", show(max_norm))
  end
  if norm_type == nil then norm_type = 2 end
  if norm_type == "inf" then norm_type = huge end
  if not (type(norm_type) == "number" and norm_type > 0) then
    fail(name, "norm_type must be a positive number or math.huge, got %s", show(norm_type))
  end
  local grads = grads_of(name, params)
  if #grads == 0 then return 0 end
  return ember.no_grad(function()
    local total
    if norm_type == huge then
      total = 0
      for _, g in ipairs(grads) do
        local n = g:norm(huge):item()
        if n > total or n ~= n then total = n end
      end
    else
      local s = 0
      for _, g in ipairs(grads) do s = s + g:norm(norm_type):item() ^ norm_type end
      total = s ^ (1 / norm_type)
    end
    local coef = max_norm / (total + 1e-6)
    if coef < 1 then
      for _, g in ipairs(grads) do g:mul_(coef) end
    end
    return total
  end)
end
optim.clip_grad_norm_ = optim.clip_grad_norm

-- Clamps every .grad in place to [-clip_value, clip_value].
function optim.clip_grad_value(params, clip_value)
  local name = "clip_grad_value"
  if not (type(clip_value) == "number" and clip_value >= 0) then
    fail(name, "clip_value must be a non-negative number, got %s", show(clip_value))
  end
  local grads = grads_of(name, params)
  ember.no_grad(function()
    for _, g in ipairs(grads) do g:clamp_(-clip_value, clip_value) end
  end)
end
optim.clip_grad_value_ = optim.clip_grad_value

---------------------------------------------------------------- lr schedulers
-- Closed forms of PyTorch's schedules, from each group's initial_lr and the
-- epoch counter: sched:step() sets every group's lr. They equal PyTorch's
-- recursive forms when nothing else changes the lr.
local lr_scheduler = {}
optim.lr_scheduler = lr_scheduler

local Scheduler = {}
Scheduler.__index = Scheduler
lr_scheduler.LRScheduler = Scheduler

-- Checks the optimizer and the options against the class's spec and stores
-- them in self (a spec entry is { option, default, check }); opts may also
-- hold the keys in `known`. Returns opts (a table).
local function scheduler_options(self, opt, opts, known)
  local name = self._name
  if type(opt) ~= "table" or type(opt.param_groups) ~= "table" then
    fail(name, "expected an optimizer, got %s", show(opt))
  end
  opts = options_table(name, opts)
  local options = {}
  for _, s in ipairs(self._spec) do
    options[s[1]] = true
    local v = opts[s[1]]
    if v == nil then v = s[2] end
    local msg = s[3](v)
    if msg then fail(name, "%s %s, got %s", s[1], msg, show(v)) end
    self[s[1]] = v
  end
  for _, k in ipairs(sorted_keys(opts)) do
    if not (known[k] or options[k]) then fail(name, "unknown option '%s'", tostring(k)) end
  end
  return opts
end

-- lr_at(self, base_lr, epoch, group_index) -> lr; setup(self, opt, last_epoch),
-- when given, runs after the option checks and before base_lrs are taken from
-- the groups' initial_lr
local function sched_class(name, spec, lr_at, setup)
  local cls = { _name = name, _spec = spec, _lr_at = lr_at }
  cls.__index = cls
  return setmetatable(cls, {
    __index = Scheduler,
    __call = function(c, opt, opts)
      local self = setmetatable({ optimizer = opt }, c)
      opts = scheduler_options(self, opt, opts, { last_epoch = true })
      local last_epoch = opts.last_epoch == nil and -1 or opts.last_epoch
      if type(last_epoch) ~= "number" or last_epoch < -1 or last_epoch ~= floor(last_epoch) then
        fail(name, "last_epoch must be an integer >= -1, got %s", show(last_epoch))
      end
      if setup then setup(self, opt, last_epoch) end
      self.base_lrs = {}
      for gi, g in ipairs(opt.param_groups) do
        if last_epoch == -1 then
          if g.initial_lr == nil then g.initial_lr = g.lr end
        elseif g.initial_lr == nil then
          fail(name, "param_groups[%d] has no initial_lr (needed when last_epoch is given)", gi)
        end
        self.base_lrs[gi] = g.initial_lr
      end
      self.last_epoch = last_epoch
      self:step()
      return self
    end,
    __tostring = function() return "ember.optim.lr_scheduler." .. name end,
  })
end

-- sched:step(epoch?): advance one epoch (or jump to `epoch`) and set the lrs
function Scheduler:step(epoch)
  if epoch ~= nil then
    if type(epoch) ~= "number" or epoch ~= floor(epoch) or epoch < 0 then
      fail(self._name, "step: epoch must be a non-negative integer, got %s", show(epoch))
    end
    self.last_epoch = epoch
  else
    self.last_epoch = self.last_epoch + 1
  end
  local lrs = {}
  for gi, g in ipairs(self.optimizer.param_groups) do
    local lr = self:_lr_at(self.base_lrs[gi] or g.lr, self.last_epoch, gi)
    g.lr = lr
    lrs[gi] = lr
  end
  self._last_lr = lrs
end

function Scheduler:get_last_lr()
  local out = {}
  for i, v in ipairs(self._last_lr) do out[i] = v end
  return out
end

-- everything but the optimizer, as plain values
function Scheduler:state_dict()
  local s = { last_epoch = self.last_epoch, base_lrs = copy_value(self.base_lrs),
    _last_lr = copy_value(self._last_lr) }
  for _, spec in ipairs(self._spec) do s[spec[1]] = self[spec[1]] end
  return s
end

-- checks the options a scheduler's saved state holds
local function check_loaded_options(self, s)
  for _, spec in ipairs(self._spec) do
    local v = s[spec[1]]
    if v ~= nil then
      local msg = spec[3](v)
      if msg then fail(self._name, "load_state_dict: %s %s, got %s", spec[1], msg, show(v)) end
    end
  end
end

-- restores the counter and options; the optimizer's lrs come from its own state_dict
function Scheduler:load_state_dict(s)
  local name = self._name
  if type(s) ~= "table" or is_tensor(s) then
    fail(name, "load_state_dict: expected a table, got %s", show(s))
  end
  if type(s.last_epoch) ~= "number" then
    fail(name, "load_state_dict: last_epoch must be a number, got %s", show(s.last_epoch))
  end
  if type(s.base_lrs) ~= "table" or #s.base_lrs ~= #self.optimizer.param_groups then
    fail(name, "load_state_dict: base_lrs must list one lr for each of the %d parameter group(s)",
      #self.optimizer.param_groups)
  end
  check_loaded_options(self, s)
  for _, spec in ipairs(self._spec) do
    if s[spec[1]] ~= nil then self[spec[1]] = s[spec[1]] end
  end
  self.last_epoch = s.last_epoch
  self.base_lrs = copy_value(s.base_lrs)
  self._last_lr = copy_value(s._last_lr or s.base_lrs)
end

local function positive_int(v)
  if not (type(v) == "number" and v >= 1 and v == floor(v) and v < huge) then
    return "must be a positive integer"
  end
end

-- lr = base_lr * gamma ^ floor(epoch / step_size)
lr_scheduler.StepLR = sched_class("StepLR", {
  { "step_size", nil, positive_int },
  { "gamma", 0.1, nonneg },
}, function(self, base, epoch) return base * self.gamma ^ floor(epoch / self.step_size) end)

-- lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
lr_scheduler.CosineAnnealingLR = sched_class("CosineAnnealingLR", {
  { "T_max", nil, positive_int },
  { "eta_min", 0, number },
}, function(self, base, epoch)
  return self.eta_min + (base - self.eta_min) * (1 + cos(pi * epoch / self.T_max)) / 2
end)

---------------------------------------------------------------- the other optimizers and schedulers
-- each file returns function(optim, internal) that adds its classes to optim
local internal = {
  fail = fail, show = show, finite = finite, nonneg = nonneg, number = number, boolean = boolean,
  betas = betas, positive_int = positive_int, sorted_keys = sorted_keys, copy_value = copy_value,
  same_shape = same_shape, shape_str = shape_str, class = class, sched_class = sched_class,
  Scheduler = Scheduler, scheduler_options = scheduler_options,
  check_loaded_options = check_loaded_options, adam_spec = adam_spec, MAXIMIZE = MAXIMIZE,
}
for _, file in ipairs({ "rmsprop", "adagrad", "adamax", "nadam", "lbfgs", "schedulers" }) do
  require("ember.optim." .. file)(optim, internal)
end

return optim
