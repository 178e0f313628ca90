-- examples/love/trainer.lua: the trainer thread of examples/love (mode
-- "thread"). A love.thread is a fresh Lua state: it loads love.filesystem
-- (which gives it the game's require paths) and its own ember, trains, and
-- sends the loss and the fitted curve to the main thread every few steps.
-- It stops after max_steps steps (0: no limit), or when the main thread
-- pushes "stop" on the control channel.
local out_name, ctl_name, threads, max_steps = ...
require("love.filesystem")
require("love.timer")
local ember = require("ember")
local model = require("model")

ember.set_num_threads(threads)
local out, ctl = love.thread.getChannel(out_name), love.thread.getChannel(ctl_name)
local x, y = model.data(1)
local m = model.new(2)
local step = 0
while ctl:pop() ~= "stop" and (max_steps == 0 or step < max_steps) do
  local loss, pred = model.step(m, x, y)
  step = step + 1
  -- every loss; the fit (512 numbers) every fifth step and the last
  local fit = (step % 5 == 1 or step == max_steps) and model.numbers(pred) or nil
  out:push({ step = step, loss = loss, fit = fit })
end
