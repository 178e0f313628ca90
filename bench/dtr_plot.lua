-- The plot in docs/dtr.md: time per step (relative to DTR off) against the
-- budget, from bench/dtr.lua's output, through ember.plot.svg.
--   luajit bench/dtr.lua all 5 3 > dtr.json
--   luajit bench/dtr_plot.lua dtr.json docs/dtr_time_budget.svg
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local ember = require("ember")

local src, out = arg[1], arg[2] or "docs/dtr_time_budget.svg"
assert(src, "usage: luajit bench/dtr_plot.lua BENCH_OUTPUT.json [OUT.svg]")
local f = assert(io.open(src, "r"))
local text = f:read("*a")
f:close()

-- the share of the activations' peak each setting leaves (bench/dtr.lua)
local SHARE = { P = 1, ["P/2"] = 1 / 2, ["P/3"] = 1 / 3, ["P/4"] = 1 / 4 }
local NAMES = { dtr_resnet = "ResNet-18 (w16, b32)", dtr_transformer = "transformer block (b8)" }
local series, by_bench = {}, {}
for obj in text:gmatch("%b{}") do
  local bench, setting = obj:match('"bench": "([^"]+)"'), obj:match('"setting": "([^"]+)"')
  local ratio = tonumber(obj:match('"ratio_to_off": ([%d.e+-]+)'))
  if NAMES[bench] and SHARE[setting] and ratio then
    local s = by_bench[bench]
    if not s then
      s = { name = NAMES[bench], x = {}, y = {} }
      by_bench[bench] = s
      series[#series + 1] = s
    end
    s.x[#s.x + 1], s.y[#s.y + 1] = SHARE[setting], ratio
  end
end
assert(#series > 0, "no dtr_resnet or dtr_transformer rows in " .. src)
series[#series + 1] = { name = "target (the DTR paper's point)", x = { 1 / 3, 1 / 2, 1 }, y = { 1.3, 1.15, 1 } }
ember.plot.svg(out, series, { title = "DTR: time per step against the budget",
  xlabel = "budget: share of the activations' unconstrained peak kept", ylabel = "time / time with DTR off",
  xmin = 0.2, xmax = 1, ymin = 1 })
print(out)
