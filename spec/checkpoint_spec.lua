-- Whole training checkpoints: the random generator's state, every optimizer's
-- and scheduler's state_dict through ember.save / ember.load unchanged, and a
-- run stopped, saved and resumed in fresh objects that ends bit for bit where
-- the uninterrupted run ends.
local H = require("helpers")
local ember = H.ember
local nn, F, optim = ember.nn, ember.nn.functional, ember.optim

local function tmpfile()
  local p = os.tmpname()
  os.remove(p)
  return p .. ".safetensors"
end

-- every element of a tensor (or a list of numbers) as hex floats: equal strings
-- mean equal bits (up to NaN payloads), -0 apart from 0
local function bits(x)
  local v = ember.is_tensor(x) and H.flatten(x:tolist()) or x
  local out = {}
  for i, e in ipairs(v) do out[i] = type(e) == "number" and ("%a"):format(e) or tostring(e) end
  return table.concat(out, " ")
end

-- a table with every tensor replaced by its dtype, shape and bits: what "the
-- same table" means for two checkpoints
local function plain(v)
  if ember.is_tensor(v) then return { v.dtype, table.concat(v:shape(), "x"), bits(v) } end
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = plain(x) end
  return out
end

describe("ember.get_rng_state / set_rng_state", function()
  it("set_rng_state(get_rng_state()) changes nothing, and a restored state repeats the draws", function()
    ember.manual_seed(5)
    ember.rand({ 3 })
    local s = ember.get_rng_state()
    assert.are.equal(s.seed, ember.initial_seed())
    ember.set_rng_state(s)
    local a = { ember.rand({ 4 }), ember.randn({ 2, 3 }), ember.randint(0, 100, { 5 }),
      F.dropout(ember.ones({ 8 }), 0.5, true) }
    ember.rand({ 7 })
    ember.set_rng_state(s)
    local b = { ember.rand({ 4 }), ember.randn({ 2, 3 }), ember.randint(0, 100, { 5 }),
      F.dropout(ember.ones({ 8 }), 0.5, true) }
    for i = 1, #a do assert.are.equal(bits(a[i]), bits(b[i])) end
  end)

  it("draws nothing: a run that reads the state draws what a run that does not draws", function()
    ember.manual_seed(11)
    ember.rand({ 5 })
    local plain_draw = bits(ember.randn({ 6 }))
    ember.manual_seed(11)
    ember.rand({ 5 })
    local s = ember.get_rng_state()
    assert.are.same({ seed = 11, offset = s.offset }, s)
    assert.is_true(s.offset > 0)
    assert.are.equal(plain_draw, bits(ember.randn({ 6 })))
  end)

  it("names bad states", function()
    for _, bad in ipairs({ 5, {}, { seed = 1 }, { seed = -1, offset = 0 }, { seed = 1.5, offset = 0 },
                           { seed = 2 ^ 64, offset = 0 }, { seed = 1, offset = -2 } }) do
      assert.error_matches(function() ember.set_rng_state(bad) end,
        "ember.set_rng_state: expected what get_rng_state returned ({seed = n, offset = m})", 1, true)
    end
  end)
end)

-- a model whose training uses every kind of state: parameters, BatchNorm's
-- running stats and int64 counter, dropout's random draws
local function make_model(seed)
  ember.manual_seed(seed)
  return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.25), nn.Linear(8, 3))
end

local OPTIMIZERS = {
  { "SGD", { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 1e-3 } },
  { "SGD", { lr = 0.05, momentum = 0.5, dampening = 0.1, maximize = false } },
  { "Adam", { lr = 1e-2, betas = { 0.8, 0.99 }, amsgrad = true } },
  { "AdamW", { lr = 1e-2, weight_decay = 0.1 } },
  { "SGD", { lr = 0.1, momentum = 0.9 }, first_group_lr = 0.02 },   -- two parameter groups
}
local SCHEDULERS = {
  { "StepLR", { step_size = 2, gamma = 0.5 } },
  { "CosineAnnealingLR", { T_max = 7, eta_min = 1e-4 } },
}

