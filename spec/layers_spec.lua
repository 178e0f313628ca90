-- ember.nn's convolutions, norms, padding, interpolation and adaptive pooling
-- (conv.lua, norm.lua, resize.lua) against PyTorch 1.13
-- (spec/fixtures/layers_torch.lua, written by gen_layers.py): values and
-- gradients through a GradManager in float64, again in float32 on
-- non-contiguous inputs; gradcheck and gradgradcheck in float64; the modules'
-- parameters, initialisation, state and modes; bad input.
local H = require("helpers")
local ember = H.ember
local nn, F = ember.nn, ember.nn.functional
local CASES = dofile("spec/fixtures/layers_torch.lua")

local F64 = { dtype = "float64" }
local function randn(shape) return ember.randn(shape, F64) end

-- each case's call, given its tensors by name and its other arguments
local CALL = {
  conv1d = function(t, a) return F.conv1d(t.x, t.w, t.b, a.opts) end,
  conv_transpose2d = function(t, a) return F.conv_transpose2d(t.x, t.w, t.b, a.opts) end,
  group_norm = function(t, a) return F.group_norm(t.x, a.num_groups, t.w, t.b, a.opts) end,
  instance_norm = function(t, a) return F.instance_norm(t.x, t.rm, t.rv, t.w, t.b, a.opts) end,
  pad = function(t, a) return F.pad(t.x, a.pad, a.mode, a.value) end,
  interpolate = function(t, a) return F.interpolate(t.x, a.opts) end,
  adaptive_avg_pool2d = function(t, a) return F.adaptive_avg_pool2d(t.x, a.output_size) end,
}

