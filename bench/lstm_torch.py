"""PyTorch's side of bench/lstm.lua: forward + backward of nn.LSTM(256, 256)
over a (100, 64, 256) float32 sequence, the same step as ember's, timed the
same way. Run by bench/lstm.lua once per round, alternating with ember:
    /usr/bin/python3 bench/lstm_torch.py ITERS THREADS
Prints one JSON line: seconds per step over ITERS steps (after one warm-up).
"""
import sys
import torch
from torch_steps import report_steps

iters, threads = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(0)
T, N, H = 100, 64, 256
lstm = torch.nn.LSTM(H, H)
x = torch.randn(T, N, H)


def step():
    out, _ = lstm(x)
    lstm.zero_grad()
    (out * out).mean().backward()


report_steps(step, iters)
