"""Array proxies that observe every load and store: memcheck, initcheck, racecheck.

Inside a simulated kernel every array — a global argument, a ``cuda.shared.array``, a
``cuda.local.array`` — is an :class:`Array`: a thin proxy over the NumPy storage whose
``__getitem__``/``__setitem__`` (and the ``cuda.atomic.*`` functions) resolve the index to a
byte address, check it, and only then touch the NumPy array.

memcheck
    Every index must lie in ``[0, shape)`` — negative indices included: NumPy (and Numba on a
    GPU) wrap them silently, in a kernel that is almost always a bug. ``OutOfBoundsError``.
initcheck
    Fresh shared memory, local arrays and device memory (``cuda.device_array*``, minigpu's
    allocator) are filled with a poison bit pattern (:func:`fill_poison`): for 2/4/8-byte
    floats a NaN whose payload arithmetic never produces, for integers the same bits. A load
    that returns exactly that pattern is a read of a never-written element:
    ``UninitializedReadError``. Host writes need no tracking (they overwrite the pattern).
    1-byte and bool arrays are poisoned (0xA5 / True) but cannot be checked.
racecheck
    Each access is recorded in a shadow map keyed by byte address (so views and aliases of one
    buffer meet): the last write and up to two recent reads, each with the thread's logical
    clock (``blocks._Worker.tick``) and source line. Two accesses conflict when they come from
    different threads, at least one writes, and nothing orders them: same block and same
    barrier interval (and, for lanes of one warp, no ``syncwarp`` between), or — global memory
    only — different blocks of one launch. Atomics never conflict with each other. Shared
    memory has one map per block, global memory one per launch (launches are ordered).
    Because the verdict uses logical clocks, not the order the OS ran the threads, it does not
    depend on scheduling; a read that finds poison first waits until every other thread of its
    block is blocked or done, so a racing write in the same interval is reported as the race
    it is rather than as an uninitialised read.

The seam for performance counters: :data:`observers`. When it is non-empty every observed
access calls each observer with an :class:`Access` (kernel, array name and identity, memory
space, byte offset, itemsize, load/store/atomic, source site, thread and block ids). Nothing
here counts anything; ``counters.py`` does, with the launch and barrier events of
:func:`notify_event`. While an observer is installed the proxies are made even with the checks
off.
"""
from __future__ import annotations

import linecache
import re
import sys
import threading
from typing import NamedTuple

import numpy as np

from . import config
from .errors import LaunchConfigError, OutOfBoundsError, RaceError, UninitializedReadError
from .sites import Op, where

_current = threading.current_thread
_threads = threading._active  # thread id -> Thread: current_thread() without the call
_ident = threading.get_ident
_getframe = sys._getframe
_int = int
_tuple = tuple

STATIC_SHARED_LIMIT = 48 * 1024  # bytes of static shared memory per block without opt-in

# ----------------------------------------------------------------------------- poison

_POISON_BITS = {2: 0x7DA5, 4: 0x7FD5A5A5, 8: 0x7FFDA5A5A5A5A5A5}


def poison_of(dtype):
    """(kind, unsigned dtype, bits, value): how to recognise the poison of ``dtype``.
    kind 0: not recognisable; 1: a float (NaN first, then the bits); 2: an integer."""
    dtype = np.dtype(dtype)
    bits = _POISON_BITS.get(dtype.itemsize)
    if bits is None or dtype.kind not in "fiu" or not dtype.isnative:
        return 0, None, None, None
    udt = np.dtype(f"u{dtype.itemsize}")
    value = np.array([bits], udt).view(dtype)[0]
    return (1 if dtype.kind == "f" else 2), udt.type, udt.type(bits), value


def fill_poison(a):
    """Fill ``a`` (a fresh NumPy array) with its dtype's poison; return it."""
    kind = a.dtype.kind
    bits = _POISON_BITS.get(a.dtype.itemsize)
    if kind in "fiu" and bits is not None and a.dtype.isnative:
        a.view(f"u{a.dtype.itemsize}").fill(bits)
    elif kind == "c":
        fill_poison(a.view(f"f{a.dtype.itemsize // 2}"))
    elif kind == "b":
        a.fill(True)
    else:  # 1-byte integers, records and the like
        a.view(np.uint8).fill(0xA5)
    return a


# ----------------------------------------------------------------------------- observer seam


