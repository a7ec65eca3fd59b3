"""The elementwise op table (``backends/optable.py``) and what derives from it.

The maps themselves are tested per backend (``test_contract.py``, ``test_cuda_elementwise.py``)
and per derivative (``test_autograd.py`` gradchecks); this checks the derivation: every table
op is in the contract, in both backends and, when it has a derivative, a Function; the
registered Tensor methods are the op functions themselves.
"""
import inspect

import numpy as np
import pytest

import minigpu as mg
from minigpu import ops
from minigpu.backends import contract, cpu, optable
from minigpu.ops import elementwise as ew
from minigpu.ops import registry


def test_contract_and_both_backends_derive_from_the_table():
    from minigpu.backends.cuda import elementwise as cuda_ew

    assert list(contract.UNARY_OPS) == [op.name for op in optable.UNARY]
    assert list(contract.BINARY_OPS) == [op.name for op in optable.BINARY]
    assert set(cuda_ew.UNARY) == {"identity", *contract.UNARY_OPS}
    assert set(cuda_ew.BINARY) == set(contract.BINARY_OPS)
    for op in optable.UNARY:  # a hand-written device function, or the compiled table form
        form = op.numpy if op.shared else op.scalar
        assert cuda_ew.UNARY[op.name].__name__ in (f"unary_{op.name}",
                                                   getattr(form, "__name__", None))
    x = cpu.from_numpy(np.array([0.5, -2.0], np.float32))
    v = contract.dense(x, (2,))
    for op in optable.UNARY:
        got = cpu.to_numpy(contract.dense(cpu.unary(op.name, v, 2.0, 3.0), (2,)))
        assert got.dtype == (np.bool_ if op.bool_result else np.float32), op.name


def test_every_op_with_a_derivative_is_a_function_with_one_binary_rule():
    for op in optable.UNARY:
        assert (op.name in ew.UNARY_FUNCTIONS) == (op.grad is not None)
    for op in optable.BINARY:
        assert (op.name in ew.BINARY_FUNCTIONS) == (op.grad is not None)
        if op.grad is not None:
            cls = ew.BINARY_FUNCTIONS[op.name]
            assert cls.backward is ew.Binary.backward, op.name  # no op borrows another's grads


@pytest.mark.parametrize("op", [op for op in optable.BINARY if op.grad is not None],
                         ids=lambda op: op.name)
def test_binary_gradients_with_broadcasting(op):
    rng = np.random.default_rng(0)
    a = mg.tensor(rng.uniform(0.5, 2.0, (3, 1)), dtype=mg.float64, requires_grad=True)
    b = mg.tensor(rng.uniform(0.5, 2.0, (1, 4)), dtype=mg.float64, requires_grad=True)
    fn = ew.BINARY_FUNCTIONS[op.name].apply
    assert mg.autograd.gradcheck(fn, (a, b))


def test_tensor_methods_are_the_registered_op_functions():
    """Each op's Tensor methods are the op function itself (no forwarding layer), with a real
    signature; ``minigpu``, ``minigpu.ops`` and ``nn.functional`` hold what the entry says."""
    for entry in registry.OPS.values():
        assert getattr(ops, entry.name) is entry.fn, entry.name
        public = getattr(mg, entry.name, None)  # with out= (ops/out.py): wraps the op
        assert (getattr(public, "__wrapped__", public) is entry.fn) == entry.mg, entry.name
        assert hasattr(public, "__wrapped__") == (entry.mg and entry.out), entry.name
        assert (getattr(mg.nn.functional, entry.name, None) is entry.fn) == entry.F, entry.name
        for name in entry.methods:
            assert vars(mg.Tensor)[name] is entry.fn, name
            first = next(iter(inspect.signature(entry.fn).parameters.values()))
            assert first.kind is first.POSITIONAL_OR_KEYWORD, name
    assert "dim" in inspect.signature(mg.Tensor.sum).parameters
    for op in (*optable.UNARY, *optable.BINARY):
        if op.method:
            entry = registry.OPS[op.name]
            assert entry.mg and op.name in entry.methods and entry.fn.__doc__, op.name


@pytest.mark.parametrize("op", [op for op in optable.UNARY if op.grad is not None],
                         ids=lambda op: op.name)
