"""Benchmark CLI: ``python -m minigpu.tools.bench [--suite lessons|ops|train|all] [--smoke]``.

Suites (``suites.py``): ``lessons`` (every lesson of ``minigpu.lessons.ALL``), ``ops``
(production primitives at H200 sizes), ``train`` (one training step of an MLP and LeNet-5).

How it measures
    Each variant runs once to warm up (compilation, caches), ``--warmup`` - 1 more times, then
    ``--repeat`` times between two CUDA events recorded on minigpu's stream; the report is the
    median. Output buffers are allocated during the first call and handed out again, in the
    same order, on every later call (``timing.ReplayAllocations``): the caching allocator
    already makes ``empty`` cheap, and this also keeps every timed call on the same addresses.
    Rates are GB/s for memory-bound kernels (bytes = the *minimum* traffic
    of the operation, the same for every variant of a lesson, so a variant that moves more
    bytes shows as a lower effective rate) or GFLOP/s. Every row is compared with references
    measured in the same run: ``x first`` (speed-up over the lesson's first variant), ``% copy``
    (share of the device-to-device copy bandwidth, for memory-bound rows) and ``vs torch``
    (``references.py``: PyTorch, or CuPy, when importable with a GPU; TF32 off).
    Variants that return a buffer are checked against the first variant (``check`` column).
    On an H100 or H200 each row also gets ``predicted_ms``, the counters' time model
    (:func:`minigpu.simulator.counters.predicted_us`: launch + the row's minimum bytes over
    the DRAM bandwidth, or its FLOPs over the FP32 peak), printed next to the measured time.

``--smoke`` runs tiny sizes on Numba's CUDA simulator (the test suite does), to prove that every
lesson and op runs end to end; there it times nothing (a simulated time means nothing) and
prints each variant's launches and counters (``minigpu.cuda.counters()``) instead. ``--json PATH``
writes the rows, ``--save`` writes them to ``benchmarks/results/<date>_<device>_<suite>.json``.
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import re
import sys
from pathlib import Path

from .. import backends, lessons
from ..simulator.counters import GPUS, predicted_us, total
from .suites import SUITES, Context
from .timing import Timer, copy_bandwidth

SUITE_NAMES = ("lessons", "ops", "train")
# The suites, the timer and the lessons import Numba: ``main`` imports them only once it has
# decided whether to simulate (``--smoke`` without NUMBA_ENABLE_CUDASIM restarts with it =1).


# --- running and reporting -----------------------------------------------------------------------
def _host(result):
    import numpy as np

    if result is None or not hasattr(result, "copy_to_host"):
        return None
    return np.asarray(result.copy_to_host())


def run_group(group, suite: str, timer, copy_gbps, ctx) -> list[dict]:
    """Time every variant of ``group`` (a ``suites.Group``); one row per variant. On the
    simulator, count instead: each variant's launches and counters, no time."""
    rows = []
    if group.skipped or not group.variants:
        rows.append(dict(suite=suite, group=group.name, variant="(skipped)", size=group.size,
                         note=group.skipped or "no variants"))
        return rows
    SIMULATOR = backends.cuda_module("device").SIMULATOR

    first_ms = first_out = None
    for k, (name, fn) in enumerate(group.variants):
        row = dict(suite=suite, group=group.name, variant=name, size=group.size,
                   unit=group.unit)
        try:
            if SIMULATOR:  # no time worth printing: what the counters see instead
                launches, result = timer.count(fn)
            else:
                ms, result = timer.measure(fn)
        except Exception as exc:  # report and go on: one broken variant must not hide others
            row.update(error=f"{type(exc).__name__}: {exc}"[:300])
            rows.append(row)
            continue
        if SIMULATOR:
            row.update(_counted(launches), note=group.notes.get(name, ""))
            _check(group, k, result, row, first_out)
            first_out = first_out if k else _host(result)
            rows.append(row)
            continue
        rate = group.work / (ms * 1e-3) / (1e9 if group.unit != "samples/s" else 1)
        row.update(ms=ms, rate=rate, note=group.notes.get(name, ""))
        row.update(_predicted(group))
        if first_ms is None:
            first_ms = ms
        row["x_first"] = first_ms / ms
        if group.memory_bound and copy_gbps:
            row["pct_copy"] = 100 * rate / copy_gbps
        _check(group, k, result, row, first_out)
        first_out = first_out if k else _host(result)
        rows.append(row)
    if group.reference and not SIMULATOR:
        name, fn = group.reference
        try:
            ms = ctx.ref.time(fn, timer.warmup, timer.repeat)
            ref_rate = group.work / (ms * 1e-3) / (1e9 if group.unit != "samples/s" else 1)
            for row in rows:
                if "rate" in row:
                    row["vs_ref"] = row["rate"] / ref_rate
            rows.append(dict(suite=suite, group=group.name, variant=f"reference: {name}",
                             size=group.size, unit=group.unit, ms=ms, rate=ref_rate,
                             reference=True))
        except Exception as exc:
            rows.append(dict(suite=suite, group=group.name, variant=f"reference: {name}",
                             error=f"{type(exc).__name__}: {exc}"[:300], reference=True))
    return rows