class Access(NamedTuple):
    """One observed load, store or atomic (what a performance counter would consume)."""
    kernel: str
    array: str          # parameter name, or the variable a shared/local array was bound to
    array_id: int       # address of the array's first element: equal for views of one buffer
    space: str          # "global", "shared" or "local"
    offset: int         # byte offset of the element from array_id
    itemsize: int
    kind: str           # "load", "store" or "atomic"
    site: tuple         # (file, line) of the access in the kernel or device function
    thread: tuple       # threadIdx (x, y, z)
    block: tuple        # blockIdx (x, y, z)


observers: list = []
"""Callables given an :class:`Access` for every observed access (empty: no cost)."""


def _notify(arr, addr, kind, t, depth):
    f = _getframe(depth)
    acc = Access(t.launch.name, arr.name, arr.root, arr.space, addr - arr.root, arr.itemsize,
                 kind, (f.f_code.co_filename, f.f_lineno), t.tidx, t.bidx)
    for obs in observers:
        obs(acc)


def notify_event(event, *args):
    """Call ``observer.<event>(*args)`` on each observer that has it: ``launch(name, grid,
    block)`` before a kernel launch's first block, ``end()`` after its last, ``barrier()`` for
    each completed block-level barrier (the counters of ``counters.py``)."""
    for obs in observers:
        hook = getattr(obs, event, None)
        if hook is not None:
            hook(*args)


# ----------------------------------------------------------------------------- the proxy


def _unordered(c, d):
    """True when accesses at clocks ``c`` and ``d`` (different threads) can happen in either
    order: different blocks, or one block's same barrier interval with no syncwarp between
    (lanes of one warp). Clock: (thread key, block ordinal, epoch, warp epoch, warp, ...)."""
    if c[1] != d[1]:
        return True
    if c[2] != d[2]:
        return False
    return c[4] != d[4] or c[3] == d[3]


