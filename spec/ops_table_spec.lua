-- Every op in core/src/ops/ops.def must be exercised by some spec: adding an op
-- is one table line, a kernel, a grad rule and a spec.
describe("the op table", function()
  it("has a spec for every op", function()
    local specs = {}
    for _, path in ipairs({ "tensor", "reduce", "shape", "autograd", "gradcheck", "nn", "functional", "inplace", "rnn",
      "batch_norm", "convnets", "more_layers", "tensorlib", "tensorlib_gaps", "linalg", "index_ops", "nn_kernels" }) do
      local h = io.open("spec/" .. path .. "_spec.lua", "rb")
      if h then specs[#specs + 1] = h:read("*a"); h:close() end
    end
    local all = table.concat(specs, "\n")
    -- ops reached from Lua under another name
    local alias = { to_dtype = ":to%(", to_device = ":cuda%(", amax_all = ":max%(%)", amin_all = ":min%(%)",
      max_dim = ":max%(%d", min_dim = ":min%(%d", sum_to = "sum_to", scatter_add = "gather",
      index_add = "index_select", conv2d_backward_input = "conv2d", conv2d_backward_weight = "conv2d",
      max_pool2d_backward = "max_pool2d", avg_pool2d_backward = "avg_pool2d", clone = ":clone%(",
      relu_backward = "ember_relu_backward%(", relu_bias_backward = "ember_relu_bias_backward%(",
      batch_norm_backward = "ember_batch_norm_backward%(", layer_norm_backward = "ember_layer_norm_backward%(",
      softmax_backward = "ember_softmax_backward", log_softmax_backward = "ember_log_softmax_backward",
      cross_entropy_backward = "ember_cross_entropy_backward%(", gelu_backward = "ember_gelu_backward%(", conv2d_relu_backward = "conv2d_relu%(",
      batch_norm_act = "training = true, activation = act",
      batch_norm_act_backward = "training = true, activation = act", channel_affine = "training = false, activation",
      conv2d_relu_max_pool2d_backward = "conv2d_relu_max_pool2d%(",
      -- what autograd records for a write through a view
      as_strided = ":narrow%(1, 2, 1%):mul_%(x:narrow", as_strided_scatter = ":narrow%(1, 2, 1%):mul_%(x:narrow",
      linalg_inv = "linalg%.inv%(", linalg_slogdet = "linalg%.slogdet%(", linalg_solve = "linalg%.solve%(",
      linalg_solve_triangular = "linalg%.solve_triangular%(",
      linalg_cholesky = "linalg%.cholesky%(", linalg_eigh = "linalg%.eigh%(", linalg_qr = "linalg%.qr%(",
      linalg_svd = "linalg%.svd%(", linalg_det = "linalg%.det%(", linalg_lstsq = "linalg%.lstsq%(", linalg_lu = "linalg%.lu%(", linalg_cholesky_info = "cholesky_ex%(" }
    local missing = {}
    for _, op in ipairs(require("ember.optable")) do   -- written from ops.def by the build
      local name = op.name
      local pat = alias[name] or ("[:%.]" .. name .. "[_]?%(")
      if not all:find(pat) then missing[#missing + 1] = name end
    end
    assert.are.same({}, missing)
  end)
end)
