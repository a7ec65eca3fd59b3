"""Host time per op: minigpu's Python layer against PyTorch eager, measured in the same run.

Small models on a GPU are bound by host time per op (Tensor, autograd, dispatch), not by the
kernels. That layer is shared by both devices, so it is measured here on the cpu device with
4x4 tensors, where the NumPy work is negligible. PyTorch runs on one CPU thread when it is
importable; the geometric mean of the ratios is the number issue-style goals are stated in.

Timing: each workload runs in short rounds (about ``--round-ms`` each), minigpu's and
PyTorch's rounds alternating, and each library's time is its fastest round (``timeit``'s
rule: slower rounds measure other processes, not the code). Alternating matters on a shared
machine, whose speed drifts by tens of percent within seconds: both libraries see the same
drift, so the ratio holds still even when the microseconds do not.

The same workloads then run on ``device="cuda"``, with the kernel launch timed apart:

- host us: the host work of one call up to its kernel launches (Tensor, autograd, dispatch,
  allocation, launch geometry, argument preparation, ``kernel[grid, block, stream]``). Under
  the CUDA simulator every launch is replaced by a counter that runs nothing, so this is the
  whole time of a call (timed with the simulator's sanitizer off: its checks are not part of
  minigpu's host path). On a GPU the launches run, and the time spent inside them is
  subtracted.
- launches: kernel launches per call.
- us/launch: time inside one launch call. On a GPU, numba-cuda's host cost of a launch (type
  dispatch, argument marshalling, cuLaunchKernel); under the simulator, the time to run the
  kernel's threads in Python, which says nothing about a GPU (printed for completeness).

    python benchmarks/host_overhead.py [--rounds 41] [--round-ms 20] [--json PATH] [--no-cuda]
"""
import argparse
import contextlib
import json
import math
import time

import numpy as np
from numba import cuda

import minigpu as mg

SIMULATOR = bool(cuda.config.ENABLE_CUDASIM)

try:
    import torch
except ImportError:
    torch = None


def calls_per_round(fn, round_ms):
    """How many calls of ``fn`` take about ``round_ms`` (at least 1), from a first timed call
    after a warm-up call."""
    fn()
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    return max(1, int(round_ms / 1e3 / max(once, 1e-7)))


def fastest_round_us(fns, sizes, rounds):
    """Per-call microseconds of each callable in ``fns`` (``sizes``: calls per round of
    each): their rounds alternate (so they share the machine's drift), and each keeps its
    fastest round."""
    best = [math.inf] * len(fns)
    for _ in range(rounds):
        for i, (fn, calls) in enumerate(zip(fns, sizes)):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best[i] = min(best[i], (time.perf_counter() - start) / calls * 1e6)
    return best


def workloads(lib, device="cpu"):
    """The four workloads, each a zero-argument callable, written once for both libraries."""
    nn = lib.nn
    rng = np.random.default_rng(0)

    def data(*shape, requires_grad=False):
        values = rng.standard_normal(shape).astype(np.float32)
        return lib.tensor(values, device=device, requires_grad=requires_grad)

    a, b = data(4, 4), data(4, 4)
    ga, gb = data(4, 4, requires_grad=True), data(4, 4, requires_grad=True)
    lib.manual_seed(0)
    linear = nn.Linear(8, 8).to(device)
    x8 = data(4, 8)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                        nn.Linear(16, 1)).to(device)
    adam = lib.optim.Adam(mlp.parameters(), lr=1e-3)
    target = data(4, 1)
    mse = nn.MSELoss()

    def add():
        return a + b

    def chain_backward():
        ((ga * gb).relu() + ga).sum().backward()

    def linear_no_grad():
        with lib.no_grad():
            return linear(x8)

    def mlp_train_step():
        adam.zero_grad()
        mse(mlp(x8), target).backward()
        adam.step()

    return {
        "a + b": add,
        "((a * b).relu() + a).sum().backward()": chain_backward,
        "Linear(8, 8) forward under no_grad": linear_no_grad,
        "3-layer MLP + MSE + Adam train step": mlp_train_step,
    }


class Launches:
    """Counts kernel launches and the time spent inside them (see ``launches``)."""

    def __init__(self):
        self.count, self.seconds = 0, 0.0


