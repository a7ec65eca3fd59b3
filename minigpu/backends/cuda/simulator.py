"""Make Numba's CUDA simulator a test bench: warp intrinsics, fast barriers, poisoned shared memory.

``NUMBA_ENABLE_CUDASIM=1`` runs a kernel in Python: one OS thread per CUDA thread, blocks one
after another. The stock simulator of numba-cuda 0.30 has three gaps for a kernel test suite, and
``install()`` closes them by patching the installed simulator in place:

1. **Warp intrinsics** (``FakeCUDAModule`` gains methods). The stock simulator has no
   ``shfl_*_sync``, vote, ``match_*``, ``activemask``, ``lanemask_lt`` or ``syncwarp``: a kernel
   that uses them fails with ``AttributeError``. A kernel reaches them as ``cuda.shfl_down_sync``
   because, while a kernel or device function runs, the simulator replaces every global bound to
   the ``numba.cuda`` module with one ``FakeCUDAModule`` instance (``swapped_cuda_module``) —
   hence the rule "``from numba import cuda`` at module top". The lanes of a warp are 32
   consecutive linear thread ids (``x + y*bdx + z*bdx*bdy``); the last warp may be partial. Each
   intrinsic is a rendezvous of the lanes named in ``mask`` that exist and have not exited, with
   the semantics of PTX ``shfl.sync``/``vote.sync``/``match.sync``: a shuffle whose source lane
   is out of range returns the caller's own value (``shfl_sync`` takes ``src_lane mod 32``); a
   source lane that is not taking part returns a poison value (NaN / integer max), since the GPU
   returns garbage there. Numba's types are kept: ``ballot_sync`` and ``match_*`` give
   int32 (so a full ballot is ``-1``), ``activemask``/``lanemask_lt`` uint32. Numba's API has no
   ``width`` argument, so neither has this one. ``activemask()`` returns the lanes that reach the
   same ``activemask()`` call while every other live lane of the warp is blocked elsewhere or has
   exited — the simulator's picture of "converged". ``popc``/``ffs`` are fixed for negative
   (int32) masks, which the stock versions miscount.
2. **Blocking barriers** (``BlockManager.run`` is replaced). The stock manager starts an OS
   thread per CUDA thread for every block and busy-polls them all from the launching thread,
   fighting them for the GIL. Here a thread at ``syncthreads()`` sleeps on its own lock; the
   last one to arrive frees the others as a chain (each woken thread wakes the next, so they do
   not stampede for the GIL), and the OS threads are pooled across blocks and launches. The
   barrier-heavy benchmark runs several times faster (``benchmarks/simulator_barriers.py``).
   Exited threads count as arrived, as on Volta and later. Threads waiting at *different*
   ``syncthreads()`` call sites (a barrier in a divergent branch: undefined behaviour on the
   GPU), or a block where every live thread waits and none can go on (a deadlock, e.g. a warp
   intrinsic waiting for a lane that sits at a barrier), raise ``SyncError`` naming the kernel
   and the source lines instead of finishing silently or hanging. ``syncthreads_count/and/or``
   and ``cg.this_grid().sync()`` go through the same barrier.
3. **Poisoned shared memory** (``FakeCUDAShared.array`` is replaced, and reset per block). The
   stock simulator allocates shared arrays once per *launch*, so block 1 silently reads what
   block 0 left behind. Here every block gets fresh arrays: floats are NaN, integers their
   dtype's max (``0x7FFFFFFF`` for int32), bools True; dynamic shared memory is filled with the
   32-bit word ``0x7FFFFFFF`` (NaN for every float view). A kernel that reads shared memory
   before writing it then shows up in a test. Arrays are still keyed by source line (one
   ``cuda.shared.array`` per line), now under a lock: the stock lookup races.

Fragile by nature: it relies on simulator internals of numba-cuda 0.30 —
``kernel.BlockManager`` (its ``__init__(f, grid_dim, block_dim, debug)``, ``_f``, ``_block_dim``,
``_debug``, and ``FakeCUDAKernel`` calling ``.run(grid_point, *args)`` per block),
``kernel._get_kernel_context``, ``kernelapi.FakeCUDAModule`` (reads ``threadIdx``, ``blockIdx``,
``thread_id`` and calls ``syncthreads*`` on ``threading.current_thread()``), ``kernelapi.Dim3``
and ``FakeCUDAShared`` (``_allocations``, ``_dynshared``, ``_dynshared_size``). ``install()``
checks the version and these names first; on a mismatch it warns once and leaves the stock
simulator alone. ``uninstall()`` undoes it.
"""
from __future__ import annotations

