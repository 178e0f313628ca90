"""PyTorch's side of bench/gpu_steps.lua: one training step of each recipe on
one device, on synthetic batches of the recipes' shapes (the step's time does
not depend on the values, and the lent GPU machines have no data sets).

    python3 bench/gpu_steps_torch.py RECIPE DEVICE ITERS [THREADS]

RECIPE: mlp (784-256-128-10, SGD with momentum, batch 128) or cnn (two 5x5
convolutions with ReLU and max-pooling, linear, Adam, batch 64), the recipes
of bench/torch_ref.py. Eager mode, float32, no TF32 (as ember by default).
Prints one JSON line: median seconds per step over ITERS timed steps, after
warm-up steps that let cuDNN and the caching allocator settle.
"""
import json, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F


def recipe(name):
    if name == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                              nn.Linear(128, 10))
        return model, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 128
    if name == "cnn":
        model = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(1568, 10))
        return model, lambda p: torch.optim.Adam(p, lr=1e-3), 64
    raise SystemExit("unknown recipe " + name)


def main():
    name, device, iters = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if len(sys.argv) > 4:
        torch.set_num_threads(int(sys.argv[4]))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model, make_opt, batch = recipe(name)
    model.to(device)
    opt = make_opt(model.parameters())
    x = torch.rand(batch, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    sync()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    times.sort()
    print(json.dumps({"recipe": name, "device": device, "seconds_per_step": times[len(times) // 2],
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
