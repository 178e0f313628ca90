-- gelu's slope d gelu(x) / dx as its grad rule composed it from recorded ops
-- before the fused backward (gelu_backward): the reference nn_kernels_spec
-- checks the fused op against and the baseline bench/nn_kernels.lua times it
-- against. tanh_form: PyTorch's approximate = "tanh".
return function(x, tanh_form)
  if tanh_form then
    local k, c = math.sqrt(2 / math.pi), 0.044715
    local t = ((x + x * x * x * c) * k):tanh()
    return (t + 1) * 0.5 + x * 0.5 * (1 - t * t) * ((x * x * (3 * c) + 1) * k)
  end
  return ((x * math.sqrt(0.5)):erf() + 1) * 0.5 + x * (x * x * -0.5):exp() * (1 / math.sqrt(2 * math.pi))
end
