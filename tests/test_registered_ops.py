"""The ops as the registry (``ops/registry.py``) and the op table (``backends/optable.py``)
declare them, tested with no list kept here: a new op is picked up where it is defined.

- every op registered with an ``example``: cuda against cpu (float32), float64 gradcheck,
  against PyTorch's function of the same name (``torch.nn.functional.<name>`` for an ``F``
  op, else ``torch.<name>``), and its ``nn`` layer (when it names one) against the function;
- every public map of the op table: against PyTorch's function of the same name, float64.

(The table's maps are also drawn by hypothesis cuda against cpu in ``test_cuda_elementwise.py``
and gradchecked in ``test_optable.py``, both parametrised over the table.)
"""
import inspect

import numpy as np
import pytest

import minigpu as mg
from minigpu.backends import optable
from minigpu.ops import registry

EXAMPLES = [e for e in registry.OPS.values() if e.example is not None]
PUBLIC_MAPS = [e for e in (*optable.UNARY, *optable.BINARY) if e.method or e.F]


def _args(entry, device, dtype, requires_grad=False, seed=0):
    """The entry's example arguments, float arrays as tensors of ``dtype`` on ``device``."""
    out = []
    for a in entry.example(np.random.default_rng(seed)):
        if isinstance(a, np.ndarray):
            a = mg.tensor(a, dtype=dtype, device=device,
                          requires_grad=requires_grad and a.dtype.kind == "f")
        out.append(a)
    return out


def _host(t):
    return t.detach().cpu().numpy()


@pytest.mark.parametrize("entry", EXAMPLES, ids=lambda e: e.name)
def test_cuda_matches_cpu(entry):
    want = entry.fn(*_args(entry, "cpu", mg.float32))
    got = entry.fn(*_args(entry, "cuda", mg.float32))
    assert got.device == "cuda" and got.dtype == want.dtype == mg.float32
    np.testing.assert_allclose(_host(got), _host(want), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("entry", EXAMPLES, ids=lambda e: e.name)
def test_float64_gradcheck(entry):
    args = _args(entry, "cpu", mg.float64, requires_grad=True)
    assert mg.autograd.gradcheck(entry.fn, args)


def _torch_function(torch, name, functional):
    import torch.nn.functional as TF

    return getattr(TF if functional else torch, name, None)


def _to_torch(torch, a):
    return torch.from_numpy(_host(a)) if isinstance(a, mg.Tensor) else a


@pytest.mark.parametrize("entry", EXAMPLES, ids=lambda e: e.name)
def test_against_torch(entry):
    torch = pytest.importorskip("torch")
    reference = _torch_function(torch, entry.name, entry.F)
    if reference is None:
        pytest.skip(f"torch has no {entry.name}")
    args = _args(entry, "cpu", mg.float64)
    want = reference(*[_to_torch(torch, a) for a in args])
    np.testing.assert_allclose(_host(entry.fn(*args)), want.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("entry", [e for e in EXAMPLES if e.module], ids=lambda e: e.name)
def test_layer_calls_the_function(entry):
    """The entry's ``nn`` layer with its default parameters computes the function of the
    example's first tensor and non-tensor arguments. The layer is built from those arguments;
    a required constructor argument they do not give is the channel count (``GroupNorm``'s
    ``num_channels``, ``BatchNorm``'s ``num_features``)."""
    layer_cls = getattr(mg.nn, entry.module)
    args = _args(entry, "cpu", mg.float64)
    x = next(a for a in args if isinstance(a, mg.Tensor))
    options = [a for a in args if not isinstance(a, mg.Tensor)]
    required = [p for p in inspect.signature(layer_cls).parameters.values()
                if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    layer = layer_cls(*options, *[x.shape[1]] * (len(required) - len(options))).double()
    np.testing.assert_allclose(_host(layer(x)), _host(entry.fn(x, *options)), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("entry", PUBLIC_MAPS, ids=lambda e: e.name)
def test_table_map_against_torch(entry):
    torch = pytest.importorskip("torch")
    reference = _torch_function(torch, entry.name, not entry.method)
    if reference is None:
        pytest.skip(f"torch has no {entry.name}")
    rng = np.random.default_rng(0)
    binary = entry in optable.BINARY
    arrays = [rng.uniform(-4, 4, (3, 5)) for _ in range(2 if binary else 1)]
    if binary:  # no zero divisors for floor_divide / remainder
        arrays[1] = np.where(np.abs(arrays[1]) < 0.5, 1.5, arrays[1])
    fn = registry.OPS[entry.name].fn
    got = _host(fn(*[mg.tensor(a, dtype=mg.float64) for a in arrays]))
    with np.errstate(invalid="ignore"):
        want = reference(*[torch.from_numpy(a) for a in arrays]).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("entry", [e for e in PUBLIC_MAPS if e.module], ids=lambda e: e.name)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_table_layer_calls_the_map(entry, device):
    x = mg.tensor(np.random.default_rng(0).uniform(-4, 4, (3, 5)), device=device)
    want = _host(registry.OPS[entry.name].fn(x))
    np.testing.assert_array_equal(_host(getattr(mg.nn, entry.module)()(x)), want)
