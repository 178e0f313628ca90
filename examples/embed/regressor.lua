-- regressor.lua: the Lua side of game_loop.c. A tiny MLP (1 -> 16 -> 1, tanh)
-- learns online, one step per frame, the signal the host draws each frame.
-- The host calls step(frame) with its frame buffer wrapped as a tensor (no
-- copy): frame is {N, 2}, column 1 the inputs x, column 2 the targets y.
-- step returns the frame's loss; predict(x) is there for the host to query.
local ember = require("ember")
local GradManager = ember.autodiff.GradManager

ember.manual_seed(7)
local HIDDEN, LR = 16, 0.1

local w1 = ember.randn({ 1, HIDDEN }) * 1.0
local b1 = ember.zeros({ HIDDEN })
local w2 = ember.randn({ HIDDEN, 1 }) * (1 / math.sqrt(HIDDEN))
local b2 = ember.zeros({ 1 })
local params = { w1, b1, w2, b2 }

local gm = GradManager():attach(params)
-- ember.optim.SGD when the package has it, else the same update by hand
local opt = ember.optim and ember.optim.SGD and ember.optim.SGD(params, { lr = LR })

local function forward(x)       -- x: {N, 1}
  local h = (x:matmul(w1) + b1):tanh()   -- {N, HIDDEN}
  return h:matmul(w2) + b2               -- {N, 1}
end

function step(frame)
  assert(ember.is_tensor(frame) and #frame:shape() == 2 and frame:size(2) == 2,
    "step: frame must be an {N, 2} tensor")
  local x, y = frame:narrow(2, 1, 1), frame:narrow(2, 2, 1)
  local loss
  gm:scope(function()
    loss = (forward(x) - y):pow(2):mean()
    gm:backward(loss)
  end)
  if opt then
    opt:step()
    opt:zero_grad()
  else
    ember.no_grad(function()
      for _, p in ipairs(params) do
        p:sub_(p.grad * LR)
        p.grad = nil
      end
    end)
  end
  return loss:detach()
end

function predict(x)
  return ember.no_grad(forward, x)
end
