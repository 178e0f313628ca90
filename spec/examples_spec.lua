-- The quick examples run end to end and print what they promise; the MLP
-- training example runs two epochs, whole and stopped-and-resumed; the
-- character LSTM runs 40 steps of a small model; the CartPole REINFORCE
-- agent trains to its target (about 250 episodes, a second or two); each training example stops
-- with the backend's reason when --device cuda cannot be used. (The CNN and the character
-- models' default runs take minutes: they are run by hand, see README.md.)
local H = require("helpers")

local function run(script) return H.output("luajit " .. script .. " 2>&1; echo \"exit=$?\"") end

describe("examples", function()
  it("higher_order.lua gets 18 for d2/dx2 of x^3 at 3 and a Hessian-vector product", function()
    local out = run("examples/higher_order.lua")
    assert.truthy(out:find("first derivative 27, second derivative 18", 1, true), out)
    assert.truthy(out:find("grad(grad(x^3)) at 3 = 18", 1, true), out)
    local err = tonumber(out:match("finite differences| = ([%d%.e%-+]+)"))
    assert.is_true(err ~= nil and err < 1e-6, out)
    assert.truthy(out:find("exit=0", 1, true), out)
  end)

  it("cartpole_reinforce.lua reaches an average episode length of 150 with Categorical's REINFORCE", function()
    local out = run("examples/cartpole_reinforce.lua --seed 0 --seconds 60")
    assert.truthy(out:find("exit=0", 1, true), out)
    local avg, secs = out:match("reached an average episode length of ([%d%.]+) %(target 150%) after %d+ episodes, ([%d%.]+) s")
    assert.is_true(tonumber(avg) >= 150 and tonumber(secs) <= 60, out)
  end)

  it("custom_grad.lua checks its rules", function()
    local out = run("examples/custom_grad.lua")
    assert.truthy(out:find("gradcheck softplus:\ttrue", 1, true), out)
    assert.truthy(out:find("through the Lua rule (1 call)", 1, true), out)
    assert.truthy(out:find("tensor([0., 1., 1., 1., 0.]", 1, true), out)
    assert.truthy(out:find("exit=0", 1, true), out)
  end)

  it("fashion_mnist_mlp.lua stopped and resumed ends exactly where a whole run ends", function()
    local dir = H.tmpdir()
    local function epoch_lines(out)   -- "epoch N: train loss ..., test accuracy ...%", less the time
      local lines = {}
      for l in out:gmatch("epoch %d+: train loss [^\n]-%%") do lines[#lines + 1] = l end
      return lines
    end
    local whole = run("examples/fashion_mnist_mlp.lua --epochs 2 --out " .. dir .. "/a")
    local first = run("examples/fashion_mnist_mlp.lua --epochs 2 --stop 1 --out " .. dir .. "/b")
    local rest = run("examples/fashion_mnist_mlp.lua --epochs 2 --resume --out " .. dir .. "/b")
    local svg = io.open(dir .. "/b/curves.svg")
    local function bytes(path)
      local f = io.open(path, "rb")
      local s = f and f:read("*a")
      if f then f:close() end
      return s
    end
    local ckpt_whole, ckpt_resumed = bytes(dir .. "/a/checkpoint.safetensors"), bytes(dir .. "/b/checkpoint.safetensors")
    H.rm_rf(dir)
    for _, out in ipairs({ whole, first, rest }) do assert.truthy(out:find("exit=0", 1, true), out) end
    assert.truthy(rest:find("resumed from .- after epoch 1"), rest)
    local w, a, b = epoch_lines(whole), epoch_lines(first), epoch_lines(rest)
    assert.are.equal(2, #w, whole)
    assert.are.same({ w[1] }, a)
    assert.are.same({ w[2] }, b)
    -- the last checkpoints (weights, momentum, schedule, curves, generator) are the same bytes
    assert.truthy(ckpt_whole, "no checkpoint")
    assert.is_true(ckpt_whole == ckpt_resumed, "the resumed run's checkpoint differs from the whole run's")
    local acc = tonumber(w[2]:match("test accuracy ([%d%.]+)%%"))
    assert.is_true(acc > 83, whole)   -- 86.1% here; PyTorch's recipe gives about the same
    assert.truthy(svg, "no curves.svg")
    svg:close()
  end)

  it("each training example refuses --device cuda that cannot be used, with the backend's reason", function()
    local ember = require("ember")
    if pcall(function() return ember.zeros({ 1 }):to("cuda") end) then
      pending("a CUDA device is usable here")
      return
    end
    local _, why = pcall(function() return ember.zeros({ 1 }):to("cuda") end)
    local reason = tostring(why):match("ember%.device (.*)$")
    for _, script in ipairs({ "fashion_mnist_mlp", "fashion_mnist_cnn", "char_lm", "char_lstm" }) do
      local out = run("examples/" .. script .. ".lua --device cuda")
      assert.truthy(out:find("--device cuda cannot be used: ", 1, true), out)
      assert.truthy(out:find(reason, 1, true), out)
      assert.truthy(out:find("exit=2", 1, true), out)
    end
  end)

  it("each training example stops on an unknown option, a missing value or a non-number, naming it", function()
    for _, script in ipairs({ "fashion_mnist_mlp", "fashion_mnist_cnn", "char_lm", "char_lstm", "cartpole_reinforce" }) do
      local out = run("examples/" .. script .. ".lua --bogus 1")
      assert.truthy(out:find(script .. ".lua: unknown option --bogus (options: ", 1, true), out)
      assert.truthy(out:find("exit=2", 1, true), out)
    end
    local out = run("examples/fashion_mnist_mlp.lua --lr fast")
    assert.truthy(out:find("fashion_mnist_mlp.lua: --lr takes a number, got fast", 1, true), out)
    assert.truthy(out:find("--resume, ", 1, true), out)   -- a flag, listed without a value
    out = run("examples/char_lstm.lua --out")
    assert.truthy(out:find("char_lstm.lua: --out needs a value", 1, true), out)
    assert.truthy(out:find("exit=2", 1, true), out)
  end)

  it("char_lstm.lua trains a small LSTM briefly, samples with its carried state and saves PyTorch's names", function()
    local found = H.output("command -v bible") ~= ""
    if not found then pending("bible-kjv is not installed") return end
    local ember = require("ember")
    local dir = H.tmpdir()
    local out = run("examples/char_lstm.lua --steps 40 --batch 8 --context 32 --hidden 64 --embed 16 --sample 40 --out "
      .. dir)
    local sd = ember.load(dir .. "/char_lstm.safetensors")
    H.rm_rf(dir)
    assert.truthy(out:find("exit=0", 1, true), out)
    local val, h1 = out:match("validation loss ([%d%.]+) nats/char %(unigram entropy ([%d%.]+)%) after 40 steps")
    assert.is_true(tonumber(val) < math.log(80) and tonumber(h1) > 2.5, out)   -- below a uniform guess
    assert.truthy(out:find("sample:\nAnd God said" .. ("."):rep(40)), out)
    assert.are.same({ 256, 16 }, sd["lstm.weight_ih_l0"]:shape())
    assert.are.same({ 256, 64 }, sd["lstm.weight_hh_l0"]:shape())
  end)
end)
