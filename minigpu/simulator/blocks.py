"""Blocks and threads: pooled OS threads, blocking barriers, synccheck.

A simulated CUDA thread is an OS thread (:class:`_Worker`), pooled across blocks and launches
(starting an OS thread costs about as much as a barrier round). The stock simulator starts an
OS thread per CUDA thread for every block and busy-polls them all from the launching thread,
fighting them for the GIL. Here a thread at ``syncthreads()`` sleeps on its own lock; the last
one to arrive frees the others as a chain (each woken thread wakes the next, so they do not
stampede for the GIL). The barrier-heavy benchmark runs several times faster
(``benchmarks/simulator_barriers.py``).

Exited threads count as arrived, as on Volta and later. Threads waiting at *different*
``syncthreads()`` call sites (a barrier in a divergent branch: undefined behaviour on the GPU),
or a block where every live thread waits and none can go on (a deadlock, e.g. a warp intrinsic
waiting for a lane that sits at a barrier), raise ``SyncError`` naming the kernel and the
source lines instead of finishing silently or hanging. ``syncthreads_count/and/or`` go through the
same barrier. A cooperative launch (``launch.uses_grid_sync``) runs all its blocks at once
(:func:`run_grid`); ``cg.this_grid().sync()`` is then a barrier of every block (:class:`_Grid`).

For racecheck each thread carries a logical clock (:meth:`_Worker.tick`): its block's launch
ordinal, the number of barriers it has passed (``epoch``; every live thread of a block is in
the same epoch, so two accesses of one block in different epochs are ordered by a barrier),
and the number of ``syncwarp`` rendezvous it took part in (``wepoch``: orders lanes of one
warp). The clock does not depend on how the OS schedules the threads.
"""
import sys
import threading
import time

import numpy as np

from . import memory
from .errors import SimulatorError, SyncError
from .indeterminate import Indeterminate
from .sites import BARRIERS, FULL_MASK, Op, ranges, site, where
from .warp import warp_results

Dim3 = None  # the simulator's kernelapi.Dim3, set by install()


class _Abort(Exception):
    """Raised inside the other threads of a block once the block has failed."""


