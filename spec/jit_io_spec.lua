-- plan:save and ember.jit.load (docs/plans.md, "The file"): a saved
-- forward loads and runs with the same bits; the reader refuses hostile
-- files by name (truncated, another version, an unknown op, a slot read
-- before it is written, absurd sizes, shapes that do not chain, a view
-- outside its tensor) and leaves everything usable.
package.path = "./spec/support/?.lua;" .. package.path
local H = require("helpers")
local ember = H.ember
local json = require("ember.json")
local Z = require("zoo")
local ffi = require("ffi")
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
  -- the same with the graph decoded, changed in place by edit(t), encoded again
  local function load_edited(edit)
    return load_with(function(g)
      local t = json.decode(g)
      edit(t)
      return json.encode(t)
    end)
  end

  it("loads a saved forward that gives the model's bits; a step that leaves .grad set cannot be saved", function()
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
    H.raises(function() step:save(dir .. "/step.plan") end, "a plan that sets .grad fields")
  end)

  -- an MLP, its optimizer (kind, opts) and its step; the data of 7 steps
  local function setup_step(kind, opts)
    ember.manual_seed(9)
    local m = Z.mlp({ 12, 16, 5 })
    local opt = ember.optim[kind](m:parameters(), opts)
    return m, opt, Z.train_step(m, opt)
  end
  local function batches()
    ember.manual_seed(10)
    local xs, ys = {}, {}
    for i = 1, 7 do xs[i], ys[i] = ember.randn({ 6, 12 }), ember.randint(1, 6, { 6 }) end
    return xs, ys
  end

  it("saves an MLP's SGD training step that trains its own copies of the weights, bit for bit as eager", function()
    local xs, ys = batches()
    local function setup()
      local m, _, step = setup_step("SGD", { lr = 0.1, momentum = 0.9, weight_decay = 1e-3 })
      return m, step
    end
    local a, stepa = setup()
    local b, stepb = setup()
    stepb(xs[1], ys[1])
    local plan = ember.jit.trace(stepb, { xs[2], ys[2] })
    local file = dir .. "/step.plan"
    plan:save(file, { names = b:state_dict() })
    local saved = {}
    for k, v in pairs(b:state_dict()) do saved[k] = v:clone() end
    stepa(xs[1], ys[1])
    stepa(xs[2], ys[2])
    local loaded = ember.jit.load(file)
    assert.are.same({ 0, 0 }, { loaded:stats().arena_bytes, loaded:stats().peak_bytes })   -- laid out by the first run
    for i = 3, 7 do
      local la = stepa(xs[i], ys[i])
      local lb = loaded(xs[i], ys[i])
      assert.is_true(ember.equal(la, lb), "loss at step " .. i)
      -- from the second run on, the temporaries in the arena: the same bits
      assert.is_true(loaded:stats().arena_bytes > 0 and loaded:stats().arena_bytes % 64 == 0)
      assert.is_true(loaded:stats().peak_bytes > 0)
    end
    for k, v in pairs(a:state_dict()) do
      assert.is_true(ember.equal(v, loaded:tensor(k)), k)
      assert.is_true(ember.equal(b:state_dict()[k], saved[k]), k .. ": the traced model is not the loaded plan's")
    end
    H.raises(function() loaded:tensor("nope") end, "no tensor named 'nope'")
    H.raises(function() plan:save(file, { names = { w3 = b[1].weight } }) end, "of the form")
  end)

  -- an MLP's step with optimizer kind traced and saved to file, its graph;
  -- and with(fn, version): loading the file with fn(graph, entry) applied
  -- to its graph (entry: the first for which pick(entry) holds) fails, its message
  local function hostile(kind, opts, file, pick)
    local xs, ys = batches()
    local b, _, stepb = setup_step(kind, opts)
    stepb(xs[1], ys[1])
    ember.jit.trace(stepb, { xs[2], ys[2] }):save(file, { names = b:state_dict() })
    local h0, d0 = split(H.read(file))
    return json.decode(h0.__metadata__["ember.plan"]), function(fn, version)
      local h = split(H.read(file))
      local g = json.decode(h.__metadata__["ember.plan"])
      local entry
      for _, e in ipairs(g.entries) do entry = entry or (pick(e) and e) end
      fn(g, entry)
      h.__metadata__["ember.plan"] = json.encode(g)
      h.__metadata__["ember.plan.version"] = version or "2"
      local f = assert(io.open(dir .. "/bad.plan", "wb"))
      f:write(join(h, d0))
      f:close()
      local ok, err = pcall(ember.jit.load, dir .. "/bad.plan")
      assert.is_false(ok)
      return err
    end
  end

  for _, case in ipairs({
    { "Adam", { lr = 1e-2, weight_decay = 1e-3 } },
    { "AdamW", { lr = 1e-2, weight_decay = 1e-2, amsgrad = true } },
    { "Adam", { lr = 1e-2, betas = { 0.8, 0.9 }, maximize = true } },
    { "RMSprop", { lr = 1e-2, centered = true, momentum = 0.5, weight_decay = 1e-3 } },
    { "RMSprop", { lr = 1e-2 } },
  }) do
    local adam = case[1] ~= "RMSprop"
    it(("saves %s's step (%s) with its state (and step count); 5 loaded runs are eager's steps, bit for bit")
      :format(case[1], json.encode(case[2])), function()
      local xs, ys = batches()
      local a, opta, stepa = setup_step(case[1], case[2])
      local b, optb, stepb = setup_step(case[1], case[2])
      stepb(xs[1], ys[1])
      stepb(xs[2], ys[2])   -- an eager step between: the plan's first run is step 3
      local plan = ember.jit.trace(stepb, { xs[3], ys[3] })
      local file = dir .. "/adam.plan"
      plan:save(file, { names = b:state_dict() })
      assert.are.equal("2", split(H.read(file)).__metadata__["ember.plan.version"])
      for i = 1, 3 do stepa(xs[i], ys[i]) end
      local loaded = ember.jit.load(file)
      local n = ffi.new("int[1]")
      local cp = ember._C.ember_plan_counters(loaded._p, n)
      assert.are.equal(adam and 4 or 0, n[0])   -- two layers' weight and bias
      for k = 0, n[0] - 1 do assert.are.equal(4, tonumber(cp[k])) end   -- the next step is the 4th
      for i = 4, 7 do
        assert.is_true(ember.equal(stepa(xs[i], ys[i]), loaded(xs[i], ys[i])), "loss at step " .. i)
      end
      assert.is_true(ember.equal(stepa(xs[1], ys[1]), loaded(xs[1], ys[1])), "loss at step 8")
      for k = 0, n[0] - 1 do assert.are.equal(9, tonumber(cp[k])) end
      for k, v in pairs(a:state_dict()) do assert.is_true(ember.equal(v, loaded:tensor(k)), k) end
      local nstate = 0
      for _, e in ipairs(a:named_parameters()) do
        local name, st = e[1], opta.state[e[2]]
        assert.are.equal(8, st.step)
        for key, t in pairs(st) do
          if ember.is_tensor(t) then
            assert.is_true(ember.equal(t, loaded:tensor(name .. "." .. key)), name .. "." .. key)
            nstate = nstate + 1
          end
        end
      end
      assert.is_true(nstate >= 4)
      -- saved again from the loaded plan: the step counts and the state as they are now
      loaded:save(dir .. "/again.plan")
      local again = ember.jit.load(dir .. "/again.plan")
      assert.is_true(ember.equal(stepa(xs[2], ys[2]), again(xs[2], ys[2])), "loss at step 9 after a second save")
      -- the traced model and its optimizer are not the loaded plan's
      assert.are.equal(3, optb.state[b[1].weight].step)
    end)
  end

  it("refuses hostile Adam entries: state of another shape, missing state, bad step counts and betas", function()
    local file = dir .. "/adam.plan"
    local g0, with = hostile("Adam", { lr = 1e-2, amsgrad = true }, file, function(e) return e.adam end)
    local slot_of = {}
    for i, sl in ipairs(g0.slots) do if sl[1] == "w" then slot_of[sl[2]] = i - 1 end end
    assert.matches("adam updates slot 0, which is not a weight of the file marked written",
      with(function(_, e) e.slots[3] = 0 end))
    assert.matches("adam's exp_avg is float32 {16}, its parameter float32 {16, 12}",
      with(function(_, e) e.slots[3] = slot_of["1.bias.exp_avg"] end))
    assert.matches("adam's max_exp_avg_sq is float32 {5, 16}, its parameter float32 {16, 12}",
      with(function(_, e) e.slots[5] = slot_of["3.weight.max_exp_avg_sq"] end))
    -- missing state: a tensor the file lacks, an update without its exp_avg_sq
    assert.matches("names a tensor '1.weight.lost' the file does not hold",
      with(function(g) g.slots[slot_of["1.weight.exp_avg"] + 1][2] = "1.weight.lost" end))
    assert.matches("a bad adam update", with(function(_, e)
      table.remove(e.slots, 4)
      e.nin = 4
    end))
    assert.matches("a bad adam update", with(function(_, e) e.step = 0 end))
    assert.matches("a bad adam update", with(function(_, e) e.step = 2.5 end))
    assert.matches("hyperparameter 2 is not a finite number", with(function(_, e) e.adam[2] = "0.9" end))
    assert.matches("betas %(1, 0.999%) are not in %[0, 1%)", with(function(_, e) e.adam[2] = 1 end))
    assert.matches("flags are not 0 or 1", with(function(_, e) e.flags[1] = 3 end))
    assert.matches("an adam update in a version 1 file", with(function(g) g.version = 1 end, "1"))
    assert.matches("reads versions 1 to 2", with(function() end, "3"))
    -- the file as written still loads
    assert.is_truthy(ember.jit.load(file))
  end)

  it("refuses hostile in-place writes (RMSprop's update): of an input, an unwritten constant, unknown ops", function()
    local file = dir .. "/rms.plan"
    local g0, with = hostile("RMSprop", { lr = 1e-2, momentum = 0.5 }, file, function(e) return e.inplace == "mul" end)
    local const
    for i, sl in ipairs(g0.slots) do if sl[1] == "c" and sl[3] == 0 then const = const or i - 1 end end
    assert.matches("entry %d+ %(mul_%) writes slot 0, which is not a temporary made before it or a tensor of the "
      .. "file marked written", with(function(_, e) e.slots[1] = 0 end))
    assert.is_truthy(const)
    assert.matches("writes slot " .. const .. ", which is not", with(function(_, e) e.slots[1] = const end))
    assert.matches("unknown in%-place op 'pow'", with(function(_, e) e.inplace = "pow" end))
    assert.matches("for an in%-place op of 2", with(function(_, e) e.nin = 1 end))
    assert.matches("an in%-place write in a version 1 file", with(function(g) g.version = 1 end, "1"))
    assert.is_truthy(ember.jit.load(file))
  end)

  it("saves a CNN's forward (conv, batch norm's running statistics, max pool) with the model's bits", function()
    ember.manual_seed(6)
    local m = Z.SmallCNN()
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

  it("refuses a step's hostile entries: an SGD update of what is not a written weight, bad attributes", function()
    local step = "core/tests/fuzz/plan_corpus/sgd_step.plan"   -- an SGD step of an MLP 4 -> 8 -> 3 (the fuzz seed)
    local h0, d0 = split(H.read(step))
    local g0 = json.decode(h0.__metadata__["ember.plan"])
    local function with(fn)
      local h = split(H.read(step))
      local g = json.decode(h.__metadata__["ember.plan"])
      fn(g)
      h.__metadata__["ember.plan"] = json.encode(g)
      local f = assert(io.open(dir .. "/bad.plan", "wb"))
      f:write(join(h, d0))
      f:close()
      return pcall(ember.jit.load, dir .. "/bad.plan")
    end
    local function find(g, key, value)
      for i, e in ipairs(g.entries) do
        if e[key] ~= nil and (value == nil or e[key] == value) then return i end
      end
    end
    local sgd = find(g0, "sgd")
    assert.is_truthy(sgd)
    local ok, err = with(function(g) g.entries[sgd].slots[1] = 0 end)   -- the input
    assert.is_false(ok)
    assert.matches("sgd updates slot 0, which is not a weight of the file marked written", err)
    ok, err = with(function(g) g.entries[sgd].sgd[1] = "fast" end)
    assert.is_false(ok)
    assert.matches("a bad sgd update", err)
    ok, err = with(function(g) g.entries[sgd].flags = { 0, 2 } end)
    assert.is_false(ok)
    assert.matches("a bad sgd update", err)
    ok, err = with(function(g) g.entries[sgd].slots[2] = -1 end)   -- only the momentum buffer may be absent
    assert.is_false(ok)
    assert.matches("slot out of range", err)
    -- attributes that would reach outside a tensor fail when the entry runs, naming it
    local x, y = ember.randn({ 4, 4 }), ember.tensor({ 1, 2, 3, 1 }, { dtype = "int64" })
    for _, case in ipairs({
      { "select", function(e) e.i[2] = 7 end, "select of index 8 of dim 1" },
      { "sum", function(e) e.i[2] = 255 end, "sum over dims" },
      { "sum_to", function(e) e.i[1] = 5 end, "sum_to of" },
    }) do
      local i = find(g0, "op", case[1])
      assert.is_truthy(i, case[1])
      ok, err = with(function(g) case[2](g.entries[i]) end)
      assert.is_true(ok, case[1])
      H.raises(function() err(x, y) end, case[3])
    end
  end)

  it("refuses a truncated file, another version, a file that is not a plan", function()
    local bytes = H.read(path)
    local f = assert(io.open(dir .. "/cut.plan", "wb"))
    f:write(bytes:sub(1, #bytes - 7))
    f:close()
    H.raises(function() ember.jit.load(dir .. "/cut.plan") end, "cut.plan")
    local ok, err = load_with(function(g) return g end, "3")
    assert.is_false(ok)
    assert.matches("plan format version '3'; this ember reads versions 1 to 2", err)
    ok, err = load_with(function(g) return g end, "2")   -- the graph says version 1
    assert.is_false(ok)
    assert.matches("the graph is not a version 2 plan", err)
    ember.save(dir .. "/w.safetensors", { a = ember.ones({ 2 }) })
    H.raises(function() ember.jit.load(dir .. "/w.safetensors") end, "not a plan")
  end)

  it("refuses an unknown op, a slot read before it is written, absurd sizes", function()
    local ok, err = load_with(function(g) return (g:gsub('"op":"linear_relu"', '"op":"frobnicate"', 1)) end)
    assert.is_false(ok)
    assert.matches("unknown op 'frobnicate'", err)
    for _, case in ipairs({
      { function(t) t.entries[1].slots[1] = #t.slots - 1 end,   -- the last temporary, not made yet
        "reads slot %d+ before anything writes it" },
      { function(t) for i = 1, 70 do t.inputs[i] = t.inputs[1] end end, "absurd sizes: 70 inputs" },
      { function(t) t.inputs[1].shape = { 3, -2, 6 } end, "input 1: a bad size" },
    }) do
      ok, err = load_edited(case[1])
      assert.is_false(ok)
      assert.matches(case[2], err)
    end
  end)

  it("refuses at run time what does not chain: a reshape that does not fit, weights of other shapes", function()
    local ok, p = load_edited(function(t)
      for _, e in ipairs(t.entries) do
        if e.op == "reshape" then e.i[3] = 5 end   -- {3, 5} from 3 x 12 elements
      end
    end)
    assert(ok, p)
    H.raises(function() p(ember.randn({ 3, 2, 6 })) end, "plan: reshape to a shape that does not fit")
    ok, p = load_edited(function(t)
      local e1 = t.entries[2]
      e1.slots[2], t.entries[3].slots[2] = t.entries[3].slots[2], e1.slots[2]   -- swap the two layers' weights
    end)
    if ok then
      H.raises(function() p(ember.randn({ 3, 2, 6 })) end, "plan: entry 2 of", "linear_relu: weight {5, 8}")
    else
      assert.matches("slot", p)
    end
    -- a view past the end of its tensor: refused before it is made
    ok, p = load_edited(function(t)
      t.slots[#t.slots + 1] = { "t" }
      local geo = { 1, 0, 1000 }
      for i = 4, 18 do geo[i] = 0 end
      geo[11] = 1
      t.entries[#t.entries + 1] = { view = geo, nin = 1, slots = { 0, #t.slots - 1 } }
      t.outputs[1] = #t.slots - 1
    end)
    assert(ok, p)
    H.raises(function() p(ember.randn({ 3, 2, 6 })) end, "a view reaches outside the tensor of shape {3, 2, 6}")
    -- the library stays usable
    assert.is_true(ember.equal(ember.jit.load(path)(ember.ones({ 3, 2, 6 })), ember.jit.load(path)(ember.ones({ 3, 2, 6 }))))
  end)
end)
