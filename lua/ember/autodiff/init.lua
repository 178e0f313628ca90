-- ember.autodiff: the GradManager (MegEngine's contract), Lua-defined grad
-- rules in the C rule registry (Function, register_grad_rule: autodiff/rules.lua), no_grad and
-- the functional helpers. The tape and the backward sweep live in C
-- (core/src/autograd.c); backward is a pull loop driven from here, so C never
-- calls Lua and no FFI callback is created.
local ffi = require("ffi")
local ember = require("ember")

local C = ember._C
local errors = require("ember.errors")
local wrap_borrowed, check = ember._wrap_borrowed, errors.check
local is_tensor = ember.is_tensor
local ffi_new, ffi_string = ffi.new, ffi.string
local type, select, error, pcall, setmetatable, rawequal = type, select, error, pcall,
  setmetatable, rawequal

local autodiff = {}
local function pack(...) return { n = select("#", ...), ... } end
local DONE = C.EMBER_DONE
local REQ_LEAF = C.EMBER_REQ_LEAF
autodiff.FALLBACK = setmetatable({}, { __tostring = function() return "ember.autodiff.FALLBACK" end })

---------------------------------------------------------------- grad mode
function ember.is_grad_enabled() return C.ember_is_grad_enabled() ~= 0 end

local function with_grad_mode(on, fn, ...)
  if type(fn) ~= "function" then
    errors.raise(("ember.%s: expected a function, got %s"):format(on == 0 and "no_grad" or "enable_grad", type(fn)))
  end
  local prev = C.ember_is_grad_enabled()
  C.ember_set_grad_enabled(on)
  local res = pack(pcall(fn, ...))
  C.ember_set_grad_enabled(prev)
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, res.n)
end
function ember.no_grad(fn, ...) return with_grad_mode(0, fn, ...) end
function ember.enable_grad(fn, ...) return with_grad_mode(1, fn, ...) end
function ember.set_grad_enabled(on) C.ember_set_grad_enabled(on and 1 or 0) end
autodiff.no_grad = ember.no_grad

-- the rule registry, Function and register_grad_rule (autodiff/rules.lua);
-- run_node answers the sweep's NODE requests
local run_node = require("ember.autodiff.rules")(ember, autodiff)
local drain_ctx = autodiff._drain_ctx
local shape_str, same_shape = errors.shape, errors.same_shape

---------------------------------------------------------------- GradManager
local GradManager = {}
GradManager.__index = GradManager
autodiff.GradManager = setmetatable({}, {
  __call = function(_) return GradManager.new() end,   -- takes no arguments (an extra one raises)
  __index = GradManager,
})

local live_key = ffi_new("int[1]")
-- GradManager.new() or GradManager:new() (the class as receiver)
function GradManager.new(cls)
  if cls ~= nil and cls ~= autodiff.GradManager and cls ~= GradManager then
    errors.raise(("ember.autodiff.GradManager.new: takes no arguments, got %s"):format(errors.show(cls)))
  end
  if C.ember_key_new(0, live_key) < 0 then
    -- every key is taken: managers dropped but not yet collected still hold
    -- theirs (a key goes back in its finaliser), so collect and try again
    collectgarbage("collect")
    collectgarbage("collect")
    check(C.ember_key_new(0, live_key))
  end
  local key = live_key[0]
  local self = setmetatable({
    _key = key,
    -- tensor -> { seq =, callbacks = {...} }; weak keys: attached tensors are held weakly
    _attached = setmetatable({}, { __mode = "k" }),
    _seq = 0,
    _after = {},
    _flush = {},
  }, GradManager)
  -- frees the C key when the manager is collected (a finaliser, not an FFI callback)
  self._keyref = ffi.gc(ffi_new("int[1]", key), function(p) C.ember_key_free(p[0]) end)
  return self
end

local function as_list(x)
  if is_tensor(x) then return { x } end
  if type(x) == "table" then return x end
  return nil
end

-- What must not happen to a manager while its backward runs (from a
-- callback, a hook or a rule): an error, and the manager stays usable.
local function not_running(self, what)
  if self._running then
    errors.raise(("ember.GradManager.%s: not allowed while this manager's backward is running "
      .. "(from a callback, a hook or a grad rule, or a backward_steps run not yet finished)"):format(what))
  end
end

