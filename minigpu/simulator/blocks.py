"""Blocks and threads: a block's threads as greenlets, scheduled in turn; barriers, synccheck.

A simulated CUDA thread is a greenlet (:class:`_Thread`): a function with its own stack that
runs until it waits (at ``syncthreads()``, a warp intrinsic, ...) or ends, and then switches
back to the launching code, which resumes the next thread ready to run (:func:`_schedule`).
All of a launch's threads share one OS thread, so moving from one simulated thread to the next
is a switch of stacks in user space (under a microsecond) instead of an operating-system
thread waking up and taking the GIL (tens to hundreds of microseconds, more on a busy machine;
the stock simulator starts an OS thread per CUDA thread and busy-polls them). Which thread runs
next changes no result: the racecheck clock below does not depend on the order, and a thread
never runs between another thread's check of an access and the access itself.

Exited threads count as arrived, as on Volta and later (strict mode, ``config.STRICT``,
reports a barrier they never reached: undefined by the CUDA programming guide). Threads waiting at *different*
``syncthreads()`` call sites (a barrier in a divergent branch: undefined behaviour on the GPU),
or a block where every live thread waits and none can go on (a deadlock, e.g. a warp intrinsic
waiting for a lane that sits at a barrier), raise ``SyncError`` naming the kernel and the
source lines instead of finishing silently or hanging. ``syncthreads_count/and/or`` go through the
same barrier. A cooperative launch (``launch.uses_grid_sync``) runs all its blocks at once
(:func:`run_grid`); ``cg.this_grid().sync()`` is then a barrier of every block (:class:`_Grid`).

A thread that spins on a value another thread has yet to write (a flag, a lock) would never
yield by itself: every ``memory.SPIN_LOADS`` loads (and atomics) without a wait, a thread goes
to the back of the queue (:meth:`_Thread.spin`), as the GPU's scheduler lets other warps run.

For racecheck each thread carries a logical clock (:meth:`_Thread.tick`): its block's launch
ordinal, the number of barriers it has passed (``epoch``; every live thread of a block is in
the same epoch, so two accesses of one block in different epochs are ordered by a barrier),
and the number of ``syncwarp`` rendezvous it took part in (``wepoch``: orders lanes of one
warp). The clock does not depend on the order the threads run in.
"""
import sys
import threading
from collections import deque

import numpy as np
from greenlet import greenlet, getcurrent

from . import memory, rules
from .errors import SimulatorError, SyncError, UninitializedReadError
from .indeterminate import Indeterminate
from .sites import BARRIERS, FULL_MASK, Op, _internal, ranges, site, where
from .warp import warp_results

Dim3 = None  # the simulator's kernelapi.Dim3, set by install()


class _Abort(Exception):
    """Raised inside the other threads of a block once the block has failed."""


