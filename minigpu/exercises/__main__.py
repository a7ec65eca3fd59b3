"""``python -m minigpu.exercises``: list the exercises, write a stub, grade a solution.

    python -m minigpu.exercises list
    python -m minigpu.exercises stub stencil [my_stencil.py]
    python -m minigpu.exercises check stencil my_stencil.py [--no-static]

``check`` exits 0 when every layer passes, 1 otherwise.
"""
import argparse
import json
import shutil
import sys
from pathlib import Path

from . import BY_NAME, EXERCISES, check, stub_path
from .grader import static_limits, load


def _static(name, path):
    """Layer (c) (run by the grader in a process without the simulator): JSON on stdout."""
    from ..tools import kernel_report as kr
    ex = BY_NAME[name]
    module = load(path)
    import numpy as np
    args = ex.inputs(np.random.default_rng(0), ex.shapes[0])
    try:
        rep = kr.report_kernel(module.kernel, args, ex.block_threads, name=name)
    except kr.ToolchainMissing as exc:
        print(exc, file=sys.stderr)
        return kr.TOOLCHAIN_MISSING
    data = {k: getattr(rep, k) for k in ("registers", "smem", "occupancy", "spill_stores",
                                         "spill_loads", "f64", "error")}
    data["failures"] = static_limits(ex, rep)
    print(json.dumps(data))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m minigpu.exercises",
                                 description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the exercises and their chapters")
    st = sub.add_parser("stub", help="write an exercise's stub to fill in")
    st.add_argument("name", choices=sorted(BY_NAME))
    st.add_argument("path", nargs="?", help="where to write it (default: NAME.py)")
    ck = sub.add_parser("check", help="grade a solution")
    ck.add_argument("name", choices=sorted(BY_NAME))
    ck.add_argument("path")
    ck.add_argument("--no-static", action="store_true", help="skip layer (c)")
    ck.add_argument("--json", action="store_true")
    sc = sub.add_parser("static")   # internal: layer (c) in a process without the simulator
    sc.add_argument("name")
    sc.add_argument("path")
    args = ap.parse_args(argv)
    if args.cmd == "list":
        for ex in EXERCISES:
            print(f"{ex.name:<10} {ex.summary}  ({ex.chapter})")
        return 0
    if args.cmd == "stub":
        dest = Path(args.path or f"{args.name}.py")
        if dest.exists():
            print(f"{dest} exists: not overwritten", file=sys.stderr)
            return 1
        shutil.copyfile(stub_path(args.name), dest)
        print(f"wrote {dest}; fill in the TODOs, then: "
              f"python -m minigpu.exercises check {args.name} {dest}")
        return 0
    if args.cmd == "static":
        return _static(args.name, args.path)
    res = check(args.name, args.path, static=not args.no_static)
    if args.json:
        print(json.dumps(dict(failures=res.failures, notes=res.notes, scores=res.scores)))
    else:
        print(res.text())
    return 0 if res.passed else 1


if __name__ == "__main__":
    sys.exit(main())
