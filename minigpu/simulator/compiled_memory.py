"""The compiled path's memory: checked loads, stores and atomics as Numba CPU functions.

Every array a compiled kernel touches (:mod:`.compiled`) is a :class:`Buf`: the data, its bits as
integers (to recognise the poison of never-written memory, ``memory.poison_of``), and
an int64 shadow array that records, per element, the last writer (thread, epoch) and the
readers (one thread, or ``MANY``; their latest epoch; their block, or ``MANY``).

A thread is ``T`` (1 + its global linear index), in block ``B``, at barrier epoch ``E`` (the
number of ``syncthreads`` its block has passed). Two accesses of one element, at least one a
store, by different threads, conflict unless they are in the same block and in different epochs
(a barrier orders them). Atomics do not conflict with atomics; a plain access after an atomic
is ordered only by a barrier of the same block.

These functions never decide an error. They *suspect* one: an index outside ``[0, n)``
(negative included), a load of the poison, a conflict, an integer division by zero. They write
the reason to ``F[0]`` and go on with a harmless value; the launch is then run again from its
saved arguments on the checked interpreter, which gives the verdict and the message
(:func:`.compiled.launch`). So the compiled path can only be slower than the checked one on a
suspect kernel, never more lenient.

Speed: every helper here is inlined into the kernel's machine code (``forceinline``: LLVM's
``alwaysinline``; Numba's own IR inlining costs minutes of compile time for a matmul), and the
driver works on *borrowed* arrays (:func:`borrow`: the same views without their reference
count). A Buf's arrays, passed by value through calls that Numba counts, made each access pay
dozens of atomic reference-count updates: 1 microsecond an element, 100 times the cost of the
check itself. Every array the driver touches is allocated by its Python caller, who keeps it
alive for the launch, so a borrowed view never outlives its memory.

Compile time: Numba passes a tuple by value, one scalar per field of each of its arrays, and its
textual LLVM IR spells the whole aggregate type at every field it extracts. So a Buf is as few
arrays as it can be (the five shadows of an element are one row of ``shadow``), and a shadow
check receives that row, not the Buf; the poison's bits are ``meta[4]``: a 128x128 matmul's IR
went from 39 MB to 8 MB, its first call from 36-41 s to 15-19 s (with the regions taking only
the arguments they read, ``compiled.py``; ``docs/simulator.md``).
"""
from collections import namedtuple

import numpy as np
from numba import njit, types
from numba.core import cgutils, ir, ir_utils
from numba.extending import intrinsic, overload

from .counters import (ARRAY, ATOMIC, BLOCK as LOG_BLOCK, GLOBAL, ITEMSIZE, KIND, LOAD, LOCAL,
                       OFFSET, SITE, SPACE, STORE, THREAD as LOG_THREAD)
from .memory import poison_of

SUSPECTS = {1: "an index outside the array", 2: "a load of never-written memory",
            3: "two threads' accesses not ordered by a barrier", 4: "an integer division by zero",
            5: "a barrier or warp intrinsic not reached by every thread alike",
            6: "a loop that ran 2**24 times in one thread of one region (a spin on another "
               "thread's write: the compiled path runs that thread only after it)",
            7: "a bit intrinsic (popc, ffs, clz, brev) of a negative value or one of more "
               "than 32 bits (the checked path's Python counts those otherwise)",
            8: "a local variable read where this thread never assigned it"}
OUTSIDE, POISON, CONFLICT, DIVIDE, DIVERGENT, RUNAWAY, BITS, UNSET = 1, 2, 3, 4, 5, 6, 7, 8
MANY = -1           # more than one reader (``rt``), or readers of several blocks (``rb``)
ATOMIC_MIXED = -(2 ** 62)  # ``wt`` of an element updated atomically by several blocks
_INLINE = {"forceinline": True}

# the thread context ``c`` every compiled function receives
(TX, TY, TZ, BX, BY, BZ, BDX, BDY, BDZ, GDX, GDY, GDZ, THREAD, EPOCH, NTHREADS, BLOCK) = range(16)

Buf = namedtuple("Buf", "data bits shadow meta log")
"""An array as compiled code sees it. ``shadow``: int64, the data's shape and 5 more, the
element's race shadows (:data:`WT` ...). ``meta``: [poison recognisable (0/1), space, the array's
id for the counters, the byte offset of its first element from its allocation's, the poison's
bits (as ``bits`` holds them: a signed integer)]. ``log``: the
launch's access log while performance counters are on (every Buf of a launch shares it; no
rows: off)."""

