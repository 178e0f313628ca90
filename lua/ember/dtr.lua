-- ember.dtr: training past memory by dynamic tensor rematerialization
-- (MegEngine's DTR; docs/dtr.md). While it is on and a recording is open,
-- what ops make can be evicted when an allocation would pass the budget,
-- and is recomputed, bit for bit, when backward (or a later op) reads it.
local ffi = require("ffi")
local errors = require("ember.errors")

return function(ember)
  local C = ember._C
  local check, fail = errors.check, errors.fail
  local dtr = {}

  -- a whole number of bytes in [lo, 2^63), or nil
  local function bytes_opt(name, v, lo)
    if v == nil then return nil end
    if type(v) ~= "number" or not (v >= lo) or v ~= math.floor(v) or v >= 2 ^ 63 then
      fail("dtr.enable", ("%s must be a whole number of bytes >= %d, got %s"):format(name, lo, errors.show(v)))
    end
    return v
  end

  -- ember.dtr.enable({budget = bytes, min_size = bytes}): budget is needed;
  -- min_size (default 1 MiB, MegEngine's, or budget / 1024 when smaller) is
  -- the smallest storage evicted
  function dtr.enable(opts)
    if type(opts) ~= "table" then fail("dtr.enable", "expected an options table {budget = bytes}, got " .. errors.show(opts)) end
    local budget = bytes_opt("budget", opts.budget, 1)
    if budget == nil then fail("dtr.enable", "the option budget (bytes) is required") end
    local min_size = bytes_opt("min_size", opts.min_size, 0)
    check(C.ember_dtr_enable(budget, min_size or -1))
    -- what the GC collected is released before each op, and the GC runs
    -- when DTR asks: when what eviction cannot free (dead tensors without a
    -- recipe among it) grew by an eighth of the room the budget leaves above it, or nothing was left
    -- to evict
    ember._memory_watch("dtr", true)
    ember._dtr_on = true
  end

  -- remakes what is still evicted and held, then forgets every recipe
  function dtr.disable()
    check(C.ember_dtr_disable())
    ember._memory_watch("dtr", false)
    ember._dtr_on = false
  end

  function dtr.is_enabled()
    local s = ffi.new("ember_dtr_stats_t")
    check(C.ember_dtr_stats(s))
    return s.enabled ~= 0
  end

  -- {evictions, recomputes, recompute_s, peak_bytes, drops, tracked, evicted, budget, min_size}
  function dtr.stats()
    local s = ffi.new("ember_dtr_stats_t")
    check(C.ember_dtr_stats(s))
    return { evictions = tonumber(s.evictions), recomputes = tonumber(s.recomputes), recompute_s = s.recompute_s,
      peak_bytes = tonumber(s.peak_bytes), drops = tonumber(s.drops), tracked = tonumber(s.tracked),
      evicted = tonumber(s.evicted), budget = s.enabled ~= 0 and tonumber(s.budget) or nil,
      min_size = tonumber(s.min_size) }
  end

  return dtr
end
