-- What the per-parameter optimizers in this folder share (RMSprop, Adagrad,
-- Adamax, NAdam): the walk over the parameters that have a gradient, their
-- state, and the gradient an update uses. Not a public module.
local ember = require("ember")

local ipairs, rawget = ipairs, rawget

local common = {}

-- calls update(group, p, g, state[p]) for every parameter p whose .grad g is
-- not nil; init(p, group) makes state[p] on p's first step
function common.each_param(self, init, update)
  local state = self.state
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      local g = rawget(p, "_grad")
      if g ~= nil then
        local st = state[p]
        if st == nil then
          st = init(p, group)
          state[p] = st
        end
        update(group, p, g, st)
      end
    end
  end
end

-- the gradient an update uses: -g when maximizing, then + weight_decay * p
-- (PyTorch's order). It is g itself when neither applies: never write to it.
function common.direction(p, g, weight_decay, maximize)
  if maximize then g = -g end
  if weight_decay ~= 0 then g = g + p * weight_decay end
  return g
end

-- st[key], made as zeros like p the first time an option needs it
function common.buffer(st, key, p)
  local b = st[key]
  if b == nil then
    b = ember.zeros_like(p)
    st[key] = b
  end
  return b
end

return common
