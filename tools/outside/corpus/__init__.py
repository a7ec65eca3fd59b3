"""Outside kernels, as cases the corpus runner (``tools/outside/kernel_corpus.py``) runs twice:
on the stock simulator and with minigpu's sanitizer.

One module per source (:data:`SOURCES`). A module holds its kernels, each small, adapted from
the source or translated from it (every module's header names the repository, commit, paths
and licence), and registers one :class:`Case` per launch it makes with :func:`case`. A case's
function launches its kernel(s) on small inputs and returns the host arrays the kernel wrote
(compared stock against minigpu). Its ``label`` is the source's own verdict: ``"clean"``, or the
kind of bug the source says the kernel has (``"race"``, ``"oob"``, ``"sync"``, ``"const"``,
``"uninit"``); ``None`` where the source gives none (a tutorial's kernel that it presents as
working counts as ``"clean"``, and says so with ``label="clean"``).
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Callable

SOURCES = ("dataracebench", "gpuverify", "accelerated_computing_hub", "numba_examples",
           "gpu_puzzles")
"""The corpus modules, one per source, in the order the runner prints them."""

BUGS = ("race", "oob", "sync", "const", "uninit", "compile")
"""The bug labels (anything but ``"clean"``)."""


@dataclasses.dataclass
class Case:
    source: str
    name: str
    origin: str          # the path in the source repository the kernel comes from
    label: str           # "clean" or one of BUGS
    run: Callable        # () -> the host arrays the launch wrote
    rtol: float = 0.0    # results compared bit for bit unless the source reduces floats in
                         # an order a GPU leaves free (atomics), then to this tolerance

    @property
    def id(self):
        return f"{self.source}:{self.name}"


CASES: list[Case] = []


def case(origin, label, rtol=0.0, name=None):
    """Register the decorated function as a case of the calling module's source."""
    if label not in ("clean", *BUGS):
        raise ValueError(f"label {label!r}")

    def register(fn):
        source = fn.__module__.rsplit(".", 1)[-1]
        CASES.append(Case(source, name or fn.__name__, origin, label, fn, rtol))
        return fn
    return register


def load():
    """Import every source module (which registers its cases); the cases, in order."""
    for name in SOURCES:
        importlib.import_module(f"{__name__}.{name}")
    return CASES
