"""Where does the time go? A per-op and per-primitive profiler (``~ torch.profiler``).

    import minigpu.profiler

    with minigpu.profiler.profile() as prof:
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")        # open in https://ui.perfetto.dev

``print(prof)`` is ``prof.table()``. ``with minigpu.profiler.record_function("data"):`` adds a
named range of your own (it nests like an op; outside a profile it costs nothing).

Two levels are recorded:

- **ops** — every autograd :class:`~minigpu.autograd.Function` call: its forward
  (``Addmm``, what ``nn.Linear`` runs) and, during ``backward()``, its backward
  (``AddmmBackward``). These are the nodes of the graph, what the model code wrote.
- **primitives** — every call of a backend primitive (``cuda.matmul``, ``cpu.binary``; the
  list is ``backends/contract.py``). On cuda each one is one or a few kernel launches, so this
  is where device time is spent.

Ops contain primitives (and other ops: ``MatMulBackward`` runs two ``MatMul``), so every row
has a **total** time (inclusive) and a **self** time (total minus the records nested in it:
for an op, the Python work of building views and checking shapes). **share** is total time
over the wall time of the ``with`` block; shares of nested rows overlap, so they do not add
up to 100 %.

Sort keys: ``total``, ``self``, ``calls``, ``mean``, or PyTorch's names for them
(``cpu_time_total``/``cuda_time_total``/``device_time_total`` = total,
``self_cpu_time_total``/``self_cuda_time_total`` = self, ``count`` = calls,
``cpu_time``/``cuda_time`` = mean). Each row is measured with one clock (its ``Clock`` column),
so the cpu/cuda names sort the same column.

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
One profiler at a time. On a machine with neither a GPU nor the simulator it profiles the cpu
device (it never touches CUDA there).

Trace
-----
:meth:`profile.export_chrome_trace` writes Chrome's trace-event JSON (``"ph": "X"`` complete
events, microseconds), which ``chrome://tracing`` and https://ui.perfetto.dev open: one track
for host-timed records (nested as they ran) and, on a GPU, one for the records timed by CUDA
events, placed by their device time since the profile began.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
from typing import NamedTuple

from . import autograd, backends, cuda
from .backends.contract import PRIMITIVES
from .tensor import Tensor

_BACKEND_MODULES = {"cpu": "minigpu.backends.cpu", "cuda": "minigpu.backends.cuda"}
_active = None


class Row(NamedTuple):
    """One line of :meth:`profile.key_averages`: all the calls of one name."""

    name: str
    kind: str        # "op", "primitive" or "user" (record_function)
    calls: int
    total_ms: float  # inclusive
    self_ms: float   # total minus nested records
    mean_ms: float   # total / calls
    share: float     # total / wall time of the profile
    clock: str       # "cuda events", "perf_counter (simulator)" or "perf_counter"


_SORT_KEYS = {
    "total": "total_ms", "cpu_time_total": "total_ms", "cuda_time_total": "total_ms",
    "device_time_total": "total_ms", "self": "self_ms", "self_cpu_time_total": "self_ms",
    "self_cuda_time_total": "self_ms", "self_device_time_total": "self_ms",
    "calls": "calls", "count": "calls", "mean": "mean_ms", "cpu_time": "mean_ms",
    "cuda_time": "mean_ms", "device_time": "mean_ms",
}


class EventList(list):
    """The rows of :meth:`profile.key_averages` (a list of :class:`Row`), printable like
    PyTorch's: ``prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)``."""

    def __init__(self, rows, wall_ms=0.0):
        super().__init__(rows)
        self.wall_ms = wall_ms

    def sorted(self, sort_by="total"):
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"sort_by must be one of {sorted(_SORT_KEYS)}, got {sort_by!r}")
        field = _SORT_KEYS[sort_by]
        return EventList(sorted(self, key=lambda r: getattr(r, field), reverse=True),
                         self.wall_ms)

    def table(self, sort_by="total", row_limit=100) -> str:
        """The rows as a text table, most expensive first by ``sort_by``."""
        rows = self.sorted(sort_by)[:row_limit]
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


