"""Recording one run of a step: the backend calls it makes, as steps a replay runs again.

The seam is one: while a capture is open, ``backends.get(device)`` answers a recording proxy
of each loaded backend (``backends.replace``), so every op's ``x.backend.<primitive>(...)``
goes through :meth:`Capture.call`. The primitive runs as in eager mode (the Python above it,
autograd included, sees ordinary buffers), and what it did is kept:

- cpu: the call itself, bound to its arguments; a replay calls it again and copies the result
  into the buffer the capture got (``np.copyto``), so a tensor made during the capture keeps its
  buffer for good (a plain map is one pre-bound ufunc writing there: :data:`LEAN_MAPS`);
- cuda: the kernel launches and device copies the primitive made (``_Launches`` patches the
  launch and ``copy_to_device`` of numba-cuda, or of the simulator, while the capture is open);
  a replay launches the same kernels on the same buffers, and on the simulator each launch is
  checked by the sanitizer again.

Host values that a step changes are not frozen: a random primitive draws at the generator's
offset *at replay time* (the capture's own draws are given back, so every replay advances the
generator by what one eager step draws), an optimizer's step count grows by one per replay
and SGD's first-step flag holds for the first replay only. What cannot be replayed (a host
read, a data-dependent shape) raises :class:`CaptureError` naming the op.

A capture leaves no trace outside the graph: each buffer from before the capture that a
primitive writes in place (a parameter, an optimizer's moments, a ``.grad``) is saved before
the write and put back when the capture ends, and the generator's offset is restored; buffers
made during the capture are the graph's private pool (the steps hold them).
"""
from __future__ import annotations

import functools
import os
import sys

import numpy as np

from .. import backends
from ..backends.contract import PRIMITIVES, View
from ..random import default_generator
from .fused_kernels import LEAN_MAPS
from .fusion import Map, Update, extents


class CaptureError(RuntimeError):
    """Raised inside a capture by work a replay could not repeat."""


HOST_READS = {
    "array": "it reads the tensor's values on the host, which a replay cannot hand back",
    "to_numpy": "it copies the tensor's values to the host and waits for the device",
    "synchronize": "it waits for the device (a host sync)",
}
DATA_DEPENDENT = {
    "masked_select": "the size of its output depends on the values (a data-dependent shape)",
}
RANDOM = frozenset(("random_uniform", "random_normal"))  # (n, seed, offset, dtype)
STEP_COUNT = {"adam_step_": 4, "adamw_step_": 5, "adagrad_step_": 3}
"""Optimizer primitives whose argument at this index is the step count t (+1 per replay)."""
FIRST_STEP = {"sgd_step_": 8}
"""Optimizer primitives whose argument at this index is True on the first step only."""

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_active = None  # the open Capture (one at a time)


_OP_FILES = tuple(os.path.join(_PACKAGE, p) for p in (
    "ops", "tensor.py", "creation.py", "autograd", os.path.join("nn", "functional")))


def refuse(what: str, why: str):
    """Raise :class:`CaptureError` if a capture is open: for host work above the backends
    that a replay could not repeat (``minigpu.cuda.synchronize()``)."""
    if _active is not None:
        raise CaptureError(f"cannot capture {what} inside a graph capture: {why}")


def _op_name():
    """The public op that led here: the outermost of the innermost run of frames in the op
    layers and autograd (``Tensor.item`` for ``t.item()``, ``Tensor.__repr__`` for a print,
    ``dropout``)."""
    frame, name = sys._getframe(2), None
    while frame is not None:
        if frame.f_code.co_filename.startswith(_OP_FILES):
            name = frame.f_code.co_qualname
        elif name is not None:
            break
        frame = frame.f_back
    return name or "?"


class _Recording:
    """A backend module as a capture sees it: the primitives and host reads go through the
    capture; every other attribute is the module's own."""

    capturing = True  # what an op asks before a host-side check it skips in a capture

    def __init__(self, capture, module):
        self._capture, self._module = capture, module

    def __getattr__(self, name):
        attr = getattr(self._module, name)
        if name in PRIMITIVES or name in HOST_READS:
            attr = _recorded(self._capture, self._module, name, attr)
        setattr(self, name, attr)  # made once per capture and name
        return attr


