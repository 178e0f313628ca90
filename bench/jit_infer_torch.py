"""PyTorch 1.13's side of bench/jit_infer.lua: batch-1 inference of the MLP
recipe's model (784-256-128-10) as a torch.jit.trace'd module, frozen and
optimized for inference (torch.jit.freeze, torch.jit.optimize_for_inference)
where that is faster, under torch.no_grad, threads as given. Prints JSON
{"us_per_call": ..., "form": ...}: the fastest form's time.
    OMP_NUM_THREADS=2 /usr/bin/python3 bench/jit_infer_torch.py [iters] [threads]
"""
import json, sys
import torch
from torch_steps import mean_no_grad

iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
if len(sys.argv) > 2:
    torch.set_num_threads(int(sys.argv[2]))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
x = torch.ones(1, 784)


def timed(fn):
    """us per call of fn(x), the mean of iters calls after iters // 10 + 10"""
    return mean_no_grad(fn, x, iters, iters // 10 + 10) * 1e6


with torch.no_grad():
    traced = torch.jit.trace(model, x)
    frozen = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(model, x)))
forms = {"jit_trace": timed(traced), "jit_freeze_optimize": timed(frozen)}
best = min(forms, key=forms.get)
print(json.dumps({"us_per_call": forms[best], "form": best, "forms": forms, "threads": torch.get_num_threads()}))