class _Block:
    """Sync state of one running block. Its threads and the launching code share one OS
    thread, so nothing here needs a lock: the state changes only between switches."""

    def __init__(self, kernel, block_idx, nthreads, ready, dynshared=0, grid=None):
        self.kernel, self.block_idx = kernel, tuple(block_idx)
        self.grid = grid  # the _Grid of a cooperative launch, else None
        self.ready = ready  # threads released and waiting for their turn (run by _schedule)
        # this block's shared memory (memory.shared_array): arrays by source line, their
        # bytes, the race map, and the dynamic shared buffer (poisoned)
        self.shared, self.static_bytes = {}, 0
        self.shared_shadow = {} if memory.config.CHECKS else None
        self.taint = {}  # shared elements holding a stored indeterminate value (memory.py)
        self.dynshared = memory.poisoned_bytes(dynshared)
        self.threads = []  # by thread id, filled by start_block
        self.lanes = []  # the threads of each warp
        self.live = nthreads
        self.blocked = 0
        self.barrier = []  # threads waiting at a syncthreads*
        self.quiescing = []  # threads waiting until every other one is blocked or done
        # lane -> thread waiting in a warp intrinsic, per warp
        self.pending = [{} for _ in range((nthreads + 31) // 32)]
        self.error = None  # a SyncError, or (exception, traceback) of the kernel code
        self.at_grid = False  # every live thread waits at the grid barrier (cooperative)

    # -- called by the threads -------------------------------------------------------------

    def wait(self, t, op):
        """Block thread ``t`` in ``op`` until the op completes; return its result."""
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
        t.loads = 0
        if t.op is not None and self.error is None:
            t.parent.switch()  # asleep until _release (or _fail) puts t back in the queue
        if t.op is not None:  # woken because the block failed
            raise _Abort()
        return t.result

    def exit(self, t):
        t.exited = True
        self.live -= 1
        if t.exception is not None and not isinstance(t.exception[0], _Abort):
            self._fail(t.exception)
        elif self.error is None:
            self._try_barrier()
            for u in list(self.pending[t.warp].values()):
                if u.op is not None and u.op.kind != "activemask":
                    self._try_group(u)
            self._progress(t.warp)
        if self.live == 0 and self.grid is not None:
            self.grid.leave(self)

    # -- state changes -------------------------------------------------------------------

    def _release(self, t, result):
        """Complete ``t``'s wait with ``result``; it runs again in its turn (at once if it is
        the thread completing the op, which is running)."""
        t.result, t.op = result, None
        self.blocked -= 1
        if t is not getcurrent():
            self.ready.append(t)

    def _fail(self, error):
        if self.error is None:
            self.error = error
            if self.grid is not None:
                self.grid.fail(error)
            me = getcurrent()
            self.ready.extend(t for t in self.threads if t.op is not None and t is not me)

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
        if memory.config.STRICT and self.live < len(self.threads):
            self._fail(SyncError(self._partial_barrier_message()))
            return
        if kind == "grid_sync" and self.grid is not None:
            if not self.at_grid:  # the block has arrived: wait for the others (grid.release)
                self.at_grid = True
                self.grid.arrive()
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

    def _partial_barrier_message(self):
        """Strict mode: a barrier completing while some threads of the block have exited."""
        op = self.barrier[0].op
        gone = [t.tid for t in self.threads if t.exited]
        file, line, _ = op.site[0] if op.site else ("", 0, "")
        kind, at = rules.enclosing_branch(file, line) or (None, None)
        if kind == "if":
            why = (f"the barrier is inside the `if` at line {at}, whose condition differs "
                   f"between threads (a divergent barrier)")
        elif kind:
            why = (f"the barrier is inside the `{kind}` loop at line {at}, which those threads "
                   f"left early, skipped or never reached (a trip count that depends on the "
                   f"thread, or an early `return`)")
        else:
            why = "they returned before it (an early `return` ahead of the barrier)"
        call = "cg.this_grid().sync()" if op.kind == "grid_sync" else f"{op.kind}()"
        return (f"kernel '{self.kernel}', block {self.block_idx}: {call} at {where(op.site)} is "
                f"reached by {len(self.barrier)} of the block's {len(self.threads)} threads; "
                f"the other {len(gone)} (tid {ranges(gone)}) have exited without reaching it: "
                f"{why}. Strict mode (MINIGPU_SIM_STRICT=1) reports this; the default mode "
                f"accepts it, because on Volta and later GPUs (independent thread scheduling) a "
                f"barrier waits only for the threads that have not exited, so it completes. The "
                f"CUDA C++ Programming Guide allows __syncthreads() in conditional code only when "
                f"the condition evaluates identically across the entire thread block, and "
                f"calls anything else undefined (older GPUs hang or synchronise the wrong "
                f"threads). Let every thread reach the barrier: guard the work around it "
                f"(`if i < n:` around the loads and stores), not the barrier.")

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


class _Thread(greenlet):
    """A simulated CUDA thread: a greenlet that runs the kernel for one thread of one block at
    a time. Starting a greenlet costs ten times a switch, so threads are pooled per OS thread
    (:class:`_Pool`) and ``assign`` resets the fields below for each block. The parent is the
    launching code (:func:`_schedule`), switched back to when the thread waits and when it
    ends. ``FakeCUDAModule`` reads ``threadIdx``, ``blockIdx``, ``thread_id`` and calls
    ``syncthreads*`` on the current greenlet (:class:`ThreadAPI`); the array proxies read
    ``clk`` and ``launch``."""

    def assign(self, block, target, debug, blockIdx, threadIdx, tid, ordinal, launch):
        self.parent = getcurrent()
        self.block, self.target, self.debug, self.launch = block, target, debug, launch
        self.blockIdx, self.threadIdx = blockIdx, Dim3(*threadIdx)
        self.bidx, self.tidx = block.block_idx, threadIdx
        self.thread_id = self.tid = tid
        self.warp, self.lane = divmod(tid, 32)
        self.op = self.result = self.exception = None
        self.exited = False
        self.loads = 0  # loads since this thread last waited or yielded (spin)
        self.ordinal, self.gtid = ordinal, (ordinal, tid)
        self.epoch = self.wepoch = self.gepoch = 0
        self.fences, self.seen, self.pending = 0, {}, {}  # rules.fence, rules.atomic_release
        self.tick()

    def tick(self):
        """Rebuild the racecheck clock after a barrier, syncwarp, grid sync or fence (the
        layout ``rules.unordered`` reads)."""
        self.clk = (self.gtid, self.ordinal, self.epoch, self.wepoch, self.warp, self.tidx,
                    self.bidx, self.gepoch, self.fences, self.seen)

    def run(self):
        """Run assigned kernel threads, one per switch from the scheduler, forever."""
        while True:
            debug = self.debug
            with np.errstate(all="ignore", divide="raise" if debug else "ignore"):
                while self.debug == debug:
                    if self.block.error is None:  # else its block failed before its turn
                        self._run_kernel()
                    self.block.exit(self)
                    self.block = self.target = self.exception = None  # drop the kernel's data
                    _pools.idle.append(self)
                    self.parent.switch()  # idle until start_block assigns the next thread

    def _run_kernel(self):
        try:
            self.target()
        except BaseException as e:  # reported like the stock simulator does
            if type(e) is UnboundLocalError:
                e = self._unassigned_local(e)
            if not isinstance(e, SimulatorError):
                where_ = f"tid={list(self.threadIdx)} ctaid={list(self.blockIdx)}"
                try:
                    e = type(e)(f"{where_}: {e}" if str(e) else where_)
                except Exception:  # an exception type that wants other arguments: keep it
                    pass
            self.exception = (e, sys.exc_info()[2])

    def _unassigned_local(self, error):
        """A local variable read where this thread never assigned it (it is set only in a
        branch the thread did not take): on a GPU it is an uninitialised register, so this is
        initcheck's error at the read, not Python's ``UnboundLocalError``."""
        tb, frame = error.__traceback__, None
        while tb is not None:
            if not _internal(tb.tb_frame.f_code.co_filename):
                frame, line = tb.tb_frame, tb.tb_lineno
            tb = tb.tb_next
        name = str(error).split("'")[1] if str(error).count("'") >= 2 else "?"
        here = f" at {frame.f_code.co_filename}:{line} in {frame.f_code.co_name}()" \
            if frame is not None else ""
        return UninitializedReadError(
            f"kernel '{self.block.kernel}': thread {self.tidx} of block {self.bidx} read local "
            f"variable '{name}'{here}, but this thread never assigned it (it is set only on a "
            f"path this thread did not take, such as a branch whose condition differs between "
            f"threads); on a GPU it is an uninitialised register holding an indeterminate "
            f"value, and the value read is used there. Assign it on every path first.")

    def spin(self):
        """Called by the array proxies after ``memory.SPIN_LOADS`` loads without a wait: let
        the other ready threads run first (this one may be spinning on a value one of them is
        to write). A thread spinning after another thread of its block failed ends there (it
        may be waiting for a lock the failed thread held)."""
        self.loads = 0
        if self.block.error is not None:
            raise _Abort()
        ready = self.block.ready
        if ready and self.block.error is None:
            ready.append(self)
            self.parent.switch()
            if self.block.error is not None:
                raise _Abort()

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
    arrives when every live thread of it waits at ``grid_sync``; when every block of the grid
    has arrived, :meth:`release` frees them all. A block that has ended never arrives: once
    every other block waits for it, the launch is a deadlock (on a GPU it hangs for ever)."""

    def __init__(self, blocks):
        self.blocks = []            # filled by run_grid
        self.live = blocks          # blocks with a live thread
        self.arrived = 0            # of them, blocks waiting at the barrier
        self.ended = []             # blocks whose threads have all exited
        self.error = None           # the first block's error (run_grid raises it)

    def arrive(self):
        self.arrived += 1
        self._complete()

    def leave(self, block):
        self.live -= 1
        self.ended.append(block)
        self._complete()

    def _complete(self):
        if not self.arrived or self.arrived != self.live:
            return
        if self.ended:
            self.fail(SyncError(self._deadlock_message()))
            return
        self.arrived = 0
        self.release()

    def _deadlock_message(self):
        waiting = [b for b in self.blocks if b.at_grid]
        sites = {t.op.site for b in waiting for t in b.barrier}
        return (f"kernel '{waiting[0].kernel}': a grid-wide barrier (cg.this_grid().sync()) that "
                f"not every block reaches: {len(self.ended)} block(s) ended without arriving "
                f"({', '.join(str(b.block_idx) for b in self.ended)}), while "
                f"{len(waiting)} block(s) wait at {', '.join(where(s) for s in sites)} "
                f"({', '.join(str(b.block_idx) for b in waiting)}). A grid sync waits for every "
                f"block of the cooperative launch, ended or not: on a GPU this hangs for ever. "
                f"Every block must reach each grid sync (move the sync out of the branch or loop "
                f"whose condition depends on the block).")

    def fail(self, error):
        if self.error is None:
            self.error = error
            for b in self.blocks:
                b._fail(error)

    def release(self):
        """Free every thread waiting at the grid barrier."""
        for b in self.blocks:
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


class ThreadAPI:
    """Members of the simulator's ``FakeCUDAModule`` (the ``cuda`` a kernel sees) that read
    the simulated thread: the current greenlet, where the stock simulator reads the current OS
    thread."""

    threadIdx = property(lambda self: getcurrent().threadIdx)
    blockIdx = property(lambda self: getcurrent().blockIdx)
    laneid = property(lambda self: getcurrent().lane)

    def syncthreads(self):
        getcurrent().syncthreads()

    def syncthreads_count(self, val):
        return getcurrent().syncthreads_count(val)

    def syncthreads_and(self, val):
        return getcurrent().syncthreads_and(val)

    def syncthreads_or(self, val):
        return getcurrent().syncthreads_or(val)


def current():
    """The simulated thread running this code (``RuntimeError`` outside a kernel)."""
    t = getcurrent()
    if getattr(t, "block", None) is None:
        raise RuntimeError("called outside a running simulated kernel")
    return t


def start_block(fn, name, grid_point, block_dim, ordinal, debug, args, launch, ready,
                grid=None):
    """Make the threads of block ``grid_point`` of a launch (its ``ordinal``-th) and queue
    them in ``ready``, thread 0 first."""
    bx, by, _ = block_dim
    points = sorted(np.ndindex(*block_dim), key=lambda p: p[0] + bx * (p[1] + by * p[2]))

    def target():
        fn(*args)

    block = _Block(name, grid_point, len(points), ready, launch.dynshared, grid)
    pool, block_idx = _pools.idle, Dim3(*grid_point)
    threads = block.threads = [pool.pop() if pool else _Thread() for _ in points]
    for tid, (t, p) in enumerate(zip(threads, points)):
        t.assign(block, target, debug, block_idx, p, tid, ordinal, launch)
    block.lanes = [threads[w:w + 32] for w in range(0, len(threads), 32)]
    ready.extend(threads)
    return block


class _Pool(threading.local):
    """The idle simulated threads of each OS thread (a greenlet runs only where it was made)."""

    def __init__(self):
        self.idle = []


_pools = _Pool()


def _schedule(ready):
    """Run the queued threads in turn until none is ready (each runs until it waits or ends)."""
    while ready:
        ready.popleft().switch()


def _raise(error):
    if isinstance(error, SyncError):
        raise error
    raise error[0].with_traceback(error[1])


def run_block(fn, name, grid_point, block_dim, ordinal, debug, args, launch):
    """Run one block to its end; re-raise the first error of its threads."""
    ready = deque()
    block = start_block(fn, name, grid_point, block_dim, ordinal, debug, args, launch, ready)
    _schedule(ready)
    if block.error is not None:
        _raise(block.error)


def run_grid(fn, name, grid_points, block_dim, debug, args, launch):
    """Run every block of a cooperative launch at once (``cg.this_grid().sync()`` waits for
    all of them); re-raise the first error."""
    ready = deque()
    grid = _Grid(len(grid_points))
    grid.blocks = [start_block(fn, name, p, block_dim, i, debug, args, launch, ready, grid)
                   for i, p in enumerate(grid_points)]
    _schedule(ready)
    if grid.error is not None:
        _raise(grid.error)