def _recorded(capture, module, name, fn):
    def recorded(*args, **kwargs):
        return capture.call(module, name, fn, args, kwargs)
    return recorded


class Capture:
    """One open capture: the steps recorded so far and what it must give back at the end."""

    def __init__(self):
        self.steps = []         # callables, in the order the work was issued
        self.touches = []       # per step: the buffers it reads or writes (fusion.py)
        self.maps = []          # the unary/binary table maps, as fusion.Map records
        self.updates = []       # the optimizer steps, as fusion.Update records
        self.pool = []          # every buffer a primitive made: the graph's private pool
        self.launches = 0       # kernel launches recorded (cuda)
        self.rng = [0, 0]       # (seed, offset) a replay draws from, set by CUDAGraph.replay
        self.draws = 0          # generator counters one replay uses
        self._owned = set()     # ids of the pool's buffers
        self._saved = {}        # id -> (buffer, copy) of outside buffers written in place
        self._direct = 0        # > 0 while a primitive recorded as one call runs
        self._random = None     # (seed, offset, offset - start) of a cuda random draw
        self._start = default_generator.offset
        self._seed = default_generator.initial_seed()
        self._backends = {}     # device type -> the real module
        self._launches = None

    # --- opening and closing ---------------------------------------------------------------
    def open(self):
        global _active
        if _active is not None:
            raise RuntimeError("a graph capture is already open (captures do not nest)")
        for kind in backends.loaded():
            self._backends[kind] = backends.replace(kind, _Recording(self, backends.get(kind)))
        if "cuda" in self._backends:
            self._launches = _Launches(self)
        _active = self

    def close(self, keep=True):
        """End the capture: the backends are the real ones again, the outside buffers written
        during it hold their old values and the generator its old offset."""
        global _active
        _active = None
        if self._launches is not None:
            self._launches.remove()
        for kind, module in self._backends.items():
            backends.replace(kind, module)
        self._direct += 1  # restoring is not recorded (the hooks are gone anyway)
        for buf, copy in self._saved.values():
            _restore(buf, copy)
        self._saved.clear()
        self.draws = default_generator.offset - self._start
        default_generator.offset = self._start
        if not keep:
            self.steps, self.touches, self.maps, self.updates, self.pool = [], [], [], [], []
        missing = [k for k in backends.loaded() if k not in self._backends]
        if keep and missing:
            raise CaptureError(f"the {missing[0]} backend was first used inside the capture, "
                               f"so its work was not recorded: make one {missing[0]} tensor "
                               f"before capturing")

    # --- the recording proxy's calls -------------------------------------------------------
    def call(self, module, name, fn, args, kwargs):
        if name in HOST_READS:
            raise CaptureError(f"cannot capture {_op_name()} inside a graph capture "
                               f"(backend {name}): {HOST_READS[name]}; do it before the "
                               f"capture or after a replay")
        if name in DATA_DEPENDENT:
            raise CaptureError(f"cannot capture {_op_name()} inside a graph capture "
                               f"(backend {name}): {DATA_DEPENDENT[name]}")
        cuda = module.name == "cuda"
        if name.endswith("_"):  # in place: keep what it overwrites outside the pool
            for a in args:
                self._save(a.buf if isinstance(a, View) else a)
        if name in RANDOM:
            return self._random_call(cuda, fn, args, kwargs)
        first = len(self.steps)
        if cuda and name not in STEP_COUNT and name not in FIRST_STEP:
            out = fn(*args, **kwargs)  # its launches and copies are recorded by _Launches
        else:
            self._direct += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                self._direct -= 1
            self.add(_replayed_call(module, name, fn, args, kwargs, out), args, out)
            if name in STEP_COUNT and not kwargs:
                self.updates.append(Update(module, name, tuple(args), len(self.steps) - 1))
        if name in ("unary", "binary") and not kwargs:
            self.maps.append(Map.of(module, name, args, out, range(first, len(self.steps))))
        self._own(out)
        return out

    def add(self, step, *touched):
        """Append a step, with the buffers it touches (in ``touched``, nested in tuples,
        lists and Views), which the fusion pass reads."""
        self.steps.append(step)
        self.touches.append(extents(touched))

    def _random_call(self, cuda, fn, args, kwargs):
        n, seed, offset = args[:3]
        if seed != self._seed or not self._start <= offset < default_generator.offset:
            raise CaptureError(f"cannot capture {_op_name()}: it draws from a generator other "
                               f"than minigpu.default_generator, whose offset a replay "
                               f"cannot advance")
        relative = offset - self._start
        if cuda:
            self._random = (seed, offset, relative)
            try:
                out = fn(*args, **kwargs)
            finally:
                self._random = None
        else:
            out = fn(*args, **kwargs)
            rng, rest = self.rng, args[3:]

            def draw():
                np.copyto(out, fn(n, rng[0], rng[1] + relative, *rest, **kwargs))
            self.add(draw, out)
        self._own(out)
        return out

    def _own(self, out):
        for buf in out if isinstance(out, tuple) else (out,):
            if buf is not None and id(buf) not in self._owned:
                self._owned.add(id(buf))
                self.pool.append(buf)

    def _save(self, buf):
        """Keep a copy of an outside buffer (not a scalar, not the pool's) before a write."""
        if not (isinstance(buf, np.ndarray) or hasattr(buf, "copy_to_host")) \
                or id(buf) in self._owned or id(buf) in self._saved:
            return
        self._direct += 1
        try:
            self._saved[id(buf)] = (buf, _copy(buf))
        finally:
            self._direct -= 1


