"""PyTorch 1.13's side of bench/tidy.lua: CPU µs per call of a 1e4-element
float32 add and of a 1e6-element relu (results dropped; CPython frees them at
once) and of the tiny
((a * b) + a).sum(), without and with backward, as JSON. Run by tidy.lua
once per round: /usr/bin/python3 bench/tidy_torch.py N"""
import json, sys, time
import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
a, b = torch.rand(10000), torch.rand(10000)
big = torch.randn(1000000)
x, y = torch.rand(4), torch.rand(4)
gx, gy = torch.rand(4, requires_grad=True), torch.rand(4, requires_grad=True)


def add():
    for _ in range(n):
        a + b


def relu():
    for _ in range(n // 30):
        big.relu()


def tiny():
    for _ in range(n):
        ((x * y) + x).sum()


def tiny_step():
    for _ in range(n):
        ((gx * gy) + gx).sum().backward()


out = {}
for name, fn, calls in (("add 1e4", add, n), ("relu 1e6", relu, n // 30), ("tiny", tiny, n),
                        ("tiny step with backward", tiny_step, n)):
    fn()
    t0 = time.process_time()
    fn()
    out[name] = (time.process_time() - t0) / calls * 1e6
print(json.dumps(out))
