-- The FFI declarations must be exactly the ffi:begin/ffi:end regions of
-- ember.h's parts (core/include/ember/*.h), joined in ember.h's include order.
local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local function region(path)
  local r = read(path):match("/%* ffi:begin %*/(.-)/%* ffi:end %*/")
  assert(r, path .. ": no ffi region")
  return (r:gsub("EMBER_API ", ""))
end

local header = read("core/include/ember.h")
local parts = {}
for part in header:gmatch('#include "ember/([%w_]+)%.h"') do parts[#parts + 1] = part end

describe("ember cdef", function()
  it("is each part's region, in ember.h's order", function()
    assert.is_true(#parts > 0)
    local joined = {}
    for i, part in ipairs(parts) do
      local r = region("core/include/ember/" .. part .. ".h")
      local mod = require("ember.cdef." .. part)
      assert.are.equal(r, mod:sub(1, #r), part)
      joined[i] = mod
    end
    assert.are.equal(table.concat(joined), require("ember.cdef"))
  end)

  it("leaves no part of core/include/ember out of ember.h, and ember.h declares nothing itself", function()
    local listed = {}
    for _, part in ipairs(parts) do listed[part] = true end
    local p = io.popen("ls core/include/ember")
    for name in p:lines() do
      local part = name:match("^([%w_]+)%.h$")
      assert.is_true(part ~= nil and listed[part], "core/include/ember/" .. name .. " is not included by ember.h")
    end
    p:close()
    assert.is_nil(header:find("ffi:begin", 1, true))
    assert.is_nil(header:find("EMBER_API [%w_]+ %*?[%w_]+%("))
  end)

  it("has no preprocessor lines inside the regions", function()
    local cdef = require("ember.cdef")
    assert.is_nil(cdef:find("\n%s*#"))
  end)
end)
