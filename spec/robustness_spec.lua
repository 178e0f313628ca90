-- Bad input never crashes: every Tensor method and ember function is called
-- with odd arguments (nil, strings, absurd sizes, freed or empty tensors,
-- NaN); each call either works or raises a Lua error, and everything stays
-- usable afterwards. Under the ASan + UBSan library this also checks memory.
local H = require("helpers")
local ember = H.ember

describe("bad input", function()
  it("gives Lua errors, never a crash, and leaves ember usable", function()
    local T = ember.Tensor
    local freed = ember.ones({ 2 })
    freed:free()
    local vals = { nil, 0, -1, 1.5, 1e12, 2 ^ 53, "x", true, {}, { 1e12, 1e12 }, { -1 }, { 2, 3 },
      ember.tensor({ 1, 2, 3 }), ember.tensor({ 1 }, { dtype = "int64" }), ember.zeros({ 0, 3 }),
      ember.tensor({ { 1, 2 }, { 3, 4 } }):t(), freed, 0 / 0 }
    local skip = { free = true, manual_seed = true, set_num_threads = true, empty_cache = true,
      set_grad_enabled = true, help = true }   -- help prints
    local calls, errors = 0, 0
    local function try(f, ...)
      calls = calls + 1
      local ok, err = pcall(f, ...)
      if not ok then
        errors = errors + 1
        assert.is_true(type(err) == "string", "error is not a string")
      end
    end
    for name, f in pairs(T) do
      if type(f) == "function" and not name:match("^__") and not skip[name] then
        for i = 1, #vals + 1 do
          local base = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
          try(f, base, vals[i], vals[(i % #vals) + 1])
        end
      end
    end
    for name, f in pairs(ember) do
      if type(f) == "function" and not name:match("^_") and not skip[name] then
        for i = 1, #vals + 1 do try(f, vals[i], vals[(i * 7) % #vals + 1]) end
      end
    end
    assert.is_true(calls > 1000)
    assert.is_true(errors > 100)
    ember.set_grad_enabled(true)
    H.same(ember.tensor({ 1, 2 }) + 1, { 2, 3 })
  end)
end)
