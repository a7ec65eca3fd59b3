"""The pytest plugin: ``pytest -p minigpu.sanitizer [--sanitizer-tool TOOL] tests/``.

Runs a test suite on minigpu's simulator with its checks (:func:`minigpu.sanitizer.start` at
configure time, before the tests import Numba). A sanitizer error fails the test whose launch
raised it; every error is counted, also one a test caught itself. The terminal summary prints
the kernels, launches and errors by tool (the command's summary) and the tests that had errors;
the session fails (exit status 1) when any selected tool reported one. Under pytest-xdist each
worker records its own launches and the controller adds them up.
"""
from __future__ import annotations

from .report import TOOLS, start

KEY = "minigpu_sanitizer"


def pytest_addoption(parser):
    group = parser.getgroup("minigpu.sanitizer", "minigpu's CUDA-simulator sanitizer")
    group.addoption("--sanitizer-tool", default="all",
                    choices=["all", "memcheck", "racecheck", "initcheck", "synccheck"],
                    help="which checks report (default: all)")


def pytest_configure(config):
    tool = config.getoption("sanitizer_tool")
    config._minigpu_sanitizer = start(tuple(TOOLS) if tool == "all" else (tool,),
                                      raise_errors=True, stream=None, by_test=True)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_Controller(config._minigpu_sanitizer))


class _Controller:
    """pytest-xdist's hook, registered only where xdist is (pytest refuses unknown hooks)."""

    def __init__(self, report):
        self.report = report

    def pytest_testnodedown(self, node, error):
        data = getattr(node, "workeroutput", {}).get(KEY)
        if data:
            self.report.merge(data)


def pytest_sessionfinish(session, exitstatus):
    report = session.config._minigpu_sanitizer
    if hasattr(session.config, "workeroutput"):   # an xdist worker: hand the counts over
        session.config.workeroutput[KEY] = report.data()
    elif report.error_count and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    report = config._minigpu_sanitizer
    terminalreporter.section("minigpu.sanitizer")
    for line in report.summary():
        terminalreporter.write_line(line)