def _copy(buf):
    return buf.copy() if isinstance(buf, np.ndarray) else buf.copy_to_host()


def _restore(buf, copy):
    if isinstance(buf, np.ndarray):
        np.copyto(buf, copy)
    else:
        buf.copy_to_device(copy)


def _replayed_call(module, name, fn, args, kwargs, out):
    """The step that repeats one primitive call: its result copied into the buffer(s) the
    capture got (cpu), an optimizer's step count advanced, its first-step flag cleared."""
    args = list(args)
    if name in STEP_COUNT:
        index, first = STEP_COUNT[name], args[STEP_COUNT[name]]
        count = [first]

        def update():
            args[index] = count[0]
            fn(*args, **kwargs)
            count[0] += 1
        return update
    if name in FIRST_STEP:
        index = FIRST_STEP[name]

        def update():
            fn(*args, **kwargs)
            args[index] = False
        return update
    if out is None:
        return lambda: fn(*args, **kwargs)
    if module.name == "cpu" and name in ("unary", "binary") and not kwargs:
        lean = _lean_map(module.array, args, out)
        if lean is not None:
            return lean
    if isinstance(out, tuple):
        def into_all():
            for buf, new in zip(out, fn(*args, **kwargs)):
                if buf is not None:
                    np.copyto(buf, new)
        return into_all
    return _into(out, fn, args, kwargs)


def _lean_map(array, args, out):
    """The replay of a cpu ``unary``/``binary`` call as one pre-bound ufunc, or None where the
    call is not a plain map of :data:`LEAN_MAPS` on floats of the result's dtype."""
    op, views, params = args[0], args[1:], ()
    while views and not isinstance(views[-1], View):
        views, params = views[:-1], (views[-1],) + params
    ufunc = LEAN_MAPS.get(op)
    if ufunc is None or any(params) or out.dtype.kind != "f" \
            or any(v.dtype != out.dtype or v.shape != views[0].shape for v in views):
        return None
    operands = [array(v) for v in views] + ([0] if op == "relu" else [])
    target = out.reshape(views[0].shape)
    return functools.partial(ufunc, *operands, out=target)


