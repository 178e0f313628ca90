-- The C API's safetensors calls (ember_load / ember_save, ember_st_*) and
-- ember.load / ember.save, which go through the same codec, read each
-- other's files, metadata included.
local H = require("helpers")
local ember = H.ember
local ffi = require("ffi")
local C = ember._C

local function tmpname() return os.tmpname() .. ".safetensors" end

-- name -> tensor, as C's ember_load reads the file
local function c_load(path)
  local list = ffi.new("ember_named_tensors *[1]")
  assert.are.equal(0, C.ember_load(path, list), ffi.string(C.ember_last_error()))
  local got = {}
  for k = 0, C.ember_named_count(list[0]) - 1 do
    local name = ffi.string(C.ember_named_name(list[0], k))
    got[name] = ember._wrap_borrowed(C.ember_named_tensor(list[0], k))
  end
  C.ember_named_free(list[0])
  return got
end

describe("safetensors between C and Lua", function()
  it("C reads what ember.save wrote, every dtype", function()
    local path = tmpname()
    local sd = {
      w = ember.tensor({ { 1.5, -2 }, { 3, 4.25 } }),
      d = ember.tensor({ 1, 2, 3 }, { dtype = "float64" }),
      i = ember.tensor({ 7, -8 }, { dtype = "int64" }),
      b = ember.tensor({ true, false, true }),
      u = ember.tensor({ 0, 255 }, { dtype = "uint8" }),
    }
    ember.save(path, sd)
    local got = c_load(path)
    for name, t in pairs(sd) do
      assert.is_not_nil(got[name], name)
      assert.are.equal(t.dtype, got[name].dtype)
      assert.are.same(t:tolist(), got[name]:tolist())
    end
    os.remove(path)
  end)

  it("C reads the tensors of a nested checkpoint under their dotted names (long metadata)", function()
    local path = tmpname()
    local w, m = ember.tensor({ { 1, 2 }, { 3, 4 } }), ember.tensor({ 5, 6 }, { dtype = "float64" })
    local notes = {}
    for i = 1, 300 do notes[i] = ("line %d\n"):format(i) end   -- a structure of several kB, with escapes
    ember.save(path, { model = { ["1.weight"] = w }, optim = { state = { [1] = { momentum_buffer = m } } },
      notes = notes }, { comment = "two\nlines" })
    local got = c_load(path)
    assert.are.same({ "model.1.weight", "optim.state.1.momentum_buffer" }, H.sorted_keys(got))
    assert.are.same(w:tolist(), got["model.1.weight"]:tolist())
    assert.are.equal("float64", got["optim.state.1.momentum_buffer"].dtype)
    assert.are.same(m:tolist(), got["optim.state.1.momentum_buffer"]:tolist())
    os.remove(path)
  end)

  it("ember.load reads what C's ember_save wrote", function()
    local path = tmpname()
    local a, b = ember.randn({ 3, 4 }), ember.arange(0, 6, 1, { dtype = "int32" }):reshape({ 2, 3 }):t()
    local names = ffi.new("const char *[2]", { "layer.weight", "idx" })
    local ts = ffi.new("ember_tensor *[2]", { a._c, b._c })
    assert.are.equal(0, C.ember_save(path, 2, names, ts))
    local sd = ember.load(path)
    assert.are.same(a:tolist(), sd["layer.weight"]:tolist())
    assert.are.same(b:tolist(), sd.idx:tolist())
    os.remove(path)
  end)

  it("C reads the metadata and header ember.save wrote, and ember.load C's", function()
    local path = tmpname()
    ember.save(path, { w = ember.ones({ 2, 3 }) }, { note = "two\nlines", epoch = 3 })
    local fp = ffi.new("ember_st_file *[1]")
    assert.are.equal(0, C.ember_st_open(path, fp), ffi.string(C.ember_last_error()))
    local f = fp[0]
    local k, v = ffi.new("const char *[1]"), ffi.new("const char *[1]")
    local kl, vl = ffi.new("size_t[1]"), ffi.new("size_t[1]")
    local md = {}
    for i = 0, C.ember_st_meta_count(f) - 1 do
      assert.are.equal(0, C.ember_st_meta(f, i, k, kl, v, vl))
      md[ffi.string(k[0], kl[0])] = ffi.string(v[0], vl[0])
    end
    assert.are.same({ note = "two\nlines", epoch = "3" }, md)
    assert.are.equal(1, C.ember_st_count(f))
    local dt, nd, shape = ffi.new("int[1]"), ffi.new("int[1]"), ffi.new("const int64_t *[1]")
    local b, e = ffi.new("uint64_t[1]"), ffi.new("uint64_t[1]")
    assert.are.equal(0, C.ember_st_entry(f, 0, k, kl, dt, nd, shape, b, e))
    assert.are.same({ "w", 2, 2, 3, 0, 24 }, { ffi.string(k[0], kl[0]), nd[0], tonumber(shape[0][0]),
      tonumber(shape[0][1]), tonumber(b[0]), tonumber(e[0]) })
    assert.are.equal("float32", ember._DTYPES[dt[0] + 1])
    assert.are.equal(C.EMBER_ERR_ARG, C.ember_st_entry(f, 1, k, kl, dt, nd, shape, b, e))
    C.ember_st_close(f)

    local entries = ffi.new("ember_st_named[1]")
    local t = ember.tensor({ 7, 8 }, { dtype = "int32" })
    entries[0].name, entries[0].name_len, entries[0].tensor = "t", 1, t._c
    local kv = ffi.new("ember_st_kv[1]")
    kv[0].key, kv[0].key_len, kv[0].value, kv[0].value_len = "format", 6, "pt", 2
    assert.are.equal(0, C.ember_st_save(path, 1, entries, 1, kv))
    local sd, meta = ember.load(path)
    assert.are.same({ 7, 8 }, sd.t:tolist())
    assert.are.same({ format = "pt" }, meta)
    kv[0].value, kv[0].value_len = "\255", 1
    assert.are.equal(C.EMBER_ERR_ARG, C.ember_st_save(path, 1, entries, 1, kv))
    assert.matches("metadata value of 'format' is not valid UTF-8", ffi.string(C.ember_last_error()), 1, true)
    os.remove(path)
  end)

  it("refuses a damaged file with the reason", function()
    local path = tmpname()
    local f = assert(io.open(path, "wb"))
    f:write("\64\0\0\0\0\0\0\0{}")
    f:close()
    local list = ffi.new("ember_named_tensors *[1]")
    assert.are.equal(C.EMBER_ERR_IO, C.ember_load(path, list))
    assert.matches("header length 64 exceeds the file size (10 bytes)", ffi.string(C.ember_last_error()), 1, true)
    os.remove(path)
  end)
end)
