"""pytest plugin for the outside suites: numba-cuda's own tests (and stumpy's GPU tests).

Loaded with ``-p outside_plugin`` (``tools/outside`` on ``PYTHONPATH``) by
``numba_suite.py``. Three things the wheel's tests need and the wheel does not ship:

- they must import as ``numba.cuda.tests.*``: pytest would name them ``cuda.tests.*`` (the
  first folder above them without an ``__init__.py`` is ``numba_cuda/numba``), which clashes
  with cuda-bindings' ``cuda`` package;
- ``CUDATestCase`` uses the ``initialize_from_pytest_config`` fixture of upstream's conftest;
- ``MINIGPU_OUTSIDE=minigpu`` has minigpu imported before any test, in the pytest process and
  in every Python process a test starts (``sitecustomize.py`` beside this file, run at Python's
  start-up); its simulator upgrade then applies to every kernel, as for a user who imports it.
  ``stock`` leaves Numba stock.

``MINIGPU_OUTSIDE_UNSKIP=1`` lifts the ``skip_on_cudasim`` decorators whose reason is a
simulator feature minigpu adds (:data:`UNSKIP_REASONS`) and deselects every other test: the
"passing only with minigpu" run. ``MINIGPU_OUTSIDE_RESULTS=<file>`` writes each test's outcome
(``passed``/``failed``/``skipped``) as JSON lines.
"""
import importlib
import json
import os
from pathlib import Path

import pytest
import _pytest.python

UNSKIP_REASONS = (
    "Warp Operations are not yet implemented on cudasim",
    "syncwarp not implemented on cudasim",
    "cudasim doesn't support cuda import at non-top-level",
    "math.remainder(0, 0) raises a ValueError on CUDASim",
    "trunc only supported on NumPy float64",
    "Overflow behavior differs on CPython",
)

import numba.cuda.tests as _tests  # noqa: E402

TESTS_DIR = Path(_tests.__file__).resolve().parent
_UNSKIP = os.environ.get("MINIGPU_OUTSIDE_UNSKIP") == "1"

if _UNSKIP:
    import numba.cuda.testing as _testing

    _stock_skip = _testing.skip_on_cudasim

    def skip_on_cudasim(reason):
        """Keep a test whose skip reason is a feature minigpu adds, marked for selection."""
        if reason not in UNSKIP_REASONS:
            return _stock_skip(reason)

        def mark(obj):
            obj._minigpu_unskipped = reason
            return obj
        return mark

    _testing.skip_on_cudasim = skip_on_cudasim

_stock_import = _pytest.python.importtestmodule


def _import(path, config):
    path = Path(path).resolve()
    try:
        rel = path.relative_to(TESTS_DIR)
    except ValueError:
        return _stock_import(path, config)
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    mod = importlib.import_module(".".join(["numba", "cuda", "tests"] + parts))
    config.pluginmanager.consider_module(mod)
    return mod


_pytest.python.importtestmodule = _import


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request):
    """Upstream's conftest fixture: FileCheck reproducers are not dumped."""
    request.cls._dump_failed_filechecks = False


def _unskipped(item):
    for obj in (getattr(item, "obj", None), getattr(item, "cls", None)):
        if getattr(obj, "_minigpu_unskipped", None):
            return True
    return False


def pytest_collection_modifyitems(config, items):
    if not _UNSKIP:
        return
    keep = [it for it in items if _unskipped(it)]
    config.hook.pytest_deselected(items=[it for it in items if not _unskipped(it)])
    items[:] = keep


_results = os.environ.get("MINIGPU_OUTSIDE_RESULTS")


def pytest_runtest_logreport(report):
    if not _results or os.environ.get("PYTEST_XDIST_WORKER"):  # the controller writes
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed") or (
            report.when == "teardown" and report.outcome == "failed"):
        outcome = report.outcome
        with open(_results, "a") as f:
            f.write(json.dumps({"test": _short(report.nodeid), "when": report.when,
                                "outcome": outcome, "duration": report.duration,
                                "message": _message(report) if outcome == "failed" else ""})
                    + "\n")


def _short(nodeid):
    """``cudapy/test_x.py::Class::test`` (relative to the wheel's tests folder)."""
    path, _, rest = nodeid.partition("::")
    p = Path(path)
    if not p.is_absolute():
        if (TESTS_DIR / p).exists():
            return f"{p.as_posix()}::{rest}"
        p = Path.cwd() / p
    try:
        p = p.resolve().relative_to(TESTS_DIR)
    except ValueError:
        parts = p.parts
        if "tests" in parts:
            p = Path(*parts[len(parts) - parts[::-1].index("tests"):])
    return f"{p.as_posix()}::{rest}"


def _message(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message.splitlines()[0][:300] if crash.message else ""
    return str(report.longrepr).strip().splitlines()[-1][:300] if report.longrepr else ""
