"""How fast the simulator runs the engine: stock Numba simulator, minigpu's checked path, its
compiled path (``MINIGPU_SIM_FAST=always``) compiling its kernels, the same in a second process
that loads them from the disk cache (``cached``), the default policy a new user meets
(``auto``: a fresh process, an empty cache of its own), and the NumPy backend
(``device="cpu"``), same run.

Each (path, work) pair runs in its own process (the stock simulator is chosen at import), with a
wall-clock cap: a pair that does not finish within ``--cap`` seconds prints ``> cap``. The
checked and stock paths skip matmul 512^3 outright (64 times the work of 128^3, which already
takes them tens of seconds). Times: the first call (for the compiled path, this includes
compiling the kernels) and the best of the next ``--repeat`` calls. A plain Python loop doing
the same arithmetic is measured for the small works, as a reference that moves with the
machine's load.

With ``--counters`` every call runs inside ``minigpu.cuda.counters()`` (the stock simulator has
none): the time of measuring the work, and below each path what it counted (launches, global
sectors, shared-memory wavefronts, barriers), which must be the same on every path.

    python benchmarks/simulator_speed.py [--cap 300] [--repeat 2] [--only matmul128 map1M ...]
        [--paths stock checked fast cached numpy] [--counters]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

WORKS = ["matmul128", "matmul512", "map1M", "sum1M", "mapsum1M", "conv2d", "lstm_step", "lenet_step",
         "vae_step"]
PATHS = ["stock", "checked", "fast", "cached", "auto", "numpy"]
SLOW_SKIP = {("stock", "matmul512"), ("checked", "matmul512")}


def _work(name, mg, device):
    """A function running one piece of work on ``device`` (its result as NumPy)."""
    rng = np.random.default_rng(0)
    if name.startswith("matmul"):
        n = int(name[len("matmul"):])
        a = mg.tensor(rng.standard_normal((n, n)).astype(np.float32), device=device)
        b = mg.tensor(rng.standard_normal((n, n)).astype(np.float32), device=device)
        return lambda: (a @ b).numpy()
    if name in ("map1M", "sum1M", "mapsum1M"):
        x = mg.tensor(rng.standard_normal(1 << 20).astype(np.float32), device=device)
        if name == "map1M":
            return lambda: ((x.relu() + 1) * 0.5).numpy()
        if name == "mapsum1M":
            return lambda: ((x.relu() + 1) * 0.5).sum().numpy()
        return lambda: x.sum().numpy()
    if name == "conv2d":   # LeNet's second convolution at batch 64, forward
        conv = mg.nn.Conv2d(6, 16, 5).to(device)
        x = mg.tensor(rng.standard_normal((64, 6, 14, 14)).astype(np.float32), device=device)
        return lambda: conv(x).detach().numpy()
    if name == "lstm_step":   # one LSTM layer over 35 steps, batch 20, 200 wide: forward+backward
        lstm = mg.nn.LSTM(200, 200).to(device)
        x = mg.tensor(rng.standard_normal((35, 20, 200)).astype(np.float32), device=device)

        def lstm_step():
            lstm.zero_grad()
            out, _ = lstm(x)
            out.sum().backward()
            return out.detach().numpy()
        return lstm_step
    if name == "lenet_step":
        nn = mg.nn
        model = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, 10)).to(device)
        opt = mg.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        images = mg.tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32),
                           device=device)
        labels = mg.tensor(rng.integers(0, 10, 64), device=device)

        def step():
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            opt.step()
            return loss.detach().numpy()
        return step
    if name == "vae_step":
        return _vae_step(mg, device, rng)
    raise ValueError(name)


def _vae_step(mg, device, rng):
    """One Adam step of the VAE of PyTorch's examples (784 -> 400 -> 20 -> 400 -> 784, batch
    128, BCE + KL divergence)."""
    nn, F = mg.nn, mg.nn.functional
    fc1, fc21, fc22 = nn.Linear(784, 400), nn.Linear(400, 20), nn.Linear(400, 20)
    fc3, fc4 = nn.Linear(20, 400), nn.Linear(400, 784)
    model = nn.ModuleList([fc1, fc21, fc22, fc3, fc4]).to(device)
    opt = mg.optim.Adam(model.parameters(), lr=1e-3)
    x = mg.tensor(rng.random((128, 784)).astype(np.float32), device=device)
    eps = mg.tensor(rng.standard_normal((128, 20)).astype(np.float32), device=device)

    def step():
        opt.zero_grad()
        h = F.relu(fc1(x))
        mu, logvar = fc21(h), fc22(h)
        z = mu + eps * mg.exp(0.5 * logvar)
        recon = mg.sigmoid(fc4(F.relu(fc3(z))))
        loss = F.binary_cross_entropy(recon, x, reduction="sum") \
            - 0.5 * mg.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss.backward()
        opt.step()
        return loss.detach().numpy()
    return step


def _python_loop(name):
    """The same arithmetic as a plain Python loop (seconds), or None."""
    import random
    if name == "matmul128":
        n = 128
        a = [[random.random() for _ in range(n)] for _ in range(n)]
        b = [[random.random() for _ in range(n)] for _ in range(n)]
        start = time.perf_counter()
        for i in range(n):
            ai = a[i]
            for j in range(n):
                s = 0.0
                for k in range(n):
                    s += ai[k] * b[k][j]
        return time.perf_counter() - start
    if name in ("map1M", "sum1M", "mapsum1M"):
        x = [random.random() - 0.5 for _ in range(1 << 20)]
        start = time.perf_counter()
        if name == "map1M":
            [(v if v > 0 else 0.0) + 1 for v in x]
        elif name == "mapsum1M":
            s = 0.0
            for v in x:
                s += ((v if v > 0 else 0.0) + 1) * 0.5
        else:
            s = 0.0
            for v in x:
                s += v
        return time.perf_counter() - start
    return None


def _counted(run, mg, counted):
    """``run`` inside the counters; ``counted`` gets the last call's totals."""
    from minigpu.simulator.counters import total

    def counted_run():
        with mg.cuda.counters() as launches:
            run()
        m = total(launches).metrics
        counted["counted"] = (f"{len(launches)} launches, "
                              f"{m['global_load_sectors'] + m['global_store_sectors']} sectors, "
                              f"{m['shared_load_wavefronts'] + m['shared_store_wavefronts']} "
                              f"wavefronts, {m['barriers']} barriers")
    return counted_run


