-- The API reference (lua/ember/doc/, docs/api.md) and help: every public
-- name has an entry, every entry names something public, docs/api.md is the
-- generated text, help finds entries by value and by name; and the
-- did-you-mean errors of ember, ember.nn, ember.nn.functional, ember.optim.
local H = require("helpers")
local ember = H.ember
local doc = require("ember.doc")

describe("the API reference", function()
  it("documents every public name", function()
    local missing = doc.missing(ember)
    local lines = {}
    for i, name in ipairs(missing) do lines[i] = ("  %-40s -> %s"):format(name, doc.where(name)) end
    assert(#missing == 0, ("%d public name(s) have no documentation. Add an entry for each to the "
      .. "file shown, or to a section that fits it better (a heading \"### `name(args)`\" and a "
      .. "sentence or two; the format is at the top of lua/ember/doc/init.lua), then run "
      .. "`luajit scripts/api_doc.lua` to rewrite docs/api.md:\n%s")
      :format(#missing, table.concat(lines, "\n")))
  end)

  it("documents only names that exist", function()
    local public, stale = {}, {}
    for _, p in ipairs(doc.public(ember)) do public[p[1]] = true end
    for name, d in pairs(doc.docs().by_name) do
      local field = name:match("^Tensor%.") and d.sigs
      if not public[name] and not field and not d.entries then stale[#stale + 1] = name end
    end
    table.sort(stale)
    assert(#stale == 0, "entries for names ember does not have: " .. table.concat(stale, ", "))
  end)

  it("is what docs/api.md holds", function()
    local f = assert(io.open("docs/api.md", "rb"))
    local text = f:read("*a")
    f:close()
    assert(text == doc.markdown(), "docs/api.md is out of date: run `luajit scripts/api_doc.lua`")
  end)

  it("says where a missing name's entry goes", function()
    assert.are.equal("lua/ember/doc/nn.lua", doc.where("ember.nn.Bilinear"))
    assert.are.equal("lua/ember/doc/functional.lua", doc.where("ember.nn.functional.softplus"))
    assert.are.equal("lua/ember/doc/optim.lua", doc.where("ember.optim.lr_scheduler.OneCycleLR"))
    assert.are.equal("lua/ember/doc/tensor.lua", doc.where("Tensor:log1p"))
    assert.are.equal("lua/ember/doc/autodiff.lua", doc.where("GradManager:frobnicate"))
    assert.are.equal("lua/ember/doc/tensor.lua", doc.where("ember.get_rng_state"))
  end)

  it("is referred to, not ../shared, by the README and docs/", function()
    for _, path in ipairs({ "README.md", "docs/api.md", "docs/design.md", "docs/cli_embed.md",
      "docs/nn.md", "docs/optim.md", "docs/io_data.md", "docs/autodiff.md", "docs/dtypes.md",
      "docs/indexing.md", "docs/distributed.md", "docs/frame_loop.md", "docs/hardening.md" }) do
      local f = io.open(path, "rb")
      if f then
        local text = f:read("*a")
        f:close()
        assert(not text:find("../shared", 1, true), path .. " refers to ../shared")
      end
    end
  end)
end)

describe("ember.help", function()
  local function first_line(s) return s:match("^[^\n]*") end

  it("finds an entry from the value", function()
    assert.are.equal("ember.nn.Linear(in_features, out_features, opts?)",
      first_line(doc.text(ember.nn.Linear)))
    assert.are.equal("Tensor:add(b)", first_line(doc.text(ember.add)))
    assert.are.equal("ember.optim.SGD(params, opts?)", first_line(doc.text(ember.optim.SGD)))
    assert.matches("^ember.Tensor: tensors", doc.text(ember.ones({ 2 })))
    assert.matches("^ember.nn.Linear%(", doc.text(ember.nn.Linear(2, 3)))   -- its class
    local opt = ember.optim.Adam({ ember.ones({ 2 }) })
    assert.matches("^ember.optim.Adam%(", doc.text(opt))
    assert.matches("^ember.autodiff.GradManager: recording", doc.text(ember.autodiff.GradManager()))
    assert.are.equal("ember.autodiff.FALLBACK", first_line(doc.text(ember.autodiff.FALLBACK)))
    local nn_text = doc.text(ember.nn)
    assert.matches("^ember.nn: layers", nn_text)
    assert.matches("ember.nn.Conv2d", nn_text, 1, true)
  end)

  it("finds an entry from a name, a short form or a method", function()
    for _, name in ipairs({ "ember.nn.functional.linear", "F.linear" }) do
      assert.are.equal("ember.nn.functional.linear(x, w, b?)", first_line(doc.text(name)))
    end
    assert.are.equal("ember.zeros(shape, opts?)", first_line(doc.text("zeros")))
    assert.are.equal("Tensor:sum(dim?, keepdim?)", first_line(doc.text("t:sum")))
    assert.are.equal("GradManager:backward(y, dy?)", first_line(doc.text("gm:backward")))
    assert.matches("(docs/api.md, ember.nn: layers)", doc.text("nn.Linear"), 1, true)
    assert.matches("^ember.nn.functional: layers as functions", doc.text("F"))
    assert.matches("^ember.optim: optimizers", doc.text("optim"))
  end)

  it("prints the signature and the text of the entry", function()
    local text = doc.text(ember.optim.lr_scheduler.StepLR)
    assert.matches("StepLR(opt, {step_size, gamma = 0.1, last_epoch = -1})", text, 1, true)
    assert.matches("\n  `lr = base_lr * gamma ^ floor(epoch / step_size)`.\n", text, 1, true)
  end)

  it("suggests names for an unknown one, and says what it cannot document", function()
    assert.are.equal("ember.help: no entry for 'ember.nn.Linaer' (did you mean ember.nn.Linear?)",
      doc.text("ember.nn.Linaer"))
    assert.are.equal("ember.help: no entry for 'qqqqqqqq'", doc.text("qqqqqqqq"))
    assert.are.equal("ember.help: no entry documents this number (42)", doc.text(42))
    assert.matches("^ember.help: no entry documents this function", doc.text(print))
    assert.matches("The sections", doc.text(nil), 1, true)
  end)

  it("prints the text help(x) gives", function()
    local out = {}
    local write = io.write
    io.write = function(...) for _, s in ipairs({ ... }) do out[#out + 1] = s end end
    local ok, err = pcall(ember.help, ember.nn.ReLU)
    io.write = write
    assert(ok, err)
    assert.matches("^ember.nn.ReLU%(%)", table.concat(out))
  end)
end)

describe("misspelt names", function()
  local function err(f)
    local ok, e = pcall(f)
    assert.is_false(ok)
    return e
  end

  local function raises(msg, f) assert.matches(msg, err(f), 1, true) end

  it("of ember, ember.nn, F and ember.optim raise with the closest names", function()
    assert.matches("doc_spec.lua:%d+: ember.nn: no field 'Linaer' %(did you mean Linear%?%)$",
      err(function() return ember.nn.Linaer end))
    raises("ember: no field 'zeross' (did you mean zeros?)", function() return ember.zeross end)
    raises("ember.nn.functional: no field 'cross_entropyy' (did you mean cross_entropy?)",
      function() return ember.nn.functional.cross_entropyy end)
    raises("ember.optim: no field 'Adma' (did you mean Adam?)",
      function() return ember.optim.Adma end)
    raises("ember.optim: no field 'sgd' (did you mean SGD?)", function() return ember.optim.sgd end)
  end)

  it("of ember point into the modules when the name lives there", function()
    raises("ember: no field 'Linear' (did you mean ember.nn.Linear?)",
      function() return ember.Linear end)
    raises("ember: no field 'cross_entropy' (did you mean ember.nn.functional.cross_entropy?)",
      function() return ember.cross_entropy end)
  end)

  it("say only what is missing when nothing is close", function()
    assert.matches("ember.nn: no field 'qqqqqqqq'$", err(function() return ember.nn.qqqqqqqq end))
  end)

  it("leave the optional modules, private names and rawget probe-able", function()
    assert.has_no.errors(function() return ember.distributed, ember.cuda end)
    assert.is_nil(ember._no_such_private_field)
    assert.is_nil(rawget(ember, "randperm_or_not"))
    assert.is_nil(ember.nn[1])
  end)

  it("come after an __index the table already has", function()
    local suggest = require("ember.suggest")
    local function lazy(_, k) if k == "lazy" then return 2 end end
    local t = suggest.guard(setmetatable({ known = 1 }, { __index = lazy }), "ember.lazy_module")
    assert.are.equal(2, t.lazy)
    raises("ember.lazy_module: no field 'knwon' (did you mean known?)",
      function() return t.knwon end)
  end)

  it("suggest by prefix and by edit distance", function()
    local suggest = require("ember.suggest")
    assert.are.equal(1, suggest.distance("Linaer", "Linear"))    -- a swap
    assert.are.equal(0, suggest.distance("linear", "Linear"))    -- case
    assert.are.equal(3, suggest.distance("kitten", "sitting"))
    assert.are.same({ "Linear" }, suggest.closest("Lin", { "Conv2d", "Linear", "LayerNorm" }))
    assert.are.same({}, suggest.closest("zz", { "Conv2d", "Linear" }))
  end)
end)
