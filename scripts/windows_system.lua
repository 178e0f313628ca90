-- The three functions busted 2.1 takes from luasystem (require "system":
-- gettime, monotime, sleep), on Windows' kernel32, for the Windows LuaJIT of
-- scripts/cross_test.sh windows: Debian's mirror has no source of
-- lua-system to cross-build (scripts/windows_lua.sh). Windows only.
local ffi = require("ffi")
assert(ffi.os == "Windows", "scripts/windows_system.lua: Windows only")
ffi.cdef [[
int QueryPerformanceCounter(int64_t *count);
int QueryPerformanceFrequency(int64_t *freq);
void GetSystemTimeAsFileTime(uint64_t *filetime);
void Sleep(uint32_t ms);
]]
local C = ffi.C
local count, freq, ft = ffi.new("int64_t[1]"), ffi.new("int64_t[1]"), ffi.new("uint64_t[1]")
C.QueryPerformanceFrequency(freq)
local hz = tonumber(freq[0])
return {
  -- seconds since 1970 (FILETIME counts 100 ns since 1601)
  gettime = function()
    C.GetSystemTimeAsFileTime(ft)
    return tonumber(ft[0]) / 1e7 - 11644473600
  end,
  monotime = function()
    C.QueryPerformanceCounter(count)
    return tonumber(count[0]) / hz
  end,
  sleep = function(s) C.Sleep(math.floor(s * 1000 + 0.5)) end,
}
