"""PyTorch's side of bench/batch_norm.lua: forward + backward of
F.batch_norm in training (weight and bias, loss sum(y * r)) at each shape
the Lua side names, timed the same way. Run once per round, alternating with
ember:
    /usr/bin/python3 bench/batch_norm_torch.py ITERS THREADS N,C[,...] ...
Prints one JSON line: seconds per step for each shape, in order.
"""
import json, sys, time
import torch
import torch.nn.functional as F

iters, threads = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(0)
out = []
for spec in sys.argv[3:]:
    shape = [int(v) for v in spec.split(",")]
    x = torch.randn(*shape, requires_grad=True)
    w = torch.randn(shape[1], requires_grad=True)
    b = torch.randn(shape[1], requires_grad=True)
    r = torch.randn(*shape)

    def step():
        y = F.batch_norm(x, None, None, w, b, training=True)
        x.grad = w.grad = b.grad = None
        (y * r).sum().backward()

    step()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    out.append((time.perf_counter() - t0) / iters)
print(json.dumps({"seconds_per_step": out, "threads": torch.get_num_threads()}))
