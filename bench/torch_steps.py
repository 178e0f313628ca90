"""What the PyTorch sides of the step benchmarks share: time `step` over
`iters` calls after one warm-up and print the JSON line the Lua side reads
(bench/common.lua, against_torch)."""
import json, os, time
import torch


def report_steps(step, iters):
    step()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    print(json.dumps({"seconds_per_step": (time.perf_counter() - t0) / iters, "threads": torch.get_num_threads(),
                      "openblas_core": os.environ.get("OPENBLAS_CORETYPE", "auto")}))


def median_ms(fn, iters=5):
    """ms per call of fn: the median of 7 rounds of iters calls, after one."""
    fn()
    t = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        t.append((time.perf_counter() - t0) / iters)
    t.sort()
    return t[3] * 1e3


def ms_table(bench):
    """A bench's JSON table and its timer: ms(name, fn, iters=5) stores
    median_ms(fn, iters) under name."""
    out = {"bench": bench, "threads": torch.get_num_threads()}

    def ms(name, fn, iters=5):
        out[name] = median_ms(fn, iters)
    return out, ms
