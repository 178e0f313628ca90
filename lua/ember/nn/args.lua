-- ember.nn.args: the argument checks shared by the layers of conv.lua,
-- norm.lua and resize.lua: errors at the caller's line that name the call
-- (loss.lua's fail), option tables checked against a spec with defaults
-- (loss.lua's options), and PyTorch's spatial arguments (a number, or one
-- number per spatial dim). Not here: the layers themselves.
local ember = require("ember")
local L = require("ember.nn.loss")

local A = { fail = L.fail, options = L.options, one_of = L.one_of, value_str = L.value_str }
local is_tensor = ember.is_tensor

A.shape_str = require("ember.errors").shape

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

local function is_int(v, lo) return type(v) == "number" and v == math.floor(v) and v >= lo end

-- an option check (loss.lua's form): an integer >= lo, or a list of n of them
function A.ints(n, lo)
  local want = ("an integer >= %d or a list of %d of them"):format(lo, n)
  return function(v)
    if is_int(v, lo) then return nil end
    if type(v) ~= "table" or is_tensor(v) or #v ~= n then return want end
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

-- a module's options: the spec of its function plus extra entries
function A.with(spec, ...)
  local all = {}
  for _, s in ipairs(spec) do all[#all + 1] = s end
  for _, s in ipairs({ ... }) do all[#all + 1] = s end
  return all
end

return A
