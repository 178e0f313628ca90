-- Functional forms built on GradManager: grad, vjp and checkpoint.
return function(ember, autodiff)
  local GradManager = autodiff.GradManager
  local is_tensor = ember.is_tensor
  local function pack(...) return { n = select("#", ...), ... } end

  -- grad(f) returns a function computing df/dx for a scalar f (first argument
  -- by default, or the arguments listed in argnums). Composable: the inner
  -- backward runs inside the outer recording, so grad(grad(f)) differentiates
  -- again (nested managers).
  function autodiff.grad(f, argnums)
    if type(f) ~= "function" then error("ember.autodiff.grad: expected a function", 2) end
    return function(...)
      local args = pack(...)
      local which = argnums or { 1 }
      if type(which) == "number" then which = { which } end
      local xs = {}
      for i, k in ipairs(which) do
        local x = args[k]
        if not is_tensor(x) then error("ember.autodiff.grad: argument " .. k .. " is not a tensor", 2) end
        xs[i] = x
      end
      local saved = {}
      for i, x in ipairs(xs) do saved[i] = rawget(x, "_grad"); x.grad = nil end
      local gm = GradManager():attach(xs)
      local ok, err = pcall(function()
        gm:record()
        local y = f(unpack(args, 1, args.n))
        if not is_tensor(y) or y:numel() ~= 1 then
          error("ember.autodiff.grad: f must return a one-element tensor", 0)
        end
        gm:backward(y)
      end)
      gm:release()
      local grads = {}
      for i, x in ipairs(xs) do
        grads[i] = rawget(x, "_grad") or ember.zeros_like(x)
        x.grad = saved[i]
      end
      if not ok then error(err, 2) end
      return unpack(grads, 1, #xs)
    end
  end

  -- vjp(f, inputs, dy): the outputs of f(inputs...) and the vector-Jacobian
  -- products with dy (a tensor or a list, one per output).
  function autodiff.vjp(f, inputs, dy)
    if is_tensor(inputs) then inputs = { inputs } end
    local saved = {}
    for i, x in ipairs(inputs) do saved[i] = rawget(x, "_grad"); x.grad = nil end
    local gm = GradManager():attach(inputs)
    local outs
    local ok, err = pcall(function()
      gm:record()
      outs = pack(f(unpack(inputs)))
      local ys = {}
      for k = 1, outs.n do if is_tensor(outs[k]) then ys[#ys + 1] = outs[k] end end
      gm:backward(ys, dy)
    end)
    gm:release()
    local grads = {}
    for i, x in ipairs(inputs) do
      grads[i] = rawget(x, "_grad") or ember.zeros_like(x)
      x.grad = saved[i]
    end
    if not ok then error(err, 2) end
    return outs.n == 1 and outs[1] or { unpack(outs, 1, outs.n) }, grads
  end

  -- checkpoint(fn, ...): fn runs without keeping its intermediates; backward
  -- runs it again with recording on and differentiates that.
  local Checkpoint = {}
  function autodiff.checkpoint(fn, ...)
    if type(fn) ~= "function" then error("ember.autodiff.checkpoint: expected a function", 2) end
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
