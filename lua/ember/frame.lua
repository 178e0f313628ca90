-- ember.frame: a whole step (forward, backward, optimizer step, or any Lua
-- function of ember ops) run in time slices across a host's frames, with the
-- same results as one call (docs/frame_loop.md, "A whole step in slices").
--
--   local run = ember.frame.step(train_step, x, y)   -- runs nothing yet
--   function love.update(dt)
--     if run and run:resume(0.002) then run = nil end  -- about 2 ms a frame
--   end
--
-- The step runs in a coroutine. The ops that are yield points (the
-- elementwise ops, matmul, F.linear, a module's forward, each parameter of an
-- optimizer step; tensor.lua's slicer) check the clock while a run is being
-- resumed and yield once the slice's budget is spent; gm:backward inside the
-- step runs on the budgeted backward (gm:backward_steps' machinery), a few
-- nodes a slice. LuaJIT yields across pcall and metamethods; where the
-- step's code sits under a C function (a table.sort comparator, a gsub
-- callback), a yield point lets the slice run on instead.
local ember = require("ember")
local errors = require("ember.errors")

local C = ember._C
local slicer = ember._slicer
local autodiff = ember.autodiff
local clock = C.ember_clock
local co_running, co_yield, co_resume, co_status, co_create = coroutine.running, coroutine.yield,
  coroutine.resume, coroutine.status, coroutine.create
local isyieldable = coroutine.isyieldable
local select, type, setmetatable, getmetatable, unpack = select, type, setmetatable, getmetatable, unpack

local frame = {}
local function pack(...) return { n = select("#", ...), ... } end

-- what the coroutine yields at a pause (any other yield is the step's own)
local PAUSE = setmetatable({}, { __tostring = function() return "ember.frame pause" end })

-- the one run that is open (made and not ended) in this Lua state; held
-- until it ends, so a run must be resumed to the end or cancelled
local open_run = nil

-- yield points: pause once the slice's deadline has passed, when this is the
-- run's own coroutine and nothing below is a C function or a held section
function slicer.point()
  if slicer.hold == 0 and clock() >= slicer.deadline and co_running() == slicer.co and isyieldable() then
    co_yield(PAUSE)
  end
end
-- a pause whatever the clock (between a sliced backward's slices)
function slicer.pause()
  if slicer.hold == 0 and co_running() == slicer.co and isyieldable() then
    co_yield(PAUSE)
    return true
  end
  return false
end
function slicer.owns() return co_running() == slicer.co end
function slicer.recorded(gm) slicer.run.recorded[gm] = true end

local StepRun = {}
StepRun.__index = StepRun
frame.StepRun = StepRun

local function raise(what, msg) errors.raise("ember.frame." .. what .. ": " .. msg) end

-- ember.frame.step(fn, ...): a run of fn(...) to resume a budget at a time
function frame.step(fn, ...)
  if type(fn) ~= "function" then raise("step", "expected a function, got " .. type(fn)) end
  if open_run ~= nil then
    raise("step", (slicer.active and "called inside a running step; " or "another step run is open; ")
      .. "one run at a time: resume it until it is done, or cancel it, first")
  end
  local args = pack(...)
  local run = setmetatable({ state = "open", slices = 0, seconds = 0, longest = 0, recorded = {} }, StepRun)
  run.co = co_create(function() return fn(unpack(args, 1, args.n)) end)
  open_run = run
  return run
end

local function self_check(self, what)
  if getmetatable(self) ~= StepRun then raise("StepRun." .. what, "call it as run:" .. what .. "(...)") end
end

-- Ends a run that failed or was cancelled: a paused backward is cancelled
-- (every .grad as it was), the recordings the step started and left open
-- are released, and another run may start.
local function abandon(self, state)
  self.state = state
  if open_run == self then open_run = nil end
  local st = self.backward
  self.backward = nil
  if st ~= nil then autodiff._cancel_backward(st) end
  for gm in pairs(self.recorded) do
    if gm:is_recording() and not gm._running then gm:release() end
  end
  self.recorded = {}
  self.co = nil
end

-- run:resume(seconds): runs the step until the budget is spent (then false)
-- or the step returns (then true and the step's results)
function StepRun:resume(seconds)
  self_check(self, "resume")
  if self.state ~= "open" then raise("StepRun.resume", "the run has ended (" .. self.state .. ")") end
  if type(seconds) ~= "number" or not (seconds >= 0) then
    raise("StepRun.resume", "expected a budget in seconds >= 0, got " .. tostring(seconds))
  end
  if slicer.active then raise("StepRun.resume", "called inside a running step") end
  local outer_grad = C.ember_is_grad_enabled()
  if self.slices == 0 then self.outer_grad, self.step_grad = outer_grad, outer_grad end
  C.ember_set_grad_enabled(self.step_grad)
  local t0 = clock()
  slicer.deadline, slicer.co, slicer.run, slicer.backward = t0 + seconds, self.co, self, self.backward
  slicer.active = true
  -- an ember.tidy open in the step is the step's: what the host makes
  -- between slices is not on its list
  local host_tidy = ember._set_tidy_list(self.tidy_list)
  local res = pack(co_resume(self.co))
  self.tidy_list = ember._set_tidy_list(host_tidy)
  slicer.active, slicer.co, slicer.run = false, nil, nil
  self.backward = slicer.backward   -- a backward paused inside the step, if any
  local took = clock() - t0
  self.slices, self.seconds = self.slices + 1, self.seconds + took
  if took > self.longest then self.longest = took end
  if not res[1] then   -- the step raised: its message, then where in the step
    local trace = debug.traceback(self.co)
    abandon(self, "failed")
    C.ember_set_grad_enabled(self.outer_grad)
    local msg = res[2]
    if type(msg) ~= "string" then msg = tostring(msg) end
    error(msg .. "\n(in the step run by ember.frame.step)\n" .. trace, 0)
  end
  if co_status(self.co) == "dead" then
    self.state = "done"
    open_run = nil
    self.co = nil
    self._results = pack(unpack(res, 2, res.n))
    return true, unpack(res, 2, res.n)
  end
  if res[2] ~= PAUSE then
    abandon(self, "failed")
    C.ember_set_grad_enabled(self.outer_grad)
    raise("StepRun.resume", "the step yielded by itself (coroutine.yield inside the step); a step may not yield")
  end
  -- paused: the frame's other ops are not recorded by the step's managers
  self.step_grad = C.ember_is_grad_enabled()
  C.ember_set_grad_enabled(0)
  return false
end

function StepRun:is_done() self_check(self, "is_done"); return self.state == "done" end

-- the step's results once it is done
function StepRun:results()
  self_check(self, "results")
  if self.state ~= "done" then raise("StepRun.results", "the run is " .. self.state .. ", not done") end
  return unpack(self._results, 1, self._results.n)
end

-- abandons an open run where it stands (see docs/frame_loop.md)
function StepRun:cancel()
  self_check(self, "cancel")
  if slicer.active and slicer.run == self then raise("StepRun.cancel", "called inside the running step") end
  if self.state ~= "open" then return end
  local started = self.slices > 0
  abandon(self, "cancelled")
  if started then C.ember_set_grad_enabled(self.outer_grad) end
end

-- {state, slices, seconds (inside resume, in all), longest (slice)}
function StepRun:stats()
  self_check(self, "stats")
  return { state = self.state, slices = self.slices, seconds = self.seconds, longest = self.longest }
end

return frame
