-- bench/convnets_plan.lua: batch-1 inference (1x3x32x32, float32, eval mode:
-- batch norm as channel_affine) of ResNet-18 (spec/support/zoo.lua, width
-- 64, 10 classes) and MobileNetV2 (bench/mobilenetv2.lua, as bench/convnets.lua times it) four ways:
--   eager    the module's forward under no_grad, from Lua
--   replay   ember.jit.trace(model, {x}, {train = false}), then plan(x)
--   c_host   that plan saved (plan:save) and run by a C host through the C
--            API alone (bench/jit_infer.c, built here with cc), separate
--            process, after a check that its output is Lua's to the bit
--   torch    PyTorch 1.13 in its fastest form of eager NCHW and
--            channels_last, torch.jit.trace + freeze in both layouts and
--            optimize_for_inference (bench/convnets_plan_torch.py), its
--            threads ember's, a separate process
-- in alternating rounds (eager, replay, C host, PyTorch) for each thread
-- count. The replay's output and the C host's are asserted bit-identical to
-- the eager forward's. Prints one JSON object per net and thread count:
-- medians over the rounds of ms per call each way and of the per-round
-- ratios, plan:stats(), and the load average before and after.
--   luajit bench/convnets_plan.lua [rounds [iters [threads [nets [torch]]]]]
-- rounds 5, iters 100 (calls per round and way), threads "1,2", nets
-- "resnet18,mobilenetv2", torch "torch" (anything else: ember alone).
package.path = "./bench/?.lua;./spec/support/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local Z = require("zoo")

local rounds, iters = tonumber(arg and arg[1]) or 5, tonumber(arg and arg[2]) or 100
local thread_list, nets = arg and arg[3] or "1,2", arg and arg[4] or "resnet18,mobilenetv2"
local with_torch = (arg and arg[5] or "torch") == "torch"

local function loadavg()
  local f = io.open("/proc/loadavg")
  local s = f and f:read("*l") or "?"
  if f then f:close() end
  return s:match("^(%S+ %S+ %S+)") or s
end

local function run(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  return out
end

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir) == 0)
local exe, build = dir .. "/jit_infer", os.getenv("EMBER_BUILD_DIR") or "build"
local built = os.execute(("cc -O2 bench/jit_infer.c -Icore/include -L%s -lember -Wl,-rpath,%s/%s -o %s")
  :format(build, os.getenv("PWD"), build, exe))
assert(built == 0 or built == true, "cc failed")

local MobileNetV2 = require("mobilenetv2")
for threads in thread_list:gmatch("%d+") do
  threads = tonumber(threads)
  ember.set_num_threads(threads)
  for net in nets:gmatch("[^,]+") do
    assert(net == "resnet18" or net == "mobilenetv2", "nets: resnet18 or mobilenetv2, got " .. net)
    local load_before = loadavg()
    ember.manual_seed(0)
    local model = net == "resnet18" and Z.ResNet18(64, 10) or MobileNetV2(10)
    model:eval()
    local x = ember.randn({ 1, 3, 32, 32 })
    local function eager() return ember.no_grad(function() return model(x) end) end
    local plan = ember.jit.trace(model, { x }, { train = false })
    local want = eager()
    assert(ember.equal(want, plan(x)), net .. ": the replay differs from the eager forward")
    local path, probes = dir .. "/" .. net .. ".plan", dir .. "/" .. net .. ".probes"
    plan:save(path)
    ember.save(probes, { x = x, y = want })
    local function c_host(n)
      local out = run(("%s %s %d %d %s"):format(exe, path, n, threads, probes))
      assert(out:match('"same_bits": 1'), net .. ": the C host's output differs from Lua's: " .. out)
      return tonumber(out:match('"us_per_call": ([%d.e-]+)')) * 1e-3
    end
    local function per_call(fn)
      fn()
      local t0 = B.now()
      for _ = 1, iters do fn() end
      return (B.now() - t0) / iters * 1e3
    end
    local t = { eager = {}, replay = {}, c_host = {}, torch = {} }
    local ratio = { replay_eager = {}, replay_torch = {}, c_host_torch = {}, eager_torch = {} }
    local form, forms = nil, {}
    for r = 1, rounds do
      t.eager[r] = per_call(eager)
      t.replay[r] = per_call(function() return plan(x) end)
      t.c_host[r] = c_host(iters)
      ratio.replay_eager[r] = t.replay[r] / t.eager[r]
      if with_torch then
        local out = run(("OMP_NUM_THREADS=%d /usr/bin/python3 bench/convnets_plan_torch.py %s %d %d")
          :format(threads, net, iters, threads))
        t.torch[r] = assert(tonumber(out:match('"ms_per_call": ([%d.e-]+)')), "PyTorch printed no time: " .. out)
        form = out:match('"form": "([%w_]+)"')
        forms[form] = (forms[form] or 0) + 1
        ratio.replay_torch[r] = t.replay[r] / t.torch[r]
        ratio.c_host_torch[r] = t.c_host[r] / t.torch[r]
        ratio.eager_torch[r] = t.eager[r] / t.torch[r]
      end
    end
    local st = plan:stats()
    local fields = { bench = "convnets_plan_" .. net, threads = threads, rounds = rounds, iters = iters,
      same_bits = true, ops = st.ops, fused = st.fused, removed = st.removed, arena_bytes = st.arena_bytes,
      load_before = load_before, load_after = loadavg() }
    for k, v in pairs(t) do if #v > 0 then fields[k .. "_ms"] = B.median(v) end end
    for k, v in pairs(ratio) do if #v > 0 then fields[k] = B.median(v) end end
    if with_torch then
      local fs = {}
      for f, n in pairs(forms) do fs[#fs + 1] = ("%s x%d"):format(f, n) end
      table.sort(fs)
      fields.torch_forms = table.concat(fs, ", ")
    end
    print(B.json(fields))
    os.remove(path)
    os.remove(probes)
  end
end
os.remove(exe)
os.remove(dir)
