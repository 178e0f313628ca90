-- ember.profile and ember.profile_section (lua/ember/profile.lua over the
-- core's op profiler, core/src/profile.c)
local H = require("helpers")
local ember = H.ember
local F = ember.nn.functional

describe("ember.profile", function()
  it("counts each op's calls, backward's included, by category", function()
    local x, w, b = ember.randn({ 2, 3, 8, 8 }), ember.randn({ 4, 3, 3, 3 }), ember.randn({ 4 })
    local lw = ember.randn({ 5, 4 * 4 * 4 })
    local r, value = ember.profile(function()
      local _, grads = ember.autodiff.vjp(function(w_, lw_)
        local y = F.max_pool2d(F.conv2d_relu(x, w_, b, { padding = 1 }), 2)
        return F.linear(y:flatten(2), lw_):sum()
      end, { w, lw })
      return grads[1]:sum():item()
    end)
    assert.is_number(value)
    assert.are.equal(1, r.ops.conv2d_relu.calls)
    -- its backward is one op; through oneDNN it runs no other (elsewhere the
    -- weight's adjoint and relu_backward inside it are counted apart)
    assert.are.equal(1, r.ops.conv2d_relu_backward.calls)
    if ember.dnnl_enabled() then assert.is_nil(r.ops.conv2d_backward_weight) end
    assert.is_nil(r.ops.conv2d_backward_input)   -- x needs no gradient
    assert.are.equal(1, r.ops.max_pool2d.calls)
    assert.are.equal(1, r.ops.max_pool2d_backward.calls)
    assert.is_truthy(r.ops.linear.calls >= 1)
    local function sum(names)
      local s = 0
      for _, n in ipairs(names) do s = s + (r.ops[n] and r.ops[n].seconds or 0) end
      return s
    end
    assert.near(sum({ "conv2d_relu", "conv2d_relu_backward", "conv2d_backward_weight" }), r.conv, 1e-12)
    assert.near(sum({ "max_pool2d", "max_pool2d_backward" }), r.pool, 1e-12)
    local all = 0
    for _, a in pairs(r.ops) do all = all + a.seconds; assert.is_truthy(a.seconds >= 0) end
    assert.near(all, r.gemm + r.conv + r.pool + r.elementwise, 1e-12)
    assert.near(r.seconds, all + r.other, 1e-9)
    assert.is_truthy(r.other >= 0)
  end)

  it("times a section as a whole, its ops apart", function()
    local a = ember.randn({ 64, 64 })
    local r = ember.profile(function()
      local t0 = ember.clock()
      ember.profile_section("data", function() while ember.clock() - t0 < 0.02 do a:matmul(a) end end)
      ember.profile_section("data", function() return a + 1 end)
      a:relu()
    end)
    assert.is_nil(r.ops.matmul)
    assert.is_nil(r.ops.add)
    assert.are.equal(1, r.ops.relu.calls)
    assert.is_truthy(r.sections.data >= 0.02)
    assert.near(r.seconds, r.elementwise + r.sections.data + r.other, 1e-9)
  end)

  it("runs a section outside a profile as a plain call", function()
    assert.are.same({ 3, 4 }, { ember.profile_section("data", function(p, q) return p + 1, q + 1 end, 2, 3) })
  end)

  it("passes fn's error on and stops profiling", function()
    local ok, err = pcall(ember.profile, function() ember.randn({ 2 }):relu(); error("boom", 0) end)
    assert.is_false(ok)
    assert.are.equal("boom", err)
    local r = ember.profile(function() ember.randn({ 2 }):relu() end)
    assert.are.equal(1, r.ops.relu.calls)   -- the counts start again
  end)

  it("names itself in its errors", function()
    assert.has_error(function() ember.profile(5) end, "ember.profile: expected a function, got number")
    assert.has_error(function() ember.profile(function() ember.profile(function() end) end) end,
      "ember.profile: a profile is already running (profiles do not nest)")
    assert.has_error(function() ember.profile_section(function() end) end,
      "ember.profile_section: expected a name and a function, got function and nil")
  end)
end)
