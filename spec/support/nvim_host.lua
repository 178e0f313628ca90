-- spec/support/nvim_host.lua: ember inside Neovim, run by spec/hosts_spec.lua
-- as a plugin would use it:
--   nvim --headless -u NONE --cmd 'set rtp+=PLUGIN' -c 'luafile nvim_host.lua'
-- where PLUGIN/lua/ember is a vendored copy (scripts/vendor.sh PLUGIN/lua).
-- 1. On the main thread: require("ember") through Neovim's runtimepath
--    loader, then training in budgeted slices, one slice per tick of a
--    libuv timer (the editor's event loop keeps running between them):
--    the forward pass, then gm:backward_steps / BackwardRun:step.
-- 2. In a vim.loop.new_thread worker (a fresh Lua state without `vim` or
--    the runtimepath loader: it gets package.path from the main thread):
--    a whole training run, whose losses come back through a uv async handle.
-- With g:ember_worker_only set (--cmd 'let g:ember_worker_only = 1') only
-- the worker runs: the main thread never loads ember, so the worker's state
-- is the one that loads libember and unloads it when the thread ends.
-- Prints one line "ember-nvim {...}" (JSON) on stdout and quits with 0, or
-- prints the error on stderr and quits with 1.
local uv = vim.loop
local out = {}

local function finish(err)
  if err then
    io.stderr:write("nvim_host: " .. tostring(err) .. "\n")
    io.stderr:flush()
    vim.cmd("cquit 1")
    return
  end
  io.stdout:write("ember-nvim " .. vim.fn.json_encode(out) .. "\n")
  io.stdout:flush()
  vim.cmd("qall!")
end

-- y = 3x - 2 plus noise, fit by a linear model: the answer is known
local function problem(ember)
  ember.manual_seed(0)
  local x = ember.randn({ 256, 1 })
  local y = x * 3 - 2 + ember.randn({ 256, 1 }) * 0.01
  local model = ember.nn.Sequential(ember.nn.Linear(1, 64), ember.nn.Tanh(), ember.nn.Linear(64, 1))
  local params = model:parameters()
  return x, y, model, ember.optim.Adam(params, { lr = 0.02 }),
    ember.autodiff.GradManager():attach(params)
end

-- 2. the worker thread: trains 150 steps in its own Lua state and sends the
-- first and last loss, its library's path and the step count back
local function start_worker()
  -- the plugin's lua/ folder, where Neovim's loader found ember
  local init = vim.api.nvim_get_runtime_file("lua/ember/init.lua", false)[1]
  local luadir = init:match("^(.*)/ember/init%.lua$")
  local path = luadir .. "/?.lua;" .. luadir .. "/?/init.lua;" .. package.path
  local async, thread
  async = uv.new_async(vim.schedule_wrap(function(status, a, b, c, d)
    async:close()
    thread:join()
    if status ~= "ok" then return finish("worker: " .. tostring(a)) end
    out.worker = { first = a, last = b, libpath = c, steps = d }
    finish()
  end))
  thread = uv.new_thread(function(lua_path, done)
    package.path = lua_path
    local okw, a, b, c, d = pcall(function()
      local em = require("ember")
      em.manual_seed(1)
      local xs = em.randn({ 256, 1 })
      local ys = xs * 3 - 2 + em.randn({ 256, 1 }) * 0.01
      local net = em.nn.Sequential(em.nn.Linear(1, 64), em.nn.Tanh(), em.nn.Linear(64, 1))
      local ps = net:parameters()
      local o = em.optim.Adam(ps, { lr = 0.02 })
      local g = em.autodiff.GradManager():attach(ps)
      local first, last
      for i = 1, 150 do
        g:record()
        local l = em.nn.functional.mse_loss(net(xs), ys)
        g:backward(l)
        o:step()
        o:zero_grad()
        if i == 1 then first = l:item() end
        last = l:item()
      end
      return first, last, em._libpath, 150
    end)
    if okw then done:send("ok", a, b, c, d) else done:send("error", tostring(a)) end
  end, path, async)
  out.thread_started = thread ~= nil
end

local ok, err = pcall(function()
  if vim.g.ember_worker_only == 1 then
    out.worker_only = true
    return start_worker()
  end
  local ember = require("ember")
  out.libpath = ember._libpath
  local x, y, model, opt, gm = problem(ember)
  local F = ember.nn.functional
  local losses, slice_ms, ticks = {}, {}, 0
  local run, loss
  local timer = uv.new_timer()
  -- one slice of 1 ms each tick; a step takes as many ticks as it needs
  timer:start(0, 2, vim.schedule_wrap(function()
    local okt, e = pcall(function()
      local t0 = ember.clock()
      ticks = ticks + 1
      if not run then
        gm:record()
        loss = F.mse_loss(model(x), y)
        run = gm:backward_steps(loss)
      end
      if run:step(0.001) then
        run = nil
        opt:step()
        opt:zero_grad()
        losses[#losses + 1] = loss:item()
      end
      slice_ms[#slice_ms + 1] = (ember.clock() - t0) * 1000
    end)
    if not okt or #losses >= 60 then
      timer:stop()
      timer:close()
      if not okt then return finish(e) end
      out.main = { losses = losses, slice_ms = slice_ms, ticks = ticks }
      local w = model:parameters()
      out.main.params = #w
      start_worker()
    end
  end))
end)
if not ok then finish(err) end