NO_LOG = np.zeros((0, 8), np.int64)
"""The log of a launch nobody counts."""
WT, WE, RT, RE, RB = range(5)
"""An element's shadows: its last writer (a thread, or the negated block of an atomic), the
writer's epoch, its reader (a thread, or ``MANY``), the readers' latest epoch, their block (or
``MANY``)."""
# F, the launch's flags: [suspect, accesses logged, barriers completed, the running thread's
# loop iterations in its current region]
SUSPECT, LOGGED, BARRIERS, ITERATIONS = 0, 1, 2, 3
FLAGS = 4
RUNAWAY_ITERATIONS = 1 << 24
"""A thread's ``while`` iterations in one region before the compiled path suspects a spin."""


def _bits_of(data):
    """The data's bits as signed integers (compared with an int64 exactly), the poison's bits,
    whether the poison is recognisable."""
    kind, _, bits, _ = poison_of(data.dtype)
    if kind:
        return data.view(f"i{data.itemsize}"), int(bits), 1
    return np.zeros(data.shape, np.int8), 0, 0


def make_buf(data, space=GLOBAL, log=NO_LOG, array_id=0, base=0):
    """The :class:`Buf` of a NumPy array (fresh, empty shadows); ``log``, ``array_id`` and
    ``base`` (bytes from the start of its allocation) for the counters."""
    bits, poison, recognisable = _bits_of(data)
    return Buf(data, bits, np.zeros(data.shape + (5,), np.int64),
               np.array([recognisable, space, array_id, base, poison], np.int64), log)


@njit(cache=False)
def reset(x):
    """Fresh memory again in a Buf (a block's shared arrays, before the block runs)."""
    if x.meta[0]:
        x.bits.fill(x.meta[4])
    x.shadow.fill(0)


@intrinsic
def borrowed(typingctx, arr):
    """The array ``arr`` without its reference count (a null meminfo): copies and calls of it
    cost no atomic update. Valid while the owner of the memory keeps it alive."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, sig, args):
        val = args[0]
        for field in (0, 1):   # meminfo, parent
            val = builder.insert_value(val, cgutils.get_null_value(val.type.elements[field]),
                                       field)
        return val
    return arr(arr), codegen


def borrow(x):
    """The driver's argument borrowed (:func:`borrowed`): a Buf's arrays, an array, or a tuple
    of them."""


@overload(borrow, jit_options=_INLINE)
def _borrow_ov(x):
    if _is_buf(x):
        return lambda x: Buf(borrowed(x.data), borrowed(x.bits), borrowed(x.shadow),
                             borrowed(x.meta), borrowed(x.log))
    if isinstance(x, types.Array):
        return lambda x: borrowed(x)
    if isinstance(x, types.BaseTuple):
        items = "".join(f"borrow(x[{k}]), " for k in range(len(x)))
        return _compile(f"def impl(x):\n    return ({items})\n", "impl",
                        {"borrow": borrow})
    return lambda x: x


def _alias_of_argument(lhs, args, alias_map, arg_aliases):
    arg_aliases.add(lhs)


def _caller_owned(instr, args, typemap, func_ir, alias_map, arg_aliases):
    """In the compiled path's code, every array (and tuple of arrays) is memory of the
    driver's caller, whatever Numba's alias analysis follows of the borrowing."""
    name = instr.target.name
    if typemap and func_ir.loc.filename.startswith("<minigpu.compiled") and \
            isinstance(typemap.get(name), (types.Array, types.BaseTuple)):
        arg_aliases.add(name)


# What ``borrow`` returns is its argument's memory: Numba's dead-code elimination must not
# drop the stores through it as stores to a fresh array nobody reads (its alias analysis
# follows an attribute of a tuple only in block order, and the inliner reorders blocks).
ir_utils.alias_func_extensions[("borrow", __name__)] = _alias_of_argument
ir_utils.alias_analysis_extensions[ir.Assign] = _caller_owned


@njit(cache=False, forceinline=True)
def local_row(s, t, reset):
    """Thread ``t``'s local array in the block's storage ``s`` (poisoned again if ``reset``:
    the kernel allocates it there)."""
    if reset and s.meta[0]:
        s.bits[t].fill(s.meta[4])
    return Buf(s.data[t], s.bits[t], s.shadow[t], s.meta, s.log)


# ----------------------------------------------------------------------------- shadows


@njit(cache=False, forceinline=True)
def _conflicts(other, other_epoch, c):
    """Thread ``other`` (> 0) accessed the element at ``other_epoch``: unordered with ``c``'s?"""
    if other == c[THREAD]:
        return False
    return (other - 1) // c[NTHREADS] != c[BLOCK] or other_epoch == c[EPOCH]


