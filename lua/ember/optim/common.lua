-- What the per-parameter optimizers in this folder share (RMSprop, Adagrad,
-- Adamax, NAdam): the walk over the parameters that have a gradient, their
-- state, and the gradient an update uses. Not a public module.
local ember = require("ember")

local ipairs, rawget, getmetatable = ipairs, rawget, getmetatable

local common = {}

-- calls update(group, p, g, state[p]) for every parameter p whose .grad g is
-- not nil; init(p, group) makes state[p] on p's first step
-- Each update runs in ember.tidy, so its parameter-sized temporaries go back
-- to the allocator at once, while still warm, instead of at the next GC (the
-- state is updated in place; a buffer it gains inside, common.buffer, is kept).
-- Under ember.jit.trace the group's numbers are the plan's (checked before
-- each run), a first step (which makes the state) raises, and the step
-- count advances with each run of the plan; the updates run as they are.
function common.each_param(self, init, update)
  local state = self.state
  local tracing = ember._jit_tracing()
  for _, group in ipairs(self.param_groups) do
    if tracing then ember._jit_group(group) end
    for _, p in ipairs(group.params) do
      local g = rawget(p, "_grad")
      if g ~= nil then
        local st = state[p]
        if st == nil then
          ember._jit_refuse(getmetatable(self)._name .. "'s first step", "it makes the optimizer's state, which "
            .. "later steps update; run one step eagerly before tracing")
          st = init(p, group)
          state[p] = st
        end
        if tracing then
          ember._jit_advance(st, p)
          update(group, p, g, st)
        else
          ember._tidy_own(update, group, p, g, st)
        end
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
    b = ember.keep(ember.zeros_like(p))
    st[key] = b
  end
  return b
end

return common
