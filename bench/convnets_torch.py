"""PyTorch's side of bench/convnets.lua: the same four cases, timed the same
way, in PyTorch 1.13's fastest CPU form (channels_last model and input
unless told "nchw"). Run by bench/convnets.lua once per round, alternating
with ember:
    /usr/bin/python3 bench/convnets_torch.py CASE ITERS THREADS [channels_last|nchw [bfloat16|float32 [memory]]]
CASE is resnet18_train, mobilenetv2_train, resnet18_infer or
mobilenetv2_infer (bench/convnets.lua says what each is). Prints one JSON
line: seconds per step over ITERS steps (after one warm-up). With
bfloat16, the forward (and loss) under torch.autocast("cpu", bfloat16).
With memory, a second line: the process's resident set before the first
step (model and input made) and its peak (VmHWM) after the steps, in MB;
their difference is what the steps took at most (bench/convnets.lua's
"memory" mode measures ember's side the same way, each in a fresh process).
"""
import contextlib
import json
import sys

import torch
from torch import nn
from torch_steps import report_steps

sys.path.insert(0, "spec/fixtures/zoo")
import gen  # noqa: E402  (the zoo's ResNet18; importing it writes nothing)

torch.set_default_dtype(torch.float32)   # gen sets float64 for the fixtures

# MobileNetV2 (Sandler et al. 2018, torchvision's layout): expansion t,
# channels c, repeats n, first stride s
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def conv_bn(cin, cout, k, stride=1, groups=1, act=True):
    layers = [nn.Conv2d(cin, cout, k, stride=stride, padding=(k - 1) // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    if act:
        layers.append(nn.ReLU6())
    return layers


class InvertedResidual(gen.InvertedResidual):
    """gen.py's inverted residual (its forward: the block, plus x where use_res) in torchvision's layout"""

    def __init__(self, cin, cout, stride, t):
        nn.Module.__init__(self)
        exp = cin * t
        layers = conv_bn(cin, exp, 1) if t != 1 else []
        layers += conv_bn(exp, exp, 3, stride, exp)          # depthwise
        layers += conv_bn(exp, cout, 1, act=False)            # linear projection
        self.block = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout


class MobileNetV2(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        layers, cin = conv_bn(3, 32, 3, 2), 32
        for t, c, n, s in SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += conv_bn(cin, 1280, 1)
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def rss_mb(field):
    """VmRSS or VmHWM of this process in MB"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return -1.0


def main():
    case, iters, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    layout = torch.contiguous_format if len(sys.argv) > 4 and sys.argv[4] == "nchw" else torch.channels_last
    bf16 = len(sys.argv) > 5 and sys.argv[5] == "bfloat16"

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    name, mode = case.split("_")
    model = gen.ResNet18(64, 10) if name == "resnet18" else MobileNetV2(10)
    model = model.to(memory_format=layout)
    batch = 32 if mode == "train" else 1
    x = torch.randn(batch, 3, 32, 32).contiguous(memory_format=layout)
    if mode == "train":
        labels = torch.randint(0, 10, (batch,))
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step():
            opt.zero_grad()
            with autocast():
                loss = nn.functional.cross_entropy(model(x), labels)
            loss.backward()
            opt.step()
    else:
        model.eval()

        def step():
            with torch.no_grad(), autocast():
                model(x)
    memory = len(sys.argv) > 6 and sys.argv[6] == "memory"
    before = rss_mb("VmRSS")
    report_steps(step, iters)
    if memory:
        print(json.dumps({"rss_before_mb": before, "peak_rss_mb": rss_mb("VmHWM")}))


if __name__ == "__main__":   # bench/convnets_plan_torch.py imports the models
    main()
