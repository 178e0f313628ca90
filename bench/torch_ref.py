"""PyTorch reference for bench/train_mlp.lua and bench/train_cnn.lua.

The same recipes as issue 5, on Debian's python3-torch, so that ember and
PyTorch are measured on one machine with one BLAS core type:
    /usr/bin/python3 bench/torch_ref.py mlp|cnn [epochs [seed [channels_last]]]
Prints one JSON line with the keys of the ember benchmarks. channels_last
runs the CNN's model and batches in torch.channels_last (NHWC), which its
oneDNN convolutions take without reordering: PyTorch's fastest form of the
recipe here (with OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1; the MLP is
fastest with OMP_WAIT_POLICY=passive and OpenBLAS's own 2 threads). The data is read
from the Debian package dataset-fashion-mnist (no torchvision needed).
"""
import gzip, json, os, resource, sys, time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist


def idx(name):
    path = os.path.join(ROOT, name)
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split):
    prefix = "train" if split == "train" else "t10k"
    x = torch.from_numpy(idx(prefix + "-images-idx3-ubyte.gz").astype(np.float32) / 255.0)
    y = torch.from_numpy(idx(prefix + "-labels-idx1-ubyte.gz").astype(np.int64))
    return x.reshape(-1, 1, 28, 28), y


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        correct = sum((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
                      for i in range(0, len(x), 1000))
    model.train()
    return correct / len(x)


def main():
    which = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else (3 if which == "mlp" else 1)
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    channels_last = len(sys.argv) > 4 and sys.argv[4] == "channels_last"
    torch.manual_seed(seed)
    xtr, ytr = load("train")
    xte, yte = load("test")
    if which == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                              nn.Linear(128, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        batch = 128
    else:
        model = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(1568, 10))
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        batch = 64
    times, acc = [], []
    for _ in range(epochs):
        t0 = time.perf_counter()
        perm = torch.randperm(len(xtr))
        for i in range(0, len(xtr), batch):
            j = perm[i:i + batch]
            x = xtr[j]
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            loss = F.cross_entropy(model(x), ytr[j])
            opt.zero_grad()
            loss.backward()
            opt.step()
        times.append(time.perf_counter() - t0)
        acc.append(accuracy(model, xte, yte))
    med = sorted(times)[len(times) // 2]
    print(json.dumps({
        "bench": "torch_" + which, "epochs": epochs, "seconds_per_epoch": med,
        "samples_per_s": len(xtr) / med, "test_accuracy_epoch1": acc[0], "test_accuracy_last": acc[-1],
        "epoch_seconds": times,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seed": seed, "threads": torch.get_num_threads(), "openblas_core": os.environ.get("OPENBLAS_CORETYPE", "auto"),
        "channels_last": channels_last,
    }))


if __name__ == "__main__":
    main()