class _Block:
    """Sync state of one running block. Every field is guarded by ``lock``. A waiting thread
    sleeps on its own ``wake`` lock, so a wake-up reaches only the threads it frees."""

    def __init__(self, kernel, block_idx, threads, dynshared=0, grid=None):
        self.kernel, self.block_idx = kernel, tuple(block_idx)
        self.grid = grid  # the _Grid of a cooperative launch, else None
        # this block's shared memory (memory.shared_array): arrays by source line, their
        # bytes, the race map, and the dynamic shared buffer (poisoned)
        self.shared, self.static_bytes = {}, 0
        self.shared_shadow = {} if memory.config.CHECKS else None
        self.taint = {}  # shared elements holding a stored indeterminate value (memory.py)
        self.dynshared = memory.poisoned_bytes(dynshared)
        self.lock = threading.Lock()
        self.done = threading.Condition(self.lock)
        self.threads = threads
        self.live = len(threads)
        self.blocked = 0
        self.barrier = []  # threads waiting at a syncthreads*
        self.quiescing = []  # threads waiting until every other one is blocked or done
        nwarps = (len(threads) + 31) // 32
        self.lanes = [threads[32 * w:32 * w + 32] for w in range(nwarps)]  # by thread id
        self.pending = [{} for _ in range(nwarps)]  # lane -> thread waiting in a warp intrinsic
        self.error = None  # a SyncError, or the _Worker whose kernel code raised
        self.woken = []  # released by _release, to be woken by _chain
        self.at_grid = False  # every live thread waits at the grid barrier (cooperative)
        self.grid_done = False  # ... and this block's arrival completed it: release the grid

    # -- called by the threads -------------------------------------------------------------

    def wait(self, t, op):
        """Block thread ``t`` in ``op`` until the op completes; return its result."""
        with self.lock:
            if self.error is not None:
                raise _Abort()
            t.op = op
            self.blocked += 1
            if op.kind in BARRIERS:
                self.barrier.append(t)
                self._try_barrier()
            elif op.kind == "quiesce":  # memory.Array._uninit: completed by _progress
                self.quiescing.append(t)
            else:
                self.pending[t.warp][t.lane] = t
                if op.kind != "activemask":  # completed by _progress
                    self._try_group(t)
            self._progress(t.warp)
            done, self.grid_done = self.grid_done, False
            head, sleep = self._chain(), t.op is not None and self.error is None and not done
        _wake(head)
        if done:  # this thread completed the grid barrier: it wakes every block
            self.grid.release(t)
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
            if self.live == 0 and self.grid is not None:
                self.grid_done |= self.grid.leave(self.at_grid)
            done, self.grid_done = self.grid_done, False
            head = self._chain()
            t.target = None  # drop the kernel's arguments
            with _idle_lock:
                _idle.append(t)
        _wake(head)
        if done:
            self.grid.release(None)

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
            if self.grid is not None:
                self.grid.fail(error)
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
        if self.error is None and self.live and self.blocked == self.live and not self.at_grid:
            if self.quiescing:  # everyone else is blocked or done: let them go on
                for u in self.quiescing:
                    self._release(u, None)
                self.quiescing = []
            else:
                self._fail(SyncError(self._deadlock_message()))

    def _try_barrier(self):
        if not self.barrier or len(self.barrier) != self.live or self.error is not None:
            return
        sites = {}
        for t in self.barrier:
            sites.setdefault(t.op.site, []).append(t.tid)
        if len(sites) > 1:
            lines = "\n".join(f"  {len(ids)} thread(s) (tid {ranges(ids)}) at {where(site)}"
                              for site, ids in sites.items())
            self._fail(SyncError(
                f"kernel '{self.kernel}', block {self.block_idx}: threads of one block wait at "
                f"different syncthreads() calls:\n{lines}\nA barrier inside a divergent branch is "
                "undefined behaviour on the GPU (it hangs or silently mis-synchronises): every "
                "thread of the block that has not exited must reach the same syncthreads()."))
            return
        kind = self.barrier[0].op.kind
        if kind == "grid_sync" and self.grid is not None:
            if not self.at_grid:  # the block has arrived: wait for the others (grid.release)
                self.at_grid = True
                self.grid_done |= self.grid.arrive()
            return
        preds = [bool(t.op.value) for t in self.barrier]
        result = {"syncthreads": None, "grid_sync": None, "syncthreads_count": sum(preds),
                  "syncthreads_and": int(all(preds)), "syncthreads_or": int(any(preds))}[kind]
        waiting, self.barrier = self.barrier, []
        for t in waiting:
            t.epoch += 1
            t.tick()
            self._release(t, result)
        if memory.observers:
            memory.notify_event("barrier")

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
                        f"{op.describe()} at {where(op.site)} and {uop.describe()} at "
                        f"{where(uop.site)}. All lanes named in a mask must pass the same mask."))
                return
            if uop.kind != op.kind:
                self._fail(SyncError(
                    f"kernel '{self.kernel}', block {self.block_idx}, warp {warp}: lanes of mask "
                    f"0x{op.mask:08x} called different warp intrinsics: {op.kind} at "
                    f"{where(op.site)} and {uop.kind} at {where(uop.site)}."))
                return
            members.append(u)
        results = warp_results(op.kind, {u.lane: u.op for u in members})
        for u in members:
            del self.pending[warp][u.lane]
            if op.kind == "syncwarp":
                u.wepoch += 1
                u.tick()
            self._release(u, results[u.lane])

    def _deadlock_message(self):
        groups = {}
        for t in self.threads:
            if not t.exited and t.op is not None:
                key = (t.op.describe(), t.op.site)
                groups.setdefault(key, []).append(t.tid)
        lines = "\n".join(f"  tid {ranges(ids)} wait in {what} at {where(site)}"
                          for (what, site), ids in groups.items())
        return (f"kernel '{self.kernel}', block {self.block_idx} cannot make progress: every live "
                f"thread is waiting and none of the waits can complete (on a GPU this hangs):\n"
                f"{lines}\nA warp intrinsic waits for every non-exited lane in its mask; "
                "syncthreads() waits for every non-exited thread of the block.")


