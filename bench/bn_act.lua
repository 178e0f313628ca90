-- Batch norm with its activation in training as one op (batch_norm_act,
-- docs/nn.md "Batch normalisation") against batch_norm then the activation
-- (F.relu: one op; F.relu6: the where() composition), forward and backward,
-- at MobileNetV2's and ResNet-18's shapes (batch 32 on 32x32 images), the
-- two in alternation. Prints one JSON object per shape and activation:
-- milliseconds per forward + backward (the least over rounds) and the ratio.
--   luajit bench/bn_act.lua [reps [threads]]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional

local reps = tonumber(arg and arg[1]) or 7
if arg and arg[2] then ember.set_num_threads((assert(tonumber(arg[2]), "threads must be a number"))) end
ember.manual_seed(0)
local SHAPES = { { 32, 96, 16, 16 }, { 32, 144, 8, 8 }, { 32, 64, 8, 8 }, { 32, 384, 2, 2 } }
for _, shape in ipairs(SHAPES) do
  for _, act in ipairs({ "relu", "relu6" }) do
    local C = shape[2]
    local x, w, b, r = ember.randn(shape), ember.ones({ C }), ember.zeros({ C }), ember.randn(shape)
    local gm = ember.autodiff.GradManager():attach({ x, w, b })
    local function step(fused)
      return function()
        for _ = 1, 5 do
          gm:record()
          local y = fused and F.batch_norm(x, nil, nil, w, b, { training = true, activation = act })
            or F[act](F.batch_norm(x, nil, nil, w, b, { training = true }))
          gm:backward({ y }, { r })
          x.grad, w.grad, b.grad = nil, nil, nil
        end
      end
    end
    local tf, tu = {}, {}
    local fused, unfused = step(true), step(false)
    fused(); unfused()
    for k = 1, reps do
      local t0 = B.now(); fused(); local t1 = B.now(); unfused(); local t2 = B.now()
      tf[k], tu[k] = (t1 - t0) / 5 * 1e3, (t2 - t1) / 5 * 1e3
    end
    local f, u = math.min(unpack(tf)), math.min(unpack(tu))
    print(B.json({ bench = "bn_act", shape = table.concat(shape, "x"), activation = act, fused_ms = f, unfused_ms = u,
      ratio = f / u, threads = ember.get_num_threads() }))
  end
end
