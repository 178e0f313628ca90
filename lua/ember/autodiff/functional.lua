-- Functional forms built on GradManager: grad, vjp and checkpoint.
local errors = require("ember.errors")
return function(ember, autodiff)
  local GradManager = autodiff.GradManager
  local is_tensor = ember.is_tensor
  local function pack(...) return { n = select("#", ...), ... } end

  -- Runs body(gm) with a manager attached to xs and returns their gradients
  -- (zeros where none came), leaving each x.grad as it was; body's error is
  -- raised after that.
  local function grads_of(xs, body)
    local saved = {}
    for i, x in ipairs(xs) do saved[i] = rawget(x, "_grad"); x.grad = nil end
    local gm = GradManager():attach(xs)
    gm._unreached_ok = true   -- a constant f has zero gradients here, not an error
    local ok, err = pcall(body, gm)
    gm:release()
    local grads = {}
    for i, x in ipairs(xs) do
      grads[i] = rawget(x, "_grad") or ember.zeros_like(x)
      x.grad = saved[i]
    end
    if not ok then error(err, 0) end
    return grads
  end

  -- grad(f) returns a function computing df/dx for a scalar f (first argument
  -- by default, or the arguments listed in argnums). Composable: the inner
  -- backward runs inside the outer recording, so grad(grad(f)) differentiates
  -- again (nested managers).
  function autodiff.grad(f, argnums)
    if type(f) ~= "function" then errors.raise("ember.autodiff.grad: expected a function") end
    return function(...)
      local args = pack(...)
      local which = argnums or { 1 }
      if type(which) == "number" then which = { which } end
      local xs = {}
      for i, k in ipairs(which) do
        local x = args[k]
        if not is_tensor(x) then errors.raise("ember.autodiff.grad: argument " .. k .. " is not a tensor") end
        xs[i] = x
      end
      local grads = grads_of(xs, function(gm)
        gm:record()
        local y = f(unpack(args, 1, args.n))
        if not is_tensor(y) or y:numel() ~= 1 then
          errors.raise("ember.autodiff.grad: f must return a one-element tensor")
        end
        gm:backward(y)
      end)
      return unpack(grads, 1, #xs)
    end
  end

  -- vjp(f, inputs, dy): the outputs of f(inputs...) and the vector-Jacobian
  -- products with dy (a tensor or a list, one per output).
  function autodiff.vjp(f, inputs, dy)
    if is_tensor(inputs) then inputs = { inputs } end
    local outs
    local grads = grads_of(inputs, function(gm)
      gm:record()
      outs = pack(f(unpack(inputs)))
      local ys = {}
      for k = 1, outs.n do if is_tensor(outs[k]) then ys[#ys + 1] = outs[k] end end
      gm:backward(ys, dy)
    end)
    return outs.n == 1 and outs[1] or { unpack(outs, 1, outs.n) }, grads
  end

  ---------------------------------------------------------------- Jacobian tools
  -- torch.autograd.functional's tools, built on nested managers: a manager
  -- that starts recording earlier records the backward of one that starts
  -- later, so the backward of f is itself differentiable.
  local function as_inputs(name, inputs)
    local single = is_tensor(inputs)
    local list = single and { inputs } or inputs
    if type(list) ~= "table" or #list == 0 then
      errors.raise(("ember.autodiff.%s: inputs must be a tensor or a list of tensors"):format(name))
    end
    for i, x in ipairs(list) do
      if not is_tensor(x) then errors.raise(("ember.autodiff.%s: input %d is not a tensor"):format(name, i)) end
      if x.dtype ~= "float32" and x.dtype ~= "float64" then
        errors.raise(("ember.autodiff.%s: input %d is %s; only float32 and float64 can be differentiated"):format(name, i, x.dtype))
      end
    end
    return list, single
  end
  local function as_vectors(name, v, inputs, what)
    local list = is_tensor(v) and { v } or v
    if type(list) ~= "table" or #list ~= #inputs then
      errors.raise(("ember.autodiff.%s: %s must be a tensor or a list of %d tensors"):format(name, what, #inputs))
    end
    for i, t in ipairs(list) do
      local want, got = inputs[i]:shape(), is_tensor(t) and t:shape() or nil
      if not got or table.concat(want, ",") ~= table.concat(got, ",") then
        errors.raise(("ember.autodiff.%s: %s %d must have the shape {%s} of input %d"):format(name, what, i,
          table.concat(want, ", "), i))
      end
    end
    return list
  end
  -- runs fn with each x's .grad set aside, and restores them
  local function with_clean_grads(xs, fn)
    local saved = {}
    for i, x in ipairs(xs) do saved[i] = rawget(x, "_grad"); x.grad = nil end
    local res = pack(pcall(fn))
    for i, x in ipairs(xs) do x.grad = saved[i] end
    if not res[1] then error(res[2], 0) end
    return unpack(res, 2, res.n)
  end
  local function grads_of(xs)
    local g = {}
    for i, x in ipairs(xs) do g[i] = rawget(x, "_grad") or ember.zeros_like(x) end
    return g
  end

  -- jacobian(f, inputs): d outputs / d inputs. One tensor of shape
  -- out_shape ++ in_shape when f has one output and inputs is a tensor, else
  -- J[i][j] for output i and input j. Row by row: one forward and one backward
  -- of f per output element. Differentiable again by an outer manager.
  function autodiff.jacobian(f, inputs)
    if type(f) ~= "function" then errors.raise("ember.autodiff.jacobian: expected a function") end
    local xs, single_in = as_inputs("jacobian", inputs)
    local probe = pack(ember.no_grad(f, unpack(xs)))
    local outs = {}
    for k = 1, probe.n do
      if not is_tensor(probe[k]) then errors.raise(("ember.autodiff.jacobian: output %d is not a tensor"):format(k)) end
      outs[k] = probe[k]
    end
    local single_out = probe.n == 1
    local J = {}
    for i, y in ipairs(outs) do
      local rows = {}
      local n = y:numel()
      for e = 1, n do
        local dys = {}
        for k, yk in ipairs(outs) do
          local d = ember.zeros({ yk:numel() }, { dtype = yk.dtype })
          if k == i then d:narrow(1, e, 1):fill_(1) end
          dys[k] = d:reshape(yk:shape())
        end
        local _, g = with_clean_grads(xs, function() return autodiff.vjp(f, xs, dys) end)
        rows[e] = g
      end
      J[i] = {}
      for j, x in ipairs(xs) do
        local parts = {}
        for e = 1, n do parts[e] = rows[e][j]:reshape({ 1, x:numel() }) end
        local m = n > 0 and ember.cat(parts, 1) or ember.zeros({ 0, x:numel() }, { dtype = x.dtype })
        local shape = {}
        for _, s in ipairs(y:shape()) do shape[#shape + 1] = s end
        for _, s in ipairs(x:shape()) do shape[#shape + 1] = s end
        J[i][j] = m:reshape(shape)
      end
    end
    if single_out and single_in then return J[1][1] end
    if single_out then return J[1] end
    if single_in then
      local r = {}
      for i = 1, #J do r[i] = J[i][1] end
      return r
    end
    return J
  end

  -- hessian(f, inputs): the Jacobian of the gradient of a scalar f
  function autodiff.hessian(f, inputs)
    if type(f) ~= "function" then errors.raise("ember.autodiff.hessian: expected a function") end
    local xs, single = as_inputs("hessian", inputs)
    local argnums = {}
    for i = 1, #xs do argnums[i] = i end
    local g = autodiff.grad(f, argnums)
    local H = autodiff.jacobian(function(...) return g(...) end, single and xs[1] or xs)
    return H
  end

  -- vhp(f, inputs, v) and hvp(f, inputs, v): f(inputs) (a scalar) and the
  -- product of its Hessian with v, as v^T H and H v. Both are one
  -- double backward (grad of <grad f, v>); they agree for every twice
  -- continuously differentiable f, whose Hessian is symmetric.
  -- <gs, vs>, summed over the list
  local function dot(gs, vs)
    local d
    for i = 1, #gs do
      local term = (gs[i] * vs[i]):sum()
      d = d and d + term or term
    end
    return d
  end
  -- body(inner, outer) with `outer` (attached to outer_on) recording before
  -- `inner` (attached to xs), so outer differentiates inner's backward
  local function nested(outer_on, xs, body)
    with_clean_grads(xs, function()
      local outer = GradManager():attach(outer_on)
      local inner = GradManager():attach(xs)
      -- a linear f's gradient, or a constant's, is not on the outer recording: zeros
      outer._unreached_ok, inner._unreached_ok = true, true
      outer:record()
      local ok, err = pcall(function()
        inner:record()
        body(inner, outer)
      end)
      inner:release()
      outer:release()
      if not ok then error(err, 0) end
    end)
  end

  local function hessian_vector(name, f, inputs, v)
    if type(f) ~= "function" then errors.raise(("ember.autodiff.%s: expected a function"):format(name)) end
    local xs, single = as_inputs(name, inputs)
    local vs = as_vectors(name, v, xs, "v")
    local y, prods
    nested(xs, xs, function(inner, outer)
      y = f(unpack(xs))
      if not is_tensor(y) or y:numel() ~= 1 then
        errors.raise(("ember.autodiff.%s: f must return a one-element tensor"):format(name))
      end
      inner:backward(y)
      local gs = grads_of(xs)
      for _, x in ipairs(xs) do x.grad = nil end
      outer:backward(dot(gs, vs))
      prods = grads_of(xs)
    end)
    return y:detach(), single and prods[1] or prods
  end
  function autodiff.vhp(f, inputs, v) return hessian_vector("vhp", f, inputs, v) end
  function autodiff.hvp(f, inputs, v) return hessian_vector("hvp", f, inputs, v) end

  -- jvp(f, inputs, v): f(inputs) and J v, by two reverse passes (the
  -- "double vjp" trick): u -> J^T u is linear, and its vjp with v is J v.
  function autodiff.jvp(f, inputs, v)
    if type(f) ~= "function" then errors.raise("ember.autodiff.jvp: expected a function") end
    local xs = as_inputs("jvp", inputs)
    local vs = as_vectors("jvp", v, xs, "v")
    local probe = pack(ember.no_grad(f, unpack(xs)))
    local us = {}
    for k = 1, probe.n do
      if not is_tensor(probe[k]) then errors.raise(("ember.autodiff.jvp: output %d is not a tensor"):format(k)) end
      us[k] = ember.zeros_like(probe[k])
    end
    local outs, results
    nested(us, xs, function(inner, outer)
      outs = pack(f(unpack(xs)))
      inner:backward({ unpack(outs, 1, outs.n) }, us)
      outer:backward(dot(grads_of(xs), vs))
      results = {}
      for k, u in ipairs(us) do results[k] = rawget(u, "_grad") or ember.zeros_like(u) end
    end)
    local values = {}
    for k = 1, outs.n do values[k] = outs[k]:detach() end
    if outs.n == 1 then return values[1], results[1] end
    return values, results
  end

  -- gradgradcheck(f, inputs, opts): gradcheck of the map from the inputs to
  -- the vector-Jacobian products of f with fixed random cotangents: finite
  -- differences against second derivatives (float64 inputs, as gradcheck).
  function autodiff.gradgradcheck(f, inputs, opts)
    if type(f) ~= "function" then errors.raise("ember.autodiff.gradgradcheck: expected a function") end
    local xs = as_inputs("gradgradcheck", inputs)
    local probe = pack(ember.no_grad(f, unpack(xs)))
    local dys = {}
    for k = 1, probe.n do
      if is_tensor(probe[k]) then dys[#dys + 1] = ember.randn(probe[k]:shape(), { dtype = probe[k].dtype }) end
    end
    local function first_derivatives(...)   -- gradcheck's finite differences run it under no_grad
      local args = { ... }
      return ember.enable_grad(function()
        local _, g = autodiff.vjp(f, args, dys)
        return unpack(g)
      end)
    end
    return autodiff.gradcheck(first_derivatives, xs, opts)
  end

  -- checkpoint(fn, ...): fn runs without keeping its intermediates; backward
  -- runs it again with recording on and differentiates that.
  local Checkpoint = {}
  function autodiff.checkpoint(fn, ...)
    if type(fn) ~= "function" then errors.raise("ember.autodiff.checkpoint: expected a function") end
    local args = pack(...)
    local F = autodiff.Function("checkpoint", function(...)
      local outs = pack(fn(...))
      local inner = pack(...)
      return unpack(outs, 1, outs.n), function(...)
        local dys = pack(...)
        local xs, map = {}, {}
        local rerun = {}
        for i = 1, inner.n do
          local v = inner[i]
          if is_tensor(v) then
            local d = v:detach()
            xs[#xs + 1] = d
            map[#map + 1] = i
            rerun[i] = d
          else
            rerun[i] = v
          end
        end
        local gm = GradManager():attach(xs)
        gm._unreached_ok = true
        local ok, err = pcall(function()
          gm:record()
          local again = pack(fn(unpack(rerun, 1, inner.n)))
          local ys, ds = {}, {}
          for k = 1, again.n do
            if is_tensor(again[k]) and dys[k] ~= nil then
              ys[#ys + 1] = again[k]
              ds[#ds + 1] = dys[k]
            end
          end
          if #ys > 0 then gm:backward(ys, ds) else gm:release() end
        end)
        gm:release()
        if not ok then error(err, 0) end
        local grads = {}
        for j, d in ipairs(xs) do grads[j] = rawget(d, "_grad") end
        return grads
      end
    end)
    Checkpoint.last = F
    return F(unpack(args, 1, args.n))
  end
end
