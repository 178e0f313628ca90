-- ember.optim.NAdam: Adam with Nesterov momentum (Dozat 2016), PyTorch's
-- single-tensor update as in-place tensor ops. At step t (from 1):
--   g = g + wd*p;  mu_t = b1*(1 - 0.5*0.96^(t*momentum_decay));  P_t = mu_1*...*mu_t
--   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;  denom = sqrt(v/(1-b2^t)) + eps
--   p = p - lr*(1-mu_t)/(1-P_t) * g/denom - lr*mu_{t+1}/(1-P_{t+1}) * m/denom
-- P_{t+1} = P_t*mu_{t+1} as in PyTorch 2.0; 1.13 multiplies mu_t in twice.
local ember = require("ember")
local common = require("ember.optim.common")

return function(optim, I)
  local function init(p)
    return { step = 0, mu_product = 1, exp_avg = ember.zeros_like(p),
      exp_avg_sq = ember.zeros_like(p) }
  end

  local function update(group, p, g, st)
    ember._jit_refuse("NAdam's update", "its momentum schedule and bias correction are Lua numbers of the step count")
    g = common.direction(p, g, group.weight_decay, false)
    local b1, b2, lr, decay = group.betas[1], group.betas[2], group.lr, group.momentum_decay
    local t = st.step + 1
    st.step = t
    local mu = b1 * (1 - 0.5 * 0.96 ^ (t * decay))
    local mu_next = b1 * (1 - 0.5 * 0.96 ^ ((t + 1) * decay))
    local product = st.mu_product * mu
    st.mu_product = product
    local m, v = st.exp_avg, st.exp_avg_sq
    m:mul_(b1):add_(g * (1 - b1))
    v:mul_(b2):add_((g * g):mul_(1 - b2))
    local denom = (v / (1 - b2 ^ t)):sqrt_():add_(group.eps)
    p:sub_((g / denom):mul_(lr * (1 - mu) / (1 - product)))
    p:sub_((m / denom):mul_(lr * mu_next / (1 - product * mu_next)))
  end

  optim.NAdam = I.class("NAdam", I.adam_spec(2e-3, 0, { "momentum_decay", 4e-3, I.nonneg }),
    function(self) common.each_param(self, init, update) end)
end
