"""The sanitizer's rules, in one place: what makes an access a bug, and what does not.

The checks in ``memory.py`` (memcheck, racecheck, initcheck) and ``launch.py`` (shapes of
shared/local arrays) ask these functions for their verdicts, so that the rules can be read,
tested and reused (a compiled execution path must apply the same ones). Each rule follows what
a real GPU does for a *correct* kernel — ``import minigpu`` must never change what a correct
kernel does — and flags only what is undefined or almost always a bug:

**Compile-time constants** (:func:`constant_names`, :func:`is_constant`): as Numba resolves them.
Module globals and closure variables are frozen when the kernel compiles; a local variable is
a constant when it has exactly one assignment and its value is a constant expression (a
literal, a tuple of constants, another constant name, an attribute of a constant, arithmetic
Python folds). ``n = 16; cuda.shared.array(n, float32)`` is fine; an argument is not.

**Negative indices** (:func:`negative_index_is_constant`): Numba wraps a negative index around,
on a GPU as in Python. Written as a literal or a constant (``profile[i, -1]``) it is meant, and
wraps. Computed (``s[tid - 1]`` at ``tid = 0``) it is almost always a bug: a store there is
flagged at once; a load gives the wrapped element as an indeterminate value (below), flagged
when it is used — stumpy computes ``QT_in[i - 1]`` at ``i = 0`` and overwrites the result
before anyone sees it, which is correct on a GPU. The message says which rule applied.

**Races** (:func:`unordered`, :func:`same_value_store`): two accesses to one element race when
they come from different threads, at least one writes, and nothing orders them (a barrier of
their block, a ``syncwarp`` of their warp, a grid-wide barrier of a cooperative launch, the
kernel boundary, a fence-atomic handover between threads: :func:`fence`). Atomics never
conflict with atomics, and a plain load of global memory does not conflict with atomic updates
(:func:`plain_read_of_atomics_is_benign`). A plain store of the bytes the element already holds
is benign: no order of it and another thread's plain store or read can be told
apart (e.g. every thread storing one final sum, or storing back the value it read), and a
thread reading an element it has itself stored such a value to in this interval reads those
bytes in any order. A store of a different value stays a race, and so does a read between two
stores (it races the first); a store racing an atomic update always races (the atomic's value
depends on the order).

**Indeterminate values** (``indeterminate.py``): a load of never-written memory, or at a
computed negative index, gives a value the thread must not rely on, and that is a bug when the
value is *used* — it reaches memory that is kept (a global element still holding it when the
kernel ends) or read by another thread, a branch, an index or a loop bound, an atomic, a warp
vote — not when it is merely read into a result that is discarded or overwritten
(MemorySanitizer's rule). Arithmetic on it gives another indeterminate value; a store keeps the
taint on the element (the thread's own later reads get it back), and racecheck does not count
such a store as a write: until the value is used, no order of it can be observed.
"""
from __future__ import annotations

import ast
import functools
import inspect
import linecache
import textwrap
import types

# ----------------------------------------------------------------------------- happens-before


def unordered(c, d):
    """True when accesses at logical clocks ``c`` (the current thread's) and ``d`` (an earlier
    access of another thread) can happen in either order. Clock (``blocks._Thread.tick``):
    (thread key, block ordinal, barrier epoch, syncwarp epoch, warp, threadIdx, blockIdx, grid
    epoch, fences, acquired). Different blocks are ordered only by a grid-wide barrier; one
    block's accesses by a barrier, or, for lanes of one warp, by a ``syncwarp``; and any two
    threads by a fence-atomic handover (:func:`fence`): ``d`` is ordered before ``c`` when the
    current thread has acquired ``d``'s thread's accesses made before its fence number
    ``acquired[d's thread]``."""
    if c[1] != d[1]:
        if c[7] != d[7]:
            return False
    elif c[2] != d[2] or (c[4] == d[4] and c[3] != d[3]):
        return False
    return c[9].get(d[0], 0) <= d[8]


