-- Batch normalisation in training, forward + backward (weight and bias,
-- loss sum(y * r)), at a CNN's and an MLP's shapes: the batch_norm op
-- (ops/norm.c) against the same formulas as ember's composed ops (how
-- F.batch_norm ran before the op: mean, subtract, square, mean, rsqrt,
-- scale, shift, and their rules backward) and against PyTorch 1.13's
-- F.batch_norm (bench/batch_norm_torch.py, a child process given ember's
-- thread count, OMP_WAIT_POLICY=PASSIVE and the OpenBLAS core), alternating
-- in rounds. Prints JSON: per shape the medians of ms per step and of the
-- per-round ratios.
--   luajit bench/batch_norm.lua [rounds [iters]]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional

local rounds, iters = tonumber(arg and arg[1]) or 5, tonumber(arg and arg[2]) or 20
local shapes = { { 64, 16, 28, 28 }, { 64, 32, 14, 14 }, { 32, 64, 56, 56 }, { 128, 256 } }

-- the composed formulas, as F.batch_norm wrote them before the op
local function composed(x, w, b, eps)
  local nd, Cn = x:dim(), x:size(2)
  local shape, dims = { 1, Cn }, { 1 }
  for d = 3, nd do shape[#shape + 1] = 1; dims[#dims + 1] = d end
  local mean = x:mean(dims, true)
  local xc = x - mean
  local var = (xc * xc):mean(dims, true)
  return xc * (var + eps):rsqrt() * w:view(shape) + b:view(shape)
end

local cases = {}
for i, shape in ipairs(shapes) do
  ember.manual_seed(i)
  local x, w, b, r = ember.randn(shape), ember.randn({ shape[2] }), ember.randn({ shape[2] }), ember.randn(shape)
  local gm = ember.autodiff.GradManager():attach({ x, w, b })
  local function step(fused)
    gm:record()
    local y = fused and F.batch_norm(x, nil, nil, w, b, { training = true }) or composed(x, w, b, 1e-5)
    gm:backward((y * r):sum())
    x.grad, w.grad, b.grad = nil, nil, nil
  end
  cases[i] = { shape = shape, step = step, fused = {}, comp = {}, torch = {}, r_comp = {}, r_torch = {} }
end

local threads, core = ember.get_num_threads(), B.blas_core(ember)
local specs = {}
for i, s in ipairs(shapes) do specs[i] = table.concat(s, ",") end
local torch_cmd = ("OMP_WAIT_POLICY=PASSIVE OPENBLAS_CORETYPE=%s /usr/bin/python3 bench/batch_norm_torch.py %d %d %s")
  :format(core, iters, threads, table.concat(specs, " "))

local function timed(f, arg_)
  f(arg_)
  local t0 = B.now()
  for _ = 1, iters do f(arg_) end
  return (B.now() - t0) / iters
end

for _ = 1, rounds do
  for _, c in ipairs(cases) do
    c.fused[#c.fused + 1] = timed(c.step, true)
    c.comp[#c.comp + 1] = timed(c.step, false)
  end
  local p = io.popen(torch_cmd)
  local s = p:read("*a")
  p:close()
  local k = 0
  for v in s:match('"seconds_per_step": %[([^%]]*)%]'):gmatch("[%d%.e%-]+") do
    k = k + 1
    local c = cases[k]
    c.torch[#c.torch + 1] = tonumber(v)
    c.r_comp[#c.r_comp + 1] = c.fused[#c.fused] / c.comp[#c.comp]
    c.r_torch[#c.r_torch + 1] = c.fused[#c.fused] / tonumber(v)
  end
end

local res = { bench = "batch_norm", threads = threads, openblas_core = core, rounds = rounds, iters = iters }
for _, c in ipairs(cases) do
  local key = table.concat(c.shape, "x")
  res[key .. "_op_ms"] = B.median(c.fused) * 1e3
  res[key .. "_composed_ms"] = B.median(c.comp) * 1e3
  res[key .. "_torch_ms"] = B.median(c.torch) * 1e3
  res[key .. "_op_over_composed"] = B.median(c.r_comp)
  res[key .. "_op_over_torch"] = B.median(c.r_torch)
end
print(B.json(res))
