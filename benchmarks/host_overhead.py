"""Host time per op: minigpu's Python layer against PyTorch eager, measured in the same run.

Small models on a GPU are bound by host time per op (Tensor, autograd, dispatch), not by the
kernels. That layer is shared by both devices, so it is measured here on the cpu device with
4x4 tensors, where the NumPy work is negligible. PyTorch runs on one CPU thread when it is
importable; the geometric mean of the ratios is the number issue-style goals are stated in.

    python benchmarks/host_overhead.py [--repeat 2000] [--json PATH]
"""
import argparse
import json
import math
import time

import numpy as np

import minigpu as mg

try:
    import torch
except ImportError:
    torch = None


def per_call_us(fn, repeat):
    """Median over 5 rounds of the mean wall time of ``repeat`` calls, in microseconds."""
    fn()
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        rounds.append((time.perf_counter() - start) / repeat * 1e6)
    return sorted(rounds)[2]


def workloads(lib):
    """The four workloads, each a zero-argument callable, written once for both libraries."""
    nn = lib.nn
    rng = np.random.default_rng(0)
    a = lib.tensor(rng.standard_normal((4, 4)).astype(np.float32))
    b = lib.tensor(rng.standard_normal((4, 4)).astype(np.float32))
    ga = lib.tensor(rng.standard_normal((4, 4)).astype(np.float32), requires_grad=True)
    gb = lib.tensor(rng.standard_normal((4, 4)).astype(np.float32), requires_grad=True)
    lib.manual_seed(0)
    linear = nn.Linear(8, 8)
    x8 = lib.tensor(rng.standard_normal((4, 8)).astype(np.float32))
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    adam = lib.optim.Adam(mlp.parameters(), lr=1e-3)
    target = lib.tensor(rng.standard_normal((4, 1)).astype(np.float32))
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000, help="calls per timing round")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args()

    ours = workloads(mg)
    if torch is not None:
        torch.set_num_threads(1)
        theirs = workloads(torch)
    rows = []
    print(f"{'workload':42s} {'minigpu':>10s} {'torch':>10s} {'ratio':>7s}")
    for name, fn in ours.items():
        row = {"workload": name, "minigpu_us": per_call_us(fn, args.repeat)}
        if torch is not None:
            row["torch_us"] = per_call_us(theirs[name], args.repeat)
            row["ratio"] = row["minigpu_us"] / row["torch_us"]
        rows.append(row)
        ref = (f"{row['torch_us']:8.1f}us {row['ratio']:6.1f}x" if torch is not None
               else f"{'-':>10s} {'-':>7s}")
        print(f"{name:42s} {row['minigpu_us']:8.1f}us {ref}")
    if torch is not None:
        geo = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
        print(f"geometric mean of the ratios: {geo:.2f}x (torch {torch.__version__}, 1 thread)")
    else:
        print("torch is not importable: no reference ratios")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
