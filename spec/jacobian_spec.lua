-- ember.autodiff's Jacobian tools against torch.autograd.functional
-- (spec/fixtures/functional_torch.lua, from spec/fixtures/gen_functional.py).
local H = require("helpers")
local ember = H.ember
local A = ember.autodiff
local FX = dofile("spec/fixtures/functional_torch.lua")
local F64 = { dtype = "float64" }

local function inputs() return ember.tensor(FX.x, F64), ember.tensor(FX.y, F64) end
local f, s = assert(load(FX.f))(), assert(load(FX.s))()

describe("Jacobian tools", function()
  it("jacobian of a two-input vector function", function()
    local x, y = inputs()
    local J = A.jacobian(f, { x, y })
    H.same(J[1], FX.jacobian_f[1], 1e-12, { 3, 2, 3 })
    H.same(J[2], FX.jacobian_f[2], 1e-12, { 3, 3 })
    assert.is_nil(x.grad)   -- the inputs' .grad are left alone
  end)

  it("jacobian of one input and one output is one tensor", function()
    local x = ember.tensor({ 1, 2, 3 }, F64)
    H.same(A.jacobian(function(t) return t * t end, x), { { 2, 0, 0 }, { 0, 4, 0 }, { 0, 0, 6 } }, 0)
  end)

  it("hessian of a scalar function of two inputs", function()
    local x, y = inputs()
    local Hs = A.hessian(s, { x, y })
    for i = 1, 2 do
      for j = 1, 2 do H.same(Hs[i][j], FX.hessian_s[i][j], 1e-10) end
    end
  end)

  it("jvp (two reverse passes) and vjp", function()
    local x, y = inputs()
    local value, jv = A.jvp(f, { x, y }, { ember.tensor(FX.v, F64), ember.tensor(FX.w, F64) })
    H.same(value, FX.jvp_f.value, 1e-12)
    H.same(jv, FX.jvp_f.jv, 1e-12)
    local _, vj = A.vjp(f, { x, y }, ember.tensor(FX.vjp_f.cotangent, F64))
    H.same(vj[1], FX.vjp_f.vj[1], 1e-12)
    H.same(vj[2], FX.vjp_f.vj[2], 1e-12)
  end)

  it("hvp and vhp", function()
    local x, y = inputs()
    local vs = { ember.tensor(FX.v, F64), ember.tensor(FX.w, F64) }
    for _, case in ipairs({ { A.hvp, FX.hvp_s.hv, FX.hvp_s.value }, { A.vhp, FX.vhp_s.vh, FX.vhp_s.value } }) do
      local value, p = case[1](s, { x, y }, vs)
      H.same(value, case[3], 1e-12)
      H.same(p[1], case[2][1], 1e-10)
      H.same(p[2], case[2][2], 1e-10)
    end
  end)

  it("gradgradcheck passes a right rule and catches a rule whose second derivative is wrong", function()
    local x = ember.tensor({ 0.4, -1.1, 2.0 }, F64)
    assert.is_true(A.gradgradcheck(function(t) return (t:sin() * t):sum() end, { x }))
    A.register_grad_rule("sin", function(ctx, g)   -- right value, but cut from the graph
      return { g[1] * ctx.inputs[1]:cos():detach() }
    end)
    local ok, err = pcall(A.gradgradcheck, function(t) return (t:sin() * t):sum() end, { x })
    A.register_grad_rule("sin", nil)
    assert.is_false(ok)
    assert.matches("Jacobian mismatch", err)
    assert.is_true(A.gradcheck(function(t) return (t:sin() * t):sum() end, { x }))
  end)

  it("checks its arguments", function()
    local x = ember.tensor({ 1, 2 }, F64)
    for _, call in ipairs({
      { function() A.jacobian(5, x) end, "jacobian: expected a function" },
      { function() A.jacobian(f, { 5 }) end, "jacobian: input 1 is not a tensor" },
      { function() A.jvp(f, x, ember.ones({ 3 })) end, "jvp: v 1 must have the shape {2}" },
      { function() A.hvp(function(t) return t end, x, x) end, "hvp: f must return a one-element tensor" },
      { function() A.hessian(s, { ember.tensor({ 1 }, { dtype = "int64" }) }) end, "only float32 and float64" },
    }) do
      local ok, err = pcall(call[1])
      assert.is_false(ok)
      assert.is_truthy(err:find(call[2], 1, true), err)
    end
  end)
end)
