-- ember.errors: every error names its call and points at the user's line,
-- however deep inside ember it is raised; a method called with '.' says so.
local ember = require("ember")
local errors = require("ember.errors")
local nn, F = ember.nn, ember.nn.functional

-- the error fn raises, and the line of this file it names (the calls below
-- are not tail calls: Lua keeps no frame of a function that tail-called)
local function raised(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok)
  return err, tonumber(err:match("^spec/errors_spec%.lua:(%d+): "))
end
local function here() return debug.getinfo(2, "l").currentline end

describe("ember.errors", function()
  it("points an op's error at the user's line, with shapes as {2, 3}", function()
    local a, b = ember.ones({ 2, 3 }), ember.ones({ 4 })
    local err, line = raised(function() return a + b end); local want = here()
    assert.are.equal(want, line, err)
    assert.truthy(err:find("ember.add: shapes {2, 3} and {4} cannot be broadcast", 1, true), err)
  end)

  it("points past nested ember frames: a loss, a module, the backward engine", function()
    local logits = ember.randn({ 2, 3 })
    local labels = ember.tensor({ 4, 1 }, { dtype = "int64" })
    local err, line = raised(function() local l = F.cross_entropy(logits, labels); return l end)
    assert.are.equal(here() - 1, line, err)
    assert.truthy(err:find("^[^ ]+ ember%.nn%.functional%.cross_entropy: "), err)

    local lin = nn.Linear(3, 2)
    err, line = raised(function() local y = lin(ember.ones({ 2, 4 })); return y end); local want = here()
    assert.are.equal(want, line, err)
    assert.truthy(err:find("ember.", 1, true), err)

    local gm = ember.autodiff.GradManager()
    err, line = raised(function() gm:backward(ember.ones({ 2 })) end); want = here()
    assert.are.equal(want, line, err)
    assert.truthy(err:find("ember.GradManager.backward: no computation history", 1, true), err)
  end)

  it("points a user-defined module's forward error at the forward's line", function()
    local M = nn.Module:extend("M")
    local bad_line
    function M:forward(x) bad_line = here() + 1
      local y = x:matmul(ember.ones({ 5, 5 }))
      return y
    end
    local err, line = raised(function() local y = M()(ember.ones({ 2, 3 })); return y end)
    assert.are.equal(bad_line, line, err)
    assert.truthy(err:find("ember.matmul: ", 1, true), err)
  end)

  it("says when a method was called with '.' instead of ':'", function()
    local x, y = ember.ones({ 2 }), ember.ones({ 2 })
    local err, line = raised(function() local s = x.sum(); return s end); local want = here()
    assert.are.equal(want, line, err)
    assert.truthy(err:find("ember.sum: expected a tensor as argument 1, got nil (a method called with '.': "
      .. "write x:sum(...), not x.sum(...))", 1, true), err)
    err = raised(function() local s = x.add(y); return s end)
    assert.truthy(err:find("ember.add: expected a tensor or a number as argument 2, got nil (a method called "
      .. "with '.': write x:add(...), not x.add(...))", 1, true), err)
    -- a ':' call missing its argument gets no such hint
    err = raised(function() local s = x:add(); return s end)
    assert.truthy(err:find("argument 2, got nil", 1, true) and not err:find("called with", 1, true), err)
  end)

  it("gives code outside ember the same helper", function()
    local err, line = raised(function() errors.fail("mylib.Thing", "size must be positive, got -1") end)
    assert.are.equal(here() - 1, line, err)
    assert.truthy(err:find("ember.mylib.Thing: size must be positive, got -1", 1, true), err)
    assert.are.equal("{2, 3}", errors.shape({ 2, 3 }))
    assert.are.equal("{4}", errors.shape(ember.ones({ 4 })))
    assert.are.equal(0, errors.check(0))
  end)

  it("points io, plot, progress, distributed and layer errors at the user's line", function()
    local cases = {
      { function() local r = ember.save(7, {}); return r end, "ember.save: expected a file path" },
      { function() local r = ember.load("/nonexistent/x.safetensors"); return r end, "ember.load: " },
      { function() local r = ember.plot.svg({}); return r end, "ember.plot.svg: " },
      { function() local r = ember.progress.new("x"); return r end, "ember.progress" },
      { function() local r = ember.distributed.all_reduce("x"); return r end,
        "ember.distributed.all_reduce: expected a tensor" },
      { function() local r = F.conv1d(ember.ones({ 1, 1, 4 }), ember.ones({ 1, 2, 3 })); return r end,
        "ember.nn.functional.conv1d: " },
      { function() local r = nn.init.xavier_uniform_(ember.ones({ 3 })); return r end, "ember.nn.init" },
    }
    for _, c in ipairs(cases) do
      local err, line = raised(c[1])
      assert.truthy(line, err)
      assert.truthy(err:find(c[2], 1, true), err)
    end
  end)

  it("leaves everything usable after an error", function()
    local a = ember.ones({ 2, 3 })
    raised(function() return a + ember.ones({ 4 }) end)
    assert.are.same({ { 2, 2, 2 }, { 2, 2, 2 } }, (a + a):tolist())
  end)
end)
