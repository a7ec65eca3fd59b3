"""What the sanitizer records: launches per kernel, errors per tool (:class:`Report`), and
:func:`start`, which puts the process on minigpu's simulator and records its launches."""
from __future__ import annotations

import collections
import os
import sys

from .. import simulator
from ..simulator import errors

TOOLS = {
    "memcheck": errors.OutOfBoundsError,
    "racecheck": errors.RaceError,
    "initcheck": errors.UninitializedReadError,
    "synccheck": errors.SyncError,
}
"""Tool name -> the error class it reports (a subclass of it counts as that tool's)."""


def tool_of(error):
    """The tool an error belongs to: a name of :data:`TOOLS`, ``launch`` or ``other``."""
    for tool, cls in TOOLS.items():
        if isinstance(error, cls):
            return tool
    return "launch" if isinstance(error, errors.LaunchConfigError) else "other"


class Report:
    """What the sanitizer saw in this process: launches per kernel, errors per tool."""

    def __init__(self, tools=tuple(TOOLS), raise_errors=False, stream=None, by_test=False):
        self.tools = tuple(tools)
        self.raise_errors = raise_errors
        self.by_test = by_test                  # note the pytest test each error came from
        self.stream = stream
        self.launches = collections.Counter()   # kernel name -> launches
        self.errors = collections.Counter()     # (tool, error class name) -> count
        self.ignored = collections.Counter()    # (tool, error class name) -> count
        self.tests = collections.Counter()      # pytest test id -> errors reported in it
        self.seen = set()                       # messages already printed

    def reports(self, error):
        tool = tool_of(error)
        return tool in self.tools or tool in ("launch", "other")

    def record(self, error, where=""):
        """Count ``error``; print its message the first time it is seen. True when it is
        reported (a selected tool's), False when it is ignored."""
        key = (tool_of(error), type(error).__name__)
        if not self.reports(error):
            self.ignored[key] += 1
            return False
        self.errors[key] += 1
        if self.by_test:
            self.tests[os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]] += 1
        message = str(error)
        if message not in self.seen and self.stream is not None:
            self.seen.add(message)
            print(f"========= minigpu.sanitizer: {key[0]} {key[1]}{where}\n{message}",
                  file=self.stream, flush=True)
        return True

    def merge(self, data):
        """Add a :meth:`data` of another process (a pytest-xdist worker)."""
        self.launches.update(data["launches"])
        self.tests.update(data["tests"])
        for field in ("errors", "ignored"):
            getattr(self, field).update({tuple(k.split(" ", 1)): v
                                         for k, v in data[field].items()})

    def data(self):
        """The counts as JSON-able dicts."""
        return {"launches": dict(self.launches), "tests": dict(self.tests),
                "errors": {" ".join(k): v for k, v in self.errors.items()},
                "ignored": {" ".join(k): v for k, v in self.ignored.items()}}

    @property
    def error_count(self):
        return sum(self.errors.values())

    def summary(self):
        """The lines printed at the end of a run."""
        kernels, total = len(self.launches), sum(self.launches.values())
        lines = [f"minigpu.sanitizer ({', '.join(self.tools)}): {kernels} kernel"
                 f"{'s' * (kernels != 1)}, {total} launch{'es' * (total != 1)}"]
        busiest = self.launches.most_common(5)
        if busiest:
            lines.append("  most launched: " + ", ".join(f"{k} {n}" for k, n in busiest))
        for (tool, cls), n in sorted(self.errors.items()):
            lines.append(f"  {tool:<10} {cls:<24} {n:>6} error{'s' * (n != 1)}")
        for (tool, cls), n in sorted(self.ignored.items()):
            lines.append(f"  {tool:<10} {cls:<24} {n:>6} ignored (tool not selected)")
        if self.tests:
            lines.append("  tests with errors:")
            lines += [f"    {test} ({n})" for test, n in sorted(self.tests.items())]
        n = self.error_count
        lines.append(f"ERROR SUMMARY: {n} error{'s' * (n != 1)}")
        return lines


REPORT = None
"""The process's :class:`Report` once :func:`start` ran."""


def start(tools=tuple(TOOLS), raise_errors=False, stream=sys.stderr, by_test=False):
    """Put the process on minigpu's simulator and record its launches into a new
    :data:`REPORT`. Must run before Numba is imported (it sets ``NUMBA_ENABLE_CUDASIM=1``);
    raises ``RuntimeError`` when Numba is already imported for a real GPU."""
    global REPORT
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    if "numba" in sys.modules:
        from numba.cuda import config as numba_config
        if not numba_config.ENABLE_CUDASIM:
            raise RuntimeError("minigpu.sanitizer: Numba was imported before the sanitizer, "
                               "for a real GPU; set NUMBA_ENABLE_CUDASIM=1 in the environment")
    if not simulator.install():
        raise RuntimeError("minigpu.sanitizer: the simulator could not be installed (see the "
                           "warning above); MINIGPU_STOCK_SIMULATOR=1 leaves it stock")
    REPORT = Report(tools, raise_errors, stream, by_test)
    from numba.cuda.simulator import kernel as kernel_mod
    simulator._set(kernel_mod.FakeCUDAKernel, "__call__",
                   _recording(kernel_mod.FakeCUDAKernel.__call__, kernel_mod))
    return REPORT


def _recording(launch, kernel_mod):
    """``FakeCUDAKernel.__call__`` that counts each kernel launch and records its error."""

    def __call__(self, *args):
        if self._device or kernel_mod._kernel_context:   # a device function's call
            return launch(self, *args)
        name = getattr(self.fn, "__qualname__", getattr(self.fn, "__name__", "?"))
        REPORT.launches[name] += 1
        try:
            return launch(self, *args)
        except errors.SimulatorError as error:
            if REPORT.record(error, f" in kernel '{name}'") and REPORT.raise_errors:
                raise
    return __call__

