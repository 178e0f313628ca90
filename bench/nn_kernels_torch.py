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

# softmax's and log_softmax's backward alone
for name, shape, dim in (("rows", (4096, 1024), 1), ("mid", (64, 256, 64), 1)):
    sx, sg = torch.randn(*shape), torch.randn(*shape)
    y = torch.softmax(sx, dim)
    ms("softmax_bwd_" + name, lambda: torch._softmax_backward_data(sg, y, dim, sx.dtype))
    ly = torch.log_softmax(sx, dim)
    ms("log_softmax_bwd_" + name, lambda: torch._log_softmax_backward_data(sg, ly, dim, sx.dtype))

# cross-entropy
lx = torch.randn(4096, 1000, requires_grad=True)
labels = torch.randint(0, 1000, (4096,))
for name, o in (("", {}), ("_smooth_ignore", {"ignore_index": 6, "label_smoothing": 0.1})):
    with torch.no_grad():
        ms("cross_entropy_fwd" + name, lambda: F.cross_entropy(lx, labels, **o))
    ms("cross_entropy_fwd_bwd" + name, fwd_bwd(lambda: F.cross_entropy(lx, labels, **o), [lx], torch.tensor(1.0)))

# gelu forward + backward
gx = torch.randn(4096, 1024, requires_grad=True)
gcot = torch.randn(4096, 1024)
for form in ("none", "tanh"):
    ms("gelu_" + form + "_fwd_bwd", fwd_bwd(lambda: F.gelu(gx, approximate=form), [gx], gcot))

# pooling 3x3 stride 2 padding 1
px = torch.randn(32, 64, 56, 56, requires_grad=True)
pcot = torch.randn(32, 64, 28, 28)
with torch.no_grad():
    ms("max_pool2d_3x3s2_fwd", lambda: F.max_pool2d(px, 3, 2, 1), 3)
    ms("avg_pool2d_3x3s2_fwd", lambda: F.avg_pool2d(px, 3, 2, 1), 3)
ms("max_pool2d_3x3s2_fwd_bwd", fwd_bwd(lambda: F.max_pool2d(px, 3, 2, 1), [px], pcot), 3)
ms("avg_pool2d_3x3s2_fwd_bwd", fwd_bwd(lambda: F.avg_pool2d(px, 3, 2, 1), [px], pcot), 3)

print(json.dumps(out))
