-- ember.distributed: data parallelism over MPI, and over NCCL for CUDA
-- tensors (distributed_nccl.lua; docs/distributed.md). CPU collectives go
-- through libember_dist (dist/), ember's own small C library compiled
-- against mpi.h, so MPI's handle types never reach Lua. Without an
-- MPI launcher in the environment the world has one rank and every CPU
-- collective is done locally (no MPI is needed then).
local ffi = require("ffi")

return function(ember)
  local C = ember._C
  local M = {}
  local floor, max = math.floor, math.max

  -- declared once per Lua state (the FFI outlives a re-required package)
  local reg = debug.getregistry()
  if not reg.ember_distributed_cdef then
  reg.ember_distributed_cdef = true
  ffi.cdef(require("ember.dist_cdef"))   -- dist/ember_dist.h's, copied by the build
  end

  local lib, lib_path, lib_err
  local state = { init = false, rank = 0, size = 1, local_rank = 0, mpi = false }
  local hbuf = ffi.new("int[1]")
  local dbuf = ffi.new("int[1]")

  -- One of dist/'s libraries: $<env>, beside libember, or the linker's
  -- path; returns it and its path, or nil and why not (`missing` when it is
  -- nowhere).
  local function open_library(env, name, missing)
    local list, errs = {}, {}
    local set = os.getenv(env)
    if set and set ~= "" then list[#list + 1] = set end
    local dir = (ember._libpath or ""):match("^(.*)/[^/]*$")
    if dir then list[#list + 1] = dir .. "/lib" .. name .. ".so" end
    list[#list + 1] = name
    for _, p in ipairs(list) do
      local f = p == name or io.open(p, "rb")
      if f then
        if f ~= true then f:close() end
        -- global: Open MPI's components look up libmpi's symbols
        local ok, l = pcall(ffi.load, p, true)
        if ok then return l, p end
        if p ~= name then errs[#errs + 1] = tostring(l) end   -- a file that is there but fails
      end
    end
    return nil, #errs > 0 and table.concat(errs, "; ") or missing
  end

  -- libember_dist (MPI)
  local function load_lib()
    if not (lib or lib_err) then
      local l, info = open_library("EMBER_DIST_LIB", "ember_dist",
        "libember_dist.so not found (MPI was not found at build time)")
      if l then lib, lib_path = l, info else lib_err = info end
    end
    return lib
  end

  -- whether this process was started by an MPI launcher, and the world's size
  local function launcher_size()
    local s = os.getenv("OMPI_COMM_WORLD_SIZE") or os.getenv("PMI_SIZE") or os.getenv("PMIX_SIZE")
    if s then return tonumber(s) end
    if os.getenv("PMIX_RANK") or os.getenv("PMI_RANK") then return 0 end
    return nil
  end

  local errors = require("ember.errors")
  local function fail(op, msg) errors.fail("distributed." .. op, msg) end
  local function lib_fail() errors.raise("ember." .. ffi.string(lib.edist_last_error())) end

  -- Whether MPI (libember_dist) is there to be used.
  function M.is_available()
    return load_lib() ~= nil, lib_err
  end
  M._lib_path = function() load_lib(); return lib_path end

  function M.init()
    if state.init then return M end
    local n = launcher_size()
    if n ~= nil then
      if not load_lib() then
        fail("init", "started by an MPI launcher but libember_dist cannot be loaded: " .. tostring(lib_err)
          .. " (install libopenmpi-dev, e.g. scripts/setup.sh, and rebuild)")
      end
      if lib.edist_init() < 0 then lib_fail() end
      state.mpi = true
      state.rank, state.size, state.local_rank = lib.edist_rank(), lib.edist_size(), lib.edist_local_rank()
    end
    state.init = true
    return M
  end
  function M.is_initialized() return state.init end
  local function need_init(op) if not state.init then M.init() end end
  function M.rank() need_init(); return state.rank end
  function M.world_size() need_init(); return state.size end
  function M.local_rank() need_init(); return state.local_rank end
  function M.backend() need_init(); return state.mpi and "mpi" or "local" end
  function M.barrier()
    need_init()
    if state.mpi and lib.edist_barrier() < 0 then lib_fail() end
  end

  ---------------------------------------------------------------- tensors
  -- A transport carries one device's tensors: MPI those on the CPU, NCCL
  -- (distributed_nccl.lua, loaded on first use) those on a CUDA device. Each
  -- has all_reduce/broadcast/all_gather(..., handle_out) -> rc, test(id),
  -- wait(id, op), raise() (the last error), active() (false: done locally),
  -- mean_done (whether all_reduce "mean" already divides) and float_names
  -- (the float dtypes it carries, for messages).
  local OPS = { sum = 0, max = 1, min = 2, mean = 0 }   -- EDIST_SUM, _MAX, _MIN
  local CARRIED = { float32 = true, float64 = true, int32 = true, int64 = true, uint8 = true, bool = true }
  local FLOATS = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
  local function dtype_code(t) return C.ember_tensor_dtype(t._c) end

  local MPI = { float_names = "float32 or float64" }
  function MPI.active() return state.mpi and state.size > 1 end
  function MPI.raise() lib_fail() end
  function MPI.all_reduce(work, op, hb)
    return lib.edist_iallreduce(work:data_ptr(), work:numel(), dtype_code(work), OPS[op], hb)
  end
  function MPI.broadcast(work, root, hb)
    return lib.edist_ibroadcast(work:data_ptr(), work:numel(), dtype_code(work), root, hb)
  end
  function MPI.all_gather(send, recv, hb)
    return lib.edist_iallgather(send:data_ptr(), recv:data_ptr(), send:numel(), dtype_code(send), hb)
  end
  function MPI.test(id)
    if lib.edist_test(id, dbuf) < 0 then lib_fail() end
    return dbuf[0] ~= 0
  end
  function MPI.wait(id, op)
    if lib.edist_wait(id, op) < 0 then lib_fail() end
  end
  function MPI.check(op, t, reduce)
    if not CARRIED[t.dtype] then
      fail(op, "MPI cannot " .. (reduce and "reduce " or "carry ") .. t.dtype .. " tensors; convert with :float() first")
    end
  end

  local nccl
  local function NCCL()
    nccl = nccl or require("ember.distributed_nccl")(ember, { state = state, fail = fail,
      open_library = open_library, mpi_lib = function() return lib end })
    return nccl
  end

  -- NCCL's status: true, or false and why CUDA tensors cannot be reduced here
  function M.is_nccl_available() return NCCL().status() end
  M._nccl = NCCL

  -- the transport of t after checking t, its dtype and the op
  local function check_tensor(op, t, reduce)
    if not ember.is_tensor(t) then fail(op, "expected a tensor, got " .. type(t)) end
    local tr = t.device == "cpu" and MPI or NCCL()
    tr.check(op, t, reduce)
    local dt = t.dtype
    if reduce then
      if OPS[reduce] == nil then
        fail(op, "unknown op '" .. tostring(reduce) .. "' (sum, mean, max or min)")
      end
      if reduce == "mean" and not FLOATS[dt] then
        fail(op, "mean needs a " .. tr.float_names .. " tensor, got " .. dt)
      end
      if reduce == "sum" and dt == "bool" then fail(op, "cannot sum bool tensors (max or min work)") end
    end
    return tr
  end

  -- live requests: handle -> true (keeps the handle and its buffers alive)
  local inflight = {}
  local Handle = {}
  Handle.__index = Handle

  local function finish(h)
    if h.done then return end
    h.done = true
    inflight[h] = nil
    if h.post then h.post() end
  end
  function Handle:wait()
    if not self.done then
      if self.id then
        local ok, err = pcall(self.tr.wait, self.id, self.op)
        if not ok then
          inflight[self] = nil
          self.done = true
          error(err, 0)
        end
      end
      finish(self)
    end
    return self.result
  end
  function Handle:is_completed()
    if not self.done and self.tr.test(self.id) then finish(self) end
    return self.done
  end

  -- starts fn(handle_out) on tr, or when tr is not active (a world of one on
  -- MPI) finishes at once
  local function launch(op, tr, result, fn, post)
    local h = setmetatable({ op = op, tr = tr, result = result, post = post }, Handle)
    if tr.active() then
      ember._jit_refuse("distributed." .. op, "a collective runs outside the ops a plan replays")
      if fn(hbuf) < 0 then tr.raise() end
      h.id = hbuf[0]
      inflight[h] = true
    else
      finish(h)
    end
    return h
  end

  local function async_of(opts)
    return type(opts) == "table" and opts.async
  end

  -- all_reduce(t, op = "sum", {async = false}): in place; returns t (or a handle)
  function M.all_reduce(t, op, opts)
    need_init()
    op = op or "sum"
    local tr = check_tensor("all_reduce", t, op)
    local work = t:is_contiguous() and t or t:contiguous()
    local W = state.size
    local h = launch("all_reduce", tr, t, function(hb) return tr.all_reduce(work, op, hb) end, function()
      if op == "mean" and W > 1 and not tr.mean_done then work:div_(W) end
      if work ~= t then t:copy_(work) end
    end)
    if async_of(opts) then return h end
    return h:wait()
  end

  function M.broadcast(t, root, opts)
    need_init()
    root = root or 0
    local tr = check_tensor("broadcast", t)
    if type(root) ~= "number" or root ~= floor(root) or root < 0 or root >= state.size then
      fail("broadcast", "root " .. tostring(root) .. " is not a rank of a world of " .. state.size)
    end
    local work = t:is_contiguous() and t or t:contiguous()
    local h = launch("broadcast", tr, t, function(hb) return tr.broadcast(work, root, hb) end, function()
      if work ~= t then t:copy_(work) end
    end)
    if async_of(opts) then return h end
    return h:wait()
  end

  -- all_gather(t) -> { t of rank 0, ..., t of rank world_size - 1 } (new tensors)
  function M.all_gather(t, opts)
    need_init()
    local tr = check_tensor("all_gather", t)
    local W = state.size
    local send = t:contiguous()
    local shape = t:shape()
    local full = { W }
    for i = 1, #shape do full[i + 1] = shape[i] end
    local recv = ember.empty(full, { dtype = t.dtype, device = t.device })
    local list = {}
    local h = launch("all_gather", tr, list, function(hb) return tr.all_gather(send, recv, hb) end, function()
      if not tr.active() then recv:select(1, 1):copy_(send) end
      for r = 1, W do list[r] = recv:select(1, r) end
    end)
    h._keep = send
    if async_of(opts) then return h end
    return h:wait()
  end

  -- Every parameter (and buffer) of a module, or every tensor of a list,
  -- takes rank `root`'s values.
  function M.broadcast_parameters(m, root)
    need_init()
    local list
    if ember.is_tensor(m) then
      list = { m }
    elseif type(m) == "table" and type(m.parameters) == "function" then
      list = m:parameters()
      if type(m.buffers) == "function" then
        for _, b in ipairs(m:buffers()) do list[#list + 1] = b end
      end
    elseif type(m) == "table" then
      list = m
    else
      fail("broadcast_parameters", "expected a module, a tensor or a list of tensors, got " .. type(m))
    end
    local hs = {}
    for i, t in ipairs(list) do
      if not ember.is_tensor(t) then fail("broadcast_parameters", "entry " .. i .. " is not a tensor") end
      hs[i] = M.broadcast(t, root, { async = true })
    end
    for _, h in ipairs(hs) do h:wait() end
    return m
  end

  ---------------------------------------------------------------- bucketed all-reduce for GradManager
  -- the gradient dtypes each device's buckets take
  local GRAD_DTYPES = { cpu = { float32 = true, float64 = true }, cuda = FLOATS }
  -- libember's monotonic clock (core/src/platform.h), on every system
  local clock = C.ember_clock
  local function now() return clock() end

  -- seconds on a monotonic clock (for timing steps and epochs)
  M.wtime = now

  local AR = {}
  AR.__index = AR

  -- A GradManager callback: each gradient is copied into a fresh contiguous
  -- tensor (which becomes .grad) and packed into the open bucket of its
  -- device and dtype (CPU buckets go over MPI, CUDA buckets over NCCL);
  -- a bucket that reaches bucket_mb is closed and its all-reduce launched
  -- without blocking. Before a launch, the ranks compare what the bucket
  -- holds (index, dtype, element count, tensor count) on a communicator of
  -- their own, so ranks that attach different tensors get an error rather
  -- than a deadlock or a wrong sum. GradManager runs flush() before backward
  -- returns: the open buckets are closed, an end marker is compared, and every
  -- bucket is waited for and copied back.
  function M.make_allreduce_cb(op, opts)
    op = op or "mean"
    if op ~= "sum" and op ~= "mean" then
      fail("make_allreduce_cb", "op must be 'sum' or 'mean', got " .. tostring(op))
    end
    opts = opts or {}
    if type(opts) ~= "table" then fail("make_allreduce_cb", "options must be a table") end
    local mb = opts.bucket_mb or 25
    if type(mb) ~= "number" or not (mb > 0) then
      fail("make_allreduce_cb", "bucket_mb must be a positive number, got " .. tostring(mb))
    end
    need_init()
    local self = setmetatable({ op = op, cap = mb * 2 ^ 20, open = {}, open_order = {}, queue = {},
      seq = 0, managers = setmetatable({}, { __mode = "k" }),
      stats = { backwards = 0, buckets = 0, bytes = 0, flush_wait_s = 0, comm_s = 0,
        hidden_buckets = 0, hidden_bytes = 0 } }, AR)
    return self
  end

  function AR.__call(self, t, g)
    local dt, dev = g.dtype, g.device
    local kind = dev == "cpu" and "cpu" or "cuda"
    if not GRAD_DTYPES[kind][dt] then
      fail("make_allreduce_cb", "cannot all-reduce a " .. dt .. " gradient on " .. dev .. " ("
        .. (kind == "cpu" and MPI.float_names or NCCL().float_names) .. " only)")
    end
    local out = ember.empty(g:shape(), { dtype = dt, device = dev })
    out:copy_(g)
    if not (state.mpi and state.size > 1) then
      return out   -- a world of one: sum and mean are the gradient itself
    end
    local key = dev .. " " .. dt
    local b = self.open[key]
    if b == nil then
      if kind == "cuda" then
        NCCL().check("make_allreduce_cb", g)
        -- made here, at the same point of backward on every rank (data
        -- launches, in AR:_progress, come at different times on each)
        NCCL().start("make_allreduce_cb")
      end
      b = { key = key, dtype = dt, device = dev, tr = kind == "cpu" and MPI or NCCL(), items = {}, numel = 0,
        code = C.ember_tensor_device(g._c) * 8 + dtype_code(g), esize = C.ember_dtype_size(dtype_code(g)) }
      self.open[key] = b
      self.open_order[#self.open_order + 1] = b
    end
    b.items[#b.items + 1] = out
    b.numel = b.numel + out:numel()
    if b.numel * b.esize >= self.cap then
      self.open[key] = nil
      for i, x in ipairs(self.open_order) do
        if x == b then table.remove(self.open_order, i) break end
      end
      self:_close(b)
    end
    self:_progress()
    return out
  end

  -- layout header: bucket index, 8 * device + dtype code (-1 at the end),
  -- elements, tensors;
  -- the max of (h, -h) over ranks equals (h, -h) only where all ranks agree
  local HN = 4
  function AR:_close(b)
    self.seq = self.seq + 1
    b.seq = self.seq
    b.header = ffi.new("int64_t[?]", 2 * HN)
    local h = { self.seq, b.code or -1, b.numel or 0, b.items and #b.items or 0 }
    b.h = h
    for i = 1, HN do b.header[i - 1] = h[i]; b.header[HN + i - 1] = -h[i] end
    if lib.edist_imeta_max(b.header, 2 * HN, hbuf) < 0 then lib_fail() end
    b.hid = hbuf[0]
    b.state = "header"
    self.queue[#self.queue + 1] = b
  end

  local function describe(vals)
    if vals[2] < 0 then return "end of backward" end
    local dev = floor(vals[2] / 8)
    return ("%s%s bucket of %d elements in %d tensors"):format(ffi.string(C.ember_dtype_name(vals[2] % 8)),
      dev > 0 and (" cuda:" .. dev - 1) or "", vals[3], vals[4])
  end

  function AR:_check_header(b)
    local H = b.header
    for i = 0, HN - 1 do
      if H[i] ~= -H[HN + i] then
        local hi, lo = {}, {}
        for k = 1, HN do hi[k] = tonumber(H[k - 1]); lo[k] = -tonumber(H[HN + k - 1]) end
        self.broken = true
        error(("ember.distributed.make_allreduce_cb: the ranks attach different gradients: bucket %d of this "
          .. "backward is a %s on rank %d, but the ranks range from (%s) to (%s); attach the same parameters "
          .. "in the same order on every rank"):format(b.h[1], describe(b.h), state.rank, describe(lo), describe(hi)), 0)
      end
    end
  end

  function AR:_launch_data(b)
    self:_check_header(b)
    if b.dtype == nil then b.state = "done"; return end   -- the end marker
    local flat
    if #b.items == 1 then
      flat = b.items[1]
    else
      flat = ember.empty({ b.numel }, { dtype = b.dtype, device = b.device })
      local off = 1
      for _, x in ipairs(b.items) do
        local n = x:numel()
        flat:narrow(1, off, n):copy_(x:reshape(n))
        off = off + n
      end
    end
    b.flat = flat
    if b.tr.all_reduce(flat, "sum", hbuf) < 0 then b.tr.raise() end
    b.did = hbuf[0]
    b.t0 = now()
    b.state = "data"
    self.stats.buckets = self.stats.buckets + 1
    self.stats.bytes = self.stats.bytes + b.numel * b.esize
  end

  function AR:_finish(b)
    local W = state.size
    local flat = b.flat
    if self.op == "mean" then flat:div_(W) end
    if #b.items > 1 then
      local off = 1
      for _, x in ipairs(b.items) do
        local n = x:numel()
        x:reshape(n):copy_(flat:narrow(1, off, n))
        off = off + n
      end
    end
    b.state = "done"
  end

  -- Advances the queue without blocking: headers that have arrived launch
  -- their data (in bucket order), data that has arrived is copied back.
  function AR:_progress()
    for _, b in ipairs(self.queue) do
      if b.state == "header" then   -- data goes out in bucket order: stop at the first
        if not MPI.test(b.hid) then break end
        self:_launch_data(b)
      end
      if b.state == "data" then
        if b.tr.test(b.did) then
          self.stats.comm_s = self.stats.comm_s + (now() - b.t0)
          self:_finish(b)
          -- done while backward went on: wholly hidden
          self.stats.hidden_buckets = self.stats.hidden_buckets + 1
          self.stats.hidden_bytes = self.stats.hidden_bytes + b.numel * b.esize
        end
      end
    end
  end

  -- Run by GradManager before backward returns (ok = false after a failed
  -- backward: the buckets are dropped).
  function AR:flush(ok)
    if not (state.mpi and state.size > 1) then return end
    if ok == false then
      -- a failed backward: the buckets are dropped; this callback refuses
      -- further backwards, since the ranks are no longer in step
      self:_drain()
      self.open, self.open_order = {}, {}
      self.broken = true
      return
    end
    if self.broken then
      fail("make_allreduce_cb", "an earlier backward failed part-way; the ranks are no longer in step")
    end
    local t0 = now()
    local ok2, err = pcall(self._flush, self)
    if not ok2 then
      self:_drain()
      self.broken = true
      error(err, 0)
    end
    self.queue = {}
    self.seq = 0
    self.stats.backwards = self.stats.backwards + 1
    self.stats.flush_wait_s = self.stats.flush_wait_s + (now() - t0)
  end

  -- After an error: give what is still in flight up to a second to complete
  -- (it does when every rank launched the same number of requests), so the
  -- process can still finalise MPI cleanly at exit; what does not complete
  -- makes the exit abort the job.
  function AR:_drain()
    local t0 = now()
    for _, b in ipairs(self.queue) do
      local tr, id = MPI, b.state == "header" and b.hid or nil
      if b.state == "data" then tr, id = b.tr, b.did end
      while id and now() - t0 <= 1 do
        local ok, done = pcall(tr.test, id)
        if not ok or done then break end
      end
    end
    self.queue = {}
    self.open, self.open_order = {}, {}
  end

  function AR:_flush()
    for _, b in ipairs(self.open_order) do self:_close(b) end
    self.open, self.open_order = {}, {}
    self:_close({ items = false })   -- end of backward marker
    for _, b in ipairs(self.queue) do
      if b.state == "header" then
        if lib.edist_wait(b.hid, "make_allreduce_cb") < 0 then lib_fail() end
        self:_launch_data(b)
      end
      if b.state == "data" then
        b.tr.wait(b.did, "make_allreduce_cb")
        self.stats.comm_s = self.stats.comm_s + (now() - b.t0)
        self:_finish(b)
      end
    end
  end

  -- GradManager:attach calls this once per manager: the flush point.
  function AR:on_attach(gm)
    if self.managers[gm] then return end
    self.managers[gm] = true
    gm:register_before_backward_returns(function(ok) return self:flush(ok) end)
  end

  ---------------------------------------------------------------- exit
  M._state = state
  return M
end
