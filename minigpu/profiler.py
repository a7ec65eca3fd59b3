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

PyTorch's arguments work unchanged (``import minigpu as torch``)::

    from torch.profiler import profile, record_function, ProfilerActivity, schedule
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 profile_memory=True, with_stack=True) as prof:
        with record_function("model_inference"):
            model(inputs)
    print(prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total"))

- ``activities``: ``CPU`` records the ops, the ``record_function`` ranges and the cpu
  device's primitives; ``CUDA`` records the cuda device's primitives (its kernel launches).
  The default is both (those the machine can run).
- ``record_shapes``: each record keeps its inputs' shapes (``[]`` for a non-tensor);
  ``key_averages(group_by_input_shape=True)`` gives one row per (name, shapes).
- ``profile_memory``: each primitive's record keeps the bytes of the buffers it returns (what
  it allocated; frees are not counted); an op's memory is the sum of what runs inside it.
  The table gains ``Mem`` and ``Self Mem`` columns.
- ``with_stack``: each record keeps the innermost frames of *your* code (outside minigpu)
  that led to it; ``key_averages(group_by_stack_n=5)`` groups by them and the table shows
  them, ``export_stacks(path)`` writes them for a flame graph.
- ``schedule=schedule(wait=1, warmup=1, active=2, repeat=1)`` with ``prof.step()`` after each
  training step: only the active steps are recorded, each as a range ``ProfilerStep#N``, and
  at the end of each active window ``on_trace_ready(prof)`` is called (also at the end of the
  block, as without a schedule); ``tensorboard_trace_handler(dir)`` is such a handler, writing
  a Chrome trace per window. The reports then cover the last window.

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

Sort keys: ``total``, ``self``, ``calls``, ``mean``, ``memory``, ``self_memory``, or PyTorch's
names for them (``cpu_time_total``/``cuda_time_total``/``device_time_total`` = total,
``self_cpu_time_total``/``self_cuda_time_total`` = self, ``count`` = calls,
``cpu_time``/``cuda_time`` = mean, ``cpu_memory_usage``/``cuda_memory_usage`` = memory, with
``self_`` = self_memory). Each row is measured with one clock (its ``Clock`` column), so the
cpu/cuda names sort the same column; a row's PyTorch attributes (``key``, ``count``,
``cpu_time_total``, ``self_cuda_time_total``, ..., in microseconds as PyTorch's) read it too.

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
import enum
import functools
import json
import os
import socket
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
    input_shapes: tuple = None  # with key_averages(group_by_input_shape=True)
    stack: tuple = None         # with key_averages(group_by_stack_n=n): the innermost n frames
    memory: int = 0             # bytes allocated inside (profile_memory=True)
    self_memory: int = 0        # bytes allocated by the primitive itself

    # PyTorch's names (FunctionEventAvg), times in microseconds; one clock per row
    key = property(lambda r: r.name)
    count = property(lambda r: r.calls)
    cpu_time_total = cuda_time_total = device_time_total = property(lambda r: r.total_ms * 1e3)
    self_cpu_time_total = self_cuda_time_total = self_device_time_total = property(
        lambda r: r.self_ms * 1e3)
    cpu_time = cuda_time = device_time = property(lambda r: r.mean_ms * 1e3)
    cpu_memory_usage = property(lambda r: r.memory if r.clock == "perf_counter" else 0)
    cuda_memory_usage = device_memory_usage = property(
        lambda r: r.memory if r.clock != "perf_counter" else 0)
    self_cpu_memory_usage = property(lambda r: r.self_memory if r.clock == "perf_counter" else 0)
    self_cuda_memory_usage = self_device_memory_usage = property(
        lambda r: r.self_memory if r.clock != "perf_counter" else 0)


_SORT_KEYS = {
    "total": "total_ms", "cpu_time_total": "total_ms", "cuda_time_total": "total_ms",
    "device_time_total": "total_ms", "self": "self_ms", "self_cpu_time_total": "self_ms",
    "self_cuda_time_total": "self_ms", "self_device_time_total": "self_ms",
    "calls": "calls", "count": "calls", "mean": "mean_ms", "cpu_time": "mean_ms",
    "cuda_time": "mean_ms", "device_time": "mean_ms",
    "memory": "memory", "cpu_memory_usage": "memory", "cuda_memory_usage": "memory",
    "device_memory_usage": "memory", "self_memory": "self_memory",
    "self_cpu_memory_usage": "self_memory", "self_cuda_memory_usage": "self_memory",
    "self_device_memory_usage": "self_memory",
}


class ProfilerActivity(enum.Enum):
    """What ``profile(activities=...)`` records: ``CPU`` the ops, the ``record_function``
    ranges and the cpu device's primitives, ``CUDA`` the cuda device's primitives."""
    CPU = 0
    CUDA = 1