class Array:
    """A global, shared or local array as a simulated kernel sees it (see the module doc)."""

    __slots__ = ("a", "name", "space", "shadow", "root", "ptr", "shape", "strides", "ndim",
                 "size", "dtype", "itemsize", "n0", "s0", "n1", "s1", "pk", "pu", "pbits", "pval")

    def __init__(self, a, name, space, shadow, root=None):
        self.a, self.name, self.space, self.shadow = a, name, space, shadow
        self.ptr = a.__array_interface__["data"][0]
        self.root = self.ptr if root is None else root
        self.shape, self.strides, self.ndim = a.shape, a.strides, a.ndim
        self.size, self.dtype, self.itemsize = a.size, a.dtype, a.dtype.itemsize
        self.n0 = a.shape[0] if a.ndim else 0
        self.s0 = a.strides[0] if a.ndim else 0
        self.n1 = a.shape[1] if a.ndim == 2 else -1  # -1: not 2-D (the 2-D fast path is off)
        self.s1 = a.strides[1] if a.ndim == 2 else 0
        self.pk, self.pu, self.pbits, self.pval = poison_of(a.dtype)

    # -- NumPy-ish surface a kernel uses -------------------------------------------------

    def __len__(self):
        return self.n0

    def __array__(self, dtype=None, copy=None):
        return self.a if dtype is None else self.a.astype(dtype)

    def __repr__(self):
        return f"<simulated {self.space} array '{self.name}' {self.shape} {self.dtype}>"

    @property
    def T(self):
        return Array(self.a.T, self.name, self.space, self.shadow, self.root)

    def reshape(self, *shape):
        return Array(self.a.reshape(*shape), self.name, self.space, self.shadow, self.root)

    def view(self, dtype):
        return Array(self.a.view(dtype), self.name, self.space, self.shadow, self.root)

    # -- index -> byte address -----------------------------------------------------------

    def _addr(self, idx):
        """Byte address of the element ``idx`` names, or None if it names a sub-array."""
        if type(idx) is _int:
            if self.ndim == 1:
                if 0 <= idx < self.n0:
                    return self.ptr + idx * self.s0
                self._oob(idx)
            if not 0 <= idx < self.n0:
                self._oob(idx)
            return None
        if type(idx) is _tuple and len(idx) == self.ndim:
            addr = self.ptr
            for k, i in enumerate(idx):
                if type(i) is not _int:
                    if isinstance(i, np.integer):
                        i = _int(i)
                    else:
                        return self._partial(idx)
                if not 0 <= i < self.shape[k]:
                    self._oob(idx)
                addr += i * self.strides[k]
            return addr
        if isinstance(idx, np.integer):
            return self._addr(_int(idx))
        return self._partial(idx)

    def _partial(self, idx):
        """A sub-array index (slices, fewer indices): check its integers, let NumPy do it."""
        for k, i in enumerate(idx if type(idx) is _tuple else (idx,)):
            if isinstance(i, (_int, np.integer)) and not 0 <= i < (
                    self.shape[k] if k < self.ndim else 0):
                self._oob(idx)
        return None

    def _wrap(self, r):
        return Array(r, self.name, self.space, self.shadow, self.root) \
            if isinstance(r, np.ndarray) and r.ndim else r

    # -- loads and stores ------------------------------------------------------------------

    def __getitem__(self, idx):
        if type(idx) is _int and self.ndim == 1 and 0 <= idx < self.n0:  # the common cases
            addr = self.ptr + idx * self.s0
        elif type(idx) is _tuple and len(idx) == 2 and type(idx[0]) is _int and \
                type(idx[1]) is _int and 0 <= idx[0] < self.n0 and 0 <= idx[1] < self.n1:
            addr = self.ptr + idx[0] * self.s0 + idx[1] * self.s1
        else:
            addr = self._addr(idx)
            if addr is None:
                return self._wrap(self.a[idx])
        v = self.a[idx]
        pk = self.pk
        if pk and (v == self.pval if pk == 2 else v != v and v.view(self.pu) == self.pbits):
            self._uninit(idx, addr)
        shadow = self.shadow
        if shadow is not None:
            c = _threads[_ident()].clk
            e = shadow.get(addr)
            if e is None:
                f = _getframe(1)
                shadow[addr] = [None, (c, f.f_code.co_filename, f.f_lineno), None]
            else:
                r1 = e[1]
                if r1 is None or r1[0] is not c:
                    self._read(e, c, idx)
        if observers:
            self._observe(addr, "load")
        return v

    def __setitem__(self, idx, value):
        if type(idx) is _int and self.ndim == 1 and 0 <= idx < self.n0:  # the common cases
            addr = self.ptr + idx * self.s0
        elif type(idx) is _tuple and len(idx) == 2 and type(idx[0]) is _int and \
                type(idx[1]) is _int and 0 <= idx[0] < self.n0 and 0 <= idx[1] < self.n1:
            addr = self.ptr + idx[0] * self.s0 + idx[1] * self.s1
        else:
            addr = self._addr(idx)
            if addr is None:
                self.a[idx] = value
                return
        shadow = self.shadow
        if shadow is not None:
            c = _threads[_ident()].clk
            e = shadow.get(addr)
            f = _getframe(1)
            rec = (c, f.f_code.co_filename, f.f_lineno, False)
            if e is None:
                shadow[addr] = [rec, None, None]
            else:
                w = e[0]
                if w is None or w[0] is not c or e[1] is not None:
                    self._write(e, rec, idx)
                else:  # the same thread rewriting in the same interval: nothing new
                    e[0] = rec
        self.a[idx] = value
        if observers:
            self._observe(addr, "store")

    def atomic(self, idx, update):
        """``cuda.atomic.*``: old = a[idx]; a[idx] = update(old); return old — as one
        indivisible step that never races with another atomic."""
        addr = self._addr(idx)
        if addr is None:
            raise TypeError(f"atomic on a sub-array of '{self.name}' (index {idx!r})")
        with _atomic_lock:
            old = self.a[idx]
            pk = self.pk
            poisoned = pk and (old == self.pval if pk == 2 else
                               old != old and old.view(self.pu) == self.pbits)
            if not poisoned:
                self._atomic_update(idx, addr, old, update)
        if poisoned:  # outside the lock: _uninit waits for the other threads
            self._uninit(idx, addr, depth=4)
        if observers:
            self._observe(addr, "atomic", 3)
        return old

    def _atomic_update(self, idx, addr, old, update):
        if self.shadow is not None:
            c = _current().clk
            f = _getframe(3)  # _atomic_update <- atomic <- Atomics op <- the kernel
            rec = (c, f.f_code.co_filename, f.f_lineno, True)
            e = self.shadow.get(addr)
            if e is None:
                self.shadow[addr] = [rec, None, None]
            else:
                self._write(e, rec, idx)
        self.a[idx] = update(old)

    def _observe(self, addr, kind, depth=3):
        _notify(self, addr, kind, _current(), depth)

    # -- racecheck slow paths -------------------------------------------------------------

    def _read(self, e, c, idx):
        f = _getframe(2)
        rec = (c, f.f_code.co_filename, f.f_lineno)
        w = e[0]
        if w is not None and w[0][0] is not c[0] and _unordered(c, w[0]):
            self._race(idx, w, "atomic write" if w[3] else "write", rec, "read")
        r1, r2 = e[1], e[2]
        if r1 is None or r1[0][0] is c[0]:
            e[1] = rec
        elif r2 is None or r2[0][0] is c[0]:
            e[2] = rec
        elif not _unordered(c, r1[0]):  # r1 is ordered before this read: the older witness
            e[1] = rec
        else:
            e[2] = rec

    def _write(self, e, rec, idx):
        c, atomic = rec[0], rec[3]
        what = "atomic write" if atomic else "write"
        w = e[0]
        if w is not None and w[0][0] is not c[0] and not (atomic and w[3]) \
                and _unordered(c, w[0]):
            self._race(idx, w, "atomic write" if w[3] else "write", rec, what)
        for r in (e[1], e[2]):
            if r is not None and r[0][0] is not c[0] and _unordered(c, r[0]):
                self._race(idx, r, "read", rec, what)
        e[0], e[1], e[2] = rec, None, None

    def _race(self, idx, first, first_kind, second, second_kind):
        c1, c2 = first[0], second[0]
        why = ("from different blocks of one launch (nothing orders blocks; use separate "
               "launches or atomics)" if c1[1] != c2[1] else
               "in the same barrier interval (no syncthreads() between them" +
               (", and no syncwarp()" if c1[4] == c2[4] else "") + ")")
        kind = {("write", "write"): "write-after-write", ("read", "write"): "write-after-read",
                ("write", "read"): "read-after-write"}.get(
            (first_kind.split()[-1], second_kind.split()[-1]), "")
        raise RaceError(
            f"kernel '{_current().launch.name}': {kind} race on {self._describe(idx)}:\n"
            f"  {first_kind} by thread {c1[5]} of block {c1[6]} at {first[1]}:{first[2]}\n"
            f"  {second_kind} by thread {c2[5]} of block {c2[6]} at {second[1]}:{second[2]}\n"
            f"  {why}.")

    def _uninit(self, idx, addr, depth=3):
        t = _current()
        f = _getframe(depth - 1)
        here = f"{f.f_code.co_filename}:{f.f_lineno}"
        if self.shadow is not None and t.block is not None:
            # Let the rest of the block run: a concurrent write to this element is a race.
            t.block.wait(t, Op("quiesce", 0, None, None, ((f.f_code.co_filename, f.f_lineno,
                                                            f.f_code.co_name),)))
            e = self.shadow.get(addr)
            w = e[0] if e is not None else None
            if w is not None and w[0][0] is not t.clk[0] and _unordered(t.clk, w[0]):
                self._race(idx, w, "atomic write" if w[3] else "write",
                           (t.clk, f.f_code.co_filename, f.f_lineno), "read")
        raise UninitializedReadError(
            f"kernel '{t.launch.name}': thread {t.tidx} of block {t.bidx} read "
            f"{self._describe(idx)} at {here}, but nothing has written that element since it "
            f"was allocated (it holds the simulator's poison pattern).")

    def _oob(self, idx):
        t = _current()
        f = _getframe(3)
        while f is not None and f.f_code.co_filename == __file__:
            f = f.f_back
        here = f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "<unknown>"
        neg = any(isinstance(i, (_int, np.integer)) and i < 0
                  for i in (idx if type(idx) is _tuple else (idx,)))
        hint = (" (negative: NumPy and Numba wrap it around silently; in a kernel it is almost "
                "always a bug)" if neg else "")
        raise OutOfBoundsError(
            f"kernel '{getattr(getattr(t, 'launch', None), 'name', '?')}': thread "
            f"{getattr(t, 'tidx', '?')} of block {getattr(t, 'bidx', '?')} indexed "
            f"{self._describe(idx)} at {here}: out of bounds{hint}.")

    def _describe(self, idx):
        kind = {"global": "global array", "shared": "shared array", "local": "local array"}
        return (f"{kind[self.space]} '{self.name}' at index {idx!r} "
                f"(shape {tuple(self.shape)}, {self.dtype})")