@njit(cache=False, forceinline=True)
def _readers_conflict(s, c):
    r = s[RT]
    if r == 0 or r == c[THREAD]:
        return False
    if r == MANY:
        return s[RB] != c[BLOCK] or s[RE] == c[EPOCH]
    return _conflicts(r, s[RE], c)


@njit(cache=False, forceinline=True)
def _atomic_conflicts(w, epoch, c):
    """``w`` < 0: the element was updated atomically (by block -w-1, or by several)."""
    return w == ATOMIC_MIXED or -w - 1 != c[BLOCK] or epoch == c[EPOCH]


@njit(cache=False, forceinline=True)
def observe_load(s, c, F):
    """A load of the element whose shadows are ``s``."""
    w = s[WT]
    if w > 0 and _conflicts(w, s[WE], c) or w < 0 and _atomic_conflicts(w, s[WE], c):
        F[0] = CONFLICT
    r = s[RT]
    if r == 0 or r == c[THREAD] or s[RB] == c[BLOCK] and s[RE] != c[EPOCH]:
        # the earlier readers of this block read before a barrier: ordered with what follows
        s[RT] = c[THREAD]
        s[RB] = c[BLOCK]
    else:
        s[RT] = MANY
        if s[RB] != c[BLOCK]:
            s[RB] = MANY
    s[RE] = c[EPOCH]


@njit(cache=False, forceinline=True)
def observe_store(s, c, F):
    w = s[WT]
    if w > 0 and _conflicts(w, s[WE], c) or w < 0 and _atomic_conflicts(w, s[WE], c) \
            or _readers_conflict(s, c):
        F[0] = CONFLICT
    s[WT] = c[THREAD]
    s[WE] = c[EPOCH]


@njit(cache=False, forceinline=True)
def observe_atomic(s, c, F):
    w = s[WT]
    if w > 0 and _conflicts(w, s[WE], c) or _readers_conflict(s, c):
        F[0] = CONFLICT
    if w == 0 or w > 0 or w == -c[BLOCK] - 1:
        s[WT] = -c[BLOCK] - 1
    else:
        s[WT] = ATOMIC_MIXED
    s[WE] = c[EPOCH]


@njit(cache=False, forceinline=True)
def log_access(log, meta, site, kind, offset, itemsize, c, F):
    """Counters on: the access as one row of the launch's log (``counters.py``'s columns). A
    full log counts the rows it could not take; the launch then runs again with room."""
    n = F[LOGGED]
    F[LOGGED] = n + 1
    if n < log.shape[0]:
        row = log[n]
        row[SITE], row[KIND], row[SPACE], row[ARRAY] = site, kind, meta[1], meta[2]
        row[LOG_BLOCK] = c[BLOCK]
        row[LOG_THREAD] = c[THREAD] - 1 - c[BLOCK] * c[NTHREADS]
        row[OFFSET], row[ITEMSIZE] = offset, itemsize


@njit(cache=False, forceinline=True)
def loop_goes_on(F):
    """Whether a ``while`` loop may test its condition again: not after a suspect, nor after
    :data:`RUNAWAY_ITERATIONS` iterations of the running thread in this region. A region runs
    its threads one after another, so a thread spinning until a later thread writes would
    spin for ever; it is suspected instead (``RUNAWAY``), and the checked path, whose threads
    take turns, runs the launch."""
    if F[SUSPECT]:
        return False
    F[ITERATIONS] += 1
    if F[ITERATIONS] > RUNAWAY_ITERATIONS:
        F[SUSPECT] = RUNAWAY
        return False
    return True


# ----------------------------------------------------------------------------- the stubs
# Compiled kernels call these; Numba picks the implementation by the argument types (a Buf or
# a plain array or tuple: a constant array, a shape).


def load(x, idx, c, F, site):
    """``x[idx]`` (``idx`` a tuple of integers) at ``site`` (an integer naming the line of
    source: the counters group a warp's accesses by it)."""


def store(x, idx, v, c, F, site):
    """``x[idx] = v``."""