def _wake(t):
    if t is not None:
        t.wake.release()


class _Worker(threading.Thread):
    """A simulated CUDA thread. Workers are reused for block after block and launch after
    launch, so the fields below are reset by ``assign`` for each block. ``FakeCUDAModule``
    reads ``threadIdx``, ``blockIdx``, ``thread_id`` and calls ``syncthreads*`` on
    ``threading.current_thread()``; the array proxies read ``clk`` and ``launch``."""

    def __init__(self):
        super().__init__(daemon=True, name="cudasim-thread")
        self.job = threading.Lock()  # held while idle; released to run the assigned block
        self.job.acquire()
        self.wake = threading.Lock()  # held while asleep in a barrier or warp intrinsic
        self.wake.acquire()
        self.block = None
        self.start()

    def assign(self, block, target, debug, blockIdx, threadIdx, tid, ordinal, launch):
        self.block, self.target, self.debug, self.launch = block, target, debug, launch
        self.blockIdx, self.threadIdx = Dim3(*blockIdx), Dim3(*threadIdx)
        self.bidx, self.tidx = tuple(blockIdx), tuple(threadIdx)
        self.thread_id = self.tid = tid
        self.warp, self.lane = divmod(tid, 32)
        self.op = self.result = self.exception = self.next = None  # next: see _Block._chain
        self.exited = False
        self.ordinal, self.gtid = ordinal, (ordinal, tid)
        self.epoch = self.wepoch = self.gepoch = 0
        self.tick()

    def tick(self):
        """Rebuild the racecheck clock after a barrier, syncwarp or grid sync (the layout
        ``rules.unordered`` reads)."""
        self.clk = (self.gtid, self.ordinal, self.epoch, self.wepoch, self.warp, self.tidx,
                    self.bidx, self.gepoch)

    def run(self):
        while True:
            self.job.acquire()
            try:
                with np.errstate(all="ignore", divide="raise" if self.debug else "ignore"):
                    self.target()
            except BaseException as e:  # reported like the stock simulator does
                if not isinstance(e, SimulatorError):
                    where_ = f"tid={list(self.threadIdx)} ctaid={list(self.blockIdx)}"
                    try:
                        e = type(e)(f"{where_}: {e}" if str(e) else where_)
                    except Exception:  # an exception type that wants other arguments: keep it
                        pass
                self.exception = (e, sys.exc_info()[2])
            finally:
                self.block.exit(self)  # also puts this worker back in _idle

    def _barrier(self, kind, value=None):
        if type(value) is Indeterminate:
            value.use(f"given to {kind}() as its predicate")
        return self.block.wait(self, Op(kind, FULL_MASK, value, None, site()))

    def syncthreads(self):
        self._barrier("syncthreads")

    def syncthreads_count(self, value):
        return self._barrier("syncthreads_count", value)

    def syncthreads_and(self, value):
        return self._barrier("syncthreads_and", value)

    def syncthreads_or(self, value):
        return self._barrier("syncthreads_or", value)

    def grid_sync(self):
        """``cg.this_grid().sync()``: a barrier of every thread of a cooperative launch."""
        if self.block.grid is None and self.launch.blocks > 1:
            raise SyncError(
                f"kernel '{self.block.kernel}': cg.this_grid().sync() in a launch of "
                f"{self.launch.blocks} blocks that the simulator did not recognise as "
                f"cooperative (it looks for `this_grid` in the kernel's code and the device "
                f"functions it calls) at {where(site())}")
        self._barrier("grid_sync")


