"""What a lesson is, and the one way to run any of its variants.

A lesson module owns its "before" kernels and one :class:`Lesson` record: a title, what it
teaches, and one or more :class:`Experiment`\\ s. An experiment builds its inputs once and
lists its variants, before first; the last variant is the production kernel, imported from
``minigpu.backends.cuda`` (unless the experiment says why there is none). Every variant runs
the same way, whatever the lesson::

    from minigpu import lessons
    from minigpu.lessons.record import Inputs

    for lesson in lessons.ALL:
        for experiment in lesson.experiments:
            problem = experiment.build(Inputs(small=True))   # device inputs, size, work
            for variant in experiment.runnable(small=True):
                result = variant.run(problem)                # launch; a device array or None

The benchmark (``minigpu.tools.bench``) times exactly this call; the static kernel report
(``minigpu.tools.kernel_report``) compiles :attr:`Lesson.kernels`; the tests run every
variant and compare it with the first.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable

from ..backends.contract import View, contiguous_strides
from ..backends.cuda import device, memory
from ..backends.cuda.kernelspec import KernelSpec  # noqa: F401 (the lessons name it here)


class Problem(SimpleNamespace):
    """The inputs of one experiment, as attributes, plus ``size`` (a description), ``work``
    (bytes or flops one call moves or does, the same for every variant) and ``notes``
    (variant name -> a remark the benchmark prints beside it)."""

    def __init__(self, size: str, work: float, notes: dict | None = None, **inputs):
        super().__init__(size=size, work=work, notes=notes or {}, **inputs)


@dataclass(frozen=True)
class Variant:
    """One way to compute the experiment: ``run(problem)`` launches it and returns its result
    (a device array the tests compare with the first variant's, or None)."""

    name: str
    note: str
    run: Callable[[Problem], Any]
    source: Callable          # the host function it launches (where to read the code)
    small: bool = True        # False: skipped at small (simulator) sizes

    @property
    def production(self) -> bool:
        return self.source.__module__.startswith("minigpu.backends.")


@dataclass(frozen=True)
class Experiment:
    name: str
    build: Callable[["Inputs"], Problem]
    variants: tuple
    unit: str = "GB/s"                 # "GB/s" (memory bound) or "GFLOP/s"
    memory_bound: bool = True
    check: bool = True                 # compare every variant's result with the first's
    tol: dict = field(default_factory=lambda: dict(rtol=1e-5, atol=1e-5))
    reference: Callable | None = None  # (torch/CuPy reference, problem) -> (name, fn)
    no_production: str = ""            # why the last variant is not a production kernel
    look_for: str = ""                 # what the counters table shows (printed under it)

    def runnable(self, small: bool):
        return tuple(v for v in self.variants if v.small or not small)


@dataclass(frozen=True)
class Lesson:
    name: str
    title: str
    teaches: str
    experiments: tuple
    kernels: Callable[[], list] = list   # () -> [KernelSpec] of the lesson's own kernels
    pictures: Callable[[], list] = list  # () -> [draw.Picture]: before/after, traced
    sweep: Callable | None = None        # () -> a markdown table measured over problem sizes

    def describe(self) -> str:
        return f"{self.name:16s} {self.title}"


class Inputs:
    """Sizes and random device data for building problems: ``small`` picks the small sizes
    (the simulator, the tests), else sizes that fill an H200."""

    def __init__(self, small: bool, seed: int = 0):
        import numpy as np

        self.np, self.small = np, small
        self.rng = np.random.default_rng(seed)
        self.device, self.memory = device, memory

    def size(self, full, small):
        return small if self.small else full

    def upload(self, a):
        return self.memory.from_numpy(self.np.ascontiguousarray(a, dtype=self.np.float32))

    def uniform(self, *shape, lo=-1.0, hi=1.0):
        return self.rng.uniform(lo, hi, shape).astype(self.np.float32)

    def empty(self, n, dtype="float32"):
        return self.device.empty(n, self.np.dtype(dtype))

    def view(self, buf, shape, strides=None, offset=0):
        return View(buf, tuple(shape), tuple(strides or contiguous_strides(shape)), offset)

    def tensor(self, *shape, lo=-1.0, hi=1.0):
        """A dense float32 device view of the given shape, uniform in [lo, hi)."""
        n = int(self.np.prod(shape))
        return self.view(self.upload(self.uniform(n, lo=lo, hi=hi)), shape)
