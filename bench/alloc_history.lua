-- Whether what a process ran before changes an op's speed (issue 33, the
-- allocator's cache: docs/performance.md, "The allocator's cache"): CPU ms
-- of F.layer_norm over {32,128,768} float32 (the fastest of 15 rounds of 5
-- calls) in a fresh process, then again after 60 large ops of sizes that
-- differ each time (12-40 MB, results dropped), with the cache's counters.
-- Prints JSON. luajit bench/alloc_history.lua (EMBER_NUM_THREADS=1 for
-- steadier figures on a busy machine)
package.path = "./bench/?.lua;" .. package.path
require("common")
local ember = require("ember")
local F = ember.nn.functional

local x = ember.randn({ 32, 128, 768 })
local function layer_norm_ms()
  local best = math.huge
  for _ = 1, 15 do
    local t0 = os.clock()
    for _ = 1, 5 do local _ = F.layer_norm(x, { 768 }) end
    best = math.min(best, (os.clock() - t0) / 5 * 1e3)
  end
  return best
end

local fresh = layer_norm_ms()
for i = 1, 60 do
  local a = ember.randn({ (3 + i % 7) * 2 ^ 20 + i * 4096 })
  local _ = (a * 2):exp() + a
end
local after = layer_norm_ms()
local s = ember.memory_stats()
local f = io.open("/proc/loadavg")
local load = f and f:read("*l"):match("^(%S+)") or "?"
if f then f:close() end
print(require("ember.json").encode({ bench = "alloc_history", threads = ember.get_num_threads(), load = load,
  layer_norm_ms_fresh = fresh, layer_norm_ms_after_large_ops = after, bytes_cached = s.bytes_cached,
  cache_limit = s.cache_limit, cache_hits = s.cache_hits, cache_misses = s.cache_misses,
  cache_evictions = s.cache_evictions }))
