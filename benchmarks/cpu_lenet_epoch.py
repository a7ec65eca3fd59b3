"""One training epoch of LeNet-5 on the cpu device: minigpu vs plain NumPy-im2col vs PyTorch.

    python benchmarks/cpu_lenet_epoch.py [--images 1000] [--batch 50] [--size 28]
                                         [--torch-threads N]

Random digit-sized data (1x28x28 images, 10 classes; no dataset download), the same initial
weights for all three, SGD(lr=0.01, momentum=0.9), CrossEntropyLoss. The NumPy reference below
is what minigpu's cpu backend does without the framework: im2col + GEMM convolutions, argmax
max-pooling, hand-written backward passes. The ratio minigpu / NumPy is the cost of the Tensor,
autograd and op layers; minigpu / PyTorch compares with a production CPU engine (oneDNN,
several threads). The first-batch losses are printed so the three can be seen to agree.

For a steady single-thread comparison on a shared machine, pin every BLAS and PyTorch::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
        python benchmarks/cpu_lenet_epoch.py --torch-threads 1
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from numpy.lib.stride_tricks import as_strided


# --- the network, as (name, shape) of its parameters in PyTorch order ---------------------------
def lenet_shapes(size):
    s = ((size + 4 - 4) // 2 - 4) // 2  # conv5 pad 2 -> pool 2 -> conv5 -> pool 2
    return [("c1.w", (6, 1, 5, 5)), ("c1.b", (6,)), ("c2.w", (16, 6, 5, 5)), ("c2.b", (16,)),
            ("f1.w", (120, 16 * s * s)), ("f1.b", (120,)), ("f2.w", (84, 120)), ("f2.b", (84,)),
            ("f3.w", (10, 84)), ("f3.b", (10,))]


def initial_weights(size, seed=0):
    """PyTorch's default init distribution, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), in float32;
    a bias uses the fan-in of its layer's weight."""
    rng = np.random.default_rng(seed)
    out, bound = {}, None
    for name, shape in lenet_shapes(size):
        if name.endswith(".w"):
            bound = 1 / np.sqrt(np.prod(shape[1:]))
        out[name] = rng.uniform(-bound, bound, shape).astype(np.float32)
    return out


