-- ember.nn.signature: PyTorch's call signatures for the layers of
-- activation.lua, pool.lua and conv3d.lua. A signature is a list of
-- {name, default, check} (loss.lua's option spec, in PyTorch's positional
-- order); a call passes its values positionally, in a table of options, or
-- both: positional values first, then one options table as the last
-- argument (nn/args.lua's A.positional and A.options). An unknown option, a
-- value given twice, an argument past the last (errors.extra_argument's
-- wording, as everywhere in ember) and a value its check refuses all raise,
-- naming the call.
--
--   local o = S.parse("ember.nn.functional.elu", { "input" }, ELU, ...)   -- o.alpha, o.inplace
local ember = require("ember")
local A = require("ember.nn.args")

local S = {}

-- the values of spec from the arguments ..., defaults filled in: A.positional
-- (lead: the names of the arguments before them, as the caller counts them)
-- then A.options. dtype (A.DTYPE) comes by name only: PyTorch's positional
-- order has device and dtype after the layer's own arguments.
function S.parse(op, lead, spec, ...)
  local names = {}
  for _, s in ipairs(spec) do
    if s ~= A.DTYPE then names[#names + 1] = s[1] end
  end
  return A.options(op, A.positional(op, lead, names, ...), spec)
end

---------------------------------------------------------------- checks
function S.number(v)
  if type(v) ~= "number" or v ~= v then return "a number" end
end
function S.boolean(v) if type(v) ~= "boolean" then return "a boolean" end end
function S.optional(check) return function(v) if v ~= nil then return check(v) end end end
function S.integer(v)
  if type(v) ~= "number" or v ~= math.floor(v) or v ~= v or math.abs(v) >= 2 ^ 53 then return "an integer" end
end

-- an integer >= lo (below 2^53), or a list of n of them; args.lua's checks
S.ints, S.int = A.ints, A.int

return S
