"""Array proxies that observe every load and store: memcheck, initcheck, racecheck.

Inside a simulated kernel every array — a global argument, a ``cuda.shared.array``, a
``cuda.local.array`` — is an :class:`Array`: a thin proxy over the NumPy storage whose
``__getitem__``/``__setitem__`` (and the ``cuda.atomic.*`` functions) resolve the index to a
byte address, check it, and only then touch the NumPy array.

Every verdict comes from ``rules.py`` (the rules, in one place); this module applies them.

memcheck
    Every index must lie in ``[0, shape)``. A negative one wraps, as Numba wraps it on a GPU,
    when the source writes a literal or constant there (``rules.negative_index_is_constant``);
    computed, a store raises ``OutOfBoundsError`` and a load gives the wrapped element as an
    indeterminate value whose use raises it (:meth:`Array._wrapped_load`).
initcheck
    Fresh shared memory, local arrays and device memory (``cuda.device_array*``, minigpu's
    allocator) are filled with a poison bit pattern (:func:`fill_poison`): for 2/4/8-byte
    floats a NaN whose payload arithmetic never produces, for integers the same bits. A load
    that returns exactly that pattern gives an ``Indeterminate`` (``indeterminate.py``); using
    it raises ``UninitializedReadError``. Storing one puts the poison back and records the
    value in ``taint`` (per launch for global memory, per block for shared): a read by another
    thread, or a global element still holding it when the launch ends (:func:`check_kept`), is
    the use. Host writes need no tracking (they overwrite the pattern). 1-byte and bool arrays
    are poisoned (0xA5 / True) but cannot be checked.
racecheck
    Each access is recorded in a shadow map keyed by byte address (so views and aliases of one
    buffer meet): the last write, up to two recent reads, the same-value stores since that
    write and, when the last write is an atomic, an earlier atomic of another thread, each with
    the thread's logical clock (``blocks._Thread.tick``) and source line.
    ``rules.unordered`` decides whether two accesses of different threads can happen in either
    order; a conflict (at least one writes) is a ``RaceError`` unless it is a store of the
    bytes already there (``rules.same_value_store``). Atomics never conflict with each other.
    Shared memory has one map per block, global memory one per launch (launches are ordered).
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

import functools
import linecache
import re
import sys
import threading
from typing import NamedTuple

import numpy as np
from greenlet import getcurrent

from . import config, rules
from .errors import LaunchConfigError, OutOfBoundsError, RaceError
from .indeterminate import Indeterminate
from .rules import (atomic_release, plain_read_of_atomics_is_benign, same_value_store,
                    unordered)
from .sites import Op, _internal, where

_current = getcurrent  # the simulated thread (blocks._Thread) running the kernel
SPIN_LOADS = 10_000  # loads and atomics of a thread without a wait before it lets others run
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



def _store(a, idx, value):
    """``a[idx] = value`` as the hardware stores: an integer too wide for an integer element
    keeps its low bits (a Python int 200 into int8 is -56; NumPy would raise OverflowError)."""
    try:
        a[idx] = value
    except OverflowError:
        a[idx] = np.array(value).astype(a.dtype)


def _plain(x):
    """The NumPy array behind a proxy (recursively in tuples and lists), else ``x``."""
    if type(x) is Array:
        return x.a
    if type(x) in (tuple, list):
        return type(x)(_plain(v) for v in x)
    return x


class Array:
    """A global, shared or local array as a simulated kernel sees it (see the module doc).

    Element loads and stores (``a[i]``, ``a[i, j]``, ``cuda.atomic.*``) are checked. Everything
    else behaves as the stock simulator's array: NumPy's attributes and methods, the NumPy
    protocols (``__array__``, ``__array_ufunc__``, ``__array_function__``), operators,
    iteration, and what the stock ``FakeCUDAArray`` adds (``copy_to_host``, ``nbytes``, ...).
    A view (slicing, ``reshape``, ``T``, ``real``/``imag``, ...) is a checked proxy of the same
    memory; a whole-array NumPy operation runs on the storage unchecked, as in the stock
    simulator."""

    __slots__ = ("a", "name", "space", "shadow", "root", "ptr", "shape", "strides", "ndim",
                 "size", "dtype", "itemsize", "n0", "s0", "n1", "s1", "pk", "pu", "pbits", "pval",
                 "taint", "shared_by_threads", "field")

    __cuda_ndarray__ = True  # as the stock FakeCUDAArray

    def __init__(self, a, name, space, shadow, root=None, taint=None):
        self.a, self.name, self.space, self.shadow = a, name, space, shadow
        self.shared_by_threads = space != "local"
        self.ptr = a.__array_interface__["data"][0]
        self.root = self.ptr if root is None else root
        self.shape, self.strides, self.ndim = a.shape, a.strides, a.ndim
        self.size, self.dtype, self.itemsize = a.size, a.dtype, a.dtype.itemsize
        self.n0 = a.shape[0] if a.ndim else 0
        self.s0 = a.strides[0] if a.ndim else 0
        self.n1 = a.shape[1] if a.ndim == 2 else -1  # -1: not 2-D (the 2-D fast path is off)
        self.s1 = a.strides[1] if a.ndim == 2 else 0
        self.pk, self.pu, self.pbits, self.pval = poison_of(a.dtype)
        # address -> (Indeterminate, storing thread's key, store site, array, index, thread
        # and block ids): elements holding a stored indeterminate value (one dict per launch
        # for global memory, per block for shared, per array for local; _store_indeterminate)
        self.taint = taint
        self.field = None  # the record field this array is a view of (RecordArray.field)

    # -- the array surface: NumPy's, and the stock simulator's ------------------------------

    def __getattr__(self, name):
        """Any other attribute of the NumPy array; results that are views stay checked."""
        if name in Array.__slots__:  # an unset slot: not an attribute of the array
            raise AttributeError(name)
        attr = getattr(self.a, name)
        if callable(attr) and not isinstance(attr, (type, np.dtype)):
            return functools.partial(self._call, attr)
        return self._view(attr)

    def _call(self, method, *args, **kwargs):
        return self._view(method(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()}))

    def _view(self, r):
        """``r`` as a checked proxy when it is an array sharing this array's memory."""
        if isinstance(r, np.ndarray) and r.size and np.may_share_memory(r, self.a):
            return type(self)(r, self.name, self.space, self.shadow, self.root, self.taint)
        return r

    def __len__(self):
        return len(self.a)

    def __iter__(self):
        for i in range(len(self.a)):
            yield self[i]

    def __contains__(self, value):
        return value in self.a

    def __array__(self, dtype=None, copy=None):
        if copy:
            return np.array(self.a, dtype=dtype, copy=True)
        return self.a if dtype is None else self.a.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *args, **kwargs):
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_plain(o) for o in out)
        result = getattr(ufunc, method)(*_plain(args), **kwargs)
        if out is not None:  # a ufunc returns its out arrays: give back the proxies
            plain = kwargs["out"]
            if type(result) is tuple:
                return tuple(o if r is p else r for r, p, o in zip(result, plain, out))
            return out[0] if result is plain[0] else result
        return result

    def __array_function__(self, func, types, args, kwargs):
        return self._view(func(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()}))

    @property
    def __cuda_array_interface__(self):
        return {"shape": tuple(self.shape), "strides": tuple(self.strides),
                "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3}

    @property
    def nbytes(self):
        return self.a.nbytes

    alloc_size = nbytes

    @property
    def T(self):
        return self._view(self.a.T)

    @property
    def real(self):
        return self._view(self.a.real)

    @property
    def imag(self):
        return self._view(self.a.imag)

    def transpose(self, *axes):
        return self._view(self.a.transpose(*axes))

    def reshape(self, *shape, **kwargs):
        return self._view(self.a.reshape(*shape, **kwargs))

    def view(self, *args, **kwargs):
        return self._view(self.a.view(*args, **kwargs))

    def ravel(self, *args, **kwargs):
        return self._view(self.a.ravel(*args, **kwargs))

    def is_c_contiguous(self):
        return self.a.flags.c_contiguous

    def is_f_contiguous(self):
        return self.a.flags.f_contiguous

    def bind(self, stream=0):
        return self

    def split(self, section, stream=0):
        return [self._view(p) for p in np.split(self.a, range(section, len(self), section))]

    def copy_to_host(self, ary=None, stream=0):
        if ary is None:
            return self.a.copy()
        np.copyto(ary, self.a)
        return ary

    def copy_to_device(self, ary, stream=0):
        np.copyto(self.a, _plain(ary))

    @property
    def _numba_type_(self):
        from numba.cuda import types
        from numba.cuda.np import numpy_support
        layout = "C" if self.a.flags.c_contiguous else "F" if self.a.flags.f_contiguous else "A"
        return types.Array(numpy_support.from_dtype(self.dtype), self.ndim, layout)

    def __repr__(self):
        return f"<simulated {self.space} array '{self.name}' {self.shape} {self.dtype}>"

    def __str__(self):
        return str(self.a)

    def __format__(self, spec):
        return format(self.a, spec)

    def __int__(self):
        return int(self.a)

    def __float__(self):
        return float(self.a)

    def __complex__(self):
        return complex(self.a)

    def __index__(self):
        return self.a.__index__()

    def __copy__(self):
        return self.a.copy()

    def __deepcopy__(self, memo):
        return self.a.copy()

    __hash__ = object.__hash__

    # -- index -> byte address (memcheck) ------------------------------------------------

    def _addr(self, idx):
        """Byte address of the element ``idx`` names, or None if it names a sub-array. An
        index outside ``[0, shape)`` wraps or raises by the negative-index rule
        (``rules.negative_index_is_constant``)."""
        parts = idx if type(idx) is _tuple else (idx,)
        if len(parts) > self.ndim:
            return None  # NumPy raises its own IndexError
        addr, full = self.ptr, len(parts) == self.ndim
        for k, i in enumerate(parts):
            if type(i) is not _int:
                if isinstance(i, (np.integer, bool)) and not isinstance(i, np.bool_):
                    i = _int(i)
                elif type(i) is Indeterminate:
                    i.use(f"used as an index of {self._describe(idx)}")
                elif i is Ellipsis or i is None:
                    return None  # the positions no longer match the dimensions
                else:
                    full = False
                    continue
            n = self.shape[k]
            if not 0 <= i < n:
                i = self._outside(idx, k, i, n)
            addr += i * self.strides[k]
        return addr if full else None

    def _outside(self, idx, k, i, n):
        """An index ``i`` outside ``[0, n)`` at dimension ``k``: the wrapped index when it is a
        negative literal or constant (as Numba wraps it on a GPU), else ``OutOfBoundsError``."""
        f = _user_frame()
        if -n <= i < 0 and f is not None and rules.negative_index_is_constant(f, k):
            return i + n
        t = _current()
        here = f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "<unknown>"
        who = (f"kernel '{getattr(getattr(t, 'launch', None), 'name', '?')}': thread "
               f"{getattr(t, 'tidx', '?')} of block {getattr(t, 'bidx', '?')}")
        rule = (f"a computed negative index, which Numba wraps around to {i + n}; a negative "
                f"index is accepted only where the source writes a literal or a constant, as in "
                f"`a[-1]` (a computed one is almost always a bug)")
        if -n <= i < 0:
            hint = f" ({rule})"
        elif i < 0:
            hint = " (negative, and beyond the start even when wrapped around)"
        else:
            hint = ""
        error = OutOfBoundsError(f"{who} indexed {self._describe(idx)} at {here}: out of "
                                 f"bounds{hint}.")
        if -n <= i < 0:  # a load may go on with the wrapped element (_wrapped_load)
            error.wrapped = (k, i + n)
            error.load_text = f"{who} read {self._describe(idx)} at {here}: {rule}"
        raise error

    def _wrap(self, r):
        return type(self)(r, self.name, self.space, self.shadow, self.root, self.taint) \
            if isinstance(r, np.ndarray) and r.ndim else r

    # -- loads and stores ------------------------------------------------------------------

    def __getitem__(self, idx, depth=1):
        """``a[idx]``; ``depth``: how many frames up the kernel's line is (1: the caller; a
        record's field access passes 2, its own frame being in between)."""
        if self.shared_by_threads:  # before the load: no thread runs between it and its check
            t = _count_towards_spin()
        if type(idx) is _int and self.ndim == 1 and 0 <= idx < self.n0:  # the common cases
            addr = self.ptr + idx * self.s0
        elif type(idx) is _tuple and len(idx) == 2 and type(idx[0]) is _int and \
                type(idx[1]) is _int and 0 <= idx[0] < self.n0 and 0 <= idx[1] < self.n1:
            addr = self.ptr + idx[0] * self.s0 + idx[1] * self.s1
        else:
            try:
                addr = self._addr(idx)
            except OutOfBoundsError as e:
                if getattr(e, "wrapped", None) is None:
                    raise
                return self._wrapped_load(idx, e)
            if addr is None:
                return self._wrap(self.a[_plain(idx)])
        v = self.a[idx]
        pk = self.pk
        if pk and (v == self.pval if pk == 2 else v != v and v.view(self.pu) == self.pbits):
            v = self._uninit(idx, addr, depth + 2)
        shadow = self.shadow
        if shadow is not None:  # global or shared memory (a local array has no shadow)
            c = t.clk
            e = shadow.get(addr)
            if e is None:
                f = _getframe(depth)
                shadow[addr] = [None, (c, f.f_code.co_filename, f.f_lineno), None, None, None]
            else:
                r1 = e[1]
                if r1 is None or r1[0] is not c:
                    self._read(e, c, idx, depth)
        if observers:
            self._observe(addr, "load", depth + 2)
        return v

    def __setitem__(self, idx, value, depth=1):
        if type(idx) is _int and self.ndim == 1 and 0 <= idx < self.n0:  # the common cases
            addr = self.ptr + idx * self.s0
        elif type(idx) is _tuple and len(idx) == 2 and type(idx[0]) is _int and \
                type(idx[1]) is _int and 0 <= idx[0] < self.n0 and 0 <= idx[1] < self.n1:
            addr = self.ptr + idx[0] * self.s0 + idx[1] * self.s1
        else:
            addr = self._addr(idx)
            if addr is None:
                _store(self.a, _plain(idx), _plain(value))
                return
        if type(value) is Indeterminate:  # judged by the use rule, not by racecheck
            self.a[idx] = self._store_indeterminate(idx, value, addr, depth)
            if observers:
                self._observe(addr, "store", depth + 2)
            return
        shadow = self.shadow
        if shadow is not None:
            c = _current().clk
            f = _getframe(depth)
            rec = (c, f.f_code.co_filename, f.f_lineno, False)
            # Racecheck's verdict and the store are one step: no other simulated thread runs
            # between them (threads switch only where they wait, blocks.py).
            e = shadow.get(addr)
            if e is None:
                shadow[addr] = [rec, None, None, None, None]
            else:
                w = e[0]
                if w is None or w[0] is not c or e[1] is not None or e[3] is not None \
                        or e[4] is not None:
                    self._write(e, rec, idx, value)
                else:  # the same thread rewriting in the same interval: nothing new
                    e[0] = rec
            _store(self.a, idx, value)
        else:
            _store(self.a, idx, value)
        if observers:
            self._observe(addr, "store", depth + 2)

    def _store_indeterminate(self, idx, value, addr, depth=1):
        """A store of an indeterminate value: the element holds the poison pattern again and
        remembers the value (``taint``), so that a read by another thread, or the element
        still holding it when the kernel ends (global memory), is the use it is. (Such a store
        is not a write for racecheck: until it is used, no order of it can be observed.)"""
        if not self.pk:  # a dtype without a recognisable poison: the store is the use
            value.use(f"stored to {self._describe(idx)}")
        t = _current()
        f = _getframe(depth + 1)
        self.taint[addr] = (value, t.clk[0], f"{f.f_code.co_filename}:{f.f_lineno}", self, idx,
                            t.tidx, t.bidx, self.a[idx])
        return self.pval

    def _wrapped_load(self, idx, error):
        """A load at a computed negative index: the element Numba's wrap-around reads, as an
        indeterminate value whose use raises ``error``'s ``OutOfBoundsError``."""
        k, j = error.wrapped
        parts = list(idx) if type(idx) is _tuple else [idx]
        parts[k] = j
        v = self[_tuple(parts) if type(idx) is _tuple else j]
        if type(v) is Array:  # a sub-array: nothing to carry the taint, so the load is the use
            raise error
        return Indeterminate(v.value if type(v) is Indeterminate else v, error.load_text,
                             OutOfBoundsError)

    def poisoned(self, v):
        """True when the loaded value ``v`` holds this dtype's poison pattern."""
        pk = self.pk
        return bool(pk and (v == self.pval if pk == 2 else
                            v != v and v.view(self.pu) == self.pbits))

    def atomic(self, idx, update, val=None):
        """``cuda.atomic.*``: old = a[idx]; a[idx] = update(old); return old — as one
        indivisible step that never races with another atomic."""
        addr = self._addr(idx)
        if addr is None:
            raise TypeError(f"atomic on a sub-array of '{self.name}' (index {idx!r})")
        if type(val) is Indeterminate:
            val.use(f"given to an atomic on {self._describe(idx)}")
        _count_towards_spin()
        with _atomic_lock:
            old = self.a[idx]
            pk = self.pk
            poisoned = pk and (old == self.pval if pk == 2 else
                               old != old and old.view(self.pu) == self.pbits)
            if not poisoned:
                self._atomic_update(idx, addr, old, update)
        if poisoned:  # outside the lock: _uninit waits for the other threads
            self._uninit(idx, addr, depth=4).use("updated by an atomic (its old value)")
        if observers:
            self._observe(addr, "atomic", 3)
        return old

    def _atomic_update(self, idx, addr, old, update):
        if self.shadow is not None:
            t = _current()
            key = ("release", addr)  # the element's record of fenced releases (rules.fence)
            releases = self.shadow.get(key)
            new = atomic_release(t, releases)
            if new is not releases:
                self.shadow[key] = new
            c = t.clk
            f = _getframe(3)  # _atomic_update <- atomic <- Atomics op <- the kernel
            rec = (c, f.f_code.co_filename, f.f_lineno, True)
            e = self.shadow.get(addr)
            if e is None:
                self.shadow[addr] = [rec, None, None, None, None]
            else:
                self._write(e, rec, idx, None)
        self.a[idx] = update(old)

    def _observe(self, addr, kind, depth=3):
        _notify(self, addr, kind, _current(), depth)

    # -- racecheck slow paths -------------------------------------------------------------

    def _read(self, e, c, idx, depth=1):
        f = _getframe(depth + 1)
        rec = (c, f.f_code.co_filename, f.f_lineno)
        w = e[0]
        if w is not None and w[0][0] is not c[0] and unordered(c, w[0]) and not (
                e[3] is not None and not w[3] and any(o[0] is c for o in e[3])) and not (
                w[3] and plain_read_of_atomics_is_benign(self.space)):
            # (benign when this thread stored the same value here in this interval: every
            # store since w wrote w's bytes, so the read sees them in any order)
            self._race(idx, w, "atomic write" if w[3] else "write", rec, "read")
        rival = e[4]
        if rival is not None and rival[0][0] is not c[0] and unordered(c, rival[0]) and \
                not plain_read_of_atomics_is_benign(self.space):
            self._race(idx, rival, "atomic write", rec, "read")
        r1, r2 = e[1], e[2]
        if r1 is None or r1[0][0] is c[0]:
            e[1] = rec
        elif r2 is None or r2[0][0] is c[0]:
            e[2] = rec
        elif not unordered(c, r1[0]):  # r1 is ordered before this read: the older witness
            e[1] = rec
        else:
            e[2] = rec

    def _write(self, e, rec, idx, value):
        """Record a write (``value`` None: atomic); raise on a conflict with an unordered
        access of another thread. A plain store of the bytes the element already holds
        (``rules.same_value_store``) conflicts only with an atomic; it is kept apart (``e[3]``,
        a list)
        so that a later store of another value, which it does race, is checked against it.
        An atomic over another thread's unordered atomic keeps that one (``e[4]``, always of
        another thread than ``e[0]``'s): a plain access later in the interval races with
        both, whichever thread the OS ran last."""
        c, atomic = rec[0], rec[3]
        w, same = e[0], e[3]

        def conflicts(other):
            return other is not None and other[0][0] is not c[0] and unordered(c, other[0])

        what = "atomic write" if atomic else "write"
        rival = e[4]
        if not atomic and self._same_value(idx, value):
            for other in (w, rival):
                if other is not None and other[3] and conflicts(other):
                    self._race(idx, other, "atomic write", rec, what)
            if same is None:
                e[3] = [rec]
            else:
                same.append(rec)
            return
        if conflicts(w) and not (atomic and w[3]):
            self._race(idx, w, "atomic write" if w[3] else "write", rec, what)
        if conflicts(rival) and not atomic:
            self._race(idx, rival, "atomic write", rec, what)
        for other in same or ():
            if conflicts(other):
                self._race(idx, other, "write", rec, what)
        reads_stay = atomic and plain_read_of_atomics_is_benign(self.space)
        if not reads_stay:
            for r in (e[1], e[2]):
                if conflicts(r):
                    self._race(idx, r, "read", rec, what)
        if atomic and w is not None and w[3] and conflicts(w):
            rival = w
        elif not atomic or w is None or w[0][0] is not c[0]:
            rival = None
        if not reads_stay:  # (kept past an atomic: a later plain store still races them)
            e[1] = e[2] = None
        e[0], e[3], e[4] = rec, None, rival

    def _same_value(self, idx, value):
        """Would storing ``value`` at ``idx`` leave the element's bytes as they are? (Over an
        indeterminate value stored there, the bytes before it: racecheck never saw it.)"""
        old = self.a[idx]
        if self.taint and self.poisoned(old):
            stored = self.taint.get(self._addr(idx))
            if stored is not None:
                old = stored[7]
        try:
            new = self.dtype.type(value)
        except (TypeError, ValueError, OverflowError):  # let the store itself raise or cast
            new = np.empty((), self.dtype)
            new[()] = value
        return bool(new == old or new != new) and same_value_store(old, new)  # NaN: the bits

    def _race(self, idx, first, first_kind, second, second_kind):
        c1, c2 = first[0], second[0]
        why = ("from different blocks of one launch (nothing orders blocks; use separate "
               "launches or atomics)" if c1[1] != c2[1] else
               "in the same barrier interval (no syncthreads() between them" +
               (", and no syncwarp()" if c1[4] == c2[4] else "") + ")")
        kind = {("write", "write"): "write-after-write", ("read", "write"): "write-after-read",
                ("write", "read"): "read-after-write"}.get(
            (first_kind.split()[-1], second_kind.split()[-1]), "")
        extra = "; the two stores write different values" if kind == "write-after-write" else ""
        raise RaceError(
            f"kernel '{_current().launch.name}': {kind} race on {self._describe(idx)}:\n"
            f"  {first_kind} by thread {c1[5]} of block {c1[6]} at {first[1]}:{first[2]}\n"
            f"  {second_kind} by thread {c2[5]} of block {c2[6]} at {second[1]}:{second[2]}\n"
            f"  {why}{extra}.")

    def _uninit(self, idx, addr, depth=3):
        """A load found the poison pattern: first let the rest of the block run (a write to
        this element by another thread of this interval is the race it is), then return the
        indeterminate value (``indeterminate.py``: an error when it is used)."""
        t = _current()
        f = _getframe(depth - 1)
        here = f"{f.f_code.co_filename}:{f.f_lineno}"
        stored = self.taint.get(addr) if self.taint else None
        if stored is not None:  # an indeterminate value a thread stored here
            value, key, at, _, _, tidx, bidx, _ = stored
            if key is not t.clk[0] and key != t.clk[0]:
                value.use(f"stored to {self._describe(idx)} at {at} by thread {tidx} of block "
                          f"{bidx}, and read there by thread {t.tidx} of block {t.bidx}",
                          at=here)
            return value
        if self.shadow is not None and t.block is not None:
            t.block.wait(t, Op("quiesce", 0, None, None, ((f.f_code.co_filename, f.f_lineno,
                                                            f.f_code.co_name),)))
            e = self.shadow.get(addr)
            w = e[0] if e is not None else None
            if w is not None and w[0][0] is not t.clk[0] and unordered(t.clk, w[0]) and not (
                    w[3] and plain_read_of_atomics_is_benign(self.space)):
                self._race(idx, w, "atomic write" if w[3] else "write",
                           (t.clk, f.f_code.co_filename, f.f_lineno), "read")
        return Indeterminate(self.a[idx], (
            f"kernel '{t.launch.name}': thread {t.tidx} of block {t.bidx} read "
            f"{self._describe(idx)} at {here}, but nothing has written that element since it "
            f"was allocated (it holds the simulator's poison pattern)"))

    def _describe(self, idx):
        kind = {"global": "global array", "shared": "shared array", "local": "local array",
                "const": "constant array"}
        field = "" if self.field is None else f", field '{self.field}'"
        dtype = self.dtype if self.dtype.fields is None else "record(" + ", ".join(
            f"{name} {self.dtype.fields[name][0]}" for name in self.dtype.names) + ")"
        return (f"{kind[self.space]} '{self.name}' at index {idx!r}{field} "
                f"(shape {tuple(self.shape)}, {dtype})")


class RecordArray(Array):
    """A record (structured) array in a kernel, such as the states of ``numba.cuda.random``:
    ``a[i]`` checks the index (memcheck) and gives a :class:`Record`, a reference to the
    element as Numba's record is, whose field loads and stores are checked like any element's:
    each field is an element of its own for racecheck, at its own byte address."""

    __slots__ = ("fields",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields = {}  # field name -> the checked array of that field (a view)

    def field_array(self, name):
        view = self.fields.get(name)
        if view is None:
            view = self.fields[name] = checked_array(self.a[name], self.name, self.space,
                                                     self.shadow, self.root, self.taint)
            view.field = name
        return view

    def __getattr__(self, name):
        """``a.value1``: the field as a checked array of its own (``a.value1[i]``), as
        ``np.recarray`` and Numba give it."""
        if name in self.dtype.fields:
            return self.field_array(name)
        return super().__getattr__(name)

    def __getitem__(self, idx, depth=1):
        if isinstance(idx, np.integer):  # (numba.cuda.random's object-mode code passes these)
            idx = _int(idx)
        addr = self._addr(idx)  # a computed negative index raises here: the load is the use
        if addr is None:
            return self._wrap(self.a[_plain(idx)])
        return Record(self, idx)

    def __setitem__(self, idx, value, depth=1):
        """A whole element stored (``a[i] = a[j]``, ``a[i] = (s0, s1)``): a store of each
        field, each load of a :class:`Record` value checked too."""
        if self._addr(idx) is None:
            _store(self.a, _plain(idx), _plain(value))
            return
        for k, name in enumerate(self.dtype.names):
            if type(value) is Record:
                v = value.array.field_array(name).__getitem__(value.idx, depth + 1)
            else:
                v = value[k] if isinstance(value, (tuple, list)) else value[name]
            self.field_array(name).__setitem__(idx, v, depth + 1)


class Record:
    """``a[i]`` of a :class:`RecordArray`: ``rec['s0']`` and ``rec.s0`` load the field of
    element ``i`` through its checked array, and assigning them stores it."""

    __slots__ = ("array", "idx")

    def __init__(self, array, idx):
        object.__setattr__(self, "array", array)
        object.__setattr__(self, "idx", idx)

    def __getitem__(self, name):
        return self.array.field_array(name).__getitem__(self.idx, 2)

    def __setitem__(self, name, value):
        self.array.field_array(name).__setitem__(self.idx, value, 2)

    def __getattr__(self, name):
        if name not in self.array.dtype.fields:
            raise AttributeError(f"record of '{self.array.name}' has no field {name!r}")
        return self.array.field_array(name).__getitem__(self.idx, 2)

    def __setattr__(self, name, value):
        if name not in self.array.dtype.fields:
            raise AttributeError(f"record of '{self.array.name}' has no field {name!r}")
        self.array.field_array(name).__setitem__(self.idx, value, 2)

    def __repr__(self):
        return f"<simulated record {self.array.name}[{self.idx!r}]: {self.array.a[self.idx]}>"


class ConstArray(Array):
    """``cuda.const.array_like(ary)`` in a kernel: constant memory, checked loads, and no
    store — Numba refuses to compile a kernel that stores into it (``setitem`` on a read-only
    array), so a store or an atomic raises the ``TypingError`` a GPU build gives."""

    __slots__ = ()

    def __setitem__(self, idx, value, depth=1):
        self._refuse(idx, "store into")

    def atomic(self, idx, update, val=None):
        self._refuse(idx, "atomic update of")

    def _observe(self, addr, kind, depth=3):
        """Not seen by observers: the constant cache is neither global nor shared memory
        traffic for the counters (``counters.py``), as before it was checked."""

    def _refuse(self, idx, what):
        from numba.cuda.core.errors import TypingError
        from numba.cuda.np.numpy_support import from_dtype
        f = _user_frame()
        t = _current()
        layout = "C" if self.a.flags.c_contiguous else "F" if self.a.flags.f_contiguous else "A"
        raise TypingError(
            f"kernel '{t.launch.name}': {what} {self._describe(idx)} at "
            f"{f.f_code.co_filename}:{f.f_lineno} by thread {t.tidx} of block {t.bidx}: an "
            f"array from cuda.const.array_like is constant memory, read-only in a kernel, and "
            f"Numba does not compile this kernel for a GPU (Cannot modify readonly array of "
            f"type: readonly array({from_dtype(self.dtype)}, {self.ndim}d, {layout})). Copy it "
            f"into a local or shared array to change it.")


def const_array(self, ary):
    """``cuda.const.array_like``: the array as read-only constant memory (:class:`ConstArray`;
    the stock simulator gave the host array itself, so a kernel could change it)."""
    return ConstArray(np.asarray(_plain(ary)), _name_at(_getframe(1), "constant"), "const",
                      None)


def checked_array(a, name, space, shadow, root=None, taint=None):
    """The checked proxy of ``a``: a :class:`RecordArray` for a record dtype, else an
    :class:`Array`."""
    cls = Array if a.dtype.fields is None else RecordArray
    return cls(a, name, space, shadow, root, taint)


def _binary_op(name):
    def op(self, other):
        return getattr(self.a, name)(_plain(other))
    op.__name__ = name
    return op


def _inplace_op(name):
    def op(self, other):
        getattr(self.a, name)(_plain(other))
        return self
    op.__name__ = name
    return op


def _unary_op(name):
    def op(self):
        return getattr(self.a, name)()
    op.__name__ = name
    return op


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
              "xor", "lshift", "rshift", "divmod"):
    setattr(Array, f"__{_name}__", _binary_op(f"__{_name}__"))
    setattr(Array, f"__r{_name}__", _binary_op(f"__r{_name}__"))
    if _name != "divmod":
        setattr(Array, f"__i{_name}__", _inplace_op(f"__i{_name}__"))
for _name in ("lt", "le", "eq", "ne", "gt", "ge"):
    setattr(Array, f"__{_name}__", _binary_op(f"__{_name}__"))
for _name in ("neg", "pos", "abs", "invert"):
    setattr(Array, f"__{_name}__", _unary_op(f"__{_name}__"))
del _name


def _user_frame():
    """The innermost frame of the user's kernel code (outside the simulator's files)."""
    f = _getframe(2)
    while f is not None and _internal(f.f_code.co_filename):
        f = f.f_back
    return f


_atomic_lock = threading.RLock()


# ----------------------------------------------------------------------------- cuda.atomic


def _count_towards_spin():
    """One more load of memory another thread may write: after ``SPIN_LOADS`` of them without
    a wait, the thread lets the others run (``blocks._Thread.spin``). Plain arrays (checks
    off) count their atomics only: a spin on a plain load is a race, which the checks report.
    Returns the thread."""
    t = _current()
    t.loads += 1
    if t.loads >= SPIN_LOADS:
        t.spin()
    return t


def _atomic(update):
    def op(self, array, index, val):
        if isinstance(array, Array):
            return array.atomic(index, lambda old: update(old, val), val)
        _count_towards_spin()
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


def poisoned_bytes(n):
    """A fresh block's dynamic shared memory: ``n`` bytes holding the 4-byte poison."""
    words = np.full((n + 3) // 4, _POISON_BITS[4], dtype="<u4").view(np.uint8)
    return words[:n].copy()


_shared_lock = threading.Lock()
kernelapi = None  # numba's simulator kernelapi, set by install()


def shared_array(self, shape, dtype, alignment=None):
    """``cuda.shared.array``: one poisoned array per source line and block."""
    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    dtype = _dtype(dtype, kernelapi)
    caller = _getframe(1)
    t = _current()
    block = getattr(t, "block", None)
    launch = getattr(t, "launch", None)
    if block is None:  # not in a simulated thread of ours: the stock behaviour
        return _stock_shared_array(self, shape, dtype)
    checked = config.CHECKS or observers
    if shape == 0:  # dynamic shared memory: views of one buffer
        count = block.dynshared.size // dtype.itemsize
        a = np.frombuffer(block.dynshared.data, dtype=dtype, count=count)
        if not checked:
            return a
        return checked_array(a, _name_at(caller, "dynamic shared"), "shared",
                             block.shared_shadow, taint=block.taint)
    key = (caller.f_code.co_filename, caller.f_lineno)
    arr = block.shared.get(key)
    if arr is None:
        a = fill_poison(np.empty(shape, dtype))
        block.static_bytes += a.nbytes
        total = block.static_bytes + block.dynshared.size
        if total > STATIC_SHARED_LIMIT:
            raise LaunchConfigError(
                f"kernel '{getattr(launch, 'name', '?')}': {total} bytes of shared memory "
                f"per block (this array: {a.nbytes} bytes at {where((key + ('',),))}); "
                f"a block may use at most {STATIC_SHARED_LIMIT} bytes (48 KiB).")
        arr = a
        if checked:
            arr = checked_array(a, _name_at(caller, "shared"), "shared", block.shared_shadow,
                                taint=block.taint)
        block.shared[key] = arr
    return arr


def _stock_shared_array(self, shape, dtype):
    with _shared_lock:
        return np.zeros(shape, dtype) if shape != 0 else np.frombuffer(
            self._dynshared.data, dtype=dtype, count=self._dynshared_size // dtype.itemsize)


def local_array(self, shape, dtype, alignment=None):
    """``cuda.local.array``: a poisoned per-thread array (bounds- and init-checked)."""
    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    a = fill_poison(np.empty(shape, _dtype(dtype, kernelapi)))
    if not config.CHECKS:
        return a
    return checked_array(a, _name_at(_getframe(1), "local"), "local", None, taint={})


def global_array(a, name, launch):
    """What a kernel sees for a device-array argument ``a`` (a NumPy array); None for a record
    array with the checks off (the stock simulator's wrapper then gives ``rec.field``)."""
    if not (config.CHECKS or observers):
        return a if a.dtype.fields is None else None
    return checked_array(a, name, "global", launch.shadow, taint=launch.taint)


def check_kept(launch):
    """At the end of a launch: an indeterminate value still held by a global element was
    kept (``Array._store_indeterminate``): the use that raises its error."""
    for value, _, at, arr, idx, tidx, bidx, _ in launch.taint.values():
        if arr.poisoned(arr.a[idx]):
            value.use(f"stored to {arr._describe(idx)} at {at} by thread {tidx} of block "
                      f"{bidx}, and still there when the kernel ends", at="")