def fence(t):
    """``cuda.threadfence()`` (and ``_block``, ``_system``) by thread ``t``: what its atomics
    since its last fence read of other threads' releases (``t.pending``) is now acquired —
    its later accesses are ordered after those threads' accesses before their fences — and
    its own accesses so far are released to whoever later acquires this fence. This is the
    CUDA memory model's fence-fence synchronisation: thread A writes data, fences, then
    updates a flag or lock with an atomic; thread B's atomic reads that update, B fences, then
    B reads the data — a spin lock (``atomic.cas`` to take it, ``atomic.exch`` to give it back,
    fences inside) or a ticket handed on with ``atomic.add``. Without the fences, or with a
    plain store for the flag, the accesses stay unordered: a race. (Scopes are not modelled:
    a block fence orders like a device fence.)"""
    if t.pending:
        seen = dict(t.seen)
        for k, v in t.pending.items():
            if v > seen.get(k, 0):
                seen[k] = v
        t.seen, t.pending = seen, {}
    t.fences += 1
    t.tick()


def atomic_release(t, releases):
    """An atomic of thread ``t`` on an element whose release record is ``releases`` (thread
    key -> number of fences whose earlier accesses were released through this element, or
    None): note what it read for ``t``'s next fence to acquire; return the element's new
    record (``t``'s accesses before its last fence, and what ``t`` had acquired, added)."""
    if releases:
        pending = t.pending
        for k, v in releases.items():
            if v > pending.get(k, 0):
                pending[k] = v
    if not (t.fences or t.seen):
        return releases
    new = dict(releases) if releases else {}
    for k, v in t.seen.items():
        if v > new.get(k, 0):
            new[k] = v
    if t.fences > new.get(t.gtid, 0):
        new[t.gtid] = t.fences
    return new


def plain_read_of_atomics_is_benign(space):
    """A plain load of a *global* element that other threads update only with atomics, with
    nothing ordering them, is not a race: each atomic is indivisible and an aligned load sees
    the value before or after it, never a torn one, so the load gives some value the atomics
    made (a kernel that reads ``best[0]``, folds its own values in, then calls
    ``cuda.atomic.min`` is correct whatever it sees). compute-sanitizer's racecheck does not
    check global memory at all. In **shared** memory, the space racecheck covers, the pair stays
    a race, as the CUDA memory model defines it (a plain access and a conflicting atomic not
    ordered by a barrier are a data race): the strict reading is kept where the tool a GPU
    programmer runs checks. Plain *stores* racing atomics,
    and plain loads racing plain stores, are races in both spaces."""
    return space == "global"


def same_value_store(old, new):
    """A plain store unordered with another thread's plain store or read is benign when it
    writes the bytes that are already there (``old``, ``new``: NumPy values of the element's
    dtype)."""
    return old.tobytes() == new.tobytes()


# ----------------------------------------------------------------------------- constants


@functools.lru_cache(maxsize=None)
def function_ast(code):
    """The AST of the function a code object comes from (None if its source is missing)."""
    if code.co_name == "<lambda>":
        return _lambda_ast(code)
    try:
        lines, start = inspect.getsourcelines(code)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return node
    return None


@functools.lru_cache(maxsize=64)
def _file_ast(filename):
    try:
        return ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return None


def _lambda_ast(code):
    """The ``ast.Lambda`` a lambda's code comes from: among the lambdas of its first line (a
    table of ops may hold several), the one with its parameters, and where that leaves more
    than one, the one that compiles to its bytecode."""
    tree = _file_ast(code.co_filename)
    if tree is None:
        return None
    params = code.co_varnames[:code.co_argcount]
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
             and n.lineno == code.co_firstlineno
             and tuple(a.arg for a in n.args.args) == params]
    if len(found) > 1:
        found = [n for n in found if _compiles_to(n, code)]
    return found[0] if len(found) == 1 else None


def _compiles_to(node, code):
    module = compile(ast.Expression(node), code.co_filename, "eval")
    inner = [c for c in module.co_consts if isinstance(c, types.CodeType)]
    return bool(inner) and inner[0].co_code == code.co_code and \
        inner[0].co_consts == code.co_consts and inner[0].co_names == code.co_names


def constant_names(func):
    """The local names of ``func`` (an AST) that Numba would treat as compile-time constants
    (assigned exactly once, to a constant expression), each with its expression, in an order
    where each one's expression uses only those before it."""
    defs = {}
    for node in ast.walk(func):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
            value = node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        for t in targets:
            if isinstance(t, ast.Name):
                defs.setdefault(t.id, []).append(value)
    stores = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
    params = {a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs}
    params |= {a.arg for a in (func.args.vararg, func.args.kwarg) if a is not None}
    single = {n: v[0] for n, v in defs.items()
              if len(v) == 1 and stores.get(n, 0) == 1 and n not in params}
    locals_ = set(stores) | params
    consts, changed = {}, True
    while changed:  # a constant may be defined from another local constant
        changed = False
        for name, value in single.items():
            if name not in consts and is_constant(value, locals_ - consts.keys()):
                consts[name] = value
                changed = True
    return consts


