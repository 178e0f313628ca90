-- The factories' arguments (lua/ember/factories.lua): every form each one
-- documents works and gives what the other forms give, and no argument is
-- silently ignored: a value after the options table, a non-number among
-- the sizes, a shape table holding anything besides its sizes and an option
-- a factory does not take raise naming the call and the value, leaving
-- ember usable. spec/arguments_spec.lua walks the same names with the other
-- public functions; this file checks the words and the forms.
local H = require("helpers")
local ember = H.ember

local function raises(fn, ...)
  local ok, err = pcall(fn)
  assert(not ok, "no error")
  err = tostring(err)
  for _, want in ipairs({ ... }) do
    assert(err:find(want, 1, true), ("expected %q in the error: %s"):format(want, err))
  end
  -- raised at the caller's line, not inside ember
  assert.matches("factories_spec.lua:%d+: ember%.", err)
  return err
end

describe("the shape factories", function()
  local SHAPED = { "zeros", "ones", "empty", "rand", "randn" }

  it("take a shape table or the sizes one by one, each with an options table", function()
    for _, name in ipairs(SHAPED) do
      local f = ember[name]
      assert.are.same({ 2, 3 }, f({ 2, 3 }):shape())
      assert.are.same({ 2, 3 }, f(2, 3):shape())
      assert.are.same({ 4 }, f(4):shape())
      assert.are.same({}, f({}):shape())
      local a, b = f({ 2, 3 }, { dtype = "float64" }), f(2, 3, { dtype = "float64" })
      assert.are.same({ "float64", { 2, 3 } }, { a.dtype, a:shape() })
      assert.are.same({ "float64", { 2, 3 } }, { b.dtype, b:shape() })
      -- an empty options table and trailing nils are no values
      assert.are.equal("float32", f({ 2 }, {}).dtype)
      assert.are.equal("float32", f(2, {}).dtype)
      assert.are.same({ 2 }, f({ 2 }, nil, nil):shape())
      assert.are.same({ 2, 3 }, f(2, 3, nil):shape())
    end
    H.same(ember.zeros(2, 2, { dtype = "int32" }), { { 0, 0 }, { 0, 0 } })
    H.same(ember.ones(3, { dtype = "int64" }), { 1, 1, 1 })
  end)

  it("draw the same numbers from a generator in either form", function()
    for _, name in ipairs({ "rand", "randn" }) do
      local a = ember[name]({ 3, 2 }, { generator = ember.Generator(7), dtype = "float64" })
      local b = ember[name](3, 2, { generator = ember.Generator(7), dtype = "float64" })
      assert.are.same(a:tolist(), b:tolist())
      -- and the generator's numbers, not the default one's
      local c = ember[name]({ 3, 2 }, { generator = ember.Generator(8), dtype = "float64" })
      assert.are_not.same(a:tolist(), c:tolist())
    end
  end)

  it("raise for a value after the options table", function()
    for _, name in ipairs(SHAPED) do
      local f = ember[name]
      raises(function() f({ 2, 3 }, {}, 5) end, "ember." .. name .. ": extra argument 3 (5): it takes 2 (shape, opts)")
      raises(function() f({ 2, 3 }, { dtype = "float64" }, "x") end, "extra argument 3 ('x')")
      raises(function() f({ 2, 3 }, nil, 5) end, "extra argument 3 (5)")
      raises(function() f({ 2, 3 }, {}, nil, true) end, "extra argument 4 (true)")
      raises(function() f(2, 3, {}, 5) end,
        "ember." .. name .. ": extra argument 4 (5): it takes 2 (size1, size2), then an options table")
      raises(function() f(2, {}, {}) end, "extra argument 3 (a table): it takes 1 (size1), then an options table")
    end
  end)

  it("raise for a second argument that is no options table", function()
    for _, name in ipairs(SHAPED) do
      local f = ember[name]
      raises(function() f({ 2, 3 }, 5) end, "ember." .. name .. ": expected an options table as argument 2, got 5")
      raises(function() f({ 2, 3 }, "float64") end, "expected an options table as argument 2, got 'float64'")
      raises(function() f({ 2, 3 }, ember.zeros({ 2 })) end, "expected an options table as argument 2, got a tensor")
      raises(function() f({ 2, 3 }, false) end, "expected an options table as argument 2, got false")
    end
  end)

  it("raise for a non-number among the sizes, nil included", function()
    for _, name in ipairs(SHAPED) do
      local f = ember[name]
      raises(function() f(2, nil, 3) end, "ember." .. name .. ": bad size nil at position 2 of the shape")
      raises(function() f(2, "3") end, "bad size '3' at position 2 of the shape")
      raises(function() f(2, 3, true) end, "bad size true at position 3 of the shape")
      raises(function() f(2, ember.ones({ 1 })) end, "bad size a tensor at position 2 of the shape")
      raises(function() f(2, 3, nil, { dtype = "float64" }) end, "bad size nil at position 3 of the shape")
      raises(function() f(2, 1.5) end, "bad size 1.5 at position 2 of the shape")
      raises(function() f("3") end, "ember." .. name .. ": expected a shape (a table {2, 3} or sizes 2, 3), got '3'")
      raises(function() f() end, "expected a shape (a table {2, 3} or sizes 2, 3), got nil")
      raises(function() f(ember.ones({ 2 })) end, "expected a shape, got a tensor (ember." .. name .. "_like(t)")
    end
  end)

  it("raise for a shape table holding anything besides its sizes", function()
    for _, name in ipairs(SHAPED) do
      local f = ember[name]
      raises(function() f({ 2, 3, dtype = "float64" }) end,
        "ember." .. name .. ": the shape table holds dtype = 'float64' besides its 2 sizes")
      raises(function() f({ dtype = "float64" }) end, "holds dtype = 'float64' besides its 0 sizes")
      local holed = { 2 }
      holed[3] = 4   -- {2, nil, 4}: # may read 1 or 3
      local ok, err = pcall(f, holed)
      assert.is_false(ok)
      assert(err:find("bad size nil at position 2", 1, true) or err:find("holds [3] = 4 besides its 1 sizes", 1, true),
        err)
    end
  end)

  it("raise for an option they do not take, naming those they do", function()
    for _, name in ipairs({ "zeros", "ones", "empty" }) do
      raises(function() ember[name]({ 2 }, { requires_grad = true }) end,
        "ember." .. name .. ": unknown option 'requires_grad' (known: device, dtype)")
      raises(function() ember[name](2, { dtype = "float64", generator = ember.Generator(1) }) end,
        "unknown option 'generator' (known: device, dtype)")
    end
    for _, name in ipairs({ "rand", "randn" }) do
      raises(function() ember[name]({ 2 }, { pin_memory = true }) end,
        "ember." .. name .. ": unknown option 'pin_memory' (known: device, dtype, generator)")
      raises(function() ember[name](2, { generator = ember.Generator(1), seed = 3 }) end, "unknown option 'seed'")
      -- every key counts, the fourth of four as the first
      local all = { dtype = "float64", device = "cpu", generator = ember.Generator(1) }
      assert.are.equal("float64", ember[name]({ 2 }, all).dtype)
      all.extra = 1
      raises(function() ember[name]({ 2 }, all) end, "unknown option 'extra'")
    end
    raises(function() ember.zeros({ 2 }, { dtype = "float64", device = "cpu", generator = 1 }) end,
      "unknown option 'generator'")
    raises(function() ember.zeros({ 2 }, { 3 }) end, "ember.zeros: unknown option '1' (known: device, dtype)")
  end)

  it("leave ember usable after an error", function()
    pcall(ember.zeros, { 2 }, {}, 5)
    pcall(ember.rand, 2, nil, 3)
    H.same(ember.zeros(2) + 1, { 1, 1 })
  end)
end)

