-- Porting a PyTorch model without surprises: conversions of a module that
-- keep the tensors managers and optimizers hold, containers that index,
-- measure and iterate in LuaJIT, buffers that stay out of state_dict, tensor
-- fields that are not parameters, PyTorch's names, PyTorch's positional
-- convolution arguments and BatchNorm's momentum=None. Expected values are
-- worked out by hand or by a second route (the functional form).
local H = require("helpers")
local ember = H.ember
local nn, F = ember.nn, ember.nn.functional
local GradManager = ember.autodiff.GradManager

local function names(list)
  local out = {}
  for _, e in ipairs(list) do out[#out + 1] = e[1] end
  return out
end

describe("Module:to and the casts", function()
  it("convert in place, so a manager and an optimizer made before keep working", function()
    local m = nn.Linear(3, 2)
    ember.no_grad(function()
      m.weight:copy_(ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }))
      m.bias:copy_(ember.tensor({ 0.5, -0.5 }))
    end)
    local w, b = m.weight, m.bias
    local gm = GradManager():attach(m:parameters())
    local opt = ember.optim.SGD(m:parameters(), { lr = 0.1 })
    assert.equal(m, m:double())
    assert.equal(w, m.weight)                 -- the same objects
    assert.equal(b, m.bias)
    assert.equal("float64", w.dtype)
    H.same(w, { { 1, 2, 3 }, { 4, 5, 6 } }, 0)
    -- loss = sum(W x + b) over 2 rows of x: dW[i] = x1 + x2, db[i] = 2
    local x = ember.tensor({ { 1, 0, 2 }, { 3, 1, -1 } }, { dtype = "float64" })
    gm:record()
    gm:backward(m(x):sum())
    assert.equal("float64", w.grad.dtype)
    H.same(w.grad, { { 4, 1, 1 }, { 4, 1, 1 } }, 0)
    H.same(b.grad, { 2, 2 }, 0)
    opt:step()
    H.same(w, { { 0.6, 1.9, 2.9 }, { 3.6, 4.9, 5.9 } }, 1e-12)
    H.same(b, { 0.3, -0.7 }, 1e-12)
  end)

  it("convert a parameter's .grad with it, and float() goes back", function()
    local m = nn.Linear(2, 1)
    m.weight.grad = ember.ones({ 1, 2 })
    local g = m.weight.grad
    m:double()
    assert.equal(g, m.weight.grad)
    assert.equal("float64", g.dtype)
    m:float()
    assert.equal("float32", m.weight.dtype)
    assert.equal("float32", m.weight.grad.dtype)
    m:half()
    assert.equal("float16", m.bias.dtype)
    m:bfloat16()
    assert.equal("bfloat16", m.bias.dtype)
  end)

  it("leave integer buffers as they are (num_batches_tracked stays int64)", function()
    local bn = nn.BatchNorm1d(2)
    bn(ember.randn({ 4, 2 }))
    bn:double()
    assert.equal("int64", bn.num_batches_tracked.dtype)
    assert.equal(1, bn.num_batches_tracked:item())
    assert.equal("float64", bn.running_mean.dtype)
    assert.equal("float64", bn.weight.dtype)
    bn:to({ dtype = "float32" })
    assert.equal("int64", bn.num_batches_tracked.dtype)
  end)

  it("take a dtype, a device, a tensor or a table, and raise for anything else", function()
    local m = nn.Linear(2, 2)
    m:to("cpu", "float64")
    assert.equal("float64", m.weight.dtype)
    m:to(ember.zeros({ 1 }))
    assert.equal("float32", m.weight.dtype)
    m:to({ dtype = "double", device = "cpu", memory_format = "preserve_format" })
    assert.equal("float64", m.weight.dtype)
    assert.error_matches(function() m:to("int64") end, "dtype must be floating point", 1, true)
    assert.error_matches(function() m:to({ dtyp = "float32" }) end, "unknown option 'dtyp'", 1, true)
    assert.error_matches(function() m:to("float32", "float64") end, "dtype is given twice", 1, true)
    assert.error_matches(function() m:to(5) end, "argument 1 must be a dtype", 1, true)
    assert.error_matches(function() m:to({ memory_format = "channels_last_3d" }) end,
      "memory_format 'channels_last_3d' is not supported", 1, true)
    assert.error_matches(function() m:to({ memory_format = "sideways" }) end, "unknown memory_format", 1, true)
    assert.equal("float64", m.weight.dtype)   -- unchanged by the failed calls
    m.weight = ember.tensor({ { 1, 2 }, { 3, 4 } }):t()   -- a non-contiguous parameter
    m:to({ memory_format = "contiguous_format" })
    assert.is_true(m.weight:is_contiguous())
    H.same(m.weight, { { 1, 3 }, { 2, 4 } }, 0)
  end)

  it("convert everything or nothing: a conversion that fails leaves the module as it was", function()
    local m = nn.Sequential(nn.Linear(256, 256), nn.Linear(256, 256))
    local w1 = m[1].weight:clone()
    collectgarbage()
    ember._sweep()
    local stats = ember.memory_stats()
    -- room for the first weight's float64 copy but not for both
    ember.set_memory_limit(stats.bytes_in_use + 256 * 256 * 8 + 256 * 256 * 4)
    local ok, err = pcall(function() m:double() end)
    ember.set_memory_limit(nil)
    assert.is_false(ok)
    assert.matches("memory", tostring(err))
    assert.equal("float32", m[1].weight.dtype)
    assert.equal("float32", m[2].weight.dtype)
    H.same(m[1].weight, w1:tolist(), 0)
    m:double()
    assert.equal("float64", m[2].weight.dtype)
  end)

  it("refuse while a recording tracks the parameters", function()
    local m = nn.Linear(2, 2)
    local gm = GradManager():attach(m:parameters())
    gm:record()
    assert.error_matches(function() m:double() end, "weight is tracked by a recording GradManager", 1, true)
    gm:release()
    m:double()
    assert.equal("float64", m.weight.dtype)
  end)
