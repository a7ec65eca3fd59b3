import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigpu import backends
from minigpu.backends import contract, optable
from strategies import ViewSpec, shapes, views


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_backend_implements_every_primitive(device):
    assert contract.check_backend(backends.get(device)) == []


@given(views())
def test_contiguous_matches_numpy_layout(spec):
    for device in ("cpu", "cuda"):
        b = backends.get(device)
        out = b.contiguous(spec.on(b))
        got = b.to_numpy(contract.dense(out, spec.shape))
        np.testing.assert_array_equal(got, spec.numpy())


@given(st.data(), shapes(), st.sampled_from(["add", "mul", "div", "maximum", "gt"]))
def test_cpu_binary_on_any_two_layouts_matches_numpy(data, shape, op):
    """The cpu maps take shortcuts (flat buffers of dense operands, one repeated value for a
    view broadcast along every dim): each pair of layouts gives NumPy's answer."""
    cpu = backends.get("cpu")
    x, y = data.draw(views(shape)), data.draw(views(shape))
    if data.draw(st.booleans()):  # a scalar broadcast to the shape: every stride 0
        y = ViewSpec(y.base, shape, (0,) * len(shape), y.offset)
    got = cpu.binary(op, x.on(cpu), y.on(cpu))
    with np.errstate(all="ignore"):
        want = optable.BINARY_BY_NAME[op].numpy(x.numpy(), y.numpy(), 0, 0)
    np.testing.assert_array_equal(got.reshape(shape), want)
