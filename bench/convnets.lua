-- Real convnets beside PyTorch's same models, in the same run: four cases,
--   resnet18_train     one SGD training step (momentum 0.9) of the zoo's
--                      ResNet-18 (spec/support/zoo.lua, width 64, 10
--                      classes) on a batch of 32 3x32x32 images, float32
--   mobilenetv2_train  the same step of MobileNetV2 (torchvision's layout:
--                      inverted residuals of a 1x1 expansion, a 3x3
--                      depthwise convolution and a 1x1 projection, each
--                      with batch norm, ReLU6 after the first two)
--   resnet18_infer, mobilenetv2_infer   batch-1 inference latency (eval
--                      mode, no_grad) of the two
-- PyTorch (bench/convnets_torch.py) runs in its fastest CPU form: the model
-- and input channels_last, ember's thread count, OMP_WAIT_POLICY as given
-- (PASSIVE by default; ACTIVE measured no faster here on a shared machine).
-- Rounds alternate ember and PyTorch so a noisy neighbour slows both alike.
-- Prints one JSON object per case: medians of seconds per step and of the
-- per-round ratios ember / PyTorch, ember's peak RSS and, with "profile",
-- where ember's step goes (ember.profile: seconds per step by category and
-- the eight slowest ops). AUTOCAST=bfloat16 runs the forwards under
-- autocast on both sides (PyTorch 1.13 cannot train the MobileNetV2 so:
-- relu6's backward has no bfloat16 CPU kernel; ember's side then runs alone).
-- LAYOUT=channels_last runs ember's side channels_last too (docs/nn.md);
-- LAYOUT=both times ember's two layouts against each other instead.
-- "memory" in place of "profile" measures peak memory instead of time, for
-- both sides the same way, each case in a fresh process: the resident set
-- before the first step (model and input made; on ember's side dead tensors
-- collected, the allocator's cache emptied and the C heap trimmed, so that
-- no freed block, model:to's NCHW weights among them, serves a step unseen)
-- and its peak (VmHWM) after a warm-up and `iters` steps; step_mb is the
-- difference, what the steps took at most (ember's side also gives
-- memory_stats()'s peak of tensor bytes over the steps, the model's
-- included). PyTorch's process carries Python and libtorch, ember's LuaJIT
-- and libember: the differences compare, the totals less so. ember's side
-- also says where its step memory went: kept_mb (tensor bytes the steps left
-- behind once all dead is collected: in inference kept weight layouts, live
-- taps, batch norm's scale and shift; in training the gradients and the
-- optimizer's state), garbage_mb (tensors dead but not yet collected
-- at the end), cache_mb (the allocator's cache of freed blocks), heap_mb
-- (the rest of the C heap's growth: oneDNN's primitives, size classes'
-- slack), and step_collected_mb (the step memory of a second run with a full
-- collection after each step: what garbage adds is the difference); the
-- rest of step_mb is code paged in (oneDNN's JIT kernels and library).
--   luajit bench/convnets.lua [cases [rounds [iters [threads [profile|memory]]]]]
-- cases: a comma-separated list or "all" (default); rounds 5; iters: steps
-- per round (default 3 for training, 20 for inference); threads: ember's
-- default; "-" for any of them: its default.
package.path = "./bench/?.lua;./spec/support/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local Z = require("zoo")
local nn, F = ember.nn, ember.nn.functional

local argv = {}
for i, v in ipairs(arg or {}) do argv[i] = v ~= "-" and v or nil end
local cases = (argv[1] == nil or argv[1] == "all") and "resnet18_train,mobilenetv2_train,resnet18_infer,mobilenetv2_infer"
  or argv[1]
local rounds, iters_arg = tonumber(argv[2]) or 5, tonumber(argv[3])
if argv[4] ~= nil then ember.set_num_threads((assert(tonumber(argv[4]), "threads must be a number"))) end
local profile = argv[5] == "profile"
local wait = os.getenv("TORCH_OMP_WAIT_POLICY") or "PASSIVE"
-- AUTOCAST=bfloat16: each step's forward (and loss) under ember.autocast, PyTorch's under torch.autocast
local autocast = os.getenv("AUTOCAST")
-- LAYOUT=channels_last: ember's model and input channels_last (model:to), as
-- PyTorch's always are here; LAYOUT=channels_last_input: the input alone
-- (the conv weights stay (O, C, kH, kW)); LAYOUT=both: ember NCHW against
-- ember in AGAINST (channels_last by default) in alternating rounds, no
-- PyTorch (ratio NCHW / the other)
local layout_env = os.getenv("LAYOUT") or "nchw"
local LAYOUTS = { nchw = true, channels_last = true, channels_last_input = true }
assert(LAYOUTS[layout_env] or layout_env == "both", "LAYOUT must be nchw, channels_last, channels_last_input or both")
local against = os.getenv("AGAINST") or "channels_last"
assert(LAYOUTS[against], "AGAINST must be nchw, channels_last or channels_last_input")
local layout = layout_env == "both" and "nchw" or layout_env
local function in_layout(x) return layout ~= "nchw" and x:contiguous({ memory_format = "channels_last" }) or x end

local MobileNetV2 = require("mobilenetv2")   -- as bench/convnets_torch.py builds it

local function make_step(case)
  local name, mode = case:match("^(%w+)_(%w+)$")
  assert(name == "resnet18" or name == "mobilenetv2", "unknown case " .. case)
  ember.manual_seed(0)
  local model = name == "resnet18" and Z.ResNet18(64, 10) or MobileNetV2(10)
  if layout == "channels_last" then model:to({ memory_format = "channels_last" }) end   -- not for _input
  if mode == "train" then
    local x, labels = in_layout(ember.randn({ 32, 3, 32, 32 })), ember.randint(1, 11, { 32 })
    local opt = ember.optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
    local gm = ember.autodiff.GradManager():attach(model:parameters())
    if not autocast then return B.classifier_step(ember, model, opt, gm, x, labels), 3 end
    return function()
      gm:record()
      gm:backward(ember.autocast(autocast, function() return F.cross_entropy(model(x), labels) end))
      opt:step()
      opt:zero_grad()
    end, 3
  end
  assert(mode == "infer", "unknown case " .. case)
  model:eval()
  local x = in_layout(ember.randn({ 1, 3, 32, 32 }))
  local function fwd() return model(x) end
  return function() ember.no_grad(function() return ember.autocast(autocast or false, fwd) end) end, 20
end

local threads, core = ember.get_num_threads(), B.blas_core(ember)

-- this process's VmRSS in MB (B.peak_rss_mb: its VmHWM)
local function rss_mb()
  local f = assert(io.open("/proc/self/status", "r"))
  local s = f:read("*a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)")) / 1024
end

-- the C library's heap in use, MB (glibc's mallinfo2, its mmapped blocks
-- included): ember's blocks, oneDNN's primitives and descriptors
local ffi = require("ffi")
local malloc_mb = function() return 0 / 0 end
local malloc_trim = function() end
if pcall(ffi.cdef, [[struct ember_bench_mallinfo2 { size_t arena, ordblks, smblks, hblks, hblkhd, usmblks,
  fsmblks, uordblks, fordblks, keepcost; }; struct ember_bench_mallinfo2 mallinfo2(void);
  int malloc_trim(size_t pad);]])
  and pcall(function() return ffi.C.mallinfo2, ffi.C.malloc_trim end) then
  malloc_trim = function() ffi.C.malloc_trim(0) end
  malloc_mb = function()
    local mi = ffi.C.mallinfo2()
    return tonumber(mi.uordblks + mi.hblkhd) / 2 ^ 20
  end
end

if argv[5] == "memory_child" then   -- one case, in this fresh process: one JSON line
  -- COLLECT=1: a full collection after each step (what garbage not yet
  -- collected adds to the peak is the difference from a run without)
  local collect = os.getenv("COLLECT") == "1"
  local step, default_iters = make_step(cases)
  -- the baseline holds no dead tensors, no cached blocks and no free heap
  -- pages (model:to's freed NCHW weights, 43 MB of ResNet-18's, would
  -- otherwise serve the steps' first blocks unseen)
  collectgarbage()
  collectgarbage()
  ember.memory_stats()   -- releases what the collection found dead
  ember.empty_cache()
  malloc_trim()
  local before, in_use0, heap0 = rss_mb(), ember.memory_stats().bytes_in_use, malloc_mb()
  ember.reset_peak_memory()
  for _ = 1, (iters_arg or default_iters) + 1 do
    step()
    if collect then collectgarbage() collectgarbage() end
  end
  local peak, m = B.peak_rss_mb(), ember.memory_stats()
  collectgarbage()
  collectgarbage()
  local mc = ember.memory_stats()
  -- kept_mb: tensor bytes the steps left behind once everything dead is
  -- collected (kept weight layouts and live taps, batch norm's scale and
  -- shift); garbage_mb: tensors dead but not yet collected at the end;
  -- cache_mb: freed blocks in the allocator's cache; heap_mb: the rest of
  -- the C heap's growth (oneDNN's primitives; ember's size classes' slack)
  print(B.json({ rss_before_mb = before, peak_rss_mb = peak, peak_tensor_mb = m.peak_bytes / 2 ^ 20,
    kept_mb = (mc.bytes_in_use - in_use0) / 2 ^ 20, garbage_mb = (m.bytes_in_use - mc.bytes_in_use) / 2 ^ 20,
    cache_mb = mc.bytes_cached / 2 ^ 20,
    heap_mb = malloc_mb() - heap0 - (mc.bytes_in_use - in_use0 + mc.bytes_cached) / 2 ^ 20 }))
  os.exit(0)
end
if argv[5] == "memory" then
  local function json_of(cmd)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    local function field(k) return tonumber(out:match('"' .. k .. '": ([%d%.e%-]+)')) end
    local before, peak = field("rss_before_mb"), field("peak_rss_mb")
    assert(before and peak, cmd .. " printed no memory figures: " .. out)
    return before, peak, field("peak_tensor_mb"), field
  end
  for c in cases:gmatch("[^,]+") do
    local iters = iters_arg or (c:match("_train$") and 3 or 20)
    local child = ("LAYOUT=%s %sluajit bench/convnets.lua %s - %d %d memory_child"):format(
      layout, autocast and ("AUTOCAST=" .. autocast .. " ") or "", c, iters, threads)
    local eb, ep, et, ef = json_of(child)
    local cb, cp = json_of("COLLECT=1 " .. child)
    local tb, tp = json_of(("OMP_WAIT_POLICY=%s OPENBLAS_CORETYPE=%s /usr/bin/python3 bench/convnets_torch.py %s %d %d "
      .. "channels_last %s memory"):format(wait, core, c, iters, threads, autocast or "float32"))
    print(B.json({ bench = "convnets_memory_" .. c, layout = layout, threads = threads, iters = iters,
      ember_rss_before_mb = eb, ember_peak_rss_mb = ep, ember_step_mb = ep - eb, ember_peak_tensor_mb = et,
      ember_kept_mb = ef("kept_mb"), ember_garbage_mb = ef("garbage_mb"), ember_cache_mb = ef("cache_mb"),
      ember_heap_mb = ef("heap_mb"), ember_step_collected_mb = cp - cb,
      torch_rss_before_mb = tb, torch_peak_rss_mb = tp, torch_step_mb = tp - tb, step_ratio = (ep - eb) / (tp - tb) }))
  end
  os.exit(0)
end
if layout_env == "both" then
  for c in cases:gmatch("[^,]+") do
    layout = "nchw"
    local nchw, default_iters = make_step(c)
    layout = against
    local cl = make_step(c)
    local iters = iters_arg or default_iters
    nchw()
    cl()
    local function loop(step) return function(n) for _ = 1, n do step() end end end
    local tn, tc, ratio = B.time_pair(loop(nchw), loop(cl), iters, rounds)
    print(B.json({ bench = "convnets_layouts_" .. c, against = against, threads = threads, nchw_s = tn,
      against_s = tc, nchw_over_against = ratio, peak_rss_mb = B.peak_rss_mb() }))
  end
  os.exit(0)
end
for c in cases:gmatch("[^,]+") do
  local step, default_iters = make_step(c)
  local iters = iters_arg or default_iters
  local cmd = ("OMP_WAIT_POLICY=%s OPENBLAS_CORETYPE=%s /usr/bin/python3 bench/convnets_torch.py %s %d %d channels_last %s")
    :format(wait, core, c, iters, threads, autocast or "float32")
  local ok, te, tt, ratio = pcall(B.against_torch, step, cmd, iters, rounds)
  local fields = {}
  if not ok then   -- PyTorch 1.13 cannot run it (relu6's backward in bfloat16 on the CPU): ember alone
    fields.torch_error = tostring(te):match("printed no time") and "PyTorch failed (run its command to see why)"
      or tostring(te)
    te, tt, ratio = {}, { 0 / 0 }, { 0 / 0 }
    for r = 1, rounds do te[r] = B.time(function(n) for _ = 1, n do step() end end, iters, 1) end
  end
  if profile then
    local r = ember.profile(function() for _ = 1, iters do step() end end)
    for _, k in ipairs({ "gemm", "conv", "pool", "elementwise", "other" }) do fields["prof_" .. k .. "_s"] = r[k] / iters end
    local ops = {}
    for op, v in pairs(r.ops) do ops[#ops + 1] = { op, v.seconds / iters } end
    table.sort(ops, function(p, q) return p[2] > q[2] end)
    for i = 1, math.min(8, #ops) do fields[("prof_top%d"):format(i)] = ("%s %.4f"):format(ops[i][1], ops[i][2]) end
  end
  print(B.json({ bench = "convnets_" .. c, layout = layout, autocast = autocast or "off", threads = threads, openblas_core = core, torch_wait_policy = wait,
    ember_s = B.median(te), torch_s = B.median(tt), ratio = B.median(ratio), ember_min_s = math.min(unpack(te)),
    torch_min_s = math.min(unpack(tt)), peak_rss_mb = B.peak_rss_mb() }, fields))
end
