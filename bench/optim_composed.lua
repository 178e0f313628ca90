-- The optimizers composed of tensor ops in Lua (RMSprop, Adagrad, Adamax,
-- NAdam: lua/ember/optim/), whose parameter-sized temporaries go back at once
-- (each parameter's update runs in ember.tidy: docs/performance.md,
-- "Memory"): CPU ms (os.clock, all threads) per step over four 256x1024
-- float32 parameters, the median of rounds of 20 steps. Prints JSON.
--   luajit bench/optim_composed.lua [rounds]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")

local rounds = tonumber(arg and arg[1]) or 5
ember.manual_seed(0)
local out = { bench = "optim_composed", rounds = rounds, threads = ember.get_num_threads() }
for _, case in ipairs({ { "RMSprop", { lr = 1e-3, momentum = 0.9, centered = true } }, { "Adagrad", {} },
    { "Adamax", {} }, { "NAdam", {} } }) do
  local params = {}
  for i = 1, 4 do
    params[i] = ember.randn({ 256, 1024 })
    params[i].grad = ember.randn({ 256, 1024 })
  end
  local opt = ember.optim[case[1]](params, case[2])
  for _ = 1, 5 do opt:step() end
  local ms = {}
  for r = 1, rounds do
    local c0 = os.clock()
    for _ = 1, 20 do opt:step() end
    ms[r] = (os.clock() - c0) / 20 * 1e3
  end
  out[case[1] .. "_ms"] = B.median(ms)
end
print(B.json(out))