-- the case's output and tensors (with .grad of (out * cot):sum()), each
-- tensor made in dtype and passed through layout
local function run(c, dtype, layout)
  local t, attach = {}, {}
  for name, v in pairs(c.tensors) do
    t[name] = layout(ember.tensor(v, { dtype = dtype }))
    if c.grads[name] then attach[#attach + 1] = t[name] end
  end
  local gm = ember.autodiff.GradManager():attach(attach)
  gm:record()
  local out = CALL[c.fn](t, c.args)
  -- a case with no gradient to take (nearest's index-only inputs) skips
  -- backward: one that reaches no attached tensor raises since issue 26
  if #attach > 0 then gm:backward((out * ember.tensor(c.cot, { dtype = dtype })):sum()) else gm:release() end
  return out, t
end

-- t's values in a non-contiguous layout: transposed where its last two dims
-- allow, else every other element of a larger buffer
local function noncontig(t)
  if t:dim() >= 2 and t:size(-1) > 1 and t:size(-2) > 1 then return H.noncontig(t) end
  local n = t:numel()
  local big = ember.zeros({ n, 2 }, { dtype = t.dtype })
  big:select(2, 1):copy_(t:reshape({ n }))
  local s = big:select(2, 1):view(t:shape())
  assert(not s:is_contiguous())
  return s
end

local function matches(c, tol, out, t)
  H.same(out, c.out, tol, c.shape)
  for name, g in pairs(c.grads) do H.same(t[name].grad, g, tol) end
  for name, v in pairs(c.after or {}) do H.same(t[name], v, tol) end
end

describe("convolutions, norms and resizing against PyTorch 1.13", function()
  it("has cases for every function", function()
    H.has_cases(CASES, CALL)
  end)

  for _, c in ipairs(CASES) do
    it(c.name .. ": value and gradients in float64", function()
      matches(c, 1e-10, run(c, "float64", function(x) return x end))
    end)
    it(c.name .. ": float32 on non-contiguous inputs", function()
      local out, t = run(c, "float32", noncontig)
      assert.are.equal("float32", out.dtype)
      local want = c.f32 and { out = c.f32.out, grads = c.f32.grads, shape = c.shape } or c
      matches(want, 2e-4, out, t)
    end)
  end
end)

describe("second derivatives and finite differences", function()
  local check = H.gradchecks

  it("conv1d with stride, padding, dilation and groups", function()
    local o = { stride = 2, padding = 1, dilation = 2, groups = 2 }
    check(function(x, w, b) return F.conv1d(x, w, b, o) end,
      { randn({ 1, 4, 7 }), randn({ 4, 2, 3 }), randn({ 4 }) })
  end)

  it("conv_transpose2d with groups and output_padding, and past the stride", function()
    local o = { stride = { 2, 1 }, padding = 1, output_padding = { 1, 0 }, groups = 2 }
    check(function(x, w, b) return F.conv_transpose2d(x, w, b, o) end,
      { randn({ 1, 4, 2, 3 }), randn({ 4, 1, 2, 3 }), randn({ 2 }) })
    check(function(x, w) return F.conv_transpose2d(x, w, { dilation = 2, output_padding = 1 }) end,
      { randn({ 1, 2, 2, 2 }), randn({ 2, 1, 2, 2 }) })
  end)

  it("group_norm and instance_norm", function()
    check(function(x, w, b) return F.group_norm(x, 2, w, b) end,
      { randn({ 2, 4, 3 }), randn({ 4 }), randn({ 4 }) })
    check(function(x, w, b) return F.instance_norm(x, nil, nil, w, b) end,
      { randn({ 2, 2, 2, 2 }), randn({ 2 }), randn({ 2 }) })
  end)

  it("pad in every mode", function()
    local x = randn({ 1, 2, 3, 4 })
    check(function(t) return F.pad(t, { 1, 2, -1, 1 }, "constant", 0.5) end, { x })
    for _, mode in ipairs({ "reflect", "replicate", "circular" }) do
      check(function(t) return F.pad(t, { 2, 1, 1, 2 }, mode) end, { x })
    end
  end)

  it("interpolate, nearest and bilinear, and adaptive_avg_pool2d", function()
    local x = randn({ 1, 2, 3, 4 })
    check(function(t) return F.interpolate(t, { size = { 5, 3 } }) end, { x })
    -- where PyTorch's own gradient is not its forward's (gen_layers.py)
    check(function(t) return F.interpolate(t, { size = 22 }) end, { randn({ 1, 1, 26 }) })
    check(function(t) return F.interpolate(t, { scale_factor = 1.2 }) end, { randn({ 1, 2, 3 }) })
    for _, corners in ipairs({ false, true }) do
      local o = { size = { 5, 3 }, mode = "bilinear", align_corners = corners }
      check(function(t) return F.interpolate(t, o) end, { x })
    end
    check(function(t) return F.adaptive_avg_pool2d(t, { 2, 3 }) end, { randn({ 1, 2, 5, 7 }) })
  end)
end)

describe("the modules", function()
  local function names(list)
    local out = {}
    for _, e in ipairs(list) do out[#out + 1] = e[1] end
    return out
  end
  local function max_abs(t) return t:abs():max():item() end

  it("Conv1d: PyTorch's layout, initialisation and options", function()
    local m = nn.Conv1d(4, 6, 3, { stride = 2, padding = 1, groups = 2 })
    assert.are.same({ "weight", "bias" }, names(m:named_parameters()))
    assert.are.same({ 6, 2, 3 }, m.weight:shape())
    local bound = 1 / math.sqrt(2 * 3)
    assert.is_true(max_abs(m.weight) <= bound and max_abs(m.bias) <= bound)
    local x = ember.randn({ 2, 4, 9 })
    H.same(m(x), F.conv1d(x, m.weight, m.bias, { stride = 2, padding = 1, groups = 2 }):tolist(), 0)
    assert.is_nil(nn.Conv1d(2, 2, 1, { bias = false }).bias)
    local positional = nn.Conv1d(4, 6, 3, 2, 1)
    assert.are.same({ 2, 1 }, { positional.stride, positional.padding })
    assert.are.equal("float64", nn.Conv1d(2, 2, 1, { dtype = "float64" }).weight.dtype)
    assert.are.equal("float64", m:double().weight.dtype)
  end)

  it("ConvTranspose2d: weight (in, out / groups, kH, kW), fan_in from its second dim", function()
    local m = nn.ConvTranspose2d(8, 2, 3)
    assert.are.same({ 8, 2, 3, 3 }, m.weight:shape())
    -- fan_in = 2 * 9: the bound is 1/sqrt(18); from dim 1 it would be 1/sqrt(72)
    local bound = 1 / math.sqrt(18)
    assert.is_true(max_abs(m.weight) <= bound and max_abs(m.weight) > 1 / math.sqrt(72))
    assert.is_true(max_abs(m.bias) <= bound)
    local g = nn.ConvTranspose2d(4, 6, { 2, 3 }, { stride = 2, groups = 2, bias = false })
    assert.are.same({ 4, 3, 2, 3 }, g.weight:shape())
    assert.are.same({ "weight" }, H.sorted_keys(g:state_dict()))
  end)

  it("ConvTranspose2d(x, output_size) picks the output_padding", function()
    local m = nn.ConvTranspose2d(3, 2, 3, { stride = { 2, 3 }, padding = 1 })
    local x = ember.randn({ 1, 3, 4, 5 })
    local y = m(x, { 8, 15 })
    assert.are.same({ 1, 2, 8, 15 }, y:shape())
    local want = F.conv_transpose2d(x, m.weight, m.bias,
      { stride = { 2, 3 }, padding = 1, output_padding = { 1, 2 } })
    H.same(y, want:tolist(), 0)
    assert.are.same({ 1, 2, 7, 13 }, m(x, { 1, 2, 7, 13 }):shape())
    local ok, err = pcall(m, x, { 9, 13 })
    assert.is_false(ok)
    assert.truthy(err:find("ember.nn.ConvTranspose2d: output_size {9, 13} is not reachable from "
      .. "input {1, 3, 4, 5}: dim 1 must be in 7..8", 1, true), err)
  end)

  it("GroupNorm: weight ones, bias zeros, the function's result", function()
    local m = nn.GroupNorm(2, 4, { eps = 1e-3 })
    assert.are.same({ "bias", "weight" }, H.sorted_keys(m:state_dict()))
    H.same(m.weight, { 1, 1, 1, 1 }, 0)
    local x = ember.randn({ 3, 4, 5 })
    H.same(m(x), F.group_norm(x, 2, nil, nil, { eps = 1e-3 }):tolist(), 1e-6)
    assert.are.same({}, nn.GroupNorm(1, 3, { affine = false }):parameters())
  end)

  it("InstanceNorm2d: PyTorch's defaults, running statistics in training only", function()
    local plain = nn.InstanceNorm2d(3)
    assert.are.same({}, H.sorted_keys(plain:state_dict()))
    local x = ember.randn({ 2, 3, 4, 4 }) * 2 + 1
    H.same(plain(x), F.instance_norm(x):tolist(), 1e-6)
    -- any channel count when nothing is kept per channel, as PyTorch (which warns)
    assert.are.same({ 2, 5, 4, 4 }, plain(ember.randn({ 2, 5, 4, 4 })):shape())

    local m = nn.InstanceNorm2d(3, { affine = true, track_running_stats = true, momentum = 0.3 })
    assert.are.same({ "bias", "num_batches_tracked", "running_mean", "running_var", "weight" },
      H.sorted_keys(m:state_dict()))
    local rm, rv = ember.zeros({ 3 }), ember.ones({ 3 })
    H.same(m(x), F.instance_norm(x, rm, rv, m.weight, m.bias, { momentum = 0.3 }):tolist(), 1e-6)
    H.same(m.running_mean, rm:tolist(), 1e-6)
    H.same(m.running_var, rv:tolist(), 1e-6)
    m:eval()
    local y = m(x)
    local frozen = F.instance_norm(x, rm, rv, m.weight, m.bias, { use_input_stats = false })
    H.same(y, frozen:tolist(), 1e-6)
    H.same(m.running_mean, rm:tolist(), 0)
    -- unbatched (C, H, W)
    H.same(m(x[1]), y[1]:tolist(), 1e-6)
  end)

  it("InstanceNorm1d and InstanceNorm3d take their spatial dims", function()
    local x = ember.randn({ 2, 3, 5 })
    H.same(nn.InstanceNorm1d(3)(x), F.instance_norm(x):tolist(), 1e-6)
    local v = ember.randn({ 1, 2, 2, 3, 2 })
    H.same(nn.InstanceNorm3d(2)(v), F.instance_norm(v):tolist(), 1e-6)
  end)

  it("Upsample and AdaptiveAvgPool2d are their functions", function()
    local x = ember.randn({ 1, 2, 3, 4 })
    local up = nn.Upsample({ scale_factor = 2, mode = "bilinear", align_corners = true })
    local want = F.interpolate(x, { scale_factor = 2, mode = "bilinear", align_corners = true })
    H.same(up(x), want:tolist(), 0)
    assert.are.same({ 1, 2, 6, 8 }, up(x):shape())
    H.same(nn.AdaptiveAvgPool2d({ nil, 2 })(x), F.adaptive_avg_pool2d(x, { 3, 2 }):tolist(), 0)
    H.same(nn.AdaptiveAvgPool2d(1)(x), x:mean({ 3, 4 }, true):tolist(), 1e-6)
  end)
end)

describe("bad input", function()
  local x4 = ember.randn({ 2, 4, 5, 5 })
  local raises = H.raises

  it("names the call, the shapes and the values", function()
    local x3, w = ember.randn({ 2, 4, 9 }), ember.randn({ 4, 2, 3, 3 })
    raises(function() F.conv1d(x3, ember.randn({ 6, 3, 3 })) end, "ember.nn.functional.conv1d: "
      .. "input {2, 4, 9} has 4 channels but weight {6, 3, 3} with groups = 1 takes 3")
    raises(function() F.conv1d(ember.randn({ 2, 4, 2 }), ember.randn({ 6, 4, 3 })) end,
      "input {2, 4, 2} padded by 0 is shorter than the kernel's span 3")
    raises(function() F.conv1d(x3, ember.randn({ 6, 4, 3 }), ember.randn({ 4 })) end,
      "ember.nn.functional.conv1d: bias must have shape {6}, got {4}")
    raises(function() F.conv1d(x3, ember.randn({ 6, 4, 3 }, F64)) end,
      "ember.nn.functional.conv1d: input, weight and bias must share a dtype",
      "got float32, float64 and none")
    local I64 = { dtype = "int64" }
    raises(function() F.conv1d(ember.zeros({ 1, 1, 4 }, I64), ember.zeros({ 1, 1, 2 }, I64)) end,
      "ember.nn.functional.conv1d: input and weight must be floating point, got int64 {1, 1, 4}")
    raises(function()
      F.conv_transpose2d(ember.zeros({ 1, 1, 4, 4 }, I64), ember.zeros({ 1, 1, 2, 2 }, I64))
    end,
      "ember.nn.functional.conv_transpose2d: input and weight must be floating point")
    raises(function() nn.ConvTranspose2d(1, 1, 3, 2)(ember.zeros({ 1, 1, 4, 4 }), { 9, true }) end,
      "ember.nn.ConvTranspose2d: output_size {9, true} is not reachable from input {1, 1, 4, 4}")
    raises(function() F.adaptive_avg_pool2d(x4, { 3, 2, 9 }) end,
      "ember.nn.functional.adaptive_avg_pool2d: output_size must be an integer >= 1 or an {h, w}",
      "got {3, 2, 9}")
    raises(function() nn.AdaptiveAvgPool2d({ 2, 2, 2 }) end, "ember.nn.AdaptiveAvgPool2d: output_size")
    raises(function() F.conv_transpose2d(x4, w, { stride = 2, output_padding = 2 }) end,
      "ember.nn.functional.conv_transpose2d: output_padding {2, 2} must be smaller than either "
      .. "stride {2, 2} or dilation {1, 1}")
    raises(function() F.conv_transpose2d(x4, ember.randn({ 3, 2, 3, 3 })) end,
      "input {2, 4, 5, 5} has 4 channels but weight {3, 2, 3, 3} with groups = 1 takes 3")
    raises(function() F.conv_transpose2d(x4, w, { strides = 2 }) end,
      "ember.nn.functional.conv_transpose2d: unknown option 'strides'")
    raises(function() F.conv_transpose2d(x4, w, { padding = { 1, 2, 3 } }) end,
      "padding must be an integer >= 0 or a list of 2 of them, got {1, 2, 3}")
    raises(function() F.conv3d(ember.zeros({ 1, 1, 3, 3, 3 }, { dtype = "int64" }), ember.zeros({ 1, 1, 2, 2, 2 },
      { dtype = "int64" })) end, "ember.nn.functional.conv3d: input and weight must be floating point, got int64 {1, 1, 3, 3, 3}")
    raises(function() F.conv1d(ember.randn({ 1, 1, 5 }), ember.randn({ 1, 1, 2 }), { stride = math.huge }) end,
      "ember.nn.functional.conv1d: stride must be an integer >= 1 or a list of 1 of them, got inf")
    raises(function() F.group_norm(ember.randn({ 2, 6, 4 }), 4) end,
      "ember.nn.functional.group_norm: num_groups = 4 must be an integer >= 1 dividing the 6",
      "channels of input {2, 6, 4}")
    raises(function() F.group_norm(ember.randn({ 2, 6, 4 }), 3, ember.ones({ 3 })) end,
      "weight must have shape {6}, got {3}")
    raises(function() F.instance_norm(ember.randn({ 2, 3, 1, 1 })) end,
      "ember.nn.functional.instance_norm: expected more than 1 spatial element per plane",
      "got input {2, 3, 1, 1}")
    raises(function() F.instance_norm(x4, nil, nil, nil, nil, { use_input_stats = false }) end,
      "running_mean and running_var are needed when use_input_stats is false")
    raises(function() F.pad(x4, { 1, 2, 3 }) end,
      "ember.nn.functional.pad: pad must be an even list of at most 2 x 4 integers")
    raises(function() F.pad(ember.randn({ 1, 2, 3 }), { 3, 0 }, "reflect") end,
      "ember.nn.functional.pad: padding {3, 0} does not fit dim 3 of input {1, 2, 3}",
      "in mode 'reflect' (at most 2 each)")
    raises(function() F.pad(ember.randn({ 1, 2, 3, 4 }), { 1, 1, 3, 3 }, "reflect") end,
      "padding {3, 3} does not fit dim 3 of input {1, 2, 3, 4}")
    raises(function() F.pad(x4, { 1, 1 }, "wrap") end,
      "mode must be one of 'constant', 'reflect', 'replicate', 'circular', got 'wrap'")
    raises(function() F.pad(x4, { 1, 1 }, "reflect", 2) end, "mode 'reflect' takes no value, got 2")
    raises(function() F.pad(ember.randn({ 5 }), { 1, 1 }, "replicate") end,
      "mode 'replicate' pads the last 1, 2 or 3 dims of a (N, C, ...) or (C, ...) input",
      "got 2 pads for input {5}")
    raises(function() F.pad(x4, { -3, -3 }) end,
      "padding {-3, -3} of dim 4 of input {2, 4, 5, 5} leaves a negative size")
    raises(function() F.interpolate(ember.randn({ 1, 2, 3 }), { size = 4, mode = "bilinear" }) end,
      "ember.nn.functional.interpolate: mode 'bilinear' takes a 4-D input (N, C, ...)",
      "got {1, 2, 3}")
    raises(function() F.interpolate(x4, { size = 4, scale_factor = 2 }) end,
      "give either size or scale_factor")
    raises(function() F.interpolate(x4, { size = { 4, 4, 4 } }) end,
      "size has 3 entries but input {2, 4, 5, 5} has 2 spatial dims")
    raises(function() F.interpolate(x4, { size = 4, align_corners = true }) end,
      "align_corners only applies to the modes 'linear', 'bilinear' and 'trilinear', not 'nearest'")
    raises(function() F.interpolate(x4, { scale_factor = 0.1 }) end,
      "input {2, 4, 5, 5} gives an empty output along dim 3")
    raises(function() F.adaptive_avg_pool2d(ember.randn({ 4, 5 }), 2) end,
      "ember.nn.functional.adaptive_avg_pool2d: input must be a floating point (N, C, H, W)")
    raises(function() F.adaptive_avg_pool2d(x4, 0) end, "output_size must be an integer >= 1")
  end)

  it("names the module", function()
    raises(function() nn.Conv1d(4, 6, 3, { groups = 4 }) end,
      "ember.nn.Conv1d: groups = 4 must divide in_channels = 4 and out_channels = 6")
    raises(function() nn.ConvTranspose2d(4, 6, { 3 }) end,
      "ember.nn.ConvTranspose2d: kernel_size must be an integer >= 1 or a list of 2 of them")
    raises(function() nn.Conv1d(4, 6, 3)(x4) end,
      "ember.nn.Conv1d: input {2, 4, 5, 5} and weight {6, 4, 3} must both be 3-D")
    raises(function() nn.GroupNorm(4, 6) end,
      "ember.nn.GroupNorm: num_groups = 4 must divide num_channels = 6")
    raises(function() nn.GroupNorm(2, 6)(x4) end,
      "ember.nn.GroupNorm: input {2, 4, 5, 5} does not fit: expected (N, 6, ...)")
    raises(function() nn.InstanceNorm2d(3, { affine = true })(x4) end,
      "ember.nn.InstanceNorm2d: input {2, 4, 5, 5} has 4 channels, expected 3")
    raises(function() nn.InstanceNorm2d(3)(ember.randn({ 3, 5 })) end,
      "expected a 4-D (N, C, ...) or 3-D (C, ...) input")
    raises(function() nn.Upsample({ mode = "bicubic", size = 2 }) end, "ember.nn.Upsample: "
      .. "mode must be one of 'nearest', 'linear', 'bilinear', 'trilinear', got 'bicubic'")
    raises(function() nn.AdaptiveAvgPool2d({ 2, 0 }) end,
      "ember.nn.AdaptiveAvgPool2d: output_size must be")
  end)

  it("points at the caller's line and leaves ember usable", function()
    local ok, err = pcall(function() local y = F.pad(x4, { 1, 1 }, "wrap"); return y end)
    assert.is_false(ok)
    assert.truthy(err:find("layers_spec.lua:%d+: ember.nn.functional.pad"), err)
    ok, err = pcall(function() local y = nn.GroupNorm(2, 6)(x4); return y end)
    assert.is_false(ok)
    assert.truthy(err:find("layers_spec.lua:%d+: ember.nn.GroupNorm"), err)
    assert.are.same({ 2, 4, 7, 7 }, F.pad(x4, { 1, 1, 1, 1 }, "reflect"):shape())
  end)
end)
