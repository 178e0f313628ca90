-- The device's runtime against the CPU: random draws and dropout masks from
-- one seed, the fused optimizer steps over 5 steps, pinned memory and copies
-- that do not wait, checkpoints of device tensors, and one training step of
-- a small MLP. Runs on EMBER_TEST_DEVICE
-- (default "cuda"; "cpu" checks the spec itself); without a usable device
-- every case is pending with the reason. docs/cuda.md.
local ember = require("ember")
local F = ember.nn.functional

local D = require("spec.support.device")
local device, TOL, FLOATS = D.device, D.TOL, D.FLOATS
local case, agrees = D.case, D.agrees

-- the same bits: the draws are one function of (seed, offset, element) on
-- both devices, in float32 bit for bit; float64 normals go through CUDA's
-- double log and cos (within 2 ulp)
local EXACT = { rtol = 0, atol = 0 }
local NORMAL64 = { rtol = 1e-15, atol = 1e-300 }

describe("on " .. device .. ": random draws", function()
  local draws = {
    rand = function(opts) return ember.rand({ 33, 7 }, opts) end,
    randn = function(opts) return ember.randn({ 33, 7 }, opts) end,
    randint = function(opts) return ember.randint(-3, 1000, { 33, 7 }, opts) end,
    uniform_ = function(opts) return ember.empty({ 33, 7 }, opts):uniform_(-2, 5) end,
    normal_ = function(opts) return ember.empty({ 33, 7 }, opts):normal_(1.5, 0.25) end,
  }
  local DTYPES = {
    rand = { "float32", "float64", "float16", "bfloat16" }, randn = { "float32", "float64", "bfloat16" },
    randint = { "int64", "int32", "float32" }, uniform_ = { "float32", "float64" }, normal_ = { "float32", "float64" },
  }
  for name, draw in pairs(draws) do
    case(name .. " gives the CPU's numbers for one seed, in every dtype", function()
      for _, dt in ipairs(DTYPES[name]) do
        ember.manual_seed(11)
        local d = draw({ dtype = dt, device = device })
        ember.manual_seed(11)
        local normal64 = dt == "float64" and (name == "randn" or name == "normal_")
        agrees(d, draw({ dtype = dt }), normal64 and NORMAL64 or EXACT)
      end
    end)
  end

  case("draws on either device advance one generator", function()
    local function mixed(dev)
      ember.manual_seed(5)
      local a = ember.rand({ 5 })
      local b = ember.randn({ 3, 3 }, { device = dev })
      local c = ember.rand({ 7 }, { device = dev })
      local e = ember.randint(0, 10, { 4 })
      return a, b, c, e, ember.get_rng_state().offset
    end
    local a, b, c, e, offset = mixed(device)
    local a0, b0, c0, e0, offset0 = mixed("cpu")
    assert.are.same(a0:tolist(), a:tolist())
    agrees(b, b0, EXACT)
    agrees(c, c0, EXACT)
    assert.are.same(e0:tolist(), e:tolist())
    assert.are.equal(offset0, offset)
  end)

  case("a strided view is filled in place as a contiguous tensor would be", function()
    ember.manual_seed(9)
    local d = ember.zeros({ 6, 4 }, { device = device })
    d:t():uniform_(0, 1)
    ember.manual_seed(9)
    local c = ember.zeros({ 6, 4 })
    c:t():uniform_(0, 1)
    agrees(d, c, EXACT)
  end)

  case("dropout draws one mask on either device for one seed", function()
    local x = ember.ones({ 16, 9 })
    for _, dt in ipairs({ "float32", "float64" }) do
      ember.manual_seed(21)
      local d = F.dropout(x:to(dt):to(device), 0.3)
      ember.manual_seed(21)
      local c = F.dropout(x:to(dt), 0.3)
      agrees(d, c, EXACT)
      ember.manual_seed(21)
      agrees(ember.nn.Dropout(0.3)(x:to(dt):to(device)), c, EXACT)
    end
  end)
end)

