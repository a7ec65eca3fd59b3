"""Reference libraries timed beside minigpu's kernels: PyTorch (cuBLAS/cuDNN, TF32 off) or
CuPy, on a real GPU only. Each reference builds the same work as a suite row and times it with
its own CUDA events; ``reference()`` picks the first one importable (None under the simulator).
"""
from __future__ import annotations

import statistics

from .. import backends


class TorchReference:
    """The same work in PyTorch (cuBLAS/cuDNN), TF32 off, timed with torch's CUDA events."""

    name = "torch"

    def __init__(self, torch):
        self.t = torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        self.dev = torch.device("cuda")

    def _rand(self, *shape):
        return self.t.rand(*shape, device=self.dev)

    def time(self, fn, warmup, repeat):
        t = self.t
        for _ in range(max(warmup, 1)):
            fn()
        t.cuda.synchronize()
        times = []
        for _ in range(repeat):
            start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    def matmul(self, M, N, K):
        a, b = self._rand(M, K), self._rand(K, N)
        return "torch.mm (cuBLAS, TF32 off)", lambda: self.t.mm(a, b)

    def unary(self, op, n):
        x = self._rand(n)
        fn = {"sum": lambda: x.sum(), "relu": lambda: self.t.relu(x)}[op]
        return f"torch.{op}", fn

    def rowsum(self, R, C):
        x = self._rand(R, C)
        return "torch.sum(dim=1)", lambda: x.sum(1)

    def binary(self, op, n):
        x, y = self._rand(n), self._rand(n)
        return "torch.add", lambda: x + y

    def transpose(self, R, C):
        x = self._rand(R, C)
        return "torch .t().contiguous()", lambda: x.t().contiguous()

    def softmax(self, R, C):
        x = self._rand(R, C)
        return "torch.softmax", lambda: self.t.softmax(x, 1)

    def attention(self, B, n, E):
        q, k, v = (self._rand(1, B, n, E) for _ in range(3))
        sdpa = self.t.nn.functional.scaled_dot_product_attention
        return "torch SDPA (flash / memory-efficient)", lambda: sdpa(q, k, v)

    def _step(self, model, x, y):
        nn = self.t.nn
        opt = self.t.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()

        def step():
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return step

    def mlp_step(self, sizes, batch):
        nn = self.t.nn
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        model = nn.Sequential(*layers).to(self.dev)
        x = self.t.randn(batch, sizes[0], device=self.dev)
        y = self.t.randint(0, sizes[-1], (batch,), device=self.dev)
        return "torch MLP step", self._step(model, x, y)

    def lenet_step(self, side, batch):
        nn = self.t.nn
        model = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(6, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
            nn.Linear(16 * (side // 4) ** 2, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, 10)).to(self.dev)
        x = self.t.randn(batch, 1, side, side, device=self.dev)
        y = self.t.randint(0, 10, (batch,), device=self.dev)
        return "torch LeNet-5 step (cuDNN, TF32 off)", self._step(model, x, y)


class CupyReference(TorchReference):
    """The same work in CuPy (cuBLAS; CuPy uses TF32 only when CUPY_TF32=1)."""

    name = "cupy"

    def __init__(self, cp):
        self.t = None
        self.cp = cp

    def _rand(self, *shape):
        return self.cp.random.random(shape, dtype=self.cp.float32)

    def time(self, fn, warmup, repeat):
        cp = self.cp
        for _ in range(max(warmup, 1)):
            fn()
        cp.cuda.Device().synchronize()
        times = []
        for _ in range(repeat):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end))
        return statistics.median(times)

    def matmul(self, M, N, K):
        a, b = self._rand(M, K), self._rand(K, N)
        return "cupy.matmul (cuBLAS)", lambda: a @ b

    def unary(self, op, n):
        x = self._rand(n)
        fn = {"sum": lambda: x.sum(), "relu": lambda: self.cp.maximum(x, 0)}[op]
        return f"cupy.{op}", fn

    def rowsum(self, R, C):
        x = self._rand(R, C)
        return "cupy.sum(axis=1)", lambda: x.sum(1)

    def binary(self, op, n):
        x, y = self._rand(n), self._rand(n)
        return "cupy.add", lambda: x + y

    def transpose(self, R, C):
        x = self._rand(R, C)
        return "cupy.ascontiguousarray(x.T)", lambda: self.cp.ascontiguousarray(x.T)

    def softmax(self, R, C):
        x = self._rand(R, C)
        cp = self.cp

        def softmax():
            e = cp.exp(x - x.max(1, keepdims=True))
            return e / e.sum(1, keepdims=True)
        return "cupy softmax (4 kernels)", softmax

    def attention(self, B, n, E):
        return None

    def mlp_step(self, sizes, batch):
        return None

    def lenet_step(self, side, batch):
        return None


_REF_CACHE: dict = {}


def reference():
    """A PyTorch (or CuPy) reference on a real GPU, or None (simulator, or neither installed)."""
    if "ref" in _REF_CACHE:
        return _REF_CACHE["ref"]
    ref = None
    device = backends.cuda_module("device")

    if not device.SIMULATOR:
        try:
            import torch

            if torch.cuda.is_available():
                ref = TorchReference(torch)
        except Exception:
            ref = None
        if ref is None:
            try:
                import cupy

                cupy.cuda.runtime.getDeviceCount()
                ref = CupyReference(cupy)
            except Exception:
                ref = None
    _REF_CACHE["ref"] = ref
    return ref
