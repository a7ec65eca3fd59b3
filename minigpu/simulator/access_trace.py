"""Access traces: which lane of which warp touched which address, for pictures and the grader.

``with minigpu.cuda.trace(block=0) as tr:`` records every global and shared access of the
chosen block(s) of every kernel launch inside the ``with`` (under ``NUMBA_ENABLE_CUDASIM=1``),
one :class:`Touch` per thread and access, in the order the threads made them. ``block`` is a
block index (an int means ``(x, 0, 0)``), a tuple, or ``None`` for every block; ``warp``
keeps only one warp (linear thread id // 32) of those blocks. Nothing is counted here:
:meth:`Trace.requests` groups the touches into warp-level requests exactly as the counters
do (``counters.py``: same source line, same array, same dynamic occurrence), and
``minigpu/lessons/draw.py`` draws them.

It is one more observer of the simulator's access events (``memory.observers``), next to the
counters: it needs the array proxies the sanitizer makes (made while an observer is installed,
even with ``MINIGPU_SIM_CHECKS=0``). Constant memory (``cuda.const.array_like``) and local
arrays are not traced: they never reach global or shared memory.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import NamedTuple

from greenlet import getcurrent

from . import memory

SECTOR, BANKS, WARP = 32, 32, 32


class Touch(NamedTuple):
    """One thread's access to one element."""
    launch: int         # ordinal of the launch inside the trace (0, 1, ...)
    kernel: str
    array: str          # parameter name, or the variable a shared array was bound to
    space: str          # "global" or "shared"
    kind: str           # "load", "store" or "atomic"
    offset: int         # byte offset from the array's first element
    itemsize: int
    site: tuple         # (file, line) in the kernel or device function
    block: tuple        # blockIdx
    thread: tuple       # threadIdx
    tid: int            # linear thread id in the block
    phase: int          # barriers the thread had passed (its barrier interval)
    occurrence: int     # the k-th time this thread executed this access

    @property
    def index(self):
        """The element's flat index in its array (row-major for a dense array)."""
        return self.offset // self.itemsize

    @property
    def warp(self):
        return self.tid // WARP

    @property
    def lane(self):
        return self.tid % WARP


