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

local now, clock, only = B.ab_args(arg)

-- each call in a tidy that frees its result at once
local function ms_per_call(fn) return B.best_ms(B.in_tidy(ember, fn), now, 0.02, 5) end

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
B.ab_print("gather_ab", ember, cases, only, clock, ms_per_call)