describe("ember.tensor", function()
  it("converts a tensor it copies to opts.dtype and opts.device", function()
    local t = ember.tensor({ 1.5, -2.5 })
    local d = ember.tensor(t, { dtype = "float64" })
    assert.are.equal("float64", d.dtype)
    assert.are.same({ 1.5, -2.5 }, d:tolist())
    local i = ember.tensor(t, { dtype = "int64" })
    assert.are.same({ 1, -2 }, i:tolist())
    -- always a copy: writing to it leaves t as it was
    local same = ember.tensor(t, { dtype = "float32", device = "cpu" })
    same:fill_(0)
    assert.are.same({ 1.5, -2.5 }, t:tolist())
    local c = ember.tensor(t, {})
    c:fill_(0)
    assert.are.same({ 1.5, -2.5 }, t:tolist())
  end)

  it("raises for an unknown option or options of another type", function()
    raises(function() ember.tensor({ 1, 2 }, { requires_grad = true }) end,
      "ember.tensor: unknown option 'requires_grad' (known: device, dtype)")
    raises(function() ember.tensor(ember.ones({ 2 }), { bogus = 1 }) end, "unknown option 'bogus'")
    raises(function() ember.tensor({ 1, 2 }, "float64") end,
      "ember.tensor: expected an options table as argument 2, got 'float64'")
    raises(function() ember.tensor(ember.ones({ 2 }), { dtype = "float13" }) end, "ember.tensor: unknown dtype 'float13'")
    raises(function() ember.tensor({ 1 }, {}, 3) end, "ember.tensor: extra argument 3 (3)")
  end)
end)

