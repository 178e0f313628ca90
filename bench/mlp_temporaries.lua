-- What freeing the library's own temporaries at once saves (Sequential's
-- activations between built-in layers, F.linear's product, cross-entropy's
-- internals: docs/performance.md, "Memory"): CPU µs (os.clock, all threads)
-- per forward of the MLP recipe's model on a batch of 128 under no_grad, and
-- per recorded forward with cross-entropy and backward, the median of
-- rounds. Prints JSON. Compare two trees by running each in turn, e.g.
--   luajit bench/mlp_temporaries.lua; (cd ../old && EMBER_LIB=... luajit bench/mlp_temporaries.lua)
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
forward(50)
step(20)
local fw, st = {}, {}
for r = 1, rounds do
  local c0 = os.clock()
  forward(200)
  local c1 = os.clock()
  step(100)
  local c2 = os.clock()
  fw[r], st[r] = (c1 - c0) / 200 * 1e6, (c2 - c1) / 100 * 1e6
end
print(B.json({ bench = "mlp_temporaries", rounds = rounds, forward_us = B.median(fw),
  forward_backward_us = B.median(st), threads = ember.get_num_threads() }))
