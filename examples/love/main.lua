-- examples/love: a LÖVE 11 game that trains a model while it runs. A
-- 3-hidden-layer tanh MLP (width 512) fits a noisy curve; the left panel
-- draws the points and the model's fit, the right one the loss curve.
-- Training runs in one of four modes:
--   budget   (the default) love.update runs training in slices of a time
--            budget a frame: the forward pass, then backward nodes through
--            gm:backward_steps / BackwardRun:step until the budget is spent,
--            then the optimizer; a step spans frames, the frame rate holds
--   oneshot  a whole training step in every love.update
--   thread   a love.thread trains (trainer.lua) and sends the data, the
--            losses and the fit over a channel; the main thread only draws
--            and never loads ember
--   off      no training: the frame time of the game alone
-- ember is vendored beside this file (scripts/vendor.sh examples/love puts
-- ember/ with libember.so here); docs/hosts.md says how to ship it.
--   love examples/love [--mode budget|oneshot|thread|off] [--budget-ms 4]
--        [--threads N] [--steps N] [--frames N] [--screenshot out.png]
-- --steps N stops training after N steps (the game goes on drawing).
-- --frames N quits after N frames (and, with --steps, once the steps are
-- done) and prints the frame-time statistics and the losses (one line,
-- "ember-love {...}" in JSON), for runs under xvfb-run -a.
local ember, model    -- loaded in love.load, except in thread mode
local libpath        -- the libember in use (the trainer's, in thread mode)

local opts = { mode = "budget", budget_ms = 4, threads = 1, steps = nil, frames = nil, screenshot = nil }

local function usage(msg)
  error("examples/love: " .. msg .. "\nusage: love examples/love [--mode budget|oneshot|thread|off] "
    .. "[--budget-ms MS] [--threads N] [--steps N] [--frames N] [--screenshot FILE.png]", 0)
end

local function parse(args)
  local i = 1
  while args[i] do
    local a, v = args[i], args[i + 1]
    if a == "--mode" then
      if not (v == "budget" or v == "oneshot" or v == "thread" or v == "off") then
        usage("--mode takes budget, oneshot, thread or off, got " .. tostring(v))
      end
      opts.mode = v
    elseif a == "--budget-ms" or a == "--threads" or a == "--steps" or a == "--frames" then
      local n = tonumber(v)
      if not n or n <= 0 or (a ~= "--budget-ms" and n % 1 ~= 0) then
        usage(a .. " takes a positive " .. (a == "--budget-ms" and "number" or "integer")
          .. ", got " .. tostring(v))
      end
      opts[a:sub(3):gsub("-", "_")] = n
    elseif a == "--screenshot" then
      if not v then usage("--screenshot takes a file name") end
      opts.screenshot = v
    else
      usage("unknown argument " .. tostring(a))
    end
    i = i + 2
  end
end

local x, y, points                   -- the data, and as numbers for drawing
local m, stepper, trainer            -- the model (budget, oneshot) or the trainer thread
local out, ctl                       -- the trainer's channels
local fit, losses, steps = nil, {}, 0
local frame_ms, update_ms = {}, {}   -- per frame: the whole frame, love.update's part
local t_update, frame = nil, 0
local trained, quitting = false, false  -- --steps reached (the trainer thread's reported); quit asked

function love.load(args)
  parse(args)
  if opts.mode ~= "thread" then
    ember, model = require("ember"), require("model")
    libpath = ember._libpath
    ember.set_num_threads(opts.threads)
    x, y = model.data(1)
    points = { x = model.numbers(x), y = model.numbers(y) }
  end
  if opts.mode == "budget" or opts.mode == "oneshot" then
    m = model.new(2)
    stepper = model.stepper(m, x, y)
  elseif opts.mode == "thread" then
    out, ctl = love.thread.getChannel("ember_out"), love.thread.getChannel("ember_ctl")
    trainer = love.thread.newThread("trainer.lua")
    trainer:start("ember_out", "ember_ctl", opts.threads, opts.steps or 0)
  end
end

-- a step's loss, and its fit as a list of numbers (or nil: the last one stays)
local function record(loss, fit_numbers)
  steps = steps + 1
  losses[#losses + 1] = loss
  fit = fit_numbers or fit
  if opts.steps and steps >= opts.steps then trained = true end
end

-- a statistics summary of a list of milliseconds
local function summary(list)
  local s = {}
  for i, v in ipairs(list) do s[i] = v end
  table.sort(s)
  local function q(p) return s[math.max(1, math.ceil(p * #s))] or 0 end
  return string.format('{"median": %.3f, "p99": %.3f, "max": %.3f}', q(0.5), q(0.99), s[#s] or 0)
end

local function finish()
  if trainer then
    ctl:push("stop")
    trainer:wait()
    local err = trainer:getError()
    if err then error("trainer thread: " .. err, 0) end
    while out:getCount() > 0 do
      local msg = out:pop()
      if msg.points then points, libpath = msg.points, msg.libpath end
      if msg.loss then record(msg.loss, msg.fit) end
    end
  end
  -- the first frame's time includes loading: it is left out
  table.remove(frame_ms, 1)
  table.remove(update_ms, 1)
  local parts = {}
  for i, l in ipairs(losses) do parts[i] = string.format("%.9g", l) end   -- a float32 exactly
  io.stdout:write(string.format('ember-love {"mode": "%s", "frames": %d, "budget_ms": %g, "threads": %d, '
    .. '"steps": %d, "frame_ms": %s, "update_ms": %s, "losses": [%s], "libpath": "%s"}\n',
    opts.mode, frame, opts.budget_ms, opts.threads, steps, summary(frame_ms), summary(update_ms),
    table.concat(parts, ", "), libpath))
  io.stdout:flush()
  love.event.quit(0)
end

function love.update()
  local now = love.timer.getTime()
  if t_update then frame_ms[#frame_ms + 1] = (now - t_update) * 1000 end
  t_update = now
  frame = frame + 1
  if trained then   -- luacheck: ignore 542
    -- --steps reached: the game only draws
  elseif opts.mode == "budget" then
    local loss, pred = stepper.slice(opts.budget_ms / 1000)
    if loss then record(loss, model.numbers(pred)) end
  elseif opts.mode == "oneshot" then
    local loss, pred = model.step(m, x, y)
    record(loss, model.numbers(pred))
  elseif opts.mode == "thread" then
    local msg = out:pop()
    while msg do
      if msg.points then points, libpath = msg.points, msg.libpath end
      if msg.loss then record(msg.loss, msg.fit) end
      msg = out:pop()
    end
    local err = not trainer:isRunning() and trainer:getError()
    if err then error("trainer thread: " .. err, 0) end
  end
  update_ms[#update_ms + 1] = (love.timer.getTime() - now) * 1000
  -- --frames: once the frames (and --steps) are done, one more frame for
  -- the screenshot, then quit
  if quitting then
    finish()
  elseif opts.frames and frame >= opts.frames and (trained or not opts.steps or opts.mode == "off") then
    quitting = true
    if opts.screenshot then
      love.graphics.captureScreenshot(function(img)
        local f = assert(io.open(opts.screenshot, "wb"))
        f:write(img:encode("png"):getString())
        f:close()
      end)
    end
  end
end

-- a polyline of values vs = {v1, ...} at xs in the box (x0, y0, w, h) for the ranges given
local function plot(xs, vs, x0, y0, w, h, xmin, xmax, vmin, vmax)
  local line = {}
  for i = 1, #vs do
    local v = math.min(math.max(vs[i], vmin), vmax)     -- kept inside the box
    line[#line + 1] = x0 + (xs[i] - xmin) / (xmax - xmin) * w
    line[#line + 1] = y0 + h - (v - vmin) / (vmax - vmin) * h
  end
  if #line >= 4 then love.graphics.line(line) end
end

function love.draw()
  local W, H = love.graphics.getDimensions()
  local pw, ph, top = W / 2 - 30, H - 90, 50
  love.graphics.clear(0.08, 0.08, 0.1)
  -- left: the points and the fit
  love.graphics.setColor(0.3, 0.3, 0.35)
  love.graphics.rectangle("line", 20, top, pw, ph)
  love.graphics.setColor(0.55, 0.75, 1.0)
  for i = 1, points and #points.x or 0 do
    love.graphics.circle("fill", 20 + (points.x[i] + 3) / 6 * pw, top + ph - (points.y[i] + 1.4) / 2.8 * ph, 2)
  end
  if fit and points then
    love.graphics.setColor(1.0, 0.55, 0.2)
    love.graphics.setLineWidth(3)
    plot(points.x, fit, 20, top, pw, ph, -3, 3, -1.4, 1.4)
    love.graphics.setLineWidth(1)
  end
  -- right: log10 of the loss against the step
  local lx = W / 2 + 10
  love.graphics.setColor(0.3, 0.3, 0.35)
  love.graphics.rectangle("line", lx, top, pw, ph)
  if #losses >= 2 then
    local idx, logs = {}, {}
    for i, l in ipairs(losses) do idx[i], logs[i] = i, math.log10(math.max(l, 1e-6)) end
    love.graphics.setColor(0.4, 1.0, 0.5)
    plot(idx, logs, lx, top, pw, ph, 1, math.max(#losses, 2), -3, 1.5)
  end
  love.graphics.setColor(1, 1, 1)
  love.graphics.print("points and the model's fit", 20, top - 20)
  love.graphics.print("log10 loss per step", lx, top - 20)
  local last = losses[#losses]
  love.graphics.print(string.format("mode %s   steps %d   loss %s   %d fps   update %.2f ms",
    opts.mode, steps, last and string.format("%.4f", last) or "-", love.timer.getFPS(),
    update_ms[#update_ms] or 0), 20, H - 30)
end

function love.keypressed(key)
  if key == "escape" then love.event.quit(0) end
end

function love.quit()
  if trainer and trainer:isRunning() then
    ctl:push("stop")
    trainer:wait()
  end
end
