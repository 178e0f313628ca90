-- ember.data: IDX files written here (plain and gzip'd) with exact values,
-- Fashion-MNIST from the Debian package when installed, TensorDataset and
-- the DataLoader (batch counts, seeded shuffles, errors).
local H = require("helpers")
local ember = H.ember
local ffi = require("ffi")

pcall(ffi.cdef, [[
int ember_spec_setenv(const char *name, const char *value, int overwrite) __asm__("setenv");
int ember_spec_unsetenv(const char *name) __asm__("unsetenv");
]])

local tmpdir, rmdir = H.tmpdir, H.rm_rf

local function be32(n)
  return string.char(math.floor(n / 2 ^ 24) % 256, math.floor(n / 2 ^ 16) % 256,
    math.floor(n / 256) % 256, n % 256)
end

-- an IDX file of unsigned bytes with the given dims and values
local function write_idx(path, dims, bytes)
  local parts = { "\0\0\8", string.char(#dims) }
  for _, d in ipairs(dims) do parts[#parts + 1] = be32(d) end
  parts[#parts + 1] = string.char(unpack(bytes))
  local f = assert(io.open(path, "wb"))
  f:write(table.concat(parts))
  f:close()
end

local function f32(v) return tonumber(ffi.new("float", v)) end

local IMG = { 0, 255, 128, 1, 2, 3, 4, 5, 250, 100, 50, 25 }   -- 3 images of 2 x 2
local LBL = { 9, 0, 4 }

describe("ember.data.mnist_idx", function()
  local dir
  before_each(function()
    dir = tmpdir()
    write_idx(dir .. "/img", { 3, 2, 2 }, IMG)
    write_idx(dir .. "/lbl", { 3 }, LBL)
  end)
  after_each(function() rmdir(dir) end)

  local function check(ds)
    assert.are.equal(3, #ds)
    assert.are.equal(3, ds:size())
    assert.are.same({ 3, 1, 2, 2 }, ds.x:shape())
    assert.are.equal("float32", ds.x.dtype)
    assert.are.equal("int64", ds.y.dtype)
    local flat = H.flatten(ds.x:tolist())
    for i, b in ipairs(IMG) do assert.are.equal(f32(b / 255), flat[i], "pixel " .. i) end
    assert.are.same({ 10, 1, 5 }, ds.y:tolist())
    local x2, y2 = ds:get(2)
    assert.are.same({ 1, 2, 2 }, x2:shape())
    assert.are.equal(f32(2 / 255), x2:tolist()[1][1][1])
    assert.are.equal(1, y2:item())
  end

  it("reads plain IDX files: x in [0,1] {N,1,H,W}, labels raw + 1", function()
    check(ember.data.mnist_idx(dir .. "/img", dir .. "/lbl"))
  end)

  it("reads gzip'd IDX files", function()
    assert.is_truthy(os.execute("gzip -k '" .. dir .. "/img' '" .. dir .. "/lbl'"))
    check(ember.data.mnist_idx(dir .. "/img.gz", dir .. "/lbl.gz"))
  end)

  it("keeps {N,C,H,W} images and allows no labels", function()
    write_idx(dir .. "/img4", { 2, 3, 1, 2 }, IMG)
    local ds = ember.data.mnist_idx(dir .. "/img4")
    assert.are.same({ 2, 3, 1, 2 }, ds.x:shape())
    assert.is_nil(ds.y)
    assert.are.equal(2, #ds)
  end)

  it("names the file when it is missing, corrupt or truncated", function()
    assert.error_matches(function() ember.data.mnist_idx(dir .. "/nope", dir .. "/lbl") end,
      "ember.data.mnist_idx: load_idx: cannot open " .. dir .. "/nope", 1, true)
    assert.error_matches(function() ember.data.mnist_idx(dir .. "/img", dir .. "/nope") end,
      "cannot open " .. dir .. "/nope", 1, true)
    local f = io.open(dir .. "/bad", "wb"); f:write("\1\2\3\4garbage"); f:close()
    assert.error_matches(function() ember.data.mnist_idx(dir .. "/bad", dir .. "/lbl") end,
      dir .. "/bad: not an IDX file", 1, true)
    f = io.open(dir .. "/short", "wb"); f:write("\0\0\8\3" .. be32(3) .. be32(2) .. be32(2) .. "\1\2"); f:close()
    assert.error_matches(function() ember.data.mnist_idx(dir .. "/short", dir .. "/lbl") end,
      dir .. "/short: truncated", 1, true)
    -- a gzip stream cut in half
    os.execute("gzip -k '" .. dir .. "/img'")
    local gz = io.open(dir .. "/img.gz", "rb"):read("*a")
    f = io.open(dir .. "/cut.gz", "wb"); f:write(gz:sub(1, math.floor(#gz / 2))); f:close()
    assert.error_matches(function() ember.data.mnist_idx(dir .. "/cut.gz", dir .. "/lbl") end,
      dir .. "/cut.gz: truncated", 1, true)
  end)

  it("rejects image and label counts that differ, and odd dims", function()
    write_idx(dir .. "/lbl2", { 2 }, { 1, 2 })
    assert.error_matches(function() ember.data.mnist_idx(dir .. "/img", dir .. "/lbl2") end,
      "ember.data.mnist_idx: 3 images in " .. dir .. "/img but 2 labels in " .. dir .. "/lbl2", 1, true)
    write_idx(dir .. "/lbl22", { 3, 1 }, { 1, 2, 3 })
    assert.error_matches(function() ember.data.mnist_idx(dir .. "/img", dir .. "/lbl22") end,
      "expected labels of 1 dim {N}, got {3, 1}", 1, true)
    write_idx(dir .. "/img1", { 4 }, { 1, 2, 3, 4 })
    assert.error_matches(function() ember.data.mnist_idx(dir .. "/img1", dir .. "/lbl") end,
      "expected images of 3 dims {N,H,W}, got {4}", 1, true)
    assert.error_matches(function() ember.data.mnist_idx(nil) end, "expected a file path", 1, true)
  end)
end)

describe("ember.data.fashion_mnist", function()
  local sys = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
  local have = io.open(sys, "rb")
  if have then have:close() end

  it("finds the files through EMBER_DATA_DIR or a dir argument", function()
    local dir = tmpdir()
    write_idx(dir .. "/t10k-images-idx3-ubyte", { 3, 2, 2 }, IMG)
    write_idx(dir .. "/t10k-labels-idx1-ubyte", { 3 }, LBL)
    os.execute("gzip '" .. dir .. "/t10k-images-idx3-ubyte'")   -- one gzip'd, one plain
    local ds = ember.data.fashion_mnist("test", dir)
    assert.are.same({ 3, 1, 2, 2 }, ds.x:shape())
    assert.are.same({ 10, 1, 5 }, ds.y:tolist())
    ffi.C.ember_spec_setenv("EMBER_DATA_DIR", dir, 1)
    local ok, ds2 = pcall(ember.data.fashion_mnist, "test")
    ffi.C.ember_spec_unsetenv("EMBER_DATA_DIR")
    rmdir(dir)
    assert(ok, ds2)
    assert.are.equal(3, #ds2)
  end)

  it("tells how to install the data when it is missing", function()
    local dir = tmpdir()
    assert.error_matches(function() ember.data.fashion_mnist("train", dir) end,
      "apt install dataset-fashion-mnist", 1, true)
    assert.error_matches(function() ember.data.fashion_mnist("train", dir) end,
      "ember.data.fashion_mnist: cannot find train-images-idx3-ubyte.gz in " .. dir, 1, true)
    rmdir(dir)
    assert.error_matches(function() ember.data.fashion_mnist("validation") end,
      'split must be "train" or "test"', 1, true)
  end)

  local test_it = have and it or pending
  test_it("test split: {10000, 1, 28, 28} in [0,1], labels 1..10 starting 10,3,2,2,7", function()
    local ds = ember.data.fashion_mnist("test")
    assert.are.equal(10000, #ds)
    assert.are.same({ 10000, 1, 28, 28 }, ds.x:shape())
    assert.are.same({ 10000 }, ds.y:shape())
    assert.are.equal("float32", ds.x.dtype)
    assert.are.equal("int64", ds.y.dtype)
    assert.are.same({ 10, 3, 2, 2, 7 }, ds.y:narrow(1, 1, 5):tolist())
    assert.are.equal(1, ds.y:min():item())
    assert.are.equal(10, ds.y:max():item())
    assert.are.equal(0, ds.x:min():item())
    assert.are.equal(1, ds.x:max():item())
    local loader = ember.data.DataLoader(ds, { batch_size = 128, shuffle = true, seed = 1 })
    assert.are.equal(79, #loader)
    local x, y = loader:iter()()
    assert.are.same({ 128, 1, 28, 28 }, x:shape())
    assert.are.same({ 128 }, y:shape())
  end)

  test_it("train split: {60000, 1, 28, 28}, labels 1..10, one float copy at most while loading", function()
    collectgarbage(); ember._sweep()
    local before = ember.memory_stats().bytes_in_use
    ember.reset_peak_memory()
    local ds = ember.data.fashion_mnist("train")
    -- the uint8 images and one float32 copy, scaled in place (not a second float copy)
    local float_bytes = 60000 * 784 * 4
    assert.is_true(ember.memory_stats().peak_bytes - before < float_bytes * 1.5)
    assert.are.equal(60000, #ds)
    assert.are.same({ 60000, 1, 28, 28 }, ds.x:shape())
    assert.are.same({ 10, 1, 1 }, ds.y:narrow(1, 1, 3):tolist())   -- raw 9 0 0
    assert.are.equal(1, ds.y:min():item())
    assert.are.equal(10, ds.y:max():item())
    -- balanced classes: 6000 of each
    for c = 1, 10 do assert.are.equal(6000, ds.y:eq(c):sum():item()) end
  end)
end)

describe("ember.data.TensorDataset and DataLoader", function()
  local function dataset(n)
    local x = ember.arange(1, n + 1, { dtype = "float32" }):reshape({ n, 1 }) * 10
    local y = ember.arange(1, n + 1)
    return ember.data.TensorDataset(x, y)
  end
  -- every batch of one epoch: list of {xs, ys}
  local function epoch(loader)
    local out = {}
    for x, y in loader:iter() do
      local xs = H.flatten(x:tolist())
      local ys = y:tolist()
      for i = 1, #ys do assert.are.equal(ys[i] * 10, xs[i], "x and y stay aligned") end
      out[#out + 1] = ys
    end
    return out
  end
  local function concat_all(batches)
    local all = {}
    for _, b in ipairs(batches) do for _, v in ipairs(b) do all[#all + 1] = v end end
    return all
  end
  local function is_perm(list, n)
    local sorted = { unpack(list) }
    table.sort(sorted)
    if #sorted ~= n then return false end
    for i = 1, n do if sorted[i] ~= i then return false end end
    return true
  end

  it("TensorDataset has a size, fields and get", function()
    local ds = dataset(5)
    assert.are.equal(5, #ds)
    assert.are.equal(5, ds:size())
    local x, y = ds:get(3)
    assert.are.same({ 30 }, x:tolist())
    assert.are.equal(3, y:item())
    assert.is_truthy(tostring(ds):find("TensorDataset(5", 1, true))
    assert.error_matches(function() ds:get(6) end, "index 6 out of range for a data set of 5 samples", 1, true)
    assert.error_matches(function() ember.data.TensorDataset(ember.ones({ 3, 2 }), ember.ones({ 4 })) end,
      "x {3, 2} and y {4} hold different numbers of samples", 1, true)
    assert.error_matches(function() ember.data.TensorDataset({}) end, "expected a tensor x", 1, true)
  end)

  it("counts batches with and without drop_last", function()
    local ds = dataset(10)
    local cases = { { 3, false, 4 }, { 3, true, 3 }, { 5, false, 2 }, { 5, true, 2 }, { 1, false, 10 },
      { 10, true, 1 }, { 20, false, 1 }, { 20, true, 0 } }
    for _, c in ipairs(cases) do
      local loader = ember.data.DataLoader(ds, { batch_size = c[1], drop_last = c[2] })
      assert.are.equal(c[3], #loader)
      assert.are.equal(c[3], #epoch(loader))
    end
    assert.are.equal(10, #ember.data.DataLoader(ds))   -- batch_size 1 by default
  end)

  it("cuts batches in order without shuffle", function()
    local b = epoch(ember.data.DataLoader(dataset(10), { batch_size = 3 }))
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 }, { 10 } }, b)
    b = epoch(ember.data.DataLoader(dataset(10), { batch_size = 3, drop_last = true }))
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } }, b)
  end)

  it("shuffles reproducibly for a seed, differently each epoch, as a permutation", function()
    local ds = dataset(50)
    local a = ember.data.DataLoader(ds, { batch_size = 8, shuffle = true, seed = 42 })
    local b = ember.data.DataLoader(ds, { batch_size = 8, shuffle = true, seed = 42 })
    local a1, a2 = concat_all(epoch(a)), concat_all(epoch(a))
    local b1, b2 = concat_all(epoch(b)), concat_all(epoch(b))
    assert.are.same(a1, b1)
    assert.are.same(a2, b2)
    assert.are_not.same(a1, a2)
    assert.is_true(is_perm(a1, 50))
    assert.is_true(is_perm(a2, 50))
    local ordered = {}
    for i = 1, 50 do ordered[i] = i end
    assert.are_not.same(ordered, a1)
    local c = ember.data.DataLoader(ds, { batch_size = 8, shuffle = true, seed = 43 })
    assert.are_not.same(a1, concat_all(epoch(c)))
    a:set_epoch(1)   -- replays the second epoch
    assert.are.same(a2, concat_all(epoch(a)))
    assert.are.equal(2, a.epoch)
  end)

  it("drop_last with shuffle gives only full batches", function()
    local batches = epoch(ember.data.DataLoader(dataset(10), { batch_size = 3, shuffle = true, seed = 1,
      drop_last = true }))
    assert.are.equal(3, #batches)
    for _, bt in ipairs(batches) do assert.are.equal(3, #bt) end
  end)

  it("without a seed, follows ember.manual_seed", function()
    local ds = dataset(30)
    ember.manual_seed(7)
    local a = concat_all(epoch(ember.data.DataLoader(ds, { batch_size = 4, shuffle = true })))
    ember.manual_seed(7)
    local b = concat_all(epoch(ember.data.DataLoader(ds, { batch_size = 4, shuffle = true })))
    assert.are.same(a, b)
    assert.is_true(is_perm(a, 30))
  end)

  it("a seeded loader leaves ember's generator alone", function()
    ember.manual_seed(5)
    local r1 = ember.rand({ 4 }):tolist()
    ember.manual_seed(5)
    epoch(ember.data.DataLoader(dataset(20), { batch_size = 4, shuffle = true, seed = 9 }))
    assert.are.same(r1, ember.rand({ 4 }):tolist())
  end)

  it("takes any data set with get(i) and size()", function()
    local ds = { size = function() return 5 end,
      get = function(_, i) return ember.tensor({ i * 10 }), i end }
    local b = epoch(ember.data.DataLoader(ds, { batch_size = 2 }))
    assert.are.same({ { 1, 2 }, { 3, 4 }, { 5 } }, b)
    local s = concat_all(epoch(ember.data.DataLoader(ds, { batch_size = 2, shuffle = true, seed = 3 })))
    assert.is_true(is_perm(s, 5))
  end)

  it("rejects bad options", function()
    local ds = dataset(4)
    assert.error_matches(function() ember.data.DataLoader(ds, { batch_size = 0 }) end,
      "ember.data.DataLoader: batch_size must be a positive integer, got 0", 1, true)
    assert.error_matches(function() ember.data.DataLoader(ds, { batch_size = 1.5 }) end,
      "batch_size must be a positive integer", 1, true)
    assert.error_matches(function() ember.data.DataLoader(ds, { shuffle = true, seed = -1 }) end,
      "seed must be a non-negative integer", 1, true)
    assert.error_matches(function() ember.data.DataLoader(42) end, "expected a data set", 1, true)
    assert.error_matches(function() ember.data.DataLoader(ds, 5) end, "options must be a table", 1, true)
  end)
end)
