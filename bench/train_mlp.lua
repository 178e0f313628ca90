-- Training benchmark, the MLP recipe of issue 5: Fashion-MNIST in memory,
-- MLP 784-256-128-10 with ReLU, cross-entropy, SGD lr 0.1 momentum 0.9,
-- batch 128 (shuffled), 3 epochs. Prints JSON: seconds per epoch (median of
-- the 3), samples/s, test accuracy after epochs 1 and 3, peak RSS.
-- PyTorch 1.13 on the 2-core build machine: 0.55 s/epoch, 86.2%, 488 MB.
--   luajit bench/train_mlp.lua [epochs [seed [flags...]]]
-- flags: det (ember.set_deterministic(true)), blas (every matrix product on
-- OpenBLAS: ember.set_dnnl_matmul_enabled(false)), profile (where the time
-- goes, B.run_epochs), tidy (each step in ember.tidy)
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local nn = ember.nn

local o = B.train_args(arg or {}, 3)
local epochs, seed, det = o.epochs, o.seed, o.det or false   -- seed: initial weights and shuffling
ember.set_deterministic(det)
ember.set_dnnl_matmul_enabled(not o.blas)
ember.manual_seed(seed)
local train, test = ember.data.fashion_mnist("train"), ember.data.fashion_mnist("test")
local model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
  nn.Linear(128, 10))
local params = model:parameters()
local opt = ember.optim.SGD(params, { lr = 0.1, momentum = 0.9 })
local gm = ember.autodiff.GradManager():attach(params)
local loader = ember.data.DataLoader(train, { batch_size = 128, shuffle = true, seed = seed })

local acc = {}
local times, breakdown = B.run_epochs(ember, epochs, o.profile, function()
  B.train_epoch(ember, model, loader, gm, opt, o.tidy)
end, function(e) acc[e] = B.accuracy(ember, model, test, 1000) end)
print(B.json(B.train_fields(ember, "train_mlp", o, times, #train), {
  test_accuracy_epoch1 = acc[1],
  test_accuracy_epoch3 = acc[3] or acc[#acc],
  dnnl_matmul = ember.dnnl_matmul_enabled(),
}, breakdown))
