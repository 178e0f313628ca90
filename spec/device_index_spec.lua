-- Device cases of the index, gather/scatter and dim-reduction ops (issue 14):
-- index_select, gather, index_add and scatter_add (through gather's
-- gradient), bracket reads, max/min along a dim with indices, argmax,
-- argmin, var, norm and logsumexp, and a recorded embedding + cross-entropy
-- step, each on EMBER_TEST_DEVICE against the CPU (spec/support/device.lua;
-- pending with the reason where the device cannot be used).
local ember = require("ember")

local D = require("spec.support.device")
local device, DTYPES, FLOATS = D.device, D.DTYPES, D.FLOATS
local case, agrees, operands = D.case, D.agrees, D.operands

-- the message of fn's error (it must fail)
local function error_of(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok)
  return tostring(err)
end

describe("on " .. device .. ": index_select, gather and index_add", function()
  for _, dt in ipairs(DTYPES) do
    case("index_select and gather of " .. dt .. " along every dim, int64 and int32 indices", function()
      local a = operands(dt)   -- {4, 3, 5}, strided
      local d = a:to(device)
      for _, idt in ipairs({ "int64", "int32" }) do
        for dim = 1, 3 do
          local n = a:size(dim)
          local idx = ember.tensor({ n, 1, n, 2, 1 }, { dtype = idt })
          agrees(d:index_select(dim, idx:to(device)), a:index_select(dim, idx))
          local shape = a:shape()
          shape[dim] = 6
          local g = ember.randint(1, n + 1, shape, { dtype = idt })
          agrees(d:gather(dim, g:to(device)), a:gather(dim, g))
        end
      end
    end)
  end

  for _, dt in ipairs(DTYPES) do
    -- the values are multiples of 0.5, so float sums are exact in any order
    case("index_add of " .. dt .. " with repeated indices along every dim", function()
      local a = operands(dt)
      for dim = 1, 3 do
        local n = a:size(dim)
        local shape = a:shape()
        shape[dim] = 4
        local src = ember.full(shape, 1.5, { dtype = dt })
        if dt == "bool" then src = ember.full(shape, 1, { dtype = dt }) end
        local idx = ember.tensor({ 1, n, 1, n }, { dtype = "int64" })
        agrees(a:to(device):index_add(dim, idx:to(device), src:to(device)), a:index_add(dim, idx, src))
      end
    end)
  end

  case("a 0-d index, empty indices and an index out of range, as on the CPU", function()
    local a = operands("float32")
    local d = a:to(device)
    agrees(d:index_select(2, ember.tensor(3, { dtype = "int64" }):to(device)),
      a:index_select(2, ember.tensor(3, { dtype = "int64" })))
    local none = ember.zeros({ 0 }, { dtype = "int64" })
    agrees(d:index_select(1, none:to(device)), a:index_select(1, none))
    for _, bad in ipairs({ { 1, 4, 2, 9 }, { 2, 0 } }) do
      local idx = ember.tensor(bad, { dtype = "int64" })
      local want = error_of(function() return a:index_select(2, idx) end)
      local got = error_of(function() return d:index_select(2, idx:to(device)) end)
      assert.are.equal(want:match("index_select: .*"), got:match("index_select: .*"))
      local g = ember.tensor({ { { 1, 5 } } }, { dtype = "int64" })
      want = error_of(function() return a:gather(2, g) end)
      got = error_of(function() return d:gather(2, g:to(device)) end)
      assert.are.equal(want:match("gather: .*"), got:match("gather: .*"))
    end
    agrees(d:index_select(2, ember.tensor({ 2 }, { dtype = "int64" }):to(device)),
      a:index_select(2, ember.tensor({ 2 }, { dtype = "int64" })))   -- still usable
  end)

  case("bracket reads with a mask and with an index", function()
    local a = operands("float64")
    local d = a:to(device)
    local mask = a:gt(0)
    agrees(d[mask:to(device)], a[mask])
    local idx = ember.tensor({ 4, 1, 4 }, { dtype = "int64" })
    agrees(d[idx:to(device)], a[idx])
  end)

  case("bracket writes through a mask and a range", function()
    local a, d = operands("float32"):contiguous(), operands("float32"):to(device)
    local mask = a:lt(0)
    a[mask] = 7
    d[mask:to(device)] = 7
    a[{ {}, 2 }] = 0.5
    d[{ {}, 2 }] = 0.5
    agrees(d, a)
  end)

  case("float index_add refuses under set_deterministic (its adds are atomic)", function()
    if device ~= "cuda" then pending("a cuda-only refusal; this run's device is " .. device) end
    local a = operands("float32"):to(device)
    local idx = ember.tensor({ 1, 1 }, { dtype = "int64" }):to(device)
    local src = ember.ones({ 2, 3, 5 }):to(device)
    local i = operands("int64"):to(device)
    ember.set_deterministic(true)
    local ok, err = pcall(function() return a:index_add(1, idx, src) end)
    local iok, isum = pcall(function() return i:index_add(1, idx, src:to("int64")) end)   -- exact in any order
    ember.set_deterministic(false)
    assert.is_false(ok)
    assert.matches("index_add: the float32 adds on cuda are atomic", tostring(err), 1, true)
    assert.is_true(iok, tostring(isum))
    agrees(isum, operands("int64"):index_add(1, idx:cpu(), src:cpu():to("int64")))
  end)
end)

