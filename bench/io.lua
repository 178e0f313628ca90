-- bench/io.lua: ember.save and ember.load of a large state_dict, in ms per
-- call (medians of 5 rounds): 100 MB as 400 float32 tensors of 256 x 256, and
-- 4000 small tensors (a header of some hundred kB, as a model with many
-- layers writes); also a nested checkpoint of the big one. The files go to
-- $TMPDIR (or /tmp); save fsyncs, so its time includes the disk. Run from
-- the repository root after building:
--   luajit bench/io.lua
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")
local json = require("ember.json")
local out = { bench = "io", threads = ember.get_num_threads() }

local dir = os.getenv("TMPDIR") or "/tmp"
local path = dir .. "/ember_bench_io." .. tostring(os.time()) .. ".safetensors"

local function ms(name, fn) out[name] = B.ms_per_call(fn, 1, 5) end

ember.manual_seed(0)
local big = {}
for i = 1, 400 do big[("layers.%d.weight"):format(i)] = ember.randn({ 256, 256 }) end
local small = {}
for i = 1, 4000 do small[("blocks.%d.norm.bias"):format(i)] = ember.randn({ 16 }) end

ms("save_100mb_400_tensors_ms", function() ember.save(path, big) end)
ms("load_100mb_400_tensors_ms", function() return ember.load(path) end)
ms("save_4000_small_tensors_ms", function() ember.save(path, small) end)
ms("load_4000_small_tensors_ms", function() return ember.load(path) end)
local ckpt = { model = big, step = 100, optim = { lr = 1e-3, betas = { 0.9, 0.999 } } }
ms("save_nested_100mb_ms", function() ember.save(path, ckpt) end)
ms("load_nested_100mb_ms", function() return ember.load(path) end)
os.remove(path)
print(json.encode(out))
