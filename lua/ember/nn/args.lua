-- ember.nn.args: the argument checks shared by the layers of conv.lua,
-- norm.lua and resize.lua: errors at the caller's line that name the call
-- (errors.fail), option tables checked against a spec with defaults
-- (loss.lua's options), and PyTorch's spatial arguments (a number, or one
-- number per spatial dim), PyTorch's positional arguments mixed with an
-- options table (A.positional; nn/signature.lua's S.parse adds the checks of
-- a spec), and the check that no call passes more
-- arguments than its function takes (A.check_arity: nn.Module's
-- constructors and forwards and ember.nn.functional go through it). Not
-- here: the layers themselves.
local ember = require("ember")
local L = require("ember.nn.loss")

local errors = require("ember.errors")
local A = { fail = errors.fail, options = L.options, one_of = L.one_of }
local is_tensor = ember.is_tensor

-- the C calls of the layers (conv.lua, conv3d.lua, pool.lua, rnn.lua; their
-- status check is errors.check): int64s is a list as a C array, ptr the C
-- tensor of argument n of the call op ("ember.nn.functional.conv1d")
local ffi = require("ffi")
function A.int64s(list) return ffi.new("int64_t[?]", #list, list) end
function A.ptr(op, t, n) return ember._ptr(op:sub(#"ember." + 1), t, n, 2) end

-- v as an error message shows it: 'text', {1, 2}, 0.5, a tensor as its
-- dtype and shape, a module by its class
function A.value_str(v)
  if is_tensor(v) then return ("a %s tensor %s"):format(v.dtype, A.shape_str(v)) end
  local mt = type(v) == "table" and getmetatable(v)
  if mt and mt.__module then return "a module " .. tostring(mt.__class.__name) end
  if type(v) == "table" and mt then return "a table with a metatable" end
  return L.value_str(v)
end

A.shape_str = errors.shape

function A.need_tensor(op, what, x)
  if not is_tensor(x) then A.fail(op, "%s must be a tensor, got %s", what, type(x)) end
end

-- F.f(x, w, {opts}) as well as F.f(x, w, b, {opts}): a table that is not a
-- tensor in the bias's place holds the options
function A.bias_opts(b, opts)
  if opts == nil and type(b) == "table" and not is_tensor(b) then return nil, b end
  return b, opts
end

-- v as a list of n numbers: a number stands for all n
function A.spread(v, n)
  if type(v) ~= "number" then return v end
  local list = {}
  for i = 1, n do list[i] = v end
  return list
end

-- a convolution's tensors (conv3d.lua's; conv.lua has its own copy still):
-- x and w of nd dims, w's first dim a multiple of groups, x's channels what
-- w takes, b nil or one per output channel, one floating dtype for all;
-- returns the output channels
function A.conv_layout(op, x, w, b, nd, groups, transposed)
  local shape_str, fail = A.shape_str, A.fail
  A.need_tensor(op, "input", x)
  A.need_tensor(op, "weight", w)
  if b ~= nil then A.need_tensor(op, "bias", b) end
  if x:dim() ~= nd or w:dim() ~= nd then
    fail(op, "input %s and weight %s must both be %d-D", shape_str(x), shape_str(w), nd)
  end
  if x.dtype ~= w.dtype or (b and b.dtype ~= x.dtype) then
    fail(op, "input, weight and bias must share a dtype, got %s, %s and %s", x.dtype, w.dtype,
      b and b.dtype or "none")
  end
  if not x.dtype:find("float") then
    fail(op, "input and weight must be floating point, got %s %s", x.dtype, shape_str(x))
  end
  if w:size(1) % groups ~= 0 then
    fail(op, "groups = %d must divide the weight's first dim, weight %s", groups, shape_str(w))
  end
  local cin = transposed and w:size(1) or w:size(2) * groups
  local cout = transposed and w:size(2) * groups or w:size(1)
  if x:size(2) ~= cin then
    fail(op, "input %s has %d channels but weight %s with groups = %d takes %d", shape_str(x),
      x:size(2), shape_str(w), groups, cin)
  end
  if b and (b:dim() ~= 1 or b:size(1) ~= cout) then
    fail(op, "bias must have shape {%d}, got %s", cout, shape_str(b))
  end
  return cout
end

-- an integer >= lo (and below 2^53: no inf)
local function is_int(v, lo) return type(v) == "number" and v == math.floor(v) and v >= lo and v < 2 ^ 53 end

-- an option check (loss.lua's form): an integer >= lo, or a list of n of them
function A.ints(n, lo)
  local want = ("an integer >= %d or a list of %d of them"):format(lo, n)
  return function(v)
    if is_int(v, lo) then return nil end
    if type(v) ~= "table" or is_tensor(v) or #v ~= n or table.maxn(v) ~= n then return want end
    for i = 1, n do if not is_int(v[i], lo) then return want end end
  end
end

function A.int(lo)
  return function(v) if not is_int(v, lo) then return ("an integer >= %d"):format(lo) end end
end

function A.boolean(v) if type(v) ~= "boolean" then return "a boolean" end end

function A.positive(v) if type(v) ~= "number" or not (v > 0) then return "a positive number" end end

function A.optional_tensor(v) if v ~= nil and not is_tensor(v) then return "a tensor" end end

A.dtype = L.one_of("float32", "float64", "float16", "bfloat16")

-- the options every module with parameters takes besides its layer's
A.DTYPE = { "dtype", "float32", A.dtype }
A.BIAS = { "bias", true, A.boolean }

-- Whether v is an options table: a plain table (no metatable, so no tensor
-- and no module) without list entries ({2, 2} and {nil, 7} are values,
-- {stride = 2} options)
function A.is_options(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil then return false end
  for k in pairs(v) do if type(k) == "number" then return false end end
  return true
end

-- PyTorch's positional arguments with one options table anywhere among them:
-- for names {"stride", "padding", ...}, the arguments 2, {bias = false} give
-- {stride = 2, bias = false}; a copy, the caller's table is not changed.
-- lead: the names of the arguments before them (for messages, and to count
-- positions as the caller does). An argument past the names
-- (errors.extra_argument), a value after the options table, or an option
-- given both ways raises naming it.
function A.positional(op, lead, names, ...)
  local n, o, opts = select("#", ...), {}, nil
  for i = 1, n do
    local v, pos = select(i, ...), #lead + i
    if opts then
      if v ~= nil then
        A.fail(op, "argument %d (%s) comes after the options table: the options table must be last",
          pos, A.value_str(v))
      end
    elseif A.is_options(v) then
      opts = v
    elseif v ~= nil then
      if i > #names then
        local all = {}
        for k, name in ipairs(lead) do all[k] = name end
        for _, name in ipairs(names) do all[#all + 1] = name end
        errors.extra_argument(op, pos, v, all, ", then an options table", A.value_str)
      end
      o[names[i]] = v
    end
  end
  for k, v in pairs(opts or {}) do
    if o[k] ~= nil then
      A.fail(op, "%s is given twice: as an argument (%s) and in the options table (%s)", tostring(k),
        A.value_str(o[k]), A.value_str(v))
    end
    o[k] = v
  end
  return o
end

-- Raises when a call passes a value past fn's parameters (skip: how many of
-- them the caller does not count, 1 for self): "<op>: extra argument 4
-- ({1}): it takes 3 (in_features, out_features, opts)" (errors.check_arity
-- with this file's way of writing values).
function A.check_arity(op, fn, skip, ...)
  return errors.check_arity(op, fn, skip, A.value_str, ...)
end

-- a module's options: the spec of its function plus extra entries
function A.with(spec, ...)
  local all = {}
  for _, s in ipairs(spec) do all[#all + 1] = s end
  for _, s in ipairs({ ... }) do all[#all + 1] = s end
  return all
end

return A
