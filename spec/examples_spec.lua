-- The quick examples run end to end and print what they promise. (The
-- training examples take minutes and run in the main job, not here.)
local function run(script)
  local p = assert(io.popen("luajit " .. script .. " 2>&1; echo \"exit=$?\""))
  local out = p:read("*a")
  p:close()
  return out
end

describe("examples", function()
  it("higher_order.lua gets 18 for d2/dx2 of x^3 at 3 and a Hessian-vector product", function()
    local out = run("examples/higher_order.lua")
    assert.truthy(out:find("first derivative 27, second derivative 18", 1, true), out)
    assert.truthy(out:find("grad(grad(x^3)) at 3 = 18", 1, true), out)
    local err = tonumber(out:match("finite differences| = ([%d%.e%-+]+)"))
    assert.is_true(err ~= nil and err < 1e-6, out)
    assert.truthy(out:find("exit=0", 1, true), out)
  end)

  it("custom_grad.lua checks its rules", function()
    local out = run("examples/custom_grad.lua")
    assert.truthy(out:find("gradcheck softplus:\ttrue", 1, true), out)
    assert.truthy(out:find("through the Lua rule (1 call)", 1, true), out)
    assert.truthy(out:find("tensor([0., 1., 1., 1., 0.]", 1, true), out)
    assert.truthy(out:find("exit=0", 1, true), out)
  end)
end)
