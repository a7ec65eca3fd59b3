"""minigpu's simulator as ``compute-sanitizer`` for anyone's code: one command, one pytest plugin.

    python -m minigpu.sanitizer [--tool memcheck|racecheck|initcheck|synccheck|all] app.py args
    pytest -p minigpu.sanitizer [--sanitizer-tool racecheck] tests/

Both run someone else's program or test suite unchanged: they set ``NUMBA_ENABLE_CUDASIM=1``
before Numba is imported, install minigpu's simulator (``minigpu/simulator``, the checks), and
record every kernel launch of the process. At the end they print a summary (kernels, launches,
which path ran them, errors by tool) and exit non-zero when a selected tool reported an error.

What happens at an error (a kernel stops at its first error, on the simulator as on a GPU):

- the command (:mod:`.__main__`) reports it, ends that launch there and lets the program go on,
  as ``compute-sanitizer`` does: every launch's error is collected in one run (a program that
  catches ``minigpu.cuda.RaceError`` itself sees none; later results may be wrong: the launch
  stopped early);
- the plugin (:mod:`.plugin`) lets the error fail the test that launched it (the other tests
  run), and counts it, also when the test caught it (a test expecting an ``IndexError`` from an
  out-of-bounds read still had one); the session then fails.

``--tool`` selects which errors are reported: ``memcheck`` out-of-bounds indices, ``racecheck``
races, ``initcheck`` uses of never-written memory, ``synccheck`` barrier and warp-mask misuse;
``all`` (the default) every one. The simulator checks everything at once either way; an error of
a tool not selected ends its launch silently (counted as ignored) and never fails the run. A
launch the GPU would refuse (``LaunchConfigError``) is always reported.
"""
from .plugin import (pytest_addoption, pytest_configure, pytest_sessionfinish,  # noqa: F401
                     pytest_terminal_summary)
from .report import TOOLS, Report, start, tool_of

__all__ = ["TOOLS", "Report", "start", "tool_of"]
