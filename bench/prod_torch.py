"""PyTorch's side of bench/prod.lua: the same calls, ms per call (medians
of 7 rounds of 20). Run with ember's threads:
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/prod_torch.py
"""
import json

import torch
from torch_steps import median_ms

out = {"bench": "torch_prod", "threads": torch.get_num_threads()}

torch.manual_seed(0)
for dt in (torch.float32, torch.float64):
    x = torch.randn(1000, 1000, dtype=dt)
    for name, fn in (("rows", lambda: x.prod(1)), ("cols", lambda: x.prod(0)), ("all", lambda: x.prod())):
        out["%s_%s_ms" % (name, str(dt).replace("torch.", ""))] = median_ms(fn, 20)
print(json.dumps(out))
