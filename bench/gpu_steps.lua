-- One training step of the MLP and CNN recipes on a device, beside PyTorch
-- eager's on the same device, in the same run: issue 14's "no slower than
-- PyTorch on that GPU". Synthetic batches of the recipes' shapes (a step's
-- time does not depend on the values; the lent GPU machines have no data
-- sets). Rounds alternate ember and PyTorch (bench/gpu_steps_torch.py, a
-- child process) so a noisy neighbour slows both alike; each side times
-- `iters` steps after warm-up, waiting for the device after each one.
-- Prints one JSON object per recipe: medians of seconds per step and of the
-- per-round ratios ember / PyTorch.
--   luajit bench/gpu_steps.lua [device [rounds [iters]]]   (default cuda 5 20)
-- With device cpu it checks itself on any machine (PyTorch then runs on
-- ember's thread count with OMP_WAIT_POLICY=PASSIVE).
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local nn = ember.nn

local device = arg and arg[1] or "cuda"
local rounds, iters = tonumber(arg and arg[2]) or 5, tonumber(arg and arg[3]) or 20
local python = os.getenv("EMBER_PYTHON") or "python3"

local RECIPES = {
  mlp = {
    batch = 128,
    model = function()
      return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
        nn.Linear(128, 10))
    end,
    optimizer = function(p) return ember.optim.SGD(p, { lr = 0.1, momentum = 0.9 }) end,
  },
  cnn = {
    batch = 64,
    model = function()
      return nn.Sequential(nn.Conv2d(1, 16, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1568, 10))
    end,
    optimizer = function(p) return ember.optim.Adam(p, { lr = 1e-3 }) end,
  },
}

local sync = device == "cpu" and function() end or function() ember.cuda.synchronize() end

-- seconds per step, the median of `iters` steps
local function ember_round(step)
  local t = {}
  for i = 1, iters do
    local t0 = B.now()
    step()
    sync()
    t[i] = B.now() - t0
  end
  return B.median(t)
end

local function torch_round(name)
  local env = device == "cpu" and ("OMP_WAIT_POLICY=PASSIVE OPENBLAS_CORETYPE=%s "):format(B.blas_core(ember)) or ""
  local cmd = ("%s%s bench/gpu_steps_torch.py %s %s %d %d"):format(env, python, name, device, iters,
    ember.get_num_threads())
  local p = io.popen(cmd)
  local s = p:read("*a")
  p:close()
  local v = s:match('"seconds_per_step": ([%d%.e%-]+)')
  if not v then error("bench/gpu_steps_torch.py printed no time: " .. s) end
  return tonumber(v), s:match('"torch": "([^"]+)"')
end

for _, name in ipairs({ "mlp", "cnn" }) do
  local r = RECIPES[name]
  ember.manual_seed(0)
  local model = r.model():to(device)
  local params = model:parameters()
  local opt = r.optimizer(params)
  local gm = ember.autodiff.GradManager():attach(params)
  local x = ember.rand({ r.batch, 1, 28, 28 }):to(device)
  local y = ember.randint(1, 11, { r.batch }, { dtype = "int64" }):to(device)
  local step = B.classifier_step(ember, model, opt, gm, x, y)
  for _ = 1, 5 do step() end
  sync()
  local te, tt, ratio, version = {}, {}, {}, nil
  for k = 1, rounds do
    te[k] = ember_round(step)
    tt[k], version = torch_round(name)
    ratio[k] = te[k] / tt[k]
  end
  print(B.json({ bench = "gpu_step_" .. name, device = device, batch = r.batch, rounds = rounds, iters = iters,
    ember_s = B.median(te), torch_s = B.median(tt), ratio = B.median(ratio), torch = version,
    ember_min_s = math.min(unpack(te)), torch_min_s = math.min(unpack(tt)) }))
end
