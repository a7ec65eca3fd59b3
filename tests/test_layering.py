"""The layering of the package, as data: ``docs/architecture.md``'s floor table is read here
and every import of every module of ``minigpu`` (module-level and function-local, from the
AST) must go to the importer's floor or below. The import graph has no cycle, and the
function-local imports of minigpu modules are few, each listed with its reason
(``python tests/test_layering.py`` prints the counts).
"""
import ast
import functools
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minigpu"

ALLOWED_UPWARD = {}
"""(importer, imported) -> why this upward import is there (none today)."""

LOCAL_IMPORTS = {
    "minigpu.simulator":
        "install() loads the sanitizer's parts (they import Numba) only under the simulator",
    "minigpu.lessons.__main__":
        "the CLI restarts itself on the simulator before measuring; pictures need matplotlib",
    "minigpu.exercises.__main__":
        "each subcommand loads what it runs: pictures (matplotlib), the static check (the "
        "CUDA toolchain)",
    "minigpu.exercises.grader":
        "pictures (matplotlib) and the static check (the CUDA toolchain), only when asked for",
}
"""importer -> why its function-local imports of minigpu modules are there (the rest of the
package imports at module level)."""

MAX_LOCAL_IMPORTS = 7  # function-local imports of minigpu modules


def floors():
    """``[(floor, entry)]`` from the table of ``docs/architecture.md``'s "The layers"."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \|", section, re.M)
    assert rows, "no floor table in docs/architecture.md's 'The layers'"
    return [(int(n), entry) for n, cell in rows for entry in re.findall(r"`([^`]+)`", cell)]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict:
    """``{module name: path}`` of every module of the package."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def floor_of(path: Path, table) -> int:
    rel = path.relative_to(PACKAGE).as_posix()
    hits = [n for n, entry in table
            if rel == entry or (entry.endswith("/") and rel.startswith(entry))]
    assert len(hits) == 1, (f"minigpu/{rel} is in {len(hits)} floors of "
                            f"docs/architecture.md's table (give it exactly one)")
    return hits[0]