_atomic_lock = threading.RLock()


# ----------------------------------------------------------------------------- cuda.atomic


def _atomic(update):
    def op(self, array, index, val):
        if isinstance(array, Array):
            return array.atomic(index, lambda old: update(old, val))
        with _atomic_lock:
            old = array[index]
            array[index] = update(old, val)
        return old
    return op


def _inc(old, val):
    return 0 if old >= val else old + 1


def _dec(old, val):
    return val if old == 0 or old > val else old - 1


class Atomics:
    """``cuda.atomic`` for the simulator: every read-modify-write goes through the proxy."""
    add = _atomic(lambda old, v: old + v)
    sub = _atomic(lambda old, v: old - v)
    and_ = _atomic(lambda old, v: old & v)
    or_ = _atomic(lambda old, v: old | v)
    xor = _atomic(lambda old, v: old ^ v)
    inc = _atomic(_inc)
    dec = _atomic(_dec)
    exch = _atomic(lambda old, v: v)
    max = _atomic(lambda old, v: max(old, v))
    min = _atomic(lambda old, v: min(old, v))
    nanmax = _atomic(lambda old, v: np.nanmax([old, v]))
    nanmin = _atomic(lambda old, v: np.nanmin([old, v]))

    def cas(self, array, index, old, val):
        return _atomic(lambda cur, v: v if cur == old else cur)(self, array, index, val)

    def compare_and_swap(self, array, old, val):
        return self.cas(array, (0,) * len(array.shape), old, val)


