-- LÖVE's configuration for examples/love: a window for the plots, and no
-- audio (the game has none; it also runs headless under Xvfb, where there is
-- no sound device).

-- With --frames the game runs unattended (main.lua): an error, a syntax
-- error in main.lua included, prints and exits 1 instead of waiting on LÖVE's
-- error screen. conf.lua runs before main.lua, so the handler is set here.
for _, a in ipairs(arg or {}) do
  if a == "--frames" then
    love.errorhandler = function(msg)
      io.stderr:write("examples/love: " .. tostring(msg) .. "\n" .. debug.traceback() .. "\n")
      io.stderr:flush()
      os.exit(1)
    end
  end
end
function love.conf(t)
  t.identity = "ember_curve_fit"
  t.window.title = "ember: training while the game runs"
  t.window.width, t.window.height = 800, 480
  t.window.vsync = 1
  t.modules.audio = false
  t.modules.sound = false
  t.modules.joystick = false
  t.modules.physics = false
  t.modules.video = false
end
