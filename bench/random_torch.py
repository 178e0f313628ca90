# torch.rand, torch.randn and F.dropout (float32, PyTorch's default threads)
# in ns per element at 1e3, 1e5 and 1e7 elements, as bench/random.lua's
# --one prints for ember; bench/random.lua runs it in its rounds.
import json

import torch
import torch.nn.functional as F
from torch_steps import median_seconds


def per_element(f, n):
    """ns per element: the median of 5 rounds of about 3e6 elements' calls, after one"""
    return median_seconds(f, max(1, int(3e6 // n)), 5) / n * 1e9


res = {}
for n in (1000, 100000, 10000000):
    x = torch.ones(n)
    res["rand_%d" % n] = per_element(lambda: torch.rand(n), n)
    res["randn_%d" % n] = per_element(lambda: torch.randn(n), n)
    res["dropout_%d" % n] = per_element(lambda: F.dropout(x, 0.1), n)
print(json.dumps(res))
