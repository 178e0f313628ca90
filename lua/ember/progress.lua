-- ember.progress(n, {desc = ...}): a progress bar for training loops. On a
-- terminal it redraws one line in place (\r), at most every `interval`
-- seconds, its bar filling what the terminal's width leaves; elsewhere (a log
-- file, a pipe) it prints a plain line at every tenth of the way and when
-- closed. Not a logger: it keeps no history.
--
--   local bar = ember.progress(#loader, { desc = "epoch 1" })
--   for x, y in loader:iter() do ...; bar:update(1, { loss = loss:item() }) end
--   bar:close()
--
-- Options: desc, file (default io.stdout; anything with :write and :flush),
-- tty (force terminal / plain mode; default isatty of io.stdout's or
-- io.stderr's fd), columns (the terminal's width; default $COLUMNS, else the
-- fd's TIOCGWINSZ, else 80), width (bar cells, default what the line leaves
-- of the width), interval (tty redraw seconds, default 0.1),
-- lines (plain lines per run, default 10), log_interval (plain mode: a line
-- at least this often, default 30 s), unit (default "it"), clock (a
-- function returning seconds, for tests).
local ffi = require("ffi")

-- isatty is _isatty in Windows' C runtime (any nonzero value for a
-- terminal); no ioctl there (TIOCGWINSZ is nil)
pcall(ffi.cdef, [[
typedef struct { unsigned short row, col, xpixel, ypixel; } ember_progress_winsize;
int ember_progress_ioctl(int fd, unsigned long request, ...) __asm__("ioctl");
]])
pcall(ffi.cdef, ffi.os == "Windows" and 'int ember_progress_isatty(int fd) __asm__("_isatty");'
  or 'int ember_progress_isatty(int fd) __asm__("isatty");')

local C = ffi.C
local format, floor, concat = string.format, math.floor, table.concat
local TIOCGWINSZ = ({ Linux = 0x5413, OSX = 0x40087468, BSD = 0x40087468 })[ffi.os]

local P = {}
local Bar = {}
Bar.__index = Bar
P.Bar = Bar

-- monotonic wall-clock seconds: libember's clock (core/src/platform.h), on
-- every system
local clock
function P.now()
  clock = clock or require("ember")._C.ember_clock
  return clock()
end

function P.isatty(fd) return C.ember_progress_isatty(fd or 1) ~= 0 end

local winsize = ffi.new("ember_progress_winsize")
-- The width of the terminal on fd (or nil): $COLUMNS when it is a positive
-- number (a user's override, as Python's shutil does), else the tty's size.
function P.columns(fd)
  local env = tonumber(os.getenv("COLUMNS"))
  if env and env > 0 then return floor(env) end
  if fd and TIOCGWINSZ and C.ember_progress_ioctl(fd, TIOCGWINSZ, winsize) == 0 and winsize.col > 0 then
    return winsize.col
  end
end

-- display cells of a UTF-8 string (one per code point), and its first n cells
local function cells(s) return #s - select(2, s:gsub("[\128-\191]", "")) end
local function first_cells(s, n)
  local out, k = {}, 0
  for ch in s:gmatch("[%z\1-\127\192-\255][\128-\191]*") do
    if k == n then break end
    k = k + 1
    out[k] = ch
  end
  return concat(out)
end

-- "4:05", "1:02:03"
function P.format_time(s)
  if type(s) ~= "number" then
    local errors = require("ember.errors")
    errors.fail("progress.format_time", "expected a number of seconds, got " .. errors.show(s))
  end
  if s ~= s or s == math.huge or s < 0 then return "?" end
  s = floor(s + 0.5)
  local h, m, sec = floor(s / 3600), floor(s / 60) % 60, s % 60
  if h > 0 then return format("%d:%02d:%02d", h, m, sec) end
  return format("%02d:%02d", m, sec)
end

local function fmt_value(v)
  if type(v) == "number" then
    if v == floor(v) and math.abs(v) < 1e15 then return format("%d", v) end
    return format("%.4g", v)
  end
  if type(v) == "table" and v.item then return fmt_value(v:item()) end   -- a one-element tensor
  return tostring(v)
end

local function postfix_str(pf)
  if not pf then return "" end
  local keys = {}
  for k in pairs(pf) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  local parts = {}
  for i, k in ipairs(keys) do
    local v = pf[k]
    if v == nil then v = pf[tonumber(k)] end
    parts[i] = k .. "=" .. fmt_value(v)
  end
  return concat(parts, ", ")
end

function P.new(n, opts)
  if type(n) == "table" and opts == nil then n, opts = n.total, n end
  opts = opts or {}
  require("ember.errors").known_options("progress", opts, { "total", "file", "tty", "desc", "columns", "width",
    "interval", "lines", "unit", "clock", "log_interval" })
  if n ~= nil and (type(n) ~= "number" or n < 0) then
    require("ember.errors").fail("progress", "total must be a non-negative number or nil, got " .. tostring(n))
  end
  local file = opts.file or io.stdout
  local fd = (file == io.stdout and 1) or (file == io.stderr and 2) or nil
  local tty = opts.tty
  if tty == nil then tty = fd ~= nil and P.isatty(fd) end
  local self = setmetatable({
    total = n, count = 0, desc = opts.desc, file = file, fd = fd, tty = tty and true or false,
    columns = opts.columns, width = opts.width, interval = opts.interval or 0.1, lines = opts.lines or 10,
    unit = opts.unit or "it", clock = opts.clock or P.now, postfix = nil, closed = false,
    next_line = 1, last_draw = -math.huge, last_len = 0, log_interval = opts.log_interval or 30,
  }, Bar)
  self.start = self.clock()
  self.last_print = self.start
  if self.tty then self:_draw() end
  return self
