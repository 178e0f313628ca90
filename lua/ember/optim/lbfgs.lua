-- ember.optim.LBFGS: PyTorch 1.13's L-BFGS (after minFunc), step for step:
-- the two-loop recursion over the last history_size curvature pairs, a fixed
-- step or the strong Wolfe line search (_strong_wolfe, _cubic_interpolate,
-- ported from Torch7's optim), and the same stopping tests, so the iterates
-- match PyTorch's. All parameters form one flat vector; one parameter group.
-- Scalars (dot products, step sizes) are Lua numbers (doubles).
local ember = require("ember")

local ipairs, pairs, type, tostring, rawget, min, max, abs, sqrt, floor =
  ipairs, pairs, type, tostring, rawget, math.min, math.max, math.abs, math.sqrt, math.floor

local function dot(a, b) return (a * b):sum():item() end
local function abs_max(t) return t:abs():max():item() end

---------------------------------------------------------------- line search
-- the minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2,
-- clamped to bounds (default: between x1 and x2); the midpoint when it has none
local function cubic_interpolate(x1, f1, g1, x2, f2, g2, lo, hi)
  if lo == nil then lo, hi = min(x1, x2), max(x1, x2) end
  local d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
  local d2_square = d1 * d1 - g1 * g2
  if not (d2_square >= 0) then return (lo + hi) / 2 end
  local d2 = sqrt(d2_square)
  local min_pos
  if x1 <= x2 then
    min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
  else
    min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
  end
  return min(max(min_pos, lo), hi)
end

-- a step t along d from x that satisfies the strong Wolfe conditions
-- (c1 = 1e-4, c2 = 0.9, at most 25 evaluations of obj(x, t, d) -> f, g):
-- bracketing, then zooming by cubic interpolation. Returns f, g, t, evals.
-- Its tolerance on the bracket is PyTorch's fixed 1e-9, not the optimizer's
-- tolerance_change (torch.optim.LBFGS does not pass that on either).
local function strong_wolfe(obj, x, t, d, f, g, gtd)
  local c1, c2, max_ls, tolerance_change = 1e-4, 0.9, 25, 1e-9
  local d_norm = abs_max(d)
  local f_new, g_new = obj(x, t, d)
  local evals = 1
  local gtd_new = dot(g_new, d)
  local t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
  local done, ls_iter = false, 0
  local bracket, bracket_f, bracket_g, bracket_gtd
  while ls_iter < max_ls do
    if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev) then
      bracket, bracket_f, bracket_g = { t_prev, t }, { f_prev, f_new }, { g_prev, g_new }
      bracket_gtd = { gtd_prev, gtd_new }
      break
    end
    if abs(gtd_new) <= -c2 * gtd then
      bracket, bracket_f, bracket_g, done = { t }, { f_new }, { g_new }, true
      break
    end
    if gtd_new >= 0 then
      bracket, bracket_f, bracket_g = { t_prev, t }, { f_prev, f_new }, { g_prev, g_new }
      bracket_gtd = { gtd_prev, gtd_new }
      break
    end
    local t_next = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
      t + 0.01 * (t - t_prev), t * 10)
    t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
    t = t_next
    f_new, g_new = obj(x, t, d)
    evals = evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
  end
  if ls_iter == max_ls then
    bracket, bracket_f, bracket_g = { 0, t }, { f, f_new }, { g, g_new }
  end

  -- zoom: shrink the bracket until a point satisfies the conditions
  local insuf_progress = false
  local low, high = 1, 2
  if bracket_f[1] > bracket_f[#bracket_f] then low, high = 2, 1 end
  while not done and ls_iter < max_ls do
    if abs(bracket[2] - bracket[1]) * d_norm < tolerance_change then break end
    t = cubic_interpolate(bracket[1], bracket_f[1], bracket_gtd[1],
      bracket[2], bracket_f[2], bracket_gtd[2])
    -- a t too close to an end of the bracket, twice in a row or outside it,
    -- moves to 0.1 of the bracket's length from the nearer end
    local top, bottom = max(bracket[1], bracket[2]), min(bracket[1], bracket[2])
    local eps = 0.1 * (top - bottom)
    if min(top - t, t - bottom) < eps then
      if insuf_progress or t >= top or t <= bottom then
        if abs(t - top) < abs(t - bottom) then t = top - eps else t = bottom + eps end
        insuf_progress = false
      else
        insuf_progress = true
      end
    else
      insuf_progress = false
    end
    f_new, g_new = obj(x, t, d)
    evals = evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
    if f_new > f + c1 * t * gtd or f_new >= bracket_f[low] then
      -- no sufficient decrease, or not below the low end: the new high end
      bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new, gtd_new
      if bracket_f[1] <= bracket_f[2] then low, high = 1, 2 else low, high = 2, 1 end
    else
      if abs(gtd_new) <= -c2 * gtd then
        done = true
      elseif gtd_new * (bracket[high] - bracket[low]) >= 0 then
        -- the old high end becomes the new low end
        bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
        bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
      end
      bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new, gtd_new
    end
  end
  return bracket_f[low], bracket_g[low], bracket[low], evals
end

---------------------------------------------------------------- the flat parameter vector
local function numel(params)
  local n = 0
  for _, p in ipairs(params) do n = n + p:numel() end
  return n
end

-- all the gradients in one new vector; zeros for a parameter without one
local function gather_flat_grad(params)
  local views = {}
  for i, p in ipairs(params) do
    local g = rawget(p, "_grad")
    views[i] = g and g:reshape({ -1 }) or ember.zeros({ p:numel() }, { dtype = p.dtype })
  end
  return ember.cat(views, 1)
end

-- p = p + t * d, d cut into the parameters' shapes
local function add_step(params, t, d)
  local offset = 0
  for _, p in ipairs(params) do
    local n = p:numel()
    p:add_(d:narrow(1, offset + 1, n):reshape(p:shape()) * t)
    offset = offset + n
  end
end

local function loss_number(name, loss)
  if type(loss) == "number" then return loss end
  if ember.is_tensor(loss) and loss:numel() == 1 then return loss:item() end
  error(("ember.optim.%s: step: the closure must return the loss (a number or a one-element "
    .. "tensor), got %s"):format(name, ember.is_tensor(loss) and "a tensor of "
    .. loss:numel() .. " elements" or tostring(loss)), 0)
end

---------------------------------------------------------------- the step
-- the L-BFGS direction -H*g from the history (two-loop recursion)
local function direction(st, flat_grad)
  local dirs, stps, ro = st.old_dirs, st.old_stps, st.ro
  local al = {}
  local q = -flat_grad
  for i = #dirs, 1, -1 do
    al[i] = dot(stps[i], q) * ro[i]
    q:sub_(dirs[i] * al[i])
  end
  local r = q:mul_(st.H_diag)
  for i = 1, #dirs do
    local be_i = dot(dirs[i], r) * ro[i]
    r:add_(stps[i] * (al[i] - be_i))
  end
  return r
end

-- adds the pair (y, s) of the last step to the history when y's > 1e-10
local function remember(st, flat_grad, history_size)
  local y = flat_grad - st.prev_flat_grad
  local s = st.d * st.t
  local ys = dot(y, s)
  if ys > 1e-10 then
    if #st.old_dirs == history_size then
      table.remove(st.old_dirs, 1)
      table.remove(st.old_stps, 1)
      table.remove(st.ro, 1)
    end
    local n = #st.old_dirs + 1
    st.old_dirs[n], st.old_stps[n], st.ro[n] = y, s, 1 / ys
    st.H_diag = ys / dot(y, y)
  end
end

local function lbfgs_step(self, closure)
  local name = "LBFGS"
  local group = self.param_groups[1]
  local params = group.params
  local lr, max_iter, max_eval = group.lr, group.max_iter, group.max_eval
  local tolerance_grad, tolerance_change = group.tolerance_grad, group.tolerance_change
  local st = self.state[params[1]]
  if st == nil then
    st = { func_evals = 0, n_iter = 0 }
    self.state[params[1]] = st
  end

  local function evaluate()
    local out = ember.enable_grad(closure)
    return out, loss_number(name, out)
  end
  local orig_loss, loss = evaluate()
  local current_evals = 1
  st.func_evals = st.func_evals + 1
  local flat_grad = gather_flat_grad(params)
  if abs_max(flat_grad) <= tolerance_grad then return orig_loss end

  local function obj(x, t, d)   -- the loss and gradient at x + t*d; the parameters stay at x
    add_step(params, t, d)
    local _, f = evaluate()
    local g = gather_flat_grad(params)
    for i, p in ipairs(params) do p:copy_(x[i]) end
    return f, g
  end

  local n_iter = 0
  while n_iter < max_iter do
    n_iter = n_iter + 1
    st.n_iter = st.n_iter + 1
    if st.n_iter == 1 then
      st.d, st.old_dirs, st.old_stps, st.ro, st.H_diag = -flat_grad, {}, {}, {}, 1
    else
      remember(st, flat_grad, group.history_size)
      st.d = direction(st, flat_grad)
    end
    local d = st.d
    if st.prev_flat_grad == nil then st.prev_flat_grad = flat_grad:clone()
    else st.prev_flat_grad:copy_(flat_grad) end
    st.prev_loss = loss

    local t = lr
    if st.n_iter == 1 then t = min(1, 1 / flat_grad:abs():sum():item()) * lr end
    st.t = t
    local gtd = dot(flat_grad, d)
    if gtd > -tolerance_change then break end

    local ls_evals = 0
    local opt_cond = false
    if group.line_search_fn == "strong_wolfe" then
      local x = {}
      for i, p in ipairs(params) do x[i] = p:clone() end
      loss, flat_grad, t, ls_evals =
        strong_wolfe(obj, x, t, d, loss, flat_grad, gtd)
      add_step(params, t, d)
      opt_cond = abs_max(flat_grad) <= tolerance_grad
    else
      add_step(params, t, d)
      if n_iter ~= max_iter then
        -- no re-evaluation after the last iteration: the next step starts with one
        local _
        _, loss = evaluate()
        flat_grad = gather_flat_grad(params)
        opt_cond = abs_max(flat_grad) <= tolerance_grad
        ls_evals = 1
      end
    end
    st.t = t
    current_evals = current_evals + ls_evals
    st.func_evals = st.func_evals + ls_evals

    if n_iter == max_iter or current_evals >= max_eval or opt_cond then break end
    if abs_max(d) * abs(t) <= tolerance_change then break end
    if abs(loss - st.prev_loss) < tolerance_change then break end
  end
  return orig_loss
end

---------------------------------------------------------------- the class
return function(optim, I)
  local fail, show = I.fail, I.show

  local function line_search(v)
    if v ~= nil and v ~= "strong_wolfe" then return 'must be nil or "strong_wolfe"' end
  end

  local LBFGS = I.class("LBFGS", {
    { "lr", 1, I.nonneg },
    { "max_iter", 20, I.positive_int },
    { "max_eval", nil, I.positive_int },
    { "tolerance_grad", 1e-7, I.nonneg },
    { "tolerance_change", 1e-9, I.nonneg },
    { "history_size", 100, I.positive_int },
    { "line_search_fn", nil, line_search },
  })
  optim.LBFGS = LBFGS

  -- max_eval defaults to floor(max_iter * 5 / 4), as in PyTorch
  local make = getmetatable(LBFGS).__call
  getmetatable(LBFGS).__call = function(cls, params, opts)
    if opts == nil then opts = {} end
    if type(opts) == "table" and not ember.is_tensor(opts) and opts.max_eval == nil then
      local max_iter = opts.max_iter == nil and 20 or opts.max_iter
      if I.positive_int(max_iter) == nil then
        local o = I.copy_value(opts)
        o.max_eval = floor(max_iter * 5 / 4)
        opts = o
      end
    end
    return make(cls, params, opts)
  end

  function LBFGS:add_param_group(group)
    if #self.param_groups > 0 then
      fail("LBFGS", "takes one parameter group (all the parameters form one vector), got a second")
    end
    return optim.Optimizer.add_param_group(self, group)
  end

  -- opt:step(closure): up to max_iter iterations; closure() must zero the
  -- gradients, compute the loss, fill every .grad and return the loss
  function LBFGS:step(closure)
    if type(closure) ~= "function" then
      fail("LBFGS", "step: a closure that computes the loss and the gradients is required, got %s",
        show(closure))
    end
    local loss = ember.no_grad(lbfgs_step, self, closure)
    ember._keep_reachable(self.state)   -- state made inside an ember.tidy outlives it
    return loss
  end

  ---------------------------------------------------------------- state_dict
  -- The state is the first parameter's entry, as in PyTorch: numbers
  -- func_evals, n_iter, t, H_diag, prev_loss; vectors d and prev_flat_grad;
  -- lists old_dirs and old_stps of vectors and ro of numbers.
  local VECTORS, LISTS = { "d", "prev_flat_grad" }, { "old_dirs", "old_stps" }
  local NUMBERS = { "func_evals", "n_iter", "t", "H_diag", "prev_loss" }

  local function clone_state(st, dtype)
    local c = {}
    for _, k in ipairs(NUMBERS) do c[k] = st[k] end
    for _, k in ipairs(VECTORS) do c[k] = st[k] and st[k]:to(dtype):clone() end
    for _, k in ipairs(LISTS) do
      if st[k] then
        c[k] = {}
        for i, v in ipairs(st[k]) do c[k][i] = v:to(dtype):clone() end
      end
    end
    c.ro = I.copy_value(st.ro)
    return c
  end

  function LBFGS:state_dict()
    local sd = optim.Optimizer.state_dict(self)
    local p1 = self.param_groups[1].params[1]
    local st = self.state[p1]
    sd.state = {}
    if st then sd.state[1] = ember.no_grad(clone_state, st, p1.dtype) end
    return sd
  end

  -- the reason st cannot be LBFGS's state for n parameters' worth of values, or nil
  local function bad_state(st, n)
    if type(st) ~= "table" or ember.is_tensor(st) then
      return "state[1] must be a table, got " .. show(st)
    end
    for _, k in ipairs({ "func_evals", "n_iter" }) do
      local v = st[k]
      if not (I.finite(v) and v >= 0 and v == floor(v)) then
        return ("state[1].%s must be a non-negative integer, got %s"):format(k, show(st[k]))
      end
    end
    for _, k in ipairs(NUMBERS) do
      if st[k] ~= nil and not I.finite(st[k]) then
        return ("state[1].%s must be a finite number, got %s"):format(k, show(st[k]))
      end
    end
    if st.n_iter > 0 then   -- the first iteration set every field
      for _, k in ipairs({ "d", "t", "H_diag", "prev_flat_grad", "prev_loss", "ro" }) do
        if st[k] == nil then
          return ("state[1] has n_iter = %d but no %s"):format(st.n_iter, k)
        end
      end
    end
    local function vector(v, what)
      if not (ember.is_tensor(v) and I.same_shape(v:shape(), { n })) then
        return ("%s must be a tensor of shape {%d} (all the parameters' elements), got %s"):format(
          what, n, ember.is_tensor(v) and "shape " .. I.shape_str(v:shape()) or show(v))
      end
    end
    for _, k in ipairs(VECTORS) do
      if st[k] ~= nil then
        local msg = vector(st[k], "state[1]." .. k)
        if msg then return msg end
      end
    end
    local len = st.ro and #st.ro
    for _, k in ipairs(LISTS) do
      local list = st[k]
      if list ~= nil or len ~= nil then
        if type(list) ~= "table" or ember.is_tensor(list) or #list ~= len then
          return ("state[1].%s must be a list of %s tensors, as long as state[1].ro"):format(k,
            tostring(len))
        end
        for i, v in ipairs(list) do
          local msg = vector(v, ("state[1].%s[%d]"):format(k, i))
          if msg then return msg end
        end
      end
    end
    for i = 1, len or 0 do
      if not I.finite(st.ro[i]) then
        return ("state[1].ro[%d] must be a finite number"):format(i)
      end
    end
  end

  function LBFGS:load_state_dict(sd)
    if type(sd) ~= "table" or ember.is_tensor(sd) then
      return optim.Optimizer.load_state_dict(self, sd)   -- raises its error for sd
    end
    local state = sd.state
    if type(state) == "table" and not ember.is_tensor(state) then
      for k in pairs(state) do
        if k ~= 1 then
          fail("LBFGS", "load_state_dict: the state has an entry %s; LBFGS keeps only state[1]",
            show(k))
        end
      end
      if state[1] ~= nil then
        local msg = bad_state(state[1], numel(self.param_groups[1].params))
        if msg then fail("LBFGS", "load_state_dict: %s", msg) end
      end
    end
    optim.Optimizer.load_state_dict(self, { param_groups = sd.param_groups })
    local p1 = self.param_groups[1].params[1]
    if state and state[1] then self.state[p1] = ember.no_grad(clone_state, state[1], p1.dtype) end
  end
end