class Request(NamedTuple):
    """The lanes of one warp executing one access together (one request to the memory)."""
    launch: int
    kernel: str
    array: str
    space: str
    kind: str
    site: tuple
    block: tuple
    warp: int
    phase: int
    lanes: dict         # lane -> (offset, itemsize)

    @property
    def mask(self):
        """The active-lane mask: bit l set when lane l took part."""
        return sum(1 << lane for lane in self.lanes)

    def sectors(self):
        """The 32-byte sectors the lanes touch (global memory)."""
        out = set()
        for off, size in self.lanes.values():
            out.update(range(off // SECTOR, (off + size - 1) // SECTOR + 1))
        return sorted(out)

    def banks(self):
        """bank -> the distinct 4-byte words of that bank the lanes touch (shared memory)."""
        words = set()
        for off, size in self.lanes.values():
            words.update(range(off // 4, (off + size - 1) // 4 + 1))
        per_bank = {}
        for w in sorted(words):
            per_bank.setdefault(w % BANKS, []).append(w)
        return per_bank

    def wavefronts(self):
        """Passes the shared-memory request needs: the most distinct words in one bank."""
        return max((len(w) for w in self.banks().values()), default=0)


class LaunchInfo(NamedTuple):
    kernel: str
    grid: tuple
    block: tuple


class Trace:
    """What ``trace()`` yields: ``launches`` (kernel, grid, block) and ``touches``."""

    def __init__(self, block, warp):
        self.want_block = block
        self.want_warp = warp
        self.launches: list[LaunchInfo] = []
        self.touches: list[Touch] = []
        self.shapes = {}           # (launch, array) -> the array's shape, where it was seen
        self._seen = {}
        self._dims = None

    # -- the observer: called by the simulator --------------------------------------------
    def launch(self, name, grid, block):
        self.launches.append(LaunchInfo(name, tuple(grid), tuple(block)))
        self._dims, self._seen = tuple(block), {}

    def end(self):
        self._dims = None

    def __call__(self, access):
        if access.space not in ("global", "shared") or self._dims is None:
            return
        if self.want_block is not None and access.block != self.want_block:
            return
        bx, by, _ = self._dims
        x, y, z = access.thread
        tid = x + bx * (y + by * z)
        if self.want_warp is not None and tid // WARP != self.want_warp:
            return
        launch = len(self.launches) - 1
        if (launch, access.array) not in self.shapes:
            self.shapes[launch, access.array] = _shape_of_caller()
        key = (access.block, tid, access.site, access.kind, access.array_id)
        n = self._seen.get(key, 0)
        self._seen[key] = n + 1
        phase = getattr(getcurrent(), "epoch", 0)
        self.touches.append(Touch(launch, access.kernel, access.array,
                                  access.space, access.kind, access.offset, access.itemsize,
                                  access.site, access.block, access.thread, tid, phase, n))

    # -- queries ----------------------------------------------------------------------------
    def select(self, space=None, kind=None, array=None, launch=None, kernel=None, warp=None,
               block=None):
        """The touches matching every given filter (``launch``: an ordinal, -1 the last;
        ``kernel``: a substring of the kernel's name; ``block``: a blockIdx tuple)."""
        if launch is not None and launch < 0:
            launch += len(self.launches)
        if isinstance(block, int):
            block = (block, 0, 0)
        return [t for t in self.touches
                if (space is None or t.space == space) and (kind is None or t.kind == kind)
                and (array is None or t.array == array)
                and (launch is None or t.launch == launch)
                and (kernel is None or kernel in t.kernel)
                and (warp is None or t.tid // WARP == warp)
                and (block is None or t.block == tuple(block) + (0,) * (3 - len(block)))]

    def requests(self, **filters):
        """The matching touches grouped into warp-level requests, in the order of each
        request's first touch (program order for one warp)."""
        groups = {}
        for t in self.select(**filters):
            key = (t.launch, t.space, t.kind, t.block, t.warp, t.site, t.array, t.occurrence)
            req = groups.get(key)
            if req is None:
                req = groups[key] = Request(t.launch, t.kernel, t.array, t.space, t.kind,
                                            t.site, t.block, t.warp, t.phase, {})
            req.lanes[t.lane] = (t.offset, t.itemsize)
        return list(groups.values())

    def shape(self, array, launch=0):
        """The shape of ``array`` as the kernel saw it in launch ``launch`` (None: unknown)."""
        return self.shapes.get((launch, array))

    def arrays(self, space=None):
        """Names of the traced arrays, in order of first touch."""
        return list(dict.fromkeys(t.array for t in self.touches
                                  if space is None or t.space == space))


def _shape_of_caller():
    """The shape of the array proxy whose access is being reported (the observer is called
    from ``memory._notify(arr, ...)``); None where the simulator does not say."""
    try:
        return tuple(sys._getframe(2).f_locals["arr"].shape)
    except (KeyError, AttributeError, ValueError):
        return None


_lock = threading.Lock()


@contextlib.contextmanager
def trace(block=0, warp=None):
    """``with trace(block=0, warp=None) as tr:`` records the global and shared accesses of
    block ``block`` (an int is ``(block, 0, 0)``; ``None``: every block) of every simulated
    launch inside the ``with``; ``warp`` keeps one warp of it. Yields a :class:`Trace`."""
    if isinstance(block, int):
        block = (block, 0, 0)
    elif block is not None:
        block = tuple(block) + (0,) * (3 - len(block))
    tr = Trace(block, warp)
    with _lock:
        memory.observers.append(tr)
    try:
        yield tr
    finally:
        with _lock:
            memory.observers.remove(tr)
