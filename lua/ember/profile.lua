-- ember.profile(fn, ...): where fn's time goes. The core's op profiler
-- (ember_profile_*) times every op fn runs, backward's included, each op
-- without the ops it runs inside; ember.profile_section(name, fn, ...) marks
-- work timed as a whole under its own name (a data loader, an optimizer
-- step; a section inside another counts in both); the rest of the wall time (Lua, autograd's bookkeeping) is "other".
local ffi = require("ffi")
local errors = require("ember.errors")

-- the ops of each category; every other op (elementwise, reductions,
-- copies, indexing, normalisation) counts as "elementwise"
local CATEGORY = {
  matmul = "gemm", linear = "gemm", linear_relu = "gemm",
  conv2d = "conv", conv2d_relu = "conv", conv2d_backward_input = "conv", conv2d_backward_weight = "conv",
  conv2d_relu_backward = "conv", conv2d_relu_max_pool2d = "conv", conv2d_relu_max_pool2d_backward = "conv",
  max_pool2d = "pool", max_pool2d_backward = "pool", avg_pool2d = "pool", avg_pool2d_backward = "pool",
}

return function(ember)
  local C = ember._C
  local optable = require("ember.optable")   -- ops.def's order, the profiler's
  local active, paused = nil, 0   -- the running profile's report; sections open in it

  local function pack(...) return { n = select("#", ...), ... } end

  -- the report's per-op accounts and category sums from the core's counters
  local function fill(r, wall)
    local n = C.ember_profile_read(0, nil, nil)
    local seconds, calls = ffi.new("double[?]", n), ffi.new("int64_t[?]", n)
    C.ember_profile_read(n, seconds, calls)
    r.seconds, r.ops = wall, {}
    r.gemm, r.conv, r.pool, r.elementwise = 0, 0, 0, 0
    local timed = 0
    for i = 0, n - 1 do
      if calls[i] > 0 then
        local name = optable[i + 1].name
        r.ops[name] = { seconds = seconds[i], calls = tonumber(calls[i]) }
        local cat = CATEGORY[name] or "elementwise"
        r[cat] = r[cat] + seconds[i]
        timed = timed + seconds[i]
      end
    end
    for _, s in pairs(r.sections) do timed = timed + s end
    r.other = wall - timed
    return r
  end

  function ember.profile(fn, ...)
    if type(fn) ~= "function" then errors.raise("ember.profile: expected a function, got " .. type(fn)) end
    if active then errors.raise("ember.profile: a profile is already running (profiles do not nest)") end
    active, paused = { sections = {} }, 0
    C.ember_profile_reset()
    C.ember_profile_enable(1)
    local t0 = C.ember_clock()
    local res = pack(pcall(fn, ...))
    local wall = C.ember_clock() - t0
    C.ember_profile_enable(0)
    local report = active
    active = nil
    if not res[1] then error(res[2], 0) end
    return fill(report, wall), unpack(res, 2, res.n)
  end

  function ember.profile_section(name, fn, ...)
    if type(name) ~= "string" or type(fn) ~= "function" then
      errors.raise("ember.profile_section: expected a name and a function, got " .. type(name) .. " and " .. type(fn))
    end
    local report = active
    if not report then return fn(...) end
    paused = paused + 1
    C.ember_profile_enable(0)
    local t0 = C.ember_clock()
    local res = pack(pcall(fn, ...))
    report.sections[name] = (report.sections[name] or 0) + C.ember_clock() - t0
    paused = paused - 1
    if paused == 0 then C.ember_profile_enable(1) end
    if not res[1] then error(res[2], 0) end
    return unpack(res, 2, res.n)
  end
end
