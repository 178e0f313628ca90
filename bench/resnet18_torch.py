"""PyTorch's side of bench/resnet18.lua: one forward + backward (cross-entropy)
of the zoo's ResNet-18 (spec/fixtures/zoo/gen.py) in float32, the step
ember's is, timed the same way. Run by bench/resnet18.lua once per round,
alternating with ember:
    /usr/bin/python3 bench/resnet18_torch.py ITERS THREADS WIDTH CLASSES BATCH SIZE
Prints one JSON line: seconds per step over ITERS steps (after one warm-up).
"""
import sys

import torch
from torch_steps import report_steps

sys.path.insert(0, "spec/fixtures/zoo")
import gen  # noqa: E402  (the zoo's ResNet18; importing it writes nothing)

torch.set_default_dtype(torch.float32)   # gen sets float64 for the fixtures
iters, threads, width, classes, batch, size = (int(a) for a in sys.argv[1:7])
torch.set_num_threads(threads)
torch.manual_seed(0)
model = gen.ResNet18(width, classes)
x, labels = torch.randn(batch, 3, size, size), torch.randint(0, classes, (batch,))


def step():
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(x), labels).backward()


report_steps(step, iters)
