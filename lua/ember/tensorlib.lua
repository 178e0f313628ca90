-- The everyday tensor library (issue 32, part A): scans, sorting, logic,
-- splitting, triangles and diagonals, scatter, products, einsum, counting,
-- and linear algebra (ember.linalg, in linalg.lua, loaded from here). cumsum, cumprod, sort and the LAPACK ops
-- are ops of the table (ops.def); everything else is composed from declared
-- ops, so it runs on every device and differentiates through them. Dims,
-- index arguments and index results are 1-based, as everywhere in ember.
-- The parts by concern are lua/ember/tensorlib/*.lua (scans and sorting,
-- logic, shape, products and counting); searching and linear algebra are here.
local ffi = require("ffi")

return function(ember, H)
  local C = ember._C
  local Tensor, check, fail, wrap, tensor_arg = H.Tensor, H.check, H.fail, H.wrap, H.tensor_arg
  local dim0, is_tensor, out1, out2 = H.dim0, H.is_tensor, H.out1, H.out2
  local DTYPES, I32, I64 = H.DTYPES, H.I32, H.I64
  local errors = require("ember.errors")
  local floor, huge = math.floor, math.huge
  local unpack = table.unpack or unpack
  local sh = errors.shape

  local function is_int(x) return type(x) == "number" and x == floor(x) end
  local function is_float(t) local d = t.dtype return d == "float32" or d == "float64" or d == "float16" or d == "bfloat16" end

  -- ember.<name> and t:<name>() (method = true) taking at most nargs
  -- arguments: fn has exactly nargs parameters, and init.lua's wrappers
  -- (errors.arity_checked) raise for a value past them, counted as the
  -- caller counts ("ember.Tensor:sort: extra argument 3 (5): it takes 2
  -- (dim, descending)").
  local function def(name, nargs, fn, method)
    assert(errors.nparams(fn) == nargs, name .. ": fn must have exactly nargs parameters")
    ember[name] = fn
    if method then Tensor[name] = fn end
    return fn
  end

  -- an options table with only the keys allowed (a set); nil gives {}
  local options = errors.options

  local function need_tensor(op, x, n)
    if not is_tensor(x) then errors.argument(op, n, "a tensor", x) end
    tensor_arg(op, x, n)
    return x
  end
  local function need_bool(op, what, v)
    if v ~= nil and type(v) ~= "boolean" then fail(op, what .. " must be a boolean, got " .. errors.show(v)) end
    return v == true
  end
  local function need_int(op, what, v, lo)
    if not is_int(v) or (lo and v < lo) then
      fail(op, ("%s must be an integer%s, got %s"):format(what, lo and (" >= " .. lo) or "", tostring(v)))
    end
    return v
  end
  -- a 1-based (or negative) dim as a positive 1-based one
  local function pdim(op, d, nd) return dim0(op, d, nd) + 1 end
  local function like_opts(t, dtype) return { dtype = dtype or t.dtype, device = t.device } end
  local function arange_on(n, t) return ember.arange(n, { dtype = "int64", device = t.device }) end

  -- the helpers the parts share; scans adds with_dtype and sort_raw, logic
  -- bool_of, for the parts after them
  local L = { C = C, Tensor = Tensor, check = check, fail = fail, wrap = wrap,
    tensor_arg = tensor_arg, dim0 = dim0, is_tensor = is_tensor, out1 = out1, out2 = out2,
    errors = errors, floor = floor, huge = huge, unpack = unpack, sh = sh, is_int = is_int,
    is_float = is_float, def = def, options = options, need_tensor = need_tensor,
    need_bool = need_bool, need_int = need_int, pdim = pdim, like_opts = like_opts,
    arange_on = arange_on }
  for _, part in ipairs({ "scans", "logic", "shape", "products" }) do
    require("ember.tensorlib." .. part)(ember, L)
  end

  ---------------------------------------------------------------- searching
  -- insertion points (1-based) that keep sorted_sequence's last dim sorted:
  -- before equal values, or after them with {right = true} (or side = "right")
  local function search(op, seq, v, right)
    if seq:dim() == 0 then fail(op, "the sorted sequence must have at least 1 dim") end
    local scalar = type(v) == "number"
    if scalar then v = ember.tensor({ v }, { dtype = seq.dtype, device = seq.device }) end
    need_tensor(op, v, 2)
    if seq:dim() > 1 then
      local ok = v:dim() == seq:dim()
      for d = 1, seq:dim() - 1 do ok = ok and v:size(d) == seq:size(d) end
      if not ok then
        fail(op, ("values of shape %s must match the leading dims of the sequence %s"):format(sh(v), sh(seq)))
      end
    end
    check(C.ember_searchsorted(seq._c, v._c, right and 1 or 0, out1))
    local r = wrap(out1[0]) + 1
    if scalar then r = r:reshape({}) end
    return r
  end
  def("searchsorted", 3, function(seq, v, opts)
    need_tensor("searchsorted", seq, 1)
    local o = options("searchsorted", opts, { right = true, side = true })
    local right = need_bool("searchsorted", "right", o.right)
    if o.side ~= nil then
      if o.side ~= "left" and o.side ~= "right" then
        fail("searchsorted", "side must be \"left\" or \"right\", got " .. tostring(o.side))
      end
      if o.right ~= nil and right ~= (o.side == "right") then fail("searchsorted", "right and side disagree") end
      right = o.side == "right"
    end
    return search("searchsorted", seq, v, right)
  end)
  -- the bucket (1-based) of each element among boundaries (1-D, sorted):
  -- bucket i holds boundaries[i-1] < x <= boundaries[i] ({right = true}:
  -- boundaries[i-1] <= x < boundaries[i]); n + 1 past the last
  def("bucketize", 3, function(t, boundaries, opts)
    if type(t) ~= "number" then need_tensor("bucketize", t, 1) end
    need_tensor("bucketize", boundaries, 2)
    if boundaries:dim() ~= 1 then fail("bucketize", "boundaries must be 1-D, got shape " .. sh(boundaries)) end
    local o = options("bucketize", opts, { right = true })
    return search("bucketize", boundaries, t, need_bool("bucketize", "right", o.right))
  end)

  ---------------------------------------------------------------- linear algebra: linalg.lua
  require("ember.linalg")(ember, H, { options = options, need_tensor = need_tensor, need_bool = need_bool,
    pdim = pdim, is_float = is_float })
end
