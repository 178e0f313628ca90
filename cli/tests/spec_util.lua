-- spec_util.lua: what spec/cli_spec.lua, spec/embed_spec.lua and
-- spec/install_spec.lua share: where the built programs are (build/ at the
-- repository root, or $EMBER_BUILD_DIR), running a command and collecting its
-- exit status, stdout and stderr, temporary folders, and a pseudo-terminal
-- session (util-linux `script`) that a spec types into and reads from.
-- Loaded with dofile (it is not on package.path).
local ffi = require("ffi")

local U = {}

pcall(ffi.cdef, "int poll(void *fds, unsigned long nfds, int timeout);")
function U.sleep(seconds)
  if not pcall(function() return ffi.C.poll(nil, 0, math.floor(seconds * 1000)) end) then
    os.execute("sleep " .. seconds)
  end
end

function U.quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function capture(cmd)
  local p = io.popen(cmd)
  local s = p:read("*a")
  p:close()
  return s
end

-- the repository root: two levels above this file
do
  local src = debug.getinfo(1, "S").source:sub(2)
  local dir = src:match("^(.*)/[^/]*$") or "."
  U.root = capture("cd " .. U.quote(dir .. "/../..") .. " && pwd"):gsub("%s+$", "")
end

function U.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

function U.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

function U.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- $EMBER_BUILD_DIR (relative to the root unless absolute), else build/
function U.build_dir()
  local d = os.getenv("EMBER_BUILD_DIR")
  if not d or d == "" then d = "build" end
  if d:sub(1, 1) ~= "/" then d = U.root .. "/" .. d end
  return d
end

-- the path of a built program, or nil and a message for pending()
function U.built(rel)
  local path = U.build_dir() .. "/" .. rel
  if U.exists(path) then return path end
  return nil, path .. " is not built (cmake --build " .. U.build_dir()
    .. ", or set EMBER_BUILD_DIR to the build folder)"
end

function U.tmpdir()
  return (capture("mktemp -d /tmp/ember_spec.XXXXXX"):gsub("%s+$", ""))
end

function U.rm_rf(dir)
  if dir and dir:match("^/tmp/ember_spec%.") then os.execute("rm -rf " .. U.quote(dir)) end
end

-- Runs argv (a list, quoted here) or a shell command string. opts: env (a
-- table name -> value; false unsets), stdin (a string), cwd.
-- Returns { rc = exit status, out = stdout, err = stderr }.
-- The programs run with EMBER_LIB unset: they load the libember they link.
function U.run(cmd, opts)
  opts = opts or {}
  if type(cmd) == "table" then
    local q = {}
    for i, a in ipairs(cmd) do q[i] = U.quote(a) end
    cmd = table.concat(q, " ")
  end
  local dir = U.tmpdir()
  local envs = { "unset EMBER_LIB" }
  for k, v in pairs(opts.env or {}) do
    envs[#envs + 1] = v == false and "unset " .. k or "export " .. k .. "=" .. U.quote(v)
  end
  local stdin = "/dev/null"
  if opts.stdin then
    stdin = dir .. "/in"
    U.write(stdin, opts.stdin)
  end
  local script = (opts.cwd and "cd " .. U.quote(opts.cwd) .. " || exit 99\n" or "")
    .. table.concat(envs, "\n") .. "\n" .. cmd .. " < " .. U.quote(stdin)
    .. " > " .. U.quote(dir .. "/out") .. " 2> " .. U.quote(dir .. "/err") .. "\n"
    .. "echo $? > " .. U.quote(dir .. "/rc") .. "\n"
  U.write(dir .. "/run.sh", script)
  os.execute("sh " .. U.quote(dir .. "/run.sh"))
  local r = { rc = tonumber(U.read(dir .. "/rc")), out = U.read(dir .. "/out") or "",
    err = U.read(dir .. "/err") or "" }
  U.rm_rf(dir)
  return r
end

---------------------------------------------------------------- a pty session
-- `script -qfec CMD /dev/null` runs CMD on a new pseudo-terminal; what we
-- write to script's stdin is typed there, what CMD prints lands in a file.
local Session = {}
Session.__index = Session

function U.have_script()
  local r = os.execute("command -v script > /dev/null 2>&1")
  return r == 0 or r == true
end

function U.pty(argv, env)
  local self = setmetatable({ dir = U.tmpdir(), pos = 1 }, Session)
  local q = {}
  for i, a in ipairs(argv) do q[i] = U.quote(a) end
  local envs = { "env", "-u", "EMBER_LIB", "TERM=xterm" }
  for k, v in pairs(env or {}) do envs[#envs + 1] = k .. "=" .. U.quote(v) end
  self.out = self.dir .. "/out"
  U.write(self.out, "")
  -- script runs its command with $SHELL -c; `exec` keeps that shell out of
  -- the terminal's process group, or a Ctrl-C sent to the program would
  -- also kill a shell that does not exec by itself (dash, CI's /bin/sh).
  local sh = table.concat(envs, " ") .. " timeout 120 script -qfec "
    .. U.quote("exec " .. table.concat(q, " ")) .. " /dev/null > " .. U.quote(self.out) .. " 2>&1; echo $? > "
    .. U.quote(self.dir .. "/rc")
  self.proc = io.popen("sh -c " .. U.quote(sh), "w")
  return self
end

function Session:send(text)
  self.proc:write(text)
  self.proc:flush()
end

-- Waits until `text` (plain) appears after what earlier expects consumed;
-- returns true, or false and everything printed so far.
function Session:expect(text, timeout)
  local deadline = os.time() + (timeout or 20)
  repeat
    local all = U.read(self.out) or ""
    local s, e = all:find(text, self.pos, true)
    if s then
      self.pos = e + 1
      return true
    end
    U.sleep(0.05)
  until os.time() > deadline
  return false, "expected " .. string.format("%q", text) .. " in:\n" .. (U.read(self.out) or "")
end

function Session:output() return U.read(self.out) or "" end

-- Closes the terminal's input and returns the program's exit status.
function Session:close()
  self.proc:close()
  local rc = tonumber(U.read(self.dir .. "/rc"))
  U.rm_rf(self.dir)
  return rc
end

return U
