-- ember.autodiff.graph: PyTorch's torch.autograd.graph toolbox on ember's
-- engine: nodes (y:grad_fn()), node and tensor hooks, saved-tensor hooks,
-- version counters, multi-grad hooks, mutation of saved tensors, debug
-- logging and anomaly detection.
--
-- Hook order for a tensor t (documented in docs/autodiff.md): t's tensor
-- hooks, then the GradManager callbacks (attached tensors), then the
-- accumulation into .grad, then post-accumulate hooks. For a non-leaf t, its
-- tensor hooks run on the gradient of t before the prehooks of t's grad_fn.
local ffi = require("ffi")
local errors = require("ember.errors")

return function(ember, autodiff)
  local C = ember._C
  local wrap, wrap_borrowed = ember._wrap, ember._wrap_borrowed
  local is_tensor = ember.is_tensor
  local Tensor = ember.Tensor
  local ffi_string, ffi_new = ffi.string, ffi.new
  local graph = {}
  local G = {}   -- engine-facing functions, installed as autodiff._graph
  autodiff._graph = G

  local function pack(...) return { n = select("#", ...), ... } end

  ---------------------------------------------------------------- handles
  local Handle = {}
  Handle.__index = Handle
  function Handle:remove()
    if self._list then
      for i, h in ipairs(self._list) do
        if h == self._entry then table.remove(self._list, i); break end
      end
      self._entry.fn = nil   -- a removed hook never runs again
      self._list = nil
    end
  end
  local function add_hook(list, fn, what)
    if type(fn) ~= "function" then errors.raise("ember.autodiff: " .. what .. " must be a function") end
    local entry = { fn = fn }
    list[#list + 1] = entry
    return setmetatable({ _list = list, _entry = entry }, Handle)
  end

  ---------------------------------------------------------------- per-node state
  -- node id -> { hooks, prehooks, out_hooks[k], metadata, packed, location }
  -- kept while the node's key records; cleared when its generation moves on
  local state, state_keys = {}, {}
  local function node_state(node, create)
    local id = tonumber(C.ember_node_id(node))
    local st = state[id]
    if st == nil and create then
      st = { key = C.ember_node_key(node), gen = C.ember_key_generation(C.ember_node_key(node)) }
      state[id] = st
      state_keys[#state_keys + 1] = id
    end
    return st, id
  end
  -- drops the state of nodes whose recording ended
  local function prune()
    local keep = {}
    for _, id in ipairs(state_keys) do
      local st = state[id]
      if st and C.ember_key_generation(st.key) == st.gen then keep[#keep + 1] = id else state[id] = nil end
    end
    state_keys = keep
  end

  ---------------------------------------------------------------- Node objects
  local Node = {}
  Node.__index = Node
  graph.Node = Node
  local nodes = setmetatable({}, { __mode = "v" })   -- id -> Node (one object per node)

  local function node_object(p)
    if p == nil then return nil end
    local id = tonumber(C.ember_node_id(p))
    local n = nodes[id]
    if n == nil then
      local key = C.ember_node_key(p)
      n = setmetatable({ _p = p, _id = id, _key = key, _gen = C.ember_key_generation(key) }, Node)
      nodes[id] = n
    end
    return n
  end
  graph._node_object = node_object

  local function live(n, what)
    if C.ember_key_generation(n._key) ~= n._gen or n._gen == 0 then
      errors.raise("ember.autodiff.Node." .. what .. ": the node's graph was released")
    end
    return n._p
  end

  function Node:name() return ffi_string(C.ember_node_name(live(self, "name"))) end
  function Node:__tostring()
    if C.ember_key_generation(self._key) ~= self._gen then return "<released node>" end
    return "<" .. self:name() .. ">"
  end
  function Node:next_functions()
    local p = live(self, "next_functions")
    local list = {}
    if ffi_string(C.ember_node_name(p)) == "AccumulateGrad" then return list end
    local nr = ffi_new("int[1]")
    for i = 0, C.ember_node_num_inputs(p) - 1 do
      nr[0] = 0
      local q = C.ember_node_next(p, i, nr)
      local entry = { node = node_object(q), output_nr = q ~= nil and nr[0] + 1 or 1 }
      list[#list + 1] = setmetatable(entry, { __index = function(t, k)
        if k == 1 then return t.node elseif k == 2 then return t.output_nr end
      end })
    end
    return list
  end
  function Node:metadata()
    local st = node_state(live(self, "metadata"), true)
    st.metadata = st.metadata or {}
    return st.metadata
  end
  -- a hook in the node's list `field`; the node then stops backward to run it
  local function node_hook(self, method, field, kind, fn)
    local p = live(self, method)
    local st = node_state(p, true)
    st[field] = st[field] or {}
    C.ember_node_set_intercept(p, 1)
    return add_hook(st[field], fn, kind)
  end
  function Node:register_hook(fn) return node_hook(self, "register_hook", "hooks", "node hook", fn) end
  function Node:register_prehook(fn) return node_hook(self, "register_prehook", "prehooks", "node prehook", fn) end

  function Tensor.grad_fn(t)
    return node_object(C.ember_grad_fn(ember._tensor_arg("grad_fn", t, 1), nil))
  end

  function graph.get_gradient_edge(t)
    local nr = ffi_new("int[1]")
    local p = C.ember_gradient_edge(ember._tensor_arg("get_gradient_edge", t, 1), nr)
    if p == nil then errors.raise("ember.autodiff.graph.get_gradient_edge: the tensor is not tracked by any recording") end
    return { node = node_object(p), output_nr = nr[0] + 1 }
  end

  function graph.increment_version(t)
    C.ember_tensor_bump_version(ember._tensor_arg("increment_version", t, 1))
    return t
  end

  ---------------------------------------------------------------- tensor hooks
  function Tensor.register_hook(t, fn)
    local c = ember._tensor_arg("register_hook", t, 1)
    local nr = ffi_new("int[1]")
    local p = C.ember_grad_fn(c, nr)
    if p ~= nil then   -- non-leaf: the hook sees the gradient of this output of its grad_fn
      local st = node_state(p, true)
      st.out_hooks = st.out_hooks or {}
      local k = nr[0] + 1
      st.out_hooks[k] = st.out_hooks[k] or {}
      C.ember_node_set_intercept(p, 1)
      return add_hook(st.out_hooks[k], fn, "tensor hook")
    end
    local list = autodiff._tensor_hooks[t]
    if list == nil then list = {}; autodiff._tensor_hooks[t] = list end
    return add_hook(list, fn, "tensor hook")
  end

  function Tensor.register_post_accumulate_grad_hook(t, fn)
    ember._tensor_arg("register_post_accumulate_grad_hook", t, 1)
    local list = autodiff._post_hooks[t]
    if list == nil then list = {}; autodiff._post_hooks[t] = list end
    return add_hook(list, fn, "post-accumulate hook")
  end

  ---------------------------------------------------------------- debug logging
  local SHORT = { float32 = "f32", float64 = "f64", float16 = "f16", bfloat16 = "bf16", int32 = "i32",
    int64 = "i64", uint8 = "u8", bool = "b8" }
  local debug_on = false
  local function describe_grads(grads, n)
    local parts = {}
    for k = 1, n do
      local g = grads[k]
      parts[k] = g and (SHORT[g.dtype] .. "[" .. table.concat(g:shape(), ", ") .. "]") or "None"
    end
    return "[" .. table.concat(parts, ", ") .. "]"
  end
  local intercept_users = 0
  local function intercept(on)
    intercept_users = intercept_users + (on and 1 or -1)
    C.ember_set_intercept_all(intercept_users > 0 and 1 or 0)
  end
  function autodiff.set_debug(on)
    on = on and true or false
    if on ~= debug_on then
      debug_on = on
      intercept(on)
    end
  end
  function autodiff.is_debug() return debug_on end
  local env = os.getenv("EMBER_DEBUG_AUTODIFF")
  if env and env ~= "" and env ~= "0" then autodiff.set_debug(true) end

  ---------------------------------------------------------------- journal of new nodes
  -- Saved-tensor hooks and anomaly mode look at each node right after the op
  -- that created it: the core journals new nodes and each new tensor wrapper
  -- drains the journal.
  local packing = {}      -- stack of {pack =, unpack =}
  local disabled = {}     -- stack of messages
  local anomaly = 0
  local journal_buf = ffi_new("ember_node *[64]")
  local in_journal = false

  local function caller_location()
    for level = 3, 40 do
      local info = debug.getinfo(level, "Sl")
      if not info then break end
      local src = info.short_src or "?"
      if info.what ~= "C" and not src:find("ember/", 1, true) and not src:find("(gen)", 1, true) then
        return src .. ":" .. (info.currentline or 0)
      end
    end
    return "?"
  end

  local function pack_saved(p, name)
    local hooks = packing[#packing]
    local st = node_state(p, true)
    st.packed = st.packed or {}
    for _, kind in ipairs({ "input", "output" }) do
      local getter = kind == "input" and C.ember_node_saved_input or C.ember_node_saved_output
      local setter = kind == "input" and C.ember_node_set_saved_input or C.ember_node_set_saved_output
      for i = 0, (kind == "input" and 2 or 1) do
        local q = getter(p, i)
        if q ~= nil then
          local t = wrap_borrowed(q)
          local v0 = t:version()
          local packed = ember.no_grad(hooks.pack, t)
          if t:version() ~= v0 then
            errors.raise("ember.autodiff.graph.saved_tensors_hooks: the pack hook modified its argument in place ("
              .. name .. ")")
          end
          ember._keep_reachable(packed)   -- what a pack hook gave outlives an ember.tidy
          st.packed[#st.packed + 1] = { kind = kind, index = i, value = packed, unpack = hooks.unpack,
            setter = setter }
          errors.check(setter(p, i, nil))
        end
      end
    end
    C.ember_node_set_intercept(p, 1)
  end

  local function drain_journal()
    if in_journal then return end
    in_journal = true
    local ok, err = pcall(function()
      while true do
        local n = C.ember_drain_node_journal(journal_buf, 64)
        for i = 0, n - 1 do
          local p = journal_buf[i]
          local name = ffi_string(C.ember_node_label(p))
          if anomaly > 0 then node_state(p, true).location = caller_location() end
          if #disabled > 0 then
            errors.raise("ember.autodiff.graph.disable_saved_tensors_hooks: " .. disabled[#disabled]
              .. " (while recording " .. name .. ")")
          end
          if #packing > 0 then pack_saved(p, name) end
        end
        if n < 64 then break end
      end
    end)
    in_journal = false
    if not ok then error(err, 0) end
  end

  local function update_journal()
    local on = #packing > 0 or anomaly > 0
    C.ember_set_node_journal(on and 1 or 0)
    ember._set_wrap_hook(on and drain_journal or nil)
  end

  -- runs fn with a setting pushed on a stack, restoring it even when fn raises
  local function with(stack, value, fn, ...)
    stack[#stack + 1] = value
    update_journal()
    local res = pack(pcall(fn, ...))
    if res[1] then
      local ok, err = pcall(drain_journal)
      if not ok then res = { false, err, n = 2 } end
    end
    table.remove(stack)
    update_journal()
    if not res[1] then error(res[2], 0) end
    return unpack(res, 2, res.n)
  end

  function graph.saved_tensors_hooks(pack_fn, unpack_fn, fn, ...)
    if type(pack_fn) ~= "function" or type(unpack_fn) ~= "function" or type(fn) ~= "function" then
      errors.raise("ember.autodiff.graph.saved_tensors_hooks: expected (pack, unpack, fn)")
    end
    if #disabled > 0 then errors.raise("ember.autodiff.graph.saved_tensors_hooks: " .. disabled[#disabled]) end
    return with(packing, { pack = pack_fn, unpack = unpack_fn }, fn, ...)
  end

  function graph.save_on_cpu(opts, fn, ...)
    if type(opts) == "function" then return graph.save_on_cpu({}, opts, fn, ...) end
    errors.known_options("autodiff.graph.save_on_cpu", opts, { "pin_memory" })
    local pin = opts and opts.pin_memory
    local function pack_fn(t)
      if t.device == "cpu" then return t end       -- identity for CPU tensors
      local host = t:cpu()
      return { device = t.device, host = pin and host:pin_memory() or host, pin = pin }
    end
    local function unpack_fn(v)
      if is_tensor(v) then return v end
      return v.host:to(v.device, { non_blocking = v.pin })
    end
    return graph.saved_tensors_hooks(pack_fn, unpack_fn, fn, ...)
  end

  function graph.disable_saved_tensors_hooks(message, fn, ...)
    if type(message) ~= "string" or type(fn) ~= "function" then
      errors.raise("ember.autodiff.graph.disable_saved_tensors_hooks: expected (message, fn)")
    end
    if #packing > 0 then errors.raise("ember.autodiff.graph.disable_saved_tensors_hooks: " .. message) end
    disabled[#disabled + 1] = message
    local res = pack(pcall(fn, ...))
    table.remove(disabled)
    if not res[1] then error(res[2], 0) end
    return unpack(res, 2, res.n)
  end

  function graph.allow_mutation_on_saved_tensors(fn, ...)
    if C.ember_get_save_copies() ~= 0 then
      errors.raise("ember.autodiff.graph.allow_mutation_on_saved_tensors: cannot be nested")
    end
    C.ember_set_save_copies(1)
    local res = pack(pcall(fn, ...))
    C.ember_set_save_copies(0)
    if not res[1] then error(res[2], 0) end
    return unpack(res, 2, res.n)
  end

  function autodiff.detect_anomaly(fn, ...)
    anomaly = anomaly + 1
    intercept(true)
    update_journal()
    local res = pack(pcall(fn, ...))
    anomaly = anomaly - 1
    intercept(false)
    update_journal()
    if not res[1] then error(res[2], 0) end
    return unpack(res, 2, res.n)
  end

  ---------------------------------------------------------------- multi-grad hooks
  local multi = {}   -- live multi-grad hooks
  local backward_serial = 0

  function graph.register_multi_grad_hook(tensors, fn, opts)
    if type(tensors) ~= "table" or #tensors == 0 then
      errors.raise("ember.autodiff.graph.register_multi_grad_hook: expected a list of tensors")
    end
    if type(fn) ~= "function" then errors.raise("ember.autodiff.graph.register_multi_grad_hook: fn must be a function") end
    errors.known_options("autodiff.graph.register_multi_grad_hook", opts, { "mode" })
    local mode = opts and opts.mode or "all"
    if mode ~= "all" and mode ~= "any" then
      errors.raise("ember.autodiff.graph.register_multi_grad_hook: mode must be \"all\" or \"any\", got " .. tostring(mode))
    end
    local m = { fn = fn, mode = mode, n = #tensors, grads = {}, serial = -1, fired = false }
    local handles = {}
    for i, t in ipairs(tensors) do
      handles[i] = t:register_hook(function(g)
        if m.fn == nil then return end
        if m.serial ~= backward_serial then
          m.serial, m.grads, m.fired = backward_serial, {}, false
        end
        if m.mode == "any" then
          if not m.fired then
            m.fired = true
            m.fn(g)
          end
        else
          m.grads[i] = g
          m.fired = true
        end
      end)
    end
    multi[#multi + 1] = m
    local h = setmetatable({}, { __index = { remove = function()
      for _, hh in ipairs(handles) do hh:remove() end
      m.fn = nil
      for i, x in ipairs(multi) do if x == m then table.remove(multi, i); break end end
    end } })
    return h
  end

  function G.backward_begin()
    backward_serial = backward_serial + 1
  end

  function G.backward_end(ok)
    if ok then
      for _, m in ipairs(multi) do
        if m.fn and m.mode == "all" and m.serial == backward_serial and m.fired then
          local grads = { n = m.n }
          for i = 1, m.n do grads[i] = m.grads[i] end
          m.grads, m.fired = {}, false
          m.fn(grads)
        end
      end
    end
    prune()
  end

  ---------------------------------------------------------------- around each intercepted node
  -- the functions of a hook list as they are now: a hook removed while the
  -- node runs still runs for that node
  local function fns(list)
    local r = {}
    for _, h in ipairs(list) do if h.fn then r[#r + 1] = h.fn end end
    return r
  end

  local function hook_error(what, name, detail)
    errors.raise(("ember.autodiff: %s of %s %s"):format(what, name, detail))
  end

  local function check_hook_grads(what, name, old, new, n)
    if type(new) ~= "table" or is_tensor(new) then
      hook_error(what, name, "must return a list of gradients or nil, got " .. type(new))
    end
    for k = 1, n do
      local g = new[k]
      if g ~= nil and not is_tensor(g) then
        hook_error(what, name, ("returned a non-tensor (%s) at position %d"):format(type(g), k))
      end
      if g ~= nil and old[k] ~= nil then
        local a, b = g:shape(), old[k]:shape()
        if errors.shape(a) ~= errors.shape(b) then
          hook_error(what, name, ("returned a gradient of shape %s where %s was expected")
            :format(errors.shape(a), errors.shape(b)))
        end
      end
    end
    return new
  end

  function G.before_node(p, name, grads, nout)
    local st = node_state(p, false)
    if st then
      -- saved tensors the pack hooks took come back through unpack
      if st.packed then
        for _, e in ipairs(st.packed) do
          local t = e.unpack(e.value)
          if not is_tensor(t) then hook_error("the unpack hook", name, "must return a tensor, got " .. type(t)) end
          errors.check(e.setter(p, e.index, t._c))
        end
        st.packed = nil
      end
      if st.out_hooks then
        for k = 1, nout do
          local list = st.out_hooks[k]
          if list and grads[k] ~= nil then
            for _, fn in ipairs(fns(list)) do
              local r = fn(grads[k])
              if r ~= nil then
                check_hook_grads("a tensor hook on an output", name, { grads[k] }, { r }, 1)
                grads[k] = r
              end
            end
          end
        end
      end
      st.running_hooks = st.hooks and fns(st.hooks) or nil
      if st.prehooks then
        for _, fn in ipairs(fns(st.prehooks)) do
          local r = fn(grads)
          if r ~= nil then grads = check_hook_grads("a prehook", name, grads, r, nout) end
        end
      end
    end
    if debug_on then
      io.stderr:write("Executing: " .. name .. " with grad_outputs: " .. describe_grads(grads, nout) .. "\n")
    end
    return grads
  end

  local function nonfinite(g)
    if g == nil then return nil end
    if g:ne(g):sum():item() > 0 then return "nan" end
    if g:abs():eq(math.huge):sum():item() > 0 then return "inf" end
    return nil
  end

  function G.after_node(p, name, list, grads, nin)
    local st = node_state(p, false)
    if st and st.running_hooks then
      for _, fn in ipairs(st.running_hooks) do
        local r = fn(list, grads)
        if r ~= nil then list = check_hook_grads("a hook", name, list, r, nin) end
      end
      st.running_hooks = nil
    end
    if anomaly > 0 then
      for i = 1, nin do
        local bad = nonfinite(list[i])
        if bad then
          local loc = st and st.location or "?"
          errors.raise(("ember.autodiff.detect_anomaly: %s returned %s values in its gradient for input %d; "
            .. "the forward op was called at %s"):format(name, bad, i, loc))
        end
      end
    end
    return list
  end

  return graph
end
