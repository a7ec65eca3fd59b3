"""torch's ``out=`` keyword on minigpu's public functions (minigpu/ops/out.py), against torch."""
import warnings

import numpy as np
import pytest
import torch

import minigpu as mg
from minigpu.ops.registry import OPS

DEVICES = ["cpu", "cuda"]

CASES = {  # name: (args as NumPy arrays or plain values, kwargs)
    "add": lambda r: ((r.standard_normal((2, 3)), r.standard_normal((2, 3))), {}),
    "mul": lambda r: ((r.standard_normal((2, 3)), r.standard_normal((3,))), {}),
    "exp": lambda r: ((r.standard_normal((2, 3)),), {}),
    "gt": lambda r: ((r.standard_normal((2, 3)), r.standard_normal((2, 3))), {}),
    "matmul": lambda r: ((r.standard_normal((2, 4)), r.standard_normal((4, 3))), {}),
    "mm": lambda r: ((r.standard_normal((2, 4)), r.standard_normal((4, 3))), {}),
    "bmm": lambda r: ((r.standard_normal((2, 2, 4)), r.standard_normal((2, 4, 3))), {}),
    "sum": lambda r: ((r.standard_normal((2, 3)), 1), {}),
    "mean": lambda r: ((r.standard_normal((2, 3)), 0), {"keepdim": True}),
}


def _args(values, device, lib):
    def convert(v):
        if isinstance(v, np.ndarray):
            return (mg.tensor(v.astype(np.float32), device=device) if lib is mg
                    else torch.tensor(v.astype(np.float32)))
        return v
    return [convert(v) for v in values]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("out_shape", [(0,), "same", (7,)], ids=["empty", "same", "resized"])
def test_out_matches_torch(name, device, out_shape):
    values, kwargs = CASES[name](np.random.default_rng(0))
    expected = getattr(torch, name)(*_args(values, device, torch), **kwargs)
    shape = tuple(expected.shape) if out_shape == "same" else out_shape
    torch_out, mg_out = torch.empty(shape), mg.empty(shape, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = getattr(mg, name)(*_args(values, device, mg), **kwargs, out=mg_out)
        torch_got = getattr(torch, name)(*_args(values, device, torch), **kwargs, out=torch_out)
    assert got is mg_out and torch_got is torch_out
    assert tuple(mg_out.shape) == tuple(torch_out.shape) and mg_out.dtype == mg.float32
    np.testing.assert_allclose(mg_out.cpu().numpy(), torch_out.numpy(), rtol=1e-5, atol=1e-6)
    resized = [w for w in caught if "was resized" in str(w.message)]
    assert len(resized) == (2 if out_shape == (7,) else 0)


@pytest.mark.parametrize("device", DEVICES)
def test_cat_into_a_transposed_out_and_an_input(device):
    a = mg.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    out = mg.zeros(2, 4, device=device).t()  # (4, 2), strides (1, 4)
    assert mg.cat([a, a * 10], out=out) is out and out.stride() == (1, 4)
    assert out.tolist() == [[1.0, 2.0], [3.0, 4.0], [10.0, 20.0], [30.0, 40.0]]
    version = a._version
    mg.add(a, a, out=a)  # an input as out, as torch allows
    assert a.tolist() == [[2.0, 4.0], [6.0, 8.0]] and a._version == version + 1


@pytest.mark.parametrize("device", DEVICES)
def test_several_results_take_a_tuple(device):
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    values, indices = mg.empty(0, device=device), mg.empty(0, dtype=mg.long, device=device)
    got = mg.max(mg.tensor(x, device=device), 1, out=(values, indices))
    expected = torch.max(torch.tensor(x), 1)
    assert got.values is values and got.indices is indices
    assert values.tolist() == expected.values.tolist()
    assert indices.tolist() == expected.indices.tolist()
    with pytest.raises(TypeError, match="tuple of 2"):
        mg.max(mg.tensor(x, device=device), 1, out=values)


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_cast_as_torch(device):
    a = mg.ones(2, 3, device=device)
    with pytest.raises(RuntimeError) as torch_error:
        torch.add(torch.ones(2, 3), torch.ones(2, 3), out=torch.empty(2, 3, dtype=torch.long))
    with pytest.raises(RuntimeError) as mg_error:
        mg.add(a, a, out=mg.empty(2, 3, dtype=mg.long, device=device))
    assert str(mg_error.value) == str(torch_error.value)
    out = mg.empty(2, 3, device=device)  # bool result into a float out: castable
    assert mg.gt(a, 0.5, out=out).tolist() == [[1.0] * 3] * 2 and out.dtype == mg.float32


@pytest.mark.parametrize("device", DEVICES)
def test_no_autograd_through_out(device):
    leaf = mg.ones(2, device=device, requires_grad=True)
    with pytest.raises(RuntimeError) as torch_error:
        torch.exp(torch.ones(2, requires_grad=True), out=torch.empty(2))
    for args, out in [((leaf,), mg.empty(2, device=device)),
                      ((mg.ones(2, device=device),),
                       mg.empty(2, device=device, requires_grad=True))]:
        with pytest.raises(RuntimeError) as mg_error:
            mg.exp(*args, out=out)
        assert str(mg_error.value) == str(torch_error.value)
    with mg.no_grad():
        out = mg.empty(2, device=device)
        assert mg.exp(leaf, out=out).tolist() == pytest.approx([np.e] * 2)


def test_devices_must_match():
    with pytest.raises(RuntimeError, match="Expected out tensor to have device cuda"):
        mg.exp(mg.ones(2, device="cuda"), out=mg.empty(2))


def _torch_takes_out(name, example):
    """Whether ``torch.<name>`` accepts ``out=`` on the op's example arguments."""
    drawn = example[0] if isinstance(example, tuple) else example
    args = list(drawn(np.random.default_rng(0)))
    kwargs = args.pop() if args and isinstance(args[-1], dict) else {}

    def convert(v):
        if isinstance(v, np.ndarray):
            return torch.tensor(v.astype(np.float32) if v.dtype.kind == "f" else v)
        return [convert(item) for item in v] if isinstance(v, list) else v
    args = [convert(v) for v in args]
    result = getattr(torch, name)(*args, **kwargs)
    if not isinstance(result, (torch.Tensor, tuple)):  # allclose: a bool
        return False
    out = (tuple(torch.empty(0, dtype=r.dtype) for r in result) if isinstance(result, tuple)
           else torch.empty(0, dtype=result.dtype))
    try:
        getattr(torch, name)(*args, **kwargs, out=out)
    except TypeError:
        return False
    return True


def test_out_only_where_torch_has_it():
    """Each exported op takes out= exactly where torch's function of the same name does (the
    random draws aside: the program harness swaps them by identity)."""
    for e in OPS.values():
        if e.mg and (e.torch or "").startswith("Tensor."):  # a method in torch: no out=
            assert not e.out, e.name
        elif e.mg and e.name != "multinomial":
            assert _torch_takes_out(e.name, e.example) == e.out, e.name
    assert mg.ops.add is OPS["add"].fn and mg.add is not OPS["add"].fn
    assert mg.multinomial is OPS["multinomial"].fn  # swapped by identity in tests/programs
    assert mg.add.__wrapped__ is mg.Tensor.add
    with pytest.raises(TypeError):
        mg.reshape(mg.ones(4), (2, 2), out=mg.empty(0))
