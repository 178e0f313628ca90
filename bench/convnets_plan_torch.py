"""PyTorch 1.13's side of bench/convnets_plan.lua: batch-1 inference
(1x3x32x32, float32, eval mode, no_grad) of bench/convnets_torch.py's
ResNet-18 and MobileNetV2 in each of PyTorch's forms: eager with the model
and input contiguous (NCHW) and channels_last, torch.jit.trace +
torch.jit.freeze in both layouts, and the frozen module through
torch.jit.optimize_for_inference (which may move convolutions to oneDNN's
layouts). Each form runs `iters` calls after a warm-up of iters // 5 + 3;
prints one JSON line: ms per call of each form and the fastest ("form",
"ms_per_call").
    OMP_NUM_THREADS=N /usr/bin/python3 bench/convnets_plan_torch.py NET ITERS THREADS
NET is resnet18 or mobilenetv2.
"""
import json
import sys

import torch

from convnets_torch import MobileNetV2, gen
from torch_steps import mean_no_grad


def timed(fn, x, iters):
    """ms per call of fn(x), the mean of iters calls after iters // 5 + 3"""
    return mean_no_grad(fn, x, iters, iters // 5 + 3) * 1e3


def main():
    net, iters, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = (gen.ResNet18(64, 10) if net == "resnet18" else MobileNetV2(10)).eval()
    x = torch.randn(1, 3, 32, 32)
    forms = {}
    for layout, name in ((torch.contiguous_format, "nchw"), (torch.channels_last, "channels_last")):
        m, xl = model.to(memory_format=layout), x.contiguous(memory_format=layout)
        forms["eager_" + name] = timed(m, xl, iters)
        with torch.no_grad():
            frozen = torch.jit.freeze(torch.jit.trace(m, xl))
        forms["jit_freeze_" + name] = timed(frozen, xl, iters)
        if layout == torch.contiguous_format:
            with torch.no_grad():
                opt = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(m, xl)))
            forms["jit_freeze_optimize"] = timed(opt, xl, iters)
    best = min(forms, key=forms.get)
    print(json.dumps({"ms_per_call": forms[best], "form": best, "forms": forms, "threads": torch.get_num_threads()}))


main()