describe("on " .. device .. ": max/min along a dim, argmax, argmin", function()
  for _, dt in ipairs(DTYPES) do
    case("max, min, argmax and argmin of " .. dt .. " along every dim and of all", function()
      local a = operands(dt)
      local d = a:to(device)
      agrees(d:argmax(), a:argmax())
      agrees(d:argmin(), a:argmin())
      for dim = 1, 3 do
        for _, keepdim in ipairs({ false, true }) do
          for _, op in ipairs({ "max", "min" }) do
            local v, i = d[op](d, dim, keepdim)
            local cv, ci = a[op](a, dim, keepdim)
            agrees(v, cv)
            agrees(i, ci)
            agrees(d["arg" .. op](d, dim, keepdim), a["arg" .. op](a, dim, keepdim))
          end
        end
      end
    end)
  end

  case("ties give the first index, a NaN wins, an empty dim fails as on the CPU", function()
    local x = ember.tensor({ { 1, 3, 3, 0 }, { 0 / 0, 2, 0 / 0, 5 }, { -1, -1, -2, -2 } })
    local d = x:to(device)
    for dim = 1, 2 do
      local v, i = d:max(dim)
      local cv, ci = x:max(dim)
      agrees(v, cv)
      agrees(i, ci)
      agrees(d:argmin(dim), x:argmin(dim))
    end
    local e = ember.zeros({ 2, 0 })
    local want = error_of(function() return e:max(2) end)
    local got = error_of(function() return e:to(device):max(2) end)
    assert.are.equal(want:match("max_dim: .*"), got:match("max_dim: .*"))
    agrees(select(2, e:to(device):max(1)), select(2, e:max(1)))   -- {0} results, no error
  end)
end)

-- fn(dims, keepdim) over all dims, one and two, with and without keepdim
local function each_dims(fn)
  for _, dims in ipairs({ {}, { 2 }, { 1, 3 } }) do
    fn(dims, false)
    fn(dims, true)
  end
end

