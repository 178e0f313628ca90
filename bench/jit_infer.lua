-- bench/jit_infer.lua: batch-1 inference of the MLP recipe's model
-- (784-256-128-10, eval) from a plan saved here (ember.jit.trace with
-- train = false, plan:save) and run by a C host through the C API alone
-- (bench/jit_infer.c, compiled here with cc against build/libember.so),
-- against PyTorch 1.13's torch.jit.trace'd module (frozen and optimized for
-- inference where faster; bench/jit_infer_torch.py), its threads ember's,
-- in alternating rounds of separate processes; also the replay from Lua
-- (plan(x)) and the eager forward in the same process. Prints JSON:
-- microseconds per call each way (medians over the rounds) and the ratios.
--   luajit bench/jit_infer.lua [rounds] [iters] [threads]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local nn = ember.nn

local rounds, iters = tonumber(arg and arg[1]) or 3, tonumber(arg and arg[2]) or 20000
if arg and tonumber(arg[3]) then ember.set_num_threads(tonumber(arg[3])) end
ember.manual_seed(0)
local model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
  nn.Linear(128, 10))
model:eval()
local x = ember.ones({ 1, 784 })
local plan = ember.jit.trace(model, { x }, { train = false })
local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
plan:save(dir .. "/mlp.plan")
local exe = dir .. "/jit_infer"
local build = os.getenv("EMBER_BUILD_DIR") or "build"
local built = os.execute(("cc -O2 bench/jit_infer.c -Icore/include -L%s -lember -Wl,-rpath,%s/%s -o %s")
  :format(build, os.getenv("PWD"), build, exe))
assert(built == 0 or built == true, "cc failed")

local function run(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  return tonumber(out:match('"us_per_call": ([%d.e-]+)')), out:match('"form": "([%w_]+)"')
end
local threads = ember.get_num_threads()
local c_us, torch_us, lua_us, eager_us, ratio, form = {}, {}, {}, {}, {}, nil
for r = 1, rounds do
  c_us[r] = run(("%s %s/mlp.plan %d %d"):format(exe, dir, iters, ember.get_num_threads()))
  torch_us[r], form = run(("OMP_NUM_THREADS=%d /usr/bin/python3 bench/jit_infer_torch.py %d %d")
    :format(threads, iters, threads))
  ratio[r] = c_us[r] / torch_us[r]
  lua_us[r] = B.ms_per_call(function() plan(x) end, math.floor(iters / 4), 1) * 1e3
  eager_us[r] = B.ms_per_call(function() ember.no_grad(function() return model(x) end) end, math.floor(iters / 4), 1) * 1e3
end
os.remove(exe)
os.remove(dir .. "/mlp.plan")
os.remove(dir)
print(B.json({ bench = "jit_infer", rounds = rounds, iters = iters, c_host_plan_us = B.median(c_us),
  torch_jit_us = B.median(torch_us), torch_form = form, c_host_vs_torch = B.median(ratio),
  lua_replay_us = B.median(lua_us), lua_eager_us = B.median(eager_us), threads = threads }))