def atomic_cas(x, idx, old, v, c, F, site):
    """``cuda.atomic.compare_and_swap`` / ``cas``: the old value."""


def shape_of(x):
    """``x.shape``."""


def size_of(x):
    """``x.size``."""


def ndim_of(x):
    """``x.ndim``."""


def len_of(x):
    """``len(x)``."""


def _is_buf(x):
    return isinstance(x, types.NamedTuple) and x.instance_class is Buf


def _index_code(nd, name):
    """Source lines that bounds-check ``idx`` against ``{name}.shape`` into tuple ``p``."""
    lines = [f"    i{k} = idx[{k}]\n    if i{k} < 0 or i{k} >= {name}.shape[{k}]:\n"
             f"        F[0] = {OUTSIDE}\n        return _outside({name})" for k in range(nd)]
    ks = ", ".join(f"i{k}" for k in range(nd))
    return "\n".join(lines) + f"\n    p = ({ks},)\n"


_POISON_CHECK = f"    if x.meta[0] and x.bits[p] == x.meta[4]:\n        F[0] = {POISON}\n"
"""Source line of a load or atomic: element ``p`` of Buf ``x`` still holds the poison."""


def _observed(nd, observe, kind):
    """Source lines that record a non-local access of element ``p``: ``observe`` (the
    shadows) and, counters on, its row of the log."""
    offset = " + ".join(["x.meta[3]"] + [f"i{k} * x.data.strides[{k}]" for k in range(nd)])
    ks = ", ".join(f"i{k}" for k in range(nd))
    return (f"    if x.meta[1] != LOCAL:\n        {observe}(x.shadow[{ks}], c, F)\n"
            f"        if x.log.shape[0]:\n"
            f"            log_access(x.log, x.meta, site, {kind}, {offset}, x.data.itemsize, "
            f"c, F)\n")


@njit(cache=False, forceinline=True)
def _zero_of(a):
    return np.zeros(1, a.dtype)[0]


def _outside(a):
    """What a suspect access gives: 0 of the array's type."""


@overload(_outside, jit_options=_INLINE)
def _outside_ov(a):
    if isinstance(a, types.Array):
        return lambda a: _zero_of(a)
    return lambda a: a[0]


def _compile(src, name, extra=None):
    ns = {"_outside": _outside, "observe_load": observe_load, "observe_store": observe_store,
          "observe_atomic": observe_atomic, "log_access": log_access, "LOCAL": LOCAL, "np": np,
          **(extra or {})}
    exec(compile(src, f"<minigpu.compiled_memory.{name}>", "exec"), ns)
    return ns[name]


def _unwrap(idx):
    """``a[t]`` with ``t`` a tuple of indices arrives as ``((i, j),)``."""
    if isinstance(idx, types.BaseTuple) and len(idx) == 1 and \
            isinstance(idx[0], types.BaseTuple):
        return idx[0]
    return idx


def _check_index(idx, nd, partial=False):
    """``idx`` must be ``nd`` integers (fewer, if ``partial``: a view of a sub-array)."""
    idx = _unwrap(idx)
    if not isinstance(idx, types.BaseTuple) or not (
            len(idx) == nd or partial and 0 < len(idx) < nd) or \
            not all(isinstance(t, (types.Integer, types.Boolean)) for t in idx):
        raise TypeError(f"the compiled path indexes a {nd}-d array only with {nd} integers, "
                        f"not {idx}")


def _sub_array(x, idx):
    """``x[i]`` of a 2-d Buf ``x`` (or ``x[i, j]`` of a 3-d one ...): the Buf of that
    sub-array, a view of its data, bits and shadows, its byte offset moved for the counters'
    log. An index outside the array is suspected and gives the first sub-array."""
    k = len(_unwrap(idx))
    unwrap = "    idx = idx[0]\n" if _unwrap(idx) is not idx else ""
    checks = "".join(f"    i{j} = idx[{j}]\n    if i{j} < 0 or i{j} >= x.data.shape[{j}]:\n"
                     f"        F[0] = {OUTSIDE}\n        i{j} = 0\n" for j in range(k))
    p = ", ".join(f"i{j}" for j in range(k))
    offset = " + ".join(f"i{j} * x.data.strides[{j}]" for j in range(k))
    src = (f"def impl(x, idx, c, F, site):\n{unwrap}{checks}"
           f"    meta = x.meta.copy()\n    meta[3] += {offset}\n"
           f"    return Buf(x.data[{p}], x.bits[{p}], x.shadow[{p}], meta, x.log)\n")
    return _compile(src, "impl", {"Buf": Buf})


