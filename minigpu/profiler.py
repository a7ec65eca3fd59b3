"""Where does the time go? A per-op and per-primitive profiler (``~ torch.profiler``).

    import minigpu.profiler

    with minigpu.profiler.profile() as prof:
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    print(prof)                                   # = prof.table()
    prof.table(sort_by="self", row_limit=10)      # the 10 most expensive by self time

Two levels are recorded:

- **ops** — every autograd :class:`~minigpu.autograd.Function` call: its forward
  (``MatMul``) and, during ``backward()``, its backward (``MatMulBackward``). These are the
  nodes of the graph, what the model code wrote.
- **primitives** — every call of a backend primitive (``cuda.matmul``, ``cpu.binary``; the
  list is ``backends/contract.py``). On cuda each one is one or a few kernel launches, so this
  is where device time is spent.

Ops contain primitives (and other ops: ``MatMulBackward`` runs two ``MatMul``), so every row
has a **total** time (inclusive) and a **self** time (total minus the records nested in it:
for an op, the Python work of building views and checking shapes). **share** is total time
over the wall time of the ``with`` block; shares of nested rows overlap, so they do not add
up to 100 %.

Timing
------
- **Real GPU** (cuda tensors): a CUDA event is recorded on the current stream before and
  after the call, and the events are read when the block ends. This is *device* time: from
  when the stream reached the first marker to when it reached the second, without
  synchronising per call (the program keeps its asynchrony). If the host queues work slower
  than the GPU runs it, the gaps count too; a host timer here would only measure how long
  *queuing* took, which is why events are used.
- **Simulator and cpu**: ``time.perf_counter()`` around the call, after a synchronize (a
  no-op there: both run synchronously). Host wall time, labelled ``perf_counter`` (and
  ``perf_counter (simulator)`` for cuda records): simulator times say how slow the simulator
  is, not how fast a kernel would be.

How it hooks in (and out)
-------------------------
On entry it appends an observer to ``autograd.observers`` (called around every
``Function.forward``/``backward``) and replaces each primitive of each loaded backend module
by a timing wrapper — ops reach primitives as ``tensor.backend.<name>``, a module attribute
looked up at call time. On exit (also after an exception) everything is put back: the
observer list is as before and every module attribute is the original function again.
One profiler at a time.
"""
from __future__ import annotations

import functools
import sys
import time
from typing import NamedTuple

from . import autograd
from .backends.contract import PRIMITIVES

_BACKEND_MODULES = {"cpu": "minigpu.backends.cpu", "cuda": "minigpu.backends.cuda"}
_active = None


class Row(NamedTuple):
    """One line of :meth:`profile.key_averages`: all the calls of one name."""

    name: str
    kind: str        # "op" or "primitive"
    calls: int
    total_ms: float  # inclusive
    self_ms: float   # total minus nested records
    mean_ms: float   # total / calls
    share: float     # total / wall time of the profile
    clock: str       # "cuda events", "perf_counter (simulator)" or "perf_counter"


class _Record:
    __slots__ = ("name", "kind", "device", "clock", "start", "end", "children", "ms", "stream")

    def __init__(self, name, kind, device, clock):
        self.name, self.kind, self.device, self.clock = name, kind, device, clock
        self.children, self.ms = [], 0.0


def _real_gpu() -> bool:
    from .backends.cuda import device
    return not device.SIMULATOR


def _first_device(args) -> str:
    from .tensor import Tensor
    for a in args:
        for item in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(item, Tensor):
                return item.device.type
    return "cpu"