@contextlib.contextmanager
def launches(run=True):
    """Instrument the kernel launch: the call that starts a configured kernel, numba-cuda's
    ``_LaunchConfiguration.__call__`` on a GPU, the simulator's ``FakeCUDAKernel.__call__``
    (which runs the kernel's threads). Yields a :class:`Launches`; ``run=False`` counts the
    launches without running them (the simulator's stand-in for an asynchronous launch)."""
    if SIMULATOR:
        from numba.cuda.simulator.kernel import FakeCUDAKernel as launcher
    else:
        from numba.cuda.dispatcher import _LaunchConfiguration as launcher
    original = launcher.__call__
    stats = Launches()

    def call(self, *args):
        if getattr(self, "_device", False):  # a simulated device function, not a launch
            return original(self, *args)
        stats.count += 1
        if not run:
            return None
        start = time.perf_counter()
        try:
            return original(self, *args)
        finally:
            stats.seconds += time.perf_counter() - start

    launcher.__call__ = call
    try:
        yield stats
    finally:
        launcher.__call__ = original


@contextlib.contextmanager
def sanitizer_off():
    """The simulator's sanitizer switched off (``MINIGPU_SIM_CHECKS=0``) for the block: the
    host table measures minigpu's host path, not the simulator's own checks of it (such as
    typing the arguments of every specialized launch, which a GPU does not do)."""
    if not SIMULATOR:
        yield
        return
    from minigpu.simulator import config
    checks, config.CHECKS = config.CHECKS, False
    try:
        yield
    finally:
        config.CHECKS = checks


def cuda_rows(rounds, round_ms, fns=None):
    """The cuda table: host us, launches and us/launch per workload (see the module doc);
    ``fns``: other callables to time so (``graphs_replay.py``: the captured workloads)."""
    rows = []
    for name, fn in (fns or workloads(mg, "cuda")).items():
        fn()  # compile (GPU) and allocate outside the timing
        if SIMULATOR:  # the launch time: one call with its launches run. First, because the
            # counted calls below leave their outputs unwritten (accumulated .grad included)
            with launches(run=True) as timed:
                fn()
        with launches(run=not SIMULATOR) as inside, sanitizer_off():
            calls = calls_per_round(fn, round_ms)
            total = fastest_round_us([fn], [calls], rounds)[0]
        made = calls * rounds + 2  # what calls_per_round and the rounds ran
        if not SIMULATOR:
            timed = inside
        rows.append({"workload": name,
                     "host_us": total - inside.seconds * 1e6 / made,
                     "launches": inside.count / made,
                     "us_per_launch": timed.seconds * 1e6 / max(timed.count, 1)})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=41,
                        help="timing rounds per workload and library (the fastest counts)")
    parser.add_argument("--round-ms", type=float, default=20.0,
                        help="about how long one round runs, in milliseconds")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--no-cuda", action="store_true", help="skip the cuda-device table")
    args = parser.parse_args(argv)

    ours = workloads(mg)
    if torch is not None:
        torch.set_num_threads(1)
        theirs = workloads(torch)
    rows = []
    print(f"{'cpu device':42s} {'minigpu':>10s} {'torch':>10s} {'ratio':>7s}")
    for name, fn in ours.items():
        fns = [fn] if torch is None else [fn, theirs[name]]
        times = fastest_round_us(fns, [calls_per_round(f, args.round_ms) for f in fns],
                                 args.rounds)
        row = {"workload": name, "minigpu_us": times[0]}
        if torch is not None:
            row["torch_us"] = times[1]
            row["ratio"] = row["minigpu_us"] / row["torch_us"]
        rows.append(row)
        ref = (f"{row['torch_us']:8.1f}us {row['ratio']:6.1f}x" if torch is not None
               else f"{'-':>10s} {'-':>7s}")
        print(f"{name:42s} {row['minigpu_us']:8.1f}us {ref}")
    result = {"cpu": rows}
    if torch is not None:
        geo = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
        result["geomean_ratio"] = geo
        print(f"geometric mean of the ratios: {geo:.2f}x (torch {torch.__version__}, 1 thread)")
    else:
        print("torch is not importable: no reference ratios")

    if not args.no_cuda and mg.cuda.is_available():
        where = "simulator: launches counted, not run" if SIMULATOR else "GPU"
        print(f"\n{'cuda device (' + where + ')':42s} {'host':>10s} {'launches':>9s} "
              f"{'us/launch':>10s}")
        result["cuda"] = cuda_rows(args.rounds, args.round_ms)
        result["cuda_simulator"] = bool(SIMULATOR)
        for row in result["cuda"]:
            print(f"{row['workload']:42s} {row['host_us']:8.1f}us {row['launches']:9.0f} "
                  f"{row['us_per_launch']:8.0f}us")
        if SIMULATOR:
            print("host: the host work up to each launch; us/launch: the simulator running the "
                  "kernel's threads, not a GPU's launch cost (numba-cuda's is 5-14 us)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
