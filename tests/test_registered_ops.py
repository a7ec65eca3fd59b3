"""Every op tested from its declaration, with no list kept here: the registry
(``ops/registry.py``) holds each op's test contract — sample arguments (``example``), torch
counterpart, input domain and its edge values, tolerance, whether it is differentiable — and
this suite runs it:

- every registered op has a contract (the first test fails naming those without);
- cuda against cpu on the example (float32, the declared tolerance, the same dtypes);
- float64 gradcheck of every differentiable op;
- against torch on the example's drawn values (float64) and with the result dtype torch gives
  for float32 inputs;
- against torch on the edge values of the op's domain (inf, -inf, nan, -0.0, denormals,
  +-1e30 for a real domain), float32, on both devices.

The table's private maps (the fused backward maps and the scalar forms) are tested from the
table in ``test_optable.py``. Random ops draw after ``manual_seed(0)`` each time.
"""
import inspect

import numpy as np
import pytest

import minigpu as mg
from minigpu.ops import registry

ALL = list(registry.OPS.values())
DECLARED = [e for e in ALL if e.example is not None]
COMPARED = [e for e in DECLARED if not isinstance(e.torch, registry.Unlike)]
DEVICES = ["cpu", "cuda"]


def _cases(entries):
    """One test case per form of each op's example (``example=`` may give several: a tensor
    and a scalar operand, ...): the entry with that one example, named ``op`` or ``op-k``."""
    return [pytest.param(e._replace(example=form), id=e.name if not k else f"{e.name}-{k}")
            for e in entries
            for k, form in enumerate(e.example if isinstance(e.example, tuple) else
                                     (e.example,))]


def _tensors(value, device, dtype, requires_grad=False):
    """The example's arrays as tensors: float arrays of ``dtype``, others of their own.
    ``requires_grad``: True, or the positions of the arguments that require it."""
    if isinstance(requires_grad, tuple):
        return [_tensors(v, device, dtype, k in requires_grad) for k, v in enumerate(value)]
    if isinstance(value, np.ndarray):
        float_array = value.dtype.kind == "f"
        return mg.tensor(value, dtype=dtype if float_array else None, device=device,
                         requires_grad=requires_grad and float_array)
    if isinstance(value, (list, tuple)) and not isinstance(value, str):
        return type(value)(_tensors(v, device, dtype, requires_grad) for v in value)
    if isinstance(value, dict):
        return {k: _tensors(v, device, dtype, requires_grad) for k, v in value.items()}
    return value


def _example(entry, seed=0):
    args = list(entry.example(np.random.default_rng(seed)))
    kwargs = args.pop() if args and isinstance(args[-1], dict) else {}
    return args, kwargs


def _mutates(entry):
    """An in-place op (``add_``, ``x[i] = v``): tested on a copy of its first argument, which
    is then its result."""
    return entry.name.endswith("_")


def _call(fn, entry, args, kwargs, clone):
    if not _mutates(entry):
        return fn(*args, **kwargs)
    target = clone(args[0])
    fn(target, *args[1:], **kwargs)
    return target


def _flat(out):
    """The op's results as a flat list (tuples of tensors, named tuples, plain values)."""
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _flat(o)]
    return [out]


def _host(t):
    if isinstance(t, mg.Tensor):
        return t.detach().cpu().numpy()
    if hasattr(t, "detach"):  # a torch tensor
        return t.detach().numpy()
    return np.asarray(t)


def _run(entry, device, dtype, args=None, kwargs=None):
    if args is None:
        args, kwargs = _example(entry)
    mg.manual_seed(0)
    return _flat(_call(entry.fn, entry, _tensors(args, device, dtype), kwargs,
                       lambda t: t.clone()))


def test_every_op_has_a_contract():
    missing = [e.name for e in ALL if e.example is None]
    assert not missing, f"ops without a test contract (example=...): {missing}"
    for entry in ALL:
        assert entry.domain in registry.EDGE_VALUES, entry.name


@pytest.mark.parametrize("entry", _cases(DECLARED))
def test_cuda_matches_cpu(entry):
    wants = _run(entry, "cpu", mg.float32)
    gots = _run(entry, "cuda", mg.float32)
    rtol, atol = entry.tol
    for got, want in zip(gots, wants, strict=True):
        if isinstance(want, mg.Tensor):
            assert got.device == "cuda" and got.dtype == want.dtype, entry.name
        np.testing.assert_allclose(_host(got), _host(want), rtol=rtol, atol=atol,
                                   err_msg=entry.name)


@pytest.mark.parametrize("entry", _cases(e for e in DECLARED if e.grad))
def test_float64_gradcheck(entry):
    """The gradient of every float tensor argument (also inside lists), numerically."""
    args, kwargs = _example(entry)
    structure = _tensors(args, "cpu", mg.float64, requires_grad=entry.grad)
    leaves = []

    def collect(value):
        if isinstance(value, mg.Tensor):
            if value.requires_grad:
                leaves.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                collect(v)
    collect(structure)

    def rebuild(value, given):
        if isinstance(value, mg.Tensor) and value.requires_grad:
            return next(given)
        if isinstance(value, (list, tuple)):
            return type(value)(rebuild(v, given) for v in value)
        return value

    def fn(*inputs):
        call_args = rebuild(structure, iter(inputs))
        mg.manual_seed(0)  # a random op draws the same at every evaluation
        outs = _flat(_call(entry.fn, entry, call_args, kwargs, lambda t: t.clone()))
        return tuple(o for o in outs if isinstance(o, mg.Tensor) and o.dtype.kind == "f")
    assert leaves, f"{entry.name}: grad=True but the example has no float tensor"
    assert mg.autograd.gradcheck(fn, leaves)


