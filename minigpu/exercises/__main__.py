"""``python -m minigpu.exercises``: list the exercises, write a stub, grade a solution, draw it.

    python -m minigpu.exercises list
    python -m minigpu.exercises stub stencil [my_stencil.py]
    python -m minigpu.exercises check stencil my_stencil.py [--seed N] [--plot DIR] [--no-static]
                                                             [--lang ja]
    python -m minigpu.exercises plot stencil [my_stencil.py] [--out DIR]
    python -m minigpu.exercises plot --all DIR

``check`` exits 0 when every layer passes, 1 otherwise; it prints the seed its sizes were
drawn with (``--seed`` replays them). ``plot`` draws the reference solution's access pattern
(and a file's next to it); ``--all DIR`` draws every exercise's reference.
"""
import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

from . import BY_NAME, EXERCISES, check, ja, stub_path, typecheck
from .grader import constants_of, float64_failure, load, static_limits
from .specs import CH

NAMES = ", ".join(BY_NAME)


def _static(name, path):
    """Layer (c), run by the grader in a process without the simulator: JSON on stdout. With
    the toolchain, each kernel's sm_90 report against the limits; without it (``missing``
    says what is absent), each kernel typed for the CUDA target (:mod:`.typecheck`)."""
    from numba.core.errors import NumbaError

    from ..tools import kernel_report as kr
    ex = BY_NAME[name]
    try:
        kr.working_toolchain()
        missing = None
    except kr.ToolchainMissing as exc:
        missing = "; ".join(exc.missing)
    module = load(path)
    c = constants_of(ex, module)
    shape = ex.sizes(np.random.default_rng(0), c)[0]
    *ins, out = ex.inputs(np.random.default_rng(0), shape, c)
    specs = (ex.kernels(module, c, shape, ins, out) if ex.kernels else
             [("kernel", module.kernel, (*ins, out), int(np.prod(ex.launch(c, shape)[1])))])
    reports, failures, skipped, typed = [], [], [], []
    for kname, kernel, args, block in specs:
        try:
            if missing:
                f64 = typecheck.float64_lines(kernel, args, kr.CC, kr._FakeDevice)
            else:
                rep = kr.report_kernel(kernel, args, block, name=kname)
        except NumbaError as exc:   # the kernel's own error: it does not compile
            failures.append(_refused(kname, exc, typed_only=bool(missing)))
            continue
        except Exception as exc:  # noqa: BLE001 - the toolchain's, never the student's
            skipped.append(f"{kname}: the compiler failed ({type(exc).__name__}: "
                           f"{str(exc).strip()[:200]})")
            continue
        if missing:
            typed.append(kname)
            if f64:
                failures.append(float64_failure(kname, len(f64), f64[0]))
            continue
        reports.append({k: getattr(rep, k) for k in (
            "name", "registers", "smem", "occupancy", "spill_stores", "spill_loads", "f64")})
        failures += static_limits(ex, rep)
    print(json.dumps(dict(reports=reports, failures=failures, skipped=skipped, typed=typed,
                          missing=missing)))
    return 0


def _refused(kname, exc, typed_only):
    """The failure of a kernel a GPU build refuses: Numba's message, its first lines."""
    what = "does not type for the CUDA target" if typed_only else "did not compile for sm_90"
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return (f"{kname} {what}: {' '.join(lines[:2])[:400]} (a kernel holds numbers and "
            f"arrays only: no Python lists, dicts or objects; see {CH[0]})")


def _list():
    width = max(len(e.name) for e in EXERCISES)
    for ex in EXERCISES:
        also = f" (and {Path(ex.step).name})" if ex.step else ""
        print(f"{ex.name:<{width}}  {ex.summary}\n{'':<{width}}  {ex.chapter}{also}")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m minigpu.exercises",
                                 description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the exercises in course order, with their chapters")
    st = sub.add_parser("stub", help="write an exercise's stub to fill in")
    st.add_argument("name")
    st.add_argument("path", nargs="?", help="where to write it (default: NAME.py)")
    ck = sub.add_parser("check", help="grade a solution")
    ck.add_argument("name")
    ck.add_argument("path")
    ck.add_argument("--seed", type=int, help="replay the sizes of an earlier run")
    ck.add_argument("--plot", metavar="DIR", help="also draw it next to the reference")
    ck.add_argument("--no-static", action="store_true", help="skip layer (c)")
    ck.add_argument("--json", action="store_true")
    ck.add_argument("--lang", choices=("en", "ja"),
                    help="the report's language (default: ja under a ja locale, else en)")
    pl = sub.add_parser("plot", help="draw a solution's access pattern next to the reference")
    pl.add_argument("name", nargs="?")
    pl.add_argument("path", nargs="?", help="your solution (default: the reference only)")
    pl.add_argument("--out", default=".", help="folder for the PNG (default: here)")
    pl.add_argument("--all", metavar="DIR", help="every exercise's reference, into DIR")
    sc = sub.add_parser("static")   # internal: layer (c) in a process without the simulator
    sc.add_argument("name")
    sc.add_argument("path")
    args = ap.parse_args(argv)
    name = getattr(args, "name", None)
    if name is not None and name not in BY_NAME:
        ap.error(f"unknown exercise {name!r}; the exercises are: {NAMES}")
    if args.cmd == "list":
        _list()
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
    if args.cmd == "plot":
        from . import pictures
        if name is None and not args.all:
            ap.error("plot needs an exercise name (or --all DIR)")
        pictures.restart_on_simulator()
        try:
            for path in (pictures.draw_all(args.all) if args.all
                         else [pictures.draw_solution(name, args.path, args.out)]):
                print(f"wrote {path}")
        except RuntimeError as exc:   # matplotlib missing
            ap.error(str(exc))
        return 0
    say = ja.translate if (args.lang or ("ja" if ja.locale_is_japanese() else "en")) == "ja" \
        else str
    if not Path(args.path).exists():
        ap.error(say(f"{args.path} does not exist (write one with: python -m minigpu.exercises "
                     f"stub {name} {args.path})"))
    res = check(name, args.path, static=not args.no_static, seed=args.seed, plot=args.plot)
    print(json.dumps(res.to_json()) if args.json else say(res.text()))
    return 0 if res.passed else 1


if __name__ == "__main__":
    sys.exit(main())
