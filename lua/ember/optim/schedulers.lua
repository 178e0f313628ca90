-- ember.optim.lr_scheduler: LinearLR, OneCycleLR, ExponentialLR,
-- MultiStepLR, PolynomialLR, LambdaLR, MultiplicativeLR and CyclicLR
-- (closed forms on the machinery in optim.lua), SequentialLR (hands the epochs to one scheduler
-- after another) and ReduceLROnPlateau (lowers the lr when a metric stalls),
-- with PyTorch 1.13's arguments, defaults and values.
local ember = require("ember")

local type, ipairs, tostring, setmetatable, getmetatable, floor, min, cos, pi =
  type, ipairs, tostring, setmetatable, getmetatable, math.floor, math.min, math.cos, math.pi

return function(optim, I)
  local lr_scheduler, Scheduler = optim.lr_scheduler, I.Scheduler
  local fail, show, finite, copy_value = I.fail, I.show, I.finite, I.copy_value

  ---------------------------------------------------------------- option checks
  local function fraction(v)
    if not (finite(v) and v >= 0 and v <= 1) then return "must be a number in [0, 1]" end
  end
  local function optional_positive_int(v)
    if v ~= nil then return I.positive_int(v) end
  end
  local function one_of(...)
    local allowed = { ... }
    return function(v)
      for _, a in ipairs(allowed) do if v == a then return end end
      return 'must be "' .. table.concat(allowed, '" or "') .. '"'
    end
  end
  -- a number (every group) or a list of numbers (one per group); check(x) -> ok
  local function number_or_list(check, what)
    local msg = ("must be %s or a list of them, one for each parameter group"):format(what)
    return function(v)
      if type(v) == "table" and not ember.is_tensor(v) and #v > 0 then
        for i = 1, #v do if not check(v[i]) then return msg end end
      elseif not check(v) then
        return msg
      end
    end
  end
  local function nonneg_number(x) return finite(x) and x >= 0 end
  local function positive_number(x) return finite(x) and x > 0 end
  local function positive(v)
    if not positive_number(v) then return "must be a positive number" end
  end

  -- v[gi] for a list, v for a number; a list must have one value per group
  local function per_group(name, key, v, n)
    if type(v) ~= "table" then
      local t = {}
      for gi = 1, n do t[gi] = v end
      return t
    end
    if #v ~= n then
      fail(name, "%s lists %d values; the optimizer has %d parameter group(s)", key, #v, n)
    end
    return v
  end
  local function pick(v, gi) return type(v) == "table" and v[gi] or v end

  local function expect_state(name, s)
    if type(s) ~= "table" or ember.is_tensor(s) then
      fail(name, "load_state_dict: expected a table, got %s", show(s))
    end
  end

  ---------------------------------------------------------------- LinearLR
  -- lr = base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters)
  lr_scheduler.LinearLR = I.sched_class("LinearLR", {
    { "start_factor", 1 / 3, fraction },
    { "end_factor", 1, fraction },
    { "total_iters", 5, I.positive_int },
  }, function(self, base, epoch)
    local s = self.start_factor
    return base * (s + (self.end_factor - s) * min(self.total_iters, epoch) / self.total_iters)
  end)

  ---------------------------------------------------------------- OneCycleLR
  -- Smith's 1cycle: the lr goes from max_lr/div_factor up to max_lr in the
  -- first pct_start of total_steps, then down to initial_lr/final_div_factor
  -- (three_phase: back to initial_lr by 2*pct_start, then down). Momentum (or
  -- beta1) moves the other way, between max_momentum and base_momentum.
  local LR_PHASES = {
    two = { { "initial", "max" }, { "max", "min" } },
    three = { { "initial", "max" }, { "max", "initial" }, { "initial", "min" } },
  }
  local MOMENTUM_PHASES = {
    two = { { "max", "base" }, { "base", "max" } },
    three = { { "max", "base" }, { "base", "max" }, { "max", "max" } },
  }
  local ANNEAL = {
    cos = function(from, to, pct) return to + (from - to) / 2 * (cos(pi * pct) + 1) end,
    linear = function(from, to, pct) return (to - from) * pct + from end,
  }

  local function total_steps(self)
    return self.total_steps or self.epochs * self.steps_per_epoch
  end

  -- the value at `step` of a schedule that moves between values[from] and
  -- values[to] phase by phase; a step past the last phase's end extrapolates it
  local function one_cycle_value(self, step, phases, values)
    local total, p = total_steps(self), self.pct_start
    local ends = { p * total - 1, total - 1 }
    if self.three_phase then ends = { p * total - 1, 2 * p * total - 2, total - 1 } end
    phases = phases[self.three_phase and "three" or "two"]
    local start = 0
    for i, e in ipairs(ends) do
      if step <= e or i == #ends then
        local phase = phases[i]
        local pct = (step - start) / (e - start)
        return ANNEAL[self.anneal_strategy](values[phase[1]], values[phase[2]], pct)
      end
      start = e
    end
  end

  local function one_cycle_momentum(self, opt, step)
    local use_beta1 = opt.defaults.betas ~= nil
    for gi, g in ipairs(opt.param_groups) do
      local m = one_cycle_value(self, step, MOMENTUM_PHASES,
        { max = pick(self.max_momentum, gi), base = pick(self.base_momentum, gi) })
      if use_beta1 then g.betas = { m, g.betas[2] } else g.momentum = m end
    end
  end

  local OneCycleLR = I.sched_class("OneCycleLR", {
    { "max_lr", nil, number_or_list(nonneg_number, "a non-negative number") },
    { "total_steps", nil, optional_positive_int },
    { "epochs", nil, optional_positive_int },
    { "steps_per_epoch", nil, optional_positive_int },
    { "pct_start", 0.3, fraction },
    { "anneal_strategy", "cos", one_of("cos", "linear") },
    { "cycle_momentum", true, I.boolean },
    { "base_momentum", 0.85, number_or_list(finite, "a number") },
    { "max_momentum", 0.95, number_or_list(finite, "a number") },
    { "div_factor", 25, positive },
    { "final_div_factor", 1e4, positive },
    { "three_phase", false, I.boolean },
  }, function(self, base, epoch, gi)
    return one_cycle_value(self, epoch, LR_PHASES,
      { initial = base, max = pick(self.max_lr, gi), min = base / self.final_div_factor })
  end, function(self, opt, last_epoch)
    local name, n = "OneCycleLR", #opt.param_groups
    if self.total_steps == nil and (self.epochs == nil or self.steps_per_epoch == nil) then
      fail(name, "give total_steps, or epochs and steps_per_epoch")
    end
    local max_lrs = per_group(name, "max_lr", self.max_lr, n)
    per_group(name, "max_momentum", self.max_momentum, n)
    per_group(name, "base_momentum", self.base_momentum, n)
    if self.cycle_momentum and opt.defaults.momentum == nil and opt.defaults.betas == nil then
      fail(name, "cycle_momentum needs an optimizer with a momentum or betas option (%s has "
        .. "neither); pass cycle_momentum = false", tostring((getmetatable(opt) or {})._name))
    end
    if last_epoch == -1 then
      for gi, g in ipairs(opt.param_groups) do g.initial_lr = max_lrs[gi] / self.div_factor end
    end
  end)
  lr_scheduler.OneCycleLR = OneCycleLR

  -- as Scheduler:step, and sets each group's momentum (or betas[1]); stepping
  -- past total_steps is an error that changes nothing
  function OneCycleLR:step(epoch)
    local next_epoch = epoch == nil and self.last_epoch + 1 or epoch
    local total = total_steps(self)
    if type(next_epoch) == "number" and next_epoch > total then
      fail("OneCycleLR", "step: the schedule ends at total_steps = %d; epoch %d is past it", total,
        next_epoch)
    end
    Scheduler.step(self, epoch)
    if self.cycle_momentum then one_cycle_momentum(self, self.optimizer, self.last_epoch) end
  end

  -- a scheduler class of its own (not a closed form): Scheduler's
  -- get_last_lr, `new` as its constructor
  local function plain_class(name, spec, new)
    local cls = { _name = name, _spec = spec }
    cls.__index = cls
    return setmetatable(cls, {
      __index = Scheduler,
      __call = new,
      __tostring = function() return "ember.optim.lr_scheduler." .. name end,
    })
  end

  ---------------------------------------------------------------- ReduceLROnPlateau
  -- sched:step(metric): after more than `patience` epochs in a row without an
  -- improvement over the best metric (by threshold, relative or absolute),
  -- lr = max(lr * factor, min_lr) (kept when the change is at most eps), then
  -- `cooldown` epochs in which bad epochs are not counted
  local function nonneg_int(v)
    if not (finite(v) and v >= 0 and v == floor(v)) then return "must be a non-negative integer" end
  end
  local min_lr_check = number_or_list(nonneg_number, "a non-negative number")

  local function group_lrs(opt)
    local lrs = {}
    for gi, g in ipairs(opt.param_groups) do lrs[gi] = g.lr end
    return lrs
  end

  local ReduceLROnPlateau = plain_class("ReduceLROnPlateau", {
    { "mode", "min", one_of("min", "max") },
    { "factor", 0.1, function(v)
      if not (finite(v) and v >= 0 and v < 1) then return "must be a number in [0, 1)" end
    end },
    { "patience", 10, nonneg_int },
    { "threshold", 1e-4, I.nonneg },
    { "threshold_mode", "rel", one_of("rel", "abs") },
    { "cooldown", 0, nonneg_int },
    { "min_lr", 0, min_lr_check },
    { "eps", 1e-8, I.nonneg },
  }, function(cls, opt, opts)
    local self = setmetatable({ optimizer = opt }, cls)
    I.scheduler_options(self, opt, opts, {})
    local n = #opt.param_groups
    self.min_lrs = copy_value(per_group("ReduceLROnPlateau", "min_lr", self.min_lr, n))
    self.min_lr = nil
    self.best = self.mode == "min" and math.huge or -math.huge
    self.num_bad_epochs, self.cooldown_counter, self.last_epoch = 0, 0, 0
    self._last_lr = group_lrs(opt)
    return self
  end)
  lr_scheduler.ReduceLROnPlateau = ReduceLROnPlateau

  local function is_better(self, a)
    local best, th = self.best, self.threshold
    if self.mode == "min" then
      if self.threshold_mode == "rel" then return a < best * (1 - th) end
      return a < best - th
    end
    if self.threshold_mode == "rel" then return a > best * (th + 1) end
    return a > best + th
  end

  function ReduceLROnPlateau:step(metric)
    if ember.is_tensor(metric) and metric:numel() == 1 then metric = metric:item() end
    if type(metric) ~= "number" then
      fail("ReduceLROnPlateau", "step: the metric must be a number or a one-element tensor, got %s",
        ember.is_tensor(metric) and "a tensor of " .. metric:numel() .. " elements" or show(metric))
    end
    self.last_epoch = self.last_epoch + 1
    if is_better(self, metric) then
      self.best, self.num_bad_epochs = metric, 0
    else
      self.num_bad_epochs = self.num_bad_epochs + 1
    end
    if self.cooldown_counter > 0 then
      self.cooldown_counter = self.cooldown_counter - 1
      self.num_bad_epochs = 0
    end
    if self.num_bad_epochs > self.patience then
      for gi, g in ipairs(self.optimizer.param_groups) do
        local new_lr = math.max(g.lr * self.factor, self.min_lrs[gi])
        if g.lr - new_lr > self.eps then g.lr = new_lr end
      end
      self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
    end
    self._last_lr = group_lrs(self.optimizer)
  end

  local COUNTERS = { "best", "num_bad_epochs", "cooldown_counter", "last_epoch" }

  -- the options (min_lr as the list min_lrs), the best metric and the counters
  function ReduceLROnPlateau:state_dict()
    local s = { min_lrs = copy_value(self.min_lrs), _last_lr = copy_value(self._last_lr) }
    for _, spec in ipairs(self._spec) do s[spec[1]] = self[spec[1]] end
    for _, k in ipairs(COUNTERS) do s[k] = self[k] end
    return s
  end

  function ReduceLROnPlateau:load_state_dict(s)
    local name = "ReduceLROnPlateau"
    expect_state(name, s)
    for _, k in ipairs(COUNTERS) do
      if type(s[k]) ~= "number" then
        fail(name, "load_state_dict: %s must be a number, got %s", k, show(s[k]))
      end
    end
    I.check_loaded_options(self, s)
    local msg = s.min_lrs ~= nil and min_lr_check(s.min_lrs)
    if msg then fail(name, "load_state_dict: min_lrs %s, got %s", msg, show(s.min_lrs)) end
    local n = #self.optimizer.param_groups
    local min_lrs = per_group(name, "min_lrs", s.min_lrs or self.min_lrs, n)
    for _, spec in ipairs(self._spec) do
      if s[spec[1]] ~= nil then self[spec[1]] = s[spec[1]] end
    end
    for _, k in ipairs(COUNTERS) do self[k] = s[k] end
    self.min_lrs = copy_value(min_lrs)
    self._last_lr = copy_value(s._last_lr or group_lrs(self.optimizer))
  end
  ---------------------------------------------------------------- SequentialLR
  local function is_scheduler(s)
    return type(s) == "table" and not ember.is_tensor(s) and type(s.get_last_lr) == "function"
      and s.optimizer ~= nil
  end

  -- the number of milestones at or below epoch (Python's bisect_right)
  local function passed(milestones, epoch)
    local n = 0
    while n < #milestones and milestones[n + 1] <= epoch do n = n + 1 end
    return n
  end

  -- SequentialLR(opt, {s1, s2, ...}, {m1, ...}): s1 sets the lrs until epoch
  -- m1, where s2 starts at its epoch 0, and so on
  local SequentialLR = plain_class("SequentialLR", {}, function(cls, opt, schedulers, milestones)
      local name = "SequentialLR"
      if type(opt) ~= "table" or type(opt.param_groups) ~= "table" then
        fail(name, "expected an optimizer, got %s", show(opt))
      end
      if type(schedulers) ~= "table" or ember.is_tensor(schedulers) or #schedulers == 0 then
        fail(name, "schedulers must be a non-empty list of lr schedulers, got %s", show(schedulers))
      end
      for i, s in ipairs(schedulers) do
        if not is_scheduler(s) then
          fail(name, "schedulers[%d] must be an lr scheduler, got %s", i, show(s))
        elseif getmetatable(s) == ReduceLROnPlateau then
          fail(name, "schedulers[%d] is a ReduceLROnPlateau, which steps on a metric", i)
        elseif s.optimizer ~= opt then
          fail(name, "schedulers[%d] belongs to another optimizer", i)
        end
      end
      local n = #schedulers - 1
      if type(milestones) ~= "table" or ember.is_tensor(milestones) or #milestones ~= n then
        fail(name, "milestones must list %d epoch(s), one fewer than the schedulers, got %s",
          n, show(milestones))
      end
      for i, m in ipairs(milestones) do
        if I.positive_int(m) or (i > 1 and m <= milestones[i - 1]) then
          fail(name, "milestones must be increasing positive integers (milestones[%d] is %s)", i,
            show(m))
        end
      end
      for gi, g in ipairs(opt.param_groups) do
        if g.initial_lr == nil then fail(name, "param_groups[%d] has no initial_lr", gi) end
        g.lr = g.initial_lr
      end
      -- each scheduler took a step when it was made; undo it, then restart the first
      for _, s in ipairs(schedulers) do s.last_epoch = s.last_epoch - 1 end
      schedulers[1]:step()
      return setmetatable({ optimizer = opt, _schedulers = schedulers,
        _milestones = copy_value(milestones), last_epoch = 0,
        _last_lr = schedulers[1]:get_last_lr() }, cls)
  end)
  lr_scheduler.SequentialLR = SequentialLR

  function SequentialLR:step()
    self.last_epoch = self.last_epoch + 1
    local idx = passed(self._milestones, self.last_epoch)
    local s = self._schedulers[idx + 1]
    if idx > 0 and self._milestones[idx] == self.last_epoch then s:step(0) else s:step() end
    self._last_lr = s:get_last_lr()
  end

  function SequentialLR:state_dict()
    local subs = {}
    for i, s in ipairs(self._schedulers) do subs[i] = s:state_dict() end
    return { last_epoch = self.last_epoch, _milestones = copy_value(self._milestones),
      _last_lr = copy_value(self._last_lr), _schedulers = subs }
  end

  function SequentialLR:load_state_dict(s)
    local name = "SequentialLR"
    expect_state(name, s)
    if type(s._schedulers) ~= "table" or #s._schedulers ~= #self._schedulers then
      fail(name, "load_state_dict: _schedulers must hold the state of each of the %d scheduler(s)",
        #self._schedulers)
    end
    if not finite(s.last_epoch) then
      fail(name, "load_state_dict: last_epoch must be a number, got %s", show(s.last_epoch))
    end
    for i, sub in ipairs(self._schedulers) do sub:load_state_dict(s._schedulers[i]) end
    self.last_epoch = s.last_epoch
    self._milestones = copy_value(s._milestones or self._milestones)
    self._last_lr = copy_value(s._last_lr or self._last_lr)
  end

  ---------------------------------------------------------------- ExponentialLR, MultiStepLR, PolynomialLR
  local function nonneg(v)
    if not nonneg_number(v) then return "must be a non-negative number" end
  end
  -- lr = base_lr * gamma ^ epoch
  lr_scheduler.ExponentialLR = I.sched_class("ExponentialLR", {
    { "gamma", nil, nonneg },
  }, function(self, base, epoch) return base * self.gamma ^ epoch end)

  -- a sorted copy of a list of non-negative integer epochs (repeats count
  -- twice, as PyTorch's Counter of milestones)
  local function milestone_list(v)
    if type(v) ~= "table" or ember.is_tensor(v) then return "must be a list of epochs" end
    for i = 1, #v do
      if not (finite(v[i]) and v[i] >= 0 and v[i] == floor(v[i])) then
        return "must be a list of non-negative integer epochs"
      end
    end
  end
  -- lr = base_lr * gamma ^ (the number of milestones <= epoch)
  lr_scheduler.MultiStepLR = I.sched_class("MultiStepLR", {
    { "milestones", nil, milestone_list },
    { "gamma", 0.1, nonneg },
  }, function(self, base, epoch)
    return base * self.gamma ^ passed(self._sorted, epoch)
  end, function(self)
    self.milestones = copy_value(self.milestones)
    self._sorted = copy_value(self.milestones)
    table.sort(self._sorted)
  end)
  -- the milestones of a loaded state are sorted again
  function lr_scheduler.MultiStepLR:load_state_dict(s)
    Scheduler.load_state_dict(self, s)
    self.milestones = copy_value(self.milestones)
    self._sorted = copy_value(self.milestones)
    table.sort(self._sorted)
  end

  -- lr = base_lr * (1 - min(epoch, total_iters) / total_iters) ^ power
  lr_scheduler.PolynomialLR = I.sched_class("PolynomialLR", {
    { "total_iters", 5, I.positive_int },
    { "power", 1, function(v) if not finite(v) then return "must be a number" end end },
  }, function(self, base, epoch)
    return base * (1 - min(epoch, self.total_iters) / self.total_iters) ^ self.power
  end)

  ---------------------------------------------------------------- LambdaLR, MultiplicativeLR
  -- a function, or a list of functions with one per parameter group
  local function fn_or_list(v)
    if type(v) == "function" then return end
    if type(v) == "table" and #v > 0 then
      for i = 1, #v do if type(v[i]) ~= "function" then return "must be a function or a list of functions" end end
      return
    end
    return "must be a function or a list of functions, one for each parameter group"
  end
  local function lambda_of(self, gi)
    local f = self.lr_lambda
    return type(f) == "table" and f[gi] or f
  end
  local function lambda_value(self, gi, epoch)
    local v = lambda_of(self, gi)(epoch)
    if not finite(v) then
      fail(self._name, "lr_lambda(%d) for group %d returned %s; expected a finite number", epoch, gi, show(v))
    end
    return v
  end
  local function lambda_setup(self, opt)
    per_group(self._name, "lr_lambda", self.lr_lambda, #opt.param_groups)
  end
  -- the state without the functions (PyTorch leaves lambdas out too): a
  -- loaded state keeps the scheduler's own functions
  local function lambda_state(self)
    local s = Scheduler.state_dict(self)
    s.lr_lambda = nil
    return s
  end

  -- lr = base_lr * lr_lambda(epoch)
  lr_scheduler.LambdaLR = I.sched_class("LambdaLR", {
    { "lr_lambda", nil, fn_or_list },
  }, function(self, base, epoch, gi)
    return base * lambda_value(self, gi, epoch)
  end, lambda_setup)
  lr_scheduler.LambdaLR.state_dict = lambda_state

  -- lr = base_lr * lr_lambda(1) * ... * lr_lambda(epoch): PyTorch's
  -- lr <- lr * lr_lambda(epoch) from epoch 1 on, as a product kept per group
  -- (recomputed from epoch 1 when step jumps)
  lr_scheduler.MultiplicativeLR = I.sched_class("MultiplicativeLR", {
    { "lr_lambda", nil, fn_or_list },
  }, function(self, base, epoch, gi)
    self._prod = self._prod or {}
    local p = self._prod[gi]
    if p == nil or p.epoch > epoch then p = { epoch = 0, value = 1 } end
    for e = p.epoch + 1, epoch do p.value = p.value * lambda_value(self, gi, e) end
    p.epoch = epoch
    self._prod[gi] = p
    return base * p.value
  end, lambda_setup)
  lr_scheduler.MultiplicativeLR.state_dict = lambda_state

  ---------------------------------------------------------------- CyclicLR
  -- Smith's cyclical lr: from base_lr up to max_lr in step_size_up
  -- iterations and back in step_size_down (default the same), scaled per
  -- cycle ("triangular": 1, "triangular2": halved each cycle) or per
  -- iteration ("exp_range": gamma ^ iteration); momentum moves the other way
  -- between max_momentum and base_momentum. As PyTorch's, it sets each
  -- group's lr to base_lr (and momentum to base_momentum) at the start.
  local CYCLIC_SCALE = {
    triangular = { function() return 1 end, "cycle" },
    triangular2 = { function(_, x) return 1 / 2 ^ (x - 1) end, "cycle" },
    exp_range = { function(self, x) return self.gamma ^ x end, "iterations" },
  }
  local function cyclic_factor(self, epoch)
    local up = self.step_size_up
    local total = up + (self.step_size_down or up)
    local ratio = up / total
    local cycle = floor(1 + epoch / total)
    local x = 1 + epoch / total - cycle
    local f = x <= ratio and x / ratio or (x - 1) / (ratio - 1)
    local scale, by = CYCLIC_SCALE[self.mode][1], CYCLIC_SCALE[self.mode][2]
    if self.scale_fn then scale, by = function(_, v) return self.scale_fn(v) end, self.scale_mode end
    return f, scale(self, by == "cycle" and cycle or epoch)
  end
  local CyclicLR = I.sched_class("CyclicLR", {
    { "base_lr", nil, number_or_list(nonneg_number, "a non-negative number") },
    { "max_lr", nil, number_or_list(nonneg_number, "a non-negative number") },
    { "step_size_up", 2000, I.positive_int },
    { "step_size_down", nil, optional_positive_int },
    { "mode", "triangular", one_of("triangular", "triangular2", "exp_range") },
    { "gamma", 1, positive },
    { "scale_fn", nil, function(v) if v ~= nil and type(v) ~= "function" then return "must be a function" end end },
    { "scale_mode", "cycle", one_of("cycle", "iterations") },
    { "cycle_momentum", true, I.boolean },
    { "base_momentum", 0.8, number_or_list(finite, "a number") },
    { "max_momentum", 0.9, number_or_list(finite, "a number") },
  }, function(self, _, epoch, gi)
    local f, scale = cyclic_factor(self, epoch)
    local lo = pick(self.base_lr, gi)
    return lo + (pick(self.max_lr, gi) - lo) * f * scale
  end, function(self, opt, last_epoch)
    local name, n = "CyclicLR", #opt.param_groups
    local lrs = per_group(name, "base_lr", self.base_lr, n)
    per_group(name, "max_lr", self.max_lr, n)
    if self.cycle_momentum then
      if opt.defaults.momentum == nil then
        fail(name, "cycle_momentum needs an optimizer with a momentum option (%s has none); "
          .. "pass cycle_momentum = false", tostring((getmetatable(opt) or {})._name))
      end
      local ms = per_group(name, "base_momentum", self.base_momentum, n)
      per_group(name, "max_momentum", self.max_momentum, n)
      if last_epoch == -1 then
        for gi, g in ipairs(opt.param_groups) do g.momentum = ms[gi] end
      end
    end
    if last_epoch == -1 then
      for gi, g in ipairs(opt.param_groups) do g.lr, g.initial_lr = lrs[gi], lrs[gi] end
    end
  end)
  lr_scheduler.CyclicLR = CyclicLR
  CyclicLR.state_dict = function(self)
    local s = Scheduler.state_dict(self)
    s.scale_fn = nil
    return s
  end

  -- as Scheduler:step, and sets each group's momentum when cycle_momentum
  function CyclicLR:step(epoch)
    Scheduler.step(self, epoch)
    if self.cycle_momentum then
      local f, scale = cyclic_factor(self, self.last_epoch)
      for gi, g in ipairs(self.optimizer.param_groups) do
        local hi = pick(self.max_momentum, gi)
        g.momentum = hi - (hi - pick(self.base_momentum, gi)) * f * scale
      end
    end
  end
end