# --- NumPy reference ------------------------------------------------------------------------------
def im2col(x, k, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, w = x.shape
    oh, ow = h - k + 1, w - k + 1
    s = x.strides
    win = as_strided(x, (n, c, k, k, oh, ow), (s[0], s[1], s[2], s[3], s[2], s[3]))
    return win.reshape(n, c * k * k, oh * ow), (oh, ow)


def col2im(cols, x_shape, k, pad):
    n, c, h, w = x_shape
    hp, wp = h + 2 * pad, w + 2 * pad
    oh, ow = hp - k + 1, wp - k + 1
    cols = cols.reshape(n, c, k, k, oh, ow)
    out = np.zeros((n, c, hp, wp), dtype=cols.dtype)
    for i in range(k):
        for j in range(k):
            out[:, :, i:i + oh, j:j + ow] += cols[:, :, i, j]
    return out[:, :, pad:pad + h, pad:pad + w]


def conv_forward(x, w, b, pad):
    cols, (oh, ow) = im2col(x, w.shape[2], pad)
    out = np.matmul(w.reshape(w.shape[0], -1), cols) + b[None, :, None]
    return out.reshape(x.shape[0], w.shape[0], oh, ow), cols


def conv_backward(g, x_shape, w, cols, pad):
    g = g.reshape(g.shape[0], g.shape[1], -1)
    gw = np.matmul(g, cols.transpose(0, 2, 1)).sum(0).reshape(w.shape)
    gcols = np.matmul(w.reshape(w.shape[0], -1).T, g)
    return col2im(gcols, x_shape, w.shape[2], pad), gw, g.sum(axis=(0, 2))


def pool_forward(x):
    """2x2/2 max pooling: the window as a last axis of 4, its argmax kept for backward."""
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
    win = win.reshape(n, c, h // 2, w // 2, 4)
    k = win.argmax(-1)
    return np.take_along_axis(win, k[..., None], -1)[..., 0], k


def pool_backward(g, k):
    n, c, h2, w2 = g.shape
    d = np.zeros((n, c, h2, w2, 4), dtype=g.dtype)
    np.put_along_axis(d, k[..., None], g[..., None], -1)
    return d.reshape(n, c, h2, w2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, 2 * h2,
                                                                             2 * w2)


class NumpyLeNet:
    def __init__(self, weights, lr, momentum):
        self.p = {k: v.copy() for k, v in weights.items()}
        self.buf = {}
        self.lr, self.momentum = lr, momentum

    def step(self, x, y):
        p = self.p
        a1, cols1 = conv_forward(x, p["c1.w"], p["c1.b"], 2)
        r1 = np.maximum(a1, 0)
        p1, m1 = pool_forward(r1)
        a2, cols2 = conv_forward(p1, p["c2.w"], p["c2.b"], 0)
        r2 = np.maximum(a2, 0)
        p2, m2 = pool_forward(r2)
        f0 = p2.reshape(len(x), -1)
        h1 = np.maximum(f0 @ p["f1.w"].T + p["f1.b"], 0)
        h2 = np.maximum(h1 @ p["f2.w"].T + p["f2.b"], 0)
        logits = h2 @ p["f3.w"].T + p["f3.b"]
        shifted = logits - logits.max(1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
        n = len(x)
        loss = -logp[np.arange(n), y].mean()
        g = np.exp(logp)
        g[np.arange(n), y] -= 1
        g /= n
        grads = {"f3.w": g.T @ h2, "f3.b": g.sum(0)}
        g = (g @ p["f3.w"]) * (h2 > 0)
        grads.update({"f2.w": g.T @ h1, "f2.b": g.sum(0)})
        g = (g @ p["f2.w"]) * (h1 > 0)
        grads.update({"f1.w": g.T @ f0, "f1.b": g.sum(0)})
        g = (g @ p["f1.w"]).reshape(p2.shape)
        g = pool_backward(g, m2) * (a2 > 0)
        g, grads["c2.w"], grads["c2.b"] = conv_backward(g, p1.shape, p["c2.w"], cols2, 0)
        g = pool_backward(g, m1) * (a1 > 0)
        _, grads["c1.w"], grads["c1.b"] = conv_backward(g, x.shape, p["c1.w"], cols1, 2)
        for k, gk in grads.items():  # SGD with momentum, PyTorch's rule
            self.buf[k] = gk if k not in self.buf else self.momentum * self.buf[k] + gk
            p[k] -= self.lr * self.buf[k].astype(np.float32)
        return float(loss)


# --- the same network in minigpu and in PyTorch -------------------------------------------------
def lenet(nn, size):
    s = ((size + 4 - 4) // 2 - 4) // 2
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(16 * s * s, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))


def state_dict_for(weights):
    keys = ["0.weight", "0.bias", "3.weight", "3.bias", "7.weight", "7.bias", "9.weight",
            "9.bias", "11.weight", "11.bias"]
    return dict(zip(keys, weights.values()))


def run_framework(mod, nn, optim, weights, xs, ys, lr, momentum, size, tensor):
    model = lenet(nn, size)
    model.load_state_dict({k: tensor(v) for k, v in state_dict_for(weights).items()})
    opt = optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    criterion = nn.CrossEntropyLoss()
    losses = []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        loss = criterion(model(tensor(x)), tensor(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def timed(fn):
    """(wall seconds, process cpu seconds, result)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--size", type=int, default=28, help="image side (8 for digits)")
    parser.add_argument("--torch-threads", type=int, default=0,
                        help="torch.set_num_threads (0: PyTorch's default)")
    args = parser.parse_args()
    if args.size < 12 and args.size != 8:
        parser.error("--size must be 8 or at least 12")
    size = 16 if args.size == 8 else args.size  # 8x8 digits are padded to 16x16 for LeNet
    rng = np.random.default_rng(0)
    images = rng.standard_normal((args.images, 1, size, size)).astype(np.float32)
    labels = rng.integers(0, 10, args.images)
    steps = args.images // args.batch
    xs = [images[i * args.batch:(i + 1) * args.batch] for i in range(steps)]
    ys = [labels[i * args.batch:(i + 1) * args.batch] for i in range(steps)]
    weights = initial_weights(size)
    lr, momentum = 0.01, 0.9
    print(f"LeNet-5, one epoch: {args.images} images 1x{size}x{size}, batch {args.batch} "
          f"({steps} steps), SGD(lr={lr}, momentum={momentum}), cpu")

    results = {}
    ref = NumpyLeNet(weights, lr, momentum)
    results["numpy-im2col"] = timed(lambda: [ref.step(x, y) for x, y in zip(xs, ys)])

    import minigpu as mg
    from minigpu import nn, optim
    results["minigpu (cpu)"] = timed(lambda: run_framework(
        mg, nn, optim, weights, xs, ys, lr, momentum, size,
        lambda a: mg.tensor(a, device="cpu")))

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        if args.torch_threads:
            torch.set_num_threads(args.torch_threads)
        results[f"pytorch-cpu ({torch.get_num_threads()} threads)"] = timed(
            lambda: run_framework(torch, torch.nn, torch.optim, weights, xs, ys, lr, momentum,
                                  size, torch.tensor))

    base = results["minigpu (cpu)"][0]
    print(f"{'engine':<28} {'wall s':>7} {'cpu s':>7} {'ms/step':>8} {'minigpu/this':>12}  "
          f"first/last loss")
    for name, (wall, cpu, losses) in results.items():
        print(f"{name:<28} {wall:7.3f} {cpu:7.3f} {wall / steps * 1e3:8.2f} "
              f"{base / wall:12.2f}  {losses[0]:.6f} / {losses[-1]:.6f}")
    if any(wall > 1.5 * cpu for wall, cpu, _ in results.values()):
        print("(wall time well above cpu time: other processes took the cores; rerun)")
    if torch is None:
        print("(PyTorch not importable: skipped)")


if __name__ == "__main__":
    main()