def child(path, name, repeat, counting):
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    if path == "stock":
        os.environ["MINIGPU_STOCK_SIMULATOR"] = "1"
    os.environ["MINIGPU_SIM_FAST"] = {"fast": "always", "cached": "always", "auto": "auto"}.get(
        path, "0")
    import minigpu as mg
    run = _work(name, mg, "cpu" if path == "numpy" else "cuda")
    counted = {}
    if counting:
        run = _counted(run, mg, counted)
    start = time.perf_counter()
    run()
    first = time.perf_counter() - start
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        t = time.perf_counter() - start
        best = t if best is None else min(best, t)
    taken = {}
    if path in ("fast", "cached", "auto"):
        from minigpu.simulator import compiled
        for kernel, counts in compiled.STATS.items():
            for how, k in counts.items():
                taken[f"{kernel.split('.')[0]}: {how}"] = k
    print(json.dumps({"first": first, "best": best, "paths": taken, **counted}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cap", type=float, default=300.0, help="seconds per (path, work)")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--only", nargs="*", default=WORKS, choices=WORKS)
    p.add_argument("--paths", nargs="*", default=PATHS, choices=PATHS)
    p.add_argument("--counters", action="store_true",
                   help="run every call under minigpu.cuda.counters()")
    p.add_argument("--child", nargs=2, metavar=("PATH", "WORK"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(*args.child, args.repeat, args.counters)
    paths = [q for q in args.paths
             if not (args.counters and q in ("stock", "numpy"))]   # nothing to count there
    print(f"cap {args.cap:.0f} s per (path, work); first call / best of {args.repeat} more, "
          "seconds; 'x checked' = checked path's best / this path's best"
          + ("; every call under minigpu.cuda.counters()" if args.counters else ""))
    for name in args.only:
        # "fast" compiles into an empty cache of this work's own; "cached" is the next process,
        # loading from it; "auto" starts from an empty cache of its own
        os.environ["MINIGPU_SIM_CACHE"] = tempfile.mkdtemp(prefix="minigpu-bench-cache-")
        loop = _python_loop(name)
        rows = {}
        for path in paths:
            if path == "auto":
                os.environ["MINIGPU_SIM_CACHE"] = tempfile.mkdtemp(prefix="minigpu-bench-cache-")
            if (path, name) in SLOW_SKIP:
                rows[path] = "skipped (64x the 128^3 work)"
                continue
            try:
                out = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--child", path, name,
                     "--repeat", str(args.repeat)] + (["--counters"] if args.counters else []),
                    capture_output=True, text=True, timeout=args.cap)
            except subprocess.TimeoutExpired:
                rows[path] = f"> {args.cap:.0f} s (cap)"
                continue
            if out.returncode:
                rows[path] = "failed: " + (out.stderr.strip().splitlines() or ["?"])[-1]
                continue
            rows[path] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"\n{name}" + (f"  (plain Python loop, same arithmetic: {loop:.3f} s)"
                             if loop is not None else ""))
        ref = rows.get("checked")
        for path, r in rows.items():
            if isinstance(r, str):
                print(f"  {path:8s} {r}")
                continue
            ratio = ""
            if isinstance(ref, dict) and r["best"] and path != "checked":
                ratio = f"  {ref['best'] / r['best']:8.1f}x checked"
            vs_loop = f"  {r['best'] / loop:8.2f}x the loop" if loop else ""
            print(f"  {path:8s} first {r['first']:9.3f}  best {r['best']:9.3f}{ratio}{vs_loop}")
            for how, k in sorted(r["paths"].items()):
                print(f"           {k:3d} x {how}")
            if "counted" in r:
                print(f"           counted: {r['counted']}")


if __name__ == "__main__":
    main()