@overload(load, jit_options=_INLINE)
def _load_ov(x, idx, c, F, site):
    if _is_buf(x):
        nd = x[0].ndim
        _check_index(idx, nd, partial=True)
        if len(_unwrap(idx)) < nd:
            return _sub_array(x, idx)
        unwrap = "    idx = idx[0]\n" if _unwrap(idx) is not idx else ""
        src = (f"def impl(x, idx, c, F, site):\n{unwrap}{_index_code(nd, 'x.data')}"
               + _POISON_CHECK + _observed(nd, "observe_load", LOAD) + "    return x.data[p]\n")
        return _compile(src, "impl")
    if isinstance(x, types.Array):
        _check_index(idx, x.ndim)
        unwrap = "    idx = idx[0]\n" if _unwrap(idx) is not idx else ""
        src = (f"def impl(x, idx, c, F, site):\n{unwrap}{_index_code(x.ndim, 'x')}"
               "    return x[p]\n")
        return _compile(src, "impl")
    if isinstance(x, types.BaseTuple):
        return lambda x, idx, c, F, site: x[idx[0]]


@overload(store, jit_options=_INLINE)
def _store_ov(x, idx, v, c, F, site):
    if _is_buf(x):
        nd = x[0].ndim
        _check_index(idx, nd)
        unwrap = "    idx = idx[0]\n" if _unwrap(idx) is not idx else ""
        src = (f"def impl(x, idx, v, c, F, site):\n{unwrap}"
               + _index_code(nd, "x.data").replace("return _outside(x.data)", "return")
               + _observed(nd, "observe_store", STORE) + "    x.data[p] = v\n")
        return _compile(src, "impl")




_ATOMIC_UPDATES = {
    "add": "old + v", "sub": "old - v", "max": "max(old, v)", "min": "min(old, v)",
    "exch": "v", "and_": "old & v", "or_": "old | v", "xor": "old ^ v",
    "inc": "0 if old >= v else old + 1", "dec": "v if old == 0 or old > v else old - 1",
    "nanmax": "v if old != old else (old if v != v else max(old, v))",
    "nanmin": "v if old != old else (old if v != v else min(old, v))",
}


def _atomic_impl(x, idx, params, finish):
    """An atomic's implementation on a Buf: check the index, read the element ``cur``
    (poison suspected), record the atomic access, then ``finish`` (source lines)."""
    if not _is_buf(x):
        return None
    nd = x[0].ndim
    _check_index(idx, nd)
    unwrap = "    idx = idx[0]\n" if _unwrap(idx) is not idx else ""
    src = (f"def impl({params}):\n{unwrap}{_index_code(nd, 'x.data')}"
           f"    cur = x.data[p]\n"
           + _POISON_CHECK + _observed(nd, "observe_atomic", ATOMIC) + finish)
    return _compile(src, "impl")


def _atomic_overload(update):
    def stub(x, idx, v, c, F, site):
        """``cuda.atomic.<op>(x, idx, v)``: the old value."""

    @overload(stub, jit_options=_INLINE)
    def ov(x, idx, v, c, F, site):
        return _atomic_impl(x, idx, "x, idx, v, c, F, site",
                            f"    old = cur\n    x.data[p] = {update}\n    return old\n")
    return stub


ATOMICS = {name: _atomic_overload(update) for name, update in _ATOMIC_UPDATES.items()}
"""``cuda.atomic.<name>`` -> its compiled stand-in."""


@overload(atomic_cas, jit_options=_INLINE)
def _atomic_cas_ov(x, idx, old, v, c, F, site):
    return _atomic_impl(x, idx, "x, idx, old, v, c, F, site",
                        "    if cur == old:\n        x.data[p] = v\n    return cur\n")


def _attr_overload(stub, attr):
    @overload(stub, jit_options=_INLINE)
    def ov(x):
        if _is_buf(x):
            return _compile(f"def impl(x):\n    return x.data.{attr}\n", "impl")
        return _compile(f"def impl(x):\n    return x.{attr}\n", "impl")
    return ov


_attr_overload(shape_of, "shape")
_attr_overload(size_of, "size")
_attr_overload(ndim_of, "ndim")


@overload(len_of, jit_options=_INLINE)
def _len_ov(x):
    if _is_buf(x):
        return lambda x: len(x.data)
    return lambda x: len(x)


