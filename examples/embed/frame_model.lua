-- frame_model.lua: the Lua side of frame_budget.c. An 8-layer MLP (width 512,
-- batch 128) learns a fixed regression task, one training step spread over as
-- many frames as it needs: the forward pass a few layers a frame, then the
-- backward pass a budget at a time (gm:backward_steps):
--   setup(mode, threads, deterministic)   mode "budget" or "oneshot"
--   tick(budget)    one frame's share of training; returns the number of
--                   steps completed so far
--   loss()          the last step's loss; param_hash() a 24-bit hash of every
--                   parameter's bits (exact in a float)
local ffi, bit = require("ffi"), require("bit")
local ember = require("ember")
local nn, F = ember.nn, ember.nn.functional
local GradManager = ember.autodiff.GradManager

local WIDTH, DEPTH, BATCH = 512, 8, 128
local model, opt, gm, x, y, mode
local run, h, layer, last_loss, steps = nil, nil, 0, 0, 0

function setup(m, threads, deterministic)
  mode = m
  ember.set_num_threads(threads)
  ember.set_deterministic(deterministic)
  ember.manual_seed(1)
  local layers = {}
  for i = 1, DEPTH do
    layers[#layers + 1] = nn.Linear(WIDTH, WIDTH)
    layers[#layers + 1] = nn.Tanh()
  end
  layers[#layers + 1] = nn.Linear(WIDTH, 1)
  model = nn.Sequential(unpack(layers))
  opt = ember.optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
  gm = GradManager():attach(model:parameters())
  x = ember.randn({ BATCH, WIDTH })
  y = x:narrow(2, 1, 8):sum(2, true):sin()
  run, h, layer, steps = nil, nil, 0, 0
end

local function finish_step()
  opt:step()
  opt:zero_grad()
  steps = steps + 1
end

function tick(budget)
  budget = budget:item()
  if mode == "oneshot" then           -- the whole step in this frame
    gm:record()
    local l = F.mse_loss(model(x), y)
    gm:backward(l)
    last_loss = l:item()
    finish_step()
    return steps
  end
  local deadline = ember.clock() + budget
  if run == nil then                  -- forward, layer by layer, until the budget is spent
    if layer == 0 then
      gm:record()
      h, layer = x, 1
    end
    repeat
      h = model[tostring(layer)](h)
      layer = layer + 1
    until layer > model.n or ember.clock() >= deadline
    if layer > model.n then
      local l = F.mse_loss(h, y)
      last_loss = l:item()
      run, h, layer = gm:backward_steps(l), nil, 0
    end
  elseif run:step(math.max(deadline - ember.clock(), 0)) then   -- backward, a budget at a time
    run = nil
    finish_step()
  end
  return steps
end

function loss() return last_loss end

function param_hash()
  local h = 0
  for _, p in ipairs(model:parameters()) do
    local c = p:contiguous()
    local words = ffi.cast("const int32_t *", c:data_ptr())
    for i = 0, c:numel() - 1 do h = bit.bxor(bit.rol(h, 5), words[i]) end
  end
  return bit.band(bit.bxor(h, bit.rshift(h, 24)), 0xffffff)
end
