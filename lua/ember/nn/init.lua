-- ember.nn: modules in the Torch7/PyTorch style.
--
--   local Net = nn.Module:extend("Net")
--   function Net:init(n) self.fc = nn.Linear(n, 10) end
--   function Net:forward(x) return self.fc(x) end
--   local net = Net(784)
--
-- The base class and its rules for fields: nn/module.lua.
local F = require("ember.nn.functional")
local errors = require("ember.errors")
local layers = require("ember.nn.layers")

local nn = { functional = F }
-- the Module base class (nn/module.lua), the core layers (nn/layers.lua),
-- the containers and Sequential's fusion rules (nn/containers.lua)
nn.Module = require("ember.nn.module").Module
layers.register(nn)
require("ember.nn.containers").register(nn)
local Module, Sequential = nn.Module, nn.Sequential

for _, file in ipairs({ "loss", "conv", "norm", "resize", "activation", "pool", "conv3d", "shape" }) do
  require("ember.nn." .. file).register(nn)   -- nn.MSELoss, nn.Conv1d, ...
end
nn.init = require("ember.nn.initializers")
nn.utils = require("ember.nn.utils")
-- RNN, LSTM, GRU and their cells (nn/rnn.lua), built on the helpers above
require("ember.nn.rnn")(nn, layers)
-- MultiheadAttention, the Transformer layers and stacks, nn.causal_mask (nn/transformer.lua)
require("ember.nn.transformer").register(nn)

-- no value past a function's parameters is ignored: F.f(x, y, z) raises
-- when F.f takes two (variadic functions take anything); the same for the
-- public methods of Module and the containers
for _, tbl in ipairs({ { F, "ember.nn.functional." }, { nn, "ember.nn." }, { nn.init, "ember.nn.init." } }) do
  local t, prefix = tbl[1], tbl[2]
  for name, fn in pairs(t) do
    if type(fn) == "function" and type(name) == "string" and name:sub(1, 1) ~= "_" then
      t[name] = errors.arity_checked(prefix .. name, fn, 0, t == F)
    end
  end
end
local NOT_CHECKED = { init = true, forward = true, new = true }
for _, class in ipairs({ Module, Sequential, nn.ModuleList, nn.ParameterList, nn.ModuleDict, nn.ParameterDict }) do
  for name, fn in pairs(class) do
    if type(fn) == "function" and type(name) == "string" and name:sub(1, 1) ~= "_" and not NOT_CHECKED[name] then
      class[name] = errors.arity_checked("ember.nn." .. class.__name .. ":" .. name, fn, 1)
    end
  end
end

return nn