def test_unary_gradients(op):
    """Every unary derivative of the table, float64 gradcheck, at the entry's ``params`` on
    values of its ``domain`` away from kinks."""
    rng = np.random.default_rng(1)
    values = rng.uniform(0.5, 2.0, (2, 3))
    if op.domain != "positive":
        values *= rng.choice([-1.0, 1.0], values.shape)
    x = mg.tensor(values, dtype=mg.float64, requires_grad=True)
    alpha, beta = op.params
    fn = ew.UNARY_FUNCTIONS[op.name].apply
    assert mg.autograd.gradcheck(lambda t: fn(t, alpha=alpha, beta=beta), (x,))


@pytest.mark.parametrize("op", [op for op in optable.UNARY if op.fused], ids=lambda op: op.name)
def test_fused_backward_map_equals_the_formula(op):
    """An op with ``fused=`` has two forms of its derivative: the fused map (first order) and
    the formula (create_graph). They agree, float64, on values of the op's domain."""
    rng = np.random.default_rng(2)
    values = rng.uniform(0.5, 2.0, (2, 3)) * rng.choice([-1.0, 1.0], (2, 3))
    x = mg.tensor(values, dtype=mg.float64)
    g = mg.tensor(rng.standard_normal((2, 3)), dtype=mg.float64)
    function, (alpha, beta) = ew.UNARY_FUNCTIONS[op.name], op.params
    y = function.apply(x, alpha=alpha, beta=beta)
    fused = function.gradient(g, x, y, alpha, beta)  # nothing records: the fused map
    formula = function.derivative(g, x, y, alpha, beta)
    np.testing.assert_allclose(fused.numpy(), formula.numpy(), rtol=1e-12, atol=1e-14)


EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 88.0, -88.0, 1e-40, -1e-40,
                  0.5, -0.5, 2.5, -2.5, 1e4, -1e4])
"""The edge values every table map is run on (1e-40: a float32 denormal)."""


def _same(op, got, want):
    """Equal (within rounding for an ``approx`` op, NaN where NaN), zeros of the same sign."""
    name = op.name
    assert got.dtype == want.dtype, name
    if want.dtype.kind == "f":
        tol = 0 if not op.approx else 1e-5 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=0, equal_nan=True, err_msg=name)
        np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]),
                                      err_msg=f"{name}: the sign of a zero")
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", [*optable.UNARY, *optable.BINARY], ids=lambda op: op.name)
def test_edge_values_cuda_matches_cpu(op, dtype):
    """Every map of the table on the edge values (binary: every pair of them, (inf, inf)
    included; the integer maps: each integer against another): the cuda device function gives
    the NumPy form's results, at the entry's params. (The public maps are compared with torch
    on these values by the registry's suite.)"""
    from minigpu.backends import get

    cuda = get("cuda")
    if op.domain is None:
        values = np.arange(-8, 9)
        operands = [values] if op in optable.UNARY else [values, np.roll(values, 5)]
    elif op in optable.UNARY:
        operands = [EDGES.astype(dtype)]
    else:
        operands = [pair.reshape(-1).astype(dtype) for pair in np.meshgrid(EDGES, EDGES)]
    values = operands[0]
    a, b = op.params
    shape = values.shape
    with np.errstate(all="ignore"):
        views = [contract.dense(cpu.from_numpy(v), shape) for v in operands]
        want = (cpu.unary(op.name, *views, a, b) if len(views) == 1 else
                cpu.binary(op.name, *views, a, b))
        views = [contract.dense(cuda.from_numpy(v), shape) for v in operands]
        got = (cuda.unary(op.name, *views, a, b) if len(views) == 1 else
               cuda.binary(op.name, *views, a, b))
    _same(op, cuda.to_numpy(contract.dense(got, shape)),
          cpu.to_numpy(contract.dense(want, shape)))


def test_the_op_index_is_read_from_the_registry():
    from minigpu.tools import op_index

    text = op_index.render()
    assert all(f"| `{name}` |" in text for name in registry.OPS)
    assert "| `add` | elementwise | `add`, `__add__`, `__radd__` | yes | - | `add_` | - |" in text
