-- Errors that say what the user called (issue 27): a table of bad calls from
-- Lua across the API (wrong types, shapes, dims, values, dtypes, missing
-- arguments, bad options), each with the words its error must contain: the
-- public name the user called (as "ember.<name>", or "ember.Tensor:<name>"
-- for a method), the 1-based dim, the offending value, shape or dtype. No
-- raw FFI or Lua internal error may reach the user (INTERNAL). Each call
-- is its own test; the last one counts the calls (at least 391) and reports
-- how many give a clear error. spec/bad_input_spec.lua checks that ember
-- stays usable after bad input; this spec checks the words.
local H = require("helpers")
local ember = H.ember
local nn, F, optim, A = ember.nn, ember.nn.functional, ember.optim, ember.autodiff

-- the words of an internal error: FFI conversions, Lua's own messages
local INTERNAL = { "cannot convert", "attempt to call", "attempt to index", "attempt to perform",
  "attempt to compare", "attempt to concatenate", "size of C type", "bad argument #", "stack traceback",
  "table expected", "number expected" }

local CASES = {}
-- case(name, fn, words...): fn must raise naming name ("ember.<name>", a
-- method "Tensor:op" also as "ember.<op>", the function every method calls;
-- "a|b": either, for one function's two names, ember.inverse and
-- ember.linalg.inv, or a method raising under its object's class) and
-- containing every word (spaces ignored: shapes print as {2, 3})
local function case(name, fn, ...)
  CASES[#CASES + 1] = { name = name, fn = fn, words = { ... }, line = debug.getinfo(2, "l").currentline }
end
-- a call whose error is not clear yet, with the reason (reviewed): reported as pending
local function known(reason, name, fn, ...)
  case(name, fn, ...)
  CASES[#CASES].known, CASES[#CASES].line = reason, debug.getinfo(2, "l").currentline
end

-- why a call's error is not clear, or "" when it is
local function verdict(c)
  local ok, err = pcall(c.fn)
  if ok then return "did not raise" end
  err = tostring(err)
  for _, bad in ipairs(INTERNAL) do
    if err:find(bad, 1, true) then return ("internal error text %q: %s"):format(bad, err) end
  end
  local names = {}
  for n in c.name:gmatch("[^|]+") do
    names[#names + 1] = "ember." .. n
    local method = n:match("^Tensor:(.+)$")
    if method then names[#names + 1] = "ember." .. method end
  end
  local named = false
  for _, n in ipairs(names) do
    if err:find(n .. ":", 1, true) or err:find(n .. " ", 1, true) then named = true end
  end
  if not named then return ("does not name %s: %s"):format(names[1], err) end
  local flat = err:gsub(" ", "")
  for _, w in ipairs(c.words) do
    if not flat:find((tostring(w):gsub(" ", "")), 1, true) then
      return ("does not say %q: %s"):format(tostring(w), err)
    end
  end
  return ""
end

local function x23() return ember.randn({ 2, 3 }) end
local function i64(t) return ember.tensor(t, { dtype = "int64" }) end

------------------------------------------------------------------ element ops
local UNARY = { "abs", "cos", "exp", "neg", "relu", "sigmoid", "sign", "silu", "sin", "tanh", "erf", "mish",
  "isfinite", "isinf", "isnan", "log", "log1p", "rsqrt", "sqrt", "digamma", "lgamma", "trigamma" }
for _, op in ipairs(UNARY) do
  case(op, function() return ember[op]("x") end, "argument 1", "string")
  case(op, function() return ember[op]() end, "argument 1", "nil")
  case(op, function() return ember[op]({ 1, 2 }) end, "argument 1", "table")
end

local BINARY = { "add", "sub", "mul", "div", "eq", "ne", "ge", "gt", "le", "lt", "maximum", "minimum", "pow" }
for _, op in ipairs(BINARY) do
  case(op, function() return ember[op](x23(), ember.zeros({ 4 })) end, "{2, 3}", "{4}")
  case("Tensor:" .. op, function() return x23()[op](x23(), ember.zeros({ 4, 5 })) end, "{2, 3}", "{4, 5}")
  case(op, function() return ember[op](x23(), "x") end, "argument 2", "string")
  case("Tensor:" .. op, function() return x23()[op](x23(), print) end, "function")
end
for _, op in ipairs({ "add_", "sub_", "mul_", "div_" }) do
  case("Tensor:" .. op, function() return x23()[op](x23(), ember.zeros({ 4, 5 })) end, "{4, 5}")
  case("Tensor:" .. op, function() return x23()[op](x23(), "x") end, "string")
end
for _, op in ipairs({ "logical_and", "logical_or", "logical_xor" }) do
  case(op, function() return ember[op](x23(), ember.zeros({ 5 })) end, "{2, 3}", "{5}")
  case(op, function() return ember[op](x23(), {}) end, "table")
end
case("clamp", function() return ember.clamp(x23(), "a") end, "min", "'a'")
case("clamp", function() return ember.clamp(x23(), 0, "b") end, "max", "'b'")
case("Tensor:clamp", function() return x23():clamp({}) end, "min", "table")
case("Tensor:clamp_", function() return x23():clamp_(0, {}) end, "max", "table")
case("Tensor:fill_", function() return x23():fill_("a") end, "string")
case("Tensor:fill_", function() return x23():fill_(nil) end, "nil")
case("Tensor:pow_", function() return i64({ 2 }):pow_(-1) end, "int64")
case("where", function() return ember.where(x23():gt(0), x23(), ember.zeros({ 4 })) end, "{4}")
case("masked_fill", function() return ember.masked_fill(x23(), x23(), 0) end, "mask", "float32")
case("masked_fill", function() return ember.masked_fill(x23(), x23():gt(0), "a") end, "string")
case("Tensor:masked_fill_", function() return x23():masked_fill_(ember.zeros({ 5 }):gt(0), 0) end, "{5}")

------------------------------------------------------------------ reductions: dims are 1-based
local REDUCE = { "sum", "mean", "max", "min", "argmax", "argmin", "prod", "std", "var", "median", "mode",
  "logsumexp", "all", "any", "cumsum", "cumprod", "logcumsumexp", "softmax", "log_softmax" }
for _, op in ipairs(REDUCE) do
  case(op, function() return ember[op](x23(), 3) end, "dim 3", "2 dims")
  case("Tensor:" .. op, function() return x23()[op](x23(), 0) end, "dim 0")
  case("Tensor:" .. op, function() return x23()[op](x23(), -3) end, "dim -3")
  case(op, function() return ember[op](x23(), 1.5) end, "1.5")
  case(op, function() return ember[op](x23(), "rows") end, "'rows'")
end
for _, op in ipairs({ "sum", "mean", "max", "min", "argmax", "argmin", "logsumexp", "all", "any", "median", "mode" }) do
  case("Tensor:" .. op, function() return x23()[op](x23(), 1, "yes") end, "keepdim", "'yes'")
end
for _, op in ipairs({ "sum", "mean", "std", "var" }) do   -- an options table where the dims go
  case("Tensor:" .. op, function() return x23()[op](x23(), { dim = 2 }) end, "dim", "'dim'")
end
for _, op in ipairs({ "std", "var" }) do
  case("Tensor:" .. op, function() return x23()[op](x23(), 1, true, "no") end, "unbiased", "'no'")
end
case("norm", function() return ember.norm(x23(), "fro2") end, "'fro2'")
case("Tensor:norm", function() return x23():norm({}) end, "table")
case("Tensor:norm", function() return x23():norm(2, 3) end, "dim 3")
case("linalg.norm", function() return ember.linalg.norm(x23(), "nuc2") end, "nuc2")
case("Tensor:kthvalue", function() return x23():kthvalue(4, 2) end, "4")
case("Tensor:kthvalue", function() return x23():kthvalue(1, 3) end, "dim 3")
case("Tensor:topk", function() return x23():topk(4) end, "k = 4", "{2, 3}")
case("Tensor:topk", function() return x23():topk(1, { dim = 3 }) end, "dim 3")
case("Tensor:sort", function() return x23():sort(3) end, "dim 3")
case("Tensor:sort", function() return x23():sort({ dim = 1, descending = "yes" }) end, "descending", "'yes'")
case("Tensor:argsort", function() return x23():argsort(0) end, "dim 0")
case("Tensor:unique", function() return x23():unique({ dim = 3 }) end, "dim 3")
case("Tensor:histc", function() return x23():histc(-1) end, "bins", "-1")
case("Tensor:bincount", function() return x23():bincount() end, "float32")
case("Tensor:bincount", function() return i64({ 1, 2 }):bincount({ minlength = -2 }) end, "minlength", "-2")
case("searchsorted", function() return ember.searchsorted(x23(), ember.zeros({ 5 })) end, "{2, 3}")
case("bucketize", function() return ember.bucketize(x23(), x23()) end, "boundaries", "{2, 3}")

------------------------------------------------------------------ shapes and indexing
local function sh(name, fn, ...) case(name, fn, ...) end
sh("view", function() return ember.view(x23(), { 4, 2 }) end, "{4, 2}", "6")
sh("Tensor:view", function() return x23():view(5, -1) end, "5")
sh("reshape", function() return ember.reshape(x23(), { 7 }) end, "{7}")
sh("Tensor:reshape", function() return x23():reshape({ -1, -1 }) end, "-1")
sh("Tensor:view", function() return x23():view({ 2, "a" }) end, "'a'")
sh("Tensor:reshape", function() return x23():reshape({ 2.5, 2 }) end, "2.5")
sh("transpose", function() return ember.transpose(x23(), 1, 3) end, "dim 3")
sh("Tensor:transpose", function() return x23():transpose(0, 1) end, "dim 0")
sh("Tensor:transpose", function() return x23():transpose(1) end, "dim", "nil")
sh("permute", function() return ember.permute(x23(), { 1, 1 }) end, "{1, 1}")
sh("Tensor:permute", function() return x23():permute(2, 3) end, "dim 3")
sh("Tensor:permute", function() return x23():permute(1) end, "{1}", "2 dims")
sh("Tensor:permute", function() return x23():permute(0, 1) end, "dim 0")
sh("squeeze", function() return ember.squeeze(x23(), 3) end, "dim 3")
sh("Tensor:unsqueeze", function() return x23():unsqueeze(4) end, "dim 4")
sh("Tensor:unsqueeze", function() return x23():unsqueeze(0) end, "dim 0")
sh("unsqueeze", function() return ember.unsqueeze(x23()) end, "nil")
sh("narrow", function() return ember.narrow(x23(), 2, 3, 2) end, "start 3", "dim 2")
sh("Tensor:narrow", function() return x23():narrow(3, 1, 1) end, "dim 3")
sh("Tensor:narrow", function() return x23():narrow(1, 0, 1) end, "start 0")
sh("select", function() return ember.select(x23(), 1, 3) end, "index 3", "dim 1")
sh("Tensor:select", function() return x23():select(3, 1) end, "dim 3")
sh("Tensor:select", function() return x23():select(1, 0) end, "index 0")
sh("flatten", function() return ember.flatten(x23(), 3) end, "3")
sh("Tensor:flatten", function() return x23():flatten(2, 1) end, "2", "1")
sh("expand", function() return ember.expand(x23(), { 3, 3 }) end, "{3, 3}")
sh("Tensor:expand", function() return x23():expand({ 3 }) end, "{3}")
sh("Tensor:expand_as", function() return x23():expand_as(ember.zeros({ 4 })) end, "{4}")
sh("Tensor:view_as", function() return x23():view_as(ember.zeros({ 4 })) end, "{4}")
sh("Tensor:reshape_as", function() return x23():reshape_as(ember.zeros({ 5 })) end, "{5}")
sh("cat", function() return ember.cat({ x23(), ember.zeros({ 3, 3 }) }, 2) end, "{3, 3}", "{2, 3}")
sh("cat", function() return ember.cat({ x23(), x23() }, 3) end, "dim 3")
sh("cat", function() return ember.cat({ x23(), "x" }) end, "2", "string")
sh("cat", function() return ember.cat(x23()) end, "list")
sh("stack", function() return ember.stack({ x23(), ember.zeros({ 3, 2 }) }) end, "{3, 2}")
sh("stack", function() return ember.stack({}) end, "empty")
sh("stack", function() return ember.stack({ x23(), x23() }, 4) end, "dim 4")
sh("chunk", function() return ember.chunk(x23(), 0) end, "0")
sh("Tensor:chunk", function() return x23():chunk(2, 3) end, "dim 3")
sh("split", function() return ember.split(x23(), 0) end, "0")
sh("Tensor:split", function() return x23():split({ 1, 1 }, 2) end, "{1, 1}", "3")
sh("flip", function() return ember.flip(x23(), { 3 }) end, "dim 3")
sh("Tensor:flip", function() return x23():flip({ 1, 1 }) end, "1")
sh("roll", function() return ember.roll(x23(), 1, 3) end, "dim 3")
sh("Tensor:roll", function() return x23():roll("a") end, "shifts")
sh("tile", function() return ember.tile(x23(), { -1 }) end, "-1")
sh("Tensor:repeat", function() return x23()["repeat"](x23(), 2) end, "2")
sh("Tensor:repeat_interleave", function() return x23():repeat_interleave(-1) end, "-1")
sh("repeat_interleave", function() return ember.repeat_interleave(x23(), 2, 3) end, "dim 3")
sh("diagonal", function() return ember.diagonal(x23(), 0, 1, 1) end, "1")
sh("Tensor:diagonal", function() return x23():diagonal(0, 1, 3) end, "dim 3")
sh("diag", function() return ember.diag(ember.zeros({ 2, 2, 2 })) end, "{2, 2, 2}")
sh("Tensor:tril", function() return ember.zeros({ 3 }):tril() end, "{3}")
sh("triu", function() return ember.triu(x23(), 1.5) end, "1.5")
sh("Tensor:t", function() return ember.zeros({ 2, 2, 2 }):t() end, "3")
sh("trace", function() return ember.trace(ember.zeros({ 3 })) end, "{3}")
sh("Tensor:item", function() return x23():item() end, "{2, 3}")
sh("Tensor:size", function() return x23():size(3) end, "dim 3")
sh("Tensor:size", function() return x23():size(0) end, "dim 0")
sh("Tensor:sum_to", function() return x23():sum_to({ 4 }) end, "{4}")
sh("index_select", function() return ember.index_select(x23(), 1, ember.tensor({ 1 })) end, "float32")
sh("Tensor:index_select", function() return x23():index_select(1, i64({ 3 })) end, "index 3", "dim 1")
sh("Tensor:index_select", function() return x23():index_select(3, i64({ 1 })) end, "dim 3")
sh("Tensor:index_select", function() return x23():index_select(1, i64({ 0 })) end, "index 0")
sh("gather", function() return ember.gather(x23(), 3, i64({ { 1 } })) end, "dim 3")
sh("Tensor:gather", function() return x23():gather(2, ember.zeros({ 2, 1 })) end, "float32")
sh("Tensor:gather", function() return x23():gather(2, i64({ { 4 }, { 1 } })) end, "4")
sh("scatter_add", function() return ember.scatter_add(x23(), 3, i64({ { 1 } }), x23()) end, "dim 3")
sh("Tensor:scatter", function() return x23():scatter(2, i64({ { 5 } }), x23()) end, "5")
sh("Tensor:scatter", function() return x23():scatter(2, i64({ { 1 } }), x23(), { reduce = "max2" }) end, "max2")
sh("index_add", function() return ember.index_add(x23(), 1, i64({ 1 }), ember.zeros({ 5 })) end, "source")
sh("Tensor:index_add_", function() return x23():index_add_(3, i64({ 1 }), x23()) end, "dim 3")
sh("index_fill", function() return ember.index_fill(x23(), 1, i64({ 9 }), 0) end, "9")
sh("Tensor:index_fill", function() return x23():index_fill(1, i64({ 1 }), "v") end, "string")
sh("Tensor:copy_", function() return x23():copy_(ember.zeros({ 4 })) end, "{4}")
sh("nonzero", function() return ember.nonzero(x23(), { as_tuple = "yes" }) end, "as_tuple")
sh("meshgrid", function() return ember.meshgrid(x23(), x23(), { indexing = "yx" }) end, "yx")
sh("tensordot", function() return ember.tensordot(x23(), x23(), 1) end, "{2, 3}")
sh("einsum", function() return ember.einsum("ij,jk->ik", x23(), x23()) end, "einsum")

------------------------------------------------------------------ linear algebra
sh("matmul", function() return ember.matmul(x23(), x23()) end, "{2, 3}", "3 != 2")
sh("Tensor:matmul", function() return x23():matmul("x") end, "string")
sh("bmm", function() return ember.bmm(x23(), x23()) end, "{2, 3}")
sh("Tensor:bmm", function() return ember.zeros({ 2, 2, 3 }):bmm(ember.zeros({ 3, 3, 2 })) end, "{3, 3, 2}")
sh("outer", function() return ember.outer(x23(), ember.zeros({ 2 })) end, "{2, 3}")
sh("ger|outer", function() return ember.ger(ember.zeros({ 2 }), "b") end, "string")
sh("addmm", function() return ember.addmm(ember.zeros({ 2, 2 }), x23(), x23()) end, "{2, 3}")
sh("Tensor:addmm", function() return ember.zeros({ 2, 2 }):addmm(x23(), ember.zeros({ 3, 2 }), { beta = "b" }) end,
  "beta")
sh("baddbmm", function() return ember.baddbmm(ember.zeros({ 1, 2, 2 }), x23(), x23()) end, "{2, 3}")
sh("cdist", function() return ember.cdist(x23(), ember.zeros({ 2, 4 })) end, "{2, 4}")
sh("cdist", function() return ember.cdist(x23(), x23(), -1) end, "-1")
local LINALG = { inverse = "inv", det = "det", cholesky = "cholesky", slogdet = "slogdet" }
for _, op in ipairs({ "inverse", "det", "cholesky", "slogdet" }) do
  sh(op .. "|linalg." .. LINALG[op], function() return ember[op](x23()) end, "{2, 3}")
  sh("Tensor:" .. op .. "|linalg." .. LINALG[op], function() return ember.zeros({ 3 })[op](ember.zeros({ 3 })) end,
    "{3}")
end
for _, op in ipairs({ "inv", "det", "cholesky", "slogdet", "eigvalsh", "eigh" }) do
  sh("linalg." .. op .. "|" .. op .. "|linalg.slogdet|linalg.eigh", function() return ember.linalg[op](x23()) end,
    "{2, 3}")
end
sh("linalg.eigh", function() return ember.linalg.eigh(ember.eye(2), "X") end, "X")
sh("linalg.solve", function() return ember.linalg.solve(ember.eye(2), ember.zeros({ 3, 1 })) end, "{3, 1}")
sh("linalg.lstsq", function() return ember.linalg.lstsq(ember.eye(2), ember.zeros({ 3 })) end, "{2, 2}", "B of shape")
sh("linalg.qr", function() return ember.linalg.qr(x23(), "full") end, "full")
sh("linalg.svd", function() return ember.linalg.svd(ember.zeros({ 3 })) end, "{3}")
sh("linalg.svdvals", function() return ember.linalg.svdvals("A") end, "string")
sh("linalg.solve_triangular", function() return ember.linalg.solve_triangular(ember.eye(2), ember.eye(2), {}) end,
  "upper")
sh("solve|linalg.solve", function() return ember.solve(x23(), x23()) end, "{2, 3}")
sh("lstsq|linalg.lstsq", function() return ember.lstsq(ember.eye(2), "B") end, "string")
sh("qr|linalg.qr", function() return ember.qr(ember.eye(2), 5) end, "5")
sh("svd", function() return ember.svd(ember.zeros({ 2 })) end, "{2}")
sh("eigh|linalg.eigh", function() return ember.eigh(ember.zeros({ 2 })) end, "{2}")

------------------------------------------------------------------ creation
local SHAPED = { "zeros", "ones", "empty", "rand", "randn" }
for _, f in ipairs(SHAPED) do
  case(f, function() return ember[f]({ -1 }) end, "-1")
  case(f, function() return ember[f]({ 2.5 }) end, "2.5")
  case(f, function() return ember[f]({ 0 / 0 }) end, "nan")
  case(f, function() return ember[f]("x") end, "'x'")
  case(f, function() return ember[f]({ 2 }, { dtype = "float31" }) end, "float31")
  case(f, function() return ember[f]({ 2 }, { device = "tpu" }) end, "tpu")
  case(f, function() return ember[f]({ 2 }, "float32") end, "'float32'")
  case(f, function() return ember[f]({ 2 }, { requires_grad = true }) end, "requires_grad")
end
for _, f in ipairs({ "zeros_like", "ones_like", "empty_like", "rand_like", "randn_like" }) do
  case(f, function() return ember[f]("x") end, "string")
  case(f, function() return ember[f](x23(), { dtype = "int3" }) end, "int3")
  case(f, function() return ember[f](x23(), { bogus = 1 }) end, "bogus")
end
case("full", function() return ember.full({ 2 }, "a") end, "'a'")
case("full", function() return ember.full({ -2 }, 1) end, "-2")
case("full", function() return ember.full({ 2 }, 1, { dtype = "float8" }) end, "float8")
case("full_like", function() return ember.full_like(x23(), {}) end, "table")
case("arange", function() return ember.arange(0, 5, 0) end, "step", "0")
case("arange", function() return ember.arange(0, "b") end, "string")
case("arange", function() return ember.arange(0 / 0) end, "nan")
case("arange", function() return ember.arange(5, 0, 1) end, "5", "0")
case("linspace", function() return ember.linspace(0, 1, -3) end, "-3")
case("linspace", function() return ember.linspace(0, 1, 2.5) end, "2.5")
case("linspace", function() return ember.linspace(0, "b", 3) end, "string")
case("linspace", function() return ember.linspace() end, "nil")
case("linspace", function() return ember.linspace(0, 1) end, "steps", "nil")
case("eye", function() return ember.eye(-1) end, "-1")
case("eye", function() return ember.eye(2, 1.5) end, "1.5")
case("eye", function() return ember.eye("n") end, "'n'")
case("randint", function() return ember.randint(5, 2, { 3 }) end, "5", "2")
case("randint", function() return ember.randint(0, 5, { -3 }) end, "-3")
case("randint", function() return ember.randint(0, 5) end, "shape")
case("randperm", function() return ember.randperm(-1) end, "-1")
case("randperm", function() return ember.randperm(2 ^ 60) end, "1.1529215046068e+18")
case("randperm", function() return ember.randperm(2.5) end, "2.5")
case("tensor", function() return ember.tensor({ { 1, 2 }, { 3 } }) end, "ragged", "depth 2")
case("tensor", function() return ember.tensor({ 1, "a" }) end, "string")
case("tensor", function() return ember.tensor({ 2 ^ 70 }, { dtype = "int64" }) end, "int64")
case("tensor", function() return ember.tensor({ 0 / 0 }, { dtype = "int32" }) end, "nan", "int32")
case("tensor", function() return ember.tensor({ 300 }, { dtype = "uint8" }) end, "300", "uint8")
case("tensor", function() return ember.tensor({ 1 }, { dtype = "complex64" }) end, "complex64")
case("tensor", function() return ember.tensor(function() end) end, "function")
case("bernoulli", function() return ember.bernoulli(ember.full({ 2 }, 1.5)) end, "1.5")
case("multinomial", function() return ember.multinomial(ember.zeros({ 3 }), 1) end, "multinomial")
case("multinomial", function() return ember.multinomial(ember.ones({ 3 }), 5) end, "5")
case("Tensor:uniform_", function() return x23():uniform_(1, 0) end, "1", "0")
case("Tensor:normal_", function() return x23():normal_(0, -1) end, "-1")
case("Tensor:exponential_", function() return x23():exponential_(-2) end, "-2")
case("Tensor:geometric_", function() return x23():geometric_(2) end, "2")
case("manual_seed", function() return ember.manual_seed("s") end, "'s'")
case("manual_seed", function() return ember.manual_seed(-1) end, "-1")
case("set_rng_state", function() return ember.set_rng_state("x") end, "string")
case("Generator", function() return ember.Generator(1.5) end, "1.5")

------------------------------------------------------------------ casts and the runtime
case("Tensor:to", function() return x23():to("float31") end, "float31")
case("Tensor:to", function() return x23():to({ dtype = "int3" }) end, "int3")
case("Tensor:to", function() return x23():to({ memory_format = "channels_last" }) end, "memory_format")
case("Tensor:to", function() return x23():to(5) end, "5")
case("set_memory_limit", function() return ember.set_memory_limit(-5) end, "-5")
case("set_memory_limit", function() return ember.set_memory_limit("a") end, "'a'")
case("set_num_threads", function() return ember.set_num_threads(0) end, "0")
case("set_num_threads", function() return ember.set_num_threads(1.5) end, "1.5")
case("set_grad_enabled", function() return ember.set_grad_enabled("yes") end, "boolean", "string")
case("set_deterministic", function() return ember.set_deterministic(1) end, "boolean", "1")
case("set_dnnl_enabled", function() return ember.set_dnnl_enabled({}) end, "boolean", "a table")
case("set_dnnl_matmul_enabled", function() return ember.set_dnnl_matmul_enabled("on") end, "boolean", "'on'")
case("memory_stats", function() return ember.memory_stats("tpu") end, "tpu")
case("no_grad", function() return ember.no_grad(5) end, "number")
case("enable_grad", function() return ember.enable_grad("f") end, "string")
case("autocast", function() return ember.autocast("float31", function() end) end, "float31")
case("autocast", function() return ember.autocast("float16", 5) end, "number")
case("profile", function() return ember.profile(nil) end, "nil")
case("ones", function()
  ember.set_memory_limit(1000)
  local ok, err = pcall(ember.ones, { 1000, 1000 })
  ember.set_memory_limit(0)
  if not ok then error(err, 0) end
end, "out of memory", "{1000, 1000}")
case("zeros", function()
  ember.set_memory_limit(1000)
  local ok, err = pcall(ember.zeros, { 1000, 1000 })
  ember.set_memory_limit(0)
  if not ok then error(err, 0) end
end, "out of memory")

------------------------------------------------------------------ nn.functional
local x4 = function() return ember.randn({ 2, 3, 6, 6 }) end
case("nn.functional.linear", function() return F.linear(x23(), ember.zeros({ 2, 4 })) end, "{2, 4}")
case("nn.functional.linear", function() return F.linear(x23(), ember.zeros({ 2, 3 }), ember.zeros({ 3 })) end, "{3}")
case("nn.functional.conv2d", function() return F.conv2d(x4(), ember.zeros({ 4, 2, 3, 3 })) end, "{4, 2, 3, 3}")
case("nn.functional.conv2d", function() return F.conv2d(x23(), ember.zeros({ 4, 3, 3, 3 })) end, "{2, 3}")
case("nn.functional.conv2d", function() return F.conv2d(x4(), ember.zeros({ 4, 3, 3, 3 }), nil, { stride = 0 }) end,
  "stride", "0")
case("nn.functional.conv2d", function() return F.conv2d(x4(), ember.zeros({ 4, 3, 3, 3 }), nil, { padding = -1 }) end,
  "padding", "-1")
case("nn.functional.conv1d", function() return F.conv1d(x4(), ember.zeros({ 4, 3, 3 })) end, "{2, 3, 6, 6}")
case("nn.functional.conv_transpose2d", function() return F.conv_transpose2d(x4(), ember.zeros({ 2, 4, 3, 3 })) end,
  "{2, 4, 3, 3}")
case("nn.functional.max_pool2d", function() return F.max_pool2d(x4(), 0) end, "kernel", "0")
case("nn.functional.max_pool2d", function() return F.max_pool2d(x4(), 7) end, "7")
case("nn.functional.avg_pool2d", function() return F.avg_pool2d(x23(), 2) end, "{2, 3}")
case("nn.functional.avg_pool2d", function() return F.avg_pool2d(x4(), 2, 1, 2) end, "padding", "2")
case("nn.functional.adaptive_avg_pool2d", function() return F.adaptive_avg_pool2d(x4(), 0) end, "0")
case("nn.functional.adaptive_max_pool2d", function() return F.adaptive_max_pool2d(x23(), 2) end, "{2, 3}")
case("nn.functional.max_pool1d", function() return F.max_pool1d(x4(), 2) end, "{2, 3, 6, 6}")
case("nn.functional.max_pool3d", function() return F.max_pool3d(x23(), 2) end, "{2, 3}")
case("nn.functional.softmax", function() return F.softmax(x23(), 3) end, "dim 3")
case("nn.functional.log_softmax", function() return F.log_softmax(x23(), 0) end, "dim 0")
case("nn.functional.cross_entropy", function() return F.cross_entropy(x23(), i64({ 1, 5 })) end, "5", "1..3")
case("nn.functional.cross_entropy", function() return F.cross_entropy(x23(), i64({ 1, 0 })) end, "0")
case("nn.functional.cross_entropy", function() return F.cross_entropy(x23(), ember.zeros({ 2 })) end, "float32")
case("nn.functional.cross_entropy", function() return F.cross_entropy(x23(), i64({ 1, 2, 3 })) end, "{3}")
case("nn.functional.cross_entropy", function() return F.cross_entropy(x23(), i64({ 1, 2 }), { reduction = "avg" }) end,
  "avg")
case("nn.functional.nll_loss", function() return F.nll_loss(x23(), i64({ 4, 1 })) end, "4")
case("nn.functional.mse_loss", function() return F.mse_loss(x23(), ember.zeros({ 3, 2 })) end, "{3, 2}")
case("nn.functional.l1_loss", function() return F.l1_loss(x23(), ember.zeros({ 4 })) end, "{4}")
case("nn.functional.huber_loss", function() return F.huber_loss(x23(), x23(), { delta = -1 }) end, "delta", "-1")
case("nn.functional.smooth_l1_loss", function() return F.smooth_l1_loss(x23(), x23(), { beta = -1 }) end, "-1")
case("nn.functional.binary_cross_entropy", function() return F.binary_cross_entropy(x23(), ember.zeros({ 5 })) end,
  "{5}")
case("nn.functional.binary_cross_entropy_with_logits",
  function() return F.binary_cross_entropy_with_logits(x23(), ember.zeros({ 5 })) end, "{5}")
case("nn.functional.kl_div", function() return F.kl_div(x23(), x23(), { reduction = "sum2" }) end, "sum2")
case("nn.functional.dropout", function() return F.dropout(x23(), 1.5) end, "1.5")
case("nn.functional.dropout", function() return F.dropout(x23(), -0.1) end, "-0.1")
case("nn.functional.dropout", function() return F.dropout(x23(), "p") end, "'p'")
case("nn.functional.embedding", function() return F.embedding(i64({ 4 }), ember.zeros({ 3, 2 })) end, "4")
case("nn.functional.embedding", function() return F.embedding(ember.zeros({ 2 }), ember.zeros({ 3, 2 })) end, "float32")
case("nn.functional.one_hot", function() return F.one_hot(i64({ 4 }), 3) end, "4")
case("nn.functional.one_hot", function() return F.one_hot(ember.zeros({ 2 }), 3) end, "float32")
case("nn.functional.layer_norm", function() return F.layer_norm(x23(), { 4 }) end, "{4}")
case("nn.functional.rms_norm", function() return F.rms_norm(x23(), { 4 }) end, "{4}")
case("nn.RMSNorm|nn.functional.rms_norm", function() return nn.RMSNorm(4)(x23()) end, "{2, 3}")
case("nn.functional.group_norm", function() return F.group_norm(x4(), 2) end, "2", "3")
case("nn.functional.batch_norm", function()
  return F.batch_norm(x23(), ember.zeros({ 4 }), ember.ones({ 4 }))
end, "{4}")
case("nn.functional.instance_norm", function() return F.instance_norm(x23()) end, "{2, 3}")
case("nn.functional.pad", function() return F.pad(x4(), { 1 }) end, "even list", "{2, 3, 6, 6}")
case("nn.functional.pad", function() return F.pad(x4(), { 1, 1 }, "mirror") end, "mirror")
case("nn.functional.interpolate", function() return F.interpolate(x4(), { scale_factor = 2, mode = "cubic2" }) end,
  "cubic2")
case("nn.functional.interpolate", function() return F.interpolate(x4(), {}) end, "size")
case("nn.functional.gelu", function() return F.gelu(x23(), { approximate = "fast" }) end, "fast")
case("nn.functional.leaky_relu", function() return F.leaky_relu(x23(), "s") end, "'s'")
case("nn.functional.elu", function() return F.elu("x") end, "string")
case("nn.functional.glu", function() return F.glu(x23(), 2) end, "3")
case("nn.functional.prelu", function() return F.prelu(x23(), ember.zeros({ 4 })) end, "{4}")
case("nn.functional.hardtanh", function() return F.hardtanh(x23(), 2, 1) end, "2", "1")
case("nn.functional.softplus", function() return F.softplus(x23(), 0) end, "0")
case("nn.functional.pixel_shuffle", function() return F.pixel_shuffle(x4(), 2) end, "3")
case("nn.functional.pixel_unshuffle", function() return F.pixel_unshuffle(ember.zeros({ 1, 1, 3, 3 }), 2) end, "3")
case("nn.functional.scaled_dot_product_attention", function()
  local q = ember.zeros({ 1, 2, 3, 4 })
  return F.scaled_dot_product_attention(q, ember.zeros({ 1, 2, 3, 5 }), q)
end, "{1, 2, 3, 5}")
case("nn.functional.relu", function() return F.relu(nil) end, "nil")
case("nn.functional.sigmoid", function() return F.sigmoid({}) end, "table")
case("nn.functional.tanh", function() return F.tanh(5) end, "number")
case("nn.functional.silu", function() return F.silu("a") end, "string")

------------------------------------------------------------------ modules
case("nn.Linear", function() return nn.Linear(3, 2)(ember.zeros({ 4, 5 })) end, "{4, 5}", "3")
case("nn.Linear", function() return nn.Linear(-1, 2) end, "-1")
case("nn.Linear", function() return nn.Linear(2.5, 2) end, "2.5")
case("nn.Linear", function() return nn.Linear("a", 2) end, "in_features", "got a")
case("nn.Linear", function() return nn.Linear(3, 2, { bias = "no" }) end, "bias")
case("nn.Linear", function() return nn.Linear(3, 2, { dtype = "int64" }) end, "int64")
case("nn.Conv2d", function() return nn.Conv2d(3, 2, 3)(ember.zeros({ 1, 4, 5, 5 })) end, "{1, 4, 5, 5}")
case("nn.Conv2d", function() return nn.Conv2d(3, 2, 0) end, "0")
case("nn.Conv2d", function() return nn.Conv2d(3, 2, 3, 1, 0, 1, 2) end, "groups", "2")
case("nn.Conv2d", function() return nn.Conv2d(3, 2, 3, { padding_mode = "mirror" }) end, "padding_mode")
case("nn.Conv1d", function() return nn.Conv1d(3, 2, 3)(x4()) end, "{2, 3, 6, 6}")
case("nn.ConvTranspose2d|nn.functional.conv_transpose2d",
  function() return nn.ConvTranspose2d(3, 2, 3, 1, 0, 2)(x4()) end, "output_padding")
case("nn.BatchNorm2d", function() return nn.BatchNorm2d(4)(x4()) end, "{2, 3, 6, 6}")
case("nn.BatchNorm1d", function() return nn.BatchNorm1d(0) end, "0")
case("nn.BatchNorm1d", function() return nn.BatchNorm1d(3, { momentum = "m" }) end, "momentum")
case("nn.LayerNorm|nn.functional.layer_norm", function() return nn.LayerNorm(4)(x23()) end, "{2, 3}")
case("nn.GroupNorm", function() return nn.GroupNorm(2, 3) end, "2", "3")
case("nn.Embedding", function() return nn.Embedding(3, 2)(i64({ 4 })) end, "4")
case("nn.Embedding", function() return nn.Embedding(3, 2, { padding_idx = 5 }) end, "padding_idx")
case("nn.Dropout", function() return nn.Dropout(2) end, "2")
case("nn.MaxPool2d", function() return nn.MaxPool2d(0) end, "0")
case("nn.AvgPool2d", function() return nn.AvgPool2d(2)(x23()) end, "{2, 3}")
case("nn.LSTM", function() return nn.LSTM(3, 4)(ember.zeros({ 2, 5, 2 })) end, "{2, 5, 2}")
case("nn.GRU", function() return nn.GRU(3, 0) end, "0")
case("nn.RNN", function() return nn.RNN(3, 4, { nonlinearity = "sin" }) end, "sin")
case("nn.LSTMCell", function() return nn.LSTMCell(3, 4)(ember.zeros({ 2, 5 })) end, "{2, 5}")
case("nn.Flatten|flatten", function() return nn.Flatten(3)(x23()) end, "3")
case("nn.Softmax|softmax", function() return nn.Softmax(3)(x23()) end, "dim 3")
case("nn.Sequential", function() return nn.Sequential(nn.Linear(3, 2), 5) end, "2", "number")
case("nn.ModuleList", function() return nn.ModuleList({ 5 }) end, "module", "5")
case("nn.Upsample", function() return nn.Upsample({ mode = "cubic2", scale_factor = 2 }) end, "cubic2")
case("nn.PixelShuffle", function() return nn.PixelShuffle(0) end, "0")
case("nn.Unflatten", function() return nn.Unflatten(2, { 4 })(x23()) end, "{4}")
case("nn.TransformerEncoderLayer", function() return nn.TransformerEncoderLayer(5, 2, 8) end, "5", "2")
case("nn.MultiheadAttention", function() return nn.MultiheadAttention(5, 2) end, "5", "2")
case("nn.CrossEntropyLoss", function() return nn.CrossEntropyLoss({ reduction = "avg" }) end, "avg")
case("nn.MSELoss", function() return nn.MSELoss()(x23(), ember.zeros({ 3 })) end, "{3}")
case("Module:load_state_dict|nn.Linear", function()
  return nn.Linear(3, 2):load_state_dict({ weight = ember.zeros({ 3, 3 }), bias = ember.zeros({ 2 }) })
end, "weight", "{3, 3}")
case("Module:load_state_dict|nn.Linear", function() return nn.Linear(3, 2):load_state_dict({}) end, "missing", "weight")
case("Module:register_buffer|nn.Linear", function() return nn.Linear(3, 2):register_buffer(5, x23()) end, "name", "5")
case("Module:register_parameter|nn.Linear", function() return nn.Linear(3, 2):register_parameter("p", 5) end,
  "'p'", "5")
case("Module:train", function() return nn.Linear(3, 2):train("yes") end, "boolean", "string")
case("Module:to|nn.Linear", function() return nn.Linear(3, 2):to("float31") end, "float31")
case("nn.init.kaiming_uniform_", function() return nn.init.kaiming_uniform_(x23(), 0, "fan_mid") end, "fan_mid")
case("nn.init.calculate_gain", function() return nn.init.calculate_gain("swish2") end, "swish2")
case("nn.init.xavier_uniform_", function() return nn.init.xavier_uniform_(ember.zeros({ 3 })) end, "{3}")
case("nn.init.orthogonal_", function() return nn.init.orthogonal_(ember.zeros({ 3 })) end, "{3}")
case("nn.init.normal_", function() return nn.init.normal_(x23(), 0, -1) end, "-1")
case("nn.utils.clip_grad_norm_|optim.clip_grad_norm", function() return nn.utils.clip_grad_norm_({ x23() }, -1) end,
  "-1")
case("nn.utils.vector_to_parameters", function()
  return nn.utils.vector_to_parameters(ember.zeros({ 5 }), nn.Linear(3, 2):parameters())
end, "5", "8")

------------------------------------------------------------------ optim
local function p3() return { ember.zeros({ 3 }) } end
case("optim.SGD", function() return optim.SGD(p3(), { lr = -1 }) end, "lr", "-1")
case("optim.SGD", function() return optim.SGD(p3(), { lr = 0.1, momentum = -1 }) end, "momentum", "-1")
case("optim.SGD", function() return optim.SGD({ 5 }, { lr = 0.1 }) end, "params[1]", "5")
case("optim.SGD", function() return optim.SGD(p3(), { lr = "fast" }) end, "lr", "fast")
case("optim.SGD", function() return optim.SGD(p3(), { lr = 0.1, nesterov = true }) end, "nesterov")
case("optim.Adam", function() return optim.Adam(p3(), { betas = { 1.5, 0.9 } }) end, "1.5")
case("optim.Adam", function() return optim.Adam(p3(), { eps = -1 }) end, "eps", "-1")
case("optim.AdamW", function() return optim.AdamW(p3(), { weight_decay = -1 }) end, "weight_decay", "-1")
case("optim.RMSprop", function() return optim.RMSprop(p3(), { alpha = -1 }) end, "alpha", "-1")
case("optim.Adagrad", function() return optim.Adagrad(p3(), { lr_decay = -1 }) end, "lr_decay", "-1")
case("optim.Adamax", function() return optim.Adamax(p3(), { betas = { 0.9 } }) end, "betas")
case("optim.NAdam", function() return optim.NAdam(p3(), { momentum_decay = -1 }) end, "momentum_decay", "-1")
case("optim.LBFGS", function() return optim.LBFGS(p3(), { history_size = 0 }) end, "history_size", "0")
case("optim.LBFGS", function() return optim.LBFGS(p3(), { line_search_fn = "wolfe" }) end, "wolfe")
case("optim.clip_grad_norm", function() return optim.clip_grad_norm(p3(), "n") end, "max_norm", "n")
case("optim.clip_grad_value", function() return optim.clip_grad_value(p3(), -1) end, "-1")
case("Optimizer:step|optim.SGD", function() return optim.SGD(p3(), { lr = 0.1 }):step(5) end, "closure", "5")
case("Optimizer:add_param_group|optim.SGD", function() return optim.SGD(p3(), { lr = 0.1 }):add_param_group({}) end,
  "params")
case("Optimizer:zero_grad", function() return optim.SGD(p3(), { lr = 0.1 }):zero_grad("no") end, "set_to_none", "'no'")
case("Optimizer:load_state_dict|optim.SGD", function() return optim.SGD(p3(), { lr = 0.1 }):load_state_dict(5) end,
  "5")
case("optim.lr_scheduler.StepLR", function() return optim.lr_scheduler.StepLR(optim.SGD(p3(), { lr = 0.1 }), {}) end,
  "step_size")
case("optim.lr_scheduler.StepLR", function() return optim.lr_scheduler.StepLR(5, { step_size = 2 }) end,
  "optimizer", "5")
case("optim.lr_scheduler.CosineAnnealingLR",
  function() return optim.lr_scheduler.CosineAnnealingLR(optim.SGD(p3(), { lr = 0.1 }), { T_max = 0 }) end, "T_max")
case("optim.lr_scheduler.MultiStepLR",
  function() return optim.lr_scheduler.MultiStepLR(optim.SGD(p3(), { lr = 0.1 }), { milestones = { "a" } }) end,
  "milestones")
case("optim.lr_scheduler.ReduceLROnPlateau",
  function() return optim.lr_scheduler.ReduceLROnPlateau(optim.SGD(p3(), { lr = 0.1 }), { mode = "mid" }) end, "mid")
case("optim.lr_scheduler.OneCycleLR",
  function() return optim.lr_scheduler.OneCycleLR(optim.SGD(p3(), { lr = 0.1 }), { max_lr = 1 }) end, "total_steps")

------------------------------------------------------------------ autodiff
local function gm(w) return A.GradManager():attach({ w or ember.zeros({ 2 }) }) end
case("autodiff.gradcheck", function() return A.gradcheck(5, {}) end, "number")
case("autodiff.gradcheck", function() return A.gradcheck(function(a) return a end, 5) end, "number")
case("autodiff.gradgradcheck", function() return A.gradgradcheck("f", {}) end, "string")
case("autodiff.grad", function() return A.grad(5) end, "number")
case("autodiff.jacobian", function() return A.jacobian(5, ember.zeros({ 2 })) end, "number")
case("autodiff.vjp", function() return A.vjp(function(a) return a end, ember.zeros({ 2 }), ember.zeros({ 3 })) end,
  "{3}")
case("autodiff.register_grad_rule", function() return A.register_grad_rule("nosuchop", function() end) end,
  "nosuchop")
case("autodiff.register_grad_rule", function() return A.register_grad_rule("abs", 5) end, "number")
case("autodiff.Function", function() return A.Function(5) end, "name")
case("autodiff.Function", function() return A.Function({ name = "f" }) end, "forward")
case("autodiff.Function", function()
    local five = A.Function({ name = "five", forward = function() return 5 end,
      backward = function(_, g) return g end })
    return five(x23())
  end, "five", "number")
case("autodiff.checkpoint", function() return A.checkpoint(5) end, "number")
case("autodiff.set_debug", function() return A.set_debug("on") end, "string")
case("GradManager:attach|GradManager.attach", function() return A.GradManager():attach(5) end, "number")
case("GradManager:attach|GradManager.attach", function() return A.GradManager():attach({ i64({ 1 }) }) end, "int64")
case("GradManager:backward|GradManager.backward", function() return gm():backward(5) end, "y")
case("GradManager:backward|GradManager.backward", function()
  local w = ember.zeros({ 2 })
  local m = gm(w)
  m:record()
  return m:backward((w * 2):sum(), ember.zeros({ 3 }))
end, "{3}")
case("autodiff.graph.register_multi_grad_hook",
  function() return A.graph.register_multi_grad_hook({ 5 }, function() end) end, "entry 1", "5")
case("autodiff.graph.register_multi_grad_hook",
  function() return A.graph.register_multi_grad_hook({ x23() }, function() end, { mode = "some" }) end, "some")
case("Tensor:register_hook", function() return x23():register_hook(5) end, "number")

------------------------------------------------------------------ data, io, amp, distributions
case("data.TensorDataset", function() return ember.data.TensorDataset(ember.zeros({ 4, 2 }), ember.zeros({ 3 })) end,
  "4", "3")
case("data.TensorDataset", function() return ember.data.TensorDataset(5) end, "number")
case("data.DataLoader",
  function() return ember.data.DataLoader(ember.data.TensorDataset(x23()), { batch_size = 0 }) end,
  "batch_size", "0")
case("data.DataLoader", function() return ember.data.DataLoader(5) end, "number")
case("data.DataLoader", function()
  local ds = { size = function() return 4 end, get = function() return nil end }
  for _ in ember.data.DataLoader(ds, { batch_size = 2 }):iter() do end
end, "DataLoader", "nil")
case("TensorDataset:get", function() return ember.data.TensorDataset(x23()):get(3) end, "3")
case("data.permutation", function() return ember.data.permutation(-1, 1, 1) end, "-1")
case("data.mnist_idx", function() return ember.data.mnist_idx("/nonexistent/images") end, "/nonexistent/images")
case("data.fashion_mnist", function() return ember.data.fashion_mnist("validation") end, "validation")
case("load", function() return ember.load("/nonexistent/file.safetensors") end, "/nonexistent/file.safetensors")
case("load", function() return ember.load(5) end, "number")
case("save", function() return ember.save("/nonexistent/dir/f.safetensors", { a = x23() }) end, "/nonexistent/dir")
case("save", function() return ember.save(os.tmpname(), { a = print }) end, "function")
case("save", function() return ember.save(os.tmpname(), { a = x23() }, { n = {} }) end, "n", "table")
case("io.header", function() return ember.io.header("/nonexistent") end, "/nonexistent")
case("io.json.decode", function() return ember.io.json.decode("{1: 2}") end, "json")
case("io.json.encode", function() return ember.io.json.encode(function() end) end, "function")
case("amp.GradScaler", function() return ember.amp.GradScaler({ init_scale = -1 }) end, "init_scale", "-1")
case("amp.GradScaler", function() return ember.amp.GradScaler({ growth_factor = 0.5 }) end, "growth_factor")
case("amp.autocast|autocast", function() return ember.amp.autocast("int64", function() end) end, "int64")
case("distributions.Normal", function() return ember.distributions.Normal(0, -1) end, "scale", "-1")
case("distributions.Normal", function() return ember.distributions.Normal("a", 1) end, "string")
case("distributions.Uniform", function() return ember.distributions.Uniform(1, 0) end, "low", "high", "1")
case("distributions.Bernoulli", function() return ember.distributions.Bernoulli(1.5) end, "1.5")
case("distributions.Categorical", function() return ember.distributions.Categorical(ember.tensor({ -1, 2 })) end, "-1")
case("distributions.Gamma", function() return ember.distributions.Gamma(-1, 1) end, "-1")
case("distributions.Beta", function() return ember.distributions.Beta(1, 0) end, "0")
case("distributions.Dirichlet", function() return ember.distributions.Dirichlet(ember.tensor({ 1, -2 })) end, "-2")
case("distributions.MultivariateNormal",
  function()
    return ember.distributions.MultivariateNormal(ember.zeros({ 2 }), { covariance_matrix = ember.eye(3) })
  end,
  "{3, 3}")
case("distributions.Independent", function() return ember.distributions.Independent(5, 1) end, "number")
case("distributions.kl_divergence", function() return ember.distributions.kl_divergence(5, 6) end, "number")
case("plot.svg", function() return ember.plot.svg(nil, 5) end, "number")
case("plot.ticks", function() return ember.plot.ticks(1, 0 / 0) end, "nan")
case("progress.new|progress", function() return ember.progress.new(-1) end, "total", "-1")
case("Bar:set_description", function()
  return ember.progress.new(3, { file = io.open("/dev/null", "w") }):set_description({})
end, "desc", "a table")
case("progress.format_time", function() return ember.progress.format_time("t") end, "'t'")
case("distributed.all_reduce", function() return ember.distributed.all_reduce(x23(), "median") end, "median")
case("distributed.broadcast", function() return ember.distributed.broadcast(x23(), 3) end, "3")
case("distributed.make_allreduce_cb", function() return ember.distributed.make_allreduce_cb("max") end, "max")


describe("a bad call from Lua", function()
  local clear, pending_n = 0, 0
  for i, c in ipairs(CASES) do
    local label = ("#%d %s (line %d)"):format(i, c.name, c.line)
    if c.known then
      pending_n = pending_n + 1
      pending(label .. ": " .. c.known)
    else
      it(label .. " raises naming the call and " .. table.concat(c.words, ", "), function()
        local why = verdict(c)
        if why == "" then clear = clear + 1 end
        assert(why == "", why)
      end)
    end
  end
  it("is one of at least 391, and each gives a clear error", function()
    assert(#CASES >= 391, #CASES .. " bad calls")
    print(("\nbad_calls_spec: %d of %d bad calls give a clear error (%d known)"):format(clear, #CASES, pending_n))
  end)
end)