-- a callback is a function or a callable object (a table whose metatable has
-- __call); an object with an on_attach method is told of every manager it is
-- attached to (ember.distributed's bucketed all-reduce registers its flush)
local function callable(cb)
  if type(cb) == "function" then return true end
  local mt = type(cb) == "table" and getmetatable(cb)
  return mt and type(mt.__call) == "function" or false
end

function GradManager:attach(tensors, callbacks)
  not_running(self, "attach")
  local list = as_list(tensors)
  if list == nil then errors.raise("ember.GradManager.attach: expected a tensor or a list of tensors, got " .. type(tensors)) end
  local cbs = {}
  if callable(callbacks) then
    cbs = { callbacks }
  elseif type(callbacks) == "table" then
    for i, cb in ipairs(callbacks) do
      if not callable(cb) then errors.raise("ember.GradManager.attach: callback " .. i .. " is not a function") end
      cbs[i] = cb
    end
  elseif callbacks ~= nil then
    errors.raise("ember.GradManager.attach: callbacks must be a function or a list of functions")
  end
  for i, t in ipairs(list) do
    if not is_tensor(t) then errors.raise("ember.GradManager.attach: entry " .. i .. " is not a tensor") end
    local dt = t.dtype
    if not (dt == "float32" or dt == "float64" or dt == "float16" or dt == "bfloat16") then
      errors.raise("ember.GradManager.attach: only floating point tensors can be attached, got " .. dt)
    end
  end
  for _, t in ipairs(list) do
    local rec = self._attached[t]
    if rec == nil then
      self._seq = self._seq + 1
      rec = { seq = self._seq, callbacks = {} }
      self._attached[t] = rec
    end
    for _, cb in ipairs(cbs) do rec.callbacks[#rec.callbacks + 1] = cb end
    self._order = nil
  end
  for _, cb in ipairs(cbs) do
    if type(cb) == "table" and type(cb.on_attach) == "function" then cb:on_attach(self) end
  end
  for _, t in ipairs(list) do
    if C.ember_key_is_recording(self._key) ~= 0 then
      check(C.ember_key_track(self._key, t._c))
    end
  end
  return self
end

local function by_seq(a, b) return a[2] < b[2] end

function GradManager:attached_tensors()
  local list = {}
  for t, rec in pairs(self._attached) do list[#list + 1] = { t, rec.seq } end
  table.sort(list, by_seq)
  for i = 1, #list do list[i] = list[i][1] end
  return list
end

-- attached tensors in attach order, cached between attach calls in a weak
-- list (a collected tensor leaves a hole that is skipped)
local function attach_order(self)
  local order = self._order
  if order == nil then
    local list = self:attached_tensors()
    order = setmetatable({ n = #list }, { __mode = "v" })
    for i = 1, #list do order[i] = list[i] end
    self._order = order
  end
  return order
end

function GradManager:is_attached(t) return self._attached[t] ~= nil end
function GradManager:is_recording() return C.ember_key_is_recording(self._key) ~= 0 end

local slicer = ember._slicer   -- a sliced step (ember.frame) being resumed

function GradManager:record()
  not_running(self, "record")
  check(C.ember_key_record(self._key))
  if slicer.active then slicer.recorded(self) end   -- released if the step fails or is cancelled
  local order = attach_order(self)
  for i = 1, order.n do
    local t = order[i]
    local rc = t ~= nil and C.ember_key_track(self._key, t._c) or 0
    if rc < 0 then
      C.ember_key_release(self._key)
      check(rc)
    end
  end
  return self
end

function GradManager:release()
  not_running(self, "release")
  C.ember_key_release(self._key)
  drain_ctx()
  return self
end

-- fn(ok) runs when the backward sweep is over, before .grad is written and
-- before backward returns (ok = false when the sweep failed; its errors are
-- then swallowed): the flush point of callbacks that defer work, such as
-- ember.distributed's bucketed all-reduce. See docs/autodiff.md.
function GradManager:register_before_backward_returns(fn)
  if type(fn) ~= "function" then errors.raise("ember.GradManager.register_before_backward_returns: expected a function") end
  self._flush[#self._flush + 1] = fn
  return self
end

function GradManager:register_after_backward_callback(fn)
  if type(fn) ~= "function" then errors.raise("ember.GradManager.register_after_backward_callback: expected a function") end
  self._after[#self._after + 1] = fn
  return self
end

-- fn(...) between m:record() and m:release() (a manager or a group); its
-- error is raised after the release
local function recorded(m, fn, ...)
  m:record()
  local res = pack(pcall(fn, ...))
  m:release()
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, res.n)
end

function GradManager:scope(fn, ...)
  if getmetatable(self) ~= GradManager then errors.raise("ember.GradManager.scope: call it as gm:scope(fn)") end
  if type(fn) ~= "function" then errors.raise("ember.GradManager.scope: expected a function, got " .. type(fn)) end
  return recorded(self, fn, ...)
end

local req = ffi_new("ember_backward_req")
local run_out = ffi_new("ember_backward_run *[1]")
local ys_buf = ffi_new("ember_tensor *[64]")
local dys_buf = ffi_new("ember_tensor *[64]")

-- leaf hooks of the graph toolbox (ember.autodiff.graph fills these in)
autodiff._tensor_hooks = setmetatable({}, { __mode = "k" })
autodiff._post_hooks = setmetatable({}, { __mode = "k" })

local live_by_addr = function(p)
  -- the Lua wrapper of a C tensor, if it still has one
  return ember._lookup(p)
end

-- A gradient a user hands in (a callback's or a hook's result, an
-- assignment to .grad) must fit its tensor.
local function describe(t) return shape_str(t:shape()) .. " " .. t.dtype .. " on " .. t.device end
local function check_user_grad(t, g, who)
  if not is_tensor(g) then errors.raise(("ember.%s returned a non-tensor (%s) for a tensor of shape %s")
    :format(who, type(g), shape_str(t:shape()))) end
  if not same_shape(g, t:shape()) or g.dtype ~= t.dtype or g.device ~= t.device then
    errors.raise(("ember.%s returned a gradient %s for a tensor %s"):format(who, describe(g), describe(t)))
  end
  return g
end
autodiff._check_user_grad = check_user_grad

-- An attached tensor's gradient is complete: its tensor hooks, its
-- AccumulateGrad node's prehooks, the callbacks, the node's hooks; the
-- accumulation into .grad waits for the end of backward.
local function run_leaf(self, r, pending)
  local t = live_by_addr(r.tensor)
  if t == nil then return end
  local rec = self._attached[t]
  if rec == nil then return end
  local g = wrap_borrowed(r.grads[0])
  local hooks = autodiff._tensor_hooks[t]
  if hooks then
    for _, h in ipairs(hooks) do
      if h.fn then
        local out = h.fn(g)
        if out ~= nil then g = check_user_grad(t, out, "autodiff: a tensor hook") end
      end
    end
  end
  local G, node = r.rule_id ~= 0 and autodiff._graph or nil, r.node
  if G then
    local grads = G.before_node(node, "AccumulateGrad", { g }, 1)
    g = grads[1] ~= nil and check_user_grad(t, grads[1], "autodiff: a prehook of AccumulateGrad") or g
  end
  for _, cb in ipairs(rec.callbacks) do
    local out = cb(t, g)
    if out ~= nil then g = check_user_grad(t, out, "GradManager.backward: a callback") end
  end
  if G then G.after_node(node, "AccumulateGrad", {}, { g }, 0) end
  local old = rawget(t, "_grad")
  local n = #pending
  pending[n + 1] = t
  pending[n + 2] = g
  pending[n + 3] = old ~= nil and C.ember_is_tracked(old._c) ~= 0   -- while this recording is live
end

local PAUSED = C.EMBER_PAUSED

-- Runs backward until it is done (true) or, with a deadline on ember_clock(),
-- until the deadline has passed after at least one node (false).
local function drive(self, run, pending, deadline)
  while true do
    local rc
    if deadline then rc = C.ember_backward_step_until(run, req, deadline)
    else rc = C.ember_backward_step(run, req) end
    if rc == DONE then return true end
    if rc == PAUSED then return false end
    check(rc)
    if req.kind == REQ_LEAF then
      run_leaf(self, req, pending)
    else
      run_node(run, req)
    end
    if deadline and C.ember_clock() >= deadline then return false end
  end
end

-- drive under pcall, with a sliced step's yield points held: a rule's ops
-- must not pause the run between a request and its answer
local function drive_held(self, run, pending, deadline)
  slicer.hold = slicer.hold + 1
  local ok, done = pcall(drive, self, run, pending, deadline)
  slicer.hold = slicer.hold - 1
  return ok, done
end

-- old_tracked: whether a recording (the one that just ran backward included)
-- tracked the old .grad when backward ended
local function accumulate(t, g, dys, old_tracked)
  local old = rawget(t, "_grad")
  if old == nil then
    for _, d in ipairs(dys) do
      if rawequal(d, g) then g = g:clone() end
    end
    t.grad = g
  elseif old_tracked or C.ember_is_tracked(old._c) ~= 0 or C.ember_is_tracked(g._c) ~= 0 then
    t.grad = old + g          -- out of place: a recording uses the old .grad
  else
    old:add_(g)
  end
end

-- Checks y and dy and starts a run of this manager's backward (what backward
-- and backward_steps share); errors are raised at the user's call.
-- (a closure made in start would keep LuaJIT from compiling every backward)
local function bad_call(what, msg) errors.raise("ember.GradManager." .. what .. ": " .. msg) end

local function start(self, what, y, dy)
  not_running(self, what)
  local ys = as_list(y)
  if ys == nil or #ys == 0 then bad_call(what, "expected a tensor or a list of tensors as y") end
  local dys = dy == nil and {} or as_list(dy)
  if dys == nil then bad_call(what, "dy must be a tensor, a list or nil") end
  if dy ~= nil and table.maxn(dys) ~= #ys then
    bad_call(what, ("%d dy for %d y; give one dy per y (or none)"):format(table.maxn(dys), #ys))
  end
  if #ys > 64 then bad_call(what, ("at most 64 y, got %d"):format(#ys)) end
  -- the C core checks what y and dy hold (record()ed, scalar y, dy's shape)
  for i, yi in ipairs(ys) do
    if not is_tensor(yi) then bad_call(what, "y " .. i .. " is not a tensor") end
    local d = dys[i]
    if d ~= nil and not is_tensor(d) then bad_call(what, "dy " .. i .. " is not a tensor") end
    ys_buf[i - 1] = yi._c
    dys_buf[i - 1] = d and d._c or nil
  end
  -- A y this recording does not track was computed from none of the attached
  -- tensors (a module made after attach, a loss computed under no_grad or
  -- before record): every .grad would stay as it was without a word. Like
  -- PyTorch's "element 0 of tensors does not require grad and does not have
  -- a grad_fn", it raises (and, like backward's other failures, ends the
  -- recording). The Jacobian tools and gradcheck set _unreached_ok: a
  -- constant output has zero derivatives there, as in torch.autograd.functional.
  if not self._unreached_ok and C.ember_key_is_recording(self._key) ~= 0 then
    local reached = false
    for i = 1, #ys do reached = reached or C.ember_key_tracks(self._key, ys_buf[i - 1]) ~= 0 end
    if not reached then
      local shapes = {}
      for i, yi in ipairs(ys) do shapes[i] = "{" .. table.concat(yi:shape(), ", ") .. "}" end
      local n = #self:attached_tensors()
      self:release()
      bad_call(what, ("no attached tensor is reachable from %s of shape %s: it was not computed from any "
        .. "of the %d tensor%s attached to this manager during this recording (a module made after attach, "
        .. "or a loss computed under no_grad or before record?), so no gradient would reach .grad")
        :format(#ys == 1 and "y" or "any y", table.concat(shapes, ", "), n, n == 1 and "" or "s"))
    end
  end
  local rc = C.ember_backward_begin(self._key, #ys, ys_buf, dys_buf, run_out)
  if rc < 0 then
    local msg = ffi_string(C.ember_last_error()):gsub("^GradManager%.backward:", "GradManager." .. what .. ":")
    -- a bad dy leaves the recording for a second try; any other failure ends it
    if run_out[0] ~= nil then C.ember_backward_end(run_out[0])
    elseif rc ~= C.EMBER_ERR_SHAPE then self:release() end
    errors.raise("ember." .. msg)
  end
  local G = autodiff._graph
  if G then G.backward_begin() end
  self._running = true
  return { gm = self, run = run_out[0], pending = {}, dys = dys, ys = ys }
end

-- Ends a run: on success the .grad updates, post-accumulate hooks and
-- after-backward callbacks; on failure (or cancel) every .grad as it was.
local function finish(st, ok, err)
  local self = st.gm
  st.closed = true
  self._running = false
  C.ember_backward_end(st.run)
  drain_ctx()
  local G = autodiff._graph
  if G then G.backward_end(ok) end
  if not ok then
    for _, fn in ipairs(self._flush) do pcall(fn, false) end
    if err == nil then return end   -- cancelled
    error(err, 0)   -- raised at the user's line already (ember.errors)
  end
  for _, fn in ipairs(self._flush) do fn(true) end
  local pending = st.pending
  for i = 1, #pending, 3 do accumulate(pending[i], pending[i + 1], st.dys, pending[i + 2]) end
  local post = autodiff._post_hooks
  for i = 1, #pending, 3 do
    local hooks = post[pending[i]]
    if hooks then for _, h in ipairs(hooks) do if h.fn then h.fn(pending[i]) end end end
  end
  for _, fn in ipairs(self._after) do fn() end
end

-- finish with the yield points held (hooks and callbacks run whole)
local function finish_held(st, ok, err)
  slicer.hold = slicer.hold + 1
  local fok, ferr = pcall(finish, st, ok, err)
  slicer.hold = slicer.hold - 1
  if not fok then error(ferr, 0) end
end

-- gm:backward inside a sliced step (ember.frame.step): the nodes run in the
-- slices' budgets, paused between slices as gm:backward_steps would be.
local function sliced_backward(self, y, dy)
  local st = start(self, "backward", y, dy)
  slicer.backward = st   -- cancelled if the run is
  while true do
    if C.ember_clock() >= slicer.deadline then slicer.pause() end
    local ok, done = drive_held(self, st.run, st.pending, slicer.deadline)
    if not ok or done then
      slicer.backward = nil
      finish_held(st, ok, done)
      return self
    end
    slicer.pause()
  end
end
-- ends a sliced step's backward that was paused (the run was cancelled or failed)
function autodiff._cancel_backward(st)
  if not st.closed then finish_held(st, false, nil) end
end

function GradManager:backward(y, dy)
  if slicer.active and slicer.owns() then return sliced_backward(self, y, dy) end
  local st = start(self, "backward", y, dy)
  local ok, err = drive_held(self, st.run, st.pending, nil)
  finish_held(st, ok, err)
  return self
end

-- A backward run a host advances a budget at a time (API.md, "In a host's
-- frame loop"). Complete, it leaves .grad, callbacks and hooks exactly as
-- gm:backward would; cancelled, every .grad as it was.
local Run = {}
Run.__index = Run
autodiff.BackwardRun = Run

function GradManager:backward_steps(y, dy)
  local st = setmetatable(start(self, "backward_steps", y, dy), Run)
  -- a run the host forgets is cancelled when it is collected
  local guard = newproxy(true)
  getmetatable(guard).__gc = function() if not st.closed then finish(st, false, nil) end end
  st._guard = guard
  return st
end

function Run:step(seconds)
  if getmetatable(self) ~= Run then errors.raise("ember.BackwardRun.step: call it as run:step(seconds)") end
  if self.closed then errors.raise("ember.BackwardRun.step: the run has ended (completed, failed or cancelled)") end
  if type(seconds) ~= "number" or not (seconds >= 0) then
    errors.raise("ember.BackwardRun.step: expected a budget in seconds >= 0, got " .. tostring(seconds))
  end
  local deadline = seconds < math.huge and C.ember_clock() + seconds or nil
  local ok, done = drive_held(self.gm, self.run, self.pending, deadline)
  if not ok then finish_held(self, false, done) end
  if done then
    finish_held(self, true, nil)
    return true
  end
  return false
end

function Run:cancel()
  if getmetatable(self) ~= Run then errors.raise("ember.BackwardRun.cancel: call it as run:cancel()") end
  if not self.closed then finish(self, false, nil) end
end

function Run:is_done() return self.closed == true end

---------------------------------------------------------------- groups
local Group = {}
Group.__index = Group
local next_group = 0
function autodiff.group(gms)
  if type(gms) ~= "table" or #gms == 0 then errors.raise("ember.autodiff.group: expected a list of GradManagers") end
  for i, gm in ipairs(gms) do
    if getmetatable(gm) ~= GradManager then
      errors.raise(("ember.autodiff.group: entry %d is not a GradManager (got %s)"):format(i, type(gm)))
    end
  end
  next_group = next_group + 1
  for _, gm in ipairs(gms) do C.ember_key_set_group(gm._key, next_group) end
  return setmetatable({ members = gms, id = next_group }, Group)
end
function Group:record()
  for _, gm in ipairs(self.members) do gm:record() end
  return self
end
function Group:release()
  for _, gm in ipairs(self.members) do gm:release() end
  return self
end
function Group:scope(fn, ...)
  if type(fn) ~= "function" then errors.raise("ember.autodiff.group.scope: expected a function, got " .. type(fn)) end
  return recorded(self, fn, ...)
end

---------------------------------------------------------------- stats
function autodiff.stats()
  ember.memory_stats()   -- releases what the GC collected, as memory_stats does
  local s = ffi_new("ember_autograd_stats_t")
  C.ember_autograd_stats(s)
  return { live_nodes = tonumber(s.live_nodes), saved_tensors = tonumber(s.saved_tensors),
    bwd_cache_hits = tonumber(s.bwd_cache_hits), bwd_cache_misses = tonumber(s.bwd_cache_misses) }
end

autodiff.gradcheck = require("ember.autodiff.gradcheck")(ember, autodiff)
autodiff.graph = require("ember.autodiff.graph")(ember, autodiff)
require("ember.autodiff.functional")(ember, autodiff)

return autodiff