def _divide_overload(expr):
    def stub(a, b, F):
        """``a op b``: an integer divisor of zero is suspect."""

    @overload(stub, jit_options=_INLINE)
    def ov(a, b, F):
        if isinstance(b, (types.Integer, types.Boolean)) and \
                isinstance(a, (types.Integer, types.Boolean)):
            return _compile(f"def impl(a, b, F):\n    if b == 0:\n        F[0] = {DIVIDE}\n"
                            f"        return {expr.replace('b', '1')}\n    return {expr}\n",
                            "impl")
        return _compile(f"def impl(a, b, F):\n    return {expr}\n", "impl")
    return stub


DIVISIONS = {"Div": _divide_overload("a / b"), "FloorDiv": _divide_overload("a // b"),
             "Mod": _divide_overload("a % b")}
"""The AST operator name -> its compiled stand-in."""


# ----------------------------------------------------------------------------- bit intrinsics
# ``cuda.popc/ffs/clz/brev`` of a 32-bit value as the checked path computes them (Python on the
# value's bits); a negative value, or one of more than 32 bits, is suspect.

@njit(**_INLINE)
def _bits_suspect(v, F):
    if v < 0 or v >> 32:
        F[SUSPECT] = BITS
        return True
    return False


@njit(**_INLINE)
def popc(v, F):
    """The number of bits set."""
    n = 0
    if not _bits_suspect(v, F):
        while v:
            n += v & 1
            v >>= 1
    return n


@njit(**_INLINE)
def ffs(v, F):
    """The position of the lowest bit set, counted from 1; 0 when none is."""
    n = 0
    if v and not _bits_suspect(v, F):
        n = 1
        while not v & 1:
            v >>= 1
            n += 1
    return n


@njit(**_INLINE)
def clz(v, F):
    """The zero bits above the highest bit set, of 32."""
    n = 32
    if not _bits_suspect(v, F):
        while v:
            v >>= 1
            n -= 1
    return n


@njit(**_INLINE)
def brev(v, F):
    """The 32 bits in reverse order."""
    r = 0
    if not _bits_suspect(v, F):
        for _ in range(32):
            r = (r << 1) | (v & 1)
            v >>= 1
    return r


BIT_INTRINSICS = {"popc": popc, "ffs": ffs, "clz": clz, "brev": brev}
"""``cuda.<name>`` -> its compiled stand-in (called with the launch's flags)."""


# ----------------------------------------------------------------------------- warps

SHUFFLES = {"shfl_sync": 0, "shfl_up_sync": 1, "shfl_down_sync": 2, "shfl_xor_sync": 3}
"""``cuda.<name>`` -> the ``kind`` of :func:`shuffle`."""
FULL_MASK = 0xFFFFFFFF


@njit(cache=False, forceinline=True)
def shuffle(kind, lanes, own, arg, mask, t, c, F):
    """Thread ``t``'s result of a warp shuffle: ``lanes`` holds every thread's ``var`` (the
    shuffle is a split point: all of them were stored before this region runs). Lanes outside
    ``[0, 32)`` give the thread its own value, as on the GPU (``warp.warp_results``).
    Suspect: a mask other than the full warp, a source lane past the end of a partial last
    warp."""
    if mask != FULL_MASK:
        F[0] = DIVERGENT
        return own
    lane = t % 32
    b = arg & 31   # PTX reads the low 5 bits of the lane operand
    if kind == 0:
        src = b
    elif kind == 1:
        src = lane - b
    elif kind == 2:
        src = lane + b
    else:
        src = lane ^ b
    if src < 0 or src >= 32:
        return own
    source = t - lane + src
    if source >= c[NTHREADS]:
        F[0] = DIVERGENT
        return own
    return lanes[source]


@njit(cache=False, forceinline=True)
def assigned(value, is_set, F):
    """A read of a local variable that some path leaves unassigned (a GPU's uninitialised
    register): ``value``, suspected when this thread never set it (``is_set`` false)."""
    if not is_set:
        F[SUSPECT] = UNSET
    return value


@njit(cache=False, forceinline=True)
def warps_converged(alive, nt):
    """Every warp has all its threads alive, or none (a shuffle needs the whole warp)."""
    for w in range(0, nt, 32):
        first = alive[w]
        for t in range(w + 1, min(w + 32, nt)):
            if alive[t] != first:
                return False
    return True
