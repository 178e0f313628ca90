-- ember.optim.Adamax: PyTorch 1.13's single-tensor update as in-place tensor
-- ops (Adam with the infinity norm). At step t (from 1):
--   g = -g (maximize); g = g + wd*p
--   m = b1*m + (1-b1)*g;  u = max(b2*u, |g| + eps);  p = p - lr/(1-b1^t) * m/u
local ember = require("ember")
local common = require("ember.optim.common")

return function(optim, I)
  local function init(p)
    return { step = 0, exp_avg = ember.zeros_like(p), exp_inf = ember.zeros_like(p) }
  end

  local function update(group, p, g, st)
    ember._jit_refuse("Adamax's update", "its bias correction is a Lua number of the step count")
    g = common.direction(p, g, group.weight_decay, group.maximize)
    local b1, b2 = group.betas[1], group.betas[2]
    st.step = st.step + 1
    local m, u = st.exp_avg, st.exp_inf
    m:mul_(b1):add_(g * (1 - b1))
    u:copy_(ember.maximum(u:mul_(b2), g:abs():add_(group.eps)))
    p:sub_((m / u):mul_(group.lr / (1 - b1 ^ st.step)))
  end

  optim.Adamax = I.class("Adamax", I.adam_spec(2e-3, 0, I.MAXIMIZE),
    function(self) common.each_param(self, init, update) end)
end
