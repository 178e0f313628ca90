-- Training benchmark, the CNN recipe of issue 5: Fashion-MNIST in memory,
-- conv 1->16 5x5 pad 2, ReLU, maxpool 2, conv 16->32 5x5 pad 2, ReLU,
-- maxpool 2, linear 1568->10, Adam lr 1e-3, batch 64 (shuffled), one epoch.
-- Prints JSON: seconds per epoch, samples/s, test accuracy, peak RSS.
-- PyTorch 1.13 on the 2-core build machine: 11.5 s/epoch, 85.5%, 640 MB.
--   luajit bench/train_cnn.lua [epochs [seed [det] [profile] [tidy]]]
--   (det: ember.set_deterministic(true); profile: where the time goes, B.run_epochs;
--   tidy: each step in ember.tidy)
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local nn = ember.nn

local o = B.train_args(arg or {}, 1)
local epochs, seed, det = o.epochs, o.seed, o.det or false   -- seed: initial weights and shuffling
ember.set_deterministic(det)
ember.manual_seed(seed)
local train, test = ember.data.fashion_mnist("train"), ember.data.fashion_mnist("test")
-- each convolution with its bias and ReLU is one op (nn.Conv2d's activation
-- option, PyTorch's ConvReLU2d)
local model = nn.Sequential(
  nn.Conv2d(1, 16, 5, { padding = 2, activation = "relu" }), nn.MaxPool2d(2),
  nn.Conv2d(16, 32, 5, { padding = 2, activation = "relu" }), nn.MaxPool2d(2),
  nn.Flatten(), nn.Linear(1568, 10))
local params = model:parameters()
local opt = ember.optim.Adam(params, { lr = 1e-3 })
local gm = ember.autodiff.GradManager():attach(params)
local loader = ember.data.DataLoader(train, { batch_size = 64, shuffle = true, seed = seed })

local times, breakdown = B.run_epochs(ember, epochs, o.profile, function()
  B.train_epoch(ember, model, loader, gm, opt, o.tidy)
end)
local acc = B.accuracy(ember, model, test, 500)
print(B.json(B.train_fields(ember, "train_cnn", o, times, #train), { test_accuracy = acc }, breakdown))
