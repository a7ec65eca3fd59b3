"""Host time per step: minigpu eager, the same step captured once and replayed
(``mg.cuda.graph``, ``docs/graphs.md``), the replay of the fused graph (``graph.fuse()``),
and PyTorch eager, measured in the same run.

The workloads are ``host_overhead.py``'s, on the cpu device (4x4 tensors: the NumPy work is
negligible, so this is the Python a replay no longer runs). Each workload is run once eagerly
(its lazy state made), captured, and its replay timed against the eager call and PyTorch's,
their rounds alternating and each keeping its fastest round (``host_overhead.py``'s rule).
Then the cuda device's host time per call, eager and replayed, with the launches timed apart
as ``host_overhead.py`` does (under the simulator: counted, not run).

    python benchmarks/graphs_replay.py [--rounds 41] [--round-ms 20] [--json PATH] [--no-cuda]
"""
import argparse
import json
import math

import minigpu as mg
from host_overhead import calls_per_round, cuda_rows, fastest_round_us, torch, workloads


def captured(fn, fuse=False):
    """``fn`` run once eagerly, then captured (and fused, ``fuse``): the replay of one call."""
    fn()
    graph = mg.cuda.CUDAGraph()
    with mg.cuda.graph(graph):
        fn()
    if fuse:
        graph.fuse()
    return graph.replay


def cuda_table(rounds, round_ms):
    """``host_overhead.py``'s cuda table (host us per call, launches per call) for the eager
    workloads and their replays: under the simulator the launches are counted, not run."""
    eager = workloads(mg, "cuda")
    replays = {name: captured(fn) for name, fn in workloads(mg, "cuda").items()}
    rows = [{"workload": e["workload"], "eager_host_us": e["host_us"],
             "replay_host_us": r["host_us"], "eager_launches": e["launches"],
             "replay_launches": r["launches"]}
            for e, r in zip(cuda_rows(rounds, round_ms, eager),
                            cuda_rows(rounds, round_ms, replays))]
    where = "simulator: launches counted, not run" if mg.cuda.is_simulator() else "GPU"
    print(f"\n{'cuda device (' + where + '), host us':42s} {'eager':>8s} {'replay':>8s} "
          f"{'launches: eager':>16s} {'replay':>7s}")
    for row in rows:
        print(f"{row['workload']:42s} {row['eager_host_us']:8.1f} {row['replay_host_us']:8.1f} "
              f"{row['eager_launches']:16.0f} {row['replay_launches']:7.0f}")
    return rows


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--round-ms", type=float, default=20.0)
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--no-cuda", action="store_true", help="skip the cuda-device table")
    args = parser.parse_args(argv)
    if torch is not None:
        torch.set_num_threads(1)
        theirs = workloads(torch)
    rows = []
    print(f"{'cpu device, us per call':42s} {'eager':>8s} {'replay':>8s} {'fused':>8s} "
          f"{'torch':>8s} {'eager/torch':>12s} {'replay/torch':>13s}")
    for name, fn in workloads(mg).items():
        fns = [fn, captured(fn), captured(fn, fuse=True)] + (
            [theirs[name]] if torch is not None else [])
        times = fastest_round_us(fns, [calls_per_round(f, args.round_ms) for f in fns],
                                 args.rounds)
        row = {"workload": name, "eager_us": times[0], "replay_us": times[1],
               "fused_us": times[2]}
        line = f"{name:42s} {times[0]:8.1f} {times[1]:8.1f} {times[2]:8.1f}"
        if torch is not None:
            row.update(torch_us=times[3], eager_ratio=times[0] / times[3],
                       replay_ratio=times[1] / times[3])
            line += f" {times[3]:8.1f} {row['eager_ratio']:11.2f}x {row['replay_ratio']:12.2f}x"
        rows.append(row)
        print(line)
    result = {"cpu": rows}
    if torch is not None:
        result["geomean_eager_ratio"] = geomean([r["eager_ratio"] for r in rows])
        result["geomean_replay_ratio"] = geomean([r["replay_ratio"] for r in rows])
        print(f"geometric mean of the ratios: eager {result['geomean_eager_ratio']:.2f}x, "
              f"replay {result['geomean_replay_ratio']:.2f}x (torch {torch.__version__}, "
              f"1 thread)")
    if not args.no_cuda and mg.cuda.is_available():
        result["cuda"] = cuda_table(args.rounds, args.round_ms)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