describe("on " .. device .. ": var, norm and logsumexp", function()
  for _, dt in ipairs({ "float32", "float64", "float16", "bfloat16", "int32" }) do
    case("var, norm and logsumexp of " .. dt, function()
      local a = operands(dt)
      local d = a:to(device)
      -- float32 computes in double on the device and partly in float on the CPU
      local tol = (dt == "float32" or dt == "int32") and { rtol = 1e-6, atol = 1e-6 } or nil
      each_dims(function(dims, keepdim)
        agrees(d:var(dims, keepdim), a:var(dims, keepdim), tol)
        agrees(d:var(dims, keepdim, false), a:var(dims, keepdim, false), tol)
        for _, p in ipairs({ 1, 2, 3, 0.5, "inf" }) do agrees(d:norm(p, dims, keepdim), a:norm(p, dims, keepdim), tol) end
      end)
      for dim = 1, 3 do agrees(d:logsumexp(dim, true), a:logsumexp(dim, true), tol) end
    end)
  end

  case("NaN, -inf rows and empty reductions as on the CPU", function()
    local x = ember.tensor({ { 1, 0 / 0, 3 }, { -1 / 0, -1 / 0, -1 / 0 }, { 1 / 0, 2, 3 } })
    local d = x:to(device)
    agrees(d:logsumexp(2), x:logsumexp(2))
    agrees(d:norm("inf", 2), x:norm("inf", 2))
    agrees(d:var(2), x:var(2))
    local e = ember.zeros({ 0, 3 })
    agrees(e:to(device):var(1), e:var(1))
    agrees(e:to(device):logsumexp(1), e:logsumexp(1))
    agrees(e:to(device):norm(2, { 1 }), e:norm(2, { 1 }))
    agrees(ember.ones({ 1, 3 }):to(device):var(1), ember.ones({ 1, 3 }):var(1))   -- n - 1 = 0: NaN
  end)
end)

describe("on " .. device .. ": reductions of few long slices (two passes)", function()
  for _, dt in ipairs({ "float32", "float64", "int64", "float16" }) do
    case("sum, mean, max, min, var, norm and logsumexp of a million " .. dt .. " elements, and of 3 long rows", function()
      -- multiples of 1/4 in [-64, 64]: every partial sum is exact, in float32 too
      local q = ((ember.arange(1000000, { dtype = "float64" }) * 0.37):sin() * 256):to("int32")
      local a = (q:to("float64") * 0.25):to(dt)
      local d = a:to(device)
      agrees(d:sum(), a:sum())
      agrees(d:mean(), a:mean())
      agrees(d:max(), a:max())
      agrees(d:min(), a:min())
      agrees(d:var(), a:var())
      agrees(d:norm(), a:norm())
      local rows = a:narrow(1, 1, 999999):view({ 3, 333333 })
      local drows = rows:to(device)
      agrees(drows:sum(2), rows:sum(2))
      agrees(drows:norm("inf", 2), rows:norm("inf", 2))
      agrees(drows:logsumexp(2), rows:logsumexp(2))
    end)
  end
end)

describe("on " .. device .. ": recurrent cells", function()
  for _, dt in ipairs({ "float32", "float64" }) do
    case("lstm_cell and gru_cell of " .. dt .. ": states and gradients as on the CPU", function()
      local F, GradManager = ember.nn.functional, ember.autodiff.GradManager
      local function run(dev, gates)
        ember.manual_seed(13)
        local gi = ember.randn({ 3, gates * 5 }, { dtype = dt }):to(dev)
        local gh = ember.randn({ gates * 5, 3 }, { dtype = dt }):to(dev):t()   -- strided on the device
        local st = ember.randn({ 3, 5 }, { dtype = dt }):to(dev)
        local gm = GradManager():attach({ gi, gh, st })
        gm:record()
        local h, c
        if gates == 4 then h, c = F.lstm_cell(gi, gh, st) else h = F.gru_cell(gi, gh, st) end
        local loss = (h * h):sum() + (c and (c * 0.5):sum() or 0)
        gm:backward(loss)
        return { h, c, gi.grad, gh.grad, st.grad }
      end
      -- float32: the CPU's tanh and exp are polynomials, the device's CUDA's
      local tol = dt == "float32" and { rtol = 1e-5, atol = 1e-6 } or nil
      for _, gates in ipairs({ 4, 3 }) do
        local got, want = run(device, gates), run("cpu", gates)
        for k = 1, 5 do
          if want[k] then agrees(got[k], want[k], tol) end
        end
      end
    end)
  end
end)

