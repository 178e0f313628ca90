"""What the PyTorch sides of the benchmarks share: time `step` over `iters`
calls after one warm-up and print the JSON line the Lua side reads
(bench/common.lua, against_torch); the timers the other sides use."""
import json, os, time
import torch


def report_steps(step, iters):
    step()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    print(json.dumps({"seconds_per_step": (time.perf_counter() - t0) / iters, "threads": torch.get_num_threads(),
                      "openblas_core": os.environ.get("OPENBLAS_CORETYPE", "auto")}))


def median_seconds(fn, iters=5, rounds=7):
    """seconds per call of fn: the median of `rounds` rounds of iters calls, after one."""
    fn()
    t = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        t.append((time.perf_counter() - t0) / iters)
    t.sort()
    return t[rounds // 2]


def median_ms(fn, iters=5):
    """ms per call of fn: the median of 7 rounds of iters calls, after one."""
    return median_seconds(fn, iters) * 1e3


def mean_no_grad(fn, x, iters, warmup):
    """seconds per call of fn(x) under torch.no_grad: the mean over iters
    calls, after warmup calls."""
    with torch.no_grad():
        for _ in range(warmup):
            fn(x)
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(x)
        return (time.perf_counter() - t0) / iters


def ms_table(bench):
    """A bench's JSON table and its timer: ms(name, fn, iters=5) stores
    median_ms(fn, iters) under name."""
    out = {"bench": bench, "threads": torch.get_num_threads()}

    def ms(name, fn, iters=5):
        out[name] = median_ms(fn, iters)
    return out, ms