class _Grid:
    """The grid-wide barrier of a cooperative launch, whose blocks all run at once. A block
    arrives when every live thread of it waits at ``grid_sync``; when every block that has
    not finished has arrived, :meth:`release` frees them all as one wake-up chain. Locks are
    taken block, then grid (never a block's lock while holding the grid's)."""

    def __init__(self, blocks):
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.blocks = []            # filled by run_grid
        self.live = blocks          # blocks with a live thread
        self.arrived = 0            # of them, blocks waiting at the barrier
        self.error = None           # the first block's error (run_grid raises it)

    def arrive(self):
        with self.lock:
            self.arrived += 1
            return self._complete()

    def leave(self, arrived):
        with self.lock:
            self.live -= 1
            self.arrived -= arrived
            self.changed.notify()
            return self._complete()

    def _complete(self):
        if self.arrived and self.arrived == self.live:
            self.arrived = 0
            return True
        return False

    def fail(self, error):
        with self.lock:
            if self.error is None:
                self.error = error
            self.changed.notify()

    def release(self, me):
        """Free every thread waiting at the grid barrier (``me``, the caller, is awake)."""
        woken = []
        for b in self.blocks:
            with b.lock:
                if b.at_grid and b.error is None:
                    b.at_grid = False
                    waiting, b.barrier = b.barrier, []
                    for t in waiting:
                        t.epoch += 1
                        t.gepoch += 1
                        t.tick()
                        b._release(t, None)
                    if memory.observers:
                        memory.notify_event("barrier")
                woken += [t for t in b.woken if t is not me]
                b.woken = []
        for a, b in zip(woken, woken[1:] + [None]):
            a.next = b
        _wake(woken[0] if woken else None)


def current():
    """The simulated thread running this code (``RuntimeError`` outside a kernel)."""
    t = threading.current_thread()
    if getattr(t, "block", None) is None:
        raise RuntimeError("called outside a running simulated kernel")
    return t


_idle = []  # workers waiting for a block; guarded by _idle_lock
_idle_lock = threading.Lock()


def start_block(fn, name, grid_point, block_dim, ordinal, debug, args, launch, grid=None):
    """Start block ``grid_point`` of a launch (its ``ordinal``-th) on pooled workers."""
    bx, by, _ = block_dim
    points = sorted(np.ndindex(*block_dim), key=lambda p: p[0] + bx * (p[1] + by * p[2]))
    with _idle_lock:
        workers = [_idle.pop() for _ in range(min(len(points), len(_idle)))]
    workers += [_Worker() for _ in range(len(points) - len(workers))]

    def target():
        fn(*args)

    block = _Block(name, grid_point, workers, launch.dynshared, grid)
    for tid, (w, p) in enumerate(zip(workers, points)):
        w.assign(block, target, debug, grid_point, p, tid, ordinal, launch)
    for w in workers:
        w.job.release()
    return block


def finish_block(block):
    """Sleep until ``block`` is done; return its first error (None if it ran through)."""
    with block.lock:
        while block.live and block.error is None:
            block.done.wait()
        error = block.error
        if error is not None:  # let the woken threads leave; busy ones get a moment
            deadline = time.monotonic() + 0.5
            while block.live and time.monotonic() < deadline:
                block.done.wait(0.05)
    return error


def _raise(error):
    if isinstance(error, SyncError):
        raise error
    raise error.exception[0].with_traceback(error.exception[1])


def run_block(fn, name, grid_point, block_dim, ordinal, debug, args, launch):
    """Run one block and sleep until it is done; re-raise the first error of its threads."""
    error = finish_block(start_block(fn, name, grid_point, block_dim, ordinal, debug, args,
                                     launch))
    if error is not None:
        _raise(error)


def run_grid(fn, name, grid_points, block_dim, debug, args, launch):
    """Run every block of a cooperative launch at once (``cg.this_grid().sync()`` waits for
    all of them); re-raise the first error."""
    grid = _Grid(len(grid_points))
    grid.blocks = [start_block(fn, name, p, block_dim, i, debug, args, launch, grid)
                   for i, p in enumerate(grid_points)]
    with grid.lock:
        while grid.live and grid.error is None:
            grid.changed.wait()
        error = grid.error
    if error is not None:  # stop the other blocks (their threads may wait at the barrier)
        for b in grid.blocks:
            with b.lock:
                b._fail(error)
    for b in grid.blocks:
        finish_block(b)
    if error is not None:
        _raise(error)