end)

describe("Tensor:to's memory_format", function()
  it("makes a contiguous copy for contiguous_format; channels_last needs 4-D", function()
    local t = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }):t()
    assert.is_false(t:is_contiguous())
    local c = t:to({ memory_format = "contiguous_format" })
    assert.is_true(c:is_contiguous())
    H.same(c, { { 1, 4 }, { 2, 5 }, { 3, 6 } }, 0)
    assert.equal(t, t:to({ memory_format = "preserve_format" }))
    assert.error_matches(function() t:to({ memory_format = "channels_last" }) end,
      "ember.to: memory_format 'channels_last' needs a 4-D tensor (N, C, H, W), got shape {3, 2}", 1, true)
    assert.error_matches(function() t:to("float64", { memory_format = "channels_last" }) end, "needs a 4-D", 1, true)
    assert.error_matches(function() t:to({ dtype = "float64", layout = 1 }) end, "unknown option 'layout'", 1, true)
    assert.error_matches(function() t:to("float64", { pinned = true }) end, "unknown option 'pinned'", 1, true)
  end)
end)

describe("ember.save of a module", function()
  it("raises and names state_dict, at the top level and nested", function()
    local path = os.tmpname()
    local m = nn.Sequential(nn.Linear(2, 2))
    assert.error_matches(function() ember.save(path, m) end, "is a module (nn.Sequential): save its parameters "
      .. "and buffers with m:state_dict()", 1, true)
    assert.error_matches(function() ember.save(path, { model = m, step = 1 }) end,
      "the value at model is a module", 1, true)
    ember.save(path, { model = m:state_dict(), step = 1 })
    local back = ember.load(path)
    H.same(back.model["1.weight"], m[1].weight:tolist(), 0)
    os.remove(path)
  end)
end)

