-- Device-generic cases: every op a device backend runs, on the device named
-- by EMBER_TEST_DEVICE (default "cuda"), compared with the CPU's result for
-- the same inputs within one tolerance per dtype. Where the device cannot be
-- used (no GPU, no driver, no backend library) each case is reported pending,
-- with the reason, never passed. What runs on cuda: docs/cuda.md.
local ffi = require("ffi")
local ember = require("ember")
local optable = require("ember.optable")

local D = require("spec.support.device")
local device, TOL, DTYPES, FLOATS = D.device, D.TOL, D.DTYPES, D.FLOATS
local case, agrees, operands = D.case, D.agrees, D.operands

describe("on " .. device .. ": moving tensors", function()
  for _, dt in ipairs(DTYPES) do
    case(dt .. " goes to the device and back unchanged", function()
      local x = operands(dt)
      local y = x:to(device)
      assert.are.equal(device, y.device)
      agrees(y, x)
    end)
  end

  case("a strided tensor is copied by value, and item reads one element", function()
    local x = operands("float64")
    local y = x:to(device):contiguous()
    agrees(y, x:contiguous())
    assert.are.equal(x[{ 2, 3, 4 }], x:to(device)[{ 2, 3, 4 }])
  end)

  for _, from in ipairs(DTYPES) do
    case("to(dtype) from " .. from .. " to every dtype", function()
      local x = operands(from)
      local d = x:to(device)
      for _, to in ipairs(DTYPES) do agrees(d:to(to), x:to(to)) end
    end)
  end

  case("full, zeros and ones fill on the device with the CPU's conversions", function()
    for _, dt in ipairs(DTYPES) do
      for _, v in ipairs({ 0, 1, 7, -2.5 }) do
        if FLOATS[dt] or v >= 0 then
          agrees(ember.full({ 2, 3 }, v, { dtype = dt, device = device }), ember.full({ 2, 3 }, v, { dtype = dt }))
        end
      end
    end
  end)

  case("rand and randn give the CPU's numbers for one seed", function()
    for _, f in ipairs({ "rand", "randn" }) do
      ember.manual_seed(7)
      local d = ember[f]({ 33, 5 }, { device = device })
      ember.manual_seed(7)
      agrees(d, ember[f]({ 33, 5 }))
    end
  end)
end)

describe("on " .. device .. ": elementwise ops", function()
  for _, op in ipairs(optable) do
    if op.lua == "binary" then
      for _, dt in ipairs(DTYPES) do
        if not (op.name == "pow" and not FLOATS[dt]) then
          case(op.name .. " over " .. dt .. " (broadcast, transposed)", function()
            local a, b = operands(dt)
            agrees(ember[op.name](a:to(device), b:to(device)), ember[op.name](a, b))
          end)
        end
      end
    elseif op.lua == "unary" then
      for _, dt in ipairs(DTYPES) do
        case(op.name .. " over " .. dt, function()
          local a = operands(dt)
          agrees(ember[op.name](a:to(device)), ember[op.name](a))
        end)
      end
    end
  end

  case("in-place forms write into the device tensor, and copy_ fills one from the host", function()
    for _, dt in ipairs({ "float32", "float64", "int64" }) do
      local a, b = operands(dt)
      local da = a:contiguous():to(device)
      da:add_(b:to(device))
      local want = a:contiguous()
      want:add_(b)
      agrees(da, want)
      if FLOATS[dt] then
        da:exp_()
        want:exp_()
        agrees(da, want)
      end
      da:copy_(a)
      agrees(da, a:contiguous())
    end
  end)

  -- relu's adjoint has no Lua method of its own: its C entry point
  local function relu_backward(g, y)
    local out = ffi.new("ember_tensor *[1]")
    if ember._C.ember_relu_backward(g._c, y._c, out) < 0 then error(ffi.string(ember._C.ember_last_error())) end
    return ember._wrap(out[0])
  end

  for _, dt in ipairs(DTYPES) do
    case("relu_backward and where over " .. dt, function()
      local a, b = operands(dt)
      local y = a - 1
      agrees(relu_backward(a:to(device), y:to(device)), relu_backward(a, y))
      local cond = a:gt(0)
      agrees(ember.where(cond:to(device), a:to(device), b:to(device)), ember.where(cond, a, b))
      agrees(ember.where(a:to(device), b:to(device), a:to(device)), ember.where(a, b, a))   -- any dtype as cond
    end)
  end

  case("sum_to sums broadcast dims on the device", function()
    local a = operands("float64")
    agrees(a:to(device):sum_to({ 3, 1 }), a:sum_to({ 3, 1 }))
    agrees(a:to(device):sum_to({ 5 }), a:sum_to({ 5 }))
  end)

  case("pow of integers, and a negative integer exponent fails as on the CPU", function()
    for _, dt in ipairs({ "int32", "int64", "uint8" }) do
      local a, b = operands(dt)
      agrees(a:to(device):pow(b:to(device)), a:pow(b))
    end
    local a, e = operands("int64"), ember.tensor({ 2, -3, 1, -1, 0 }, { dtype = "int32" })
    local _, want = pcall(function() return a:select(2, 1):pow(e) end)
    local ok, err = pcall(function() return a:select(2, 1):to(device):pow(e:to(device)) end)
    assert.is_false(ok)
    assert.are.equal(tostring(want):match("pow: .*"), tostring(err):match("pow: .*"))
  end)
end)

