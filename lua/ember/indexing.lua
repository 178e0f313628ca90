-- Bracket indexing (API.md, "brackets"): Torch7's forms, 1-based, negative
-- counting from the end. Reading gives a view (select, narrow), a Lua number
-- (every dim indexed by a number) or a gather (bool mask, int64 index), so
-- autograd records it; writing is an in-place write into the view (fill_,
-- copy_) or masked_fill_, recorded by the rules of docs/autodiff.md.
--   x[i]                x:select(1, i)
--   x[{i, j}]           a number when every dim is given, else a view
--   x[{{}, {2, 4}}]     {} the whole dim, {a, b} rows a..b, {a} row a kept
--   x[mask], x[idx]     the elements where a bool mask is true; rows idx
--   x[...] = v          v a number (fill) or a tensor (copy); x[mask] = number
local ffi = require("ffi")
local errors = require("ember.errors")

return function(ember)
  local is_tensor = ember.is_tensor
  local floor = math.floor

  local function fail(msg) errors.fail("index", msg) end
  local shape_str = errors.shape
  local function is_int(v) return type(v) == "number" and v == floor(v) end

  -- the view a selector table names, and whether it named one element
  local function view_of(t, key)
    local nd = t:dim()
    local n = table.maxn(key)
    if n > nd then
      fail(("%d indices for a tensor of shape %s"):format(n, shape_str(t)))
    end
    local v, d, numbers = t, 1, 0
    for i = 1, n do
      local k = key[i]
      if is_int(k) then
        local size = v:size(d)
        if k == 0 or k > size or k < -size then
          fail(("index %d out of range for dim %d of size %d (shape %s)"):format(k, i, size, shape_str(t)))
        end
        v = v:select(d, k)
        numbers = numbers + 1
      elseif type(k) == "table" and not is_tensor(k) then
        local size, m = v:size(d), table.maxn(k)
        if m == 0 then
          d = d + 1
        elseif m <= 2 and is_int(k[1]) and (m == 1 or is_int(k[2])) then
          local a, b = k[1], m == 2 and k[2] or k[1]
          if a < 0 then a = a + size + 1 end
          if b < 0 then b = b + size + 1 end
          if a < 1 or b > size or b < a then
            fail(("range {%s} out of range for dim %d of size %d (shape %s)"):format(
              table.concat({ tostring(k[1]), m == 2 and tostring(k[2]) or nil }, ", "), i, size, shape_str(t)))
          end
          v = v:narrow(d, a, b - a + 1)
          d = d + 1
        else
          fail(("selector %d must be a number, {} or {first, last} of integers"):format(i))
        end
      elseif k == nil then
        fail(("selector %d is nil"):format(i))
      else
        fail(("selector %d must be a number or a range table, got %s"):format(i, type(k)))
      end
    end
    return v, numbers == nd
  end

  -- the elements of t where the bool mask (t's shape) is true, as a 1-D gather
  local function masked_select(t, mask)
    if not errors.same_shape(mask, t) then
      fail(("mask of shape %s does not match a tensor of shape %s"):format(shape_str(mask), shape_str(t)))
    end
    local m = (mask.device == "cpu" and mask or mask:to("cpu")):contiguous()   -- read on the host
    local n = m:numel()
    local p = ffi.cast("const uint8_t *", m:data_ptr())
    local rows = {}
    for i = 0, n - 1 do
      if p[i] ~= 0 then rows[#rows + 1] = i + 1 end
    end
    local flat = t:reshape({ n })
    if #rows == 0 then return flat:narrow(1, 1, 0) end
    return flat:index_select(1, ember.tensor(rows, { dtype = "int64", device = t.device }))
  end

  local function index_tensor_kind(k)
    if k.dtype == "bool" then return "mask" end
    if k.dtype == "int64" or k.dtype == "int32" then return "index" end
    fail("an index tensor must be bool, int64 or int32, got " .. k.dtype)
  end

  function ember._index_read(t, k)
    if type(k) == "number" then
      if not is_int(k) then fail("index " .. k .. " is not an integer") end
      local size = t:dim() > 0 and t:size(1) or 0
      if t:dim() == 0 then fail("a 0-d tensor cannot be indexed") end
      if k == 0 or k > size or k < -size then
        fail(("index %d out of range for dim 1 of size %d (shape %s)"):format(k, size, shape_str(t)))
      end
      return t:select(1, k)
    end
    if is_tensor(k) then
      if index_tensor_kind(k) == "mask" then return masked_select(t, k) end
      return t:index_select(1, k)
    end
    if type(k) == "table" then
      local v, element = view_of(t, k)
      if element then return v:item() end
      return v
    end
    fail("cannot index a tensor with a " .. type(k))
  end

  local function assign(target, v)
    if type(v) == "number" or type(v) == "boolean" then
      target:fill_(v)
    elseif is_tensor(v) then
      target:copy_(v)
    else
      fail("the value assigned must be a number or a tensor, got " .. type(v))
    end
  end

  function ember._index_write(t, k, v)
    if type(k) == "number" then
      assign(ember._index_read(t, k), v)
    elseif is_tensor(k) then
      if index_tensor_kind(k) ~= "mask" then
        fail("assignment through an int64 index is not supported; use index_add_ or a bool mask")
      end
      if not (type(v) == "number" or (is_tensor(v) and v:numel() == 1)) then
        fail("x[mask] = v takes a number or a one-element tensor")
      end
      if not errors.same_shape(k, t) then
        fail(("mask of shape %s does not match a tensor of shape %s"):format(shape_str(k), shape_str(t)))
      end
      t:masked_fill_(k, v)
    elseif type(k) == "table" then
      assign((view_of(t, k)), v)
    else
      fail("cannot index a tensor with a " .. type(k))
    end
  end
end
