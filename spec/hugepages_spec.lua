-- Large host blocks on huge pages (core/src/alloc.c; docs/performance.md,
-- "Huge pages"): memory_stats().huge_bytes counts them where they serve
-- (Linux with transparent huge pages "always" or "madvise", not in sanitizer
-- builds); EMBER_HUGEPAGES=0 keeps every block on 4 KiB pages, other values
-- but 0 and 1 raise when ember loads. core/tests/test_hugepages.c checks the
-- blocks themselves (alignment, reuse, the cache).
local ember = require("ember")
local H = require("helpers")

local MIB = 2 ^ 20
local WINDOWS = require("ffi").os == "Windows"

local function thp_on()
  local f = io.open("/sys/kernel/mm/transparent_hugepage/enabled")
  if not f then return false end
  local s = f:read("*a")
  f:close()
  return s:find("[always]", 1, true) ~= nil or s:find("[madvise]", 1, true) ~= nil
end

-- huge pages expected in this process (the cache limit is 0 in sanitizer builds)
local function expected()
  return require("ffi").os == "Linux" and thp_on() and ember.memory_stats().cache_limit > 0
    and os.getenv("EMBER_HUGEPAGES") ~= "0"
end

-- runs a Lua chunk in a fresh luajit with env set; returns its output
local function run_lua(env, code)
  return H.output(("%s luajit -e %q 2>&1"):format(env,
    "package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path; " .. code))
end

-- a chunk that makes a 24 MiB tensor (0 .. 3 Mi - 1 in float64) and prints
-- huge_bytes, its sum and the sum after a second tensor reused its block
local CHUNK = table.concat({
  "local ember = require('ember')", "ember.empty_cache()", "local n = 3 * 2 ^ 20",
  "local t = ember.arange(0, n, { dtype = 'float64' })", "local s1 = t:sum():item()",
  "local h = ember.memory_stats().huge_bytes", "t = nil", "collectgarbage()", "collectgarbage()",
  "local u = ember.arange(0, n, { dtype = 'float64' })", "io.write(h, ' ', s1, ' ', u:sum():item(), '\\n')",
}, "; ")   -- one line: the shell drops %q's escaped newlines

describe("huge pages", function()
  it("hold large tensors, counted in memory_stats().huge_bytes, values unchanged", function()
    ember.empty_cache()
    local before = ember.memory_stats().huge_bytes
    assert.are.equal("number", type(before))
    local n = 3 * MIB   -- 24 MiB of float64
    local t = ember.arange(0, n, { dtype = "float64" })
    local h = ember.memory_stats().huge_bytes
    if expected() then
      assert.is_true(h >= before + 24 * MIB, ("huge_bytes %d after a 24 MiB tensor (before: %d)"):format(h, before))
    else
      assert.are.equal(0, h)
    end
    assert.are.equal(n * (n - 1) / 2, t:sum():item())   -- whole numbers below 2^53: exact in any order
    -- a small tensor adds nothing
    local small = ember.zeros({ 1000 })
    assert.are.equal(h, ember.memory_stats().huge_bytes)
    t, small = nil, nil
    collectgarbage()
    collectgarbage()
    ember.memory_stats()   -- gives what the GC collected back to the cache (empty_cache does not)
    ember.empty_cache()
    assert.is_true(ember.memory_stats().huge_bytes <= before)
  end)

  it("EMBER_HUGEPAGES=0 keeps large blocks on 4 KiB pages; 1 is the default", function()
    if WINDOWS then return end   -- env prefixes are the POSIX shell's
    local sum = 3 * MIB * (3 * MIB - 1) / 2
    local off = run_lua("EMBER_HUGEPAGES=0", CHUNK)
    assert.are.equal(("0 %d %d\n"):format(sum, sum), off)
    local on = run_lua("EMBER_HUGEPAGES=1", CHUNK)
    local h = assert(tonumber(on:match("^(%d+) ")), on)
    assert.are.equal((" %d %d\n"):format(sum, sum), on:sub(#tostring(h) + 1))
    if thp_on() and ember.memory_stats().cache_limit > 0 then
      assert.is_true(h >= 24 * MIB, on)
    else
      assert.are.equal(0, h)
    end
  end)

  it("refuses an EMBER_HUGEPAGES other than 0 or 1 when ember loads", function()
    if WINDOWS then return end
    local out = run_lua("EMBER_HUGEPAGES=yes", "require('ember')")
    assert.matches('EMBER_HUGEPAGES must be 0 or 1, got "yes"', out, 1, true)
  end)
end)
