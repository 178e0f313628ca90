-- Fashion-MNIST with a small convolutional network.
--
-- Shows Conv2d, BatchNorm2d, MaxPool2d and Dropout in an nn.Module subclass,
-- Adam with a step learning-rate schedule, train/eval modes, checkpoints with
-- ember.save / ember.load (resume with --resume), and the loss and accuracy
-- curves as an SVG plot. Two conv layers: 1->32 and 32->64, 5x5, each
-- followed by batch norm, ReLU and 2x2 max pooling; then a 3136->128->10
-- classifier. Reaches about 91% test accuracy in 4 epochs (91.4% measured);
-- about 45 s per epoch, 3 minutes in all, on the 2-core machine of 2026-11-23
-- (65 s and 4.5 minutes on an earlier, slower one). --autocast bf16 runs the
-- forward pass under ember.autocast("bfloat16") (convolutions and linear
-- layers in bfloat16, batch norm and the loss in float32; docs/nn.md): after
-- one epoch 88.72% against float32's 88.54%, a step 1.19x float32's time.
-- --limit N trains on the first N batches of each epoch only (0: all).
--   luajit examples/fashion_mnist_cnn.lua [--epochs 4] [--out DIR] [--resume] [--autocast bf16] [--limit N]
--     [--device cuda]
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/?.lua;" .. package.path
local ember = require("ember")
local nn, F, optim = ember.nn, ember.nn.functional, ember.optim
local fashion = require("fashion")

local opts = require("options").parse("fashion_mnist_cnn.lua", { epochs = 4, batch = 64, lr = 1e-3,
  out = "runs/fashion_mnist_cnn", seed = 0, autocast = "off", limit = 0, device = "cpu", resume = false }, arg)
local AUTOCAST = { off = false, bf16 = "bfloat16" }
if AUTOCAST[opts.autocast] == nil then error("--autocast takes off or bf16, got " .. opts.autocast) end
local autocast = AUTOCAST[opts.autocast]
local device = require("device").check(ember, opts.device)
require("options").mkdir(opts.out)
local ckpt = opts.out .. "/checkpoint.safetensors"

local Net = nn.Module:extend("FashionCNN")
function Net:init()
  self.conv1 = nn.Conv2d(1, 32, 5, { padding = 2 })
  self.bn1 = nn.BatchNorm2d(32)
  self.conv2 = nn.Conv2d(32, 64, 5, { padding = 2 })
  self.bn2 = nn.BatchNorm2d(64)
  self.pool = nn.MaxPool2d(2)
  self.fc1 = nn.Linear(64 * 7 * 7, 128)
  self.drop = nn.Dropout(0.3)
  self.fc2 = nn.Linear(128, 10)
end
function Net:forward(x)
  x = self.pool(F.relu(self.bn1(self.conv1(x))))     -- 32 x 14 x 14
  x = self.pool(F.relu(self.bn2(self.conv2(x))))     -- 64 x 7 x 7
  x = self.drop(F.relu(self.fc1(x:flatten(2))))
  return self.fc2(x)
end

ember.manual_seed(opts.seed)
local train, test = ember.data.fashion_mnist("train"), ember.data.fashion_mnist("test")
local model = Net()
model:to(device)
local params = model:parameters()
local opt = optim.Adam(params, { lr = opts.lr })
local sched = optim.lr_scheduler.StepLR(opt, { step_size = 2, gamma = 0.3 })
local gm = ember.autodiff.GradManager():attach(params)

local start, history = 1, { loss = {}, accuracy = {} }
if opts.resume and io.open(ckpt, "rb") then
  local sd, meta = ember.load(ckpt, { device = device })
  model:load_state_dict(sd)
  start = tonumber(meta.epoch) + 1
  for _ = 1, start - 1 do sched:step() end
  for v in (meta.loss or ""):gmatch("[^,]+") do history.loss[#history.loss + 1] = tonumber(v) end
  for v in (meta.accuracy or ""):gmatch("[^,]+") do history.accuracy[#history.accuracy + 1] = tonumber(v) end
  print(("resumed from %s after epoch %d"):format(ckpt, start - 1))
end

local function evaluate() return fashion.evaluate(ember, model, test, device, 500, autocast) end

local loader = ember.data.DataLoader(train, { batch_size = opts.batch, shuffle = true, seed = opts.seed })
local acc
for epoch = start, opts.epochs do
  loader:set_epoch(epoch - 1)
  local bar = ember.progress(opts.limit > 0 and math.min(opts.limit, #loader) or #loader, { desc = ("epoch %d/%d"):format(epoch, opts.epochs) })
  local total, n = 0, 0
  for x, y in loader:iter() do
    x, y = x:to(device), y:to(device)
    gm:record()
    local loss = ember.autocast(autocast, function() return F.cross_entropy(model(x), y) end)
    gm:backward(loss)
    opt:step()
    opt:zero_grad()
    local l = loss:item()
    total, n = total + l, n + 1
    bar:update(1, { loss = ("%.4f"):format(l) })
    if n == opts.limit then break end
  end
  bar:close()
  sched:step()
  acc = evaluate()
  history.loss[#history.loss + 1] = total / n
  history.accuracy[#history.accuracy + 1] = acc
  print(("epoch %d: train loss %.4f, test accuracy %.2f%%"):format(epoch, total / n, 100 * acc))
  ember.save(ckpt, model:state_dict(), { epoch = tostring(epoch), loss = table.concat(history.loss, ","),
    accuracy = table.concat(history.accuracy, ",") })
end
acc = acc or evaluate()
fashion.plot(ember, opts.out, history, "Fashion-MNIST CNN")
print(("test accuracy: %.2f%%"):format(100 * acc))