end

-- the cells a line may take on the terminal: its width less one
function Bar:_room() return (self.columns or P.columns(self.fd) or 80) - 1 end

local MIN_BAR = 6   -- cells; a terminal with less room for the bar drops status fields

-- "450/1000 [00:03<00:04, 123.4 it/s, loss=0.12]": the non-empty fields given
local function status(count, ...)
  local fields = {}
  for i = 1, select("#", ...) do
    local f = select(i, ...)
    if f ~= "" then fields[#fields + 1] = f end
  end
  return count .. " [" .. concat(fields, ", ") .. "]"
end

-- The status text: "desc: 45%|#########           | 450/1000 [00:03<00:04, 123.4 it/s, loss=0.12]".
-- On a terminal the bar takes what the width leaves (`width` cells if given),
-- dropping the rate, then the times, to keep at least MIN_BAR cells; the line
-- is cut to the width less one column: a line that reaches the last column
-- wraps on some terminals, and a wrapped line cannot be redrawn.
function Bar:line()
  local elapsed = self.clock() - self.start
  local rate = elapsed > 0 and self.count / elapsed or nil
  local rate_s
  if not rate or self.count == 0 then rate_s = "? " .. self.unit .. "/s"
  elseif rate >= 1 then rate_s = format("%.2f %s/s", rate, self.unit)
  else rate_s = format("%.2f s/%s", 1 / rate, self.unit) end
  local desc = self.desc and (self.desc .. ": ") or ""
  local pf = postfix_str(self.postfix)
  local n = self.total
  if not (n and n > 0) then
    local line = desc .. status(format("%d", self.count), P.format_time(elapsed), rate_s, pf)
    return self.tty and first_cells(line, self:_room()) or line
  end
  local frac = math.min(self.count / n, 1)
  local eta = (rate and rate > 0) and (n - self.count) / rate or (self.count >= n and 0 or nil)
  local left = format("%s%3d%%", desc, floor(frac * 100 + 1e-9))
  local count = format("%d/%d", self.count, n)
  local times = P.format_time(elapsed) .. "<" .. (eta and P.format_time(eta) or "?")
  if not self.tty then return left .. " " .. status(count, times, rate_s, pf) end
  local room = self:_room()
  local right, width
  for _, r in ipairs({ status(count, times, rate_s, pf), status(count, times, pf),
    status(count, pf ~= "" and pf or times) }) do
    right, width = r, self.width or room - cells(left) - cells(r) - 3
    if self.width or width >= MIN_BAR then break end
  end
  width = self.width or math.max(width, MIN_BAR)
  local full = floor(frac * width + 1e-9)
  return first_cells(left .. "|" .. ("#"):rep(full) .. (" "):rep(width - full) .. "| " .. right, room)
end

function Bar:_draw()
  local s = self:line()
  local len = cells(s)
  local pad = string.rep(" ", math.min(self.last_len, self:_room()) - len)
  self.file:write("\r", s, pad)
  if self.file.flush then self.file:flush() end
  self.last_len = len
  self.last_draw = self.clock()
end

function Bar:_print()
  self.printed_count = self.count
  self.file:write(self:line(), "\n")
  if self.file.flush then self.file:flush() end
end

-- bar:update(k = 1, postfix?): advance by k and remember postfix values.
function Bar:update(k, postfix)
  if type(k) == "table" then k, postfix = 1, k end
  if self.closed then return self end
  self.count = self.count + (k or 1)
  if postfix then self.postfix = postfix end
  if self.tty then
    local done = self.total and self.count >= self.total
    if done or self.clock() - self.last_draw >= self.interval then self:_draw() end
  else
    -- one plain line per crossed tenth (or per 1/lines of the way), and one
    -- at least every log_interval seconds (the only ones without a total)
    local printed = false
    if self.total and self.total > 0 then
      local step = self.total / self.lines
      while self.next_line <= self.lines and self.count >= self.next_line * step - 1e-9 do
        self.next_line = self.next_line + 1
        printed = true
      end
    end
    local now = self.clock()
    if printed or now - self.last_print >= self.log_interval then
      self.last_print = now
      self:_print()
    end
  end
  return self
end

function Bar:set_postfix(postfix)
  self.postfix = postfix
  return self
end

function Bar:set_description(desc)
  if desc ~= nil and type(desc) ~= "string" then
    local errors = require("ember.errors")
    errors.fail("Bar:set_description", "desc must be a string or nil, got " .. errors.show(desc))
  end
  self.desc = desc
  return self
end

-- Finishes the line (tty) or prints the final plain line if the last one
-- printed was not already the end. Safe to call twice.
function Bar:close()
  if self.closed then return self end
  self.closed = true
  if self.tty then
    self:_draw()
    self.file:write("\n")
    if self.file.flush then self.file:flush() end
  elseif self.printed_count ~= self.count then
    self:_print()
  end
  return self
end

setmetatable(P, { __call = function(_, n, opts) return P.new(n, opts) end })
return P
