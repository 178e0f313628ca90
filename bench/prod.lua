-- bench/prod.lua: prod of a 1000 x 1000 tensor along each dim and of every
-- element, float32 and float64, in ms per call (medians of 7 rounds of 20).
-- bench/prod_torch.py times the same calls in PyTorch. Run from the
-- repository root after building:
--   luajit bench/prod.lua
--   OMP_NUM_THREADS=<ember's threads> /usr/bin/python3 bench/prod_torch.py
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local json = require("ember.json")
local out = { bench = "prod", threads = ember.get_num_threads() }

ember.manual_seed(0)
for _, dt in ipairs({ "float32", "float64" }) do
  local x = ember.randn({ 1000, 1000 }, { dtype = dt })
  for name, fn in pairs({ rows = function() return x:prod(2) end, cols = function() return x:prod(1) end,
    all = function() return x:prod() end }) do
    out[("%s_%s_ms"):format(name, dt)] = B.ms_per_call(fn, 20, 7)
  end
end
print(json.encode(out))
