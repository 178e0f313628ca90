-- ember.set_deterministic(true): training gives the same bits with 1 and 2
-- threads (API.md, "In a host's frame loop").
local H = require("helpers")
local ember = H.ember
local nn, F = ember.nn, ember.nn.functional

local function bits(params)
  local out = {}
  for i, p in ipairs(params) do out[i] = p:tolist() end
  return out
end

-- n steps of a recipe on `threads` threads; returns every parameter's values
local function train(recipe, threads, steps, data)
  ember.set_num_threads(threads)
  ember.manual_seed(11)
  local model, opt
  if recipe == "mlp" then
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
      nn.Linear(128, 10))
    opt = ember.optim.SGD(model:parameters(), { lr = 0.1, momentum = 0.9 })
  else
    model = nn.Sequential(nn.Conv2d(1, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
      nn.Conv2d(8, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
    opt = ember.optim.Adam(model:parameters(), { lr = 1e-3 })
  end
  local gm = ember.autodiff.GradManager():attach(model:parameters())
  local loader = ember.data.DataLoader(data, { batch_size = recipe == "mlp" and 128 or 32, shuffle = true, seed = 5 })
  local step = 0
  for x, y in loader:iter() do
    gm:record()
    gm:backward(F.cross_entropy(model(x), y))
    opt:step()
    opt:zero_grad()
    step = step + 1
    if step == steps then break end
  end
  return bits(model:parameters())
end

describe("deterministic mode", function()
  local data
  local threads_before = ember.get_num_threads()
  setup(function()
    local ok, train_set = pcall(ember.data.fashion_mnist, "train")
    if ok then
      data = train_set
    else   -- without the Debian data package: a synthetic set of the same shape
      ember.manual_seed(2)
      data = { x = ember.rand({ 6400, 1, 28, 28 }), y = ember.randint(1, 11, { 6400 }) }
    end
  end)
  teardown(function()
    ember.set_deterministic(false)
    ember.set_num_threads(threads_before)
  end)

  it("is off by default and can be switched", function()
    assert.is_false(ember.is_deterministic())
    ember.set_deterministic(true)
    assert.is_true(ember.is_deterministic())
    ember.set_deterministic(false)
    assert.is_false(ember.is_deterministic())
  end)

  it("gives bit-identical parameters after 200 MLP steps on 1 and 2 threads", function()
    ember.set_deterministic(true)
    local one = train("mlp", 1, 200, data)
    local two = train("mlp", 2, 200, data)
    local again = train("mlp", 2, 200, data)
    ember.set_deterministic(false)
    assert.are.same(one, two)
    assert.are.same(two, again)
  end)

  it("gives bit-identical parameters after 20 CNN steps on 1 and 2 threads", function()
    ember.set_deterministic(true)
    local one = train("cnn", 1, 20, data)
    local two = train("cnn", 2, 20, data)
    ember.set_deterministic(false)
    assert.are.same(one, two)
  end)

  it("makes large products independent of the thread count", function()
    ember.set_deterministic(true)
    local results = {}
    for threads = 1, 2 do
      ember.set_num_threads(threads)
      ember.manual_seed(4)
      local a, b = ember.randn({ 300, 257 }), ember.randn({ 257, 190 })
      results[threads] = { a:matmul(b):tolist(), a:t():contiguous():t():matmul(b):tolist(),
        b:t():matmul(a:t()):tolist() }
    end
    ember.set_deterministic(false)
    assert.are.same(results[1], results[2])
  end)
end)