def imports(name: str, path: Path, known) -> list:
    """``[(imported module, line, function-local?)]``: every import of a minigpu module in
    ``path``, relative ones resolved; ``from X import y`` names the module ``X.y`` when it is
    one, else ``X``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def targets(node):
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        if node.level:
            base = package.split(".")[:len(package.split(".")) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module
        return [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module
                for a in node.names]

    def visit(node, local):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.extend((t, child.lineno, local) for t in targets(child)
                             if t == "minigpu" or t.startswith("minigpu."))
            visit(child, local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                     ast.Lambda)))

    visit(ast.parse(path.read_text()), False)
    return found


def owner(target: str, known) -> str:
    """The module an imported name lives in (``minigpu.ops.x`` -> the longest known prefix)."""
    while target not in known:
        target = target.rpartition(".")[0]
    return target


@functools.lru_cache(maxsize=None)
def graph():
    """``(modules, [(importer, imported module, line, function-local?)])``, parsed once."""
    known = modules()
    edges = [(name, owner(t, known), line, local)
             for name, path in known.items() for t, line, local in imports(name, path, known)]
    return known, edges


def cycles(edges) -> list:
    """The strongly connected components of more than one module (Tarjan)."""
    succ = defaultdict(set)
    for a, b, _, _ in edges:
        if a != b:
            succ[a].add(b)
    index, low, stack, on, out = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(succ):
        if v not in index:
            strong(v)
    return sorted(out, key=len, reverse=True)


def report() -> str:
    _, edges = graph()
    local = [e for e in edges if e[3]]
    found = cycles(edges)
    lines = [f"{len(edges)} imports of minigpu modules, {len(local)} of them function-local; "
             f"{len(found)} import cycles:"]
    lines += [f"  {len(c)} modules: {', '.join(c)}" for c in found]
    return "\n".join(lines)


def test_every_module_has_one_floor():
    table = floors()
    assert [n for n, _ in table] == sorted((n for n, _ in table), reverse=True)
    for path in modules().values():
        floor_of(path, table)


def test_imports_go_to_the_same_floor_or_below():
    """Every import, function-local ones included; the allow-list holds exactly the upward
    edges there are, so one removed by a refactor must leave the list too."""
    table = floors()
    known, edges = graph()
    upward = defaultdict(list)
    for a, b, line, _ in edges:
        if floor_of(known[b], table) > floor_of(known[a], table):
            upward[a, b].append(f"{known[a].relative_to(ROOT)}:{line}")
    unexplained = {k: v for k, v in upward.items() if k not in ALLOWED_UPWARD}
    assert not unexplained, f"imports of a higher floor (docs/architecture.md): {unexplained}"
    assert set(upward) == set(ALLOWED_UPWARD), set(ALLOWED_UPWARD) - set(upward)


def test_production_never_imports_lessons_tools_or_exercises():
    table = floors()
    known, edges = graph()
    lessons = dict((entry, n) for n, entry in table)["lessons/"]
    bad = [(a, b) for a, b, _, _ in edges
           if floor_of(known[a], table) < lessons <= floor_of(known[b], table)]
    assert not bad


def test_nothing_below_the_graph_layer_imports_it():
    """``minigpu/graphs`` records what the eager layers do through one seam
    (``backends.replace``); the eager layers (``ops/`` and below) never import it: only its
    floor (``mg.cuda``) and the floors above do."""
    table = floors()
    known, edges = graph()
    ops = dict((entry, n) for n, entry in table)["ops/"]
    importers = {a for a, b, _, _ in edges
                 if b.startswith("minigpu.graphs") and not a.startswith("minigpu.graphs")}
    assert "minigpu.cuda" in importers
    assert all(floor_of(known[a], table) > ops for a in importers), importers


def test_no_import_cycle_and_few_local_imports():
    print(report())
    _, edges = graph()
    assert not cycles(edges), report()
    assert sum(1 for e in edges if e[3]) <= MAX_LOCAL_IMPORTS, report()


def test_every_local_import_has_its_reason():
    """Each module with a function-local import of a minigpu module is in LOCAL_IMPORTS, and
    each entry there still has one (a refactor that removes them removes the entry)."""
    known, edges = graph()
    local = defaultdict(list)
    for a, b, line, is_local in edges:
        if is_local:
            local[a].append(f"{known[a].relative_to(ROOT)}:{line} imports {b}")
    assert not {a: v for a, v in local.items() if a not in LOCAL_IMPORTS}
    assert set(LOCAL_IMPORTS) == set(local), set(LOCAL_IMPORTS) - set(local)


def test_the_graph_sees_what_the_import_system_does():
    """The resolver on a few known edges: a relative ``from . import`` of a module, a
    ``from ..x import name``, a function-local import."""
    _, edges = graph()
    pairs = {(a, b, local) for a, b, _, local in edges}
    assert ("minigpu.ops.elementwise", "minigpu.tensor", False) in pairs
    assert ("minigpu.ops.common", "minigpu.random", False) in pairs
    assert ("minigpu.exercises.grader", "minigpu.exercises.pictures", True) in pairs
    assert ("minigpu.backends.cuda.reduce", "minigpu.backends.cuda.memory", False) in pairs


def _root(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def tensor_calls(source: str, tensor_only) -> list:
    """``(line, name)`` of the calls in ``source`` of a method in ``tensor_only``, on anything
    but a module it imports (``np.exp(x)`` is NumPy's; ``x.exp()`` is a Tensor's)."""
    tree = ast.parse(source)
    imported = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    return [(node.lineno, node.func.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in tensor_only and _root(node.func) not in imported]


def test_the_backends_run_no_tensor_code():
    """Floor 2 knows no Tensor, not even without importing it: no module of ``backends/`` calls
    a method that only a Tensor has (the op table's derivatives are formulas, text, compiled
    into Functions by ``ops/elementwise.py``). Duck-typed calls like ``g.sign()`` are no import,
    so only this test sees them; it flags the table as it was (Tensor-level derivatives)."""
    import numpy as np
    import minigpu
    from minigpu.backends.contract import View
    tensor_only = (set(dir(minigpu.Tensor)) - set(dir(np.ndarray)) - set(dir(np.dtype))
                   - set(dir(str)) - set(dir(View)))
    found = {name: calls for name, path in modules().items()
             if name.startswith("minigpu.backends")
             and (calls := tensor_calls(path.read_text(), tensor_only))}
    assert not found, found
    old_table = "def grad(g, x, y, a, b):\n    return g * x.sign()\n"
    assert tensor_calls(old_table, tensor_only) == [(2, "sign")]


def test_layer_names_below_nn_are_layers_of_nn():
    """The op table (floor 2) and the ``@op`` lines (floor 4) name ``nn`` layers as text
    (``module="ReLU"``: the op index and the layer-against-function test read it), a reference
    up to floor 6 that is no import: this test sees each, and each names a layer of
    ``minigpu.nn``."""
    import minigpu
    from minigpu.backends import optable
    from minigpu.ops.registry import OPS
    names = ({op.module for op in (*optable.UNARY, *optable.BINARY) if op.module}
             | {entry.module for entry in OPS.values() if entry.module})
    layers = {name for name in names if isinstance(getattr(minigpu.nn, name, None), type)
              and issubclass(getattr(minigpu.nn, name), minigpu.nn.Module)}
    assert names and names == layers, names - layers


if __name__ == "__main__":
    print(report())
