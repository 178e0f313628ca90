-- ember.data: data sets held as whole tensors (x {N, ...}, y {N, ...}) and a
-- DataLoader that cuts them into batches with narrow (in order) or one
-- index_select per batch (shuffled). IDX files (MNIST, Fashion-MNIST) are read
-- by the C core (ember_load_idx, gzip through zlib). Not a streaming loader:
-- a data set lives in memory, and there are no worker threads.
local ffi = require("ffi")
local errors = require("ember.errors")
local bit = require("bit")

return function(ember)
  local C = ember._C
  local M = {}
  local out1 = ffi.new("ember_tensor *[1]")
  local floor = math.floor

  -- the progress bar and the plots ride along with data (init.lua's list is fixed)
  if ember.progress == nil then ember.progress = require("ember.progress") end
  if ember.plot == nil then ember.plot = require("ember.plot") end

  local function fail(op, msg) errors.fail("data." .. op, msg) end

  -- Objects that answer `#obj` under LuaJIT (whose tables ignore __len): a
  -- userdata proxy whose fields live in a plain table behind it.
  local function object(class, fields)
    local p = newproxy(true)
    local mt = getmetatable(p)
    setmetatable(fields, { __index = class })
    mt.__index = fields
    mt.__newindex = fields
    mt.__len = function() return class.size(p) end
    mt.__tostring = class.__tostring and function() return class.__tostring(p) end
    mt.__class = class
    return p
  end

  local shape_str = errors.shape

  ---------------------------------------------------------------- TensorDataset
  local TensorDataset = { __name = "TensorDataset" }
  M.TensorDataset_class = TensorDataset

  function TensorDataset.size(self) return self.n end
  function TensorDataset.__tostring(self)
    return ("TensorDataset(%d: x %s %s%s)"):format(self.n, shape_str(self.x), self.x.dtype,
      self.y and (", y " .. shape_str(self.y) .. " " .. self.y.dtype) or "")
  end
  -- the i-th sample (1-based): x[i] and y[i] as views (y[i] is 0-d for labels)
  function TensorDataset.get(self, i)
    if type(i) ~= "number" or i ~= floor(i) or i < 1 or i > self.n then
      fail("get", ("index %s out of range for a data set of %d samples"):format(tostring(i), self.n))
    end
    if self.y then return self.x:select(1, i), self.y:select(1, i) end
    return self.x:select(1, i)
  end

  -- ember.data.TensorDataset(x, y?): samples along the first dim of both.
  local function tensor_dataset(x, y, op)
    if not ember.is_tensor(x) then fail(op, "expected a tensor x, got " .. type(x)) end
    if x:dim() == 0 then fail(op, "x must have at least one dim (the samples)") end
    local n = x:size(1)
    if y ~= nil then
      if not ember.is_tensor(y) then fail(op, "expected a tensor y, got " .. type(y)) end
      if y:dim() == 0 or y:size(1) ~= n then
        fail(op, ("x %s and y %s hold different numbers of samples")
          :format(shape_str(x), shape_str(y)))
      end
    end
    return object(TensorDataset, { x = x, y = y, n = n })
  end
  function M.TensorDataset(x, y) return tensor_dataset(x, y, "TensorDataset") end

  ---------------------------------------------------------------- IDX files
  local function load_idx(op, path)
    if type(path) ~= "string" then fail(op, "expected a file path, got " .. type(path)) end
    local rc = C.ember_load_idx(path, out1)
    if rc < 0 then fail(op, ffi.string(C.ember_last_error())) end
    return ember._wrap(out1[0])
  end

  -- ember.data.mnist_idx(images_path, labels_path?): images {N, H, W} (or
  -- {N, C, H, W}) become float32 {N, 1, H, W}, uint8 scaled to [0, 1]; labels
  -- {N} become int64, 1-based (raw + 1).
  local function mnist_idx(images_path, labels_path, op)
    local x = load_idx(op, images_path)
    local s = x:shape()
    if #s == 3 then
      x = x:reshape({ s[1], 1, s[2], s[3] })
    elseif #s ~= 4 then
      fail(op, ("%s: expected images of 3 dims {N,H,W}, got %s"):format(images_path, shape_str(x)))
    end
    -- scaled in place: a second float copy of a whole data set would double the peak memory
    if x.dtype == "uint8" then x = x:to("float32"):div_(255) else x = x:to("float32") end
    local y
    if labels_path ~= nil then
      y = load_idx(op, labels_path)
      if y:dim() ~= 1 then
        fail(op, ("%s: expected labels of 1 dim {N}, got %s"):format(labels_path, shape_str(y)))
      end
      if y:size(1) ~= x:size(1) then
        fail(op, ("%d images in %s but %d labels in %s"):format(x:size(1), images_path, y:size(1),
          labels_path))
      end
      y = y:to("int64") + 1
    end
    return tensor_dataset(x, y, op)
  end
  function M.mnist_idx(images_path, labels_path) return mnist_idx(images_path, labels_path, "mnist_idx") end

  local DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
  local function exists(path)
    local f = io.open(path, "rb")
    if f then f:close() return true end
    return false
  end
  M.DEFAULT_FASHION_MNIST_DIR = DEFAULT_DIR

  -- ember.data.fashion_mnist("train" | "test", dir?): the IDX files of the
  -- Debian package dataset-fashion-mnist. The folder is `dir`, else
  -- $EMBER_DATA_DIR (or its fashion-mnist/ subfolder), else DEFAULT_DIR.
  function M.fashion_mnist(split, dir)
    split = split or "train"
    local prefix = ({ train = "train", test = "t10k", t10k = "t10k" })[split]
    if not prefix then
      fail("fashion_mnist", "split must be \"train\" or \"test\", got " .. tostring(split))
    end
    if dir ~= nil and type(dir) ~= "string" then
      fail("fashion_mnist", "dir must be a string, got " .. type(dir))
    end
    local dirs = {}
    if dir then
      dirs[1] = dir
    else
      local env = os.getenv("EMBER_DATA_DIR")
      if env and env ~= "" then
        dirs[#dirs + 1] = env .. "/fashion-mnist"
        dirs[#dirs + 1] = env
      end
      dirs[#dirs + 1] = DEFAULT_DIR
    end
    local function find(name)
      for _, d in ipairs(dirs) do
        for _, ext in ipairs({ ".gz", "" }) do
          local p = d .. "/" .. name .. ext
          if exists(p) then return p end
        end
      end
    end
    local img_name = prefix .. "-images-idx3-ubyte"
    local lbl_name = prefix .. "-labels-idx1-ubyte"
    local images, labels = find(img_name), find(lbl_name)
    if not images or not labels then
      fail("fashion_mnist", ("cannot find %s.gz in %s (install the data with "
        .. "`apt install dataset-fashion-mnist`, or point EMBER_DATA_DIR at a folder holding it)")
        :format(images and lbl_name or img_name, table.concat(dirs, " or ")))
    end
    return mnist_idx(images, labels, "fashion_mnist")
  end

  ---------------------------------------------------------------- shuffling
  -- splitmix64 over uint64 cdata: a permutation depends only on (seed, epoch),
  -- never on ember's global generator, so seeding a loader leaves
  -- ember.manual_seed's stream alone.
  local function splitmix(state)
    state = state + 0x9E3779B97F4A7C15ULL
    local z = state
    z = bit.bxor(z, bit.rshift(z, 30)) * 0xBF58476D1CE4E5B9ULL
    z = bit.bxor(z, bit.rshift(z, 27)) * 0x94D049BB133111EBULL
    z = bit.bxor(z, bit.rshift(z, 31))
    return state, z
  end

  -- A 1-based int64 permutation of 1..n for (seed, epoch), by Fisher-Yates.
  function M.permutation(n, seed, epoch)
    local buf = ffi.new("int64_t[?]", math.max(n, 1))
    for i = 0, n - 1 do buf[i] = i + 1 end
    local state = ffi.new("uint64_t", seed) * 0x100000001B3ULL + (epoch or 0)
    local z
    for i = n - 1, 1, -1 do
      state, z = splitmix(state)
      local u = tonumber(bit.rshift(z, 11)) / 2 ^ 53   -- [0, 1)
      local j = floor(u * (i + 1))
      buf[i], buf[j] = buf[j], buf[i]
    end
    local shape = ffi.new("int64_t[1]", n)
    local I64 = ember._DTYPE_ID.int64
    errors.check(C.ember_from_data(buf, I64, 1, shape, I64, 0, out1))
    return ember._wrap(out1[0])
  end

  ---------------------------------------------------------------- DataLoader
  local DataLoader = { __name = "DataLoader" }
  M.DataLoader_class = DataLoader

  -- distributed loaders: global batch g covers world * batch_size positions of
  -- the epoch's order; rank r takes the r-th of `world` near-equal parts. A
  -- last global batch with fewer positions than ranks joins the one before,
  -- so every rank has the same number of batches and none is empty.
  local function dist_batches(n, bs, W, drop_last)
    local gb = W * bs
    local nb = drop_last and floor(n / gb) or math.ceil(n / gb)
    local last_end = drop_last and nb * gb or n
    if not drop_last and nb > 1 and n - (nb - 1) * gb < W then nb = nb - 1 end
    return nb, last_end
  end

  function DataLoader.size(self)
    local n, bs = self.n, self.batch_size
    if self.world then return (dist_batches(n, bs, self.world, self.drop_last)) end
    if self.drop_last then return floor(n / bs) end
    return math.ceil(n / bs)
  end
  function DataLoader.__tostring(self)
    return ("DataLoader(%d samples, batch_size %d, %d batches%s%s)"):format(self.n, self.batch_size,
      self:size(), self.shuffle and ", shuffle" or "", self.drop_last and ", drop_last" or "")
  end

  -- Batches of a data set that is not a TensorDataset: its get(i) results stacked.
  local function generic_batch(ds, idx_list)
    local xs, ys = {}, {}
    for k, i in ipairs(idx_list) do
      local x, y = ds:get(i)
      if type(x) == "number" then x = ember.tensor(x) end
      if type(y) == "number" then y = ember.tensor(y, { dtype = "int64" }) end
      -- a sample the batch cannot hold is the data set's, named here rather than by ember.stack
      if not ember.is_tensor(x) then
        errors.fail("data.DataLoader", ("the data set's get(%d) returned %s as its sample, not a tensor or a number")
          :format(i, errors.show(x)))
      end
      if (y ~= nil and not ember.is_tensor(y)) or (k > 1 and (y == nil) ~= (ys[1] == nil)) then
        errors.fail("data.DataLoader", ("the data set's get(%d) returned %s as its label, not a tensor or a number")
          :format(i, errors.show(y)))
      end
      xs[k], ys[k] = x, y
    end
    return ember.stack(xs, 1), ys[1] ~= nil and ember.stack(ys, 1) or nil
  end

  -- a CPU batch in pinned memory (a device batch as it is)
  local function pinned(t) return t.device == "cpu" and t:pin_memory() or t end
  local batches

  -- loader:iter() -> an iterator of (x_batch, y_batch), one epoch per call.
  -- Each call with shuffle draws a new permutation (seed, epoch).
  function DataLoader.iter(self)
    local nb = self:size()
    local epoch = self.epoch
    self.epoch = epoch + 1
    local perm
    if self.shuffle then perm = M.permutation(self.n, self.seed, epoch) end
    local x, y = self.x, self.y
    if perm and x and x.device ~= "cpu" then perm = perm:to(x.device) end
    local next_batch = batches(self, x, y, perm, nb)
    if not self.pin_memory then return next_batch end
    return function()
      local bx, by = next_batch()
      if bx == nil then return nil end
      return pinned(bx), by and pinned(by) or nil
    end
  end

  -- the batches of one epoch, as iter() hands them out before pinning
  function batches(self, x, y, perm, nb)
    local ds, n, bs = self.dataset, self.n, self.batch_size
    local b = 0
    local W, R, last_end
    if self.world then
      W, R = self.world, self.rank
      nb, last_end = dist_batches(n, bs, W, self.drop_last)
    end
    return function()
      if b >= nb then return nil end
      local start = b * bs + 1
      local len = math.min(bs, n - start + 1)
      if W then   -- this rank's part of global batch b
        local gs = b * W * bs + 1
        local ge = b == nb - 1 and last_end or gs + W * bs - 1
        local m = ge - gs + 1
        local base, extra = floor(m / W), m % W
        start = gs + R * base + math.min(R, extra)
        len = base + (R < extra and 1 or 0)
      end
      b = b + 1
      if x then
        if perm then
          local idx = perm:narrow(1, start, len)
          return x:index_select(1, idx), y and y:index_select(1, idx) or nil
        end
        return x:narrow(1, start, len), y and y:narrow(1, start, len) or nil
      end
      local list = {}
      if perm then
        local p = perm:narrow(1, start, len):tolist()
        for k = 1, len do list[k] = p[k] end
      else
        for k = 1, len do list[k] = start + k - 1 end
      end
      return generic_batch(ds, list)
    end
  end
  -- the epoch the next iter() shuffles for (to resume a run, or to keep
  -- several loaders in step)
  function DataLoader.set_epoch(self, e)
    if type(e) ~= "number" or e ~= floor(e) or e < 0 then
      fail("DataLoader.set_epoch", "expected a non-negative integer, got " .. tostring(e))
    end
    self.epoch = e
    return self
  end

  -- ember.data.DataLoader(ds, {batch_size = 1, shuffle = false, drop_last = false, seed = ?,
  --                            generator = ?, distributed = false, pin_memory = false})
  -- ds: a TensorDataset (batches cut from ds.x / ds.y), or any object with
  -- `#ds` or ds:size() and ds:get(i) (samples stacked). Without a seed, a
  -- shuffling loader draws one from opts.generator (an ember.Generator) or
  -- else ember's default generator (so ember.manual_seed makes it
  -- reproducible). pin_memory: CPU batches in pinned memory where
  -- CUDA can be used (ordinary ones where it cannot, as PyTorch's loader).
  function M.DataLoader(ds, opts)
    opts = opts or {}
    if type(opts) ~= "table" then
      fail("DataLoader", "options must be a table, got " .. type(opts))
    end
    errors.known_options("DataLoader", opts, { "batch_size", "shuffle", "drop_last", "seed", "epoch",
      "distributed", "pin_memory", "generator" })
    local bs = opts.batch_size or 1
    if type(bs) ~= "number" or bs ~= floor(bs) or bs < 1 or bs > 2 ^ 53 then
      fail("DataLoader", "batch_size must be a positive integer, got " .. tostring(bs))
    end
    local x, y, n
    local mt = type(ds) == "userdata" and getmetatable(ds)
    if mt and mt.__class == TensorDataset then
      x, y, n = ds.x, ds.y, ds.n
    elseif (type(ds) == "table" or type(ds) == "userdata") and ds.get then
      n = ds.size and ds:size() or #ds
      if type(n) ~= "number" then fail("DataLoader", "cannot tell the size of the data set") end
    else
      fail("DataLoader", "expected a data set (ember.data.TensorDataset, or an object with get(i) "
        .. "and size()), got " .. type(ds))
    end
    local seed = opts.seed
    if seed ~= nil and (type(seed) ~= "number" or seed ~= floor(seed) or seed < 0) then
      fail("DataLoader", "seed must be a non-negative integer, got " .. tostring(seed))
    end
    local generator = opts.generator
    if generator ~= nil and not ember.is_generator(generator) then
      fail("DataLoader", "generator must be an ember.Generator, got " .. type(generator))
    end
    if generator ~= nil and seed ~= nil then
      fail("DataLoader", "give a seed or a generator, not both")
    end
    if seed == nil and opts.shuffle then
      seed = ember.randint(0, 2 ^ 31, { 1 }, { generator = generator }):item()
    end
    local rank, world
    if opts.distributed then
      -- ember.distributed: every rank shuffles alike (rank 0's seed) and
      -- takes a disjoint part of every batch
      local dist = ember.distributed
      dist.init()
      rank, world = dist.rank(), dist.world_size()
      if opts.shuffle and world > 1 then
        local t = ember.tensor({ seed }, { dtype = "int64" })
        dist.broadcast(t, 0)
        seed = t:item()
      end
      if n < world then
        fail("DataLoader", ("distributed over %d ranks needs at least %d samples, got %d"):format(world, world, n))
      end
    end
    return object(DataLoader, { dataset = ds, x = x, y = y, n = n, batch_size = bs,
      shuffle = opts.shuffle and true or false, drop_last = opts.drop_last and true or false,
      seed = seed or 0, epoch = opts.epoch or 0, rank = rank, world = world,
      pin_memory = opts.pin_memory and ember.cuda.is_available() or false })
  end

  package.loaded["ember.data"] = M
  return M
end
