-- Shared helpers for the specs: loads ember from the source tree and offers
-- approximate comparisons of tensors with nested Lua tables.
local ember = require("ember")
local H = { ember = ember }

local function flatten(x, out)
  out = out or {}
  if type(x) == "table" then
    for i = 1, #x do flatten(x[i], out) end
  else
    out[#out + 1] = x
  end
  return out
end
H.flatten = flatten

-- a true negative zero. LuaJIT on ARM64 keeps numbers with integral values as
-- integers (its dual-number mode): the literal -0 (and -0.0) negates the
-- integer 0 and reads as +0 there. A division is done in floating point on
-- every platform; compare signs of zeros through 1 / x.
H.neg_zero = -1 / math.huge

-- the keys of a table, sorted
function H.sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

-- an options table as "k=v" words, sorted, joined by sep (a list value as {a,b}):
-- the name of a test that runs with those options
function H.opts_str(o, sep)
  local words = {}
  for k, v in pairs(o) do
    words[#words + 1] = k .. "=" .. (type(v) == "table" and "{" .. table.concat(v, ",") .. "}" or tostring(v))
  end
  table.sort(words)
  return table.concat(words, sep)
end

-- assert that f's gradients and second derivatives at inputs match finite differences
function H.gradchecks(f, inputs)
  assert(ember.autodiff.gradcheck(f, inputs) == true, "gradcheck failed")
  assert(ember.autodiff.gradgradcheck(f, inputs) == true, "gradgradcheck failed")
end

-- inside a describe block: for each {f, message} of cases a test (busted's it)
-- that f raises exactly message
function H.error_cases(it, cases)
  for i, case in ipairs(cases) do
    it(("%d: %s"):format(i, case[2]), function() require("luassert").has_error(case[1], case[2]) end)
  end
end

-- ember.tensor(values, opts) and a GradManager attached to it, recording
function H.recording(values, opts)
  local x = ember.tensor(values, opts)
  local gm = ember.autodiff.GradManager():attach(x)
  gm:record()
  return x, gm
end

-- assert that each key of fns names a function of ember.nn.functional that
-- has a case in cases (a fixture's list, each case naming its .fn)
function H.has_cases(cases, fns)
  local seen = {}
  for _, c in ipairs(cases) do seen[c.fn] = true end
  for fn in pairs(fns) do
    assert(type(ember.nn.functional[fn]) == "function", fn .. " is not a function of ember.nn.functional")
    assert(seen[fn], "no case for " .. fn)
  end
end

-- assert that tensor t has the given shape and values (nested table or number)
function H.same(t, expected, tol, shape)
  tol = tol or 1e-5
  local got = t:tolist()
  local a, b = flatten(got), flatten(expected)
  assert(#a == #b, ("element count %d ~= expected %d"):format(#a, #b))
  for i = 1, #a do
    local x, y = a[i], b[i]
    if type(y) == "boolean" or type(x) == "boolean" then
      assert(x == y, ("element %d: got %s, expected %s"):format(i, tostring(x), tostring(y)))
    elseif y ~= y then
      assert(x ~= x, ("element %d: got %s, expected nan"):format(i, tostring(x)))
    elseif y == math.huge or y == -math.huge then
      assert(x == y, ("element %d: got %s, expected %s"):format(i, tostring(x), tostring(y)))
    else
      assert(math.abs(x - y) <= tol * (1 + math.abs(y)),
        ("element %d: got %.9g, expected %.9g (tol %g)"):format(i, x, y, tol))
    end
  end
  if shape then
    local s = t:shape()
    assert(#s == #shape, "shape rank differs")
    for i = 1, #s do assert(s[i] == shape[i], "shape differs at dim " .. i) end
  end
  return true
end

-- assert that f raises an error whose message contains each of the strings
function H.raises(f, ...)
  local ok, err = pcall(f)
  assert(not ok, "expected an error")
  for _, want in ipairs({ ... }) do
    assert(tostring(err):find(want, 1, true), ("%q does not mention %q"):format(tostring(err), want))
  end
end

function H.shape_is(t, shape)
  local s = t:shape()
  if #s ~= #shape then return false end
  for i = 1, #s do if s[i] ~= shape[i] then return false end end
  return true
end

-- a non-contiguous tensor with the same values as `t` (transposed storage)
function H.noncontig(t)
  local nd = t:dim()
  if nd < 2 then
    -- every other element of a doubled tensor
    local n = t:numel()
    local big = ember.zeros({ n, 2 }, { dtype = t.dtype })
    big:select(2, 1):copy_(t:reshape({ n }))
    return big:select(2, 1):reshape(t:shape())
  end
  local tt = t:transpose(nd - 1, nd):contiguous():transpose(nd - 1, nd)
  assert(not tt:is_contiguous())
  return tt
end

-- fn()'s result with a switch of ember's set to `on` (set(on), get() -> bool),
-- then set back whatever happened
function H.with_switch(set, get, on, fn)
  local before = get()
  set(on)
  local ok, r = pcall(fn)
  set(before)
  if not ok then error(r, 0) end
  return r
end

-- Runs fn() in a forked child and asserts that it returned true within
-- `seconds` (a child stuck on the parent's libgomp workers is killed). `what`
-- names the work in the failure message.
function H.in_forked_child(what, fn, seconds)
  local ffi = require("ffi")
  pcall(ffi.cdef, [[
    int fork(void); int waitpid(int pid, int *status, int options); void _exit(int status);
    int kill(int pid, int sig); int usleep(unsigned int usec);
  ]])
  local pid = ffi.C.fork()
  if pid == 0 then
    local ok, good = pcall(fn)
    ffi.C._exit(ok and good and 0 or 1)
  end
  assert(pid > 0, "fork failed")
  local status, done = ffi.new("int[1]"), 0
  for _ = 1, seconds * 20 do
    done = ffi.C.waitpid(pid, status, 1)   -- WNOHANG
    if done ~= 0 then break end
    ffi.C.usleep(50000)
  end
  if done == 0 then ffi.C.kill(pid, 9); ffi.C.waitpid(pid, status, 0) end
  assert(done == pid, ("the forked child did not finish %s in %d s"):format(what, seconds))
  assert(status[0] == 0, ("the forked child's %s failed (wait status %d)"):format(what, status[0]))
end

-- what the shell command cmd writes to stdout, all of it
function H.output(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  return out
end

-- A new empty folder under /tmp (%TEMP% on Windows, with '/' separators),
-- and its removal (only such a folder)
local WINDOWS = require("ffi").os == "Windows"
local TMP = WINDOWS and (os.getenv("TEMP") or os.getenv("TMP") or "."):gsub("\\", "/") or "/tmp"
function H.tmpdir()
  if WINDOWS then   -- no mktemp: a random name until lfs (busted's) makes a new folder
    local lfs = require("lfs")
    for _ = 1, 100 do
      local dir = ("%s/ember_spec.%08x"):format(TMP, math.random(0, 0x7fffffff))
      if lfs.mkdir(dir) then return dir end
    end
    error("H.tmpdir: cannot make a folder in " .. TMP)
  end
  local dir = H.output("mktemp -d /tmp/ember_spec.XXXXXX"):match("^[^\n]+")
  assert(dir and dir:match("^/tmp/ember_spec%."), "mktemp -d failed")
  return dir
end
function H.rm_rf(dir)
  local prefix = TMP .. "/ember_spec."
  if not (dir and dir:sub(1, #prefix) == prefix and dir:sub(#prefix + 1):match("^[%w]+$")) then return end
  if WINDOWS then os.execute('rmdir /s /q "' .. dir:gsub("/", "\\") .. '"')
  else os.execute("rm -rf '" .. dir .. "'") end
end

-- Sets the environment variable name to value (nil: unsets it) in the C
-- library's environment, which libember's getenv reads
function H.setenv(name, value)
  local ffi = require("ffi")
  if WINDOWS then   -- the C runtime's; an empty value unsets
    pcall(ffi.cdef, "int _putenv_s(const char *name, const char *value);")
    assert(ffi.C._putenv_s(name, value or "") == 0, "H.setenv: _putenv_s failed")
    return
  end
  pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite); int unsetenv(const char *name);")
  assert((value and ffi.C.setenv(name, value, 1) or ffi.C.unsetenv(name)) == 0, "H.setenv failed")
end

-- inside a describe block: a new folder under /tmp for each test, removed
-- after it (busted's before_each and after_each); the function returned
-- gives the path of the file name in it (of the folder itself without name)
function H.tmp_each(before_each, after_each)
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() H.rm_rf(dir) end)
  return function(name) return name and dir .. "/" .. name or dir end
end

-- A file's bytes, and a JSON file (a fixture) decoded
function H.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end
function H.read_json(path) return require("ember.json").decode(H.read(path)) end

-- `steps` training steps of model on (x, y) (cross-entropy, Adam at lr 1e-3):
-- every parameter's values afterwards, as nested tables
function H.train_steps(model, x, y, steps)
  local F = ember.nn.functional
  local opt = ember.optim.Adam(model:parameters(), { lr = 1e-3 })
  local gm = ember.autodiff.GradManager():attach(model:parameters())
  for _ = 1, steps do
    gm:record()
    gm:backward(F.cross_entropy(model(x), y))
    opt:step()
    opt:zero_grad()
  end
  local out = {}
  for i, p in ipairs(model:parameters()) do out[i] = p:tolist() end
  return out
end

-- the largest |a - b| over the elements, in float64
function H.max_diff(a, b)
  return (a:to("float64") - b:to("float64")):abs():max():item()
end

-- raises the library's last error where a C call returned a status other
-- than 0 (specs that call the C API through ember._C)
function H.check_rc(rc)
  if rc ~= 0 then error(require("ffi").string(ember._C.ember_last_error()), 2) end
end

-- fn's results (a list of numbers and tensors) on 1 thread and on 2 are
-- the same bits; the thread setting is left as it was
function H.same_bits_on_threads(fn)
  local luassert = require("luassert")
  local st = ember.thread_stats()
  local function on(n)
    ember.set_num_threads(n)
    local ok, res = pcall(fn)
    if st.policy == "auto" then ember.set_num_threads("auto") else ember.set_num_threads(st.threads) end
    if not ok then error(res, 0) end
    return res
  end
  local one, two = on(1), on(2)
  luassert.are.equal(#one, #two)
  for i = 1, #one do
    if ember.is_tensor(one[i]) then
      luassert.is_true(ember.equal(one[i], two[i]), "result " .. i)
    else
      luassert.are.equal(one[i], two[i], "result " .. i)
    end
  end
end

-- inside a describe block: each test starts with the thread setting as it
-- was before it and leaves it so (busted's before_each and after_each)
function H.keep_thread_setting(before_each, after_each)
  local was_auto, threads_before
  before_each(function()
    local st = ember.thread_stats()
    was_auto, threads_before = st.policy == "auto", st.threads
  end)
  after_each(function()
    if was_auto then ember.set_num_threads("auto") else ember.set_num_threads(threads_before) end
  end)
end

return H
