-- ember.distributed's transport for CUDA tensors: NCCL through libember_nccl
-- (dist/ember_nccl.c), loaded the first time a CUDA tensor reaches a
-- collective, so Lua never sees NCCL's or CUDA's types (docs/distributed.md).
-- The communicator is made then too: rank 0 makes the unique id, which goes
-- to the other ranks over MPI as bytes. distributed.lua hands in `ctx`: the
-- world's state, its MPI library and library loader, and its error helper.
local ffi = require("ffi")

return function(ember, ctx)
  local C = ember._C
  local state, fail = ctx.state, ctx.fail
  local T = {}

  local reg = debug.getregistry()
  if not reg.ember_nccl_cdef then
    reg.ember_nccl_cdef = true
    ffi.cdef(require("ember.nccl_cdef"))   -- dist/ember_nccl.h's, copied by the build
  end

  local lib, lib_err
  local function load_lib()
    if not (lib or lib_err) then
      local l, info = ctx.open_library("EMBER_NCCL_LIB", "ember_nccl",
        "libember_nccl.so not found (this build found no NCCL beside the CUDA Toolkit)")
      if l then lib = l else lib_err = info end
    end
    return lib
  end

  -- whether NCCL can be used here, and why not: the library, then a device
  function T.status()
    if not load_lib() then return false, lib_err end
    if C.ember_cuda_device_count() == 0 then
      return false, "no CUDA device: " .. ffi.string(C.ember_cuda_status())
    end
    return true
  end

  local errors = require("ember.errors")
  local function raise() errors.raise("ember." .. ffi.string(lib.enccl_last_error())) end

  local function need_lib(op)
    if not load_lib() then fail(op, "CUDA tensors need NCCL: " .. lib_err) end
  end

  -- the dtype check of a CUDA tensor (before anything is launched)
  function T.check(op, t)
    need_lib(op)
    if lib.enccl_check_dtype(C.ember_tensor_dtype(t._c), op) < 0 then raise() end
  end

  ---------------------------------------------------------------- the communicator
  local comm_err   -- why the communicator could not be made (said again on every later use)
  local ibuf = ffi.new("int[1]")
  local hbuf = ffi.new("int[1]")
  local ID_WORDS = ffi.C.ENCCL_ID_BYTES / 8
  local INT64_MIN = -0x7fffffffffffffffLL - 1

  -- Makes the communicator, or says why not. One max over the ranks, on
  -- the MPI communicator of the bucket layouts (whose collectives every
  -- rank starts in the same order), carries the highest failing rank + 1
  -- and rank 0's unique id (the others give INT64_MIN), so every rank
  -- learns whether all can go on before any enters ncclCommInitRank, which
  -- would wait for a rank that never comes.
  local function start()
    local W, R = state.size, state.rank
    local buf = ffi.new("int64_t[?]", 1 + ID_WORDS)
    local id = ffi.cast("uint8_t *", buf + 1)
    local err
    if lib.enccl_device(state.local_rank, ibuf) < 0 then
      err = ffi.string(lib.enccl_last_error())
    elseif R == 0 and lib.enccl_unique_id(id) < 0 then
      err = ffi.string(lib.enccl_last_error())
    end
    buf[0] = err and R + 1 or 0
    if R ~= 0 then for i = 1, ID_WORDS do buf[i] = INT64_MIN end end
    if state.mpi and W > 1 then
      local mpi = ctx.mpi_lib()
      if mpi.edist_imeta_max(buf, 1 + ID_WORDS, hbuf) < 0 or mpi.edist_wait(hbuf[0], "nccl") < 0 then
        return ffi.string(mpi.edist_last_error())
      end
    end
    if buf[0] ~= 0 then
      return err or ("rank " .. tonumber(buf[0] - 1) .. " could not start NCCL (its own error says why)")
    end
    if lib.enccl_init(id, R, W, ibuf[0]) < 0 then return ffi.string(lib.enccl_last_error()) end
  end

  -- Makes the communicator on first use; every rank calls this at the same
  -- point of its program (a collective, or a gradient opening a CUDA bucket).
  function T.start(op)
    need_lib(op)
    if lib.enccl_initialized() ~= 0 then return end
    if not comm_err then
      comm_err = start()
      if not comm_err then return end
      comm_err = comm_err:gsub("^distributed%.[%w_]+: ", "")
    end
    fail(op, "NCCL could not start: " .. comm_err)
  end
  local ensure = T.start

  ---------------------------------------------------------------- collectives
  local OPS = { sum = 0, max = 1, min = 2, mean = 3 }   -- ENCCL_SUM .. ENCCL_AVG
  local function ptr(t) return C.ember_tensor_device_data(t._c) end
  local function code(t) return C.ember_tensor_dtype(t._c) end

  T.active = function() return true end   -- NCCL runs even in a world of one
  T.mean_done = true                       -- ncclAvg: no division afterwards
  T.float_names = "float32, float64, float16 or bfloat16"

  function T.all_reduce(work, op, hb)
    ensure("all_reduce")
    return lib.enccl_all_reduce(ptr(work), work:numel(), code(work), OPS[op], hb)
  end
  function T.broadcast(work, root, hb)
    ensure("broadcast")
    return lib.enccl_broadcast(ptr(work), work:numel(), code(work), root, hb)
  end
  function T.all_gather(send, recv, hb)
    ensure("all_gather")
    return lib.enccl_all_gather(ptr(send), ptr(recv), send:numel(), code(send), hb)
  end
  T.raise = raise

  local dbuf = ffi.new("int[1]")
  function T.test(id)
    if lib.enccl_test(id, dbuf) < 0 then raise() end
    return dbuf[0] ~= 0
  end

  -- Waits for the collective's event in slices; between them, a peer that
  -- has exited (seen over MPI) aborts the communicator rather than hang.
  function T.wait(id, op)
    while true do
      if lib.enccl_wait(id, 0.05, dbuf) < 0 then raise() end
      if dbuf[0] ~= 0 then return end
      if state.mpi and state.size > 1 then
        local gone = ctx.mpi_lib().edist_peer_exited()
        if gone >= 0 then
          lib.enccl_abort()
          fail(op, ("rank %d exited while rank %d waited in %s; the NCCL communicator is aborted")
            :format(gone, state.rank, op))
        end
      end
    end
  end

  return T
end