describe("convolutions' positional arguments", function()
  it("ConvTranspose2d takes output_padding positionally or in the table after them", function()
    ember.manual_seed(3)
    local x = ember.randn({ 1, 4, 32, 32 })
    local a = nn.ConvTranspose2d(4, 2, 3, 2, 1, { output_padding = 1 })
    local b = nn.ConvTranspose2d(4, 2, 3, 2, 1, 1)
    assert.same({ 1, 2, 64, 64 }, a(x):shape())   -- (32 - 1) 2 - 2 + 3 + 1
    assert.same({ 1, 2, 64, 64 }, b(x):shape())
    assert.same({ 1, 2, 63, 63 }, nn.ConvTranspose2d(4, 2, 3, 2, 1)(x):shape())
    H.same(a(x), F.conv_transpose2d(x, a.weight, a.bias, { stride = 2, padding = 1, output_padding = 1 }):tolist())
    local c = nn.ConvTranspose2d(4, 2, 3, 1, 0, 0, 2, false, 2)   -- groups 2, no bias, dilation 2
    assert.equal(2, c.groups)
    assert.equal(2, c.dilation)
    assert.is_nil(c.bias)
    assert.same({ 4, 1, 3, 3 }, c.weight:shape())   -- {in, out / groups, k, k}
  end)

  it("Conv2d and Conv1d take dilation, groups and bias positionally or in the table", function()
    local x = ember.randn({ 1, 4, 10, 10 })
    local m = nn.Conv2d(4, 8, 3, 1, 0, { dilation = 2, bias = false })
    assert.is_nil(m.bias)
    assert.same({ 1, 8, 6, 6 }, m(x):shape())   -- 10 - 2 (3 - 1)
    H.same(m(x), F.conv2d(x, m.weight, nil, { dilation = 2 }):tolist())
    local p = nn.Conv2d(4, 8, 3, 2, 1, 1, 2, false)
    assert.equal(2, p.stride)
    assert.equal(1, p.padding)
    assert.equal(2, p.groups)
    assert.is_nil(p.bias)
    assert.same({ 8, 2, 3, 3 }, p.weight:shape())
    local q = nn.Conv1d(4, 8, 3, 1, 1, 1, 1, false)
    assert.is_nil(q.bias)
    assert.same({ 1, 8, 5 }, q(ember.randn({ 1, 4, 5 })):shape())
  end)

  it("raise for an option given twice, a value after the table, too many values or a bad option", function()
    assert.error_matches(function() nn.Conv2d(3, 8, 3, 2, { stride = 2 }) end,
      "ember.nn.Conv2d: stride is given twice", 1, true)
    assert.error_matches(function() nn.Conv2d(3, 8, 3, { bias = false }, 2) end,
      "argument 5 (2) comes after the options table", 1, true)
    assert.error_matches(function() nn.Conv2d(3, 8, 3, 1, 0, 1, 1, true, 7) end,
      "ember.nn.Conv2d: extra argument 9 (7): it takes 8 (in_channels, out_channels, kernel_size, stride, padding, "
      .. "dilation, groups, bias), then an options table", 1, true)
    assert.error_matches(function() nn.ConvTranspose2d(3, 8, 3, 1, 0, 0, 1, true, 1, 5) end,
      "ember.nn.ConvTranspose2d: extra argument 10 (5): it takes 9 (", 1, true)
    assert.error_matches(function() nn.Conv1d(3, 8, 3, { dilaton = 2 }) end, "unknown option 'dilaton'", 1, true)
    assert.error_matches(function() nn.Conv2d(3, 8, 3, { bias = 0 }) end, "bias must be a boolean", 1, true)
  end)
end)

