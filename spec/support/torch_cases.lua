-- Runs a PyTorch fixture of cases (written by spec/fixtures/gen_tensorlib.py
-- and spec/fixtures/linalg/gen.py): each case's Lua function on its inputs
-- gives its outputs (values, dtypes, shapes) and the gradients of
-- sum_k sum(out_k * w_k) over its float64 outputs, w_k = sin(0.37 * (i + 1) + k).
-- run(cases, it) declares one busted `it` per case, inside the caller's describe.
local H = require("helpers")
local ember = H.ember
local F64 = { dtype = "float64" }
local unpack = table.unpack or unpack

local assert = require("luassert")
local M = {}
local function weights(t, k)
  local n = t:numel()
  return ((ember.arange(n, F64) + 1) * 0.37 + k):sin():reshape(t:shape())
end

local function build(spec)
  local t = ember.tensor(spec.values, { dtype = spec.dtype })
  if #spec.shape == 0 then return t:reshape({}) end
  return t:reshape(spec.shape)
end

function M.run(cases, it)
  for _, case in ipairs(cases) do
    it(case.name, function()
      local env = setmetatable({ ember = ember, unpack = unpack }, { __index = _G })
      local f = setfenv(assert(loadstring(case.fn)), env)()
      local xs = {}
      for i, s in ipairs(case.inputs) do xs[i] = build(s) end
      local outs = { f(unpack(xs)) }
      assert.are.equal(#case.outputs, #outs)
      for k, want in ipairs(case.outputs) do
        local got = outs[k]
        assert.are.equal(want.dtype, got.dtype, case.name .. ": output " .. k .. " dtype")
        local exp = want.values
        if want.dtype == "bool" then
          exp = {}
          for i, v in ipairs(want.values) do exp[i] = v == true or v == 1 end
        end
        H.same(got:reshape({ -1 }), exp, 1e-9, nil)
        assert.are.same(want.shape, got:shape(), case.name .. ": output " .. k .. " shape")
      end
      -- gradients of sum_k sum(out_k * w_k) over the floating-point outputs
      local diff, which = {}, {}
      for i, x in ipairs(xs) do
        if case.grads[i] then diff[#diff + 1], which[#which + 1] = x, i end
      end
      if #diff == 0 then return end
      local argn = {}
      for i = 1, #which do argn[i] = which[i] end
      local grads = { ember.autodiff.grad(function(...)
        local ys = { f(...) }
        local loss = ember.zeros({}, F64)
        for k, y in ipairs(ys) do
          if y.dtype == "float64" then loss = loss + (y * weights(y, k - 1)):sum() end
        end
        return loss
      end, argn)(unpack(xs)) }
      for j, i in ipairs(which) do
        H.same(grads[j]:reshape({ -1 }), case.grads[i], 1e-8)
      end
    end)
  end
end

return M