describe("full and the _like factories", function()
  local t = ember.tensor({ { 1, 2, 3 } }, { dtype = "float64" })

  it("keep t's shape, dtype and device unless opts says otherwise", function()
    for _, name in ipairs({ "zeros_like", "ones_like", "empty_like", "rand_like", "randn_like" }) do
      local a = ember[name](t)
      assert.are.same({ "float64", { 1, 3 } }, { a.dtype, a:shape() })
      local b = ember[name](t, { dtype = "float32" })
      assert.are.same({ "float32", { 1, 3 } }, { b.dtype, b:shape() })
    end
    H.same(ember.full_like(t, 2.5), { { 2.5, 2.5, 2.5 } })
    H.same(ember.full_like(t, true), { { 1, 1, 1 } })
    assert.are.equal("float64", ember.full_like(t, true).dtype)
    assert.are.equal("int32", ember.full_like(t, 4, { dtype = "int32" }).dtype)
    -- rand_like draws from the generator given
    assert.are.same(ember.rand_like(t, { generator = ember.Generator(3) }):tolist(),
      ember.rand({ 1, 3 }, { generator = ember.Generator(3), dtype = "float64" }):tolist())
  end)

  it("raise for an unknown option, a bad fill value or no tensor", function()
    for _, name in ipairs({ "zeros_like", "ones_like", "empty_like" }) do
      raises(function() ember[name](t, { requires_grad = true }) end,
        "ember." .. name .. ": unknown option 'requires_grad' (known: device, dtype, memory_format)")
      raises(function() ember[name]({ 1, 2 }) end, "ember." .. name .. ": expected a tensor as argument 1, got table")
    end
    for _, name in ipairs({ "rand_like", "randn_like" }) do
      raises(function() ember[name](t, { bogus = 1 }) end,
        "ember." .. name .. ": unknown option 'bogus' (known: device, dtype, generator)")
      raises(function() ember[name](5) end, "ember." .. name .. ": expected a tensor as argument 1, got number")
    end
    raises(function() ember.full_like(t, 1, { bogus = 1 }) end, "ember.full_like: unknown option 'bogus'")
    raises(function() ember.full_like(t, "a") end,
      "ember.full_like: expected a number or a boolean fill value as argument 2, got 'a'")
    raises(function() ember.full({ 2 }, 1, { bogus = 1 }) end, "ember.full: unknown option 'bogus' (known: device, dtype)")
    raises(function() ember.full({ 2 }, 1, 5) end, "ember.full: expected an options table as argument 3, got 5")
    raises(function() ember.full({ 2 }, nil) end, "ember.full: expected a number or a boolean fill value as argument 2")
    H.same(ember.full({ 2 }, true), { true, true })
  end)
end)

