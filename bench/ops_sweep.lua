-- bench/ops_sweep.lua: the common ops at small, medium and large sizes
-- (float32; forward, and forward with the backward of the result's sum where
-- marked +backward) against PyTorch 1.13 (bench/ops_sweep_torch.py, the same
-- cases), in alternating rounds: each round runs PyTorch on ember's thread
-- count under each OpenMP wait policy (the default and passive) and on one
-- thread, each after a pass of ember's cases; each side's fastest counts.
-- Each figure is the fastest of 3 batches of calls sized to 20 ms, after a
-- warm-up. Prints JSON: per case the medians over the rounds of each side's
-- ms per call and of the per-round ratio ember / PyTorch (below 1: ember is
-- faster), then the ratios' geometric mean. docs/performance.md has the table.
-- Convolutions and batch norm run in NCHW and channels_last on both sides,
-- each side's faster layout counting (PyTorch's channels_last convolution
-- reads its input as it is, where an NCHW one reorders it into oneDNN's
-- blocked layout and its result back: a quarter to a third of the 32x64x56x56 forward).
-- From the repository root:
--   luajit bench/ops_sweep.lua [--rounds 5] [--only "add 1e4,sum dim1 4096x1024"] [--tidy] [--cpu]
-- (--tidy: each of ember's calls in ember.tidy, its result freed at once;
-- --cpu: each side's CPU time, all its threads counted, instead of wall time:
-- on a loaded machine, with EMBER_NUM_THREADS=1, the steadier measure)
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional
local nn = ember.nn
local GradManager = ember.autodiff.GradManager
local unpack = table.unpack or unpack

local rounds, only, tidy, cpu_clock = 5, nil, false, false
do
  local i = 1
  while i <= #arg do
    if arg[i] == "--rounds" then rounds = assert(tonumber(arg[i + 1]), "--rounds N"); i = i + 2
    elseif arg[i] == "--only" then only = arg[i + 1]; i = i + 2
    elseif arg[i] == "--tidy" then tidy = true; i = i + 1
    elseif arg[i] == "--cpu" then cpu_clock = true; i = i + 1
    else error("unknown argument " .. arg[i] .. " (expected --rounds N, --only list, --tidy, --cpu)") end
  end
end
local wanted
if only then
  wanted = {}
  for name in only:gmatch("[^,]+") do wanted[name] = true end
end

local now = cpu_clock and os.clock or B.now
local function ms_per_call(fn) return B.best_ms(fn, now, 0.02, 3) end   -- batches of about 20 ms

-- a forward and the backward of its sum, gradients for xs
local function with_backward(f, ...)
  local xs = { ... }
  local gm = GradManager():attach(xs)
  return function()
    for _, x in ipairs(xs) do x.grad = nil end
    gm:record()
    gm:backward(f(unpack(xs)):sum())
  end
end