def supported_activities():
    """The activities this machine can record: CUDA with a GPU or the simulator."""
    return {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if _cuda_usable() else set())


class ProfilerAction(enum.Enum):
    """What a :func:`schedule` tells the profiler to do at a step."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait, warmup, active, repeat=0, skip_first=0):
    """PyTorch's profiler schedule: after ``skip_first`` steps, cycles of ``wait`` steps not
    recorded, ``warmup`` steps not recorded either (PyTorch warms its tracer up; minigpu has
    nothing to warm) and ``active`` recorded steps, whose last one saves (``on_trace_ready``);
    ``repeat`` cycles (0: until the block ends). Returns ``step -> ProfilerAction``."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), "
                             f"warmup={warmup} (need >= 0), active={active} (need > 0), "
                             f"repeat={repeat} (need >= 0), skip_first={skip_first} (need >= 0).")

    def action(step):
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        phase = step % cycle
        if phase < wait:
            return ProfilerAction.NONE
        if phase < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if phase < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An ``on_trace_ready`` handler writing each window's Chrome trace to
    ``dir_name/<worker_name>.<time ns>.pt.trace.json`` (TensorBoard's profiler plugin and
    Perfetto read it); ``worker_name`` defaults to ``<hostname>_<pid>``."""
    if use_gzip:
        raise NotImplementedError("tensorboard_trace_handler: minigpu writes plain JSON only "
                                  "(use_gzip=False)")

    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        prof.export_chrome_trace(os.path.join(dir_name, f"{name}.{time.time_ns()}.pt.trace.json"))
    return handler


def _format_bytes(n):
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


class EventList(list):
    """The rows of :meth:`profile.key_averages` (a list of :class:`Row`), printable like
    PyTorch's: ``prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)``."""

    def __init__(self, rows, wall_ms=0.0, memory=False):
        super().__init__(rows)
        self.wall_ms, self.memory = wall_ms, memory

    def sorted(self, sort_by="total"):
        """The rows most expensive first by ``sort_by`` (``None``: as they are)."""
        if sort_by is None:
            return self
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"sort_by must be one of {sorted(_SORT_KEYS)}, got {sort_by!r}")
        field = _SORT_KEYS[sort_by]
        return EventList(sorted(self, key=lambda r: getattr(r, field), reverse=True),
                         self.wall_ms, self.memory)

    def table(self, sort_by="total", row_limit=100, max_name_column_width=55, header=None,
              **_widths) -> str:
        """The rows as a text table, most expensive first by ``sort_by``; ``row_limit`` <= 0
        or None shows all. With profile_memory the ``Mem`` columns, with rows grouped by input
        shape an ``Input Shapes`` column, grouped by stack the frames under each row.
        (PyTorch's other column-width arguments are accepted and ignored.)"""
        rows = self.sorted(sort_by)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        clocks = sorted({r.clock for r in rows}) or ["-"]
        width = min(max([len(r.name) for r in rows] + [4]), max_name_column_width)
        shapes = any(r.input_shapes is not None for r in rows)
        head = (f"{'Name':<{width}}  {'Kind':<9}  {'Calls':>6}  {'Total ms':>10}  "
                f"{'Self ms':>10}  {'Mean ms':>10}  {'Share':>6}  ")
        head += f"{'Mem':>10}  {'Self Mem':>10}  " if self.memory else ""
        head += "Clock" + ("                    Input Shapes" if shapes else "")
        lines = ([header] if header else []) + [
            f"minigpu profile: {self.wall_ms:.3f} ms wall, sorted by {sort_by}; clock: "
            + ", ".join(clocks), head, "-" * len(head)]
        for r in rows:
            name = r.name if len(r.name) <= width else r.name[:width - 3] + "..."
            line = (f"{name:<{width}}  {r.kind:<9}  {r.calls:>6}  {r.total_ms:>10.3f}  "
                    f"{r.self_ms:>10.3f}  {r.mean_ms:>10.4f}  {r.share:>6.1%}  ")
            if self.memory:
                line += f"{_format_bytes(r.memory):>10}  {_format_bytes(r.self_memory):>10}  "
            line += f"{r.clock:<24}"
            if shapes:
                line += f"    {[list(s) for s in r.input_shapes]}"
            lines.append(line.rstrip())
            lines.extend(f"{'':<{width}}    {frame}" for frame in r.stack or ())
        return "\n".join(lines)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """PyTorch's flame-graph input: per row with a stack, ``outer;...;inner;name value``
        (value: ``metric`` in microseconds, ``self_cpu_time_total`` or
        ``self_cuda_time_total``). Needs ``with_stack=True`` and ``group_by_stack_n``."""
        if metric not in ("self_cpu_time_total", "self_cuda_time_total"):
            raise ValueError("metric should be one of: ['self_cpu_time_total', "
                             "'self_cuda_time_total']")
        clean = str.maketrans(" ;\t\n", "____")
        with open(os.fspath(path), "w") as f:
            for r in self:
                value = int(getattr(r, metric))
                if r.stack and value > 0:
                    frames = [e.translate(clean) for e in reversed(r.stack)]
                    f.write(";".join(frames + [r.name.translate(clean)]) + f" {value}\n")

    def __str__(self):
        return self.table()


