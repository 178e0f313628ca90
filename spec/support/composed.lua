-- What the grad rules composed from recorded ops before the fused backward
-- kernels: the references nn_kernels_spec checks the kernels against and the
-- baselines bench/nn_kernels.lua times them against.
local M = {}

-- gelu's slope d gelu(x) / dx (gelu_backward's); tanh_form: PyTorch's approximate = "tanh"
function M.gelu_slope(x, tanh_form)
  if tanh_form then
    local k, c = math.sqrt(2 / math.pi), 0.044715
    local t = ((x + x * x * x * c) * k):tanh()
    return (t + 1) * 0.5 + x * 0.5 * (1 - t * t) * ((x * x * (3 * c) + 1) * k)
  end
  return ((x * math.sqrt(0.5)):erf() + 1) * 0.5 + x * (x * x * -0.5):exp() * (1 / math.sqrt(2 * math.pi))
end

-- the gradient of softmax (log: log_softmax) along dim given its output y and
-- the output's gradient g: the four ops (softmax_backward's, log_softmax_backward's)
function M.softmax_backward(log, g, y, dim)
  if log then return g - y:exp() * g:sum(dim, true) end
  return y * (g - (g * y):sum(dim, true))
end

return M