def _into(out, fn, args, kwargs):
    def into():
        np.copyto(out, fn(*args, **kwargs))
    return into


class _Launches:
    """While a capture on the cuda device is open: every kernel launch and device copy the
    primitives make is recorded as a step. The launch seam is the configured kernel's call
    (numba-cuda's ``_LaunchConfiguration.__call__`` on a GPU, ``FakeCUDAKernel.__call__`` on
    the simulator, where minigpu's sanitizer runs it) and ``copy_to_device`` of the device
    array class; both are put back by :meth:`remove`."""

    def __init__(self, capture):
        self.capture = capture
        device = backends.cuda_module("device")
        self.stream = device.current_stream
        if device.SIMULATOR:
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray as array_class
            from numba.cuda.simulator.kernel import FakeCUDAKernel as kernel_class
        else:
            from numba.cuda.cudadrv.devicearray import DeviceNDArray as array_class
            from numba.cuda.dispatcher import _LaunchConfiguration as kernel_class
        self.simulator = bool(device.SIMULATOR)
        self.patched = [(kernel_class, "__call__", kernel_class.__call__),
                        (array_class, "copy_to_device", array_class.copy_to_device)]
        launch, copy = kernel_class.__call__, array_class.copy_to_device
        recorder = self

        def recorded_launch(kernel, *args):
            if recorder.from_host(kernel):
                if recorder.capture._direct:  # replayed by the primitive call around it
                    recorder.capture.launches += 1
                else:
                    recorder.launch(kernel, args)
            return launch(kernel, *args)

        def recorded_copy(array, ary, stream=0):
            if recorder.capture._direct == 0:
                recorder.capture.add(
                    lambda: array.copy_to_device(ary, stream=recorder.stream()), array)
            return copy(array, ary, stream=stream)

        kernel_class.__call__ = recorded_launch
        array_class.copy_to_device = recorded_copy

    def from_host(self, kernel):
        """A kernel launched from the host during the capture (a device function called from
        a kernel is not a launch)."""
        return _active is self.capture and not getattr(kernel, "_device", False) \
            and not _inside_kernel()

    def launch(self, kernel, args):
        """Record one launch. Its replay calls the configured kernel as an eager launch does
        (through the class's ``__call__`` of that moment: the sanitizer, the counters, a
        benchmark's launch counter, or another capture see it)."""
        capture = self.capture
        capture.launches += 1
        if self.simulator:  # the simulator keeps the configuration on the kernel object
            config = (kernel.grid_dim, kernel.block_dim, 0, kernel.dynshared_size)

            def run(args=args):
                kernel[config](*args)
        else:
            def run(args=args):
                kernel(*args)
        if capture._random is None:
            capture.add(run, args)
            return
        capture.add(_redrawn(run, args, capture._random, capture.rng), args)

    def remove(self):
        for owner, name, original in self.patched:
            setattr(owner, name, original)


def _inside_kernel():
    """True while a simulated kernel runs (its device-function calls go through the same
    ``__call__``)."""
    kernel = sys.modules.get("numba.cuda.simulator.kernel")
    return bool(kernel is not None and kernel._kernel_context)


def _redrawn(run, args, drawn, rng):
    """The launch of a random kernel, its counter and stream keys (the uint32 arguments made
    from the seed and offset, ``backends/cuda/random.py``) recomputed from the generator's
    seed and offset at replay time."""
    stream_key = backends.cuda_module("random").stream_key
    seed, offset, relative = drawn
    keys = {int(stream_key(seed, s)): s for s in range(3)}
    counter = offset & 0xFFFFFFFF
    marks = [(i, "counter" if int(a) == counter else keys[int(a)])
             for i, a in enumerate(args)
             if isinstance(a, np.uint32) and (int(a) == counter or int(a) in keys)]

    def draw():
        new = list(args)
        for i, mark in marks:
            new[i] = (np.uint32((rng[1] + relative) & 0xFFFFFFFF) if mark == "counter"
                      else stream_key(rng[0], mark))
        run(tuple(new))
    return draw