class _Record:
    __slots__ = ("name", "kind", "device", "clock", "start", "end", "children", "ms", "stream",
                 "t0_ms", "input_shapes", "stack", "self_bytes")

    def __init__(self, name, kind, device, clock):
        self.name, self.kind, self.device, self.clock = name, kind, device, clock
        self.children, self.ms, self.t0_ms = [], 0.0, 0.0
        self.input_shapes, self.stack, self.self_bytes = None, None, 0

    @property
    def bytes(self):
        """Bytes allocated inside this record: its own and its children's."""
        return self.self_bytes + sum(c.bytes for c in self.children)


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_stack(limit=10):
    """The innermost frames outside minigpu, PyTorch's ``file(line): function`` form."""
    frames, frame = [], sys._getframe(2)
    while frame is not None and len(frames) < limit:
        path = frame.f_code.co_filename
        if not os.path.abspath(path).startswith(_PACKAGE) and path != contextlib.__file__:
            frames.append(f"{path}({frame.f_lineno}): {frame.f_code.co_name}")
        frame = frame.f_back
    return tuple(frames)


def _shapes(args):
    return tuple(tuple(a.shape) if isinstance(getattr(a, "shape", None), tuple) else ()
                 for a in args)


def _nbytes(result):
    """Bytes of the buffers a primitive returned (one, a tuple of them, or None)."""
    items = result if isinstance(result, tuple) else (result,)
    return sum(int(getattr(b, "nbytes", 0)) for b in items)


@functools.lru_cache(maxsize=None)
def _cuda_usable() -> bool:
    """The cuda backend can run (GPU or simulator); False on a cpu-only machine."""
    return cuda.is_available()


def _real_gpu() -> bool:
    return _cuda_usable() and not _cuda_device().SIMULATOR


def _cuda_device():
    return backends.cuda_module("device")


