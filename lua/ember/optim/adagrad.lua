-- ember.optim.Adagrad: PyTorch 1.13's single-tensor update (dense gradients)
-- as in-place tensor ops. At step t (from 1):
--   g = -g (maximize); g = g + wd*p; clr = lr / (1 + (t-1)*lr_decay)
--   s = s + g^2 (s starts at initial_accumulator_value); p = p - clr*g/(sqrt(s) + eps)
local ember = require("ember")
local common = require("ember.optim.common")

return function(optim, I)
  local function init(p, group)
    return { step = 0, sum = ember.full_like(p, group.initial_accumulator_value) }
  end

  local function update(group, p, g, st)
    if group.lr_decay ~= 0 then
      ember._jit_refuse("Adagrad's update with lr_decay", "its learning rate is a Lua number of the step count")
    end
    g = common.direction(p, g, group.weight_decay, group.maximize)
    st.step = st.step + 1
    local clr = group.lr / (1 + (st.step - 1) * group.lr_decay)
    st.sum:add_(g * g)
    local std = st.sum:sqrt():add_(group.eps)
    p:sub_((g / std):mul_(clr))
  end

  optim.Adagrad = I.class("Adagrad", {
    { "lr", 1e-2, I.nonneg },
    { "lr_decay", 0, I.nonneg },
    { "weight_decay", 0, I.nonneg },
    { "initial_accumulator_value", 0, I.nonneg },
    { "eps", 1e-10, I.nonneg },
    { "maximize", false, I.boolean },
  }, function(self) common.each_param(self, init, update) end)
end