local names, cases, alts = {}, {}, {}
-- with --tidy each call runs in ember.tidy, which frees its result at once
-- (as PyTorch's reference counts do) instead of at the next GC. The function
-- given the tidy is made once: a closure made per call (LuaJIT cannot
-- compile FNEW) sent each call to the interpreter, 0.25-0.4 us of a 1.5 us add
local function wrap(fn)
  if not tidy then return fn end
  return B.in_tidy(ember, fn)
end
-- alt: the case in another layout (channels_last), of which each pass keeps
-- the faster, as PyTorch's side keeps the faster of its two layouts
local function case(name, fn, alt)
  names[#names + 1] = name
  cases[name], alts[name] = wrap(fn), alt and wrap(alt)
end

local function build()
  ember.manual_seed(0)
  local r = ember.randn
  for _, s in ipairs({ { "1e3", 1000 }, { "1e4", 10000 }, { "1e6", 1000000 } }) do
    local a, b = r({ s[2] }), r({ s[2] })
    case("add " .. s[1], function() return a + b end)
    case("mul " .. s[1], function() return a * b end)
  end
  local a, b = r({ 2048, 2048 }), r({ 2048, 2048 })
  case("add 2048x2048", function() return a + b end)
  case("add transposed 2048x2048", function() return a:t() + b:t() end)
  local row = r({ 2048 })
  case("add row-broadcast 2048x2048", function() return a + row end)
  local x = r({ 1000000 })
  case("exp 1e6", function() return x:exp() end)
  case("tanh 1e6", function() return x:tanh() end)
  case("sigmoid 1e6", function() return x:sigmoid() end)
  case("relu 1e6", function() return x:relu() end)
  case("gelu 1e6", function() return F.gelu(x) end)
  local xs = r({ 10000 })
  case("gelu 1e4", function() return F.gelu(xs) end)
  case("relu+backward 1e6", with_backward(function(t) return t:relu() end, r({ 1000000 })))
  case("gelu+backward 1e6", with_backward(function(t) return F.gelu(t) end, r({ 1000000 })))
  local m = r({ 4096, 1024 })
  case("sum all 4096x1024", function() return m:sum() end)
  case("sum dim1 4096x1024", function() return m:sum(1) end)
  case("sum dim2 4096x1024", function() return m:sum(2) end)
  local m3 = r({ 64, 128, 768 })
  case("mean dim1 64x128x768", function() return m3:mean(1) end)
  case("max dim2 4096x1024", function() return m:max(2) end)
  local s = r({ 256, 1000 })
  case("softmax 256x1000", function() return s:softmax(2) end)
  case("log_softmax 256x1000", function() return s:log_softmax(2) end)
  case("softmax+backward 256x1000", with_backward(function(t) return t:softmax(2) end, r({ 256, 1000 })))
  case("log_softmax+backward 256x1000", with_backward(function(t) return t:log_softmax(2) end, r({ 256, 1000 })))
  local ln = r({ 32, 128, 768 })
  case("layer_norm 32x128x768", function() return F.layer_norm(ln, { 768 }) end)
  case("layer_norm+backward 32x128x768", with_backward(function(t) return F.layer_norm(t, { 768 }) end,
    r({ 32, 128, 768 })))
  for _, n in ipairs({ 64, 512, 1024 }) do
    local p, q = r({ n, n }), r({ n, n })
    case("matmul " .. n, function() return p:matmul(q) end)
  end
  local xl, wl, bl = r({ 256, 1024 }), r({ 1024, 1024 }), r({ 1024 })
  case("linear 256x1024x1024", function() return F.linear(xl, wl, bl) end)
  case("linear+backward 256x1024x1024", with_backward(function(x1, w1, b1) return F.linear(x1, w1, b1) end,
    r({ 256, 1024 }), r({ 1024, 1024 }), r({ 1024 })))
  local cl = { memory_format = "channels_last" }
  local function conv(name, xshape, wshape, backward)
    local f = function(x1, w1) return F.conv2d(x1, w1, nil, { padding = 1 }) end
    local function make(layout)   -- input and weight NCHW, or both channels_last
      local xc, wc = r(xshape), r(wshape)
      if layout then xc, wc = xc:contiguous(layout), wc:contiguous(layout) end
      return backward and with_backward(f, xc, wc) or function() return f(xc, wc) end
    end
    case(name, make(), make(cl))
  end
  conv("conv2d 8x3x32x32 k3", { 8, 3, 32, 32 }, { 16, 3, 3, 3 })
  conv("conv2d 32x64x56x56 k3", { 32, 64, 56, 56 }, { 64, 64, 3, 3 })
  conv("conv2d+backward 16x32x28x28 k3", { 16, 32, 28, 28 }, { 32, 32, 3, 3 }, true)
  local big = r({ 32, 64, 56, 56 })
  case("max_pool2d 2x2 32x64x56x56", function() return F.max_pool2d(big, 2) end)
  case("max_pool2d 3x3s2 32x64x56x56", function() return F.max_pool2d(big, 3, 2) end)
  case("max_pool2d+backward 3x3s2 32x64x56x56", with_backward(function(t) return F.max_pool2d(t, 3, 2) end,
    r({ 32, 64, 56, 56 })))
  case("avg_pool2d 2x2 32x64x56x56", function() return F.avg_pool2d(big, 2) end)
  local fm = r({ 32, 512, 7, 7 })
  case("adaptive_avg_pool2d 32x512x7x7 to 1", function() return F.adaptive_avg_pool2d(fm, 1) end)
  case("adaptive_avg_pool2d+backward 32x512x7x7 to 1",
    with_backward(function(t) return F.adaptive_avg_pool2d(t, 1) end, r({ 32, 512, 7, 7 })))
  local bn = nn.BatchNorm2d(64)
  local big_cl = big:contiguous(cl)
  case("batch_norm train 32x64x56x56", function() return bn(big) end, function() return bn(big_cl) end)
  local g = r({ 4096, 1024 })
  local gi = ember.randint(1, 1025, { 4096, 1024 })
  case("gather dim2 4096x1024", function() return g:gather(2, gi) end)
  local w = r({ 30000, 256 })
  local rows = ember.randint(1, 30001, { 4096 })
  case("index_select rows 30000x256", function() return w:index_select(1, rows) end)
  local tok = ember.randint(1, 30001, { 32, 128 })
  case("embedding 32x128 of 30000x256", function() return F.embedding(tok, w) end)
  local logits, labels = r({ 256, 1000 }), ember.randint(1, 1001, { 256 })
  case("cross_entropy 256x1000", function() return F.cross_entropy(logits, labels) end)
  case("cross_entropy+backward 256x1000",
    with_backward(function(t) return F.cross_entropy(t, labels) end, r({ 256, 1000 })))
  local prm = r({ 1000000 })
  prm.grad = r({ 1000000 })
  local opt = ember.optim.Adam({ prm }, { lr = 1e-3 })
  case("adam step 1e6", function() opt:step() end)
  local u, v, k = r({ 64 }), r({ 64 }), r({ 64 })
  case("small chain 64", function() return (u * v + k):relu():sum() end)
end
build()

local run = {}
for _, name in ipairs(names) do
  if not wanted or wanted[name] then run[#run + 1] = name end
end
assert(#run > 0, "no case matches --only")
local threads = ember.get_num_threads()
local list = table.concat(run, ",")

local function torch_round(policy, nthreads)
  local env = ("SWEEP_THREADS=%d %s %s"):format(nthreads, policy and ("OMP_WAIT_POLICY=" .. policy) or "",
    cpu_clock and "SWEEP_CLOCK=cpu" or "")
  local p = io.popen(env .. " /usr/bin/python3 bench/ops_sweep_torch.py '" .. list .. "'")
  local s = p:read("*a")
  p:close()
  local t = {}
  for _, name in ipairs(run) do
    local pat = '"' .. name:gsub("[%-%+%.%(%)]", "%%%0") .. '": ([%d%.e%-]+)'
    t[name] = tonumber(s:match(pat)) or error("PyTorch printed no time for " .. name .. ": " .. s)
  end
  return t
end

local te, tt, ratio = {}, {}, {}
for _, name in ipairs(run) do te[name], tt[name], ratio[name] = {}, {}, {} end
-- a pass of ember's cases, the fastest so far kept
local function ember_pass(rd)
  for _, name in ipairs(run) do
    local t = ms_per_call(cases[name])
    if alts[name] then t = math.min(t, ms_per_call(alts[name])) end
    te[name][rd] = math.min(te[name][rd] or math.huge, t)
  end
end
for rd = 1, rounds do
  -- PyTorch at its best: ember's thread count under either wait policy, or one
  -- thread; ember has as many tries, a pass before each of PyTorch's, so that
  -- on a loaded machine neither side gets more draws of a quiet moment
  ember_pass(rd)
  local t1 = torch_round(nil, threads)
  ember_pass(rd)
  local t2 = torch_round("passive", threads)
  local t3 = t1
  if threads > 1 then
    ember_pass(rd)
    t3 = torch_round(nil, 1)
  end
  for _, name in ipairs(run) do
    tt[name][rd] = math.min(t1[name], t2[name], t3[name])
    ratio[name][rd] = te[name][rd] / tt[name][rd]
  end
  io.stderr:write(("round %d of %d\n"):format(rd, rounds))
end

local function uptime()
  local f = io.open("/proc/loadavg")
  local s = f and f:read("*l") or ""
  if f then f:close() end
  return s:match("^(%S+)") or "?"
end
local function cpu()
  local f = io.open("/proc/cpuinfo")
  local s = f and f:read("*a") or ""
  if f then f:close() end
  return (s:match("model name%s*:%s*([^\n]+)") or "?"):gsub('"', "'")
end

local out = { ('{"bench": "ops_sweep", "rounds": %d, "threads": %d, "tidy": %s, "clock": "%s", "cpu": "%s", "load": %s, "cases": ['):format(
  rounds, threads, tostring(tidy), cpu_clock and "cpu" or "wall", cpu(), uptime()) }
local logsum = 0
for i, name in ipairs(run) do
  local rm = B.median(ratio[name])
  logsum = logsum + math.log(rm)
  out[#out + 1] = ('%s\n  {"case": "%s", "ember_ms": %.4g, "torch_ms": %.4g, "ratio": %.3f}'):format(
    i > 1 and "," or "", name, B.median(te[name]), B.median(tt[name]), rm)
end
out[#out + 1] = ('\n], "geomean_ratio": %.3f}'):format(math.exp(logsum / #run))
print(table.concat(out))
