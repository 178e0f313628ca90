-- ember.cuda: whether the run-time CUDA backend (libember_cuda.so) loaded and
-- how many devices it sees, its caching allocator's counters, and waiting for
-- the device (docs/cuda.md). Tensors move with t:cuda() / t:to("cuda:1").
local ffi = require("ffi")
local ember = require("ember")
local C = ember._C

local cuda = {}

function cuda.device_count() return C.ember_cuda_device_count() end
function cuda.is_available() return C.ember_cuda_device_count() > 0 end
-- why CUDA is not available ("available" when it is)
function cuda.status() return ffi.string(C.ember_cuda_status()) end

local errors = require("ember.errors")
local check = errors.check

-- {bytes_in_use, peak_bytes, bytes_cached, device_allocs, cache_hits}
function cuda.memory_stats()
  local s = ffi.new("ember_cuda_memory_stats_t")
  check(C.ember_cuda_memory_stats(s))
  return { bytes_in_use = tonumber(s.bytes_in_use), peak_bytes = tonumber(s.peak_bytes),
    bytes_cached = tonumber(s.bytes_cached), device_allocs = tonumber(s.device_allocs),
    cache_hits = tonumber(s.cache_hits) }
end
-- gives the allocator's cached blocks back to CUDA
function cuda.empty_cache() check(C.ember_cuda_empty_cache()) end
-- waits until every queued kernel and copy has finished
function cuda.synchronize() check(C.ember_cuda_synchronize()) end
-- whether float32 convolutions may use TF32 tensor cores (off by default);
-- with an argument sets it and returns the previous setting
function cuda.allow_tf32(on)
  if on == nil then return C.ember_cuda_allow_tf32() ~= 0 end
  if type(on) ~= "boolean" then
    errors.fail("cuda.allow_tf32", "expected a boolean, got " .. type(on))
  end
  return C.ember_cuda_set_allow_tf32(on and 1 or 0) ~= 0
end

return cuda
