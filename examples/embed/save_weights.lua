-- save_weights.lua: the Lua half of load_weights.c. Trains a small MLP
-- (1 -> 16 -> 1, tanh) on y = sin(3x) and saves a whole checkpoint with
-- ember.save: the model's state_dict, the optimizer's state, the step count
-- and a probe (inputs and the model's outputs on them), so the C host can
-- check that it computes what Lua computed.
--
-- Run:  build/cli/ember examples/embed/save_weights.lua out.safetensors
local nn, F, optim = ember.nn, ember.nn.functional, ember.optim

local path = assert(arg[1], "usage: save_weights.lua <checkpoint path>")
local STEPS = 300

ember.manual_seed(3)
local model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
local opt = optim.Adam(model:parameters(), { lr = 0.02 })
local gm = ember.autodiff.GradManager():attach(model:parameters())
local x = ember.linspace(-1, 1, 64):reshape({ 64, 1 })
local y = (x * 3):sin()
local loss
for _ = 1, STEPS do
  gm:record()
  loss = F.mse_loss(model(x), y)
  gm:backward(loss)
  opt:step()
  opt:zero_grad()
end

local probe = ember.tensor({ { -0.9 }, { -0.3 }, { 0 }, { 0.25 }, { 0.8 } })
ember.save(path, { model = model:state_dict(), optim = opt:state_dict(), steps = STEPS,
  probe = { x = probe, y = ember.no_grad(function() return model(probe) end) } })
print(("trained %d steps, loss %.5f; saved %s"):format(STEPS, loss:item(), path))