-- sums of K products in another order: float32 and the half types round
-- each partial sum, so the bound grows with K |a| |b| (K = 7 here)
local MATMUL_TOL = {
  float32 = { rtol = 1e-5, atol = 1e-5 }, float64 = { rtol = 1e-12, atol = 1e-12 },
  float16 = { rtol = 2e-3, atol = 2e-3 }, bfloat16 = { rtol = 1.6e-2, atol = 1.6e-2 },
}

describe("on " .. device .. ": matmul", function()
  local function mat(shape, dtype, seed)
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    local flat = {}
    local int = not MATMUL_TOL[dtype]   -- whole numbers an integer tensor holds (uint8: 0 to 4)
    for i = 1, n do
      local k = (i * 7 + seed * 13) % 17
      flat[i] = not int and k * 0.25 - 2 or dtype == "uint8" and k % 5 or k - 8
    end
    return ember.tensor(flat, { dtype = dtype }):reshape(shape)
  end
  local SHAPES = {
    { "matrix x matrix", { 5, 7 }, { 7, 4 } },
    { "vector . vector", { 7 }, { 7 } },
    { "matrix x vector", { 5, 7 }, { 7 } },
    { "vector x matrix", { 7 }, { 7, 4 } },
    { "batched, broadcast batch dims", { 2, 1, 5, 7 }, { 3, 7, 4 } },
  }
  for dt in pairs(MATMUL_TOL) do
    for _, s in ipairs(SHAPES) do
      case(s[1] .. " in " .. dt, function()
        local a, b = mat(s[2], dt, 1), mat(s[3], dt, 2)
        agrees(a:to(device):matmul(b:to(device)), a:matmul(b), MATMUL_TOL[dt])
      end)
    end
    case("transposed and strided operands in " .. dt, function()
      local a = mat({ 7, 5 }, dt, 3):transpose(1, 2)            -- read transposed
      local b = mat({ 7, 9 }, dt, 4):narrow(2, 2, 4)            -- a row stride of 9
      local c = mat({ 4, 3, 7 }, dt, 5):permute({ 2, 3, 1 })    -- no unit stride: copied first
      agrees(a:to(device):matmul(b:to(device)), a:matmul(b), MATMUL_TOL[dt])
      agrees(c:to(device):transpose(2, 3):matmul(b:to(device)), c:transpose(2, 3):matmul(b), MATMUL_TOL[dt])
    end)
  end

  case("an empty inner dim gives zeros, shapes that do not fit name both", function()
    local a, b = ember.zeros({ 3, 0 }):to(device), ember.zeros({ 0, 2 }):to(device)
    agrees(a:matmul(b), ember.zeros({ 3, 2 }))
    local ok, err = pcall(function() return mat({ 2, 3 }, "float32", 1):to(device):matmul(mat({ 4, 2 }, "float32", 1):to(device)) end)
    assert.is_false(ok)
    assert.matches("matmul: shapes {2, 3} and {4, 2} cannot be multiplied (3 != 4)", err, 1, true)
  end)

  for _, dt in ipairs({ "int64", "int32", "uint8", "bool" }) do
    case("integer products in " .. dt .. ", transposed and batched, exactly as the CPU's", function()
      local a, b = mat({ 7, 5 }, dt, 3):transpose(1, 2), mat({ 2, 7, 9 }, dt, 4):narrow(3, 2, 4)
      agrees(a:to(device):matmul(b:to(device)), a:matmul(b))
    end)
  end
end)

