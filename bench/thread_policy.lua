-- bench/thread_policy.lua: the thread policy (docs/frame_loop.md, "Threads")
-- against fixed thread counts. Small, medium and large MLP training steps
-- (bench/thread_policy_model.lua), each timed with set_num_threads(1),
-- set_num_threads(2) and the default ("auto"), alternating round by round in
-- one process, in two places:
--   lua   a plain luajit process running steps back to back
--   host  examples/embed/busy_host: a C host whose render-like thread spins
--         all the time and whose main thread spends 1 ms of each frame on
--         its own work before each step
-- and under two conditions: idle, and beside a neighbour process that keeps
-- one core busy. Prints one JSON object: per place, condition and size the
-- median step time (ms) of each setting and auto over the best fixed one, and
-- the same from the mean of every timed step; on Linux, per setting and round,
-- the share of a step the stepping thread waited for a core (medians)
-- ("wait_share": in the busy host beside a neighbour, whether the host's main
-- thread had a core to itself; docs/frame_loop.md, "Measured").
--   luajit bench/thread_policy.lua [rounds (5)] [host binary (build/examples/embed/busy_host)]
package.path = "./bench/?.lua;./lua/?.lua;./lua/?/init.lua;" .. package.path

local rounds = tonumber(arg[1]) or 5
local host = arg[2] or "build/examples/embed/busy_host"
local MODEL = "bench/thread_policy_model.lua"
-- steps per round: enough for a median, few enough for a shared machine
local STEPS = { small = 200, medium = 40, large = 6 }
-- the environment the Lua package and the ember command give libgomp
local ENV = "GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-30000} LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' "

if arg[1] == "--child" then   -- one place "lua" run: luajit bench/thread_policy.lua --child size rounds steps
  dofile(MODEL)
  setup(arg[2], tonumber(arg[3]), tonumber(arg[4]))
  while tick():item() == 0 do end
  print(report("lua"))
  return
end

local function run(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("*a")
  local ok = p:close()
  local json = out:match("(%b{})%s*$")
  if not ok or not json then error("bench/thread_policy.lua: `" .. cmd .. "` failed:\n" .. out, 0) end
  return json
end

local function neighbour_start()
  local p = assert(io.popen("luajit -e 'local x = 0 while true do x = x + 1 end' >/dev/null 2>&1 & echo $!"))
  local pid = tonumber(p:read("*l"))
  p:close()
  return pid
end

local function loadavg()
  local f = io.open("/proc/loadavg")
  local s = f and f:read("*l") or "?"
  if f then f:close() end
  return s
end

local results = {}
local load_before = loadavg()
local function measure(cond)
  for _, place in ipairs({ "lua", "host" }) do
    for _, size in ipairs({ "small", "medium", "large" }) do
      local cmd
      if place == "lua" then
        cmd = ("%sluajit bench/thread_policy.lua --child %s %d %d"):format(ENV, size, rounds, STEPS[size])
      else
        cmd = ("%s%s %s %s %d %d 1 1"):format(ENV, host, MODEL, size, rounds, STEPS[size])
      end
      local json = run(cmd)
      results[#results + 1] = ('{"condition":"%s",%s'):format(cond, json:sub(2))
      io.stderr:write(cond, " ", json, "\n")
    end
  end
end
for _, cond in ipairs({ "idle", "neighbour" }) do
  local pid = cond == "neighbour" and neighbour_start() or nil
  local ok, err = pcall(measure, cond)
  if pid then os.execute("kill " .. pid) end   -- the neighbour never outlives the bench
  if not ok then error(err, 0) end
end
print(('{"bench":"thread_policy","rounds":%d,"loadavg_before":"%s","loadavg_after":"%s","runs":[\n%s\n]}')
  :format(rounds, load_before, loadavg(), table.concat(results, ",\n")))
