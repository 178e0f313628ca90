-- What spec/jit_spec.lua and spec/device_jit_spec.lua share: the recipes in
-- small on a device (the MLP with SGD and momentum, the CNN with conv,
-- batch norm, max pooling, dropout and Adam; spec/support/zoo.lua), their
-- batches, and the check that trains two copies 20 steps, one eagerly, one
-- through a plan traced at step 2 (step 1 eager: the optimizer makes its
-- state there), comparing losses, parameters, buffers and optimizer state
-- bit for bit at every step.
local ember = require("ember")
local assert = require("luassert")
if not package.path:find("./spec/support/?.lua", 1, true) then
  package.path = "./spec/support/?.lua;" .. package.path
end
local Z = require("zoo")   -- the name the other specs load it by: one copy of its classes

local P = {}

-- equal bits (values compared as numbers, NaN never expected here), dtype,
-- device and shape
function P.same(a, b)
  return a.dtype == b.dtype and a.device == b.device
    and table.concat(a:shape(), ",") == table.concat(b:shape(), ",") and ember.equal(a, b)
end

function P.make(kind, device)
  ember.manual_seed(1)
  local model = kind == "mlp" and Z.mlp({ 64, 32, 16, 10 }, true) or Z.SmallCNN()
  if device and device ~= "cpu" then model:to({ device = device }) end
  local params = model:parameters()
  local opt = kind == "mlp" and ember.optim.SGD(params, { lr = 0.1, momentum = 0.9 })
    or ember.optim.Adam(params, { lr = 1e-2 })
  return { model = model, opt = opt, step = Z.train_step(model, opt) }
end

function P.batches(n, device)
  ember.manual_seed(7)
  local xs, ys = {}, {}
  for i = 1, n do
    xs[i] = ember.randn({ 8, 1, 8, 8 })
    ys[i] = ember.randint(1, 11, { 8 })
    if device and device ~= "cpu" then xs[i], ys[i] = xs[i]:to(device), ys[i]:to(device) end
  end
  return xs, ys
end

function P.eager_against_plan(kind, device)
  local same = P.same
  local xs, ys = P.batches(20, device)
  local a, b = P.make(kind, device), P.make(kind, device)
  local plan
  for i = 1, 20 do
    ember.manual_seed(100 + i)
    local la = a.step(xs[i], ys[i])
    ember.manual_seed(100 + i)
    local lb
    if i == 1 then lb = b.step(xs[i], ys[i])
    elseif i == 2 then plan = ember.jit.trace(b.step, { xs[i], ys[i] })
    else lb = plan(xs[i], ys[i]) end
    if lb then assert.is_true(same(la, lb), kind .. " loss at step " .. i) end
    local sa, sb = a.model:state_dict(), b.model:state_dict()
    for k, v in pairs(sa) do assert.is_true(same(v, sb[k]), kind .. " " .. k .. " at step " .. i) end
    local pa, pb = a.model:parameters(), b.model:parameters()
    for k = 1, #pa do
      local ta, tb = a.opt.state[pa[k]], b.opt.state[pb[k]]
      for name, v in pairs(ta) do
        if ember.is_tensor(v) then assert.is_true(same(v, tb[name]), kind .. " " .. name .. " at step " .. i)
        else assert.are.equal(v, tb[name]) end
      end
      assert.is_nil(rawget(pb[k], "_grad"))
    end
  end
  return plan
end

return P