describe("on " .. device .. ": reductions", function()
  -- sums in another order: float32 sums accumulate in double on the device
  local SUM_TOL = { float32 = { rtol = 1e-6, atol = 1e-6 }, float64 = { rtol = 1e-14, atol = 1e-14 } }
  for _, dt in ipairs(DTYPES) do
    case("sum, mean, max and min over " .. dt .. ", all dims, one and two, keepdim or not", function()
      local a = operands(dt)
      local d = a:to(device)
      for _, dims in ipairs({ {}, { 2 }, { 1, 3 } }) do
        for _, keepdim in ipairs({ false, true }) do
          agrees(d:sum(dims, keepdim), a:sum(dims, keepdim), SUM_TOL[dt])
          agrees(d:mean(dims, keepdim), a:mean(dims, keepdim), SUM_TOL[dt] or SUM_TOL.float32)
        end
      end
      agrees(d:max(), a:max())
      agrees(d:min(), a:min())
    end)
  end

  for _, dt in ipairs({ "float32", "float64", "float16", "bfloat16", "int64" }) do
    case("softmax and log_softmax over " .. dt .. " along every dim", function()
      local a = operands(dt)
      local d = a:to(device)
      for dim = 1, 3 do
        agrees(d:softmax(dim), a:softmax(dim))
        -- x - max - log(sum) cancels near 0: float32 also needs an absolute bound
        agrees(d:log_softmax(dim), a:log_softmax(dim), (dt == "float32" or dt == "int64") and { rtol = 2e-6, atol = 2e-6 } or nil)
      end
    end)
  end

  case("max and min propagate NaN, and the empty cases match the CPU", function()
    local x = ember.tensor({ 1, 0 / 0, 3 })
    agrees(x:to(device):max(), x:max())
    agrees(x:to(device):min(), x:min())
    local e = ember.zeros({ 0, 3 })
    agrees(e:to(device):sum(), e:sum())
    agrees(e:to(device):mean({ 1 }), e:mean({ 1 }))
    local ok, err = pcall(function() return e:to(device):max() end)
    assert.is_false(ok)
    assert.matches("max: cannot reduce an empty tensor of shape {0, 3}", err, 1, true)
  end)
end)

