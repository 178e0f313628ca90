-- One training step of ResNet-18 beside PyTorch's, in the same run: forward
-- and backward (cross-entropy) of the model zoo's ResNet-18
-- (spec/support/zoo.lua; PyTorch's definition in spec/fixtures/zoo/gen.py)
-- in float32, training mode, as bench/resnet18_torch.py does in PyTorch
-- 1.13. Rounds alternate ember and PyTorch so a noisy neighbour slows both
-- alike; both run on ember's thread count and OpenBLAS core (PyTorch in a
-- child process, OMP_WAIT_POLICY=PASSIVE as bench/lstm.lua explains).
-- Prints JSON: medians of seconds per step and of the per-round ratios
-- ember / PyTorch.
--   luajit bench/resnet18.lua [rounds [iters [width [classes [batch [size [threads]]]]]]]
-- (defaults 5 rounds of 2 steps of the full ResNet-18: width 64, 1000
-- classes, batch 8 of 112x112 images, ember's thread count; on a loaded
-- machine 1 thread gives steadier figures: PyTorch's OpenMP team of 2
-- otherwise waits on a busy core)
package.path = "./bench/?.lua;./spec/support/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local Z = require("zoo")

local a = {}
for i, default in ipairs({ 5, 2, 64, 1000, 8, 112 }) do a[i] = tonumber(arg and arg[i]) or default end
local rounds, iters, width, classes, batch, size = unpack(a)
if arg and arg[7] then ember.set_num_threads((assert(tonumber(arg[7]), "threads must be a number"))) end
ember.manual_seed(0)
local model = Z.ResNet18(width, classes)
local x = ember.randn({ batch, 3, size, size })
local labels = ember.randint(1, classes + 1, { batch })
local gm = ember.autodiff.GradManager():attach(model:parameters())

local function step()
  gm:record()
  gm:backward(ember.nn.functional.cross_entropy(model(x), labels))
  model:zero_grad()
end

local threads, core = ember.get_num_threads(), B.blas_core(ember)
local torch_cmd = ("OMP_WAIT_POLICY=PASSIVE OPENBLAS_CORETYPE=%s /usr/bin/python3 bench/resnet18_torch.py %d %d %d %d %d %d")
  :format(core, iters, threads, width, classes, batch, size)
local te, tt, ratio = B.against_torch(step, torch_cmd, iters, rounds)
print(B.json({ bench = "resnet18_step", width = width, classes = classes, batch = batch, size = size,
  threads = threads, openblas_core = core, ember_s = B.median(te), torch_s = B.median(tt),
  ratio = B.median(ratio), ember_min_s = math.min(unpack(te)), torch_min_s = math.min(unpack(tt)),
  peak_rss_mb = B.peak_rss_mb() }))
