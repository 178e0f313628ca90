-- One training step of an LSTM beside PyTorch's, in the same run: forward
-- and backward of nn.LSTM(256, 256) over a float32 sequence of 100 steps,
-- batch 64 (loss mean(out^2)), as bench/lstm_torch.py does in PyTorch 1.13.
-- Rounds alternate ember and PyTorch so a noisy neighbour slows both alike;
-- both run on ember's thread count and OpenBLAS core (PyTorch in a child
-- process given OPENBLAS_CORETYPE, and OMP_WAIT_POLICY=PASSIVE: on a shared
-- 2-core machine its OpenMP threads otherwise spin against each other and
-- the step takes about 10 times as long). Prints JSON: medians of seconds
-- per step and of the per-round ratios ember / PyTorch.
--   luajit bench/lstm.lua [rounds [iters]]
package.path = "./bench/?.lua;" .. package.path
local B = require("common")
local ember = require("ember")

local rounds, iters = tonumber(arg and arg[1]) or 5, tonumber(arg and arg[2]) or 3
local T, N, H = 100, 64, 256
ember.manual_seed(0)
local lstm = ember.nn.LSTM(H, H)
local x = ember.randn({ T, N, H })
local gm = ember.autodiff.GradManager():attach(lstm:parameters())

local function step()
  gm:record()
  local out = lstm(x)
  gm:backward((out * out):mean())
  lstm:zero_grad()
end

local threads, core = ember.get_num_threads(), B.blas_core(ember)
local torch_cmd = ("OMP_WAIT_POLICY=PASSIVE OPENBLAS_CORETYPE=%s /usr/bin/python3 bench/lstm_torch.py %d %d"):format(core, iters, threads)
local te, tt, ratio = B.against_torch(step, torch_cmd, iters, rounds)
print(B.json({ bench = "lstm_step", seq = T, batch = N, hidden = H, threads = threads, openblas_core = core,
  ember_s = B.median(te), torch_s = B.median(tt), ratio = B.median(ratio),
  ember_min_s = math.min(unpack(te)), torch_min_s = math.min(unpack(tt)),
  peak_rss_mb = B.peak_rss_mb() }))
