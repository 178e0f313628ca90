-- plan:save and ember.jit.load (docs/plans.md, "The file"): a saved
-- forward loads and runs with the same bits; the reader refuses hostile
-- files by name (truncated, another version, an unknown op, a slot read
-- before it is written, absurd sizes, shapes that do not chain, a view
-- outside its tensor) and leaves everything usable.
local H = require("helpers")
local ember = H.ember
local json = require("ember.json")
local nn = ember.nn

local function model()
  ember.manual_seed(4)
  return nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 5), nn.Softmax(2))
end

-- the header of a safetensors file as a table, and its data bytes
local function split(bytes)
  local n = 0
  for i = 8, 1, -1 do n = n * 256 + bytes:byte(i) end
  return json.decode(bytes:sub(9, 8 + n)), bytes:sub(9 + n)
end

local function join(header, data)
  local h = json.encode(header)
  local n, len = #h, {}
  for i = 1, 8 do
    len[i] = string.char(n % 256)
    n = math.floor(n / 256)
  end
  return table.concat(len) .. h .. data
end

describe("plan:save and ember.jit.load", function()
  local dir, path, graph, header, data
  before_each(function()
    dir = H.tmpdir()
    path = dir .. "/m.plan"
    local m = model()
    ember.jit.trace(m, { ember.randn({ 3, 2, 6 }) }, { train = false }):save(path)
    header, data = split(H.read(path))
    graph = header.__metadata__["ember.plan"]
  end)
  after_each(function() H.rm_rf(dir) end)

  -- writes the plan with fn(graph) as its graph (and version) and loads it
  local function load_with(fn, version)
    local h = split(H.read(path))
    h.__metadata__["ember.plan"] = fn(graph)
    h.__metadata__["ember.plan.version"] = version or "1"
    local f = assert(io.open(dir .. "/bad.plan", "wb"))
    f:write(join(h, data))
    f:close()
    return pcall(ember.jit.load, dir .. "/bad.plan")
  end

  it("loads a saved forward that gives the model's bits; a training step cannot be saved", function()
    local p = ember.jit.load(path)
    local m = model()
    local x = ember.randn({ 3, 2, 6 })
    assert.is_true(ember.equal(p(x), ember.no_grad(function() return m(x) end)))
    H.raises(function() p(ember.randn({ 4, 2, 6 })) end, "input 1 is float32 {4, 2, 6}")
    local w = ember.randn({ 3 })
    local gm = ember.autodiff.GradManager():attach({ w })
    local step = ember.jit.trace(function(x)
      gm:record()
      local l = (w * x):sum()
      gm:backward(l)
      return l
    end, { ember.randn({ 3 }) })
    H.raises(function() step:save(dir .. "/step.plan") end, "a plan of a training step cannot be saved")
  end)

  it("saves a CNN's forward (conv, batch norm's running statistics, max pool) with the model's bits", function()
    ember.manual_seed(6)
    local Net = nn.Module:extend("JitIoNet")
    function Net:init()
      self.conv = nn.Conv2d(1, 4, 3, { padding = 1 })
      self.bn = nn.BatchNorm2d(4)
      self.pool = nn.MaxPool2d(2)
      self.fc = nn.Linear(4 * 4 * 4, 10)
    end
    function Net:forward(x) return self.fc(self.pool(ember.nn.functional.relu(self.bn(self.conv(x)))):flatten(2)) end
    local m = Net()
    m(ember.randn({ 4, 1, 8, 8 }))   -- running statistics of their own
    ember.jit.trace(m, { ember.randn({ 1, 1, 8, 8 }) }, { train = false }):save(dir .. "/cnn.plan")
    local p = ember.jit.load(dir .. "/cnn.plan")
    m:eval()
    for _ = 1, 3 do
      local x = ember.randn({ 1, 1, 8, 8 })
      assert.is_true(ember.equal(p(x), ember.no_grad(function() return m(x) end)))
    end
  end)

  it("saves a fused chain as the ops it replaced", function()
    local w = ember.randn({ 6 })
    local plan = ember.jit.trace(function(x) return ((x * w + 1):relu() - 0.5) / 3 end, { ember.randn({ 2, 6 }) },
      { train = false })
    assert.are.equal(1, plan:stats().fused)
    plan:save(dir .. "/chain.plan")
    local p = ember.jit.load(dir .. "/chain.plan")
    assert.are.same({ 5, 0 }, { p:stats().ops, p:stats().fused })
    local x = ember.randn({ 2, 6 })
    assert.is_true(ember.equal(p(x), plan(x)))
  end)

  it("refuses a truncated file, another version, a file that is not a plan", function()
    local bytes = H.read(path)
    local f = assert(io.open(dir .. "/cut.plan", "wb"))
    f:write(bytes:sub(1, #bytes - 7))
    f:close()
    H.raises(function() ember.jit.load(dir .. "/cut.plan") end, "cut.plan")
    local ok, err = load_with(function(g) return g end, "2")
    assert.is_false(ok)
    assert.matches("plan format version '2'; this ember reads version 1", err)
    ember.save(dir .. "/w.safetensors", { a = ember.ones({ 2 }) })
    H.raises(function() ember.jit.load(dir .. "/w.safetensors") end, "not a plan")
  end)

  it("refuses an unknown op, a slot read before it is written, absurd sizes", function()
    local ok, err = load_with(function(g) return (g:gsub('"op":"linear_relu"', '"op":"frobnicate"', 1)) end)
    assert.is_false(ok)
    assert.matches("unknown op 'frobnicate'", err)
    ok, err = load_with(function(g)
      local t = json.decode(g)
      t.entries[1].slots[1] = #t.slots - 1   -- the last temporary, not made yet
      return json.encode(t)
    end)
    assert.is_false(ok)
    assert.matches("reads slot %d+ before anything writes it", err)
    ok, err = load_with(function(g)
      local t = json.decode(g)
      for i = 1, 70 do t.inputs[i] = t.inputs[1] end
      return json.encode(t)
    end)
    assert.is_false(ok)
    assert.matches("absurd sizes: 70 inputs", err)
    ok, err = load_with(function(g)
      local t = json.decode(g)
      t.inputs[1].shape = { 3, -2, 6 }
      return json.encode(t)
    end)
    assert.is_false(ok)
    assert.matches("input 1: a bad size", err)
  end)

  it("refuses at run time what does not chain: a reshape that does not fit, weights of other shapes", function()
    local ok, p = load_with(function(g)
      local t = json.decode(g)
      for _, e in ipairs(t.entries) do
        if e.op == "reshape" then e.i[3] = 5 end   -- {3, 5} from 3 x 12 elements
      end
      return json.encode(t)
    end)
    assert(ok, p)
    H.raises(function() p(ember.randn({ 3, 2, 6 })) end, "plan: reshape to a shape that does not fit")
    ok, p = load_with(function(g)
      local t = json.decode(g)
      local e1 = t.entries[2]
      e1.slots[2], t.entries[3].slots[2] = t.entries[3].slots[2], e1.slots[2]   -- swap the two layers' weights
      return json.encode(t)
    end)
    if ok then
      H.raises(function() p(ember.randn({ 3, 2, 6 })) end, "plan: entry 2 of", "linear_relu: weight {5, 8}")
    else
      assert.matches("slot", p)
    end
    -- a view past the end of its tensor: refused before it is made
    ok, p = load_with(function(g)
      local t = json.decode(g)
      t.slots[#t.slots + 1] = { "t" }
      local geo = { 1, 0, 1000 }
      for i = 4, 18 do geo[i] = 0 end
      geo[11] = 1
      t.entries[#t.entries + 1] = { view = geo, nin = 1, slots = { 0, #t.slots - 1 } }
      t.outputs[1] = #t.slots - 1
      return json.encode(t)
    end)
    assert(ok, p)
    H.raises(function() p(ember.randn({ 3, 2, 6 })) end, "a view reaches outside the tensor of shape {3, 2, 6}")
    -- the library stays usable
    assert.is_true(ember.equal(ember.jit.load(path)(ember.ones({ 3, 2, 6 })), ember.jit.load(path)(ember.ones({ 3, 2, 6 }))))
  end)
end)
