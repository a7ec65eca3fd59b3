"""Where a thread is in the user's code: call sites for messages, and the record of one
warp-level or block-level operation a thread waits in."""
import os
import sys

FULL_MASK = 0xFFFFFFFF
BARRIERS = ("syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "grid_sync")

_SKIP = [os.path.dirname(os.path.abspath(__file__)) + os.sep]  # + numba's simulator, by install
_INTERNAL = {}  # file name -> whether it is under one of _SKIP


def skip_dir(path):
    """Frames from files under ``path`` are simulator internals, not the user's code."""
    if path not in _SKIP:
        _SKIP.append(path)
        _INTERNAL.clear()


def _internal(name):
    internal = _INTERNAL.get(name)
    if internal is None:
        internal = _INTERNAL[name] = any(name.startswith(p) for p in _SKIP)
    return internal


def site(depth=2):
    """The user's call stack (innermost first) as ((file, line, function), ...): a simulated
    thread's stack starts at ``blocks._Thread.run``, so it ends at the kernel."""
    out, f = [], sys._getframe(depth)
    while f is not None:
        name = f.f_code.co_filename
        if not _internal(name):
            out.append((name, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    return tuple(out)


def where(site):
    if not site:
        return "<unknown>"
    (name, line, func), callers = site[0], site[1:]
    text = f"{name}:{line} in {func}()"
    if callers:
        text += " (called from " + ", ".join(f"{n}:{ln}" for n, ln, _ in callers) + ")"
    return text


def ranges(ids):
    ids, parts, i = sorted(ids), [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ", ".join(parts)


class Op:
    """One thread's call of a barrier or warp intrinsic, while it waits for the others."""
    __slots__ = ("kind", "mask", "value", "arg", "site")

    def __init__(self, kind, mask, value, arg, site):
        self.kind, self.mask, self.value, self.arg, self.site = kind, mask, value, arg, site

    def describe(self):
        if self.kind == "grid_sync":
            return "cg.this_grid().sync()"
        if self.kind in BARRIERS or self.kind == "activemask":
            return f"{self.kind}()"
        return f"{self.kind}(mask=0x{self.mask:08x})"
