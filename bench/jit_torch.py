"""PyTorch 1.13's side of bench/jit_tiny.lua and bench/jit_mlp.lua: one
round of eager steps, printed as JSON {"seconds_per_step": s}.
    tiny: y = ((a * b) + a).sum(); y.backward() over 4-element a and b
          (the gradients accumulate), 20000 steps
    mlp:  the MLP recipe's training step (784-256-128-10, batch 128,
          cross-entropy, SGD with momentum 0.9, zero_grad), 40 steps
Run with ember's threads: OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive
    /usr/bin/python3 bench/jit_torch.py tiny|mlp
"""
import json, sys, time
import torch

mode = sys.argv[1] if len(sys.argv) > 1 else "tiny"
torch.manual_seed(0)
if mode == "tiny":
    a = torch.rand(4, requires_grad=True)
    b = torch.rand(4, requires_grad=True)

    def step():
        ((a * b) + a).sum().backward()
    n = 20000
else:
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xs = [torch.rand(128, 1, 28, 28) for _ in range(16)]
    ys = [torch.randint(0, 10, (128,)) for _ in range(16)]
    k = [0]

    def step():
        k[0] = (k[0] + 1) % 16
        loss = torch.nn.functional.cross_entropy(model(xs[k[0]]), ys[k[0]])
        loss.backward()
        opt.step()
        opt.zero_grad()
    n = 40
for _ in range(max(n // 10, 5)):
    step()
t0 = time.perf_counter()
for _ in range(n):
    step()
print(json.dumps({"seconds_per_step": (time.perf_counter() - t0) / n, "threads": torch.get_num_threads()}))