# ----------------------------------------------------------------------------- shared / local

_NAME = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=\s*")


def _name_at(frame, fallback):
    """The variable an array is bound to on the caller's source line (``tile = cuda...``)."""
    m = _NAME.match(linecache.getline(frame.f_code.co_filename, frame.f_lineno))
    return m.group(1) if m else fallback


def _dtype(dtype, kernelapi):
    if isinstance(dtype, kernelapi.types.Type):
        dtype = kernelapi.numpy_support.as_dtype(dtype)
    return np.dtype(dtype)


def reset_shared(shared, launch):
    """Fresh, poisoned shared memory (and a fresh race map) for the next block."""
    with _shared_lock:
        shared._allocations.clear()
        shared._static_bytes = 0
    launch.shared_shadow = {} if config.CHECKS else None
    buf = shared._dynshared
    if buf.size:
        words = np.full((buf.size + 3) // 4, _POISON_BITS[4], dtype="<u4").view(np.uint8)
        buf.view(np.uint8)[:] = words[:buf.size]


_shared_lock = threading.Lock()
kernelapi = None  # numba's simulator kernelapi, set by install()


def shared_array(self, shape, dtype, alignment=None):
    """``cuda.shared.array``: one poisoned array per source line and block."""
    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    dtype = _dtype(dtype, kernelapi)
    caller = _getframe(1)
    t = _current()
    launch = getattr(t, "launch", None)
    if shape == 0:  # dynamic shared memory: views of one buffer
        count = self._dynshared_size // dtype.itemsize
        a = np.frombuffer(self._dynshared.data, dtype=dtype, count=count)
        if not (config.CHECKS or observers) or launch is None:
            return a
        return Array(a, _name_at(caller, "dynamic shared"), "shared", launch.shared_shadow)
    key = (caller.f_code.co_filename, caller.f_lineno)
    with _shared_lock:
        arr = self._allocations.get(key)
        if arr is None:
            a = fill_poison(np.empty(shape, dtype))
            self._static_bytes = getattr(self, "_static_bytes", 0) + a.nbytes
            total = self._static_bytes + self._dynshared_size
            if total > STATIC_SHARED_LIMIT:
                raise LaunchConfigError(
                    f"kernel '{getattr(launch, 'name', '?')}': {total} bytes of shared memory "
                    f"per block (this array: {a.nbytes} bytes at {where((key + ('',),))}); "
                    f"a block may use at most {STATIC_SHARED_LIMIT} bytes (48 KiB).")
            arr = a
            if (config.CHECKS or observers) and launch is not None:
                arr = Array(a, _name_at(caller, "shared"), "shared", launch.shared_shadow)
            self._allocations[key] = arr
    return arr


def local_array(self, shape, dtype, alignment=None):
    """``cuda.local.array``: a poisoned per-thread array (bounds- and init-checked)."""
    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    a = fill_poison(np.empty(shape, _dtype(dtype, kernelapi)))
    if not config.CHECKS:
        return a
    return Array(a, _name_at(_getframe(1), "local"), "local", None)


def global_array(a, name, launch):
    """What a kernel sees for a device-array argument ``a`` (a NumPy array)."""
    if not (config.CHECKS or observers) or a.dtype.fields is not None:
        return a
    return Array(a, name, "global", launch.shadow)
