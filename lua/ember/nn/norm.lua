-- ember.nn.norm: group and instance normalisation, by reshaping and the
-- recorded reductions (mean, PyTorch's biased variance), so gradients of any
-- order come from the rule registry. Each is a function of
-- ember.nn.functional and a module of ember.nn (M.register), with PyTorch's
-- signatures and defaults:
--
--   F.group_norm(x, num_groups, weight, bias, {eps = 1e-5})
--   F.instance_norm(x, running_mean, running_var, weight, bias,
--                   {use_input_stats = true, momentum = 0.1, eps = 1e-5})
--
-- N batch, C channels; the spatial dims are those after C.
local ember = require("ember")
local A = require("ember.nn.args")
local amp = require("ember.amp")   -- autocast: amp._dtype is set inside a scope

local fail, shape_str = A.fail, A.shape_str
local M = { functional = {} }
local F = M.functional

-- (x - mean) / sqrt(var + eps) over dims, with the mean and the biased variance
local function normalize(x, dims, eps)
  local mean = x:mean(dims, true)
  local xc = x - mean
  local var = (xc * xc):mean(dims, true)
  return xc * (var + eps):rsqrt(), mean, var
end

-- the shape that broadcasts one value per channel over y
local function channel_shape(y)
  local shape = { 1, -1 }
  for d = 3, y:dim() do shape[d] = 1 end
  return shape
end

-- t nil or a tensor of shape {C}
local function need_channels(op, what, t, Cn)
  if t == nil then return end
  A.need_tensor(op, what, t)
  if t:dim() ~= 1 or t:size(1) ~= Cn then
    fail(op, "%s must have shape {%d}, got %s", what, Cn, shape_str(t))
  end
end

-- y * weight + bias, one of each per channel
local function affine(op, y, w, b)
  need_channels(op, "weight", w, y:size(2))
  need_channels(op, "bias", b, y:size(2))
  if w ~= nil then y = y * w:view(channel_shape(y)) end
  if b ~= nil then y = y + b:view(channel_shape(y)) end
  return y
end

-- F.f(x, ..., w, b, {opts}): a table that is not a tensor where the weight
-- or the bias would be holds the options
local function affine_args(w, b, opts)
  b, opts = A.bias_opts(b, opts)
  if opts == nil then w, opts = A.bias_opts(w, opts) end
  return w, b, opts
end

---------------------------------------------------------------- group_norm
local GROUP_NORM = { { "eps", 1e-5, A.positive } }

local function group_norm(op, x, G, w, b, o)
  A.need_tensor(op, "input", x)
  if x:dim() < 2 then fail(op, "input must be (N, C, ...), got %s", shape_str(x)) end
  if A.int(1)(G) or x:size(2) % G ~= 0 then
    fail(op, "num_groups = %s must be an integer >= 1 dividing the %d channels of input %s",
      tostring(G), x:size(2), shape_str(x))
  end
  local y = normalize(x:reshape({ x:size(1), G, -1 }), { 3 }, o.eps)
  return affine(op, y:reshape(x:shape()), w, b)
end

function F.group_norm(x, num_groups, w, b, opts)
  local op = "ember.nn.functional.group_norm"
  w, b, opts = affine_args(w, b, opts)
  if amp._dtype then x, w, b = amp._up(x, w, b) end
  return group_norm(op, x, num_groups, w, b, A.options(op, opts, GROUP_NORM))
end

---------------------------------------------------------------- instance_norm
local INSTANCE_NORM = { { "use_input_stats", true, A.boolean },
  { "momentum", 0.1, function(v) if type(v) ~= "number" then return "a number" end end },
  { "eps", 1e-5, A.positive } }

-- Each (n, c) plane normalised by its own statistics; the running ones
-- (when given) move towards their mean over the batch, the variance
-- unbiased, as PyTorch's batch_norm over the (1, N C, ...) view updates them.
local function instance_norm(op, x, rm, rv, w, b, o)
  A.need_tensor(op, "input", x)
  if x:dim() < 3 then
    fail(op, "input must be (N, C, ...) with a spatial dim, got %s", shape_str(x))
  end
  local Cn = x:size(2)
  need_channels(op, "running_mean", rm, Cn)
  need_channels(op, "running_var", rv, Cn)
  if (rm == nil) ~= (rv == nil) then
    fail(op, "give both running_mean and running_var, or neither")
  end
  local shape = channel_shape(x)
  if not o.use_input_stats then
    if rm == nil then
      fail(op, "running_mean and running_var are needed when use_input_stats is false")
    end
    return affine(op, (x - rm:view(shape)) * (rv:view(shape) + o.eps):rsqrt(), w, b)
  end
  local count = x:numel() / (x:size(1) * Cn)
  if count <= 1 then
    fail(op, "expected more than 1 spatial element per plane, got input %s", shape_str(x))
  end
  local dims = {}
  for d = 3, x:dim() do dims[#dims + 1] = d end
  local y, mean, var = normalize(x, dims, o.eps)
  if rm ~= nil then
    local m = o.momentum
    ember.no_grad(function()
      rm:mul_(1 - m):add_(mean:detach():mean(1):view(Cn):to(rm.dtype) * m)
      rv:mul_(1 - m):add_(var:detach():mean(1):view(Cn):to(rv.dtype) * (m * count / (count - 1)))
    end)
  end
  return affine(op, y, w, b)
end

function F.instance_norm(x, running_mean, running_var, w, b, opts)
  local op = "ember.nn.functional.instance_norm"
  w, b, opts = affine_args(w, b, opts)
  if amp._dtype then x, w, b = amp._up(x, w, b) end
  return instance_norm(op, x, running_mean, running_var, w, b, A.options(op, opts, INSTANCE_NORM))
end

---------------------------------------------------------------- modules
local function channel_params(self, n, dtype)
  self.weight = ember.ones({ n }, { dtype = dtype })
  self.bias = ember.zeros({ n }, { dtype = dtype })
end

local function positive_int(op, what, v)
  if A.int(1)(v) then fail(op, "%s must be an integer >= 1, got %s", what, tostring(v)) end
end

-- nn.GroupNorm(num_groups, num_channels, {eps = 1e-5, affine = true})
local function group_norm_class(nn)
  local op = "ember.nn.GroupNorm"
  local G = nn.Module:extend("GroupNorm")
  local spec = A.with(GROUP_NORM, { "affine", true, A.boolean }, A.DTYPE)
  function G:init(num_groups, num_channels, opts)
    local o = A.options(op, opts, spec)
    positive_int(op, "num_groups", num_groups)
    positive_int(op, "num_channels", num_channels)
    if num_channels % num_groups ~= 0 then
      fail(op, "num_groups = %d must divide num_channels = %d", num_groups, num_channels)
    end
    self.num_groups, self.num_channels = num_groups, num_channels
    self.eps, self.affine = o.eps, o.affine
    if o.affine then channel_params(self, num_channels, o.dtype) end
  end
  function G:forward(x)
    A.need_tensor(op, "input", x)
    if x:dim() < 2 or x:size(2) ~= self.num_channels then
      fail(op, "input %s does not fit: expected (N, %d, ...)", shape_str(x), self.num_channels)
    end
    return group_norm(op, x, self.num_groups, self.weight, self.bias, { eps = self.eps })
  end
  function G:extra_repr()
    return ("%d, %d, eps=%g"):format(self.num_groups, self.num_channels, self.eps)
  end
  nn.GroupNorm = G
end

-- nn.InstanceNorm2d(C, {eps = 1e-5, momentum = 0.1, affine = false,
-- track_running_stats = false}); the input is (N, C, ...) with `spatial`
-- spatial dims, or (C, ...) unbatched
local function instance_norm_class(nn, name, spatial)
  local op = "ember.nn." .. name
  local I = nn.Module:extend(name)
  local spec = { { "eps", 1e-5, A.positive }, INSTANCE_NORM[2], { "affine", false, A.boolean },
    { "track_running_stats", false, A.boolean }, A.DTYPE }
  function I:init(num_features, opts)
    local o = A.options(op, opts, spec)
    positive_int(op, "num_features", num_features)
    self.num_features, self.eps, self.momentum = num_features, o.eps, o.momentum
    self.affine, self.track_running_stats = o.affine, o.track_running_stats
    if o.affine then channel_params(self, num_features, o.dtype) end
    if o.track_running_stats then
      self:register_buffer("running_mean", ember.zeros({ num_features }, { dtype = o.dtype }))
      self:register_buffer("running_var", ember.ones({ num_features }, { dtype = o.dtype }))
      self:register_buffer("num_batches_tracked", ember.zeros({}, { dtype = "int64" }))
    end
  end
  function I:forward(x)
    A.need_tensor(op, "input", x)
    local unbatched = x:dim() == spatial + 1
    if x:dim() ~= spatial + 2 and not unbatched then
      fail(op, "input %s does not fit: expected a %d-D (N, C, ...) or %d-D (C, ...) input",
        shape_str(x), spatial + 2, spatial + 1)
    end
    if unbatched then x = x:unsqueeze(1) end
    -- PyTorch only warns about other channel counts when nothing is kept per channel
    if (self.affine or self.track_running_stats) and x:size(2) ~= self.num_features then
      fail(op, "input %s has %d channels, expected %d", shape_str(x), x:size(2), self.num_features)
    end
    local o = { use_input_stats = self.training or not self.track_running_stats,
      momentum = self.momentum, eps = self.eps }
    local y = instance_norm(op, x, self.running_mean, self.running_var, self.weight, self.bias, o)
    return unbatched and y:squeeze(1) or y
  end
  function I:extra_repr()
    return ("%d, eps=%g, momentum=%g, affine=%s, track_running_stats=%s"):format(self.num_features,
      self.eps, self.momentum, tostring(self.affine), tostring(self.track_running_stats))
  end
  nn[name] = I
end

function M.register(nn)
  group_norm_class(nn)
  instance_norm_class(nn, "InstanceNorm1d", 1)
  instance_norm_class(nn, "InstanceNorm2d", 2)
  instance_norm_class(nn, "InstanceNorm3d", 3)
end

return M