-- {lr=0.1, betas={0.8,0.99}} for a test's name
local function show_options(opts)
  local parts = {}
  for _, k in ipairs(H.sorted_keys(opts)) do
    local v = opts[k]
    parts[#parts + 1] = k .. "=" .. (type(v) == "table" and "{" .. table.concat(v, ",") .. "}" or tostring(v))
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- o = {class name, options, first_group_lr = lr of a group of the first layer's parameters}
local function make_optimizer(o, model)
  local params = model:parameters()
  if not o.first_group_lr then return optim[o[1]](params, o[2]) end
  return optim[o[1]]({ { params = { params[1], params[2] }, lr = o.first_group_lr },
    { params = { unpack(params, 3) } } }, o[2])
end

-- steps of training on batches drawn from ember's generator; the losses
local function train(model, opt, sched, steps)
  local gm = ember.autodiff.GradManager():attach(model:parameters())
  local losses = {}
  for i = 1, steps do
    local x, y = ember.randn({ 6, 4 }), ember.randint(1, 4, { 6 })
    gm:record()
    local loss = F.cross_entropy(model(x), y)
    gm:backward(loss)
    opt:step()
    opt:zero_grad()
    sched:step()
    losses[i] = loss:item()
  end
  return losses
end

local function checkpoint(model, opt, sched, epoch)
  return { model = model:state_dict(), optim = opt:state_dict(), sched = sched:state_dict(),
    epoch = epoch, rng = ember.get_rng_state() }
end

describe("a whole checkpoint", function()
  local path
  before_each(function() path = tmpfile() end)
  after_each(function() os.remove(path) end)

  for _, o in ipairs(OPTIMIZERS) do
    for _, s in ipairs(SCHEDULERS) do
      local what = ("%s %s%s with %s"):format(o[1], show_options(o[2]),
        o.first_group_lr and " in two groups" or "", s[1])

      it("goes through ember.save / ember.load unchanged (" .. what .. ")", function()
        local model = make_model(1)
        local opt = make_optimizer(o, model)
        local sched = optim.lr_scheduler[s[1]](opt, s[2])
        train(model, opt, sched, 3)
        local ckpt = checkpoint(model, opt, sched, 3)
        ember.save(path, ckpt)
        assert.are.same(plain(ckpt), plain(ember.load(path)))
      end)

      it("resumes bit for bit in a fresh model, optimizer and scheduler (" .. what .. ")", function()
        local model = make_model(1)
        local opt = make_optimizer(o, model)
        local sched = optim.lr_scheduler[s[1]](opt, s[2])
        train(model, opt, sched, 4)
        ember.save(path, checkpoint(model, opt, sched, 4))
        local losses = train(model, opt, sched, 5)

        local model2 = make_model(2)   -- other initial weights, other generator state
        local opt2 = make_optimizer(o, model2)
        local sched2 = optim.lr_scheduler[s[1]](opt2, s[2])
        local ckpt = ember.load(path)
        model2:load_state_dict(ckpt.model)
        opt2:load_state_dict(ckpt.optim)
        sched2:load_state_dict(ckpt.sched)
        ember.set_rng_state(ckpt.rng)
        assert.are.equal(4, ckpt.epoch)
        local losses2 = train(model2, opt2, sched2, 5)

        assert.are.equal(bits(losses), bits(losses2))
        assert.are.same(plain(model:state_dict()), plain(model2:state_dict()))
        assert.are.same(plain(opt:state_dict()), plain(opt2:state_dict()))
        assert.are.same(sched:state_dict(), sched2:state_dict())
        for gi, g in ipairs(opt.param_groups) do assert.are.equal(g.lr, opt2.param_groups[gi].lr) end
      end)
    end
  end
end)

describe("PyTorch's key names (torch_names)", function()
  local fixture = "spec/fixtures/torch_sequential.safetensors"
  local torch = dofile("spec/fixtures/torch_state_torch.lua")

  -- the model spec/fixtures/gen_torch_state.py exports, built in ember
  local function make()
    return nn.Sequential(nn.Conv2d(2, 3, 3, { padding = 1 }), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(),
      nn.Linear(3 * 4 * 4, 5), nn.ReLU(), nn.Linear(5, 2))
  end

  it("loads a state_dict PyTorch exported by name and gives PyTorch's outputs", function()
    local model = make()
    local sd, meta = ember.load(fixture)
    assert.are.same({ format = "pt" }, meta)
    model:load_state_dict(sd, { torch_names = true })
    model:eval()
    H.same(model(ember.tensor(torch.x)), torch.y, 1e-5)
    assert.are.equal(torch.num_batches_tracked, model:get(2).num_batches_tracked:item())
  end)

  it("writes PyTorch's names, dtypes and shapes: the same header as PyTorch's file", function()
    local sd = make():state_dict({ torch_names = true })
    assert.are.same(torch.keys, H.sorted_keys(sd))
    for k, t in pairs(sd) do assert.are.same(torch.shapes[k], t:shape()) end
    local path = tmpfile()
    ember.save(path, sd, { format = "pt" })
    local mine, theirs = ember.io.header(path), ember.io.header(fixture)
    os.remove(path)
    assert.are.same(theirs, mine)
  end)

  it("numbers the children of nested Sequential and ModuleList from 0, nothing else", function()
    local Net = nn.Module:extend("TorchNamesNet")
    function Net:init()
      self.body = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)))
      self.heads = nn.ModuleList({ nn.Linear(3, 1), nn.Linear(3, 2) })
    end
    local net = Net()
    assert.are.same({ "body.0.bias", "body.0.weight", "body.2.0.bias", "body.2.0.weight", "body.2.1.bias",
      "body.2.1.num_batches_tracked", "body.2.1.running_mean", "body.2.1.running_var", "body.2.1.weight",
      "heads.0.bias", "heads.0.weight", "heads.1.bias", "heads.1.weight" },
      H.sorted_keys(net:state_dict({ torch_names = true })))
    local other = Net()
    other:load_state_dict(net:state_dict({ torch_names = true }), { torch_names = true, strict = true })
    assert.are.same(plain(net:state_dict()), plain(other:state_dict()))
  end)

  it("says when keys look like PyTorch's, and names bad options", function()
    local model = make()
    local sd = ember.load(fixture)
    assert.error_matches(function() model:load_state_dict(sd) end,
      "(PyTorch's names, children numbered from 0? pass {torch_names = true})", 1, true)
    assert.error_matches(function() model:state_dict({ torch = true }) end,
      "ember.nn.Sequential: state_dict: unknown option 'torch'", 1, true)
    assert.error_matches(function() model:state_dict(true) end,
      "ember.nn.Sequential: state_dict: options must be a table, got boolean", 1, true)
    assert.error_matches(function() model:load_state_dict(sd, { torch_names = true, strict = true, x = 1 }) end,
      "ember.nn.Sequential: load_state_dict: unknown option 'x'", 1, true)
  end)
end)