def _predicted(group) -> dict:
    """{"predicted_ms": ...} of the counters' time model (one launch, the group's minimum
    bytes or its FLOPs) on an H100 or H200, to compare with the measured ms; {} elsewhere."""
    gpu = _model_gpu()
    if gpu is None or group.unit == "samples/s":
        return {}
    work = dict(bytes_moved=group.work) if group.memory_bound else dict(bytes_moved=0,
                                                                         flops=group.work)
    return dict(predicted_ms=predicted_us(gpu=gpu, **work) / 1e3, predicted_for=gpu)


@functools.lru_cache(maxsize=None)
def _model_gpu():
    from numba import cuda

    name = cuda.get_current_device().name
    name = name.decode() if isinstance(name, bytes) else str(name)
    return next((g for g in GPUS if g in name.lower()), None)


COUNTED = ("global_load_sectors", "global_store_sectors", "shared_load_wavefronts", "barriers",
           "atomics")


def _counted(launches) -> dict:
    """A variant's launches and the sums of its main counters (simulator runs)."""
    row = dict(launches=len(launches))
    if launches:
        row.update({m: total(launches)[m] for m in COUNTED})
    return row


def _check(group, k, result, row, first_out):
    """row["check"]: does variant k's result equal the first variant's?"""
    import numpy as np

    if not group.check or k == 0:
        return
    out = _host(result)
    if out is not None and first_out is not None:
        ok = out.shape == first_out.shape and np.allclose(out, first_out, **group.tol)
        row["check"] = "equal" if ok else "DIFFERS"


def format_rows(rows, meta) -> str:
    out = []
    group = None
    ref_name = meta.get("reference") or "none"
    for row in rows:
        if row["group"] != group:
            group = row["group"]
            out.append("")
            out.append(f"== {row['suite']} / {group}: {row.get('size', '')}")
        if "error" in row:
            out.append(f"  {row['variant']:60s} ERROR {row['error']}")
            continue
        if "launches" in row:
            cells = [f"{row['launches']} launches"] + [
                f"{m.replace('_', ' ')} {row[m]:,}" for m in COUNTED if m in row]
            cells += [row[c] for c in ("check", "note") if row.get(c)]
            out.append(f"  {row['variant']:60s} " + "  ".join(cells))
            continue
        if "ms" not in row:
            out.append(f"  {row['variant']:60s} {row.get('note', '')}")
            continue
        cells = [f"{row['ms']:10.3f} ms", f"{row['rate']:10.1f} {row['unit']:9s}"]
        if "predicted_ms" in row:
            cells.append(f"predicted {row['predicted_ms']:.3f} ms")
        if not row.get("reference"):
            cells.append(f"x first {row['x_first']:5.2f}")
            if "pct_copy" in row:
                cells.append(f"{row['pct_copy']:5.1f}% copy")
            if "vs_ref" in row:
                cells.append(f"{row['vs_ref']:5.2f}x {ref_name}")
            if "check" in row:
                cells.append(row["check"])
            if row.get("note"):
                cells.append(row["note"])
        out.append(f"  {row['variant']:60s} " + "  ".join(cells))
    return "\n".join(out)