import inspect
import os
import sys
import threading
import time
import warnings

import numpy as np

__all__ = ["SyncError", "install", "uninstall", "is_installed"]

SUPPORTED = (0, 30)  # numba-cuda major.minor whose simulator internals this patch was written for
FULL_MASK = 0xFFFFFFFF
_BARRIERS = ("syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or")

_installed = False
_warned = False
_saved = []  # (owner, name, original or _MISSING), to undo install()
_MISSING = object()
_shared_lock = threading.Lock()
_THIS_FILES = {__file__, os.path.abspath(__file__)}
_THREADING_FILE = threading.__file__
_SIM_DIR = ""  # the simulator package's directory, set by install()
_sim = None  # (kernel module, kernelapi module), set by install()


class SyncError(RuntimeError):
    """A barrier or warp intrinsic used in a way that hangs or is undefined on a real GPU."""


class _Abort(Exception):
    """Raised inside the other threads of a block once the block has failed."""


# ----------------------------------------------------------------------------- helpers


def _site():
    """The user's call stack (innermost first) as ((file, line, function), ...)."""
    out, f = [], sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if name == _THREADING_FILE:
            break
        if not name.startswith(_SIM_DIR) and name not in _THIS_FILES:
            out.append((name, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    return tuple(out)


def _where(site):
    if not site:
        return "<unknown>"
    (name, line, func), callers = site[0], site[1:]
    text = f"{name}:{line} in {func}()"
    if callers:
        text += " (called from " + ", ".join(f"{n}:{ln}" for n, ln, _ in callers) + ")"
    return text


def _ranges(ids):
    ids, parts, i = sorted(ids), [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ", ".join(parts)


def _fill_poison(a):
    kind = a.dtype.kind
    if kind in "fc":
        a.fill(np.nan)
    elif kind in "iu":
        a.fill(np.iinfo(a.dtype).max)
    elif kind == "b":
        a.fill(True)
    else:  # records and the like: all-ones bytes
        a.view(np.uint8)[...] = 0xFF
    return a


def _poison_scalar(v):
    """What a shuffle returns from a lane that does not take part (garbage on the GPU)."""
    if isinstance(v, (bool, np.bool_)):
        return v
    if isinstance(v, (float, complex, np.inexact)):
        return type(v)("nan")
    if isinstance(v, np.integer):
        return type(v)(np.iinfo(type(v)).max)
    if isinstance(v, int):
        return 0x7FFFFFFFFFFFFFFF
    return v


def _int32(bits):
    return np.int32(bits - (1 << 32) if bits >= 1 << 31 else bits)


class _Op:
    __slots__ = ("kind", "mask", "value", "arg", "site")

    def __init__(self, kind, mask, value, arg, site):
        self.kind, self.mask, self.value, self.arg, self.site = kind, mask, value, arg, site

    def describe(self):
        if self.kind in _BARRIERS or self.kind == "activemask":
            return f"{self.kind}()"
        return f"{self.kind}(mask=0x{self.mask:08x})"


# ----------------------------------------------------------------------------- one block


class _Block:
    """Sync state of one running block. Every field is guarded by ``lock``. A waiting thread
    sleeps on its own ``wake`` lock, so a wake-up reaches only the threads it frees."""

    def __init__(self, kernel, block_idx, threads):
        self.kernel, self.block_idx = kernel, tuple(block_idx)
        self.lock = threading.Lock()
        self.done = threading.Condition(self.lock)
        self.threads = threads
        self.live = len(threads)
        self.blocked = 0
        self.barrier = []  # threads waiting at a syncthreads*
        nwarps = (len(threads) + 31) // 32
        self.lanes = [threads[32 * w:32 * w + 32] for w in range(nwarps)]  # by thread id
        self.pending = [{} for _ in range(nwarps)]  # lane -> thread waiting in a warp intrinsic
        self.error = None  # a SyncError, or the _Worker whose kernel code raised
        self.woken = []  # released by _release, to be woken by _chain

    # -- called by the threads -------------------------------------------------------------

    def wait(self, t, op):
        """Block thread ``t`` in ``op`` until the op completes; return its result."""
        with self.lock:
            if self.error is not None:
                raise _Abort()
            t.op = op
            self.blocked += 1
            if op.kind in _BARRIERS:
                self.barrier.append(t)
                self._try_barrier()
            else:
                self.pending[t.warp][t.lane] = t
                if op.kind != "activemask":  # completed by _progress
                    self._try_group(t)
            self._progress(t.warp)
            head, sleep = self._chain(), t.op is not None and self.error is None
        _wake(head)
        if sleep:
            t.wake.acquire()  # sleeps until _wake or _fail unlocks it
            nxt, t.next = t.next, None
            _wake(nxt)
        if t.op is not None:  # woken because the block failed
            raise _Abort()
        return t.result

    def exit(self, t):
        with self.lock:
            t.exited = True
            self.live -= 1
            if t.exception is not None and not isinstance(t.exception[0], _Abort):
                self._fail(t)
            elif self.error is None:
                self._try_barrier()
                for u in list(self.pending[t.warp].values()):
                    if u.op is not None and u.op.kind != "activemask":
                        self._try_group(u)
                self._progress(t.warp)
            if self.live == 0 or self.error is not None:
                self.done.notify()
            head = self._chain()
            t.target = None  # drop the kernel's arguments
            with _idle_lock:
                _idle.append(t)
        _wake(head)

    # -- under the lock --------------------------------------------------------------------

    def _release(self, t, result):
        t.result, t.op = result, None
        self.blocked -= 1
        self.woken.append(t)

    def _chain(self):
        """Link the threads released since the last call into a wake-up chain; return its head.

        Waking a whole block at once makes its threads fight for the GIL (several times slower).
        Instead the caller wakes the head, and each woken thread first wakes the next one in
        the chain (``t.next``), so one thread runs while the next one is waking up."""
        me = threading.current_thread()
        woken = [t for t in self.woken if t is not me]  # the caller completing its own op is awake
        self.woken = []
        for a, b in zip(woken, woken[1:] + [None]):
            a.next = b
        return woken[0] if woken else None

    def _fail(self, error):
        if self.error is None:
            self.error = error
            for t in self.threads:
                if t.op is not None and t is not threading.current_thread():
                    t.wake.release()
            self.done.notify()

    def _progress(self, warp):
        """Complete activemask() groups of ``warp``; detect a block where nothing can move."""
        lanes = self.lanes[warp]
        asking = [u for u in self.pending[warp].values() if u.op.kind == "activemask"]
        if self.error is None and asking and all(u.exited or u.op is not None for u in lanes):
            groups = {}
            for u in asking:
                groups.setdefault(u.op.site, []).append(u)
            for group in groups.values():
                mask = np.uint32(sum(1 << u.lane for u in group))
                for u in group:
                    del self.pending[warp][u.lane]
                    self._release(u, mask)
        if self.error is None and self.live and self.blocked == self.live:
            self._fail(SyncError(self._deadlock_message()))

    def _try_barrier(self):
        if not self.barrier or len(self.barrier) != self.live or self.error is not None:
            return
        sites = {}
        for t in self.barrier:
            sites.setdefault(t.op.site, []).append(t.tid)
        if len(sites) > 1:
            lines = "\n".join(f"  {len(ids)} thread(s) (tid {_ranges(ids)}) at {_where(site)}"
                              for site, ids in sites.items())
            self._fail(SyncError(
                f"kernel '{self.kernel}', block {self.block_idx}: threads of one block wait at "
                f"different syncthreads() calls:\n{lines}\nA barrier inside a divergent branch is "
                "undefined behaviour on the GPU (it hangs or silently mis-synchronises): every "
                "thread of the block that has not exited must reach the same syncthreads()."))
            return
        kind, preds = self.barrier[0].op.kind, [bool(t.op.value) for t in self.barrier]
        result = {"syncthreads": None, "syncthreads_count": sum(preds),
                  "syncthreads_and": int(all(preds)), "syncthreads_or": int(any(preds))}[kind]
        waiting, self.barrier = self.barrier, []
        for t in waiting:
            self._release(t, result)

    def _try_group(self, t):
        """Complete the warp intrinsic ``t`` waits in if every lane it names has arrived."""
        op, warp = t.op, t.warp
        members = []
        for u in self.lanes[warp]:
            if not (op.mask >> u.lane) & 1 or u.exited:
                continue
            uop = u.op if u.lane in self.pending[warp] else None
            if uop is None:
                return  # still running, or waiting at a barrier
            if uop.mask != op.mask:
                if (uop.mask >> t.lane) & 1:
                    self._fail(SyncError(
                        f"kernel '{self.kernel}', block {self.block_idx}, warp {warp}: lanes "
                        f"{t.lane} and {u.lane} wait for each other with different masks: "
                        f"{op.describe()} at {_where(op.site)} and {uop.describe()} at "
                        f"{_where(uop.site)}. All lanes named in a mask must pass the same mask."))
                return
            if uop.kind != op.kind:
                self._fail(SyncError(
                    f"kernel '{self.kernel}', block {self.block_idx}, warp {warp}: lanes of mask "
                    f"0x{op.mask:08x} called different warp intrinsics: {op.kind} at "
                    f"{_where(op.site)} and {uop.kind} at {_where(uop.site)}."))
                return
            members.append(u)
        results = _warp_results(op.kind, {u.lane: u.op for u in members})
        for u in members:
            del self.pending[warp][u.lane]
            self._release(u, results[u.lane])

    def _deadlock_message(self):
        groups = {}
        for t in self.threads:
            if not t.exited and t.op is not None:
                key = (t.op.describe(), t.op.site)
                groups.setdefault(key, []).append(t.tid)
        lines = "\n".join(f"  tid {_ranges(ids)} wait in {what} at {_where(site)}"
                          for (what, site), ids in groups.items())
        return (f"kernel '{self.kernel}', block {self.block_idx} cannot make progress: every live "
                f"thread is waiting and none of the waits can complete (on a GPU this hangs):\n"
                f"{lines}\nA warp intrinsic waits for every non-exited lane in its mask; "
                "syncthreads() waits for every non-exited thread of the block.")


def _wake(t):
    if t is not None:
        t.wake.release()


def _warp_results(kind, ops):
    """lane -> result of a completed warp intrinsic; ``ops``: each taking-part lane's call."""
    lanes = sorted(ops)
    if kind == "syncwarp":
        return dict.fromkeys(lanes)
    if kind.startswith("shfl"):
        out = {}
        for lane in lanes:
            b = int(ops[lane].arg) & 31  # PTX uses the low 5 bits of the lane operand
            src = {"shfl_sync": b, "shfl_up_sync": lane - b, "shfl_down_sync": lane + b,
                   "shfl_xor_sync": lane ^ b}[kind]
            if not 0 <= src < 32:
                src = lane  # out of range: the caller keeps its own value
            value = ops[lane].value
            out[lane] = ops[src].value if src in ops else _poison_scalar(value)
        return out
    if kind in ("match_any_sync", "match_all_sync"):
        vals = {lane: ops[lane].value for lane in lanes}
        if kind == "match_any_sync":
            return {lane: _int32(sum(1 << m for m in lanes if vals[m] == vals[lane]))
                    for lane in lanes}
        same = all(vals[m] == vals[lanes[0]] for m in lanes)
        result = (_int32(sum(1 << m for m in lanes)) if same else np.int32(0), same)
        return dict.fromkeys(lanes, result)
    preds = {lane: bool(ops[lane].value) for lane in lanes}
    result = {"all_sync": all(preds.values()), "any_sync": any(preds.values()),
              "eq_sync": len(set(preds.values())) == 1,
              "ballot_sync": _int32(sum(1 << m for m in lanes if preds[m]))}[kind]
    return dict.fromkeys(lanes, result)


# ----------------------------------------------------------------------------- threads, blocks


class _Worker(threading.Thread):
    """A simulated CUDA thread. Workers are reused for block after block and launch after
    launch (starting an OS thread costs about as much as a barrier round), so the fields
    below are reset by ``assign`` for each block. ``FakeCUDAModule`` reads ``threadIdx``,
    ``blockIdx``, ``thread_id`` and calls ``syncthreads*`` on ``threading.current_thread()``."""

    def __init__(self):
        super().__init__(daemon=True, name="cudasim-thread")
        self.job = threading.Lock()  # held while idle; released to run the assigned block
        self.job.acquire()
        self.wake = threading.Lock()  # held while asleep in a barrier or warp intrinsic
        self.wake.acquire()
        self.start()

    def assign(self, block, target, debug, blockIdx, threadIdx, tid):
        self.block, self.target, self.debug = block, target, debug
        self.blockIdx, self.threadIdx = _sim[1].Dim3(*blockIdx), _sim[1].Dim3(*threadIdx)
        self.thread_id = self.tid = tid
        self.warp, self.lane = divmod(tid, 32)
        self.op = self.result = self.exception = self.next = None  # next: see _Block._chain
        self.exited = False

    def run(self):
        while True:
            self.job.acquire()
            try:
                if self.debug:
                    with np.errstate(divide="raise"):
                        self.target()
                else:
                    self.target()
            except BaseException as e:  # reported like the stock simulator does
                where = f"tid={list(self.threadIdx)} ctaid={list(self.blockIdx)}"
                try:
                    e = type(e)(f"{where}: {e}" if str(e) else where)
                except Exception:  # an exception type that wants other arguments: keep it
                    pass
                self.exception = (e, sys.exc_info()[2])
            finally:
                self.block.exit(self)  # also puts this worker back in _idle

    def _barrier(self, kind, value=None):
        return self.block.wait(self, _Op(kind, FULL_MASK, value, None, _site()))

    def syncthreads(self):
        self._barrier("syncthreads")

    def syncthreads_count(self, value):
        return self._barrier("syncthreads_count", value)

    def syncthreads_and(self, value):
        return self._barrier("syncthreads_and", value)

    def syncthreads_or(self, value):
        return self._barrier("syncthreads_or", value)


_idle = []  # workers waiting for a block; guarded by _idle_lock
_idle_lock = threading.Lock()


def _run_block(self, grid_point, *args):
    """``BlockManager.run``: run one block on pooled workers and sleep until it is done."""
    ctx = _sim[0]._get_kernel_context()
    if ctx is not None:
        _reset_shared(ctx.shared)
    bx, by, _ = self._block_dim
    points = sorted(np.ndindex(*self._block_dim), key=lambda p: p[0] + bx * (p[1] + by * p[2]))
    with _idle_lock:
        workers = [_idle.pop() for _ in range(min(len(points), len(_idle)))]
    workers += [_Worker() for _ in range(len(points) - len(workers))]

    def target():
        self._f(*args)

    name = getattr(self._f, "__qualname__", getattr(self._f, "__name__", "?"))
    block = _Block(name, grid_point, workers)
    for tid, (w, p) in enumerate(zip(workers, points)):
        w.assign(block, target, self._debug, grid_point, p, tid)
    for w in workers:
        w.job.release()
    with block.lock:
        while block.live and block.error is None:
            block.done.wait()
        error = block.error
        if error is not None:  # let the woken threads leave; busy ones get a moment
            deadline = time.monotonic() + 0.5
            while block.live and time.monotonic() < deadline:
                block.done.wait(0.05)
    if error is None:
        return
    if isinstance(error, SyncError):
        raise error
    raise error.exception[0].with_traceback(error.exception[1])


# ----------------------------------------------------------------------------- shared memory


def _reset_shared(shared):
    """Fresh, poisoned shared memory for the next block."""
    with _shared_lock:
        shared._allocations.clear()
    buf = shared._dynshared
    if buf.size:
        words = np.full((buf.size + 3) // 4, 0x7FFFFFFF, dtype="<u4").view(np.uint8)
        buf.view(np.uint8)[:] = words[:buf.size]


def _shared_array(self, shape, dtype, alignment=None):
    """``cuda.shared.array``: one poisoned array per source line and block."""
    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    kernelapi = _sim[1]
    if isinstance(dtype, kernelapi.types.Type):
        dtype = kernelapi.numpy_support.as_dtype(dtype)
    dtype = np.dtype(dtype)
    if shape == 0:  # dynamic shared memory: views of one buffer
        count = self._dynshared_size // dtype.itemsize
        return np.frombuffer(self._dynshared.data, dtype=dtype, count=count)
    caller = sys._getframe(1)
    key = (caller.f_code.co_filename, caller.f_lineno)
    with _shared_lock:
        arr = self._allocations.get(key)
        if arr is None:
            arr = self._allocations[key] = _fill_poison(np.empty(shape, dtype))
    return arr


# ----------------------------------------------------------------------------- warp intrinsics


def _current(kind):
    t = threading.current_thread()
    if not isinstance(t, _Worker):
        raise RuntimeError(f"cuda.{kind}() called outside a running kernel")
    return t


def _warp_op(kind, mask, value=None, arg=None):
    t = _current(kind)
    mask = int(mask) & FULL_MASK
    if not (mask >> t.lane) & 1:
        raise SyncError(f"cuda.{kind}(): mask 0x{mask:08x} does not include the calling lane "
                        f"{t.lane} (warp {t.warp}); the calling lane must be in the mask")
    return t.block.wait(t, _Op(kind, mask, value, arg, _site()))


class _WarpIntrinsics:
    """Methods added to the simulator's ``FakeCUDAModule`` (the ``cuda`` a kernel sees)."""

    def shfl_sync(self, mask, value, src_lane):
        return _warp_op("shfl_sync", mask, value, src_lane)

    def shfl_up_sync(self, mask, value, delta):
        return _warp_op("shfl_up_sync", mask, value, delta)

    def shfl_down_sync(self, mask, value, delta):
        return _warp_op("shfl_down_sync", mask, value, delta)

    def shfl_xor_sync(self, mask, value, lane_mask):
        return _warp_op("shfl_xor_sync", mask, value, lane_mask)

    def all_sync(self, mask, predicate):
        return _warp_op("all_sync", mask, predicate)

    def any_sync(self, mask, predicate):
        return _warp_op("any_sync", mask, predicate)

    def eq_sync(self, mask, predicate):
        return _warp_op("eq_sync", mask, predicate)

    def ballot_sync(self, mask, predicate):
        return _warp_op("ballot_sync", mask, predicate)

    def match_any_sync(self, mask, value):
        return _warp_op("match_any_sync", mask, value)

    def match_all_sync(self, mask, value):
        return _warp_op("match_all_sync", mask, value)

    def syncwarp(self, mask=FULL_MASK):
        _warp_op("syncwarp", mask)

    def activemask(self):
        t = _current("activemask")
        return t.block.wait(t, _Op("activemask", FULL_MASK, None, None, _site()))

    def lanemask_lt(self):
        return np.uint32((1 << _current("lanemask_lt").lane) - 1)

    def popc(self, val):
        if isinstance(val, np.integer):
            val = int(val) & ((1 << (8 * val.dtype.itemsize)) - 1)
        return bin(int(val) & ((1 << 64) - 1)).count("1")

    def ffs(self, val):
        val = int(val)
        return (val & -val).bit_length()


# ----------------------------------------------------------------------------- install


def _check(kernel_mod, kernelapi):
    """None if the simulator's internals are the ones this patch expects, else why not."""
    try:
        from importlib.metadata import version
        v = version("numba-cuda")
    except Exception:  # pragma: no cover - not installed as a distribution
        v = "unknown"
    if tuple(int(p) for p in v.split(".")[:2] if p.isdigit()) != SUPPORTED:
        return f"numba-cuda {v} is installed; this patch targets {SUPPORTED[0]}.{SUPPORTED[1]}.x"
    for owner, names in ((kernel_mod, ("BlockManager", "_get_kernel_context")),
                         (kernelapi, ("FakeCUDAModule", "FakeCUDAShared", "Dim3", "types",
                                      "numpy_support"))):
        for name in names:
            if not hasattr(owner, name):
                return f"{owner.__name__}.{name} is missing"
    # FakeCUDAKernel.__call__ runs each block as BlockManager(fn, grid, block, debug).run(...)
    params = list(inspect.signature(kernel_mod.BlockManager.__init__).parameters)
    if params != ["self", "f", "grid_dim", "block_dim", "debug"] or not hasattr(
            kernel_mod.BlockManager, "run"):
        return f"BlockManager.__init__{params} changed"
    bm = kernel_mod.BlockManager(lambda: None, (1, 1, 1), (1, 1, 1), False)
    shared = kernelapi.FakeCUDAShared(0)
    for obj, name in ((bm, "_f"), (bm, "_block_dim"), (bm, "_debug"), (shared, "_allocations"),
                      (shared, "_dynshared"), (shared, "_dynshared_size")):
        if not hasattr(obj, name):
            return f"{type(obj).__name__}.{name} is missing"
    return None


def _set(owner, name, value):
    _saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
    setattr(owner, name, value)


def install() -> bool:
    """Patch the CUDA simulator in place (idempotent). True when the patches are active; False
    when not running under ``NUMBA_ENABLE_CUDASIM=1`` or when the simulator's internals differ
    from what this module expects (then it warns once and leaves the simulator stock).
    ``MINIGPU_STOCK_SIMULATOR=1`` skips the patches (to compare with the stock simulator)."""
    global _installed, _warned, _SIM_DIR, _sim
    if _installed:
        return True
    from numba import cuda
    if not cuda.config.ENABLE_CUDASIM or os.environ.get("MINIGPU_STOCK_SIMULATOR") == "1":
        return False
    try:
        from numba.cuda.simulator import kernel as kernel_mod, kernelapi
        problem = _check(kernel_mod, kernelapi)
        if problem is None:
            _sim = (kernel_mod, kernelapi)
            _SIM_DIR = os.path.dirname(kernel_mod.__file__) + os.sep
            _set(kernel_mod.BlockManager, "run", _run_block)
            _set(kernelapi.FakeCUDAShared, "array", _shared_array)
            for name, fn in vars(_WarpIntrinsics).items():
                if callable(fn) and not name.startswith("_"):
                    _set(kernelapi.FakeCUDAModule, name, fn)
            _installed = True
            return True
    except Exception as exc:  # never break `import minigpu`
        problem = f"{type(exc).__name__}: {exc}"
        uninstall()
    if not _warned:
        _warned = True
        warnings.warn(f"minigpu: CUDA simulator left stock (no warp intrinsics, busy-wait "
                      f"barriers, no shared-memory poisoning): {problem}", RuntimeWarning,
                      stacklevel=2)
    return False


def uninstall() -> None:
    """Undo ``install()`` (the benchmark uses it to time the stock simulator)."""
    global _installed
    while _saved:
        owner, name, original = _saved.pop()
        if original is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
    _installed = False


def is_installed() -> bool:
    return _installed