class _Record:
    __slots__ = ("name", "kind", "device", "clock", "start", "end", "children", "ms", "stream",
                 "t0_ms")

    def __init__(self, name, kind, device, clock):
        self.name, self.kind, self.device, self.clock = name, kind, device, clock
        self.children, self.ms, self.t0_ms = [], 0.0, 0.0


@functools.lru_cache(maxsize=None)
def _cuda_usable() -> bool:
    """The cuda backend can run (GPU or simulator); False on a cpu-only machine."""
    return cuda.is_available()


def _real_gpu() -> bool:
    return _cuda_usable() and not _cuda_device().SIMULATOR


def _cuda_device():
    return backends.cuda_module("device")


@contextlib.contextmanager
def record_function(name: str):
    """``with record_function("load batch"):`` records the block as a row named ``name``
    (kind ``user``) in the running profile, with the ops inside nested under it; does
    nothing when no profile runs."""
    profiler = _active
    if profiler is None:
        yield
        return
    record = profiler._begin(str(name), "user", "cpu")
    try:
        yield
    finally:
        profiler._end(record)


def _first_device(args) -> str:
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
        self._ref_event = None
        if self._events_available():  # device time 0 of the trace
            from numba import cuda as numba_cuda
            self._ref_event = numba_cuda.event()
            self._ref_event.record(_cuda_device().current_stream())
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
        if _cuda_usable():  # load it now, so cuda tensors made inside are seen too
            backends.get("cuda")
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
        events = dev == "cuda" and self._events_available()
        clock = ("cuda events" if events else
                 "perf_counter (simulator)" if dev == "cuda" else "perf_counter")
        record = _Record(name, kind, dev, clock)
        (self._stack[-1].children if self._stack else self.records).append(record)
        self._stack.append(record)
        if events:
            from numba import cuda as numba_cuda
            record.stream = _cuda_device().current_stream()
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
        """The cuda backend is imported and can run: only then is there anything to wait for
        (on a cpu-only machine the module may be imported, but it has no stream to make)."""
        return _BACKEND_MODULES["cuda"] in sys.modules and _cuda_usable()

    def _events_available(self):
        return self._cuda_loaded() and _real_gpu()

    def _synchronize(self):
        if self._cuda_loaded():
            _cuda_device().synchronize()  # the device module's function: never itself recorded

    def _resolve(self):
        def walk(records):
            for r in records:
                if r.clock == "cuda events":
                    r.end.synchronize()  # its stream may not be the current one
                    r.ms = r.start.elapsed_time(r.end)
                    r.t0_ms = self._ref_event.elapsed_time(r.start)
                else:
                    r.ms = (r.end - r.start) * 1e3
                    r.t0_ms = (r.start - self._wall0) * 1e3
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

    def key_averages(self, sort_by="total") -> EventList:
        """One :class:`Row` per name, sorted by ``sort_by`` (see the module docstring); an
        :class:`EventList` with ``.table(sort_by=..., row_limit=...)``."""
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
        return EventList(rows, self.wall_ms).sorted(sort_by)

    def table(self, sort_by="total", row_limit=None) -> str:
        """The rows of :meth:`key_averages` as a text table."""
        return self.key_averages(sort_by).table(sort_by, row_limit)

    def export_chrome_trace(self, path):
        """Write the records as Chrome trace-event JSON (Perfetto, ``chrome://tracing``)."""
        tracks = {"perf_counter": 0, "perf_counter (simulator)": 0, "cuda events": 1}
        events = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0,
                   "args": {"name": "minigpu"}},
                  {"name": "thread_name", "ph": "M", "pid": 0, "tid": 0,
                   "args": {"name": "host (perf_counter)"}}]
        if any(r.clock == "cuda events" for r in self.events()):
            events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": 1,
                           "args": {"name": "cuda stream (events)"}})
        for r in self.events():
            events.append({"name": r.name, "cat": r.kind, "ph": "X", "pid": 0,
                           "tid": tracks[r.clock], "ts": round(r.t0_ms * 1e3, 3),
                           "dur": round(r.ms * 1e3, 3),
                           "args": {"device": r.device, "clock": r.clock}})
        with open(os.fspath(path), "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)

    def __str__(self):
        return self.table()