describe("on " .. device .. ": fused optimizer steps", function()
  local GradManager = ember.autodiff.GradManager
  -- 5 steps on a loss whose gradient is elementwise (exact on the device):
  -- the parameters and the state after each step
  local function trajectory(dev, dt, make_opt)
    ember.manual_seed(4)
    local w = ember.randn({ 6, 5 }, { dtype = dt }):to(dev)
    local c = ember.randn({ 6, 5 }, { dtype = dt }):to(dev)
    local opt, steps = make_opt({ w }), {}
    for _ = 1, 5 do
      local gm = GradManager():attach({ w })
      gm:record()
      gm:backward((w * w * c + w:sin()):sum())
      opt:step()
      steps[#steps + 1] = { w = w:clone(), state = opt.state[w] }
    end
    return steps
  end
  local makers = {
    SGD = function(ps) return ember.optim.SGD(ps, { lr = 0.1 }) end,
    ["SGD with momentum, dampening and weight decay"] = function(ps)
      return ember.optim.SGD(ps, { lr = 0.05, momentum = 0.9, dampening = 0.1, weight_decay = 0.01 })
    end,
    ["SGD nesterov"] = function(ps) return ember.optim.SGD(ps, { lr = 0.1, momentum = 0.8, nesterov = true }) end,
    Adam = function(ps) return ember.optim.Adam(ps, { lr = 0.01, weight_decay = 0.01 }) end,
    ["AdamW amsgrad"] = function(ps) return ember.optim.AdamW(ps, { lr = 0.01, amsgrad = true }) end,
    ["Adam maximize"] = function(ps) return ember.optim.Adam(ps, { lr = 0.02, maximize = true }) end,
  }
  for name, make in pairs(makers) do
    case(name .. ": 5 steps follow the CPU's trajectory, the state on the device", function()
      for _, dt in ipairs({ "float32", "float64" }) do
        local got, want = trajectory(device, dt, make), trajectory("cpu", dt, make)
        for i = 1, 5 do
          agrees(got[i].w, want[i].w, TOL[dt])
          for key, t in pairs(want[i].state or {}) do
            if ember.is_tensor(t) then agrees(got[i].state[key], t, TOL[dt]) end
          end
        end
      end
    end)
  end
end)

describe("on " .. device .. ": pinned memory and copies that do not wait", function()
  local function cuda_only()
    if device ~= "cuda" then pending("pinned memory comes from the CUDA backend; this run's device is " .. device) end
    return device == "cuda"
  end

  case("pin_memory copies into pinned memory, and a non_blocking copy gives the same values", function()
    if not cuda_only() then return end
    local x = ember.randn({ 5, 7 }):t()
    local p = x:pin_memory()
    assert.is_true(p:is_pinned())
    assert.is_false(x:is_pinned())
    assert.are.same(x:tolist(), p:tolist())
    assert.is_true(p:pin_memory():is_pinned())
    local d = p:to(device, { non_blocking = true })
    ember.cuda.synchronize()
    agrees(d, x:contiguous(), EXACT)
    agrees(p:to({ device = device, non_blocking = true, dtype = "float64" }), x:double(), EXACT)
  end)

  case("a pinned block freed while its copy is queued is not overwritten by its next owner", function()
    if not cuda_only() then return end
    local copies = {}
    for i = 1, 40 do
      local p = ember.full({ 256, 256 }, i):pin_memory()   -- one size class: freed blocks come back
      copies[i] = p:to(device, { non_blocking = true })
      p = nil
      collectgarbage()
    end
    ember.cuda.synchronize()
    for i = 1, 40 do
      assert.are.equal(i, copies[i]:min():item())
      assert.are.equal(i, copies[i]:max():item())
    end
  end)

  case("DataLoader{pin_memory = true} hands out pinned batches", function()
    if not cuda_only() then return end
    local ds = ember.data.TensorDataset(ember.randn({ 10, 3 }), ember.arange(10))
    local got = {}
    for x, y in ember.data.DataLoader(ds, { batch_size = 4, shuffle = true, seed = 1, pin_memory = true }):iter() do
      assert.is_true(x:is_pinned() and y:is_pinned())
      got[#got + 1] = x:to(device, { non_blocking = true })
    end
    local i = 0
    for x in ember.data.DataLoader(ds, { batch_size = 4, shuffle = true, seed = 1 }):iter() do
      i = i + 1
      agrees(got[i], x, EXACT)
    end
    assert.are.equal(3, i)
  end)

  case("save_on_cpu{pin_memory = true} gives the gradients saved on the device give", function()
    if not cuda_only() then return end
    local graph = ember.autodiff.graph
    -- pin: nil saves on the device, true or false on the host
    local function grad(pin)
      ember.manual_seed(2)
      local w = ember.randn({ 4, 6 }):to(device)
      local gm = ember.autodiff.GradManager():attach({ w })
      gm:record()
      local function f() return ((w * w):exp() * w:sin()):sum() end
      gm:backward(pin == nil and f() or graph.save_on_cpu({ pin_memory = pin }, f))
      return w.grad
    end
    local want = grad(nil)
    agrees(grad(true), want:cpu(), EXACT)
    agrees(grad(false), want:cpu(), EXACT)
  end)
end)

describe("pinned memory without CUDA", function()
  it("pin_memory raises with the backend's reason; DataLoader{pin_memory = true} gives ordinary batches", function()
    if ember.cuda.is_available() then pending("CUDA can be used here") return end
    local x = ember.ones({ 2, 3 })
    local ok, err = pcall(function() return x:pin_memory() end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("ember.pin_memory: device cuda:0 is not available: " .. ember.cuda.status(), 1, true),
      tostring(err))
    assert.is_false(x:is_pinned())
    local ds = ember.data.TensorDataset(ember.randn({ 5, 2 }))
    for b in ember.data.DataLoader(ds, { batch_size = 2, pin_memory = true }):iter() do assert.is_false(b:is_pinned()) end
    assert.are.equal(x, x:to("cpu", { non_blocking = true }))
  end)
end)

describe("on " .. device .. ": checkpoints", function()
  case("ember.save of device tensors and ember.load back to the device", function()
    local path = os.tmpname()
    local want = {}
    for _, dt in ipairs({ "float32", "float64", "float16", "int64", "bool" }) do
      want[dt] = ember.arange(0, 12, 1, { dtype = dt }):reshape({ 3, 4 })
      if not FLOATS[dt] then want[dt] = want[dt]:gt(5):to(dt) end
    end
    local on_device = {}
    for dt, t in pairs(want) do on_device[dt] = t:to(device):t() end
    ember.save(path, { w = on_device, step = 3 })
    local back = ember.load(path, { device = device })
    local host = ember.load(path)
    os.remove(path)
    assert.are.equal(3, back.step)
    for dt, t in pairs(want) do
      agrees(back.w[dt], t:t():contiguous(), EXACT)
      assert.are.equal("cpu", host.w[dt].device)
      assert.are.same(t:t():tolist(), host.w[dt]:tolist())
    end
  end)
end)

describe("on " .. device .. ": training", function()
  case("one SGD step of a small MLP gives the CPU's loss and weights", function()
    local function step(dev)
      ember.manual_seed(8)
      local m = ember.nn.Sequential(ember.nn.Linear(5, 16), ember.nn.ReLU(), ember.nn.Linear(16, 3))
      m:to(dev)
      local x = ember.randn({ 12, 5 }):to(dev)
      local y = ember.randn({ 12, 3 }):to(dev)
      local opt = ember.optim.SGD(m:parameters(), { lr = 0.1, momentum = 0.9 })
      local gm = ember.autodiff.GradManager()
      gm:attach(m:parameters())
      gm:record()
      local loss = F.mse_loss(m(x), y)
      gm:backward(loss)
      opt:step()
      return loss, m:parameters()
    end
    local loss, ps = step(device)
    local loss0, ps0 = step("cpu")
    -- a sum over K = 16 products in another order than OpenBLAS's
    local tol = { rtol = 1e-5, atol = 1e-6 }
    agrees(loss, loss0, tol)
    for i, p in ipairs(ps0) do agrees(ps[i], p, tol) end
  end)
end)