@contextlib.contextmanager
def record_function(name: str, args=None):
    """``with record_function("load batch"):`` (or as a decorator) records the block as a row
    named ``name`` (kind ``user``) in the running profile, with the ops inside nested under
    it; does nothing when no profile records. ``args`` (PyTorch's) is ignored."""
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
    """Context manager that records ops and primitives; see the module docstring for
    PyTorch's arguments.

    ``ops=False`` or ``primitives=False`` leaves that level out. After the block:
    :meth:`table` / ``print(prof)``, :meth:`key_averages` (rows), ``records`` (every call
    in order, nested records in ``.children``), ``wall_ms``.
    """

    def __init__(self, activities=None, *, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False, ops=True,
                 primitives=True):
        self.activities = set(supported_activities() if activities is None else activities)
        if not self.activities <= set(ProfilerActivity):
            raise ValueError(f"activities must be ProfilerActivity members, got {activities}")
        self.ops = ops and ProfilerActivity.CPU in self.activities
        self.primitives = primitives
        self.schedule, self.on_trace_ready = schedule, on_trace_ready
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack = with_stack
        self.records, self.wall_ms, self.step_num = [], 0.0, 0
        self._stack, self._patched, self._observer = [], [], None
        self._recording, self._step_record = False, None

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
        self._action = self._scheduled(0)
        if self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._start_window()
        return self

    def __exit__(self, *exc):
        recording = self._recording
        try:
            if recording:
                self._stop_window()
        finally:
            self._restore()
        if recording and self.on_trace_ready is not None and exc[0] is None:
            self.on_trace_ready(self)
        return False

    def step(self):
        """End a training step (with a ``schedule``): close its ``ProfilerStep#N`` range, move
        to the next step's action, and after the last active step of a window call
        ``on_trace_ready(self)``."""
        previous = self._action
        self.step_num += 1
        self._action = self._scheduled(self.step_num)
        record_next = self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if self._recording and (previous == ProfilerAction.RECORD_AND_SAVE or not record_next):
            self._stop_window()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        if record_next:
            if self._recording:
                self._end(self._step_record)
                self._step_record = self._begin(f"ProfilerStep#{self.step_num}", "user", "cpu")
            else:
                self._start_window()

    def _scheduled(self, step):
        return ProfilerAction.RECORD if self.schedule is None else self.schedule(step)

    def _start_window(self):
        """Begin recording: a fresh list of records, time 0 of the window."""
        self.records, self._stack = [], []
        self._synchronize()
        self._ref_event = None
        if self._events_available():  # device time 0 of the trace
            from numba import cuda as numba_cuda
            self._ref_event = numba_cuda.event()
            self._ref_event.record(_cuda_device().current_stream())
        self._wall0 = time.perf_counter()
        self._recording = True
        if self.schedule is not None:
            self._step_record = self._begin(f"ProfilerStep#{self.step_num}", "user", "cpu")

    def _stop_window(self):
        if self._step_record is not None:
            self._end(self._step_record)
            self._step_record = None
        self._synchronize()
        self.wall_ms = (time.perf_counter() - self._wall0) * 1e3
        self._recording = False
        self._resolve()

    def _patch_backends(self):
        if _cuda_usable():  # load it now, so cuda tensors made inside are seen too
            backends.get("cuda")
        for dev, module_name in _BACKEND_MODULES.items():
            module = sys.modules.get(module_name)
            if module is None or ProfilerActivity[dev.upper()] not in self.activities:
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
            record = self._begin(label, "primitive", dev, args)
            try:
                result = fn(*args, **kwargs)
                if record is not None and self.profile_memory:
                    record.self_bytes = _nbytes(result)
                return result
            finally:
                self._end(record)
        return timed

    def _observe(self, phase, node, args):
        name = type(node).__name__ + ("Backward" if phase == "backward" else "")
        return functools.partial(self._end, self._begin(name, "op", _first_device(args), args))

    def _begin(self, name, kind, dev, args=()):
        """Open a record (None while a schedule is not recording)."""
        if not self._recording:
            return None
        events = dev == "cuda" and self._events_available()
        clock = ("cuda events" if events else
                 "perf_counter (simulator)" if dev == "cuda" else "perf_counter")
        record = _Record(name, kind, dev, clock)
        if self.record_shapes:
            record.input_shapes = _shapes(args)
        if self.with_stack:
            record.stack = _user_stack()
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
        if record is None:  # not recording
            return
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

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, *,
                     sort_by="total") -> EventList:
        """One :class:`Row` per name (per name and input shapes with
        ``group_by_input_shape``, per name and innermost ``group_by_stack_n`` frames of your
        code with that), sorted by ``sort_by`` (see the module docstring); an
        :class:`EventList` with ``.table(sort_by=..., row_limit=...)``."""
        groups = {}
        for r in self.events():
            shapes = r.input_shapes if group_by_input_shape else None
            stack = (r.stack or ())[:group_by_stack_n] if group_by_stack_n else None
            g = groups.setdefault((r.name, shapes, stack), {
                "kind": r.kind, "calls": 0, "total": 0.0, "self": 0.0, "clock": r.clock,
                "memory": 0, "self_memory": 0})
            g["calls"] += 1
            g["total"] += r.ms
            g["self"] += r.ms - sum(c.ms for c in r.children)
            g["memory"] += r.bytes
            g["self_memory"] += r.self_bytes
        rows = [Row(name, g["kind"], g["calls"], g["total"], g["self"], g["total"] / g["calls"],
                    g["total"] / self.wall_ms if self.wall_ms > 0 else 0.0, g["clock"],
                    shapes, stack, g["memory"], g["self_memory"])
                for (name, shapes, stack), g in groups.items()]
        return EventList(rows, self.wall_ms, self.profile_memory).sorted(sort_by)

    def table(self, sort_by="total", row_limit=None) -> str:
        """The rows of :meth:`key_averages` as a text table."""
        return self.key_averages(sort_by=sort_by).table(sort_by, row_limit)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """With ``with_stack=True``: the recorded stacks for a flame graph (flamegraph.pl,
        speedscope), one ``frames;name microseconds`` line per distinct stack."""
        self.key_averages(group_by_stack_n=10).export_stacks(path, metric)

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
            args = {"device": r.device, "clock": r.clock}
            if r.input_shapes is not None:
                args["Input Dims"] = [list(s) for s in r.input_shapes]
            if r.stack is not None:
                args["Call stack"] = ";".join(r.stack)
            events.append({"name": r.name, "cat": r.kind, "ph": "X", "pid": 0,
                           "tid": tracks[r.clock], "ts": round(r.t0_ms * 1e3, 3),
                           "dur": round(r.ms * 1e3, 3), "args": args})
        with open(os.fspath(path), "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)

    def __str__(self):
        return self.table()
