"""Warp intrinsics for the simulator's ``FakeCUDAModule``: shuffles, votes, match, syncwarp.

The stock simulator of numba-cuda 0.30 has no ``shfl_*_sync``, vote, ``match_*``,
``activemask``, ``lanemask_lt`` or ``syncwarp``. A kernel reaches these as
``cuda.shfl_down_sync`` because, while a kernel runs, the launcher swaps every global (and
closure variable) bound to ``numba.cuda`` for one ``FakeCUDAModule`` instance, which
``install()`` extends with the methods of :class:`WarpIntrinsics`.

The lanes of a warp are 32 consecutive linear thread ids (``x + y*bdx + z*bdx*bdy``); the last
warp may be partial. Each intrinsic is a rendezvous of the lanes named in ``mask`` that exist and
have not exited (``blocks._Block`` runs it), with the semantics of PTX
``shfl.sync``/``vote.sync``/``match.sync``: a shuffle whose source lane is out of range returns
the caller's own value (``shfl_sync`` takes ``src_lane mod 32``); a source lane that is not taking
part returns a poison value (NaN / integer max), since the GPU returns garbage there. Numba's
types are kept: ``ballot_sync`` and ``match_*`` give int32 (so a full ballot is ``-1``),
``activemask``/``lanemask_lt`` uint32. Numba's API has no ``width`` argument, so neither has this
one. ``activemask()`` returns the lanes that reach the same ``activemask()`` call while every
other live lane of the warp is blocked elsewhere or has exited (the simulator's picture of
"converged"). ``popc``/``ffs`` are fixed for negative (int32) masks, which the stock versions
miscount. ``syncwarp`` also orders the memory accesses of the lanes it synchronises (racecheck),
and ``threadfence`` (a no-op in the stock simulator) is the fence of ``rules.fence``: with an
atomic after it, a handover that orders one thread's accesses before another's (a spin lock).
"""

import numpy as np
from greenlet import getcurrent

from .errors import SyncError
from .indeterminate import Indeterminate
from .rules import fence
from .sites import FULL_MASK, Op, site


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


def warp_results(kind, ops):
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


def _current(kind):
    t = getcurrent()
    if getattr(t, "block", None) is None:
        raise RuntimeError(f"cuda.{kind}() called outside a running kernel")
    return t


def _warp_op(kind, mask, value=None, arg=None):
    t = _current(kind)
    for v, what in ((value, "value"), (arg, "lane argument"), (mask, "mask")):
        if type(v) is Indeterminate and (what != "value" or not kind.startswith("shfl")):
            v.use(f"given to cuda.{kind}() as its {what}")  # a shuffle passes a value on
    mask = int(mask) & FULL_MASK
    if not (mask >> t.lane) & 1:
        raise SyncError(f"cuda.{kind}(): mask 0x{mask:08x} does not include the calling lane "
                        f"{t.lane} (warp {t.warp}); the calling lane must be in the mask")
    return t.block.wait(t, Op(kind, mask, value, arg, site()))


class WarpIntrinsics:
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

    def threadfence(self):
        t = getcurrent()
        if getattr(t, "block", None) is not None:  # (a host call does nothing, as stock)
            fence(t)

    threadfence_block = threadfence_system = threadfence

    def activemask(self):
        t = _current("activemask")
        return t.block.wait(t, Op("activemask", FULL_MASK, None, None, site()))

    def lanemask_lt(self):
        return np.uint32((1 << _current("lanemask_lt").lane) - 1)

    def popc(self, val):
        if isinstance(val, np.integer):
            val = int(val) & ((1 << (8 * val.dtype.itemsize)) - 1)
        return bin(int(val) & ((1 << 64) - 1)).count("1")

    def ffs(self, val):
        val = int(val)
        return (val & -val).bit_length()
