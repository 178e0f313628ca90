-- ember.autodiff's grad rules defined in Lua: the rule registry (Lua side),
-- the pull loop's answer to a NODE request (run_node), Function and
-- register_grad_rule. autodiff/init.lua drives the backward sweep.
local ffi = require("ffi")
local errors = require("ember.errors")

return function(ember, autodiff)
  local C = ember._C
  local wrap, wrap_borrowed, check = ember._wrap, ember._wrap_borrowed, errors.check
  local is_tensor, tensor_arg = ember.is_tensor, ember._tensor_arg
  local ffi_new, ffi_string = ffi.new, ffi.string
  local type, select, setmetatable, rawequal = type, select, setmetatable, rawequal
  local function pack(...) return { n = select("#", ...), ... } end

  ---------------------------------------------------------------- the rule registry (Lua side)
  -- rules[id] = { name =, fn = function(ctx, grads) -> grads, kind = "function" | "override" }
  local rules, next_rule = {}, 0
  -- ctx_store[id] = the state a recorded custom op keeps for its backward,
  -- ctx_nodes[id] = how many nodes (one per recording key) still hold it
  local ctx_store, ctx_nodes, next_ctx = {}, {}, 0
  local drain_buf = ffi_new("int[256]")

  local function drain_ctx()
    while true do
      local n = C.ember_drain_freed_ctx(drain_buf, 256)
      for i = 0, n - 1 do
        local id = drain_buf[i]
        local left = (ctx_nodes[id] or 1) - 1
        if left > 0 then ctx_nodes[id] = left else ctx_store[id], ctx_nodes[id] = nil, nil end
      end
      if n < 256 then return end
    end
  end
  autodiff._drain_ctx = drain_ctx

  local function new_rule(spec)
    next_rule = next_rule + 1
    rules[next_rule] = spec
    return next_rule
  end

  local shape_buf = ffi_new("int64_t[8]")
  local function node_input_shape(node, i)
    local nd = C.ember_node_input_shape(node, i, shape_buf)
    local s = {}
    for d = 1, nd do s[d] = tonumber(shape_buf[d - 1]) end
    return s
  end
  local shape_str = errors.shape

  local same_shape = errors.same_shape

  -- Checks what a Lua rule returned and turns it into one entry per input.
  -- MegEngine's contract (API.md): a single list may end early (Lua cannot hold
  -- a trailing nil in a list); multiple return values must number exactly the
  -- inputs, as Lua counts them (`return g, nil` is two); a bare tensor answers
  -- only a one-input function.
  local function wrong_count(name, n, nin, how)
    errors.raise(("ember.autodiff: %s returned the wrong number of grads: %d%s for %d input%s")
      :format(name, n, how, nin, nin == 1 and "" or "s"))
  end

  local function check_grads(name, node, nin, list, n)
    for i = 1, n do
      local g = list[i]
      if g ~= nil then
        if type(g) == "number" then
          errors.raise(("ember.autodiff: %s returned a non-tensor gradient (number) for input %d"):format(name, i))
        elseif not is_tensor(g) then
          errors.raise(("ember.autodiff: %s returned a non-tensor gradient (%s) for input %d"):format(name, type(g), i))
        end
        if C.ember_node_needs_input_grad(node, i - 1) ~= 0 then
          local want = node_input_shape(node, i - 1)
          if not same_shape(g, want) then
            errors.raise(("ember.autodiff: %s returned a gradient of shape %s for input %d of shape %s")
              :format(name, shape_str(g:shape()), i, shape_str(want)))
          end
        end
      end
    end
    return list, n
  end

  local function normalise_grads(name, node, nin, ...)
    local n = select("#", ...)
    local first = ...
    if n == 1 and type(first) == "table" and not is_tensor(first) then
      local m = table.maxn(first)
      if m > nin then wrong_count(name, m, nin, " in a list") end
      return check_grads(name, node, nin, first, m)
    end
    if n ~= nin then wrong_count(name, n, nin, n == 1 and " value" or " values") end
    return check_grads(name, node, nin, { ... }, n)
  end

  -- tensor pointer buffers that grow to the largest count asked for
  local function pointer_buffer()
    local cap, buf = 16, ffi_new("ember_tensor *[16]")
    return function(n)
      if n > cap then cap, buf = n, ffi_new("ember_tensor *[?]", n) end
      return buf
    end
  end
  local grad_buffer, gin_buffer = pointer_buffer(), pointer_buffer()

  local function supply(run, node, list, n)
    local nin = C.ember_node_num_inputs(node)
    local grad_buf = grad_buffer(nin)
    for i = 1, nin do
      local g = i <= n and list[i] or nil
      grad_buf[i - 1] = g ~= nil and g._c or nil
    end
    check(C.ember_backward_supply(run, nin, grad_buf))
  end

  local function node_needs(node)
    local nin = C.ember_node_num_inputs(node)
    local needs = {}
    for i = 1, nin do needs[i] = C.ember_node_needs_input_grad(node, i - 1) ~= 0 end
    return needs
  end

  -- The built-in rule's input grads for the waiting node, as wrapped tensors.
  local function builtin_grads(run, node, grads, nout)
    local nin = C.ember_node_num_inputs(node)
    local gin_buf, grad_buf = gin_buffer(nin), grad_buffer(nout)
    for k = 1, nout do grad_buf[k - 1] = grads[k] and grads[k]._c or nil end
    check(C.ember_backward_builtin_grads(run, nout, grad_buf, gin_buf))
    local list = {}
    for i = 1, nin do list[i] = wrap(gin_buf[i - 1]) end
    return list, nin
  end

  -- A NODE request: a Lua rule, or a built-in one intercepted for hooks,
  -- debugging or anomaly detection. The graph toolbox (autodiff/graph.lua)
  -- brackets the rule with its hooks.
  local function run_node(run, req)
    local node = req.node
    local nout = req.num_grads
    local grads = {}
    for k = 1, nout do grads[k] = wrap_borrowed(req.grads[k - 1]) end
    -- the op's or Function's own name, then the node's: "log_softmax (LogSoftmaxBackward)"
    local name = ffi_string(C.ember_node_label(node))
    local G = autodiff._graph
    if G then grads = G.before_node(node, name, grads, nout) end
    local spec = rules[req.rule_id]
    local nin = C.ember_node_num_inputs(node)
    local list, n
    if spec == nil then
      list, n = builtin_grads(run, node, grads, nout)
    elseif spec.kind == "override" then
      local ctx = { inputs = {}, outputs = {}, needs_input_grad = node_needs(node) }
      for i = 1, nin do ctx.inputs[i] = wrap_borrowed(C.ember_node_saved_input(node, i - 1)) end
      for k = 1, nout do ctx.outputs[k] = wrap_borrowed(C.ember_node_saved_output(node, k - 1)) end
      local r = spec.fn(ctx, grads)
      if rawequal(r, autodiff.FALLBACK) then
        list, n = builtin_grads(run, node, grads, nout)
      else
        list, n = normalise_grads("the rule registered for " .. name, node, nin,
          r == nil and {} or r)
      end
    else
      local ctx = ctx_store[req.ctx_id]
      if ctx == nil or ctx.backward == nil then
        errors.raise(("ember.autodiff: no grad rule for %s (a Function without backward)"):format(spec.name))
      end
      ctx.needs_input_grad = node_needs(node)
      local label = "Function " .. name
      if ctx.closure then
        list, n = normalise_grads(label, node, nin, ctx.backward(unpack(grads, 1, nout)))
      else
        list, n = normalise_grads(label, node, nin, ctx.backward(ctx, unpack(grads, 1, nout)))
      end
      if rawequal(list[1], autodiff.FALLBACK) then
        errors.raise(("ember.autodiff: no grad rule for %s"):format(spec.name))
      end
    end
    if G then
      list = G.after_node(node, name, list, grads, nin)
      list, n = check_grads(name .. ", after its hooks,", node, nin, list, nin)
    end
    supply(run, node, list, n)
  end

  ---------------------------------------------------------------- Function
  local Function = {}
  Function.__index = Function

  -- a Function's name: what its node and its errors show, verbatim
  local function check_name(name)
    if type(name) ~= "string" or name == "" or #name > C.EMBER_NODE_NAME_MAX then
      errors.raise(("ember.autodiff.Function: name must be a string of 1 to %d bytes, got %s")
        :format(C.EMBER_NODE_NAME_MAX, type(name) == "string" and ("'%s' (%d bytes)"):format(name, #name)
          or type(name)))
    end
  end

  -- Function(name, fn) (MegEngine's shape: fn returns outputs, then a backward
  -- closure) or Function{name =, forward =, backward =} (PyTorch's shape).
  function autodiff.Function(a, b)
    local self = setmetatable({}, Function)
    if type(a) == "table" then
      self.name = a.name or "function"
      check_name(self.name)
      self.forward = a.forward
      self.backward = a.backward
      if type(self.forward) ~= "function" then errors.raise("ember.autodiff.Function: forward must be a function") end
    else
      if type(a) ~= "string" or type(b) ~= "function" then
        errors.raise("ember.autodiff.Function: expected (name, fn) or {name =, forward =, backward =}")
      end
      self.name = a
      check_name(a)
      self.closure_fn = b
    end
    self.rule_id = new_rule({ name = self.name, kind = "function" })
    return self
  end

  local in_buffer, out_buffer = pointer_buffer(), pointer_buffer()

  local Ctx = {}
  Ctx.__index = Ctx
  function Ctx:save_for_backward(...)
    self.saved_tensors = { ... }
  end
  function Ctx:mark_non_differentiable() end

  function Function.__call(self, ...)
    drain_ctx()
    local args = { ... }
    local nargs = select("#", ...)
    local inputs = {}
    for i = 1, nargs do
      if is_tensor(args[i]) then inputs[#inputs + 1] = args[i] end
    end
    local ctx = setmetatable({ needs_input_grad = {} }, Ctx)
    for i, x in ipairs(inputs) do
      ctx.needs_input_grad[i] = C.ember_is_tracked(tensor_arg(self.name, x, i)) ~= 0
    end
    local res
    if self.closure_fn then
      res = pack(ember.no_grad(self.closure_fn, ...))
      local last = res[res.n]
      if type(last) == "function" then
        ctx.backward = last
        res.n = res.n - 1
      end
      ctx.closure = true
    else
      res = pack(ember.no_grad(self.forward, ctx, ...))
      ctx.backward = self.backward
    end
    local outputs = {}
    for k = 1, res.n do
      local y = res[k]
      if is_tensor(y) then
        for _, x in ipairs(inputs) do
          if rawequal(x, y) then y = y:detach(); res[k] = y end   -- an output must be a new tensor
        end
        outputs[#outputs + 1] = y
      end
    end
    if #outputs == 0 then   -- nothing to differentiate: a forward that forgot to return its tensor
      local first = res.n > 0 and res[1] or nil
      errors.raise(("ember.autodiff.Function: %s's forward returned no tensor (%s)"):format(self.name,
        res.n == 0 and "nothing" or type(first) .. " " .. tostring(first)))
    end
    if C.ember_is_grad_enabled() ~= 0 then
      local nin, nout = #inputs, #outputs
      local in_buf, out_buf = in_buffer(nin), out_buffer(nout)
      for i = 1, nin do in_buf[i - 1] = inputs[i]._c end
      for k = 1, nout do out_buf[k - 1] = outputs[k]._c end
      next_ctx = next_ctx + 1
      ctx_store[next_ctx] = ctx
      local made = C.ember_record_custom(self.name, self.rule_id, next_ctx, nin, in_buf, nout, out_buf)
      if made < 0 then
        ctx_store[next_ctx] = nil
        check(made)
      end
      if made == 0 then ctx_store[next_ctx] = nil else
        ctx_nodes[next_ctx] = made
        ember._keep_reachable(ctx)   -- what backward reads outlives an ember.tidy around the forward
      end
    end
    return unpack(res, 1, res.n)
  end
  autodiff.Function_mt = Function

  -- Replaces the rule of a built-in op; nil restores it.
  local overrides = {}
  function autodiff.register_grad_rule(op, fn)
    if type(op) ~= "string" then errors.raise("ember.autodiff.register_grad_rule: op name must be a string") end
    if fn ~= nil and type(fn) ~= "function" then
      errors.raise("ember.autodiff.register_grad_rule: rule must be a function or nil")
    end
    local id = 0
    if fn then id = new_rule({ name = op, kind = "override", fn = fn }) end
    check(C.ember_set_rule_override(op, id))
    if overrides[op] then rules[overrides[op]] = nil end
    overrides[op] = fn and id or nil
  end

  return run_node
end