describe("on " .. device .. ": views, reshape and linear", function()
  case("views share the device tensor's memory and read the same elements", function()
    local a = operands("float32")
    local d = a:to(device)
    agrees(d:transpose(1, 2):contiguous(), a:transpose(1, 2):contiguous())
    agrees(d:permute({ 3, 1, 2 }):contiguous(), a:permute({ 3, 1, 2 }):contiguous())
    agrees(d:narrow(2, 2, 2):contiguous(), a:narrow(2, 2, 2):contiguous())
    agrees(d:select(1, 3):contiguous(), a:select(1, 3):contiguous())
    agrees(d:unsqueeze(2):squeeze(2):contiguous(), a:unsqueeze(2):squeeze(2):contiguous())
    local b = select(2, operands("float32"))
    agrees(b:to(device):expand({ 3, 6 }):contiguous(), b:expand({ 3, 6 }):contiguous())
    local c = d:contiguous()
    c:view({ 60 })[{ 1 }] = 42   -- a write through a view is a write to the tensor
    assert.are.equal(42, c[{ 1, 1, 1 }])
  end)

  case("reshape of a strided tensor copies on the device", function()
    local a = operands("float64")
    local r = a:to(device):reshape({ 6, 10 })
    assert.are.equal(device, r.device)
    agrees(r, a:reshape({ 6, 10 }))
  end)

  case("cat and stack copy into one device tensor, converting dtypes", function()
    local a, b = operands("float32")
    local c = operands("int64")
    agrees(ember.cat({ a:to(device), c:to(device) }, 1), ember.cat({ a, c }, 1))
    agrees(ember.stack({ b:to(device), b:to(device) * 2 }, 2), ember.stack({ b, b * 2 }, 2))
  end)

  case("linear runs its matmul on the device", function()
    local x = operands("float64"):reshape({ 12, 5 })
    local w = ember.tensor({ { 1, 2, 3, 4, 5 }, { -1, 0.5, 0, 2, 1 } }, { dtype = "float64" })
    agrees(ember.nn.functional.linear(x:to(device), w:to(device)), ember.nn.functional.linear(x, w),
      MATMUL_TOL.float64)
  end)
end)

describe("on " .. device .. ": numbers and gradients", function()
  case("Lua numbers take part in device ops and promote as numbers do", function()
    for _, dt in ipairs({ "float32", "float64", "int32", "int64" }) do
      local a = operands(dt)
      local d = a:to(device)
      agrees(d + 1, a + 1)
      agrees(d * 2.5, a * 2.5)   -- integers become float32, not float64
      agrees(d:gt(0.5), a:gt(0.5))
      if FLOATS[dt] then agrees(d:pow(2), a:pow(2)) end
    end
  end)

  case("a recorded MLP step gives the CPU's gradients on the device", function()
    local GradManager = ember.autodiff.GradManager
    local function grads(dev)
      ember.manual_seed(3)
      local x = ember.randn({ 8, 5 }, { dtype = "float64" }):to(dev)
      local w = ember.randn({ 5, 4 }, { dtype = "float64" }):to(dev)
      local b = ember.randn({ 4 }, { dtype = "float64" }):to(dev)
      local v = ember.randn({ 6, 5 }, { dtype = "float64" }):to(dev)
      local gm = GradManager():attach({ w, b, v })
      gm:record()
      local h = (x:matmul(w) + b):relu()
      local loss = (h * 0.5):sum() + v:narrow(1, 2, 3):mean() * 3
      gm:backward(loss)
      return w.grad, b.grad, v.grad
    end
    local gw, gb, gv = grads(device)
    local cw, cb, cv = grads("cpu")
    agrees(gw, cw, MATMUL_TOL.float64)
    agrees(gb, cb, MATMUL_TOL.float64)
    agrees(gv, cv)
  end)

  case("SGD and Adam steps update device parameters as the CPU's fused steps do", function()
    local GradManager = ember.autodiff.GradManager
    local function train(dev, make_opt)
      ember.manual_seed(5)
      local w = ember.randn({ 5, 4 }, { dtype = "float64" }):to(dev)
      local x = ember.randn({ 8, 5 }, { dtype = "float64" }):to(dev)
      local opt = make_opt({ w })
      for _ = 1, 3 do
        local gm = GradManager():attach({ w })
        gm:record()
        gm:backward((x:matmul(w) - 1):relu():sum())
        opt:step()
      end
      return w
    end
    local makers = {
      function(ps) return ember.optim.SGD(ps, { lr = 0.1, momentum = 0.9, weight_decay = 0.01, nesterov = true }) end,
      function(ps) return ember.optim.Adam(ps, { lr = 0.01, weight_decay = 0.01 }) end,
      function(ps) return ember.optim.AdamW(ps, { lr = 0.01, amsgrad = true }) end,
    }
    for _, make in ipairs(makers) do agrees(train(device, make), train("cpu", make), MATMUL_TOL.float64) end
  end)
end)