describe("BatchNorm's momentum = false (PyTorch's None)", function()
  it("makes the running statistics the cumulative average of the batches' statistics", function()
    local bn = nn.BatchNorm1d(2, { momentum = false, dtype = "float64" })
    local batches = {
      { { 1, 10 }, { 3, 14 }, { 2, 9 } },
      { { 0, 1 }, { 4, 3 } },
      { { 5, 5 }, { 7, 6 }, { 6, 4 }, { 2, 1 } },
    }
    local means, vars = { 0, 0 }, { 0, 0 }
    for _, rows in ipairs(batches) do
      bn(ember.tensor(rows, { dtype = "float64" }))
      for c = 1, 2 do   -- the batch mean and unbiased variance by hand
        local s, n = 0, #rows
        for _, r in ipairs(rows) do s = s + r[c] end
        local mean, ss = s / n, 0
        for _, r in ipairs(rows) do ss = ss + (r[c] - mean) ^ 2 end
        means[c] = means[c] + mean / #batches
        vars[c] = vars[c] + ss / (n - 1) / #batches
      end
    end
    assert.equal(3, bn.num_batches_tracked:item())
    H.same(bn.running_mean, means, 1e-12)
    H.same(bn.running_var, vars, 1e-12)
    assert.matches("momentum=None", tostring(bn), 1, true)
  end)

  it("matches PyTorch's momentum=None (spec/fixtures/modules/gen.py)", function()
    local fx = H.read_json("spec/fixtures/modules/bn_momentum_none.json")
    local bn = nn.BatchNorm1d(2, { momentum = false, dtype = "float64" })
    local y
    for _, rows in ipairs(fx.batches) do y = bn(ember.tensor(rows, { dtype = "float64" })) end
    assert.equal(fx.num_batches_tracked, bn.num_batches_tracked:item())
    H.same(bn.running_mean, fx.running_mean, 1e-12)
    H.same(bn.running_var, fx.running_var, 1e-12)
    H.same(y, fx.last_output, 1e-10)
    bn:eval()
    H.same(bn(ember.tensor(fx.batches[1], { dtype = "float64" })), fx.eval_output, 1e-10)
  end)

  it("keeps 0.1 as the default and checks the value", function()
    local bn = nn.BatchNorm1d(1, { dtype = "float64" })
    bn(ember.tensor({ { 1 }, { 3 } }, { dtype = "float64" }))
    H.same(bn.running_mean, { 0.2 }, 1e-12)   -- 0.9 * 0 + 0.1 * 2
    assert.error_matches(function() nn.BatchNorm2d(2, { momentum = 2 }) end,
      "momentum must be a number in [0, 1], or false", 1, true)
    assert.error_matches(function() nn.BatchNorm2d(2, { affine = "no" }) end, "affine must be a boolean", 1, true)
  end)
end)

