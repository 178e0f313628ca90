"""PyTorch's side of bench/nn_kernels.lua: the same calls, ms per call
(medians of 7 rounds). Run with ember's threads:
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/nn_kernels_torch.py
"""
import json

import torch
import torch.nn.functional as F
from torch_steps import median_ms

out = {"bench": "torch_nn_kernels", "threads": torch.get_num_threads()}


def ms(name, fn, iters=5):
    out[name] = median_ms(fn, iters)


def fwd_bwd(f, ps, cot):
    def step():
        (f() * cot).sum().backward()
        for p in ps:
            p.grad = None
    return step


torch.manual_seed(0)
# layer norm
x = torch.randn(32, 128, 768, requires_grad=True)
w, b = torch.randn(768, requires_grad=True), torch.randn(768, requires_grad=True)
cot = torch.randn(32, 128, 768)
with torch.no_grad():
    ms("layer_norm_fwd", lambda: F.layer_norm(x, (768,), w, b))
ms("layer_norm_fwd_bwd", fwd_bwd(lambda: F.layer_norm(x, (768,), w, b), [x, w, b], cot))

print(json.dumps(out))
