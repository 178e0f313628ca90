-- ember.save / ember.load (safetensors): round trips of every dtype, a file
-- compared byte for byte with one built by hand, metadata, atomic writes, and
-- hostile files that must give an error naming the path, never a crash.
local H = require("helpers")
local ember = H.ember
local ffi = require("ffi")

local read_bytes = H.read

local function write_bytes(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- the names in folder d, sorted (lfs is busted's: on Windows too)
local function listdir(d)
  local names = {}
  for name in require("lfs").dir(d) do
    if name ~= "." and name ~= ".." then names[#names + 1] = name end
  end
  table.sort(names)
  return names
end

-- it, or on Windows pending: for a case built on POSIX alone (rlimits, FIFOs)
local posix_it = ffi.os == "Windows" and function(name) pending(name .. " (POSIX only)") end or it

-- u64 little-endian
local function u64(n)
  local b = {}
  for i = 1, 8 do b[i] = string.char(n % 256); n = math.floor(n / 256) end
  return table.concat(b)
end

-- a safetensors file from header text (padded with spaces to 8) and data bytes
local function st_bytes(header, data, no_pad)
  if not no_pad then header = header .. string.rep(" ", (8 - #header % 8) % 8) end
  return u64(#header) .. header .. (data or "")
end

local F32_1, F32_2 = "\0\0\128\63", "\0\0\0\64"   -- 1.0f, 2.0f little-endian

describe("ember.save / ember.load round trip", function()
  local tmp = H.tmp_each(before_each, after_each)

  local values = {
    float32 = { 1.5, -2.25, 0, 3e38, 1e-30 },
    float64 = { 1 / 3, -1e300, 0, 2 ^ -1000, 12345.678 },
    float16 = { 1.5, -2, 0.099975586, 65504, 0 },
    bfloat16 = { 1.5, -2, 3.140625, 1e30, 0 },
    int32 = { -2147483648, 2147483647, 0, -1, 7 },
    int64 = { 2 ^ 40 + 3, -(2 ^ 50), 0, -1, 123456789012 },
    uint8 = { 0, 255, 128, 1, 7 },
    bool = { true, false, true, true, false },
  }

  it("keeps every dtype, its values and shape", function()
    local sd = {}
    for dt, v in pairs(values) do sd[dt] = ember.tensor(v, { dtype = dt }) end
    local path = tmp("all.safetensors")
    assert.are.equal(path, ember.save(path, sd))
    local got, md = ember.load(path)
    assert.are.same({}, md)
    local n = 0
    for dt, v in pairs(values) do
      local t = got[dt]
      assert.is_true(ember.is_tensor(t), dt)
      assert.are.equal(dt, t.dtype)
      assert.are.same({ 5 }, t:shape())
      assert.are.same(sd[dt]:tolist(), t:tolist())
      n = n + 1
    end
    for k in pairs(got) do assert.is_not_nil(values[k], k) end
    assert.are.equal(8, n)
  end)

  it("saves non-contiguous tensors contiguous, in their logical order", function()
    local sd = {}
    for dt in pairs(values) do
      local base = ember.tensor({ { 1, 0, 3 }, { 4, 5, 0 } }, { dtype = dt })
      sd[dt] = base:t()
      assert.is_false(sd[dt]:is_contiguous())
    end
    local path = tmp("nc.safetensors")
    ember.save(path, sd)
    local got = ember.load(path)
    for dt in pairs(values) do
      assert.are.same({ 3, 2 }, got[dt]:shape())
      assert.is_true(got[dt]:is_contiguous())
      assert.are.same(sd[dt]:tolist(), got[dt]:tolist(), dt)
    end
    local hdr = ember.io.header(path)
    assert.are.same({ 3, 2 }, hdr.float32.shape)
  end)

  it("keeps 0-d and empty tensors", function()
    local path = tmp("odd.safetensors")
    ember.save(path, { s = ember.tensor(3.5), i = ember.tensor(7, { dtype = "int64" }),
      e = ember.zeros({ 0, 3 }), b = ember.tensor(true) })
    local got = ember.load(path)
    assert.are.same({}, got.s:shape())
    assert.are.equal(3.5, got.s:item())
    assert.are.equal(7, got.i:item())
    assert.are.equal("int64", got.i.dtype)
    assert.are.same({ 0, 3 }, got.e:shape())
    assert.are.equal(true, got.b:item())
  end)

  it("keeps names that need escaping and an empty table", function()
    local path = tmp("names.safetensors")
    local name = 'we"ird\\name\n\1 é'
    ember.save(path, { [name] = ember.tensor({ 1, 2 }), ["layer.0.weight"] = ember.ones({ 2, 2 }) })
    local got = ember.load(path)
    H.same(got[name], { 1, 2 })
    H.same(got["layer.0.weight"], { { 1, 1 }, { 1, 1 } })
    ember.save(path, {})
    local empty, md = ember.load(path)
    assert.are.same({}, empty)
    assert.are.same({}, md)
  end)

  it("loads what it saved over and over (a state_dict)", function()
    local path = tmp("sd.safetensors")
    local sd = { ["fc.weight"] = ember.randn({ 4, 3 }), ["fc.bias"] = ember.randn({ 4 }) }
    for _ = 1, 3 do
      ember.save(path, sd)
      local got = ember.load(path)
      H.same(got["fc.weight"], sd["fc.weight"]:tolist(), 0)
      H.same(got["fc.bias"], sd["fc.bias"]:tolist(), 0)
      sd = got
    end
  end)
end)

describe("ember.save file format", function()
  local tmp = H.tmp_each(before_each, after_each)

  it("writes exactly the bytes of the format, keys sorted", function()
    local path = tmp("tiny.safetensors")
    ember.save(path, { b = ember.tensor({ 1, 2 }), a = ember.tensor({ -1 }, { dtype = "int32" }) })
    local header = '{"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},'
      .. '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}'
    local padded = header .. "    "
    assert.are.equal(0, #padded % 8)
    local expected = u64(#padded) .. padded .. "\255\255\255\255" .. F32_1 .. F32_2
    assert.are.equal(expected, read_bytes(path))
  end)

  it("pads the header with spaces to a multiple of 8 and puts metadata first", function()
    local path = tmp("md.safetensors")
    ember.save(path, { x = ember.tensor(1, { dtype = "uint8" }) }, { format = "pt" })
    local header = '{"__metadata__":{"format":"pt"},'
      .. '"x":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}'
    local padded = header .. string.rep(" ", (8 - #header % 8) % 8)
    assert.are.equal(0, #padded % 8)
    assert.is_true(#padded > #header)
    assert.are.equal(u64(#padded) .. padded .. "\1", read_bytes(path))
  end)

  it("loads a file built by hand (other key order, whitespace, unicode escapes)", function()
    local path = tmp("hand.safetensors")
    local header = '{ "w\\u00e9" : { "shape" : [ 2 , 1 ], "data_offsets" : [ 0 , 8 ],'
      .. ' "dtype" : "F32" } ,\n "__metadata__" : { "k" : "v\\ud83d\\ude00" } }'
    write_bytes(path, st_bytes(header, F32_1 .. F32_2))
    local got, md = ember.load(path)
    H.same(got["wé"], { { 1 }, { 2 } }, 0, { 2, 1 })
    assert.are.same({ k = "v\240\159\152\128" }, md)
  end)
end)

describe("ember.save writes the bytes it wrote before the codec moved to C", function()
  -- spec/fixtures/io: the files ember.save wrote at commit 3206899 (io.lua and
  -- json.lua encoding the header), from the tables of tables.lua
  local cases = dofile("spec/fixtures/io/tables.lua")(ember)
  local tmp = H.tmp_each(before_each, after_each)

  for _, c in ipairs(cases) do
    it(c.file, function()
      local path = tmp(c.file)
      ember.save(path, c.tbl, c.metadata)
      local want = read_bytes("spec/fixtures/io/" .. c.file)
      assert.are.equal(#want, #read_bytes(path))
      assert.are.equal(want, read_bytes(path))
    end)
  end

  it("and loads those files back to the same values", function()
    local got, md = ember.load("spec/fixtures/io/flat_meta.safetensors")
    assert.are.same({ format = "pt", epoch = "3", lr = "0.5", best = "true", note = "two\nlines é \"q\" \\ \1" }, md)
    for name, t in pairs(cases[2].tbl) do
      assert.are.equal(t.dtype, got[name].dtype, name)
      assert.are.same(t:tolist(), got[name]:tolist(), name)
    end
    local nested = ember.load("spec/fixtures/io/nested.safetensors")
    assert.is_true(rawequal(nested.model["1.weight"], nested.tied.weight))
    assert.are.same({ { 1, 2 }, { 3, 4 } }, nested.tied.weight:tolist())
    assert.are.equal("all \"of\" them\n", nested.optim.param_groups[1].name)
    assert.are.equal(true, nested[-3])
    assert.are.same({}, (ember.load("spec/fixtures/io/empty.safetensors")))
  end)

  it("reads the file PyTorch's state_dict was written to (spec/fixtures/gen_torch_state.py)", function()
    local header, md = ember.io.header("spec/fixtures/torch_sequential.safetensors")
    assert.are.same({ format = "pt" }, md)
    assert.are.same({ dtype = "float32", shape = { 3, 2, 3, 3 }, data_offsets = header["0.weight"].data_offsets },
      header["0.weight"])
    assert.are.equal("int64", header["1.num_batches_tracked"].dtype)
    local sd = ember.load("spec/fixtures/torch_sequential.safetensors")
    assert.are.same({ 2, 5 }, sd["6.weight"]:shape())
  end)

  it("keeps names and metadata holding a NUL", function()
    local path = tmp("nul_byte.safetensors")   -- "nul.*" is Windows' NUL device
    ember.save(path, { ["a\0b"] = ember.tensor({ 1 }), a = ember.tensor({ 2 }) }, { ["k\0"] = "v\0w" })
    local got, md = ember.load(path)
    H.same(got["a\0b"], { 1 })
    H.same(got.a, { 2 })
    assert.are.same({ ["k\0"] = "v\0w" }, md)
  end)
end)

describe("ember.save metadata", function()
  local tmp = H.tmp_each(before_each, after_each)

  it("round-trips string metadata; numbers and booleans become strings", function()
    local path = tmp("m.safetensors")
    ember.save(path, { w = ember.ones({ 2 }) }, { format = "pt", epoch = 3, lr = 0.5, best = true })
    local got, md = ember.load(path)
    H.same(got.w, { 1, 1 })
    assert.are.same({ format = "pt", epoch = "3", lr = "0.5", best = "true" }, md)
  end)

  it("rejects metadata that is not string -> string", function()
    local path = tmp("m.safetensors")
    assert.error_matches(function() ember.save(path, {}, { a = {} }) end,
      "ember.save: " .. path .. ": metadata value of 'a' must be a string", 1, true)
    assert.error_matches(function() ember.save(path, {}, { [1] = "x" }) end,
      "metadata keys must be strings", 1, true)
    assert.error_matches(function() ember.save(path, {}, "x") end, "metadata must be a table", 1, true)
    assert.are.same({}, listdir(tmp()))
  end)
end)

describe("ember.save / ember.load of nested tables", function()
  local tmp, path = H.tmp_each(before_each, after_each)
  before_each(function() path = tmp("ckpt.safetensors") end)

  local function bits(x) return string.format("%a", x) end   -- hex float: tells -0 from 0

  it("gives back the same structure: numbers to the bit, strings, booleans, keys of both kinds", function()
    local numbers = { 3, -7, 2 ^ 31, 2 ^ 40 + 1, -(2 ^ 53), 2 ^ 53 + 2, 2 ^ 63, 0.1, -1 / 3, 1e-310,
      1.7976931348623157e308, H.neg_zero, 1 / 0, -1 / 0 }
    local tbl = {
      numbers = numbers,
      nan = 0 / 0,
      text = 'tab\t"quote" é \240\159\152\128 \\ end\n',
      flags = { yes = true, no = false },
      empty = {},
      mixed = { [1] = "int one", ["1"] = "string one", [2.5] = "half", [-3] = "neg" },
      deep = { a = { b = { c = { d = "e" } } } },
    }
    ember.save(path, tbl)
    local got, md = ember.load(path)
    assert.are.same({}, md)
    assert.are.equal(#numbers, #got.numbers)
    for i, v in ipairs(numbers) do assert.are.equal(bits(v), bits(got.numbers[i])) end
    assert.is_true(got.nan ~= got.nan)
    got.numbers, got.nan, tbl.numbers, tbl.nan = nil, nil, nil, nil
    assert.are.same(tbl, got)
  end)

  it("writes the tensors as ordinary entries under dotted names (safetensors_c_spec: C reads them)", function()
    local w = ember.tensor({ { 1, 2 }, { 3, 4 } })
    local m = ember.tensor({ 5, 6 }, { dtype = "float64" })
    ember.save(path, { model = { ["1.weight"] = w }, optim = { state = { [1] = { momentum_buffer = m } } },
      epoch = 2 })
    local header, md = ember.io.header(path)
    assert.are.same({ "model.1.weight", "optim.state.1.momentum_buffer" }, H.sorted_keys(header))
    assert.are.equal('{"table":[["epoch",2],["model",{"table":[["1.weight",{"tensor":"model.1.weight"}]]}],'
      .. '["optim",{"table":[["state",{"table":[[1,{"table":[["momentum_buffer",'
      .. '{"tensor":"optim.state.1.momentum_buffer"}]]}]]}]]}]]}', md["ember.tree"])
  end)

  it("keeps the caller's metadata beside the structure", function()
    ember.save(path, { w = ember.ones({ 2 }), step = 10 }, { note = "run 4", lr = 0.5 })
    local got, md = ember.load(path)
    assert.are.same({ note = "run 4", lr = "0.5" }, md)
    assert.are.equal(10, got.step)
    H.same(got.w, { 1, 1 }, 0)
    assert.error_matches(function() ember.save(path, { w = ember.ones({ 2 }) }, { ["ember.tree"] = "x" }) end,
      "metadata key 'ember.tree' is reserved", 1, true)
  end)

  it("writes a tensor met twice once, and gives back one tensor at both places", function()
    local w = ember.randn({ 3, 2 })
    ember.save(path, { encoder = { weight = w }, decoder = { weight = w }, n = 1 })
    local header = ember.io.header(path)
    assert.are.same({ "decoder.weight" }, H.sorted_keys(header))
    local got = ember.load(path)
    assert.is_true(rawequal(got.encoder.weight, got.decoder.weight))
    H.same(got.encoder.weight, w:tolist(), 0)
  end)

  it("writes views and tensors sharing storage as separate values", function()
    local base = ember.arange(0, 6):reshape({ 2, 3 })
    local col = base:narrow(2, 2, 1)
    ember.save(path, { base = base, col = col, t = base:t(), k = 1 })
    local got = ember.load(path)
    H.same(got.col, { { 1 }, { 4 } }, 0)
    H.same(got.t, { { 0, 3 }, { 1, 4 }, { 2, 5 } }, 0)
    got.base:fill_(-1)
    H.same(got.col, { { 1 }, { 4 } }, 0)   -- independent after loading
  end)

  it("accepts 20 levels of tables, and says so past that", function()
    local root = {}
    local t = root
    for _ = 2, 20 do t.next = {}; t = t.next end
    t.w = ember.ones({ 1 })
    ember.save(path, root)
    local got = ember.load(path)
    for _ = 2, 20 do got = got.next end
    H.same(got.w, { 1 }, 0)
    t.next = { x = 1 }
    assert.error_matches(function() ember.save(path, root) end, "tables nested more than 20 deep at next.next", 1, true)
  end)

  it("names what it cannot write and leaves the old file as it was", function()
    ember.save(path, { ok = 1 })
    local old = read_bytes(path)
    local cyclic = { a = {} }
    cyclic.a.up = cyclic
    local freed = ember.ones({ 2 })
    freed:free()
    local cases = {
      { { a = { f = print } }, "the value at a.f is a function (a checkpoint holds tensors, numbers, strings, "
        .. "booleans and tables of them)" },
      { cyclic, "the table at a.up contains itself" },
      { { a = { [1 / 0] = 1 } }, "the table at a has the key inf (keys must be strings or finite numbers)" },
      { { a = { [{}] = 1 } }, "the table at a has the key table" },
      { { s = { "ok", "\255" } }, "the string at s[2] is not valid UTF-8" },
      { { a = { ["\255"] = 1 } }, "the table at a has a key that is not valid UTF-8" },
      { { a = { ["b.c"] = ember.ones({ 1 }), b = { c = ember.ones({ 1 }) } } },
        "the tensors at a.b.c and a[\"b.c\"] would both be named 'a.b.c'" },
      { { m = { ["1.w"] = freed } }, "the tensor at m[\"1.w\"] was freed" },
      { { __metadata__ = ember.ones({ 1 }), n = 1 }, "'__metadata__' is reserved" },
    }
    for _, c in ipairs(cases) do
      assert.error_matches(function() ember.save(path, c[1]) end, "ember.save: " .. path .. ": " .. c[2], 1, true)
    end
    assert.are.equal(old, read_bytes(path))
  end)

  it("refuses a structure that does not match the file's tensors", function()
    local entry = '"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
    local function file(tree)
      local md = ember.io.json.encode({ ["ember.tree"] = tree })
      write_bytes(path, st_bytes('{"__metadata__":' .. md .. "," .. entry .. "}", F32_1))
      return function() return ember.load(path) end
    end
    local w = '["w",{"tensor":"w"}]'
    local cases = {
      { '{"table":[' .. w .. ',["v",{"tensor":"v"}]]}', "the tensor 'v', which the file does not hold at v" },
      { '{"table":[]}', "ember.tree does not place the tensor 'w'" },
      { '{"table":[' .. w .. ',["x",{"number":"big"}]]}', "the number big at x" },
      { '{"table":[' .. w .. ',["x",{"blob":1}]]}', 'an unknown value {"blob": ...} at x' },
      { '{"table":[' .. w .. ',["x",{"tensor":"w","extra":1}]]}', "an object that is not {tag: value} at x" },
      { '{"table":[' .. w .. ',["x",[1]]]}', "an array or null where a value belongs at x" },
      { '{"table":[' .. w .. ',[true,1]]}', "an entry that is not [key, value] at the top level" },
      { '{"table":[' .. w .. ',["x",1],["x",2]]}', 'the key "x" twice at the top level' },
      { '{"tensor":"w"}', "ember.tree: the top level is not a table" },
      { '{"table":[' .. w .. ',]}', "ember.tree: invalid JSON" },
    }
    for _, c in ipairs(cases) do
      assert.error_matches(file(c[1]), "ember.load: " .. path .. ": ", 1, true)
      assert.error_matches(file(c[1]), c[2], 1, true)
    end
  end)
end)

describe("ember.save atomicity", function()
  local tmp, path, old = H.tmp_each(before_each, after_each)
  before_each(function()
    path = tmp("model.safetensors")
    ember.save(path, { w = ember.tensor({ 1, 2, 3 }) })
    old = read_bytes(path)
  end)

  local function intact()
    assert.are.equal(old, read_bytes(path))
    assert.are.same({ "model.safetensors" }, listdir(tmp()))   -- no temp file left
  end

  it("keeps the old file when the table holds a value it cannot write", function()
    assert.error_matches(function() ember.save(path, { w = ember.ones({ 3 }), bad = print }) end,
      "ember.save: " .. path .. ": the value at bad is a function", 1, true)
    intact()
  end)

  posix_it("keeps the old file when a write fails midway (past a file size limit)", function()
    -- a real failing write: RLIMIT_FSIZE (1 on Linux) below the file's size, with
    -- SIGXFSZ (25) ignored, makes write(2) stop short and then fail with EFBIG
    pcall(ffi.cdef, [[
      typedef struct { uint64_t cur, max; } ember_spec_rlimit;
      int ember_spec_getrlimit(int, ember_spec_rlimit *) __asm__("getrlimit");
      int ember_spec_setrlimit(int, const ember_spec_rlimit *) __asm__("setrlimit");
      void *ember_spec_signal(int, void *) __asm__("signal");
    ]])
    local RLIMIT_FSIZE, SIGXFSZ = 1, 25
    local saved = ffi.new("ember_spec_rlimit")
    assert.are.equal(0, ffi.C.ember_spec_getrlimit(RLIMIT_FSIZE, saved))
    local low = ffi.new("ember_spec_rlimit", { 2048, saved.max })
    local handler = ffi.C.ember_spec_signal(SIGXFSZ, ffi.cast("void *", 1))   -- SIG_IGN
    assert.are.equal(0, ffi.C.ember_spec_setrlimit(RLIMIT_FSIZE, low))
    local ok, err = pcall(ember.save, path, { a = ember.zeros({ 1000 }), b = ember.zeros({ 1000 }) })
    ffi.C.ember_spec_setrlimit(RLIMIT_FSIZE, saved)
    ffi.C.ember_spec_signal(SIGXFSZ, handler)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("ember.save: " .. path .. ": write failed: File too large", 1, true), err)
    intact()
  end)

  it("keeps the target when the rename fails and removes the temp file", function()
    local target = tmp("adir")
    assert(require("lfs").mkdir(target))
    assert.error_matches(function() ember.save(target, { w = ember.ones({ 2 }) }) end,
      "ember.save: " .. target .. ": cannot rename", 1, true)
    assert.are.same({ "adir", "model.safetensors" }, listdir(tmp()))
    assert.are.same({}, listdir(target))
  end)

  it("names the path when the folder does not exist", function()
    local p = tmp("no/such/dir/m.safetensors")
    assert.error_matches(function() ember.save(p, { w = ember.ones({ 2 }) }) end,
      "ember.save: " .. p .. ": cannot create", 1, true)
    intact()
  end)

  it("replaces the old file on success", function()
    ember.save(path, { v = ember.tensor({ 9 }) })
    local got = ember.load(path)
    assert.is_nil(got.w)
    H.same(got.v, { 9 })
    assert.are.same({ "model.safetensors" }, listdir(tmp()))
  end)

  it("rejects bad arguments with clear errors", function()
    assert.error_matches(function() ember.save(nil, {}) end, "ember.save: expected a file path", 1, true)
    assert.error_matches(function() ember.save(path, ember.ones({ 2 })) end,
      "expected a table, got a tensor", 1, true)
    assert.error_matches(function() ember.save(path, { [true] = ember.ones({ 2 }) }) end,
      "the table at the top level has the key true (keys must be strings or finite numbers)", 1, true)
    assert.error_matches(function() ember.save(path, { ["a\255"] = ember.ones({ 2 }) }) end,
      "is not valid UTF-8", 1, true)
    assert.error_matches(function() ember.save(path, {}, { k = "\237\160\128" }) end,
      "metadata value of 'k' is not valid UTF-8", 1, true)
    assert.error_matches(function() ember.save(path, { __metadata__ = ember.ones({ 2 }) }) end,
      "'__metadata__' is reserved", 1, true)
    local t = ember.ones({ 2 })
    t:free()
    assert.error_matches(function() ember.save(path, { t = t }) end, "tensor 't' was freed", 1, true)
    intact()
  end)
end)

describe("ember.load on hostile files", function()
  local tmp, path = H.tmp_each(before_each, after_each)
  before_each(function() path = tmp("bad.safetensors") end)

  -- loads `bytes` and returns the error message (which must name the path)
  local function load_err(bytes)
    write_bytes(path, bytes)
    local ok, err = pcall(ember.load, path)
    assert.is_false(ok, "expected an error")
    err = tostring(err)
    assert.is_truthy(err:find("ember.load: " .. path .. ": ", 1, true), err)
    return err
  end
  local function expect(bytes, what)
    local err = load_err(bytes)
    assert.is_truthy(err:find(what, 1, true), ("'%s' not in: %s"):format(what, err))
  end
  local function entry(name, dtype, shape, b, e)
    return ('"%s":{"dtype":"%s","shape":%s,"data_offsets":[%s,%s]}'):format(name, dtype, shape, b, e)
  end

  it("a missing file", function()
    local ok, err = pcall(ember.load, tmp("nope.safetensors"))
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("ember.load: " .. tmp("nope.safetensors: cannot open"), 1, true))
  end)

  it("a folder instead of a file", function()
    local ok, err = pcall(ember.load, tmp())
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("ember.load: " .. tmp() .. ": ", 1, true), err)
  end)

  posix_it("a FIFO or a device instead of a file, without blocking", function()
    local fifo = tmp("fifo")
    assert.is_true(os.execute("mkfifo '" .. fifo .. "'") == 0)
    for _, p in ipairs({ fifo, "/dev/null" }) do
      local ok, err = pcall(ember.load, p)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find("ember.load: " .. p .. ": not a regular file", 1, true), err)
    end
  end)

  it("files too short for the length field", function()
    expect("", "file too short")
    expect("\8\0\0", "file too short")
  end)

  it("a header length beyond the file or beyond 100 MB", function()
    expect(u64(64) .. "{}      ", "exceeds the file size")
    expect(u64(2 ^ 40) .. "{}      ", "exceeds the 100 MB limit")
    expect(string.rep("\255", 8) .. "{}      ", "exceeds the 100 MB limit")
    expect(u64(100 * 1000 * 1000 + 1) .. "{}      ", "exceeds the 100 MB limit")
    expect(u64(0), "too small")
  end)

  it("invalid JSON", function()
    expect(st_bytes('{"a":'), "invalid JSON")
    expect(st_bytes('{"a":1,}'), "invalid JSON")
    expect(st_bytes("{'a':1}"), "invalid JSON")
    expect(st_bytes('{"a":01}'), "invalid JSON")
    expect(st_bytes('{"a":"x\1y"}'), "control character")
    expect(st_bytes('{"a":"\\ud800"}'), "lone surrogate")
    expect(st_bytes('{"a":"\\q"}'), "bad escape")
    expect(st_bytes('{"a":NaN}'), "invalid JSON")
    expect(st_bytes('{"a":{}} x'), "trailing characters")
    expect(st_bytes('{"a":1e999}'), "out of range")
    expect(st_bytes('{"a":{},"a":{}}'), "duplicate key")
    expect(st_bytes('{"a":' .. string.rep("[", 10000) .. string.rep("]", 10000) .. "}"), "nesting")
    expect(st_bytes("{\"a\":\"" .. string.rep("x", 100)), "unterminated string")
    expect(u64(8) .. "{\0\0\0\0\0\0}", "invalid JSON")
  end)

  it("a header that is not an object", function()
    expect(st_bytes("[1,2]"), "not a JSON object")
    expect(st_bytes('"str"'), "not a JSON object")
    expect(st_bytes("{}", "junk"), "4 unexpected bytes after the last tensor")
    expect(st_bytes("{}" .. string.rep(" ", 6) .. "junk"), "trailing characters")
  end)

  it("entries that are not tensor descriptions", function()
    expect(st_bytes('{"a":5}'), "entry 'a' is not an object")
    expect(st_bytes('{"a":{"shape":[1],"data_offsets":[0,4]}}', "\0\0\0\0"), "dtype missing")
    expect(st_bytes('{"a":{"dtype":"F32","data_offsets":[0,4]}}', "\0\0\0\0"), "shape missing")
    expect(st_bytes('{"a":{"dtype":"F32","shape":[1]}}', "\0\0\0\0"), "data_offsets must be")
    expect(st_bytes('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}', "\0\0\0\0"),
      "data_offsets must be")
    expect(st_bytes('{"__metadata__":[]}'), "__metadata__ is not an object")
    expect(st_bytes('{"__metadata__":{"k":1}}'), "__metadata__ value of 'k' is not a string")
  end)

  it("an unknown dtype", function()
    expect(st_bytes("{" .. entry("a", "F8_E4M3", "[1]", 0, 1) .. "}", "\0"), "unknown dtype 'F8_E4M3'")
    expect(st_bytes("{" .. entry("a", "f32", "[1]", 0, 4) .. "}", "\0\0\0\0"), "unknown dtype 'f32'")
  end)

  it("shapes with negative, non-integer or absurd dims", function()
    expect(st_bytes("{" .. entry("a", "F32", "[-1]", 0, 4) .. "}", "\0\0\0\0"), "bad size -1")
    expect(st_bytes("{" .. entry("a", "F32", "[1.5]", 0, 4) .. "}", "\0\0\0\0"), "bad size 1.5")
    expect(st_bytes("{" .. entry("a", "F32", '["2"]', 0, 4) .. "}", "\0\0\0\0"), "bad size 2")
    expect(st_bytes("{" .. entry("a", "F32", "[1e300]", 0, 4) .. "}", "\0\0\0\0"), "bad size")
    expect(st_bytes("{" .. entry("a", "F32", "[1073741824,1073741824,1073741824]", 0, 4) .. "}",
      "\0\0\0\0"), "absurd shape")
    expect(st_bytes("{" .. entry("a", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) .. "}", "\0\0\0\0"),
      "9 dims")
    -- a product that is large but not absurd still has to match the offsets
    expect(st_bytes("{" .. entry("a", "U8", "[65536,65536]", 0, 4) .. "}", "\0\0\0\0"),
      "hold 4 bytes but U8 of shape {65536,65536} needs 4294967296")
  end)

  it("data_offsets that do not match dtype size * numel", function()
    expect(st_bytes("{" .. entry("a", "F32", "[2]", 0, 4) .. "}", "\0\0\0\0"),
      "data_offsets [0,4] hold 4 bytes but F32 of shape {2} needs 8")
    expect(st_bytes("{" .. entry("a", "F32", "[1]", 4, 0) .. "}", "\0\0\0\0"), "end before they begin")
    expect(st_bytes("{" .. entry("a", "F32", "[1]", -4, 0) .. "}", "\0\0\0\0"), "data_offsets must be")
  end)

  it("offsets past the end of the data, and truncated files", function()
    expect(st_bytes("{" .. entry("a", "F32", "[2]", 0, 8) .. "}", F32_1), "go past the end of the data")
    expect(st_bytes("{" .. entry("a", "F32", "[1]", "1000000000000000", "1000000000000004") .. "}", F32_1), "past the end")
    -- a valid file cut short at every length loads nothing and raises
    local good = tmp("good.safetensors")
    ember.save(good, { a = ember.ones({ 3 }), b = ember.ones({ 2 }, { dtype = "int64" }) })
    local bytes = read_bytes(good)
    for cut = 0, #bytes - 1 do load_err(bytes:sub(1, cut)) end
  end)

  it("overlapping, out-of-order or gapped ranges", function()
    local data = F32_1 .. F32_2
    expect(st_bytes("{" .. entry("a", "F32", "[2]", 0, 8) .. "," .. entry("b", "F32", "[1]", 4, 8)
      .. "}", data), "overlap")
    expect(st_bytes("{" .. entry("a", "F32", "[1]", 0, 4) .. "," .. entry("b", "F32", "[1]", 0, 4)
      .. "}", data), "overlap")
    expect(st_bytes("{" .. entry("a", "F32", "[1]", 4, 8) .. "}", data), "leave a gap after byte 0")
    expect(st_bytes("{" .. entry("a", "F32", "[1]", 0, 4) .. "}", data), "4 unexpected bytes")
    -- out of order in the header but tiling the buffer is fine
    write_bytes(path, st_bytes("{" .. entry("b", "F32", "[1]", 4, 8) .. "," .. entry("a", "F32", "[1]", 0, 4)
      .. "}", data))
    local got = ember.load(path)
    H.same(got.a, { 1 })
    H.same(got.b, { 2 })
  end)

  it("survives random damage: each load succeeds or raises an error naming the path", function()
    local good = tmp("good.safetensors")
    ember.save(good, { a = ember.randn({ 3, 2 }), b = ember.tensor({ 1, 2 }, { dtype = "int64" }),
      c = ember.tensor({ true }) }, { note = "x" })
    local bytes = read_bytes(good)
    local seed = 12345
    local function rnd(n)   -- a small LCG: the spec must not depend on math.random's state
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed % n + 1
    end
    local loaded, failed = 0, 0
    for _ = 1, 300 do
      local b = { bytes:byte(1, -1) }
      for _ = 1, rnd(4) do b[rnd(#b)] = rnd(256) - 1 end
      write_bytes(path, string.char(unpack(b)))
      local ok, err = pcall(ember.load, path)
      if ok then
        loaded = loaded + 1
      else
        failed = failed + 1
        assert.is_truthy(tostring(err):find("ember.load: " .. path .. ": ", 1, true), err)
      end
    end
    assert.are.equal(300, loaded + failed)
    assert.is_true(failed > 0)
  end)

  it("normalises bool bytes other than 0 and 1", function()
    write_bytes(path, st_bytes("{" .. entry("m", "BOOL", "[3]", 0, 3) .. "}", "\0\2\255"))
    assert.are.same({ false, true, true }, ember.load(path).m:tolist())
  end)
end)

describe("ember.json (also ember.io.json)", function()
  local json = require("ember.json")
  it("is the codec ember.io uses", function() assert.are.equal(json, ember.io.json) end)
  it("decodes the JSON types", function()
    local v = json.decode(' {"a": [1, -2.5e2, true, false, null, "x\\n\\u0041"], "b": {}} ')
    assert.are.equal(getmetatable(v), json.OBJECT)
    assert.are.equal(getmetatable(v.a), json.ARRAY)
    assert.are.equal(1, v.a[1])
    assert.are.equal(-250, v.a[2])
    assert.are.equal(true, v.a[3])
    assert.are.equal(false, v.a[4])
    assert.are.equal(json.null, v.a[5])
    assert.are.equal("x\nA", v.a[6])
    assert.are.equal(getmetatable(v.b), json.OBJECT)
  end)
  it("encodes with sorted keys and round-trips", function()
    local s = json.encode({ b = { 1, 2 }, a = "q\"\\\1", c = { x = true } })
    assert.are.equal('{"a":"q\\"\\\\\\u0001","b":[1,2],"c":{"x":true}}', s)
    assert.are.equal(s, json.encode(json.decode(s)))
  end)
  it("rejects what strict JSON rejects", function()
    for _, bad in ipairs({ "", " ", "{", "[1,]", "[01]", "[1.]", "[.5]", "[+1]", "[1e]", "tru",
      '["\\x"]', '["\t"]', "[1] [2]", "{1:2}", '{"a" 1}', "[Infinity]", "/*c*/{}" }) do
      assert.has_error(function() json.decode(bad) end)
    end
  end)
end)
