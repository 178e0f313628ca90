"""PyTorch's side of bench/index_ops.lua: the same calls, ms per call
(medians of 7 rounds), indices 0-based. Run with ember's threads:
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/index_ops_torch.py
"""
import json

import torch
from torch_steps import ms_table
import torch.nn.functional as F

out, ms = ms_table("torch_index_ops")


torch.manual_seed(0)
x = torch.randn(4096, 1024)
i2 = torch.randint(0, 1024, (4096, 1024))
i1 = torch.randint(0, 4096, (4096, 1024))
ms("gather_dim2_ms", lambda: x.gather(1, i2))
ms("gather_dim1_ms", lambda: x.gather(0, i1))
# (no gather_dim2_int32_ms: PyTorch 1.13's gather takes int64 indices only)
logits = torch.randn(4096, 1000)
labels = torch.randint(0, 1000, (4096, 1))
ms("gather_labels_ms", lambda: logits.gather(1, labels), 50)
w = torch.randn(30000, 256)
rows = torch.randint(0, 30000, (4096,))
ms("index_select_rows_ms", lambda: w.index_select(0, rows))
cols = torch.randint(0, 1024, (1024,))
ms("index_select_cols_ms", lambda: x.index_select(1, cols))
tok = torch.randint(0, 30000, (32, 128))
ms("embedding_fwd_ms", lambda: F.embedding(tok, w))
wg = w.clone().requires_grad_()


def fwd_bwd():
    F.embedding(tok, wg).sum().backward()
    wg.grad = None


ms("embedding_fwd_bwd_ms", fwd_bwd)
base = torch.zeros(4096, 1024)
ms("scatter_add_dim2_ms", lambda: base.scatter_add(1, i2, x))
ms("scatter_add_dim1_ms", lambda: base.scatter_add(0, i1, x))
print(json.dumps(out))
