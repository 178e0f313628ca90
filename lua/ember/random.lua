-- Generators and the random functions that take one: ember.Generator (a
-- C-side Philox stream, core/src/random.c), ember.default_generator, the
-- {generator = g} option of every random function, ember.bernoulli,
-- ember.multinomial and the in-place draws t:uniform_, t:normal_,
-- t:bernoulli_, t:exponential_, t:geometric_. Drawing from a private
-- generator leaves the default one (ember.manual_seed's) where it was.
local ffi = require("ffi")
local errors = require("ember.errors")

return function(ember, H)
  local C = ember._C
  local check, fail, wrap, tensor_arg, is_tensor, out1 = H.check, H.fail, H.wrap, H.tensor_arg, H.is_tensor, H.out1
  local Tensor = H.Tensor
  local floor = math.floor

  ---------------------------------------------------------------- Generator
  local Generator = {}
  Generator.__index = Generator
  Generator.__name = "ember.Generator"

  local function is_int(x) return type(x) == "number" and x == floor(x) end
  local function uint64(v) return is_int(v) and v >= 0 and v < 2 ^ 64 end

  local function make_generator(ptr)
    return setmetatable({ _g = ptr }, Generator)
  end

  -- ember.Generator(seed?) or ember.Generator{seed =, device =}: a new
  -- stream, seeded as the default generator is at start-up (67280421310721)
  -- unless a seed is given. One stream serves every device (the CUDA backend
  -- draws from the CPU's Philox stream), so a device is only checked.
  function ember.Generator(seed)
    if type(seed) == "table" and not is_tensor(seed) then
      local o = seed
      for k in pairs(o) do
        if k ~= "seed" and k ~= "device" then fail("Generator", ("unknown option '%s' (expected seed, device)"):format(tostring(k))) end
      end
      if o.device ~= nil then H.device_id("Generator", o.device) end
      seed = o.seed
    end
    if seed ~= nil and not uint64(seed) then
      fail("Generator", "expected a non-negative integer seed, got " .. errors.show(seed))
    end
    local p = ffi.new("ember_generator *[1]")
    check(C.ember_generator_new(seed or 67280421310721, p))
    return make_generator(ffi.gc(p[0], C.ember_generator_free))
  end
  ember.default_generator = make_generator(C.ember_default_generator())
  ember.Generator_class = Generator

  local function is_generator(g) return getmetatable(g) == Generator end
  ember.is_generator = is_generator

  local function self_arg(name, g)
    if not is_generator(g) then
      fail("Generator:" .. name, "expected a Generator (call it as g:" .. name .. "(...)), got " .. type(g))
    end
    return g._g
  end

  function Generator.manual_seed(g, seed)
    local p = self_arg("manual_seed", g)
    if not uint64(seed) then fail("Generator:manual_seed", "expected a non-negative integer seed, got " .. tostring(seed)) end
    C.ember_generator_manual_seed(p, seed)
    return g
  end
  -- a fresh seed from the clock and the process's address space; returns it
  local seeds = 0
  function Generator.seed(g)
    local p = self_arg("seed", g)
    seeds = seeds + 1
    local s = (floor(os.time() * 1000003 + os.clock() * 1e6) + seeds * 7919
      + tonumber(ffi.cast("uintptr_t", p)) % 65536) % 2 ^ 53
    C.ember_generator_manual_seed(p, s)
    return s
  end
  function Generator.initial_seed(g) return tonumber(C.ember_generator_initial_seed(self_arg("initial_seed", g))) end

  local state = ffi.new("uint64_t[2]")
  function Generator.get_state(g)
    check(C.ember_generator_get_state(self_arg("get_state", g), state, state + 1))
    return H.state_of("get_state", state)
  end
  function Generator.set_state(g, st)
    local p = self_arg("set_state", g)
    local seed, offset = H.state_parts("Generator:set_state", "get_state", st)
    C.ember_generator_set_state(p, seed, offset)
    return g
  end
  Generator.__tostring = function(g)
    local s = g:get_state()
    return ("ember.Generator(seed = %.0f, offset = %.0f)"):format(s.seed, s.offset)
  end

  ---------------------------------------------------------------- options
  -- The generator of an options table (nil: the default one), after checking
  -- that every key is one of `allowed` (a set) or "generator".
  local function gen_of(name, opts, allowed)
    if opts == nil then return nil end
    if type(opts) ~= "table" or is_tensor(opts) then
      fail(name, "options must be a table, got " .. (is_tensor(opts) and "a tensor" or type(opts)))
    end
    for k in pairs(opts) do
      if k ~= "generator" and not (allowed and allowed[k]) then
        local names = { "generator" }
        for a in pairs(allowed or {}) do names[#names + 1] = a end
        table.sort(names)
        fail(name, ("unknown option '%s' (expected %s)"):format(tostring(k), table.concat(names, ", ")))
      end
    end
    local g = opts.generator
    if g == nil then return nil end
    if not is_generator(g) then
      fail(name, "generator must be an ember.Generator, got " .. (is_tensor(g) and "a tensor" or type(g)))
    end
    return g._g
  end
  H.gen_of = gen_of

  -- the in-place draws: t:uniform_(lo?, hi?, opts?), t:normal_(mean?, std?, opts?).
  -- The options table may come early (t:uniform_({generator = g})): a value
  -- after it is an extra argument; the numbers must be numbers. A value past
  -- the parameters raises in init.lua's wrappers.
  local function numbers_then_opts(name, names, x, y, opts)
    local op = "ember.Tensor:" .. name
    if type(x) == "table" and not is_tensor(x) then
      if y ~= nil then errors.extra_argument(op, 2, y, { names[#names] }) end
      if opts ~= nil then errors.extra_argument(op, 3, opts, { names[#names] }) end
      x, opts = nil, x
    elseif #names == 3 and type(y) == "table" and not is_tensor(y) then
      if opts ~= nil then errors.extra_argument(op, 3, opts, { names[1], names[3] }) end
      y, opts = nil, y
    elseif #names == 2 then
      if y ~= nil then opts = y end
      y = nil
    end
    if x ~= nil and type(x) ~= "number" then fail(name, ("%s must be a number, got %s"):format(names[1], type(x))) end
    if y ~= nil and type(y) ~= "number" then fail(name, ("%s must be a number, got %s"):format(names[2], type(y))) end
    return x, y, opts
  end
  local LO_HI, MEAN_STD = { "lo", "hi", "opts" }, { "mean", "std", "opts" }
  local LAMBD, P = { "lambd", "opts" }, { "p", "opts" }
  function Tensor.uniform_(a, lo, hi, opts)
    lo, hi, opts = numbers_then_opts("uniform_", LO_HI, lo, hi, opts)
    check(C.ember_uniform_gen_(gen_of("uniform_", opts), tensor_arg("uniform_", a, 1), lo or 0, hi or 1))
    return a
  end
  function Tensor.normal_(a, mean, std, opts)
    mean, std, opts = numbers_then_opts("normal_", MEAN_STD, mean, std, opts)
    check(C.ember_normal_gen_(gen_of("normal_", opts), tensor_arg("normal_", a, 1), mean or 0, std or 1))
    return a
  end
  function Tensor.exponential_(a, lambd, opts)
    local _
    lambd, _, opts = numbers_then_opts("exponential_", LAMBD, lambd, opts)
    check(C.ember_exponential_gen_(gen_of("exponential_", opts), tensor_arg("exponential_", a, 1), lambd or 1))
    return a
  end
  function Tensor.geometric_(a, p, opts)
    local _
    p, _, opts = numbers_then_opts("geometric_", P, p, opts)
    if p == nil then fail("geometric_", "expected a probability p") end
    check(C.ember_geometric_gen_(gen_of("geometric_", opts), tensor_arg("geometric_", a, 1), p))
    return a
  end

  -- probabilities in a tensor must lie in [0, 1]
  local function check_probs(name, p)
    if p:numel() == 0 then return end
    local lo, hi = p:min():item(), p:max():item()
    if not (lo >= 0 and hi <= 1) then
      fail(name, ("expected probabilities in [0, 1], got values in [%s, %s]"):format(tostring(lo), tostring(hi)))
    end
  end

  -- f(..., p, opts) as well as f(..., opts): a table that is not a tensor in
  -- p's place holds the options (and then nothing may follow it)
  local function p_opts(op, pos, names, p, opts)
    if type(p) == "table" and not is_tensor(p) then
      if opts ~= nil then errors.extra_argument(op, pos, opts, names) end
      return nil, p
    end
    return p, opts
  end

  -- t:bernoulli_(p = 0.5, opts?): p a number or a tensor broadcast to t
  function Tensor.bernoulli_(a, p, opts)
    p, opts = p_opts("ember.Tensor:bernoulli_", 2, { "opts" }, p, opts)
    local g = gen_of("bernoulli_", opts)
    tensor_arg("bernoulli_", a, 1)
    if p == nil or type(p) == "number" then
      check(C.ember_bernoulli_gen_(g, a._c, p == nil and 0.5 or p))
      return a
    end
    if not is_tensor(p) then fail("bernoulli_", "p must be a number or a tensor, got " .. type(p)) end
    check_probs("bernoulli_", p)
    local u = ember.rand(a:shape(), { dtype = "float64", device = a.device, generator = opts and opts.generator })
    a:copy_(u:lt(p:detach():to("float64")):to(a.dtype))
    return a
  end

  -- ember.bernoulli(p, opts?): 1 with probability p elementwise, in p's dtype;
  -- ember.bernoulli(t, p, opts?): t's shape and dtype, probability p (a number)
  function ember.bernoulli(p, q, opts)
    if q == nil and opts ~= nil then
      -- without a number p this is bernoulli(p, opts?): a third value is extra
      errors.extra_argument("ember.bernoulli", 3, opts, { "p", "opts" })
    end
    q, opts = p_opts("ember.bernoulli", 3, { "p", "opts" }, q, opts)
    if not is_tensor(p) then fail("bernoulli", "expected a tensor of probabilities, got " .. type(p)) end
    gen_of("bernoulli", opts)
    if q ~= nil then
      if type(q) ~= "number" then fail("bernoulli", "p must be a number, got " .. type(q)) end
      return (ember.empty_like(p):bernoulli_(q, opts))   -- (not tail calls: errors name ember.bernoulli)
    end
    if p.dtype ~= "float32" and p.dtype ~= "float64" and p.dtype ~= "float16" and p.dtype ~= "bfloat16" then
      fail("bernoulli", "expected a floating point tensor of probabilities, got " .. p.dtype)
    end
    return (ember.empty_like(p):bernoulli_(p, opts))
  end
  -- t:bernoulli(p?, opts?): t the probabilities, or with a number p t's shape and dtype
  function Tensor.bernoulli(t, p, opts)
    p, opts = p_opts("ember.Tensor:bernoulli", 2, { "opts" }, p, opts)
    if p == nil then return ember.bernoulli(t, opts) end
    return ember.bernoulli(t, p, opts)
  end

  ---------------------------------------------------------------- multinomial
  local MULTI_OPTS = { replacement = true }
  -- ember.multinomial(probs, n, {replacement = false, generator =}): n
  -- 1-based category indices (int64) per row of probs (1-D or 2-D,
  -- non-negative weights, not necessarily summing to 1). Without
  -- replacement a row needs n categories of positive weight.
  function ember.multinomial(probs, n, opts)
    local name = "multinomial"
    if not is_tensor(probs) then fail(name, "expected a tensor of weights, got " .. type(probs)) end
    local nd = probs:dim()
    if nd ~= 1 and nd ~= 2 then fail(name, "expected a 1-D or 2-D tensor of weights, got " .. nd .. " dims") end
    if not is_int(n) or n < 1 then fail(name, "num_samples must be a positive integer, got " .. tostring(n)) end
    local g = gen_of(name, opts, MULTI_OPTS)
    local repl = opts and opts.replacement or false
    if type(repl) ~= "boolean" then fail(name, "replacement must be a boolean, got " .. type(repl)) end
    local rows = nd == 2 and probs:size(1) or 1
    local k = probs:size(nd)
    if k == 0 then fail(name, "expected at least one category, got 0") end
    if not repl and n > k then
      fail(name, ("cannot draw %d samples without replacement from %d categories"):format(n, k))
    end
    local w = probs:detach():to("cpu"):to("float64"):contiguous()
    local wp = ffi.cast("const double *", w:data_ptr())
    local u = ember.rand({ rows, n }, { dtype = "float64", generator = opts and opts.generator })
    local up = ffi.cast("const double *", u:data_ptr())
    local out = ember.empty(nd == 2 and { rows, n } or { n }, { dtype = "int64" })
    local op = ffi.cast("int64_t *", out:data_ptr())
    local cum = ffi.new("double[?]", k)
    local left = ffi.new("double[?]", k)
    for r = 0, rows - 1 do
      local base, total, positive = r * k, 0, 0
      for j = 0, k - 1 do
        local v = wp[base + j]
        if not (v >= 0 and v < math.huge) then
          fail(name, ("row %d holds the weight %s at %d: weights must be finite and non-negative")
            :format(r + 1, tostring(v), j + 1))
        end
        if v > 0 then positive = positive + 1 end
        total = total + v
        cum[j] = total
        left[j] = v
      end
      if total <= 0 then fail(name, ("row %d has no positive weight"):format(r + 1)) end
      if not repl and positive < n then
        fail(name, ("row %d has %d categories of positive weight; cannot draw %d without replacement")
          :format(r + 1, positive, n))
      end
      for s = 0, n - 1 do
        local x = up[r * n + s]
        local pick
        if repl then
          -- the first category whose cumulative weight passes x * total
          local t, lo, hi = x * total, 0, k - 1
          while lo < hi do
            local mid = floor((lo + hi) / 2)
            if cum[mid] > t then hi = mid else lo = mid + 1 end
          end
          pick = lo
          while left[pick] == 0 and pick > 0 do pick = pick - 1 end   -- never a zero-weight one
        else
          local t, acc = x * total, 0
          pick = -1
          for j = 0, k - 1 do
            if left[j] > 0 then
              acc = acc + left[j]
              pick = j
              if acc > t then break end
            end
          end
          total = total - left[pick]
          left[pick] = 0
          if total <= 0 then   -- rounding: recount what is left
            total = 0
            for j = 0, k - 1 do total = total + left[j] end
          end
        end
        op[r * n + s] = pick + 1
      end
    end
    if probs.device ~= "cpu" then out = out:to(probs.device) end
    return out
  end
  function Tensor.multinomial(probs, n, opts) return ember.multinomial(probs, n, opts) end

  return Generator
end
