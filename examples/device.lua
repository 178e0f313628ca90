-- The training examples' --device: "cpu" (the default), "cuda" or "cuda:k".
-- A device that cannot be used stops the example before it loads or trains
-- anything, with the backend's reason (no driver, no GPU, no libember_cuda):
--   local device = require("device").check(ember, opts.device)
local M = {}

local function stop(name, why)
  io.stderr:write(("--device %s cannot be used: %s\n"):format(name, why))
  os.exit(2, true)   -- closing the Lua state releases the tensors it holds
end

function M.check(ember, name)
  if name == "cpu" then return name end
  if not (name:match("^cuda$") or name:match("^cuda:%d+$")) then stop(name, "expected cpu, cuda or cuda:k") end
  local ok, err = pcall(function() return ember.zeros({ 1 }):to(name) end)
  if not ok then stop(name, (tostring(err):gsub("^[^\n]-:%d+: ", ""))) end
  return name
end

return M
