-- A sampling profiler's signals are safe (docs/hardening.md, "Profilers and
-- other signals"): MobileNetV2 trains at batch 32 on one thread for 30 steps
-- under LuaJIT's profiler (luajit -jp=v, SIGPROF every 10 ms), 4 times;
-- every run must exit 0 with no glibc or sanitizer report. oneDNN's
-- generated GEMM kernels point rsp into the heap, where a signal frame
-- landed: before their calls held the thread's signals, 5 of 8 such runs
-- aborted ("corrupted size vs. prev_size while consolidating"); 2 of 4 runs
-- here failed against the library before the fix. About 4 s (not under
-- ASan: a run there is many times slower; test_signals covers that build).
-- core/tests/test_signals.c is the faster and surer check of the same.
local U = dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".")
  .. "/../cli/tests/spec_util.lua")

local STEP = [[
local root = ...
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. root .. "/bench/?.lua;"
  .. root .. "/spec/support/?.lua;" .. package.path
local ember = require("ember")
ember.set_num_threads(1)
local B = require("common")
local MobileNetV2 = require("mobilenetv2")
ember.manual_seed(0)
local model = MobileNetV2(10)
local x, labels = ember.randn({ 32, 3, 32, 32 }), ember.randint(1, 11, { 32 })
local opt = ember.optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
local gm = ember.autodiff.GradManager():attach(model:parameters())
local step = B.classifier_step(ember, model, opt, gm, x, labels)
for i = 1, 30 do step() end
io.stdout:write("done\n")
]]

local BAD = { "corrupted", "double free", "free%(%)", "AddressSanitizer", "runtime error", "Segmentation",
  "Aborted" }

describe("a sampling profiler's signals", function()
  it("leave a MobileNetV2 training under luajit -jp=v sound (4 runs) #noasan", function()
    local dir = U.tmpdir()
    U.write(dir .. "/step.lua", STEP)
    local failures = {}
    for i = 1, 4 do
      local r = U.run({ "luajit", "-jp=v," .. dir .. "/profile.txt", dir .. "/step.lua", U.root })
      local why
      if r.rc ~= 0 then why = "exit status " .. tostring(r.rc) end
      if not why and not r.out:find("done", 1, true) then why = "no 'done'" end
      for _, pat in ipairs(BAD) do
        if not why and r.err:find(pat) then why = "'" .. pat .. "' on stderr" end
      end
      if why then failures[#failures + 1] = ("run %d: %s\n%s"):format(i, why, r.err:sub(1, 2000)) end
    end
    U.rm_rf(dir)
    assert(#failures == 0, #failures .. " of 4 runs failed:\n" .. table.concat(failures, "\n"))
  end)
end)