class profile:
    """Context manager that records ops and primitives; see the module docstring.

    ``ops=False`` or ``primitives=False`` leaves that level out. After the block:
    :meth:`table` / ``print(prof)``, :meth:`key_averages` (rows), ``records`` (every call
    in order, nested records in ``.children``), ``wall_ms``.
    """

    def __init__(self, ops=True, primitives=True):
        self.ops, self.primitives = ops, primitives
        self.records, self.wall_ms = [], 0.0
        self._stack, self._patched, self._observer = [], [], None

    # --- entering and leaving ------------------------------------------------------------
    def __enter__(self):
        global _active
        if _active is not None:
            raise RuntimeError("a minigpu profiler is already running; profiles do not nest")
        _active = self
        try:
            if self.ops:
                self._observer = self._observe
                autograd.observers.append(self._observer)
            if self.primitives:
                self._patch_backends()
        except BaseException:
            self._restore()
            raise
        self._synchronize()
        self._wall0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        try:
            self._synchronize()
            self.wall_ms = (time.perf_counter() - self._wall0) * 1e3
        finally:
            self._restore()
        self._resolve()
        return False

    def _patch_backends(self):
        from . import cuda
        if cuda.is_available():  # load it now, so cuda tensors made inside are seen too
            from .backends import get
            get("cuda")
        for dev, module_name in _BACKEND_MODULES.items():
            module = sys.modules.get(module_name)
            if module is None:
                continue
            for name in PRIMITIVES:
                original = getattr(module, name, None)
                if callable(original):
                    setattr(module, name, self._wrap(original, f"{dev}.{name}", dev))
                    self._patched.append((module, name, original))

    def _restore(self):
        global _active
        while self._patched:
            module, name, original = self._patched.pop()
            setattr(module, name, original)
        if self._observer is not None and self._observer in autograd.observers:
            autograd.observers.remove(self._observer)
        self._observer = None
        _active = None

    # --- recording -----------------------------------------------------------------------
    def _wrap(self, fn, label, dev):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            record = self._begin(label, "primitive", dev)
            try:
                return fn(*args, **kwargs)
            finally:
                self._end(record)
        return timed

    def _observe(self, phase, node, args):
        name = type(node).__name__ + ("Backward" if phase == "backward" else "")
        record = self._begin(name, "op", _first_device(args))
        return functools.partial(self._end, record)

    def _begin(self, name, kind, dev):
        events = dev == "cuda" and _real_gpu()
        clock = ("cuda events" if events else
                 "perf_counter (simulator)" if dev == "cuda" else "perf_counter")
        record = _Record(name, kind, dev, clock)
        (self._stack[-1].children if self._stack else self.records).append(record)
        self._stack.append(record)
        if events:
            from numba import cuda as numba_cuda

            from .backends.cuda import device
            record.stream = device.current_stream()
            record.start = numba_cuda.event()
            record.start.record(record.stream)
        else:
            if dev == "cuda":
                self._synchronize()
            record.start = time.perf_counter()
        return record

    def _end(self, record):
        if record.clock == "cuda events":
            from numba import cuda as numba_cuda
            record.end = numba_cuda.event()
            record.end.record(record.stream)
        else:
            if record.device == "cuda":
                self._synchronize()
            record.end = time.perf_counter()
        popped = self._stack.pop()
        assert popped is record, "profiler records must nest"

    @staticmethod
    def _cuda_loaded():
        return _BACKEND_MODULES["cuda"] in sys.modules

    def _synchronize(self):
        if self._cuda_loaded():
            from .backends.cuda import device
            device.synchronize()  # the device module's function: never itself recorded

    def _resolve(self):
        def walk(records):
            for r in records:
                if r.clock == "cuda events":
                    r.end.synchronize()  # its stream may not be the current one
                    r.ms = r.start.elapsed_time(r.end)
                else:
                    r.ms = (r.end - r.start) * 1e3
                r.start = r.end = None
                walk(r.children)
        walk(self.records)

    # --- reporting -----------------------------------------------------------------------
    def events(self):
        """Every record, depth first (parents before their children)."""
        out, todo = [], list(reversed(self.records))
        while todo:
            r = todo.pop()
            out.append(r)
            todo.extend(reversed(r.children))
        return out

    def key_averages(self, sort_by="total"):
        """One :class:`Row` per name, sorted by ``total``, ``self``, ``calls`` or ``mean``."""
        groups = {}
        for r in self.events():
            g = groups.setdefault(r.name, {"kind": r.kind, "calls": 0, "total": 0.0,
                                           "self": 0.0, "clock": r.clock})
            g["calls"] += 1
            g["total"] += r.ms
            g["self"] += r.ms - sum(c.ms for c in r.children)
        rows = [Row(name, g["kind"], g["calls"], g["total"], g["self"], g["total"] / g["calls"],
                    g["total"] / self.wall_ms if self.wall_ms > 0 else 0.0, g["clock"])
                for name, g in groups.items()]
        key = {"total": lambda r: r.total_ms, "self": lambda r: r.self_ms,
               "calls": lambda r: r.calls, "mean": lambda r: r.mean_ms}[sort_by]
        return sorted(rows, key=key, reverse=True)

    def table(self, sort_by="total", row_limit=None) -> str:
        """The rows of :meth:`key_averages` as a text table."""
        rows = self.key_averages(sort_by)[:row_limit]
        clocks = sorted({r.clock for r in rows}) or ["-"]
        width = max([len(r.name) for r in rows] + [4])
        lines = [f"minigpu profile: {self.wall_ms:.3f} ms wall, sorted by {sort_by}; clock: "
                 + ", ".join(clocks),
                 (f"{'Name':<{width}}  {'Kind':<9}  {'Calls':>6}  {'Total ms':>10}  "
                  f"{'Self ms':>10}  {'Mean ms':>10}  {'Share':>6}  Clock")]
        lines.append("-" * len(lines[-1]))
        for r in rows:
            lines.append(f"{r.name:<{width}}  {r.kind:<9}  {r.calls:>6}  {r.total_ms:>10.3f}  "
                         f"{r.self_ms:>10.3f}  {r.mean_ms:>10.4f}  {r.share:>6.1%}  {r.clock}")
        return "\n".join(lines)

    def __str__(self):
        return self.table()
