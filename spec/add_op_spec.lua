-- Adding a binary elementwise op is its ops.def line, its grad rule and its
-- ember.h declaration (docs/design.md, "How to add an op"): in a copy of the
-- checkout, hypot is added by those three edits alone, the core is built
-- (without CUDA) with warnings as errors, and the new op is checked end to
-- end: its kernels for every dtype (the line's expressions), PyTorch's
-- promotion, broadcasting, the Lua function and method generated from the op
-- table, its gradient by its rule, and the C bad-argument test, which takes
-- its binary ops from ops.def. (The device kernels come from the same line:
-- cuda/tests/test_kernel_math checks every binary line against the CPU.)
local U = dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".")
  .. "/../cli/tests/spec_util.lua")

-- the three edits, each after an anchor line of the file
local EDITS = {
  { file = "core/src/ops/ops.def", after = "COMPARE(EQ, eq, x == y)", before = true, text = [[
BINARY_FLOAT(HYPOT, hypot, grad_hypot, 0, SAVE_IN0 | SAVE_IN1 | SAVE_OUT0, hypotf(x, y), hypot(x, y))
]] },
  { file = "core/src/grad_rules.c", after = "RULE(where)", before = true, text = [[
/* d hypot(a, b) = g a / h, g b / h */
RULE(hypot)
{
    RULE_LOCALS;
    ember_tensor *q = t_div(s, g, OUT(0));
    if (NEED(0)) give(s, &gi[0], t_mul(s, q, IN(0)));
    if (NEED(1)) give(s, &gi[1], t_mul(s, q, IN(1)));
}

]] },
  { file = "core/include/ember/ops.h", after = "EMBER_API int ember_minimum(", text = [[
EMBER_API int ember_hypot(ember_tensor *a, ember_tensor *b, ember_tensor **out);   /* sqrt(a^2 + b^2) */
]] },
}

local function edit(root, e)
  local path = root .. "/" .. e.file
  local s = assert(U.read(path), path)
  local i, j = s:find(e.after, 1, true)
  assert(i, e.file .. ": no line " .. e.after)
  local at = e.before and (s:sub(1, i - 1):match(".*()\n") or 0) or s:find("\n", j, true)
  U.write(path, s:sub(1, at) .. e.text .. s:sub(at + 1))
end

-- run in the copy with its own build
local CHECK = [[
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local ember = require("ember")
local function near(a, b, tol)
  for i = 1, #a do
    if math.abs(a[i] - b[i]) > tol * math.max(1, math.abs(b[i])) then
      error(("element %d: %.17g, expected %.17g"):format(i, a[i], b[i]))
    end
  end
end
-- float32 through hypotf: no overflow where x^2 would (1e20^2 > FLT_MAX)
local a = ember.tensor({ 3, -5, 0, 1e20, 8 })
local b = ember.tensor({ 4, 12, 0, 1e20, -15 })
local h = ember.hypot(a, b)
assert(h.dtype == "float32", h.dtype)
local big = a:tolist()[4] * math.sqrt(2)   -- 1e20 as float32 holds it, times sqrt 2
near(h:tolist(), { 5, 13, 0, big, 17 }, 1e-7)
near(a:hypot(b):tolist(), h:tolist(), 0)
local d = ember.hypot(a:to("float64"), b:to("float64"))
assert(d.dtype == "float64", d.dtype)
near(d:tolist(), { 5, 13, 0, big, 17 }, 1e-15)
-- integers have no integer form: float32, as div
local i = ember.hypot(ember.tensor({ 3, 6 }, { dtype = "int32" }), ember.tensor({ 4, 8 }, { dtype = "int64" }))
assert(i.dtype == "float32", i.dtype)
near(i:tolist(), { 5, 10 }, 0)
-- float16 and a broadcast (2, 1) x (3)
local c = ember.hypot(ember.tensor({ { 3 }, { 5 } }, { dtype = "float16" }),
  ember.tensor({ 4, 12, 0 }, { dtype = "float16" }))
assert(c.dtype == "float16" and c:size(1) == 2 and c:size(2) == 3)
local sq = math.sqrt
near(c:reshape({ 6 }):to("float64"):tolist(), { 5, sq(153), 3, sq(41), 13, 5 }, 1e-3)
-- its rule: d/da = a / h, d/db = b / h
local x, y = ember.tensor({ 3, 0.5 }, { dtype = "float64" }), ember.tensor({ 4, -2 }, { dtype = "float64" })
local gm = ember.autodiff.GradManager():attach({ x, y })
gm:record()
gm:backward(ember.hypot(x, y):sum())
local r = math.sqrt(4.25)
near(x.grad:tolist(), { 3 / 5, 0.5 / r }, 1e-15)
near(y.grad:tolist(), { 4 / 5, -2 / r }, 1e-15)
assert(ember.autodiff.gradcheck(function(p, q) return ember.hypot(p, q) end,
  { ember.randn({ 3, 2 }, { dtype = "float64" }), ember.randn({ 2 }, { dtype = "float64" }) }))
-- a bad call names it
local ok, err = pcall(ember.hypot, ember.ones({ 2 }), ember.ones({ 3 }))
assert(not ok and tostring(err):find("hypot", 1, true), tostring(err))
print("hypot ok")
]]

describe("adding a binary op #noasan", function()
  local have_git = os.execute("git --version > /dev/null 2>&1")
  if have_git ~= 0 and have_git ~= true then
    pending("git is not installed: no clean copy of the checkout to build")
    return
  end

  local src, build, check
  setup(function()
    src = U.tmpdir()
    local copy = U.run("(git ls-files -z -co --exclude-standard | tar -c --null -T - | tar -x -C "
      .. U.quote(src) .. ")", { cwd = U.root })
    assert.are.equal(0, copy.rc, copy.err)
    for _, e in ipairs(EDITS) do edit(src, e) end
    build = U.run("cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=OFF -DEMBER_WERROR=ON > /dev/null"
      .. " && cmake --build build -j 2 --target ember ember_cdef ember_optable dist_cdef nccl_cdef test_bad_args",
      { cwd = src })
    if build.rc == 0 then
      check = U.run({ "luajit", "-e", CHECK }, { cwd = src, env = { EMBER_BUILD_DIR = "build" } })
    end
  end)
  teardown(function() U.rm_rf(src) end)

  it("builds with the line, the rule and the declaration alone", function()
    assert.are.equal(0, build.rc, build.out:sub(-3000) .. build.err:sub(-3000))
  end)

  it("computes it, promotes and broadcasts, binds it in Lua and differentiates it", function()
    assert.is_table(check, "not built")
    assert.are.equal(0, check.rc, check.out .. check.err)
    assert.truthy(check.out:find("hypot ok", 1, true))
  end)

  it("gives the C bad-argument test the new op", function()
    local r = U.run({ src .. "/build/test_bad_args" }, { cwd = src })
    assert.are.equal(0, r.rc, r.out .. r.err)
    local ours = U.run({ U.build_dir() .. "/test_bad_args" })
    local n, m = r.out:match("(%d+) bad calls"), ours.out:match("(%d+) bad calls")
    if n and m then assert.is_true(tonumber(n) > tonumber(m), n .. " calls, this build's " .. m) end
  end)
end)
