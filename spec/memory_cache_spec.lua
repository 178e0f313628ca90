-- The host allocator's cache of freed blocks (core/src/alloc.c): reuse counted
-- in ember.memory_stats(), a cap it never passes (the oldest blocks go
-- first), and blocks forgotten once they have waited through 65536 later
-- frees, so what a process ran before does not change where a new size's
-- memory comes from. Tensors are freed at once with t:free().
local H = require("helpers")
local ember = H.ember

local function stats() return ember.memory_stats() end

-- sanitizer builds keep no cache (cache_limit 0)
local describe_cached = ember.memory_stats().cache_limit > 0 and describe or pending

describe_cached("the allocator's cache", function()
  before_each(function()
    collectgarbage()
    ember.empty_cache()
  end)

  it("serves a freed block again and counts it as a hit", function()
    local t = ember.empty({ 3000 })   -- 12000 bytes: the 12288-byte class
    t:free()
    local s0 = stats()
    assert.are.equal(12288, s0.bytes_cached)
    local u = ember.empty({ 2900 })   -- 11600 bytes: the same class
    local s1 = stats()
    assert.are.equal(s0.cache_hits + 1, s1.cache_hits)
    assert.are.equal(s0.cache_misses, s1.cache_misses)
    assert.are.equal(0, s1.bytes_cached)
    local v = ember.empty({ 5000 })   -- 20000 bytes: a class with nothing cached
    assert.are.equal(s1.cache_misses + 1, stats().cache_misses)
    u:free()
    v:free()
  end)

  it("stays under its cap after large tensors, the oldest blocks going first, and still serves new sizes", function()
    local s0 = stats()
    assert.are.equal(256 * 2 ^ 20, s0.cache_limit)
    -- freed in the order 64, 48, 64, 64, 48 MiB (288 MiB): the first 64 MiB block goes
    local MiB = 2 ^ 18   -- float32 elements
    local sizes = { 64, 48, 64, 64, 48 }
    local big = {}
    for i, m in ipairs(sizes) do big[i] = ember.empty({ m * MiB }) end
    for i = 1, #sizes do big[i]:free() end
    local s1 = stats()
    assert.are.equal((48 + 64 + 64 + 48) * 2 ^ 20, s1.bytes_cached)
    assert.are.equal(s0.cache_evictions + 1, s1.cache_evictions)
    local hits, misses = s1.cache_hits, s1.cache_misses
    local a, b = ember.empty({ 64 * MiB }), ember.empty({ 64 * MiB })   -- the two left
    assert.are.equal(hits + 2, stats().cache_hits)
    local c = ember.empty({ 64 * MiB })   -- the evicted one: from the C library
    assert.are.equal(misses + 1, stats().cache_misses)
    a:free()
    b:free()
    c:free()
    assert.is_true(stats().bytes_cached <= s1.cache_limit)
    -- a size never seen before is cached when freed, and served from the cache after
    local x = ember.empty({ 777777 })
    x:free()
    hits = stats().cache_hits
    local y = ember.empty({ 777777 })
    assert.are.equal(hits + 1, stats().cache_hits)
    y:free()
  end)

  it("forgets a block no allocation reused for 65536 frees", function()
    local old = ember.empty({ 100000 })   -- 400000 bytes: the 524288-byte class
    old:free()
    local cached = stats().bytes_cached
    local e0 = stats().cache_evictions
    local small = ember.empty({ 4 })
    for _ = 1, 70000 do   -- each free of the small block ticks the cache's clock
      small:free()
      small = ember.empty({ 4 })
    end
    small:free()
    local s = stats()
    assert.is_true(s.cache_evictions > e0)
    assert.is_true(s.bytes_cached < cached)
    local misses = s.cache_misses
    local again = ember.empty({ 100000 })
    assert.are.equal(misses + 1, stats().cache_misses)
    again:free()
  end)
end)
