"""``python -m minigpu.sanitizer [--tool TOOL] app.py [args ...]``: run a Python program on
minigpu's simulator with the sanitizer on, as ``compute-sanitizer python app.py`` runs it on a GPU.

The program runs unchanged, as ``__main__``, with its own arguments; each error is printed when it
happens (its launch ends there and the program goes on), and at the end a summary of kernels,
launches and errors by tool goes to stderr. The exit status is the program's own, or 1 when a
selected tool reported an error and the program itself exited 0.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback

from .report import TOOLS, start


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m minigpu.sanitizer",
                                description=__doc__.split("\n\n")[0].replace("``", ""))
    p.add_argument("--tool", default="all", choices=["all", *TOOLS],
                   help="which checks report (default: all)")
    p.add_argument("script", help="the Python program to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    args = p.parse_args(argv)
    report = start(tuple(TOOLS) if args.tool == "all" else (args.tool,), stream=sys.stderr)
    sys.argv = [args.script, *args.args]
    sys.path[0] = os.path.dirname(os.path.abspath(args.script))
    code = 0
    try:
        runpy.run_path(args.script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:  # the program's own error: shown as Python shows it
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    print("\n".join(report.summary()), file=sys.stderr)
    return code or (1 if report.error_count else 0)


if __name__ == "__main__":
    sys.exit(main())
