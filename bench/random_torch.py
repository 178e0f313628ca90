# torch.rand, torch.randn and F.dropout (float32, PyTorch's default threads)
# in ns per element at 1e3, 1e5 and 1e7 elements, as bench/random.lua's
# --one prints for ember; bench/random.lua runs it in its rounds.
import json
import time

import torch
import torch.nn.functional as F


def per_element(f, n):
    iters = max(1, int(3e6 // n))
    f()
    best = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters):
            f()
        best.append((time.perf_counter() - t0) / iters / n * 1e9)
    best.sort()
    return best[len(best) // 2]


res = {}
for n in (1000, 100000, 10000000):
    x = torch.ones(n)
    res["rand_%d" % n] = per_element(lambda: torch.rand(n), n)
    res["randn_%d" % n] = per_element(lambda: torch.randn(n), n)
    res["dropout_%d" % n] = per_element(lambda: F.dropout(x, 0.1), n)
print(json.dumps(res))
