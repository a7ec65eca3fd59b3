"""The recipes of ``docs/architecture.md``'s "How to add", applied to a copy of the package: a
unary and a binary table op (one entry each in ``backends/optable.py``) and a composed op (one ``@op`` function in its
family file). Each new op must be a Tensor method, ``minigpu.X`` and ``nn.functional.X``, be in
the tests collected from the table and the registry, and (the table op) in the static kernel
report's list, with no other file touched."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TABLE_SCALAR = '''
def softsign_scalar(x, a, b):
    return x / (np.float32(1) + abs(x))


def hypot_scalar(x, y, a, b):
    return math.sqrt(x * x + y * y)


'''
TABLE_ENTRY = '''    Op("softsign", "x / (1 + |x|)", lambda x, a, b: x / (1 + np.abs(x)),
       "g / ((abs(x) + 1) ** 2)", method=True, F=True, scalar=softsign_scalar, saves="x"),
)

BINARY = ('''
BINARY_ENTRY = '''    Op("hypot", "sqrt(x*x + y*y)", lambda x, y, a, b: np.hypot(x, y),
       ("g * x / sqrt(x * x + y * y)", "g * y / sqrt(x * x + y * y)"),
       method=True, scalar=hypot_scalar, approx=True),
)

UNARY_BY_NAME = '''
COMPOSED = '''


@op(mg=True, F=True, example=lambda rng: (rng.standard_normal((3, 4)),))
def tanhshrink(input):
    """x - tanh(x)."""
    return input - input.tanh()
'''

CHECK = '''
import minigpu as mg
from minigpu.tools import kernel_report
for name in ("softsign", "tanhshrink"):
    x = mg.tensor([[-1.0, 0.5]])
    public = getattr(mg, name)  # the op, taking out= (minigpu/ops/out.py)
    assert getattr(mg.Tensor, name) is public.__wrapped__ is getattr(mg.nn.functional, name)
    assert getattr(x, name)().shape == x.shape
assert mg.hypot(mg.tensor([3.0]), mg.tensor([[4.0], [0.0]])).tolist() == [[5.0], [3.0]]
names = [spec.name for spec in kernel_report.registry()]
assert "elementwise.unary_dense[softsign]" in names, names
assert "elementwise.binary_dense[hypot]" in names, names
print("ok")
'''


def _apply_recipes(copy: Path):
    optable = copy / "minigpu" / "backends" / "optable.py"
    text = optable.read_text()
    assert text.count("\n)\n\nBINARY = (") == 1
    text = text.replace("\n)\n\nBINARY = (", "\n" + TABLE_ENTRY, 1)
    assert text.count("\n)\n\nUNARY_BY_NAME = ") == 1
    text = text.replace("\n)\n\nUNARY_BY_NAME = ", "\n" + BINARY_ENTRY, 1)
    assert text.count("\n\nclass Op(NamedTuple):") == 1
    text = text.replace("\n\nclass Op(NamedTuple):", "\n" + TABLE_SCALAR + "class Op(NamedTuple):", 1)
    optable.write_text(text)
    activation = copy / "minigpu" / "ops" / "activation.py"
    activation.write_text(activation.read_text() + COMPOSED)


def test_table_op_and_composed_op_recipes(tmp_path):
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache")
    for part in ("minigpu", "tests"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=ignore)
    for name in ("pyproject.toml", "conftest.py"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, tmp_path / name)
    _apply_recipes(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "NUMBA_ENABLE_CUDASIM": "1"}
    run = subprocess.run([sys.executable, "-c", CHECK], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-3000:]
    collect = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-n", "0", "tests/test_cuda_elementwise.py", "tests/test_optable.py",
         "tests/test_registered_ops.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert collect.returncode == 0, collect.stdout[-3000:] + collect.stderr[-3000:]
    for test_id in ("test_cuda_elementwise.py::test_unary_matches_cpu[softsign]",
                    "test_optable.py::test_unary_gradients[softsign]",
                    "test_optable.py::test_edge_values_cuda_matches_cpu[softsign-float32]",
                    "test_registered_ops.py::test_against_torch[softsign]",
                    "test_registered_ops.py::test_edge_values_against_torch[softsign-cuda]",
                    "test_registered_ops.py::test_edge_values_against_torch[tanhshrink-cuda]",
                    "test_cuda_elementwise.py::test_binary_matches_cpu[hypot]",
                    "test_optable.py::test_binary_gradients_with_broadcasting[hypot]",
                    "test_optable.py::test_edge_values_cuda_matches_cpu[hypot-float32]",
                    "test_registered_ops.py::test_against_torch[hypot]",
                    "test_registered_ops.py::test_edge_values_against_torch[hypot-cpu]",
                    "test_registered_ops.py::test_cuda_matches_cpu[tanhshrink]",
                    "test_registered_ops.py::test_float64_gradcheck[tanhshrink]",
                    "test_registered_ops.py::test_against_torch[tanhshrink]"):
        assert test_id in collect.stdout, test_id
