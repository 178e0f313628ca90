-- bench/soak.lua: memory over long runs (issue 12): the resident set size at
-- the start, middle and end of a 10,000-iteration autograd loop (a small
-- graph with hooks, an in-place write into a view and a second derivative)
-- and of 2,000 training steps of the MLP recipe on Fashion-MNIST. A leak
-- shows as RSS that keeps climbing after the first quarter. Prints JSON.
--   luajit bench/soak.lua
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local nn, F = ember.nn, ember.nn.functional
local GradManager = ember.autodiff.GradManager

local function rss_mb()
  local f = io.open("/proc/self/statm", "r")
  if not f then return 0 end
  local _, resident = f:read("*n", "*n")
  f:close()
  return resident * 4096 / 2 ^ 20
end

local out = {}

-- autograd: 10,000 iterations
do
  local x = ember.randn({ 64, 32 }, { dtype = "float64" })
  local w = ember.randn({ 32, 16 }, { dtype = "float64" })
  local marks = {}
  for it = 1, 10000 do
    local outer, inner = GradManager():attach(w), GradManager():attach(w)
    outer:record()
    inner:record()
    local h = x:matmul(w)
    h:narrow(2, 1, 4):mul_(2)                          -- a write through a view
    h = h:tanh()
    h:register_hook(function(g) return g end)
    inner:backward((h * h):sum())
    local g = w.grad
    w.grad = nil
    outer:backward((g * g):sum())                       -- a second derivative
    w.grad = nil
    if it == 1 or it == 5000 or it == 10000 then marks[#marks + 1] = rss_mb() end
  end
  out.autograd_rss_start_mb, out.autograd_rss_mid_mb, out.autograd_rss_end_mb = marks[1], marks[2], marks[3]
end

-- training: 2,000 steps of the MLP recipe
do
  ember.manual_seed(0)
  local train = ember.data.fashion_mnist("train")
  local model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
    nn.Linear(128, 10))
  local opt = ember.optim.SGD(model:parameters(), { lr = 0.1, momentum = 0.9 })
  local gm = GradManager():attach(model:parameters())
  local marks, step = {}, 0
  while step < 2000 do
    for xb, yb in ember.data.DataLoader(train, { batch_size = 128, shuffle = true }):iter() do
      step = step + 1
      gm:record()
      gm:backward(F.cross_entropy(model(xb), yb))
      opt:step()
      opt:zero_grad()
      if step == 1 or step == 1000 or step == 2000 then marks[#marks + 1] = rss_mb() end
      if step == 2000 then break end
    end
  end
  out.train_rss_start_mb, out.train_rss_mid_mb, out.train_rss_end_mb = marks[1], marks[2], marks[3]
end
out.live_tensors_end = ember.memory_stats().live_tensors
print(B.json(out))
