-- The examples' command line: `--name value` pairs over the defaults, where
-- a number default takes a number and a false default is a flag taking no
-- value (`--resume`). An unknown name, a missing value or a number that is
-- not one stops the example with a message naming it and the options.
--   local opts = require("options").parse("char_lm.lua", { steps = 1500, resume = false }, arg)
local M = {}

-- Makes the folder path, and its parents, if missing (an example's --out):
-- `mkdir -p` on POSIX, cmd's mkdir (which makes the parents) on Windows
function M.mkdir(path)
  if require("ffi").os == "Windows" then
    os.execute('mkdir "' .. path:gsub("/", "\\") .. '" 2>nul')
  else
    os.execute("mkdir -p '" .. path:gsub("'", "'\\''") .. "'")
  end
end

function M.parse(script, defaults, args)
  local opts, names = {}, {}
  for k, v in pairs(defaults) do
    opts[k] = v
    names[#names + 1] = "--" .. k .. (v == false and "" or " " .. (type(v) == "number" and "N" or "S"))
  end
  table.sort(names)
  local function stop(what)
    io.stderr:write(("%s: %s (options: %s)\n"):format(script, what, table.concat(names, ", ")))
    os.exit(2)
  end
  local i = 1
  while args and args[i] ~= nil do
    local a = args[i]
    local k = a:match("^%-%-([%w_]+)$")
    if not k or defaults[k] == nil then stop("unknown option " .. a) end
    if defaults[k] == false then
      opts[k] = true
      i = i + 1
    else
      local v = args[i + 1]
      if v == nil then stop(a .. " needs a value") end
      if type(defaults[k]) == "number" then
        v = tonumber(v)
        if v == nil then stop(("%s takes a number, got %s"):format(a, args[i + 1])) end
      end
      opts[k] = v
      i = i + 2
    end
  end
  return opts
end

return M
