-- What freeing the library's own temporaries at once saves (Sequential's
-- activations between built-in layers, F.linear's product, the losses run in
-- a tidy: docs/performance.md, "Memory"): CPU µs (os.clock, all threads)
-- per forward of the MLP recipe's model on a batch of 128 under no_grad, per
-- recorded forward with cross-entropy and backward, per smooth_l1_loss
-- forward and backward over 1e6 elements, and per MultiheadAttention(256, 8)
-- forward and backward on {128, 8, 256}, the median of rounds. Prints JSON. Compare two trees by running each in turn, e.g.
--   luajit bench/temporaries.lua; (cd ../old && EMBER_LIB=... luajit bench/temporaries.lua)
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local nn, F = ember.nn, ember.nn.functional

local rounds = tonumber(arg and arg[1]) or 5
ember.manual_seed(0)
local model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
  nn.Linear(128, 10))
local x = ember.randn({ 128, 1, 28, 28 })
local y = ember.randint(1, 11, { 128 })
local gm = ember.autodiff.GradManager():attach(model:parameters())
local function forward(n) ember.no_grad(function() for _ = 1, n do local _ = model(x) end end) end
local function step(n)
  for _ = 1, n do
    gm:record()
    gm:backward(F.cross_entropy(model(x), y))
  end
end
local a, b = ember.randn({ 1000, 1000 }), ember.randn({ 1000, 1000 })
local ga = ember.autodiff.GradManager():attach(a)
local function smooth_l1(n)
  for _ = 1, n do
    ga:record()
    ga:backward(F.smooth_l1_loss(a, b))
    a.grad = nil
  end
end
local mha = nn.MultiheadAttention(256, 8)
local s = ember.randn({ 128, 8, 256 })
local gh = ember.autodiff.GradManager():attach(mha:parameters())
local function attention(n)
  for _ = 1, n do
    gh:record()
    gh:backward(mha(s, s, s):sum())
  end
end
forward(50)
step(20)
smooth_l1(5)
attention(3)
local fw, st, sl, at = {}, {}, {}, {}
for r = 1, rounds do
  local c0 = os.clock()
  forward(200)
  local c1 = os.clock()
  step(100)
  local c2 = os.clock()
  smooth_l1(20)
  local c3 = os.clock()
  attention(5)
  local c4 = os.clock()
  fw[r], st[r], sl[r] = (c1 - c0) / 200 * 1e6, (c2 - c1) / 100 * 1e6, (c3 - c2) / 20 * 1e6
  at[r] = (c4 - c3) / 5 * 1e6
end
print(B.json({ bench = "temporaries", rounds = rounds, mlp_forward_us = B.median(fw),
  mlp_forward_backward_us = B.median(st), smooth_l1_1e6_us = B.median(sl), mha_forward_backward_us = B.median(at),
  threads = ember.get_num_threads() }))