describe("Sequential and ModuleList", function()
  it("index from 1 (negative from the end), measure and iterate as Lua lists", function()
    local a, r, b = nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)
    local seq = nn.Sequential(a, r, b)
    assert.equal(3, #seq)
    assert.equal(3, seq:len())
    assert.equal(a, seq[1])
    assert.equal(b, seq[-1])
    assert.equal(r, seq[-2])
    assert.equal(a, seq:get(1))
    local seen = {}
    for i, m in ipairs(seq) do seen[i] = m end
    assert.same({ a, r, b }, seen)
    local count = 0
    for i = 1, #seq do count = count + (seq[i] and 1 or 0) end
    assert.equal(3, count)
    assert.error_matches(function() return seq[4] end, "index 4 is out of range: it has 3 entries", 1, true)
    assert.error_matches(function() return seq[0] end, "index 0 is out of range", 1, true)
  end)

  it("replace, append and pop entries, and parameters follow", function()
    local seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    local c = nn.Linear(4, 5)
    seq[#seq + 1] = c
    assert.equal(3, #seq)
    assert.same({ "1.weight", "1.bias", "3.weight", "3.bias" }, names(seq:named_parameters()))
    local d = nn.Linear(3, 4, { bias = false })
    seq[1] = d
    assert.same({ "1.weight", "3.weight", "3.bias" }, names(seq:named_parameters()))
    assert.same({ 1, 5 }, seq(ember.randn({ 1, 3 })):shape())
    seq[#seq] = nil
    assert.equal(2, #seq)
    assert.error_matches(function() seq[5] = nn.ReLU() end, "index 5 is out of range", 1, true)
    assert.error_matches(function() seq[3] = ember.zeros({ 1 }) end, "entry 3 must be a module", 1, true)
    -- an existing entry is Lua's own (raw) slot: a non-module put there
    -- raises at the next use
    seq[2] = "oops"
    assert.error_matches(function() seq:parameters() end, "entry 2 must be a module, got 'oops'", 1, true)
    assert.error_matches(function() seq(ember.randn({ 1, 3 })) end, "entry 2 must be a module", 1, true)
    assert.error_matches(function() nn.Sequential(nn.ReLU(), 5) end, "argument 2 is not a module", 1, true)
  end)

  it("number their children from 0 in PyTorch's names", function()
    local net = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.ModuleList({ nn.Linear(2, 1), nn.Linear(2, 1) }))
    assert.same({ "0.weight", "0.bias", "2.0.weight", "2.0.bias", "2.1.weight", "2.1.bias" },
      names(net:named_parameters({ torch_names = true })))
    assert.same({ "1.weight", "1.bias", "3.1.weight", "3.1.bias", "3.2.weight", "3.2.bias" },
      names(net:named_parameters()))
    local sd = net:state_dict({ torch_names = true })
    assert.equal(net[3][2].weight:data_ptr(), sd["2.1.weight"]:data_ptr())
    assert.error_matches(function() net:named_parameters({ torch = true }) end, "unknown option 'torch'", 1, true)
  end)

  it("give gradients by PyTorch's names", function()
    local net = nn.Sequential(nn.Linear(2, 1))
    ember.no_grad(function()
      net[1].weight:copy_(ember.tensor({ { 2, -1 } }))
      net[1].bias:fill_(0)
    end)
    local gm = GradManager():attach(net:parameters())
    gm:record()
    -- loss = (2 x1 - x2)^2 at x = (1, 1): d/dw = 2 (w.x) x = (2, 2), d/db = 2
    gm:backward(net(ember.tensor({ { 1, 1 } })):pow(2):sum())
    local grads = {}
    for name, p in net:named_parameters({ torch_names = true }) do grads[name] = p.grad:tolist() end
    assert.same({ { 2, 2 } }, grads["0.weight"])
    assert.same({ 2 }, grads["0.bias"])
  end)

  it("ModuleList holds modules without a forward of its own", function()
    local ml = nn.ModuleList({ nn.Linear(2, 2) })
    ml:append(nn.Linear(2, 3)):extend({ nn.Tanh() })
    assert.equal(3, #ml)
    assert.equal(4, #ml:parameters())
    local n = 0
    for _, m in ml:iter() do n = n + 1 assert.is_truthy(m) end
    assert.equal(3, n)
    assert.error_matches(function() ml:extend({ nn.ReLU(), "x" }) end, "entry 2 must be a module", 1, true)
    assert.equal(3, #ml)   -- nothing appended by the failed call
    assert.error_matches(function() ml(ember.zeros({ 1 })) end, "forward is not defined", 1, true)
  end)
end)

describe("ParameterList, ModuleDict and ParameterDict", function()
  it("ParameterList's tensors are parameters, named from 1 (PyTorch's from 0)", function()
    local pl = nn.ParameterList({ ember.ones({ 2 }), ember.zeros({ 3 }) })
    assert.equal(2, #pl)
    assert.same({ "1", "2" }, names(pl:named_parameters()))
    assert.same({ "0", "1" }, names(pl:named_parameters({ torch_names = true })))
    pl:append(ember.ones({ 1 }))
    assert.equal(3, #pl:parameters())
    assert.error_matches(function() pl:append(ember.ones({ 1 }, { dtype = "int64" })) end,
      "entry 4 must be a floating point tensor", 1, true)
    local Net = nn.Module:extend("Net")
    function Net:init() self.ps = nn.ParameterList({ ember.ones({ 2 }) }) end
    assert.same({ "ps.0" }, H.sorted_keys(Net():state_dict({ torch_names = true })))
  end)

  it("ModuleDict keeps insertion order, and keys must not be method names", function()
    local md = nn.ModuleDict({ { "enc", nn.Linear(2, 3) }, { "dec", nn.Linear(3, 2) } })
    assert.same({ "enc", "dec" }, md:keys())
    md.act = nn.ReLU()
    assert.equal(3, md:len())
    local order = {}
    for k, m in md:items() do order[#order + 1] = k assert.is_truthy(m) end
    assert.same({ "enc", "dec", "act" }, order)
    assert.same({ "enc.weight", "enc.bias", "dec.weight", "dec.bias" }, names(md:named_parameters()))
    assert.is_true(md:contains("dec"))
    local dec = md:pop("dec")
    assert.equal(2, #md:keys())
    assert.equal(dec.weight, dec.weight)
    assert.error_matches(function() md.keys = nn.ReLU() end, "key 'keys' is the name of a method", 1, true)
    assert.error_matches(function() md.x = ember.zeros({ 1 }) end, "entry 'x' must be a module", 1, true)
    assert.error_matches(function() md:pop("nope") end, "no entry 'nope'", 1, true)
    local sorted = nn.ModuleDict({ b = nn.ReLU(), a = nn.Tanh() })
    assert.same({ "a", "b" }, sorted:keys())
  end)

  it("ParameterDict's tensors are parameters by name", function()
    local pd = nn.ParameterDict({ scale = ember.ones({ 2 }) })
    pd.shift = ember.zeros({ 2 })
    assert.same({ "scale", "shift" }, names(pd:named_parameters()))
    assert.same({ "scale", "shift" }, H.sorted_keys(pd:state_dict()))
    assert.error_matches(function() pd.idx = ember.zeros({ 2 }, { dtype = "int64" }) end,
      "entry 'idx' must be a floating point tensor", 1, true)
  end)
end)

describe("buffers and plain tensor fields", function()
  it("a non-persistent buffer is converted but not saved", function()
    local Net = nn.Module:extend("Net")
    function Net:init()
      self.fc = nn.Linear(2, 2)
      self:register_buffer("mask", ember.tensor({ 0, -math.huge }), false)
      self:register_buffer("stat", ember.zeros({ 2 }))
    end
    local net = Net()
    assert.same({ "fc.bias", "fc.weight", "stat" }, H.sorted_keys(net:state_dict()))
    assert.same({ "mask", "stat" }, names(net:named_buffers()))
    assert.same({ "fc.weight", "fc.bias" }, names(net:named_parameters()))
    net:double()
    assert.equal("float64", net.mask.dtype)
    local fresh = Net()
    fresh:load_state_dict(net:state_dict())   -- strict: the mask is not expected
    assert.error_matches(function() net:register_buffer("m2", ember.zeros({ 1 }), "no") end,
      "persistent must be a boolean", 1, true)
  end)

  it("a tensor field that is not floating point stays a plain field", function()
    local Net = nn.Module:extend("Net")
    function Net:init()
      self.fc = nn.Linear(3, 3)
      self.mask = nn.causal_mask(3)                      -- bool
      self.index = ember.tensor({ 1, 2 }, { dtype = "int64" })
    end
    function Net:forward(x) return self.fc(x):masked_fill(self.mask, 0) end
    local net = Net()
    assert.same({ "fc.weight", "fc.bias" }, names(net:named_parameters()))
    assert.same({ "fc.bias", "fc.weight" }, H.sorted_keys(net:state_dict()))
    assert.equal("bool", net.mask.dtype)
    GradManager():attach(net:parameters())   -- only floating point tensors
    Net():load_state_dict(net:state_dict())
    net:double()
    assert.equal("bool", net.mask.dtype)
    assert.same({ 3, 3 }, net(ember.randn({ 3, 3 }, { dtype = "float64" })):shape())
  end)

  it("a parameter cannot become an integer tensor, and register_parameter checks its tensor", function()
    local m = nn.Linear(2, 2)
    assert.error_matches(function() m.weight = ember.zeros({ 2, 2 }, { dtype = "int64" }) end,
      "'weight' is a parameter, which must be floating point", 1, true)
    m.plain = 1
    m.plain = nil
    m.note = "text"
    m:register_parameter("note", ember.ones({ 1 }))   -- a plain field becomes a parameter
    m:register_parameter("note", nil)
    m:register_parameter("extra", ember.ones({ 2 }))
    assert.same({ "weight", "bias", "extra" }, names(m:named_parameters()))
    assert.error_matches(function() m:register_parameter("bad", ember.ones({ 2 }, { dtype = "int32" })) end,
      "register_parameter('bad') needs a floating point tensor", 1, true)
    assert.error_matches(function() m:register_parameter("a.b", ember.ones({ 2 })) end,
      "name must be a non-empty string without '.'", 1, true)
  end)
end)

describe("a module reused under two names", function()
  -- PyTorch 1.13's values from spec/fixtures/modules/gen_shared.py: one block
  -- (Linear then BatchNorm1d) held as both a and b
  local fx = H.read_json("spec/fixtures/modules/shared_module.json")
  local F64 = { dtype = "float64" }
  local Net = nn.Module:extend("SharedNet")
  function Net:init()
    local block = nn.Sequential(nn.Linear(3, 3, F64), nn.BatchNorm1d(3, F64))
    self.a = block
    self.mid = nn.Linear(3, 3, F64)
    self.b = block
    self.head = nn.Linear(3, 2, F64)
  end
  function Net:forward(x) return self.head(self.b(self.mid(self.a(x)):tanh())) end
  local function torch_state()
    local sd = {}
    for k, v in pairs(fx.state) do
      sd[k] = ember.tensor(v, { dtype = k:find("num_batches_tracked", 1, true) and "int64" or "float64" })
    end
    return sd
  end
  local function sorted(list) table.sort(list) return list end

  it("is in state_dict under each name, and named_parameters lists it once unless remove_duplicate = false", function()
    local net = Net()
    local keys = {}
    for k in pairs(net:state_dict({ torch_names = true })) do keys[#keys + 1] = k end
    assert.are.same(sorted(fx.state_keys), sorted(keys))
    local T = { torch_names = true }
    assert.are.same(fx.named_parameters, names(net:named_parameters(T)))
    assert.are.same(fx.named_buffers, names(net:named_buffers(T)))
    assert.are.same(fx.named_parameters_all, names(net:named_parameters({ torch_names = true, remove_duplicate = false })))
    assert.are.same(fx.named_buffers_all, names(net:named_buffers({ torch_names = true, remove_duplicate = false })))
    assert.equal(8, #net:parameters())   -- the tensors, each once
    -- both names hold the one tensor
    local sd = net:state_dict()
    assert.is_true(sd["a.1.weight"]:data_ptr() == sd["b.1.weight"]:data_ptr())
    assert.error_matches(function() net:named_parameters({ remove_duplicate = "no" }) end,
      "ember.nn.SharedNet:named_parameters: remove_duplicate must be a boolean, got 'no'", 1, true)
  end)

  it("loads PyTorch's state_dict, computes its output and gradients", function()
    local net = Net()
    net:load_state_dict(torch_state(), { torch_names = true })
    net:eval()
    local gm = GradManager():attach(net:parameters())
    gm:record()
    local y = net(ember.tensor(fx.x, F64))
    gm:backward((y * ember.tensor(fx.r, F64)):sum())
    H.same(y, fx.y, 1e-12)
    local n = 0
    for name, p in net:named_parameters({ torch_names = true }) do
      H.same(p.grad, fx.grad[name], 1e-12)
      n = n + 1
    end
    assert.equal(8, n)
    H.same(net.b[2].running_mean, fx.state["a.1.running_mean"], 0)
  end)

  it("needs every name when strict, as PyTorch does", function()
    local sd = torch_state()
    sd["b.0.weight"] = nil
    local net = Net()
    assert.error_matches(function() net:load_state_dict(sd, { torch_names = true }) end,
      "missing keys: b.0.weight", 1, true)
    local r = net:load_state_dict(sd, { torch_names = true, strict = false })
    assert.are.same({ "b.0.weight" }, r.missing_keys)
    H.same(net.a[1].weight, fx.state["a.0.weight"], 0)   -- a's name loaded the shared weight
    -- given two values, the later name (b, after a) wins, as PyTorch's copies in module order
    sd = torch_state()
    sd["b.0.weight"] = sd["a.0.weight"] * 2
    net:load_state_dict(sd, { torch_names = true })
    H.same(net.a[1].weight, (ember.tensor(fx.state["a.0.weight"], F64) * 2):tolist(), 0)
  end)
end)
