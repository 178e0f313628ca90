-- ember.tidy(fn, ...) and ember.keep(t): TensorFlow.js's tf.tidy and tf.keep.
-- A tensor's memory otherwise comes back when the Lua GC collects its wrapper
-- (lua/ember/tensor.lua); tidy gives back, as soon as fn returns or raises,
-- every tensor made inside fn that fn does not return (also inside returned
-- tables) and that nobody kept. Freeing drops Lua's reference only: memory
-- that C still holds (a view's base, a tensor the autograd tape saved) stays
-- where it is; a .grad stays while it is one. A freed wrapper used later
-- raises naming the op. The open tidy's list lives in tensor.lua (wrap puts
-- each new wrapper on it); a sliced step (frame.lua) swaps it at each resume.
return function(ember)
  local errors = require("ember.errors")
  local kept, set_list, grad_owner, tidy_grads = ember._kept, ember._set_tidy_list, ember._grad_owner,
    ember._tidy_grads
  local is_tensor = ember.is_tensor
  local type, select, pcall, error, unpack, getmetatable, rawget, pairs = type, select, pcall,
    error, unpack, getmetatable, rawget, pairs
  local getupvalue = debug.getupvalue

  -- marks every tensor reachable from x through tables (keys and values).
  -- With stored set (what the library keeps for later), the walk stays
  -- near x: below the top only through plain tables and modules, and through
  -- the upvalues of x or of a function x holds (a context's backward
  -- closure), not of functions further down (which would reach the library)
  local function mark(x, into, seen, stored, depth)
    local tx = type(x)
    if tx == "table" then
      if seen[x] then return end
      seen[x] = true
      if is_tensor(x) then
        into[x] = true   -- (its .grad stays while it is one: grad_owner)
        return
      end
      if stored and depth > 0 then
        local mt = getmetatable(x)
        if mt ~= nil and not (type(mt) == "table" and mt.__module) then return end
      end
      for k, v in pairs(x) do
        mark(k, into, seen, stored, depth + 1)
        mark(v, into, seen, stored, depth + 1)
      end
    elseif tx == "function" and stored and depth <= 1 then
      if seen[x] then return end
      seen[x] = true
      local i = 1
      while true do
        local name, v = getupvalue(x, i)
        if name == nil then break end
        mark(v, into, seen, stored, depth + 1)
        i = i + 1
      end
    end
  end

  -- the library keeps what it stores for later while a tidy runs (a custom
  -- Function's context, an optimizer's state, a module's fields)
  local tidy_open = ember._tidy_open
  function ember._keep_reachable(x)
    if tidy_open() then mark(x, kept, {}, true, 0) end
  end

  local function pack(...) return { n = select("#", ...), ... } end
  local DOOMED = 2

  local function tidy(fn, ...)
    local list = { n = 0 }
    local outer = set_list(list)
    local res = pack(pcall(fn, ...))
    set_list(outer)
    local n = list.n
    if n == 0 then
      if not res[1] then error(res[2], 0) end
      return unpack(res, 2, res.n)
    end
    -- state[x]: true for what fn returned (and the tables walked to find it),
    -- DOOMED for what goes: made here, neither kept nor returned, and no
    -- longer the .grad of a tensor that stays
    local state = {}
    if res[1] then
      for i = 2, res.n do mark(res[i], state, state, false, 0) end
    end
    for i = 1, n do
      local t = list[i]
      if not kept[t] and not state[t] then state[t] = DOOMED end
    end
    for i = 1, n do
      local t = list[i]
      local owner = grad_owner[t]
      if owner ~= nil and state[t] == DOOMED and rawget(owner, "_grad") == t and state[owner] ~= DOOMED then
        state[t] = nil
        tidy_grads[t] = true
      end
    end
    for i = 1, n do
      local t = list[i]
      if state[t] == DOOMED then
        t:free()
      elseif outer and not kept[t] then
        -- an enclosing tidy frees it unless that one returns it too
        local n = outer.n + 1
        outer.n = n
        outer[n] = t
      end
    end
    if not res[1] then error(res[2], 0) end
    return unpack(res, 2, res.n)
  end

  function ember.tidy(fn, ...)
    if type(fn) ~= "function" then
      errors.raise(("ember.tidy: expected a function, got %s"):format(errors.show(fn)))
    end
    return tidy(fn, ...)
  end

  -- the library's own tidy around a composite whose temporaries nobody else
  -- sees (the losses, the optimizers composed in Lua); fn runs as it is while
  -- a trace or a saved-tensor hook watches the wrappers (ember._watched); an
  -- error inside names the public function the user called, not ember.tidy
  function ember._tidy_own(fn, ...)
    if ember._watched() then return fn(...) end
    return tidy(fn, ...)
  end

  function ember.keep(t)
    if not is_tensor(t) then errors.argument("ember.keep", 1, "a tensor", t) end
    kept[t] = true
    return t
  end
end
