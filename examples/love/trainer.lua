-- examples/love/trainer.lua: the trainer thread of examples/love (mode
-- "thread"). A love.thread is a fresh Lua state: it loads love.filesystem
-- (which gives it the game's require paths) and its own ember, sends the
-- data, then trains and sends every step's loss and every fifth fit. The
-- main thread does not load ember in this mode: the thread's is the only one.
-- It stops after max_steps steps (0: no limit), or when the main thread
-- pushes "stop" on the control channel.
local out_name, ctl_name, threads, max_steps = ...
require("love.filesystem")
local ember = require("ember")
local model = require("model")

ember.set_num_threads(threads)
local out, ctl = love.thread.getChannel(out_name), love.thread.getChannel(ctl_name)
local x, y = model.data(1)
out:push({ points = { x = model.numbers(x), y = model.numbers(y) }, libpath = ember._libpath })
local m = model.new(2)
local step = 0
while ctl:pop() ~= "stop" and (max_steps == 0 or step < max_steps) do
  local loss, pred = model.step(m, x, y)
  step = step + 1
  -- every loss; the fit (512 numbers) every fifth step and the last
  local fit = (step % 5 == 1 or step == max_steps) and model.numbers(pred) or nil
  out:push({ step = step, loss = loss, fit = fit })
end
