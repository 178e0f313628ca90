-- Every differentiable op against central finite differences in float64,
-- including broadcasting, non-contiguous and reduced-dim cases.
local H = require("helpers")
local ember = H.ember
local gradcheck = ember.autodiff.gradcheck
local F64 = { dtype = "float64" }

local function randn(shape) return ember.randn(shape, F64) end
local function pos(shape) return ember.rand(shape, F64) + 0.5 end
local function nc(t) return H.noncontig(t) end

local cases = {
  { "add (broadcast)", function(a, b) return (a + b):sum() end, function() return { randn({ 2, 3 }), randn({ 3 }) } end },
  { "sub", function(a, b) return (a - b):sum() end, function() return { randn({ 2, 3 }), randn({ 2, 1 }) } end },
  { "mul (non-contiguous)", function(a, b) return (a * b):sum() end, function() return { nc(randn({ 3, 2 })), randn({ 3, 2 }) } end },
  { "div", function(a, b) return (a / b):sum() end, function() return { randn({ 2, 3 }), pos({ 3 }) } end },
  { "pow", function(a, b) return (a ^ b):sum() end, function() return { pos({ 2, 2 }), randn({ 2, 2 }) } end },
  { "maximum/minimum", function(a, b) return (ember.maximum(a, b) + ember.minimum(a, b) * 2):sum() end,
    function() return { randn({ 4 }), randn({ 4 }) } end },
  { "where", function(a, b) return ember.where(a:gt(0), a, b):sum() end, function() return { randn({ 5 }), randn({ 5 }) } end },
  { "neg/exp/log", function(a) return (-(a:exp()) + a:log()):sum() end, function() return { pos({ 3 }) } end },
  { "log1p (non-contiguous)", function(a) return (a:log1p() * a):sum() end,
    function() return { nc(pos({ 3, 2 }) - 0.5) } end },
  { "sqrt/rsqrt", function(a) return (a:sqrt() + a:rsqrt()):sum() end, function() return { pos({ 3 }) } end },
  { "abs/sin/cos", function(a) return (a:abs() + a:sin() * a:cos()):sum() end, function() return { randn({ 4 }) + 0.1 } end },
  { "tanh/sigmoid", function(a) return (a:tanh() * a:sigmoid()):sum() end, function() return { randn({ 4 }) } end },
  { "relu/silu", function(a) return (a:relu() + a:silu()):sum() end, function() return { randn({ 5 }) + 0.05 } end },
  { "gelu (both forms)", function(a) return (a:gelu() + a:gelu({ approximate = "tanh" })):sum() end, function() return { randn({ 5 }) } end },
  { "clamp", function(a) return a:clamp(-0.5, 0.5):sum() end, function() return { randn({ 6 }) * 0.3 + 0.02 } end },
  { "erf", function(a) return ember.erf(a):sum() end, function() return { randn({ 4 }) } end },
  { "sum over a dim, keepdim", function(a) return (a:sum(2, true) * a):sum() end, function() return { randn({ 2, 3 }) } end },
  { "mean", function(a) return (a:mean(1) * a:mean(1)):sum() end, function() return { randn({ 3, 2 }) } end },
  { "var (non-contiguous)", function(a) return a:var(1):sum() + a:var() end, function() return { nc(randn({ 3, 4 })) } end },
  { "norm p = 2, 1, 3", function(a) return a:norm() + a:norm(1) + a:norm(3, 2):sum() end, function() return { randn({ 2, 3 }) } end },
  { "max/min over all", function(a) return a:max() - a:min() end, function() return { randn({ 5 }) } end },
  { "max over a dim", function(a) local v = a:max(2); return (v * v):sum() end, function() return { randn({ 3, 4 }) } end },
  { "logsumexp", function(a) return a:logsumexp(1):sum() end, function() return { randn({ 3, 2 }) } end },
  { "softmax/log_softmax", function(a, w) return (a:softmax(2) * w):sum() + (a:log_softmax(1) * w):sum() end,
    function() return { randn({ 2, 3 }), randn({ 2, 3 }) } end },
  { "matmul 2-D (transposed)", function(a, b) return a:matmul(b):sum() end, function() return { randn({ 2, 3 }), nc(randn({ 3, 4 })) } end },
  { "matmul batched broadcast", function(a, b) return (a:matmul(b) ^ 2):sum() end, function() return { randn({ 2, 2, 3 }), randn({ 3, 2 }) } end },
  { "matmul 1-D cases", function(a, m) return a:matmul(m):sum() + m:matmul(a:narrow(1, 1, 2)):sum() + a:matmul(a) end,
    function() return { randn({ 3 }), randn({ 3, 2 }) } end },
  { "reshape/view/transpose/permute", function(a) return (a:reshape({ 3, 2 }):t():permute({ 2, 1 }):view({ 6 }) * ember.arange(6):double()):sum() end,
    function() return { randn({ 2, 3 }) } end },
  { "squeeze/unsqueeze/expand", function(a) return (a:unsqueeze(1):expand({ 2, 3 }):squeeze() * 1):sum() end, function() return { randn({ 3 }) } end },
  { "narrow/select", function(a) return (a:narrow(2, 2, 2) ^ 2):sum() + a:select(1, 2):sum() * 3 end, function() return { randn({ 2, 4 }) } end },
  { "index_select/gather", function(a)
      local i = ember.tensor({ 3, 1, 3 }, { dtype = "int64" })
      local g = ember.tensor({ { 1, 2 }, { 2, 2 } }, { dtype = "int64" })
      return (a:index_select(2, i) ^ 2):sum() + (a:gather(2, g) * 5):sum()
    end, function() return { randn({ 2, 3 }) } end },
  { "cat/stack", function(a, b) return (ember.cat({ a, b }, 1) ^ 2):sum() + ember.stack({ a, a }):sum() end,
    function() return { randn({ 1, 3 }), randn({ 2, 3 }) } end },
  { "to/clone/contiguous", function(a) return (a:to("float64") * a:clone() * a:t():contiguous():t()):sum() end,
    function() return { randn({ 2, 2 }) } end },
}

describe("gradcheck", function()
  for _, case in ipairs(cases) do
    it("passes for " .. case[1], function()
      ember.manual_seed(7)
      assert.is_true(gradcheck(case[2], case[3]()))
    end)
  end

  it("reports a Jacobian mismatch", function()
    local Bad = ember.autodiff.Function("bad", function(x)
      return x * x, function(dy) return dy * x * 3 end   -- should be 2x
    end)
    local ok, err = pcall(gradcheck, function(x) return Bad(x):sum() end, { randn({ 3 }) })
    assert.is_false(ok)
    assert.truthy(err:find("Jacobian mismatch"))
    assert.is_false(gradcheck(function(x) return Bad(x):sum() end, { randn({ 3 }) }, { raise = false }))
  end)
end)
