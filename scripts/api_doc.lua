-- Writes docs/api.md from the API reference in lua/ember/doc/ (the one
-- source of every public name's documentation; ember.help prints the same
-- entries). Run from the repository root after editing those files:
--   luajit scripts/api_doc.lua
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local text = require("ember.doc").markdown()
local f = assert(io.open("docs/api.md", "w"))
f:write(text)
f:close()
print(("docs/api.md: %d lines"):format(select(2, text:gsub("\n", ""))))