describe("on " .. device .. ": gelu and clamp", function()
  for _, dt in ipairs(DTYPES) do
    case("gelu (both forms) and clamp of " .. dt, function()
      local a = operands(dt)
      local d = a:to(device)
      -- below float64, 1 + erf(x) cancels for negative x: the ulps of 1
      -- between CUDA's erff/tanhf and the CPU's times |x| / 2 (|x| <= 5 here)
      local tol = dt ~= "float64" and { rtol = FLOATS[dt] and D.TOL[dt].rtol or 2e-6, atol = 2e-6 } or nil
      agrees(d:gelu(), a:gelu(), tol)
      agrees(d:gelu({ approximate = "tanh" }), a:gelu({ approximate = "tanh" }), tol)
      -- bounds a tensor of dt can hold (an integer tensor refuses -1.5, uint8 any negative)
      local lo, hi, mid = -1.5, 2.25, 0.5
      if not FLOATS[dt] then lo, hi, mid = dt == "uint8" and 1 or -1, 2, 1 end
      agrees(d:clamp(lo, hi), a:clamp(lo, hi))
      agrees(d:clamp(nil, 1), a:clamp(nil, 1))
      agrees(d:clamp(mid), a:clamp(mid))
      agrees(d:clamp(3, lo), a:clamp(3, lo))   -- lo > hi gives hi
    end)
  end
end)

describe("on " .. device .. ": gradients through indexing", function()
  case("gather's and max's gradients (scatter_add) and index_select's (index_add)", function()
    local GradManager = ember.autodiff.GradManager
    local function grads(dev)
      ember.manual_seed(11)
      local x, w = ember.randn({ 4, 6 }, { dtype = "float64" }), ember.randn({ 7, 3 }, { dtype = "float64" })
      x, w = x:to(dev), w:to(dev)
      local gi = ember.tensor({ { 1, 6, 1 }, { 2, 2, 3 }, { 6, 5, 4 }, { 1, 1, 1 } }, { dtype = "int64", device = dev })
      local si = ember.tensor({ 7, 1, 7, 2 }, { dtype = "int64", device = dev })
      local gm = GradManager():attach({ x, w })
      gm:record()
      local m = x:max(2)
      local loss = (x:gather(2, gi) * 2):sum() + (m * m):sum() + (w:index_select(1, si) ^ 2):sum()
      gm:backward(loss)
      return x.grad, w.grad
    end
    local gx, gw = grads(device)
    local cx, cw = grads("cpu")
    agrees(gx, cx)
    agrees(gw, cw)
  end)

  case("a recorded embedding + cross-entropy step gives the CPU's loss and gradients", function()
    local GradManager = ember.autodiff.GradManager
    local function step(dev)
      ember.manual_seed(7)
      local emb = ember.nn.Embedding(10, 6)
      local head = ember.nn.Linear(6, 5)
      emb:to(dev)
      head:to(dev)
      local tokens = ember.tensor({ { 1, 4, 4, 10 }, { 3, 1, 9, 4 } }, { dtype = "int64" }):to(dev)
      local labels = ember.tensor({ { 2, 5, 1, 1 }, { 3, 3, 4, 5 } }, { dtype = "int64" }):to(dev)
      local params = { emb.weight, head.weight, head.bias }
      local gm = GradManager():attach(params)
      gm:record()
      local logits = head(emb(tokens))   -- {2, 4, 5}
      local loss = ember.nn.functional.cross_entropy(logits:reshape({ 8, 5 }), labels:reshape({ 8 }),
        { label_smoothing = 0.1 })
      gm:backward(loss)
      return loss, emb.weight.grad, head.weight.grad, head.bias.grad
    end
    local got, want = { step(device) }, { step("cpu") }
    -- float32: the device sums in another order (cuBLAS, double accumulators, atomic adds)
    local tol = { rtol = 1e-5, atol = 1e-6 }
    for k = 1, 4 do agrees(got[k], want[k], tol) end
  end)
end)
