-- ember.nn.utils: PyTorch's torch.nn.utils helpers for parameter lists:
-- gradient clipping (the functions of ember.optim, under PyTorch's names
-- here too) and the flattening of parameters into one vector and back.
local ember = require("ember")
local errors = require("ember.errors")

local U = {}

local function fail(op, fmt, ...) errors.fail("nn.utils." .. op, fmt, ...) end

-- a list of tensors from a tensor or a list (a Module's parameters())
local function tensor_list(op, params)
  if ember.is_tensor(params) then return { params } end
  if type(params) ~= "table" then fail(op, "expected a tensor or a list of tensors, got %s", type(params)) end
  for i = 1, #params do
    if not ember.is_tensor(params[i]) then fail(op, "parameters[%d] must be a tensor, got %s", i, type(params[i])) end
  end
  return params
end

-- clip_grad_norm_(params, max_norm, norm_type?), clip_grad_value_(params, clip_value)
function U.clip_grad_norm_(...) return ember.optim.clip_grad_norm(...) end
function U.clip_grad_value_(...) return ember.optim.clip_grad_value(...) end

-- every parameter flattened and concatenated into one 1-D tensor (with
-- gradients to the parameters); all must share one device and dtype
function U.parameters_to_vector(params)
  local op = "parameters_to_vector"
  local list = tensor_list(op, params)
  if #list == 0 then fail(op, "expected at least one parameter") end
  local flat = {}
  for i, p in ipairs(list) do
    if p.device ~= list[1].device or p.dtype ~= list[1].dtype then
      fail(op, "parameters[%d] is %s on %s; parameters[1] is %s on %s", i, p.dtype, p.device, list[1].dtype,
        list[1].device)
    end
    flat[i] = p:reshape({ -1 })
  end
  return ember.cat(flat, 1)
end

-- copies consecutive slices of the 1-D `vec` into the parameters in place
-- (outside any gradient recording), in order; vec must hold exactly as
-- many elements as the parameters together
function U.vector_to_parameters(vec, params)
  local op = "vector_to_parameters"
  if not ember.is_tensor(vec) then fail(op, "expected a tensor vector, got %s", type(vec)) end
  if vec:dim() ~= 1 then fail(op, "expected a 1-D vector, got %s", errors.shape(vec)) end
  local list = tensor_list(op, params)
  local total = 0
  for _, p in ipairs(list) do total = total + p:numel() end
  if total ~= vec:numel() then
    fail(op, "the vector has %d elements; the %d parameters hold %d", vec:numel(), #list, total)
  end
  ember.no_grad(function()
    local at = 1
    for _, p in ipairs(list) do
      local n = p:numel()
      if n > 0 then p:copy_(vec:narrow(1, at, n):reshape(p:shape())) end
      at = at + n
    end
  end)
end

return U
