-- bench/thread_policy.lua: the thread policy (docs/frame_loop.md, "Threads")
-- against fixed thread counts. Small, medium and large MLP training steps
-- (bench/thread_policy_model.lua), each timed with set_num_threads(1),
-- set_num_threads(2) and the default ("auto"), alternated step by step in
-- one process (triples of steps in the orders 1, 2, auto and 1, auto, 2 in
-- turn, one untimed step after each switch), in two places:
--   lua   a plain luajit process running steps back to back
--   host  examples/embed/busy_host: a C host whose render-like thread spins
--         all the time and whose main thread spends 1 ms of each frame on
--         its own work before each step
-- and under two conditions: idle, and beside a neighbour process that keeps
-- one core busy. Prints one JSON object: per place, condition and size the
-- median step time (ms) of each setting over its rounds * steps timed steps
-- and auto over the best fixed one, the same from the mean step, the
-- medians of auto's step over 1's and 2's in the same triple; on Linux, per
-- setting, the steps that waited over a quarter of their time for a core
-- (in the busy host beside a neighbour: the host's main thread shared a
-- core) and, for the large steps, each step's time and wait share
-- (docs/frame_loop.md, "Measured"). EMBER_POLICY_NO_CROWD=1 in the
-- environment runs auto without its crowded-cores rule.
--   luajit bench/thread_policy.lua [rounds (5)] [host binary (build/examples/embed/busy_host)]
--                                  [only: place/condition/size, e.g. host/neighbour/large]
package.path = "./bench/?.lua;./lua/?.lua;./lua/?/init.lua;" .. package.path

local rounds = tonumber(arg[1]) or 5
local host = arg[2] or "build/examples/embed/busy_host"
local only = arg[3]
local MODEL = "bench/thread_policy_model.lua"
-- timed steps per round and setting: enough for a median, few enough for a shared machine
local STEPS = { small = 100, medium = 20, large = 6 }
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
      if only and only ~= ("%s/%s/%s"):format(place, cond, size) then goto next end
      local cmd
      if place == "lua" then
        cmd = ("%sluajit bench/thread_policy.lua --child %s %d %d"):format(ENV, size, rounds, STEPS[size])
      else
        cmd = ("%s%s %s %s %d %d 1 1"):format(ENV, host, MODEL, size, rounds, STEPS[size])
      end
      local json = run(cmd)
      results[#results + 1] = ('{"condition":"%s",%s'):format(cond, json:sub(2))
      io.stderr:write(cond, " ", json, "\n")
      ::next::
    end
  end
end
if only and not only:match("^(%a+)/(%a+)/(%a+)$") then
  error("bench/thread_policy.lua: the third argument names one cell as place/condition/size, got " .. only, 0)
end
local t0 = os.time()
for _, cond in ipairs({ "idle", "neighbour" }) do
  if only and not only:find("/" .. cond .. "/", 1, true) then goto skip end
  local pid = cond == "neighbour" and neighbour_start() or nil
  local ok, err = pcall(measure, cond)
  if pid then os.execute("kill " .. pid) end   -- the neighbour never outlives the bench
  if not ok then error(err, 0) end
  ::skip::
end
if #results == 0 then error("bench/thread_policy.lua: no cell is " .. only, 0) end
print(('{"bench":"thread_policy","rounds":%d,"crowd_rule":%s,"seconds":%d,"loadavg_before":"%s","loadavg_after":"%s","runs":[\n%s\n]}')
  :format(rounds, tostring(not os.getenv("EMBER_POLICY_NO_CROWD")), os.time() - t0, load_before, loadavg(),
  table.concat(results, ",\n")))