def _torch_counterpart(torch, entry):
    import torch.nn.functional as TF

    if entry.torch:
        owner, _, name = entry.torch.rpartition(".")
        module = {"torch": torch, "torch.nn.functional": TF, "F": TF,
                  "Tensor": torch.Tensor}.get(owner)
        if module is None:
            module = __import__(owner, fromlist=[name])
        return getattr(module, name)
    for where, name in ((TF if entry.F else torch, entry.name),
                        (torch.Tensor, entry.methods[0] if entry.methods else entry.name)):
        if hasattr(where, name):
            return getattr(where, name)
    raise AssertionError(f"torch has no {entry.name}: declare torch=Unlike('why') or the "
                         f"counterpart's name")


def _to_torch(torch, value):
    if isinstance(value, mg.Tensor):
        return torch.from_numpy(value.detach().numpy().copy())
    if isinstance(value, (list, tuple)) and not isinstance(value, str):
        return type(value)(_to_torch(torch, v) for v in value)
    if isinstance(value, dict):
        return {k: _to_torch(torch, v) for k, v in value.items()}
    if isinstance(value, np.dtype):
        return getattr(torch, str(value))
    return value


def _against_torch(torch, entry, args, kwargs, device, dtype, rtol, atol, signed_zeros=False):
    mine = _tensors(args, device, dtype)
    theirs = _to_torch(torch, _tensors(args, "cpu", dtype))
    mg.manual_seed(0)
    gots = _flat(_call(entry.fn, entry, mine, kwargs, lambda t: t.clone()))
    with np.errstate(all="ignore"):
        wants = _flat(_call(_torch_counterpart(torch, entry), entry, theirs,
                            _to_torch(torch, kwargs), lambda t: t.clone()))
    for got, want in zip(gots, wants, strict=True):
        if isinstance(want, torch.Tensor):
            assert str(got.dtype) == str(want.dtype).replace("torch.", ""), entry.name
        got, want = _host(got), _host(want)
        assert got.shape == want.shape, entry.name
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=entry.name)
        if signed_zeros and want.dtype.kind == "f":
            zeros = want == 0
            np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]),
                                          err_msg=f"{entry.name}: the sign of a zero")


@pytest.mark.parametrize("entry", _cases(COMPARED))
def test_against_torch(entry):
    """float64 values as torch's; float32 inputs give torch's result dtype."""
    torch = pytest.importorskip("torch")
    args, kwargs = _example(entry)
    _against_torch(torch, entry, args, kwargs, "cpu", mg.float64, 1e-10, 1e-12)
    _against_torch(torch, entry, args, kwargs, "cpu", mg.float32, 1e-5, 1e-6)


def _with_edges(value, edges, rng):
    """``value`` with each float array's elements replaced by the edge values, in a drawn
    order (every edge value appears when the array has room)."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return rng.permutation(np.resize(np.array(edges), value.size)).reshape(value.shape)
    if isinstance(value, (list, tuple)) and not isinstance(value, str):
        return type(value)(_with_edges(v, edges, rng) for v in value)
    if isinstance(value, dict):
        return {k: _with_edges(v, edges, rng) for k, v in value.items()}
    return value


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", _cases(e for e in COMPARED if registry.EDGE_VALUES[e.domain]))
def test_edge_values_against_torch(entry, device):
    torch = pytest.importorskip("torch")
    args, kwargs = _example(entry)
    rng = np.random.default_rng(1)
    edged = _with_edges(args, registry.EDGE_VALUES[entry.domain], rng)
    _against_torch(torch, entry, edged, kwargs, device, mg.float32, 1e-5, 1e-30,
                   signed_zeros=entry.signed_zeros)


def _layer_like(entry):
    """An op with an ``nn`` layer whose example is one tensor and the layer's options."""
    args, _ = _example(entry._replace(example=(entry.example if callable(entry.example)
                                                else entry.example[0])))
    return entry.module and sum(isinstance(a, np.ndarray) for a in args) == 1


@pytest.mark.parametrize("entry", _cases(e for e in DECLARED if _layer_like(e)))
def test_layer_calls_the_function(entry):
    """The entry's ``nn`` layer with its default parameters computes the function of the
    example's tensor and non-tensor arguments. The layer is built from those arguments;
    a required constructor argument they do not give is the channel count (``GroupNorm``'s
    ``num_channels``, ``BatchNorm``'s ``num_features``)."""
    layer_cls = getattr(mg.nn, entry.module)
    args, _ = _example(entry)
    args = _tensors(args, "cpu", mg.float64)
    x = next(a for a in args if isinstance(a, mg.Tensor))
    options = [a for a in args if not isinstance(a, mg.Tensor)]
    required = [p for p in inspect.signature(layer_cls).parameters.values()
                if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    layer = layer_cls(*options, *[x.shape[1]] * (len(required) - len(options))).double()
    mg.manual_seed(0)
    want = _host(entry.fn(x, *options))
    mg.manual_seed(0)
    np.testing.assert_allclose(_host(layer(x)), want, rtol=1e-12, atol=1e-12)
