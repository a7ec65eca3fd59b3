"""The compiled path's disk cache: a kernel compiles once per machine, not once per process.

Compiling a kernel for the compiled path (:mod:`.compiled`) costs seconds to minutes; running it,
milliseconds. So the generated driver is written to a file of the cache directory and compiled
with Numba's ``cache=True``: the next process that launches the same kernel with the same
argument types loads its machine code from ``__pycache__`` beside that file.

A cached driver must be the one the kernel would compile to now, so its file is named by a
hash of everything the machine code depends on: the generated source (kernel, regions, device
functions), the value of every global name it reads (constants are frozen into the code), the
simulator's own source and the Numba and NumPy versions. Numba adds the CPU and its
features. A global whose value cannot be described (an arbitrary object) keeps that kernel out
of the cache: it compiles in memory, as before.

Beside the source, ``<key>.json`` keeps what the compile learnt by typing the kernel (the
types of the variables that live across a barrier), and a *hint* named by the kernel's own
source and argument types says, before anything is generated, that a compile will be a load:
``auto`` then takes the compiled path at once.

``MINIGPU_SIM_CACHE`` names the directory (default ``~/.cache/minigpu/simulator``, under
``XDG_CACHE_HOME`` where set); ``MINIGPU_SIM_CACHE=0`` turns the cache off.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import pathlib
import tempfile
import types

import numba
import numpy as np

_VERSION = None


def directory():
    """The cache directory, created if needed; None when the cache is off or not writable."""
    where = os.environ.get("MINIGPU_SIM_CACHE")
    if where == "0":
        return None
    if not where:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        where = os.path.join(base, "minigpu", "simulator")
    try:
        os.makedirs(where, exist_ok=True)
    except OSError:
        return None
    return where if os.access(where, os.W_OK) else None


def _sha(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _version():
    """The simulator's own source, Numba's and NumPy's versions: a change to any is a miss."""
    global _VERSION
    if _VERSION is None:
        here = pathlib.Path(__file__).parent
        _VERSION = _sha(numba.__version__, np.__version__,
                        *(p.read_bytes() for p in sorted(here.glob("*.py"))))
    return _VERSION


def _code(fn):
    return _sha(*_code_parts(fn.__code__))


def _code_parts(code):
    """A code object's bytecode, names and constants; a nested one (a lambda, a comprehension)
    by its own parts, since its repr holds its address, which changes in every process."""
    parts = [code.co_code, repr(code.co_names)]
    for const in code.co_consts:
        parts += _code_parts(const) if isinstance(const, types.CodeType) else [repr(const)]
    return parts


def describe(value):
    """A string that changes whenever ``value`` would compile differently; None if unknown."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, np.generic,
                                           np.dtype)):
        return f"{type(value).__name__} {value!r}"
    if isinstance(value, type) and issubclass(value, np.generic):
        return f"scalar type {value.__name__}"
    if isinstance(value, tuple):
        parts = [describe(v) for v in value]
        return None if None in parts else f"tuple ({', '.join(parts)})"
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    if isinstance(value, np.ndarray):
        return f"array {value.dtype.str} {value.shape} {_sha(value.tobytes())}"
    if isinstance(value, np.ufunc):
        return f"ufunc {value.__name__}"
    if isinstance(value, types.BuiltinFunctionType):
        return f"builtin {value.__module__}.{value.__qualname__}"
    fn = getattr(value, "py_func", None) or getattr(value, "fn", None) or value
    if isinstance(fn, types.FunctionType):
        return f"function {fn.__module__}.{fn.__qualname__} {_code(fn)}"
    if isinstance(value, (numba.core.types.Float, numba.core.types.Integer)):
        return f"scalar type {value}"   # as NumPy's (a launch swaps them): the same casts
    if isinstance(value, numba.core.types.Type):
        return f"numba type {value}"
    return None


def fingerprint(source, namespace):
    """Each global name ``source`` reads, with its value described; None if one cannot be."""
    names = sorted({n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)})
    out = []
    for name in names:
        if name in namespace:
            d = describe(namespace[name])
            if d is None:
                return None
            out.append(f"{name}={d}")
    return out


def key(sources, fingerprints):
    """The cache key of a compile, or None if something it reads cannot be described."""
    if any(f is None for f in fingerprints):
        return None
    return _sha(_version(), *sources, *(line for f in fingerprints for line in f))


def _write(path, text):
    """Write atomically, and only once: Numba stamps a cached function with its file's mtime."""
    if path.exists():
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def source_file(key_, source):
    """Write the driver's source as ``<key>.py``; its path, or None when the cache is off."""
    where = directory()
    if key_ is None or where is None:
        return None
    path = pathlib.Path(where) / f"k{key_}.py"
    try:
        _write(path, source)
    except OSError:
        return None
    return str(path)


def carried_types(key_):
    """The carried variables' types a previous compile of ``key_`` found, or None."""
    where = directory()
    if key_ is None or where is None:
        return None
    try:
        names = json.loads((pathlib.Path(where) / f"k{key_}.json").read_text())
    except (OSError, ValueError):
        return None
    return {n: np.dtype(t).type for n, t in names.items()}


def _hint(kernel, signature):
    fn = kernel.fn
    return f"hint{_sha(_version(), fn.__module__, fn.__qualname__, _code(fn), signature)}"


def remember(key_, carried, kernel, signature):
    """After a driver compiled and ran: keep its carried types and the kernel's hint."""
    where = directory()
    if key_ is None or where is None:
        return
    try:
        _write(pathlib.Path(where) / f"k{key_}.json",
               json.dumps({n: np.dtype(t).str for n, t in carried.items()}))
        _write(pathlib.Path(where) / _hint(kernel, signature), "")
    except OSError:
        pass


def remember_failure(kernel, signature, reason):
    """A kernel Numba's CPU target could not compile: the next process does not try again."""
    where = directory()
    if where is not None:
        try:
            _write(pathlib.Path(where) / _hint(kernel, signature), reason)
        except OSError:
            pass


def hint(kernel, signature):
    """None if this kernel with these argument types never compiled on this machine; ``""``
    if it did (a compile will be a load); else why it could not."""
    where = directory()
    if where is None:
        return None
    try:
        return (pathlib.Path(where) / _hint(kernel, signature)).read_text()
    except OSError:
        return None
