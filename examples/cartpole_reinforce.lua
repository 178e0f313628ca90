-- REINFORCE (Williams, 1992) on CartPole, written in Lua: the classic
-- cart-and-pole physics of gym's CartPole-v1 (Barto, Sutton and Anderson,
-- 1983; Euler steps of 0.02 s, a push of 10 N left or right, the episode ends
-- when the pole leans past 12 degrees, the cart leaves [-2.4, 2.4] or after
-- 500 steps; reward 1 a step). The policy is a small MLP giving the logits
-- of ember.distributions.Categorical; a batch of episodes is played
-- with the policy outside any recording, then one forward pass over all
-- their states recomputes the log-probabilities with gradients, and the loss
-- is -(log_prob(action) * normalised discounted return), averaged.
--
--   luajit examples/cartpole_reinforce.lua [--target 150] [--seconds 60]
--       [--seed 0] [--envs 8] [--lr 0.01] [--hidden 32]
--
-- It stops when the average length of the last 20 episodes reaches
-- --target (150 by default; CartPole-v1's best is 500) or after --seconds.
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/?.lua;" .. package.path
local ember = require("ember")
local nn, D = ember.nn, ember.distributions

---------------------------------------------------------------- options
local opts = require("options").parse("cartpole_reinforce.lua", { target = 150, seconds = 60, seed = 0, envs = 8,
  lr = 0.01, hidden = 32, gamma = 0.99 }, arg)

---------------------------------------------------------------- the cart and pole
local GRAVITY, MASSCART, MASSPOLE, LENGTH, FORCE, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
local TOTAL_MASS, POLEMASS_LENGTH = MASSCART + MASSPOLE, MASSPOLE * LENGTH
local THETA_LIMIT, X_LIMIT, MAX_STEPS = 12 * 2 * math.pi / 360, 2.4, 500

-- a fresh state {x, x_dot, theta, theta_dot}, each uniform in [-0.05, 0.05)
-- from the environment's own generator
local env_gen = ember.Generator(opts.seed + 1)
local function reset()
  return ember.rand({ 4 }, { dtype = "float64", generator = env_gen }):mul(0.1):sub(0.05):tolist()
end

-- one Euler step under action 1 (push left) or 2 (push right); true when done
local function step(s, action)
  local x, x_dot, theta, theta_dot = s[1], s[2], s[3], s[4]
  local force = action == 2 and FORCE or -FORCE
  local cos, sin = math.cos(theta), math.sin(theta)
  local temp = (force + POLEMASS_LENGTH * theta_dot * theta_dot * sin) / TOTAL_MASS
  local theta_acc = (GRAVITY * sin - cos * temp) / (LENGTH * (4 / 3 - MASSPOLE * cos * cos / TOTAL_MASS))
  local x_acc = temp - POLEMASS_LENGTH * theta_acc * cos / TOTAL_MASS
  s[1], s[2] = x + TAU * x_dot, x_dot + TAU * x_acc
  s[3], s[4] = theta + TAU * theta_dot, theta_dot + TAU * theta_acc
  return s[1] < -X_LIMIT or s[1] > X_LIMIT or s[3] < -THETA_LIMIT or s[3] > THETA_LIMIT
end

---------------------------------------------------------------- the policy
ember.manual_seed(opts.seed)
local policy = nn.Sequential(nn.Linear(4, opts.hidden), nn.Tanh(), nn.Linear(opts.hidden, 2))
local params = policy:parameters()
local opt = ember.optim.Adam(params, { lr = opts.lr })
local gm = ember.autodiff.GradManager():attach(params)
local act_gen = ember.Generator(opts.seed + 2)

-- plays opts.envs episodes side by side, one forward pass a step for all
-- those still running; returns the visited states, the actions taken and the
-- per-step discounted returns (flat lists), and the episodes' lengths
local function play()
  local n = opts.envs
  local states, running, traj = {}, {}, {}
  for e = 1, n do states[e], running[e], traj[e] = reset(), true, { s = {}, a = {} } end
  local left = n
  ember.no_grad(function()
    while left > 0 do
      local batch, who = {}, {}
      for e = 1, n do
        if running[e] then batch[#batch + 1], who[#who + 1] = { unpack(states[e]) }, e end
      end
      local logits = policy(ember.tensor(batch))
      local actions = D.Categorical({ logits = logits }):sample(nil, { generator = act_gen }):tolist()
      for k, e in ipairs(who) do
        local t = traj[e]
        t.s[#t.s + 1], t.a[#t.a + 1] = batch[k], actions[k]
        if step(states[e], actions[k]) or #t.a >= MAX_STEPS then
          running[e], left = false, left - 1
        end
      end
    end
  end)
  local S, A, G, lengths = {}, {}, {}, {}
  for e = 1, n do
    local t = traj[e]
    lengths[e] = #t.a
    -- the discounted return of each step, G_t = r_t + gamma G_{t+1}: a
    -- backward scan (ember has no reverse cumsum with a discount)
    local g, returns = 0, {}
    for i = #t.a, 1, -1 do
      g = 1 + opts.gamma * g
      returns[i] = g
    end
    for i = 1, #t.a do S[#S + 1], A[#A + 1], G[#G + 1] = t.s[i], t.a[i], returns[i] end
  end
  return S, A, G, lengths
end

local function update(S, A, G)
  local returns = ember.tensor(G)
  returns = (returns - returns:mean()) / (returns:std() + 1e-8)
  gm:record()
  local dist = D.Categorical({ logits = policy(ember.tensor(S)) })
  local loss = -(dist:log_prob(ember.tensor(A, { dtype = "int64" })) * returns):mean()
  gm:backward(loss)
  opt:step()
  opt:zero_grad()
end

---------------------------------------------------------------- training
local clock = ember.distributed.wtime   -- wall-clock seconds
local t0 = clock()
local history, episodes, avg = {}, 0, 0
while true do
  local S, A, G, lengths = play()
  for _, l in ipairs(lengths) do history[#history + 1] = l end
  episodes = episodes + #lengths
  local sum, k = 0, math.min(20, #history)
  for i = #history - k + 1, #history do sum = sum + history[i] end
  avg = sum / k
  if episodes % (opts.envs * 5) == 0 then
    print(("episodes %d: average length of the last 20 %.1f (%.1f s)"):format(episodes, avg, clock() - t0))
  end
  if avg >= opts.target or clock() - t0 > opts.seconds then break end
  update(S, A, G)
end
local secs = clock() - t0
if avg >= opts.target then
  print(("reached an average episode length of %.1f (target %g) after %d episodes, %.1f s")
    :format(avg, opts.target, episodes, secs))
else
  print(("stopped after %.1f s: average episode length %.1f, target %g not reached after %d episodes")
    :format(secs, avg, opts.target, episodes))
end
