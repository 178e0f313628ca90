-- A seeded, bounded shape fuzzer: every op family called with small random
-- shapes, dims (negative and out of range too), dtypes, views (transposed,
-- narrowed, expanded, permuted, selected) and index tensors whose values and
-- shapes are random, mismatched on purpose. Each call must return or raise a
-- Lua error that names an ember call; nothing may crash, and ember must stay
-- usable. Where a call succeeds, a cheap independent check (the result's
-- shape against the op's rule) runs. The random values come from
-- spec/support/fuzz_values.lua. The main oracle is the ASan + UBSan
-- library (docs/hardening.md): any report there is a bug.
--
--   luajit spec/support/shape_fuzz.lua N SEED      -- N cases from SEED
--
-- (from the repository root, with LUA_PATH="./lua/?.lua;./lua/?/init.lua;;"
-- and EMBER_LIB/LD_PRELOAD as scripts/test.sh sets them for the ASan library).
-- spec/shape_fuzz_spec.lua runs a fixed seed and count in the normal suite.
local ffi = require("ffi")
local ember = require("ember")
local C = ember._C
local F = ember.nn.functional

local M = {}

local V = require("spec.support.fuzz_values")
local rand, pick, chance, rshape, rtensor, rdim, rindex = V.rand, V.pick, V.chance, V.rshape, V.rtensor, V.rdim,
  V.rindex
local same_shape, sstr, bcast, near_shape, numel = V.same_shape, V.sstr, V.bcast, V.near_shape, V.numel
local DTYPES, FLOATS = V.DTYPES, V.FLOATS

local out1 = ffi.new("ember_tensor *[1]")
local out2 = ffi.new("ember_tensor *[2]")
local i64 = function(t) return ffi.new("int64_t[?]", math.max(#t, 1), t) end
local function c_check(rc)
  if rc ~= 0 then error("ember.C: " .. ffi.string(C.ember_last_error()), 0) end
end
local function c_out() return ember._wrap(out1[0]) end

local BINARY = { "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge" }
local UNARY = { "neg", "exp", "log", "log1p", "sqrt", "rsqrt", "abs", "sign", "sin", "cos", "tanh", "sigmoid",
  "relu", "silu", "erf" }
local INPLACE = { "add_", "sub_", "mul_", "div_", "pow_", "copy_" }

-- each family: a function that makes one call and returns a checker or nil.
-- A checker returns nil when the result is right, else a description.
local families = {}
local function family(name, f) families[#families + 1] = { name = name, f = f } end

family("binary", function()
  local s = rshape()
  local a, b = rtensor(s), rtensor(near_shape(s))
  local op = pick(BINARY)
  if chance(0.1) then b = 2 end
  local r = ember[op](a, b)
  local want = bcast(s, ember.is_tensor(b) and b:shape() or {})
  return function()
    if want and not same_shape(r, want) then return op .. " gave " .. sstr(r:shape()) .. " not " .. sstr(want) end
  end
end)

family("unary", function()
  local a = rtensor()
  local op = pick(UNARY)
  if chance(0.3) then
    a[op .. "_"](a)
    return
  end
  local r = ember[op](a)
  return function() if not same_shape(r, a:shape()) then return op .. " shape" end end
end)

family("inplace", function()
  local s = rshape()
  local a, b = rtensor(s), rtensor(near_shape(s))
  local op = pick(INPLACE)
  if chance(0.3) then a = a:clone() end
  a[op](a, chance(0.2) and 3 or b)
end)

family("where_clamp", function()
  local s = rshape()
  local c = rtensor(near_shape(s), chance(0.8) and "bool" or nil)
  local a, b = rtensor(s), rtensor(near_shape(s))
  if chance(0.5) then return ember.where(c, a, chance(0.3) and 1.5 or b) end
  if chance(0.5) then return a:clamp(-1, 1) end
  a:clamp_(rand(3) - 2, nil)
end)

family("reduce", function()
  local a = rtensor()
  local r = a:dim()
  local op = pick({ "sum", "mean", "var", "std", "norm", "logsumexp", "max", "min", "argmax", "argmin" })
  local d = rdim(r)
  local keep = chance(0.5)
  local res
  if op == "norm" then res = a:norm(2, d, keep)
  elseif op == "var" or op == "std" then res = a[op](a, d, keep, chance(0.5))
  elseif chance(0.15) and op ~= "logsumexp" and op ~= "argmax" and op ~= "argmin" then
    res = a[op](a)
    return
  else res = a[op](a, d, keep) end
  if ember.is_tensor(res) and d >= -r and d <= r and d ~= 0 then
    local dd = d < 0 and d + r + 1 or d
    local want = {}
    for i = 1, r do
      if i ~= dd then want[#want + 1] = a:size(i) elseif keep then want[#want + 1] = 1 end
    end
    return function()
      if not same_shape(res, want) then
        return op .. " dim " .. d .. " of " .. sstr(a:shape()) .. " gave " .. sstr(res:shape())
      end
    end
  end
end)

family("reduce_dims", function()
  local a = rtensor()
  local dims = {}
  for i = 1, rand(3) do dims[i] = rdim(a:dim()) end
  local s = ffi.new("int[?]", #dims)
  for i = 1, #dims do s[i - 1] = dims[i] < 0 and dims[i] + a:dim() or dims[i] - 1 end
  local op = pick({ "ember_sum", "ember_mean" })
  c_check(C[op](a._c, #dims, s, rand(2) - 1, out1))
  c_out()
end)

family("softmax", function()
  local a = rtensor()
  local d = rdim(a:dim())
  local op = pick({ "softmax", "log_softmax", "logsumexp" })
  local r = a[op](a, d)
  if op ~= "logsumexp" then
    return function() if not same_shape(r, a:shape()) then return op .. " shape" end end
  end
end)

family("matmul", function()
  local n, k, m = rand(4), rand(4), rand(4)
  local sa, sb = {}, {}
  local ra, rb = rand(4), rand(4)
  for _ = 3, ra do table.insert(sa, chance(0.5) and 1 or rand(3)) end
  for _ = 3, rb do table.insert(sb, chance(0.5) and 1 or rand(3)) end
  if ra >= 2 then sa[#sa + 1] = n end
  sa[#sa + 1] = k
  local k2 = chance(0.85) and k or rand(4)
  sb[#sb + 1] = k2
  if rb >= 2 then sb[#sb + 1] = m end
  local dt = chance(0.8) and "float32" or pick(DTYPES)
  local a, b = rtensor(sa, dt), rtensor(sb, chance(0.9) and dt or pick(DTYPES))
  if chance(0.2) then
    local w = rtensor({ rand(4), chance(0.8) and a:size(-1) or rand(4) }, dt)
    return F.linear(a, w, chance(0.5) and rtensor({ chance(0.8) and w:size(1) or rand(4) }, dt) or nil)
  end
  if chance(0.1) then
    c_check(C.ember_linear(a._c, b._c, out1))
    c_out()   -- the result is owned: wrapped, it is released (leak checking saw it left behind)
    return
  end
  if chance(0.15) then   -- the fused linear + bias + ReLU and its adjoint
    local w = rtensor({ rand(4), chance(0.8) and a:size(-1) or rand(4) }, dt)
    local bias = rtensor(chance(0.8) and { w:size(1) } or rshape(2, 4), chance(0.9) and dt or pick(DTYPES))
    if chance(0.5) then return F.linear_relu(a, w, bias) end
    if chance(0.5) then
      c_check(C.ember_linear_relu(a._c, w._c, bias._c, out1))
      c_out()
      return
    end
    local y = rtensor(chance(0.7) and a:shape() or near_shape(a:shape()), chance(0.9) and dt or pick(DTYPES))
    c_check(C.ember_relu_bias_backward(a._c, y._c, out2, out2 + 1))
    ember._wrap(out2[0]); ember._wrap(out2[1])
    return
  end
  return ember.matmul(a, b)
end)

family("shape", function()
  local a = rtensor()
  local r = a:dim()
  local k = rand(11)
  if k == 1 then
    local s = rshape()
    if chance(0.3) and #s > 0 then s[rand(#s)] = -1 end
    return chance(0.5) and a:reshape(s) or a:view(s)
  elseif k == 2 then return a:transpose(rdim(r), rdim(r))
  elseif k == 3 then
    local p = {}
    for i = 1, r + rand(3) - 2 do p[i] = rdim(r) end
    return a:permute(p)
  elseif k == 4 then return a:squeeze(chance(0.3) and nil or rdim(r))
  elseif k == 5 then return a:unsqueeze(rdim(r + 1))
  elseif k == 6 then return a:expand(near_shape(a:shape()))
  elseif k == 7 then
    local d = rdim(r)
    return a:narrow(d, rand(5) - 1, rand(5) - 1)
  elseif k == 8 then return a:select(rdim(r), rand(6) - 2)
  elseif k == 9 then return a:flatten(rdim(r), rdim(r))
  elseif k == 10 then
    local s = near_shape(a:shape())
    return a:sum_to(s)
  else
    local s = rshape()
    local p = ffi.new("int64_t[?]", #s + 1, s)
    c_check(C.ember_expand(a._c, #s, p, out1))
    return c_out()
  end
end)

family("index", function()
  local a = rtensor(nil, pick(DTYPES))
  local r = a:dim()
  local d = rdim(r)
  local size = (d >= 1 and d <= r) and a:size(d) or 3
  local k = rand(5)
  if k == 1 then
    local idx = rindex(size, chance(0.8) and { rand(4) } or nil)
    local res = a:index_select(d, idx)
    return function()
      local dd = d < 0 and d + r + 1 or d
      local want = a:shape()
      if r > 0 then want[dd] = idx:numel() end
      if not same_shape(res, want) then return "index_select gave " .. sstr(res:shape()) end
    end
  elseif k == 2 then
    local s = a:shape()
    if chance(0.7) and r > 0 then
      for i = 1, r do if chance(0.3) then s[i] = rand(4) end end
    else s = rshape() end
    return a:gather(d, rindex(size, s))
  elseif k == 3 then
    local s = a:shape()
    if r > 0 and d >= -r and d <= r and d ~= 0 then s[d < 0 and d + r + 1 or d] = rand(4) end
    if chance(0.3) then s = near_shape(s) end
    local n = #s > 0 and (s[d < 0 and d + r + 1 or d] or 1) or 1
    local src = rtensor(s, a.dtype)
    local idx = rindex(size, chance(0.8) and { n } or nil)
    if chance(0.5) then return a:index_add(d, idx, src) end
    a = a:clone()
    a:index_add_(d, idx, src)
  elseif k == 4 then
    -- scatter_add from C: result shape, index of the source's shape
    local s = a:shape()
    local ss = {}
    for i = 1, r do ss[i] = chance(0.8) and rand(s[i] + 1) or rand(4) end
    if chance(0.2) then ss = rshape() end
    local src = rtensor(ss, chance(0.8) and "float32" or nil)
    local idx = rindex(size, chance(0.8) and ss or rshape())
    local dd = d - 1
    c_check(C.ember_scatter_add(r, i64(s), dd, idx._c, src._c, out1))
    c_out()
  else
    local s = rshape(2, 4)
    local idx = rindex(size, s)
    c_check(C.ember_index_add(r, i64(a:shape()), d - 1, idx._c, a._c, out1))
    c_out()
  end
end)

family("mask", function()
  local a = rtensor()
  local m = rtensor(chance(0.7) and a:shape() or near_shape(a:shape()), chance(0.9) and "bool" or nil)
  local k = rand(4)
  if k == 1 then return a:masked_fill(m, chance(0.8) and 2 or rtensor({ 1 }))
  elseif k == 2 then
    a = a:clone()
    a:masked_fill_(m, 3)
  elseif k == 3 then
    local r = a[m]
    return function()
      if m.dtype == "bool" and ember.is_tensor(r) and r:dim() ~= 1 then return "mask read gave " .. sstr(r:shape()) end
    end
  else
    a = a:clone()
    a[m] = chance(0.7) and 1 or rtensor(rshape(1, 2))
  end
end)

family("brackets", function()
  local a = rtensor()
  local r = a:dim()
  local k = rand(5)
  local function rng_idx()
    local i = rand(9) - 5
    return i
  end
  if k == 1 then return a[rng_idx()]
  elseif k == 2 then
    local key = {}
    for i = 1, rand(r + 2) - 1 do
      local c = rand(4)
      if c == 1 then key[i] = {} elseif c == 2 then key[i] = { rng_idx(), rng_idx() }
      elseif c == 3 then key[i] = { rng_idx() } else key[i] = rng_idx() end
    end
    if chance(0.5) then return a[key] end
    local b = a:clone()
    b[key] = chance(0.5) and 7 or rtensor(rshape(2, 3), a.dtype)
  elseif k == 3 then return a[rindex(r > 0 and a:size(1) or 2)]
  elseif k == 4 then
    local b = a:clone()
    b[rng_idx()] = chance(0.5) and 1 or rtensor(near_shape(a:shape()))
  else
    -- writes into views of a clone: narrow / transpose / expand
    local b = a:clone()
    local v = r > 0 and b:narrow(1, 1, math.max(b:size(1) - 1, 0)) or b
    if r >= 2 and chance(0.5) then v = b:transpose(1, 2) end
    if chance(0.3) and r >= 1 then v = b:select(1, 1):unsqueeze(1):expand(b:shape()) end
    v:copy_(rtensor(near_shape(v:shape())))
  end
end)

family("cat_stack", function()
  local s = rshape(3, 3)
  local list = {}
  for i = 1, rand(4) do
    local t = {}
    for j = 1, #s do t[j] = chance(0.85) and s[j] or rand(3) end
    if chance(0.1) then t = rshape(3, 3) end
    list[i] = rtensor(t, chance(0.8) and "float32" or nil)
  end
  local d = rdim(#s + 1)
  if chance(0.5) then return ember.cat(list, d) end
  return ember.stack(list, d)
end)

family("write_views", function()
  -- in-place ops whose destination is a view of a clone: narrow, select, transpose
  local base = rtensor({ rand(4), rand(4), rand(3) }, chance(0.8) and "float32" or nil):clone()
  local v = pick({
    function() return base:narrow(rand(3), rand(2), rand(2)) end,
    function() return base:select(rand(3), rand(2)) end,
    function() return base:transpose(1, 3) end,
    function() return base:permute({ 3, 1, 2 }) end,
  })()
  local op = pick({ "add_", "mul_", "copy_", "fill_", "zero_", "clamp_", "exp_", "relu_" })
  local b = rtensor(near_shape(v:shape()))
  if op == "fill_" then v:fill_(2)
  elseif op == "zero_" then v:zero_()
  elseif op == "clamp_" then v:clamp_(0, 1)
  elseif op == "exp_" or op == "relu_" then v[op](v)
  else v[op](v, b) end
end)

family("autograd_views", function()
  -- writes into views of a tracked tensor, then backward: the grad rules of
  -- in-place writes go through as_strided / as_strided_scatter
  local GradManager = ember.autodiff.GradManager
  local s = { rand(4), rand(4), rand(3) }
  local w = rtensor(s, chance(0.85) and "float32" or pick(FLOATS)):clone()
  local gm = GradManager():attach({ w })
  gm:record()
  local ok, err = pcall(function()
    local y = w * 1
    local v = pick({
      function() return y:narrow(rdim(3), rand(3), rand(3) - 1) end,
      function() return y:select(rdim(3), rand(4) - 1) end,
      function() return y:transpose(rdim(3), rdim(3)) end,
      function() return y:permute({ 3, 1, 2 }):narrow(1, 1, 1) end,
      function() return y[{ {}, { rand(3) - 1, rand(4) } }] end,
    })()
    local k = rand(5)
    local b = rtensor(near_shape(v:shape()), chance(0.8) and "float32" or pick(DTYPES))
    if k == 1 then v:copy_(b) elseif k == 2 then v:mul_(b) elseif k == 3 then v:fill_(2)
    elseif k == 4 then v[{ {} }] = b else v:add_(b) end
    local z = (chance(0.5) and y or v):pow(2)
    if chance(0.3) then z = z:sum(rdim(z:dim())) end
    gm:backward(z:sum())
  end)
  gm:release()
  if not ok then error(err, 0) end
  return function()
    local g = rawget(w, "_grad")
    if g and not same_shape(g, s) then return "grad of " .. sstr(s) .. " has shape " .. sstr(g:shape()) end
  end
end)

family("conv", function()
  local n, c, h, w = rand(2), rand(4), rand(6), rand(6)
  local o, g = rand(4), pick({ 1, 1, 1, 2, 3 })
  local kh, kw = rand(3), rand(3)
  local xs = { n, c, h, w }
  if chance(0.1) then xs = rshape() end
  local ws = { o, chance(0.85) and math.max(1, math.floor(c / g)) or rand(4), kh, kw }
  if chance(0.1) then ws = rshape() end
  local dt = chance(0.9) and "float32" or pick(DTYPES)
  local x, wt = rtensor(xs, dt), rtensor(ws, dt)
  local opts = { stride = chance(0.8) and rand(2) or { rand(3) - 1, rand(2) },
    padding = chance(0.8) and rand(2) - 1 or { rand(3) - 2, rand(2) },
    dilation = chance(0.8) and 1 or rand(3) - 1, groups = g }
  local k = rand(10)
  if k == 10 then   -- conv2d, its bias, ReLU and max pooling as one op, and its backward
    local bias = rtensor(chance(0.85) and { o } or rshape(2, 5), chance(0.9) and dt or pick(DTYPES))
    local pk = chance(0.85) and { rand(3), rand(3) } or { rand(4) - 2, rand(3) - 1 }
    local ps = chance(0.7) and pk or { rand(3) - 1, rand(2) }
    if chance(0.6) then
      local function f(x_, w_, b_) return F.conv2d_relu_max_pool2d(x_, w_, b_, opts, pk, { stride = ps }) end
      if chance(0.5) then return f(x, wt, bias) end
      ember.autodiff.vjp(function(...) return f(...):sum() end, { x, wt, bias })
      return
    end
    local with_idx = chance(0.5)
    c_check(C.ember_conv2d_relu_max_pool2d(x._c, wt._c, bias._c, i64({ rand(3) - 1, rand(2) }),
      i64({ rand(3) - 2, rand(2) - 1 }), i64({ rand(3) - 1, 1 }), rand(4) - 1, i64(pk), i64(ps), out2,
      with_idx and out2 + 1 or nil))
    ember._wrap(out2[0])
    if with_idx then ember._wrap(out2[1]) end
  elseif k == 9 then   -- conv2d with its bias and ReLU as one op
    local bias = rtensor(chance(0.85) and { o } or rshape(2, 5), chance(0.9) and dt or pick(DTYPES))
    if chance(0.5) then return F.conv2d_relu(x, wt, bias, opts) end
    c_check(C.ember_conv2d_relu(x._c, wt._c, bias._c, i64({ rand(3) - 1, rand(2) }),
      i64({ rand(3) - 2, rand(2) - 1 }), i64({ rand(3) - 1, 1 }), rand(4) - 1, out1))
    c_out()
  elseif k <= 2 then
    local y = F.conv2d(x, wt, chance(0.3) and rtensor({ o }, dt) or nil, opts)
    return function()
      if y:dim() ~= 4 or y:size(1) ~= xs[1] or y:size(2) ~= ws[1] then
        return "conv2d of " .. sstr(xs) .. " and " .. sstr(ws) .. " gave " .. sstr(y:shape())
      end
    end
  elseif k == 3 then
    local x1 = rtensor({ n, c, w }, dt)
    local w1 = rtensor({ o, chance(0.85) and math.max(1, math.floor(c / g)) or rand(4), kw }, dt)
    return F.conv1d(x1, w1, nil, { stride = rand(2), padding = rand(2) - 1, groups = g })
  elseif k == 4 then
    local wt2 = rtensor({ chance(0.85) and c or rand(4), o, kh, kw }, dt)
    return F.conv_transpose2d(x, wt2, nil, { stride = rand(2), padding = rand(2) - 1,
      output_padding = rand(2) - 1, groups = g })
  elseif k == 5 then
    -- the input gradient with a random x_shape
    local ys = { n, o, rand(5), rand(5) }
    local gy = rtensor(ys, dt)
    local xsh = chance(0.6) and xs or { rand(2), rand(4), rand(6), rand(6) }
    c_check(C.ember_conv2d_backward_input(gy._c, wt._c, i64(xsh), i64({ rand(2), rand(2) }),
      i64({ rand(2) - 1, rand(2) - 1 }), i64({ 1, rand(2) }), g, out1))
    c_out()
  elseif k == 6 then
    local ys = { chance(0.8) and n or rand(2), o, rand(5), rand(5) }
    local gy = rtensor(ys, dt)
    local wsh = chance(0.6) and ws or { rand(4), rand(4), rand(3), rand(3) }
    c_check(C.ember_conv2d_backward_weight(x._c, gy._c, i64(wsh), i64({ rand(2), rand(2) }),
      i64({ rand(2) - 1, rand(2) - 1 }), i64({ 1, rand(2) }), g, out1))
    c_out()
  else
    c_check(C.ember_conv2d(x._c, wt._c, i64({ rand(3) - 1, rand(2) }), i64({ rand(3) - 2, rand(2) - 1 }),
      i64({ rand(3) - 1, 1 }), rand(4) - 1, out1))
    c_out()
  end
end)

family("pool", function()
  local xs = chance(0.85) and { rand(2), rand(3), rand(6), rand(6) } or rshape()
  local x = rtensor(xs, chance(0.9) and "float32" or pick(DTYPES))
  local kk = { rand(3), rand(3) }
  local k = rand(8)
  local opts = { stride = chance(0.7) and nil or rand(3) - 1, padding = chance(0.7) and 0 or rand(3) - 1 }
  if k == 1 then return F.max_pool2d(x, kk, opts, chance(0.5))
  elseif k == 2 then return F.avg_pool2d(x, kk, opts)
  elseif k == 3 then return F.adaptive_avg_pool2d(x, chance(0.8) and { rand(4), rand(4) } or rand(4) - 1)
  elseif k == 4 then
    -- max_pool2d backward with indices from another call and a random x_shape
    local _, idx = F.max_pool2d(x, kk, nil, true)
    local g = rtensor(chance(0.7) and idx:shape() or rshape(), "float32")
    local xsh = chance(0.5) and xs or { rand(2), rand(3), rand(4), rand(4) }
    if chance(0.3) then idx = rindex(8, idx:shape()) end
    c_check(C.ember_max_pool2d_backward(g._c, idx._c, i64(xsh), out1))
    c_out()
  elseif k == 5 then
    local g = rtensor(chance(0.5) and { rand(2), rand(3), rand(4), rand(4) } or rshape(), "float32")
    local xsh = chance(0.5) and xs or { rand(2), rand(3), rand(6), rand(6) }
    c_check(C.ember_avg_pool2d_backward(g._c, i64(xsh), i64(kk), i64({ rand(2), rand(2) }),
      i64({ rand(2) - 1, rand(2) - 1 }), out1))
    c_out()
  elseif k == 6 then
    local g = rtensor(near_shape(xs), "float32")
    local y = rtensor(xs, "float32")
    c_check(C.ember_relu_backward(g._c, y._c, out1))
    c_out()
  else
    c_check(C.ember_max_pool2d(x._c, i64({ rand(4) - 1, rand(3) - 1 }), i64({ rand(3) - 1, rand(2) }),
      i64({ rand(3) - 2, rand(2) - 1 }), out2, out2 + 1))
    ember._wrap(out2[0]); ember._wrap(out2[1])
  end
end)

family("pad_interp", function()
  local xs = chance(0.85) and { rand(2), rand(3), rand(5), rand(5) } or rshape()
  local x = rtensor(xs, chance(0.9) and "float32" or pick(DTYPES))
  if chance(0.5) then
    local pads = {}
    for i = 1, pick({ 2, 4, 4, 6, 3 }) do pads[i] = rand(5) - 3 end
    return F.pad(x, pads, pick({ "constant", "reflect", "replicate", "circular" }), 0)
  end
  local opts = { mode = pick({ "nearest", "bilinear", "nearest" }) }
  if chance(0.5) then opts.size = { rand(6) - 1, rand(6) } else opts.scale_factor = pick({ 0.5, 1, 2, 3, 0.25, 0 }) end
  if opts.mode == "bilinear" and chance(0.5) then opts.align_corners = true end
  return F.interpolate(x, opts)
end)

family("embedding_loss", function()
  local k = rand(3)
  if k == 1 then
    local wt = rtensor({ rand(5), rand(4) }, chance(0.9) and "float32" or nil)
    if chance(0.1) then wt = rtensor() end
    local idx = rindex(wt:dim() > 0 and wt:size(1) or 3)
    return F.embedding(idx, wt)
  end
  local n, c = rand(4), rand(5)
  local xs = chance(0.85) and { n, c } or rshape()
  local x = rtensor(xs, chance(0.9) and "float32" or pick(FLOATS))
  local lab = rindex(c, chance(0.8) and { n } or rshape(2, 4))
  if k == 2 then return F.cross_entropy(x, lab) end
  return F.nll_loss(x:log_softmax(-1), lab)
end)

family("norms", function()
  local xs = chance(0.85) and { rand(3), rand(4), rand(3), rand(3) } or rshape()
  local x = rtensor(xs, chance(0.9) and "float32" or pick(FLOATS))
  local c = #xs >= 2 and xs[2] or 2
  local k = rand(3)
  if k == 1 then
    local ns = {}
    for i = math.max(#xs - rand(2) + 1, 1), #xs do ns[#ns + 1] = chance(0.85) and xs[i] or rand(4) end
    local w = chance(0.5) and rtensor(chance(0.8) and ns or rshape(2), "float32") or nil
    return F.layer_norm(x, ns, w, w and rtensor(w:shape(), "float32") or nil)
  elseif k == 2 then
    local cc = chance(0.85) and c or rand(4)
    local rm, rv = rtensor({ cc }, "float32"):clone(), rtensor({ cc }, "float32"):abs():clone()
    local w = chance(0.5) and rtensor({ chance(0.9) and cc or rand(4) }, "float32") or nil
    if chance(0.3) then   -- the op and its adjoint from C, with shapes and dtypes gone wrong
      local dt = chance(0.8) and x.dtype or pick(DTYPES)
      local wc = rtensor(chance(0.85) and { cc } or rshape(2, 4), dt)
      local bc = rtensor(chance(0.85) and { cc } or rshape(2, 4), chance(0.9) and dt or pick(DTYPES))
      local eps = chance(0.9) and 1e-5 or pick({ 0, -1, 0 / 0, 1e300 })
      if chance(0.5) then
        c_check(C.ember_batch_norm(x._c, wc._c, bc._c, eps, out2, out2 + 1))
        ember._wrap(out2[0]); ember._wrap(out2[1])
        return
      end
      local g = rtensor(chance(0.8) and x:shape() or near_shape(x:shape()), chance(0.9) and x.dtype or pick(DTYPES))
      local st = rtensor(chance(0.8) and { 2, cc } or rshape(2, 4), chance(0.9) and x.dtype or pick(DTYPES))
      c_check(C.ember_batch_norm_backward(g._c, x._c, wc._c, st._c, eps, out2, out2 + 1))
      ember._wrap(out2[0]); ember._wrap(out2[1])
      return
    end
    return F.batch_norm(x, chance(0.7) and rm or nil, chance(0.7) and rv or nil, w, chance(0.3) and w or nil,
      { training = chance(0.5) })
  else
    local g = pick({ 1, 2, 3, 4 })
    local w = chance(0.5) and rtensor({ chance(0.8) and c or rand(4) }, "float32") or nil
    return F.group_norm(x, g, w, w and rtensor(w:shape(), "float32") or nil)
  end
end)

family("optim_fused", function()
  local s = rshape(3, 4)
  local dt = chance(0.85) and "float32" or pick(FLOATS)
  local function alike() return rtensor(chance(0.8) and s or near_shape(s), chance(0.9) and dt or pick(DTYPES)):clone() end
  local p = rtensor(s, dt):clone()
  local g = alike()
  if chance(0.2) then g = rtensor(near_shape(s), dt) end
  if chance(0.5) then
    local buf = chance(0.7) and alike() or nil
    c_check(C.ember_sgd_step_(p._c, g._c, buf and buf._c, 0.1, buf and 0.9 or 0, 0, 0.01, rand(2) - 1, 0,
      rand(2) - 1))
  else
    local m, v = alike(), alike():abs()
    local vmax = chance(0.3) and alike():abs() or nil
    c_check(C.ember_adam_step_(p._c, g._c, m._c, v._c, vmax and vmax._c, 0.01, 0.9, 0.999, 1e-8, 0.01,
      rand(2) - 1, 0, rand(3)))
  end
end)

family("optim_lua", function()
  local s = rshape(2, 3)
  local p = rtensor(s, "float32"):clone()
  p.grad = rtensor(chance(0.8) and s or near_shape(s), chance(0.9) and "float32" or pick(FLOATS)):clone()
  local opt
  if chance(0.5) then opt = ember.optim.SGD({ p }, { lr = 0.1, momentum = chance(0.5) and 0.9 or 0 })
  else opt = ember.optim.Adam({ p }, { lr = 0.01 }) end
  opt:step()
  -- mismatched state from a checkpoint-like load
  local st = opt.state[p]
  if st and chance(0.5) then
    for k2, v in pairs(st) do
      if ember.is_tensor(v) then st[k2] = rtensor(near_shape(s), "float32"):clone() end
    end
    opt:step()
  end
end)

family("convert", function()
  local a = rtensor()
  local k = rand(4)
  if k == 1 then return a:clone() elseif k == 2 then return a:contiguous()
  elseif k == 3 then return a:to(pick(DTYPES))
  else
    local b = rtensor(a:shape(), pick(DTYPES))
    if chance(0.2) then b = rtensor(near_shape(a:shape())) end
    a = a:clone()
    a:copy_(b)
  end
end)

-- runs n cases from seed; returns {calls =, ok =, errors =, problems = {...}}
function M.run(n, seed, opts)
  opts = opts or {}
  V.seed(seed % 2147483646 + 1)
  ember.manual_seed(seed)
  local stats = { calls = 0, ok = 0, errors = 0, problems = {}, by_family = {} }
  local probe = ember.ones({ 2, 3 })
  for i = 1, n do
    local fam = families[rand(#families)]
    stats.calls = stats.calls + 1
    local state_before = V.state()
    if opts.trace then io.stderr:write(("trace %d %s %d\n"):format(i, fam.name, state_before)); io.stderr:flush() end
    local ok, res = pcall(fam.f)
    local fs = stats.by_family[fam.name] or { ok = 0, err = 0 }
    stats.by_family[fam.name] = fs
    if ok then
      stats.ok = stats.ok + 1
      fs.ok = fs.ok + 1
      if type(res) == "function" then
        local ok2, why = pcall(res)
        if not ok2 or why then
          stats.problems[#stats.problems + 1] = ("case %d (%s, state %d): check failed: %s"):format(i, fam.name,
            state_before, tostring(why))
        end
      end
    else
      stats.errors = stats.errors + 1
      fs.err = fs.err + 1
      local msg = tostring(res)
      if not msg:find("ember", 1, true) then
        stats.problems[#stats.problems + 1] = ("case %d (%s, state %d): error does not name ember: %s"):format(i,
          fam.name, state_before, msg)
      end
      if opts.verbose then io.stderr:write(("case %d %s: %s\n"):format(i, fam.name, msg)) end
    end
    -- still usable
    if i % 50 == 0 then
      local s = (probe + 1):sum():item()
      if s ~= 12 then stats.problems[#stats.problems + 1] = ("case %d: ember unusable (%g)"):format(i, s) end
      collectgarbage()
    end
  end
  return stats
end

M.families = families

-- one case again: the family's name and the generator state the run printed
function M.replay(name, state)
  for _, f in ipairs(families) do
    if f.name == name then
      V.seed(state)
      return f.f()
    end
  end
  error("no family " .. name)
end

if arg and arg[0] and arg[0]:find("shape_fuzz%.lua$") then
  if arg[1] == "replay" then
    print(M.replay(arg[2], tonumber(arg[3])))
    os.exit(0)
  end
  local n = tonumber(arg[1]) or 1000
  local seed = tonumber(arg[2]) or 1
  local t0 = os.clock()
  local st = M.run(n, seed, { verbose = os.getenv("FUZZ_VERBOSE") ~= nil,
    trace = os.getenv("FUZZ_TRACE") ~= nil })
  local names = {}
  for k in pairs(st.by_family) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    io.write(("  %-14s %6d ok %6d errors\n"):format(k, st.by_family[k].ok, st.by_family[k].err))
  end
  for _, p in ipairs(st.problems) do print("PROBLEM " .. p) end
  print(("shape_fuzz: seed %d: %d calls, %d ok, %d errors, %d problems, %.1f s"):format(seed, st.calls, st.ok,
    st.errors, #st.problems, os.clock() - t0))
  os.exit(#st.problems == 0 and 0 or 1)
end

return M
