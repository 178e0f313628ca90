-- The tensor library's logic: any, all, the logical ops, isclose, allclose,
-- equal.
-- Part of the everyday tensor library: lua/ember/tensorlib.lua passes
-- the helpers the parts share as L. Dims, index arguments and index
-- results are 1-based, as everywhere in ember.
return function(ember, L)
  local fail, errors, huge, is_float, def = L.fail, L.errors, L.huge, L.is_float, L.def
  local options, need_tensor, need_bool, pdim = L.options, L.need_tensor, L.need_bool, L.pdim
  local like_opts = L.like_opts
  ---------------------------------------------------------------- logic
  local function bool_of(t) return t.dtype == "bool" and t or t:ne(0) end
  -- any / all of every element (0-d) or along dim
  local function any_all(op, is_any)
    return function(t, dim, keepdim)
      need_tensor(op, t, 1)
      keepdim = need_bool(op, "keepdim", keepdim)
      if dim == nil and keepdim then fail(op, "keepdim needs a dim") end
      local m = is_any and bool_of(t) or bool_of(t):logical_not()
      local c = dim == nil and m:sum() or m:sum(pdim(op, dim, math.max(t:dim(), 1)), keepdim)
      return is_any and c:gt(0) or c:eq(0)
    end
  end
  def("any", 3, any_all("any", true), true)
  def("all", 3, any_all("all", false), true)
  def("isnan", 1, function(t)
    need_tensor("isnan", t, 1)
    if not is_float(t) then return ember.zeros(t:shape(), like_opts(t, "bool")) end
    return t:ne(t)
  end, true)
  def("isinf", 1, function(t)
    need_tensor("isinf", t, 1)
    if not is_float(t) then return ember.zeros(t:shape(), like_opts(t, "bool")) end
    return t:abs():eq(huge)
  end, true)
  def("isfinite", 1, function(t)
    need_tensor("isfinite", t, 1)
    if not is_float(t) then return ember.ones(t:shape(), like_opts(t, "bool")) end
    return (t - t):eq(0)
  end, true)
  local function logical(op, f)
    return function(a, b)
      need_tensor(op, a, 1)
      need_tensor(op, b, 2)
      return (f(bool_of(a), bool_of(b)))   -- not a tail call: an error names this op (errors.lua)
    end
  end
  def("logical_and", 2, logical("logical_and", function(a, b) return a:mul(b) end), true)
  def("logical_or", 2, logical("logical_or", function(a, b) return ember.maximum(a, b) end), true)
  def("logical_xor", 2, logical("logical_xor", function(a, b) return a:ne(b) end), true)
  def("logical_not", 1, function(t)
    need_tensor("logical_not", t, 1)
    return t:eq(0)
  end, true)
  -- |a - b| <= atol + rtol |b| elementwise (bool); NaNs equal when equal_nan
  local function isclose(op, a, b, rtol, atol, equal_nan)
    need_tensor(op, a, 1)
    need_tensor(op, b, 2)
    if type(rtol) == "table" then
      if atol ~= nil or equal_nan ~= nil then fail(op, "takes an options table or (rtol, atol, equal_nan), not both") end
      local o = options(op, rtol, { rtol = true, atol = true, equal_nan = true })
      rtol, atol, equal_nan = o.rtol, o.atol, o.equal_nan
    end
    rtol, atol = rtol or 1e-5, atol or 1e-8
    if type(rtol) ~= "number" or not (rtol >= 0) then fail(op, "rtol must be a number >= 0, got " .. tostring(rtol)) end
    if type(atol) ~= "number" or not (atol >= 0) then fail(op, "atol must be a number >= 0, got " .. tostring(atol)) end
    equal_nan = need_bool(op, "equal_nan", equal_nan)
    local close = a:eq(b)
    if is_float(a) or is_float(b) then
      local af, bf = a, b
      if not is_float(af) then af = af:to(bf.dtype) end
      if not is_float(bf) then bf = bf:to(af.dtype) end
      local diff = (af - bf):abs()
      close = close:logical_or(diff:le(bf:abs() * rtol + atol):logical_and(diff:ne(huge)))
      if equal_nan then close = close:logical_or(af:ne(af):logical_and(bf:ne(bf))) end
    end
    return close
  end
  def("isclose", 5, function(a, b, rtol, atol, equal_nan)
    return isclose("isclose", a, b, rtol, atol, equal_nan)
  end, true)
  def("allclose", 5, function(a, b, rtol, atol, equal_nan)
    local c = isclose("allclose", a, b, rtol, atol, equal_nan)
    return c:numel() == 0 or c:all():item() == true or c:all():item() == 1
  end, true)
  -- same shape and the same values (a Lua boolean)
  def("equal", 2, function(a, b)
    need_tensor("equal", a, 1)
    need_tensor("equal", b, 2)
    if not errors.same_shape(a, b) then return false end
    if a:numel() == 0 then return true end
    local r = a:eq(b):all():item()
    return r == true or r == 1
  end, true)
  L.bool_of = bool_of
end