describe("arange, linspace, eye, randint and randperm", function()
  it("take every documented form", function()
    H.same(ember.arange(4, { dtype = "float64" }), { 0, 1, 2, 3 })
    assert.are.equal("float64", ember.arange(4, { dtype = "float64" }).dtype)
    H.same(ember.arange(2, 5, { dtype = "int32" }), { 2, 3, 4 })
    assert.are.equal("int32", ember.arange(2, 5, { dtype = "int32" }).dtype)
    H.same(ember.arange(1, 8, 3, { dtype = "float64" }), { 1, 4, 7 })
    H.same(ember.linspace(0, 1, 3, { dtype = "float64" }), { 0, 0.5, 1 })
    H.same(ember.eye(2, { dtype = "int64" }), { { 1, 0 }, { 0, 1 } })
    H.same(ember.eye(2, 3, { dtype = "int64" }), { { 1, 0, 0 }, { 0, 1, 0 } })
    assert.are.same(ember.randint(10, { 6 }, { generator = ember.Generator(5) }):tolist(),
      ember.randint(0, 10, { 6 }, { generator = ember.Generator(5) }):tolist())
    local p = ember.randperm(6, { dtype = "int32", generator = ember.Generator(2) })
    assert.are.equal("int32", p.dtype)
    local seen = p:tolist()
    table.sort(seen)
    assert.are.same({ 1, 2, 3, 4, 5, 6 }, seen)
  end)

  it("raise for a value after the options table", function()
    raises(function() ember.arange(5, {}, 3) end, "ember.arange: extra argument 3 (3): it takes 2 (n, opts)")
    raises(function() ember.arange(5, {}, nil, 4) end, "ember.arange: extra argument 4 (4): it takes 2 (n, opts)")
    raises(function() ember.arange(1, 5, {}, 2) end, "ember.arange: extra argument 4 (2): it takes 3 (a, b, opts)")
    raises(function() ember.arange(1, 5, 1, {}, 2) end, "ember.arange: extra argument 5 (2): it takes 4 (a, b, step, opts)")
    raises(function() ember.eye(3, {}, 5) end, "ember.eye: extra argument 3 (5): it takes 2 (n, opts)")
    raises(function() ember.randint(10, { 4 }, {}, 5) end,
      "ember.randint: extra argument 4 (5): it takes 3 (high, shape, opts)")
    raises(function() ember.randperm(4, {}, 1) end, "ember.randperm: extra argument 3 (1)")
    raises(function() ember.linspace(0, 1, 3, {}, 1) end, "ember.linspace: extra argument 5 (1)")
  end)

  it("raise naming a missing or non-number bound, before reaching C", function()
    raises(function() ember.arange(nil) end, "ember.arange: expected a number as argument 1, got nil")
    raises(function() ember.arange(nil, 5) end, "ember.arange: expected a number as argument 1, got nil")
    raises(function() ember.arange(1, nil, 2) end, "ember.arange: expected a number as argument 2, got nil")
    raises(function() ember.arange(1, 5, "2") end, "ember.arange: expected a number as argument 3, got string")
    raises(function() ember.arange(1, "5") end, "ember.arange: expected a number as argument 2, got string")
    raises(function() ember.linspace(nil, 1, 3) end, "ember.linspace: expected a number as argument 1, got nil")
    raises(function() ember.linspace(0, 1, 2.5) end,
      "ember.linspace: expected an integer count of steps as argument 3, got 2.5")
    raises(function() ember.eye("3") end, "ember.eye: expected integer sizes, got n = '3', m = nil")
    raises(function() ember.randperm(-1) end, "ember.randperm: expected a non-negative integer n, got -1")
  end)

  it("raise for an option they do not take", function()
    raises(function() ember.arange(5, { bogus = 1 }) end, "ember.arange: unknown option 'bogus' (known: device, dtype)")
    raises(function() ember.arange(0, 5, 1, { generator = ember.Generator(1) }) end, "unknown option 'generator'")
    raises(function() ember.linspace(0, 1, 5, { bogus = 1 }) end, "ember.linspace: unknown option 'bogus'")
    raises(function() ember.eye(3, { bogus = 1 }) end, "ember.eye: unknown option 'bogus'")
    raises(function() ember.eye(3, 3, { bogus = 1 }) end, "ember.eye: unknown option 'bogus'")
    raises(function() ember.randint(10, { 4 }, { bogus = 1 }) end,
      "ember.randint: unknown option 'bogus' (known: device, dtype, generator)")
    raises(function() ember.randint(0, 10, { 4 }, { bogus = 1 }) end, "ember.randint: unknown option 'bogus'")
    raises(function() ember.randperm(4, { bogus = 1 }) end,
      "ember.randperm: unknown option 'bogus' (known: device, dtype, generator)")
    raises(function() ember.randperm(4, 5) end, "ember.randperm: expected an options table as argument 2, got 5")
  end)
end)

describe("set_rng_state", function()
  it("raises for a key besides seed and offset, and restores a state", function()
    local s = ember.get_rng_state()
    raises(function() ember.set_rng_state({ seed = s.seed, offset = s.offset, bogus = 1 }) end,
      "ember.set_rng_state: unknown key bogus = 1 in the state")
    local a = ember.rand({ 3 }):tolist()
    ember.set_rng_state(s)
    assert.are.same(a, ember.rand({ 3 }):tolist())
  end)
end)