def device_name(device) -> str:
    if device.SIMULATOR:
        return "simulator"
    from numba import cuda

    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def run_suite(suite: str, ctx, timer, copy_gbps, only=None, log=print):
    rows = []
    for name, build in SUITES[suite](only):
        try:
            groups = build(ctx)
        except Exception as exc:
            rows.append(dict(suite=suite, group=name, variant="(setup)", size="",
                             error=f"{type(exc).__name__}: {exc}"[:300]))
            continue
        for group in groups if isinstance(groups, list) else [groups]:
            new = run_group(group, suite, timer, copy_gbps, ctx)
            rows += new
            log(format_rows(new, dict(reference=ctx.ref.name if ctx.ref else None)))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m minigpu.tools.bench",
        description="Time minigpu's kernels: the optimisation lessons, the production ops, "
                    "and training steps.")
    parser.add_argument("--suite", choices=SUITE_NAMES + ("all",), default="lessons")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes on Numba's CUDA simulator: proves the harness runs; "
                             "timings meaningless")
    parser.add_argument("--lesson", action="append", metavar="NAME",
                        help="only this lesson (repeatable; lessons suite)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs per variant (median reported; default 20, smoke 1)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed runs first (default 3, smoke 1)")
    parser.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    parser.add_argument("--save", action="store_true",
                        help="write JSON to benchmarks/results/<date>_<device>_<suite>.json")
    parser.add_argument("--list", action="store_true", help="list the lessons and exit")
    args = parser.parse_args(argv)

    if args.list:
        print("lessons (python -m minigpu.tools.bench --suite lessons):")
        for lesson in lessons.ALL:
            print("  " + lesson.describe())
        return 0
    if args.smoke and "NUMBA_ENABLE_CUDASIM" not in os.environ:
        # minigpu installs its simulator (sanitizer, counters) at import when the variable is
        # set: start again with it
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        os.execv(sys.executable, [sys.executable, "-m", "minigpu.tools.bench",
                                  *(sys.argv[1:] if argv is None else argv)])
    device = backends.cuda_module("device")

    if not device.SIMULATOR:
        from numba import cuda

        if not cuda.is_available():
            print("No CUDA GPU here: timings need one. `python -m minigpu.tools.bench --smoke` "
                  "runs the harness on Numba's simulator (timings meaningless).", file=sys.stderr)
            return 2
    warmup = args.warmup if args.warmup is not None else (1 if args.smoke else 3)
    repeat = args.repeat if args.repeat is not None else (1 if args.smoke else 20)
    ctx = Context(smoke=args.smoke)
    timer = Timer(ctx, warmup, repeat)
    dev_name = device_name(device)
    ref = ctx.ref.name if ctx.ref else None
    if device.SIMULATOR:
        print("*** Numba CUDA simulator: no timings (they would be MEANINGLESS); each variant "
              "runs once and shows its launches and the simulator's counters (sums over its "
              "launches; python -m minigpu.lessons explains them) ***")
        copy_gbps = None
        print(f"device: {dev_name}")
    else:
        if args.smoke:
            print("*** smoke sizes: timings are not representative ***")
        copy_gbps, copy_ms = copy_bandwidth(ctx, timer)
        print(f"device: {dev_name}; median of {repeat} runs after {warmup} warm-up; "
              f"device-to-device copy: {copy_gbps:.1f} GB/s; reference library: "
              f"{ref or 'none importable'}")
    suites = SUITE_NAMES if args.suite == "all" else (args.suite,)
    rows = []
    for suite in suites:
        rows += run_suite(suite, ctx, timer, copy_gbps, only=args.lesson)
    meta = dict(date=datetime.date.today().isoformat(), device=dev_name,
                simulator=bool(device.SIMULATOR), smoke=args.smoke, warmup=warmup,
                repeat=repeat, copy_gbps=copy_gbps, reference=ref, suites=list(suites),
                python=platform.python_version(),
                meaningless=bool(device.SIMULATOR))
    payload = dict(meta=meta, rows=rows)
    paths = []
    if args.json:
        paths.append(Path(args.json))
    if args.save:
        slug = re.sub(r"[^a-z0-9]+", "-", dev_name.lower()).strip("-")
        paths.append(Path("benchmarks/results") /
                     f"{meta['date']}_{slug}_{args.suite}.json")
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=1, default=float))
        print(f"wrote {path}")
    errors = [r for r in rows if "error" in r]
    differs = [r for r in rows if r.get("check") == "DIFFERS"]
    print(f"\n{len(rows)} rows, {len(errors)} errors, {len(differs)} result mismatches")
    return 1 if errors or differs else 0


if __name__ == "__main__":
    sys.exit(main())
