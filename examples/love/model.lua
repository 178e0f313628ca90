-- examples/love/model.lua: the curve the game fits and the model that fits
-- it. The main thread and the trainer thread each require their own copy
-- (a love.thread is a separate Lua state with its own ember).
local ember = require("ember")
local nn = ember.nn

local M = {}

M.N = 512          -- points on the curve, all of them in every batch
M.WIDTH = 512      -- hidden width: a step takes longer than a frame's budget

-- x on [-3, 3] and y = 0.8 sin(2x) + 0.1x plus noise (the same for a seed)
function M.data(seed)
  ember.manual_seed(seed)
  local x = ember.linspace(-3, 3, M.N):reshape({ M.N, 1 })
  local y = (x * 2):sin() * 0.8 + x * 0.1 + ember.randn({ M.N, 1 }) * 0.05
  return x, y
end

-- The model, its optimizer and its GradManager.
function M.new(seed)
  ember.manual_seed(seed)
  local layers = { nn.Linear(1, M.WIDTH), nn.Tanh(), nn.Linear(M.WIDTH, M.WIDTH), nn.Tanh(),
    nn.Linear(M.WIDTH, M.WIDTH), nn.Tanh(), nn.Linear(M.WIDTH, 1) }
  local net = nn.Sequential(unpack(layers))
  local params = net:parameters()
  local opt = ember.optim.Adam(params, { lr = 1e-3 })
  local gm = ember.autodiff.GradManager():attach(params)
  return { net = net, layers = layers, opt = opt, gm = gm }
end

-- A list of numbers from an (N, 1) tensor.
function M.numbers(t)
  local out = {}
  for i, row in ipairs(t:detach():tolist()) do out[i] = row[1] end
  return out
end

-- One training step in one call: forward, backward, optimizer. Returns the
-- loss and the model's output on x (the curve it draws).
function M.step(m, x, y)
  m.gm:record()
  local pred = m.net(x)
  local loss = ember.nn.functional.mse_loss(pred, y)
  m.gm:backward(loss)
  m.opt:step()
  m.opt:zero_grad()
  return loss:item(), pred
end

-- The same step in slices of a time budget: slice(seconds) runs the forward
-- pass a layer at a time while the budget lasts, then backward nodes
-- (gm:backward_steps / BackwardRun:step) for what is left of it, and once
-- backward is complete the optimizer step. It returns the loss and the output
-- when a step completes, nil before. Every slice runs at least one layer or
-- one backward node, so a frame can pass the budget by the longest of those.
function M.stepper(m, x, y)
  local k, h, run, loss = 0, nil, nil, nil
  local s = {}
  function s.slice(seconds)
    local t0 = ember.clock()
    if not run then
      if k == 0 then
        m.gm:record()
        h = x
      end
      repeat
        k = k + 1
        h = m.layers[k](h)
      until k == #m.layers or ember.clock() - t0 >= seconds
      if k < #m.layers then return nil end
      loss = ember.nn.functional.mse_loss(h, y)
      run = m.gm:backward_steps(loss)
    end
    if not run:step(math.max(seconds - (ember.clock() - t0), 0)) then return nil end
    run, k = nil, 0
    m.opt:step()
    m.opt:zero_grad()
    return loss:item(), h
  end
  return s
end

return M