def is_constant(node, variables):
    """True when expression ``node`` is a compile-time constant, given the names that are
    variables (arguments and non-constant locals): a literal, a tuple or list of constants,
    a name that is not a variable (a global, a closure variable, a local constant), an
    attribute of a constant, or arithmetic on literals (which Python folds)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(is_constant(e, variables) for e in node.elts)
    if isinstance(node, ast.Name):
        return node.id not in variables
    if isinstance(node, ast.Attribute):
        return is_constant(node.value, variables)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.operand, ast.Constant) or (
            isinstance(node.op, ast.USub) and is_constant(node.operand, variables))
    if isinstance(node, ast.BinOp):
        return isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant)
    return False


@functools.lru_cache(maxsize=None)
def variables_of(code):
    """The local names of ``code`` that are variables (arguments and locals that are not
    compile-time constants); every local when its source cannot be read."""
    func = function_ast(code)
    names = set(code.co_varnames) | set(code.co_cellvars)
    if func is None:
        return frozenset(names)
    return frozenset(names - constant_names(func).keys())


# ----------------------------------------------------------------------------- negative indices


@functools.lru_cache(maxsize=4096)
def _index_nodes(code, lasti):
    """The index expressions (one per dimension) of the subscript or atomic call that the
    instruction at ``lasti`` of ``code`` executes, or None if the source cannot tell."""
    try:
        pos = list(code.co_positions())[lasti // 2]
    except (IndexError, AttributeError):
        return None
    line, end_line, col, end_col = pos
    if line is None or col is None or end_col is None:
        return None
    lines = [linecache.getline(code.co_filename, n) for n in range(line, end_line + 1)]
    if not lines or not lines[0]:
        return None
    if len(lines) == 1:
        segment = lines[0].encode()[col:end_col].decode(errors="replace")
    else:
        segment = (lines[0].encode()[col:].decode(errors="replace") + "".join(lines[1:-1])
                   + lines[-1].encode()[:end_col].decode(errors="replace"))
    try:
        expr = ast.parse("(" + segment + "\n)", mode="eval").body
    except SyntaxError:
        return None
    if isinstance(expr, ast.Subscript):
        index = expr.slice
    elif isinstance(expr, ast.Call) and len(expr.args) >= 2:  # cuda.atomic.op(array, index, v)
        index = expr.args[1]
    else:
        return None
    return tuple(index.elts) if isinstance(index, ast.Tuple) else (index,)


def negative_index_is_constant(frame, k):
    """Rule for a negative index at dimension ``k`` of the access ``frame`` is executing: True
    when that index is written as a literal or a compile-time constant (it wraps, as Numba
    wraps it on a GPU), False when it is computed or the source cannot tell (flagged)."""
    nodes = _index_nodes(frame.f_code, frame.f_lasti)
    if nodes is None:
        return False
    if len(nodes) == 1 and k > 0:
        return False
    node = nodes[k] if k < len(nodes) else None
    if node is None:
        return False
    return is_constant(node, variables_of(frame.f_code))


# ----------------------------------------------------------------------------- barriers


def enclosing_branch(filename, line):
    """Strict mode's question about a barrier at ``filename:line``: the innermost ``if``,
    ``while`` or ``for`` of its function whose body holds that line, as (``"if"``, ``"while"``
    or ``"for"``, its line), or None when the barrier is at the function's top level (or the
    source cannot tell)."""
    tree = _file_ast(filename)
    if tree is None:
        return None
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and n.lineno <= line <= n.end_lineno]
    if not funcs:
        return None
    func = max(funcs, key=lambda n: n.lineno)  # the innermost
    found = None
    for node in ast.walk(func):
        if isinstance(node, (ast.If, ast.While, ast.For)) and node.body and \
                node.body[0].lineno <= line <= node.body[-1].end_lineno:
            if found is None or node.lineno >= found.lineno:
                found = node
    return None if found is None else (type(found).__name__.lower(), found.lineno)
