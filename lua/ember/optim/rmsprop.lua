-- ember.optim.RMSprop: PyTorch 1.13's single-tensor update as in-place tensor ops.
--   g = -g (maximize); g = g + wd*p
--   v = alpha*v + (1-alpha)*g^2
--   avg = sqrt(v), or centered: a = alpha*a + (1-alpha)*g, avg = sqrt(v - a^2)
--   momentum > 0: b = momentum*b + g/(avg + eps), p = p - lr*b;  else p = p - lr*g/(avg + eps)
local ember = require("ember")
local common = require("ember.optim.common")

return function(optim, I)
  local function init(p) return { step = 0, square_avg = ember.zeros_like(p) } end

  local function update(group, p, g, st)
    g = common.direction(p, g, group.weight_decay, group.maximize)
    local alpha = group.alpha
    st.step = st.step + 1
    local v = st.square_avg
    v:mul_(alpha):add_((g * g):mul_(1 - alpha))
    local avg
    if group.centered then
      local a = common.buffer(st, "grad_avg", p)
      a:mul_(alpha):add_(g * (1 - alpha))
      avg = (v - a * a):sqrt_()
    else
      avg = v:sqrt()
    end
    avg:add_(group.eps)
    if group.momentum > 0 then
      local b = common.buffer(st, "momentum_buffer", p)
      b:mul_(group.momentum):add_(g / avg)
      p:sub_(b * group.lr)
    else
      p:sub_((g / avg):mul_(group.lr))
    end
  end

  optim.RMSprop = I.class("RMSprop", {
    { "lr", 1e-2, I.nonneg },
    { "alpha", 0.99, I.nonneg },
    { "eps", 1e-8, I.nonneg },
    { "weight_decay", 0, I.nonneg },
    { "momentum", 0, I.nonneg },
    { "centered", false, I.boolean },
    { "maximize", false, I.boolean },
  }, function(self) common.each_param(self, init, update) end)
end
