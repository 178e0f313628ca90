-- ember.progress(n, {desc = ...}): a progress bar for training loops. On a
-- terminal it redraws one line in place (\r), at most every `interval`
-- seconds; elsewhere (a log file, a pipe) it prints a plain line at every
-- tenth of the way and when closed. Not a logger: it keeps no history.
--
--   local bar = ember.progress(#loader, { desc = "epoch 1" })
--   for x, y in loader:iter() do ...; bar:update(1, { loss = loss:item() }) end
--   bar:close()
--
-- Options: desc, file (default io.stdout; anything with :write and :flush),
-- tty (force terminal / plain mode; default isatty(1) for io.stdout),
-- width (bar cells, default 24), interval (tty redraw seconds, default 0.1),
-- lines (plain lines per run, default 10), log_interval (plain mode: a line
-- at least this often, default 30 s), unit (default "it"), clock (a
-- function returning seconds, for tests).
local ffi = require("ffi")

pcall(ffi.cdef, [[
typedef struct { long tv_sec; long tv_nsec; } ember_progress_timespec;
int ember_progress_clock_gettime(int clk, ember_progress_timespec *ts) __asm__("clock_gettime");
int ember_progress_isatty(int fd) __asm__("isatty");
]])

local C = ffi.C
local format, floor, concat = string.format, math.floor, table.concat

local P = {}
local Bar = {}
Bar.__index = Bar
P.Bar = Bar

local ts = ffi.new("ember_progress_timespec")
-- monotonic wall-clock seconds (CLOCK_MONOTONIC = 1 on Linux)
function P.now()
  C.ember_progress_clock_gettime(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

function P.isatty(fd) return C.ember_progress_isatty(fd or 1) == 1 end

-- "4:05", "1:02:03"
function P.format_time(s)
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
  if n ~= nil and (type(n) ~= "number" or n < 0) then
    error("ember.progress: total must be a non-negative number or nil, got " .. tostring(n), 2)
  end
  local file = opts.file or io.stdout
  local tty = opts.tty
  if tty == nil then tty = file == io.stdout and P.isatty(1) end
  local self = setmetatable({
    total = n, count = 0, desc = opts.desc, file = file, tty = tty and true or false,
    width = opts.width or 24, interval = opts.interval or 0.1, lines = opts.lines or 10,
    unit = opts.unit or "it", clock = opts.clock or P.now, postfix = nil, closed = false,
    next_line = 1, last_draw = -math.huge, last_len = 0, log_interval = opts.log_interval or 30,
  }, Bar)
  self.start = self.clock()
  self.last_print = self.start
  if self.tty then self:_draw() end
  return self
end

-- The status text: "desc: 45%|#########           | 450/1000 [00:03<00:04, 123.4 it/s, loss=0.12]"
function Bar:line()
  local elapsed = self.clock() - self.start
  local rate = elapsed > 0 and self.count / elapsed or nil
  local rate_s
  if not rate or self.count == 0 then rate_s = "? " .. self.unit .. "/s"
  elseif rate >= 1 then rate_s = format("%.2f %s/s", rate, self.unit)
  else rate_s = format("%.2f s/%s", 1 / rate, self.unit) end
  local desc = self.desc and (self.desc .. ": ") or ""
  local pf = postfix_str(self.postfix)
  pf = pf ~= "" and (", " .. pf) or ""
  local n = self.total
  if n and n > 0 then
    local frac = math.min(self.count / n, 1)
    local eta = (rate and rate > 0) and (n - self.count) / rate or (self.count >= n and 0 or nil)
    local bar = ""
    if self.tty then
      local full = floor(frac * self.width + 1e-9)
      bar = "|" .. string.rep("#", full) .. string.rep(" ", self.width - full) .. "| "
    end
    return format("%s%3d%%%s%d/%d [%s<%s, %s%s]", desc, floor(frac * 100 + 1e-9),
      self.tty and bar or " ", self.count, n, P.format_time(elapsed),
      eta and P.format_time(eta) or "?", rate_s, pf)
  end
  return format("%s%d [%s, %s%s]", desc, self.count, P.format_time(elapsed), rate_s, pf)
end

function Bar:_draw()
  local s = self:line()
  local pad = self.last_len > #s and string.rep(" ", self.last_len - #s) or ""
  self.file:write("\r", s, pad)
  if self.file.flush then self.file:flush() end
  self.last_len = #s
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
