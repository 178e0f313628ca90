"""PyTorch's side of bench/tensorlib.lua: the same calls, ms per call
(medians of 7 rounds). Run with ember's threads:
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/tensorlib_torch.py
"""
import json

import torch
from torch_steps import ms_table

out, ms = ms_table("torch_tensorlib")


torch.manual_seed(0)
x = torch.randn(1000, 1000)
ms("cumsum_dim2_ms", lambda: x.cumsum(1))
ms("cumsum_dim1_ms", lambda: x.cumsum(0))
ms("sort_dim2_ms", lambda: x.sort(dim=1, stable=True))
ms("sort_dim1_ms", lambda: x.sort(dim=0, stable=True))
ms("topk10_dim2_ms", lambda: x.topk(10))
ms("prod_dim2_ms", lambda: x.prod(1))
a, b = torch.randn(32, 64, 64), torch.randn(32, 64, 64)
ms("einsum_bij_bjk_ms", lambda: torch.einsum("bij,bjk->bik", a, b), 20)
ms("bmm_ms", lambda: torch.bmm(a, b), 20)
m = torch.randn(256, 256, dtype=torch.float64) + torch.eye(256, dtype=torch.float64) * 16
spd = m @ m.T
ms("inv_256_ms", lambda: torch.linalg.inv(m))
ms("solve_256_ms", lambda: torch.linalg.solve(m, spd))
ms("cholesky_256_ms", lambda: torch.linalg.cholesky(spd))
ms("eigh_256_ms", lambda: torch.linalg.eigh(spd))
ms("svd_256_ms", lambda: torch.linalg.svd(m))
ms("qr_256_ms", lambda: torch.linalg.qr(m))
print(json.dumps(out))
