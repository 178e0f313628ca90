-- save_plan.lua: the Lua half of run_plan.c. Trains a small classifier (an
-- MLP 4 -> 32 -> 32 -> 3 on three Gaussian blobs, 200 SGD steps), traces
-- its forward for one sample at a time (ember.jit.trace with train = false)
-- and saves the plan; beside it, probes.safetensors holds inputs and the
-- plan's outputs on them, so the C host can check that it computes what Lua
-- computed, bit for bit. Given a third path, it also traces one more
-- training step (forward, backward, SGD with momentum) and saves it there,
-- its weights named as the model's state_dict; then it trains 5 steps
-- eagerly and keeps the losses and the trained weights in the probes, for
-- the host to train from the saved step and check both. Given a fourth
-- path, it goes on with AdamW: one eager step (the optimizer's state), one
-- traced and saved there (the state, its step count and hyperparameters
-- in the file), 5 more eager steps whose losses, weights, state and step
-- count go in the probes under "adam.".
--
-- Run:  build/cli/ember examples/embed/save_plan.lua model.plan probes.safetensors [step.plan [adam.plan]]
local nn, F, optim = ember.nn, ember.nn.functional, ember.optim

local plan_path = assert(arg[1], "usage: save_plan.lua <plan path> <probes path>")
local probe_path = assert(arg[2], "usage: save_plan.lua <plan path> <probes path>")

ember.manual_seed(11)
local centers = ember.randn({ 3, 4 }) * 3
local labels = ember.randint(1, 4, { 256 })
local x = centers:index_select(1, labels) + ember.randn({ 256, 4 })
local model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3))
local opt = optim.SGD(model:parameters(), { lr = 0.05, momentum = 0.9 })
local gm = ember.autodiff.GradManager():attach(model:parameters())
-- a training step of the model, with the optimizer opt holds when it runs
local function step(xb, yb)
  gm:record()
  local loss = F.cross_entropy(model(xb), yb)
  gm:backward(loss)
  opt:step()
  opt:zero_grad()
  return loss
end
for _ = 1, 200 do step(x, labels) end

local infer = ember.jit.trace(model, { x[{ { 1, 1 } }]:contiguous() }, { train = false })
infer:save(plan_path)
local probes, outs = {}, {}
for i = 1, 5 do
  probes["x" .. i] = x[{ { i, i } }]:contiguous()
  probes["y" .. i] = infer(probes["x" .. i])
end
local step_path = arg[3]
if step_path then
  local train = ember.jit.trace(step, { x, labels })   -- one more step, run and recorded
  train:save(step_path, { names = model:state_dict() })
  probes.train_x, probes.train_y = x, labels
  for i = 1, 5 do probes["loss" .. i] = step(x, labels) end
  for k, v in pairs(model:state_dict()) do probes["trained." .. k] = v:clone() end
  print(("saved the training step to %s (%d ops)"):format(step_path, train:stats().ops))
end
local adam_path = arg[4]
if step_path and adam_path then
  opt = optim.AdamW(model:parameters(), { lr = 3e-3, weight_decay = 1e-2 })   -- the step below takes it
  step(x, labels)   -- the first step makes AdamW's state
  local train = ember.jit.trace(step, { x, labels })
  train:save(adam_path, { names = model:state_dict() })   -- the state as <name>.exp_avg, <name>.exp_avg_sq
  for i = 1, 5 do probes["adam.loss" .. i] = step(x, labels) end
  for k, v in pairs(model:state_dict()) do probes["adam.trained." .. k] = v:clone() end
  for _, e in ipairs(model:named_parameters()) do
    local st = opt.state[e[2]]
    probes["adam.trained." .. e[1] .. ".exp_avg"] = st.exp_avg:clone()
    probes["adam.trained." .. e[1] .. ".exp_avg_sq"] = st.exp_avg_sq:clone()
    probes["adam.next_step"] = ember.tensor({ st.step + 1 }, { dtype = "int64" })
  end
  print(("saved the AdamW step to %s (%d ops)"):format(adam_path, train:stats().ops))
end
ember.save(probe_path, probes)
print(("saved %s (%d ops) and 5 probes to %s"):format(plan_path, infer:stats().ops, probe_path))
