-- ember.jit: trace a function of tensors (a whole training step, or a
-- module's forward) once into a plan, then replay it in C with no return to
-- Lua per op (docs/plans.md).
--
--   local plan = ember.jit.trace(step, { x0, y0 })
--   local loss = plan(x, y)            -- the same results, bit for bit, as step(x, y)
--
-- The trace runs fn once, eagerly, and core/src/plan/trace.c records every
-- op it runs. What Lua does with numbers is fixed at trace time: the plan
-- keeps the numbers the step was traced with. Lua-side state a replay must
-- still advance is carried here: the .grad fields the step leaves set (as
-- extra outputs of the plan), Adam's step counts (the plan's counters, set
-- from the optimizer's state before each run) and the optimizer's
-- hyperparameters (checked unchanged before each run).
local ffi = require("ffi")
local ember = require("ember")
local errors = require("ember.errors")

local C = ember._C
local wrap, is_tensor = ember._wrap, ember.is_tensor
local check = errors.check
local select, type, unpack, pairs, ipairs, rawget, rawset = select, type, unpack, pairs, ipairs, rawget, rawset

local jit = {}

local Plan = {}
Plan.__index = Plan
jit.Plan = Plan
local PlanRun = {}
PlanRun.__index = PlanRun
jit.PlanRun = PlanRun

local function fail(op, msg, ...) errors.fail("jit." .. op, msg, ...) end

---------------------------------------------------------------- while tracing
-- The open trace's Lua side: { counters = {adam states}, groups = {...} }.
local tracing = nil

-- optim.lua: an Adam update (its fused entry) of parameter p whose step
-- count the plan must advance; the entries are numbered in the order of
-- these calls.
function ember._jit_counter(st, p)
  if tracing then
    tracing.counters[#tracing.counters + 1] = st
    tracing.params[#tracing.params + 1] = p or false
  end
end
-- optim/common.lua: the state of parameter p whose step count (a Lua number
-- the update does not compute with) advances by one with each run of the plan.
function ember._jit_advance(st, p)
  if tracing then
    tracing.advance[#tracing.advance + 1] = st
    tracing.advance_params[#tracing.advance_params + 1] = p or false
  end
end
-- optim.lua, optim/common.lua: a parameter group whose numbers the trace
-- bakes in: kept as {group, key, index or false, value} for the numbers,
-- booleans and lists of numbers (betas) it holds, compared before each run
-- (numeric loops: LuaJIT compiles them, where pairs would stop the call's
-- trace)
function ember._jit_group(group)
  if not tracing or tracing.seen[group] then return end
  tracing.seen[group] = true
  local keys = {}
  for k, v in pairs(group) do
    if k ~= "params" and (type(v) == "number" or type(v) == "boolean" or type(v) == "table") then keys[#keys + 1] = k end
  end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = group[k]
    if type(v) == "table" then
      for i = 1, #v do tracing.groups[#tracing.groups + 1] = { group, k, i, v[i] } end
    else
      tracing.groups[#tracing.groups + 1] = { group, k, false, v }
    end
  end
end
-- Raises inside a trace for a step the plan could not replay faithfully.
function ember._jit_refuse(what, why)
  if tracing then errors.raise(("ember.jit.trace: %s cannot be traced: %s"):format(what, why)) end
end
function ember._jit_tracing() return tracing ~= nil end

---------------------------------------------------------------- trace
local function collect(n, ...)
  local t = { n = n }
  for i = 1, n do t[i] = select(i, ...) end
  return t
end

local function tensor_list(op, what, list)
  if type(list) ~= "table" or is_tensor(list) then
    fail(op, "%s must be a list of tensors, got %s", what, errors.show(list))
  end
  local n = table.maxn(list)
  for i = 1, n do
    if not is_tensor(list[i]) then fail(op, "%s: entry %d is %s, not a tensor", what, i, errors.show(list[i])) end
  end
  return n
end

-- the results of pcall(fn, ...): ok, then fn's results or the error
local function results(ok, ...)
  return ok, collect(select("#", ...), ...)
end

-- the Lua object of a plan: the C plan, its counts, and what the Lua side
-- sets and checks around each run
local function new_plan(p, nin, nout, set, unset, counters, groups)
  return setmetatable({
    _p = ffi.gc(p, C.ember_plan_free), _nin = nin, _nout = nout, _set = set, _unset = unset, _nset = #set,
    _counters = counters, _counter_ptr = C.ember_plan_counters(p, nil), _groups = groups, _advance = {}, _states = {},
    _in = ffi.new("ember_tensor *[?]", nin + 1), _out = ffi.new("ember_tensor *[?]", nout + #set + 1),
  }, Plan)
end

-- jit.trace(fn, example_inputs, opts): opts.train = false traces a forward
-- alone: under no_grad, a module in eval mode.
function jit.trace(fn, inputs, opts)
  local mt = type(fn) == "table" and getmetatable(fn)
  if type(fn) ~= "function" and not (mt and mt.__call) then
    fail("trace", "fn must be a function or a module, got %s", errors.show(fn))
  end
  local nin = tensor_list("trace", "example_inputs", inputs)
  errors.known_options("jit.trace", opts, { "train" })
  local train = true
  if opts ~= nil and opts.train ~= nil then
    errors.boolean("jit.trace", "opts.train", opts.train)
    train = opts.train
  end
  if tracing then fail("trace", "a trace is already open (traces do not nest)") end
  local buf = ffi.new("ember_tensor *[?]", nin + 1)
  for i = 1, nin do buf[i - 1] = inputs[i]._c end
  check(C.ember_trace_begin(nin, buf))
  local state = { counters = {}, params = {}, groups = {}, seen = {}, advance = {}, advance_params = {} }
  tracing = state
  local grads = {}
  ember._jit_grads = grads
  local module_mode = type(fn) == "table" and fn.training
  if not train and module_mode then fn:eval() end
  local ok, out
  if train then ok, out = results(pcall(fn, unpack(inputs, 1, nin)))
  else ok, out = results(pcall(ember.no_grad, function() return fn(unpack(inputs, 1, nin)) end)) end
  tracing, ember._jit_grads = nil, nil
  if not train and module_mode then fn:train() end
  if not ok then
    C.ember_trace_abort()
    error(out[1], 0)
  end
  for i = 1, out.n do
    if not is_tensor(out[i]) then
      C.ember_trace_abort()
      fail("trace", "fn's result %d is %s; a traced function returns tensors", i, errors.show(out[i]))
    end
  end
  -- the .grad fields the step left set are outputs too; a replay sets them
  -- (and clears the ones it left nil)
  local set, unset, nout = {}, {}, out.n
  for t in pairs(grads) do
    if rawget(t, "_grad") ~= nil then set[#set + 1] = t else unset[#unset + 1] = t end
  end
  local nset = #set
  local obuf = ffi.new("ember_tensor *[?]", nout + nset + 1)
  for i = 1, nout do obuf[i - 1] = out[i]._c end
  for i, t in ipairs(set) do obuf[nout + i - 1] = rawget(t, "_grad")._c end
  local pp = ffi.new("ember_plan *[1]")
  local rc = C.ember_trace_end(nout + nset, obuf, pp)
  if rc < 0 then check(rc) end
  local plan = new_plan(pp[0], nin, nout, set, unset, state.counters, state.groups)
  plan._advance = state.advance
  plan._states = {}   -- {state, parameter} of each optimizer update, for the names of the state in a file
  for k, st in ipairs(state.counters) do plan._states[#plan._states + 1] = { st, state.params[k] } end
  for k, st in ipairs(state.advance) do plan._states[#plan._states + 1] = { st, state.advance_params[k] } end
  return plan
end

-- ember.jit.load(path): a plan plan:save wrote
function jit.load(path)
  if type(path) ~= "string" then fail("load", "path must be a string, got %s", errors.show(path)) end
  local pp = ffi.new("ember_plan *[1]")
  check(C.ember_plan_load(path, pp))
  local s = ffi.new("ember_plan_stats_t")
  C.ember_plan_stats(pp[0], s)
  return new_plan(pp[0], tonumber(s.inputs), tonumber(s.outputs), {}, {}, {}, {})
end

-- plan:save(path, opts): one safetensors file (docs/plans.md, "The file");
-- opts.names: {name = tensor} (a module's state_dict()) naming the plan's
-- live tensors in the file (the others are w<slot>); an optimizer's state
-- tensor st[key] of a parameter named N is named N.key (N.exp_avg,
-- N.square_avg, ...) unless opts.names names it, and each Adam update's
-- step count is saved
function Plan:save(path, opts)
  if type(path) ~= "string" then fail("Plan:save", "path must be a string, got %s", errors.show(path)) end
  local names = errors.options("jit.Plan:save", opts, { names = true }).names
  if names ~= nil and type(names) ~= "table" then
    fail("Plan:save", "opts.names must be a table of name = tensor, got %s", errors.show(names))
  end
  if self._nset > 0 then
    fail("Plan:save", "a plan that sets .grad fields cannot be saved: a saved plan holds a forward, or a training "
      .. "step whose gradients are cleared (zero_grad)")
  end
  if names then
    local keys, by_memory = {}, {}
    for k in pairs(names) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do
      local t = names[k]
      if type(k) ~= "string" or not is_tensor(t) then
        fail("Plan:save", "opts.names: entry %s = %s is not a name = tensor", errors.show(k), errors.show(t))
      end
      check(C.ember_plan_name(self._p, t._c, k))
      by_memory[tonumber(ffi.cast("intptr_t", t:data_ptr()))] = k   -- a state_dict's tensors are detached headers
    end
    for _, sp in ipairs(self._states) do   -- the optimizer's state of a named parameter, by its name
      local pname = sp[2] and by_memory[tonumber(ffi.cast("intptr_t", sp[2]:data_ptr()))]
      local keys = {}
      for key, t in pairs(pname and sp[1] or {}) do
        if is_tensor(t) and names[pname .. "." .. key] == nil then keys[#keys + 1] = key end
      end
      table.sort(keys)
      for _, key in ipairs(keys) do check(C.ember_plan_name(self._p, sp[1][key]._c, pname .. "." .. key)) end
    end
  end
  local cp, counters = self._counter_ptr, self._counters
  for k = 1, #counters do cp[k - 1] = counters[k].step + 1 end   -- the step the next run takes
  check(C.ember_plan_save(self._p, path))
end

-- plan:tensor(name): the plan's tensor of that name (a loaded plan's: as the
-- file names it), the one a training step's runs update in place
function Plan:tensor(name)
  if type(name) ~= "string" then fail("Plan:tensor", "name must be a string, got %s", errors.show(name)) end
  local out = ffi.new("ember_tensor *[1]")
  check(C.ember_plan_tensor(self._p, name, out))
  return wrap(out[0])
end

---------------------------------------------------------------- replay
-- Checks the inputs and what Lua holds for the plan, sets the step counts.
local function prepare(self, what, ...)
  local n = select("#", ...)
  if n ~= self._nin then fail(what, "the plan takes %d input%s, got %d", self._nin, self._nin == 1 and "" or "s", n) end
  local buf = self._in
  for i = 1, n do
    local x = select(i, ...)
    if not is_tensor(x) then fail(what, "input %d is %s, not a tensor", i, errors.show(x)) end
    buf[i - 1] = x._c
  end
  local groups = self._groups
  for i = 1, #groups do
    local g = groups[i]
    local now, idx = g[1][g[2]], g[3]
    if idx then now = type(now) == "table" and now[idx] or nil end
    if now ~= g[4] then
      local key = idx and ("%s[%d]"):format(g[2], idx) or g[2]
      fail(what, "the optimizer's %s is %s now, but the plan was traced with %s (a plan keeps the numbers of its "
        .. "trace: trace the step again after changing them)", key, errors.show(now), errors.show(g[4]))
    end
  end
  local cp, counters = self._counter_ptr, self._counters
  for k = 1, #counters do cp[k - 1] = counters[k].step + 1 end
end

-- the outputs of a completed run: fn's results; the .grad fields
local function deliver(self)
  local out, nout = self._out, self._nout
  local counters, set, unset, advance = self._counters, self._set, self._unset, self._advance
  for k = 1, #counters do counters[k].step = counters[k].step + 1 end
  for k = 1, #advance do advance[k].step = advance[k].step + 1 end
  for i = 1, #set do rawset(set[i], "_grad", wrap(out[nout + i - 1])) end
  for i = 1, #unset do rawset(unset[i], "_grad", nil) end
  if nout == 1 then return wrap(out[0]) end
  local res = {}
  for k = 1, nout do res[k] = wrap(out[k - 1]) end
  return unpack(res, 1, nout)
end

Plan.__call = function(self, ...)
  if self._run then fail("plan", "a run of this plan (plan:start) is still open; finish or cancel it first") end
  prepare(self, "plan", ...)
  check(C.ember_plan_run(self._p, self._in, self._nin, self._out, self._nout + self._nset))
  return deliver(self)
end

-- plan:stats(): {ops =, fused =, patterns =, removed =, hoisted =, arena_bytes =, peak_bytes =, inputs =, outputs =}
function Plan:stats()
  local s = ffi.new("ember_plan_stats_t")
  C.ember_plan_stats(self._p, s)
  return { ops = tonumber(s.ops), fused = tonumber(s.fused), patterns = tonumber(s.patterns), removed = tonumber(s.removed),
    hoisted = tonumber(s.hoisted), arena_bytes = tonumber(s.arena_bytes), peak_bytes = tonumber(s.peak_bytes), inputs = tonumber(s.inputs),
    outputs = self._nout }
end

---------------------------------------------------------------- budgeted replay
-- plan:start(...): the same replay in slices for a host's frame loop; the
-- run holds its inputs until it ends.
function Plan:start(...)
  if self._run then fail("Plan:start", "a run of this plan is still open; finish or cancel it first") end
  prepare(self, "Plan:start", ...)
  check(C.ember_plan_start(self._p, self._in, self._nin))
  local run = setmetatable({ _plan = self, _inputs = { ... }, _done = false }, PlanRun)
  self._run = run
  return run
end

-- run:step(seconds): runs ops for about `seconds` (at least one; past the
-- budget by at most one op); true once the plan has run to the end.
function PlanRun:step(seconds)
  if type(seconds) ~= "number" or seconds ~= seconds or seconds < 0 then
    fail("PlanRun:step", "seconds must be a number >= 0, got %s", errors.show(seconds))
  end
  local plan = self._plan
  if plan._run ~= self then fail("PlanRun:step", "the run has ended") end
  if self._done then return true end
  local done = ffi.new("int[1]")
  local rc = C.ember_plan_step(plan._p, seconds, done)
  if rc < 0 then
    plan._run = nil
    check(rc)
  end
  self._done = done[0] ~= 0
  return self._done
end

-- run:result(): the plan's results, once step has returned true
function PlanRun:result()
  local plan = self._plan
  if self._results then return unpack(self._results, 1, plan._nout) end
  if plan._run ~= self then fail("PlanRun:result", "the run was cancelled or failed") end
  if not self._done then fail("PlanRun:result", "the run is not complete: step it until run:step returns true") end
  check(C.ember_plan_result(plan._p, plan._out, plan._nout + plan._nset))
  plan._run = nil
  self._results = { deliver(plan) }
  return unpack(self._results, 1, plan._nout)
end

-- run:cancel(): abandons the run; what it wrote in place stays written
function PlanRun:cancel()
  local plan = self._plan
  if plan._run == self then
    C.ember_plan_cancel(plan._p)
    plan._run = nil
  end
end

return jit
