"""PyTorch 1.13's side of bench/jit_profile.lua: the MLP recipe's step
(bench/torch_ref.py: 784-256-128-10, cross-entropy, SGD lr 0.1 momentum
0.9, batch 128 gathered by xtr[perm[i:i+128]]) timed whole, and its ops
under torch.profiler (self CPU time per op, microseconds per step). Prints
JSON.
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/jit_torch_profile.py [steps]
"""
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "bench")
from torch_ref import load  # noqa: E402


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    torch.manual_seed(0)
    xtr, ytr = load("train")
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    perm = torch.randperm(len(xtr))

    def step(i):
        j = perm[(i * 128) % 59904:(i * 128) % 59904 + 128]
        x = xtr[j]
        loss = F.cross_entropy(model(x), ytr[j])
        opt.zero_grad()
        loss.backward()
        opt.step()

    for i in range(50):
        step(i)
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    whole = (time.perf_counter() - t0) / steps
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for i in range(steps):
            step(i)
    ops = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    table = "; ".join("%s %.1f x%g" % (e.key, e.self_cpu_time_total / steps, e.count / steps)
                      for e in ops[:16])
    print(json.dumps({"bench": "jit_torch_profile", "threads": torch.get_num_threads(), "step_us": whole * 1e6,
                      "ops_self_us_per_step": table}, indent=2))


if __name__ == "__main__":
    main()
