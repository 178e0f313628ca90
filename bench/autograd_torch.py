"""PyTorch's side of bench/autograd.lua's tiny forward + backward:
y = ((a * b) + a).sum() over 4-element tensors, then y.backward(), the
median over 7 rounds of 20000 of microseconds per iteration. Run with the
same threads as ember and OMP_WAIT_POLICY=passive:
    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive /usr/bin/python3 bench/autograd_torch.py
"""
import json, time
import torch

a = torch.rand(4, requires_grad=True)
b = torch.rand(4, requires_grad=True)


def run(n):
    for _ in range(n):
        ((a * b) + a).sum().backward()


run(2000)
times = []
for _ in range(7):
    t0 = time.perf_counter()
    run(20000)
    times.append((time.perf_counter() - t0) / 20000)
times.sort()
print(json.dumps({"bench": "torch_tiny_fwd_bwd", "tiny_fwd_bwd_us": times[3] * 1e6,
                  "threads": torch.get_num_threads()}))
