-- bench/gather_ab.lua: ms per call of issue 33's gather and elementwise cases
-- (the ops_sweep cases ember was left above PyTorch with: embedding,
-- gather along the last dim, index_select of rows, exp, and the 1e6 and
-- 2048x2048 adds and mul), each call in ember.tidy. CPU time (os.clock, all
-- threads counted; with EMBER_NUM_THREADS=1 the steadier measure on a loaded
-- machine) or, with --wall, wall time. Run it against another build
-- (EMBER_LIB=path/libember.so) in alternation to compare a change with its
-- base. Prints JSON: ms per call, the fastest of 5 batches of about 20 ms.
-- From the repository root: luajit bench/gather_ab.lua [--wall] [--only "exp 1e6,add 1e6"]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local F = ember.nn.functional

local wall, only = false, nil
do
  local i = 1
  while i <= #arg do
    if arg[i] == "--wall" then wall = true; i = i + 1
    elseif arg[i] == "--only" then only = {}; for n in arg[i + 1]:gmatch("[^,]+") do only[n] = true end; i = i + 2
    else error("unknown argument " .. arg[i] .. " (expected --wall, --only list)") end
  end
end
local now = wall and B.now or os.clock

-- fn's result is dropped inside the tidy, which frees it at once (a result
-- returned from the tidy would be kept, and freed only at the next GC)
local function ms_per_call(fn)
  local inner = function() fn() end
  local call = function() ember.tidy(inner) end
  call()
  local t0 = now()
  call()
  local iters = math.max(1, math.floor(0.02 / math.max(now() - t0, 1e-7)))
  local best = math.huge
  for _ = 1, 5 do
    t0 = now()
    for _ = 1, iters do call() end
    best = math.min(best, (now() - t0) / iters)
  end
  return best * 1e3
end

ember.manual_seed(0)
local r = ember.randn
local a6, b6, x6 = r({ 1000000 }), r({ 1000000 }), r({ 1000000 })
local a, b, row = r({ 2048, 2048 }), r({ 2048, 2048 }), r({ 2048 })
local g, gi = r({ 4096, 1024 }), ember.randint(1, 1025, { 4096, 1024 })
local w = r({ 30000, 256 })
local rows, tok = ember.randint(1, 30001, { 4096 }), ember.randint(1, 30001, { 32, 128 })
local cases = {
  { "embedding 32x128 of 30000x256", function() return F.embedding(tok, w) end },
  { "index_select rows 30000x256", function() return w:index_select(1, rows) end },
  { "gather dim2 4096x1024", function() return g:gather(2, gi) end },
  { "exp 1e6", function() return x6:exp() end },
  { "add 1e6", function() return a6 + b6 end },
  { "mul 1e6", function() return a6 * b6 end },
  { "add 2048x2048", function() return a + b end },
  { "add transposed 2048x2048", function() return a:t() + b:t() end },
  { "add row-broadcast 2048x2048", function() return a + row end },
}
local out = {}
for _, c in ipairs(cases) do
  if not only or only[c[1]] then
    out[#out + 1] = ('  {"case": "%s", "ms": %.4g}'):format(c[1], ms_per_call(c[2]))
  end
end
print(('{"bench": "gather_ab", "threads": %d, "clock": "%s", "cases": [\n%s\n]}'):format(ember.get_num_threads(),
  wall and "wall" or "cpu", table.concat(out, ",\n")))
