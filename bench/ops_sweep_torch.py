"""PyTorch's side of bench/ops_sweep.lua: one round of the same cases, ms per
call, printed as one JSON object {"case": ms, ...}. PyTorch is made as fast
as it can be here: SWEEP_THREADS threads (ember's count; all cores when
unset), the OpenMP wait policy the caller sets (ops_sweep.lua runs a round with each and keeps the faster), and for
convolutions and pooling the faster of the contiguous and channels_last
layouts. Usage: SWEEP_THREADS=2 /usr/bin/python3 bench/ops_sweep_torch.py [case,case,...]
(SWEEP_CLOCK=cpu: the process's CPU time instead of wall time, as ops_sweep.lua --cpu)
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

TARGET = 0.02   # seconds per timed batch
clock = time.process_time if os.environ.get("SWEEP_CLOCK") == "cpu" else time.perf_counter


def ms_per_call(fn):
    """the fastest of 3 batches sized to take TARGET seconds, after a warm-up"""
    fn()
    t0 = clock()
    fn()
    one = max(clock() - t0, 1e-7)
    iters = max(1, int(TARGET / one))
    best = float("inf")
    for _ in range(3):
        t0 = clock()
        for _ in range(iters):
            fn()
        best = min(best, (clock() - t0) / iters)
    return best * 1e3


def with_backward(f, *xs):
    """a forward and the backward of its sum, gradients for xs"""
    for x in xs:
        x.requires_grad_(True)

    def step():
        for x in xs:
            x.grad = None
        f(*xs).sum().backward()
    return step


def layouts(make):
    """a case made contiguous and made channels_last: main() times both and keeps the faster"""
    return [make(torch.contiguous_format), make(torch.channels_last)]


def cases():
    torch.manual_seed(0)
    r = torch.randn
    c = {}
    for tag, n in (("1e3", 1000), ("1e4", 10000), ("1e6", 1000000)):
        a, b = r(n), r(n)
        c["add " + tag] = lambda a=a, b=b: a + b
        c["mul " + tag] = lambda a=a, b=b: a * b
    a, b = r(2048, 2048), r(2048, 2048)
    c["add 2048x2048"] = lambda: a + b
    c["add transposed 2048x2048"] = lambda: a.t() + b.t()
    row = r(2048)
    c["add row-broadcast 2048x2048"] = lambda: a + row
    x = r(1000000)
    for name, f in (("exp", torch.exp), ("tanh", torch.tanh), ("sigmoid", torch.sigmoid),
                    ("relu", torch.relu), ("gelu", F.gelu)):
        c[name + " 1e6"] = lambda f=f: f(x)
    xs = r(10000)
    c["gelu 1e4"] = lambda: F.gelu(xs)
    c["relu+backward 1e6"] = with_backward(torch.relu, r(1000000))
    c["gelu+backward 1e6"] = with_backward(F.gelu, r(1000000))
    m = r(4096, 1024)
    c["sum all 4096x1024"] = lambda: m.sum()
    c["sum dim1 4096x1024"] = lambda: m.sum(0)
    c["sum dim2 4096x1024"] = lambda: m.sum(1)
    c["mean dim1 64x128x768"] = (lambda t: lambda: t.mean(0))(r(64, 128, 768))
    c["max dim2 4096x1024"] = lambda: m.max(1)
    s = r(256, 1000)
    c["softmax 256x1000"] = lambda: torch.softmax(s, 1)
    c["log_softmax 256x1000"] = lambda: torch.log_softmax(s, 1)
    c["softmax+backward 256x1000"] = with_backward(lambda t: torch.softmax(t, 1), r(256, 1000))
    c["log_softmax+backward 256x1000"] = with_backward(lambda t: torch.log_softmax(t, 1), r(256, 1000))
    ln = r(32, 128, 768)
    c["layer_norm 32x128x768"] = lambda: F.layer_norm(ln, (768,))
    c["layer_norm+backward 32x128x768"] = with_backward(lambda t: F.layer_norm(t, (768,)), r(32, 128, 768))
    for n in (64, 512, 1024):
        p, q = r(n, n), r(n, n)
        c["matmul %d" % n] = lambda p=p, q=q: p @ q
    xl, wl, bl = r(256, 1024), r(1024, 1024), r(1024)
    c["linear 256x1024x1024"] = lambda: F.linear(xl, wl, bl)
    c["linear+backward 256x1024x1024"] = with_backward(F.linear, r(256, 1024), r(1024, 1024), r(1024))

    def conv_case(xshape, wshape, pad, backward):
        def make(fmt):
            x = r(*xshape).contiguous(memory_format=fmt)
            w = r(*wshape).contiguous(memory_format=fmt)
            if backward:
                return with_backward(lambda x, w: F.conv2d(x, w, padding=pad), x, w)
            return lambda: F.conv2d(x, w, padding=pad)
        return layouts(make)
    c["conv2d 8x3x32x32 k3"] = conv_case((8, 3, 32, 32), (16, 3, 3, 3), 1, False)
    c["conv2d 32x64x56x56 k3"] = conv_case((32, 64, 56, 56), (64, 64, 3, 3), 1, False)
    c["conv2d+backward 16x32x28x28 k3"] = conv_case((16, 32, 28, 28), (32, 32, 3, 3), 1, True)

    def pool_case(f, shape, backward=False):
        def make(fmt):
            x = r(*shape).contiguous(memory_format=fmt)
            return with_backward(f, x) if backward else (lambda: f(x))
        return layouts(make)
    big = (32, 64, 56, 56)
    c["max_pool2d 2x2 32x64x56x56"] = pool_case(lambda t: F.max_pool2d(t, 2), big)
    c["max_pool2d 3x3s2 32x64x56x56"] = pool_case(lambda t: F.max_pool2d(t, 3, 2), big)
    c["max_pool2d+backward 3x3s2 32x64x56x56"] = pool_case(lambda t: F.max_pool2d(t, 3, 2), big, True)
    c["avg_pool2d 2x2 32x64x56x56"] = pool_case(lambda t: F.avg_pool2d(t, 2), big)
    c["adaptive_avg_pool2d 32x512x7x7 to 1"] = pool_case(lambda t: F.adaptive_avg_pool2d(t, 1), (32, 512, 7, 7))
    c["adaptive_avg_pool2d+backward 32x512x7x7 to 1"] = pool_case(lambda t: F.adaptive_avg_pool2d(t, 1),
                                                                  (32, 512, 7, 7), True)
    bn = torch.nn.BatchNorm2d(64)
    c["batch_norm train 32x64x56x56"] = pool_case(bn, big)
    g = r(4096, 1024)
    gi = torch.randint(0, 1024, (4096, 1024))
    c["gather dim2 4096x1024"] = lambda: g.gather(1, gi)
    w = r(30000, 256)
    rows = torch.randint(0, 30000, (4096,))
    c["index_select rows 30000x256"] = lambda: w.index_select(0, rows)
    tok = torch.randint(0, 30000, (32, 128))
    c["embedding 32x128 of 30000x256"] = lambda: F.embedding(tok, w)
    logits, labels = r(256, 1000), torch.randint(0, 1000, (256,))
    c["cross_entropy 256x1000"] = lambda: F.cross_entropy(logits, labels)
    c["cross_entropy+backward 256x1000"] = with_backward(lambda t: F.cross_entropy(t, labels), r(256, 1000))
    prm = torch.nn.Parameter(r(1000000))
    prm.grad = r(1000000)
    opt = torch.optim.Adam([prm], lr=1e-3)
    c["adam step 1e6"] = opt.step
    u, v, k = r(64), r(64), r(64)
    c["small chain 64"] = lambda: (u * v + k).relu().sum()
    return c


def main():
    want = sys.argv[1].split(",") if len(sys.argv) > 1 and sys.argv[1] else None
    torch.set_num_threads(int(os.environ.get("SWEEP_THREADS", os.cpu_count())))
    out = {}
    for name, fn in cases().items():
        if want and name not in want:
            continue
        if isinstance(fn, list):
            out[name] = min(ms_per_call(f) for f in fn)
        else:
            out[name] = ms_per_call(fn)
    out["_threads"] = torch.get_num_threads()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
