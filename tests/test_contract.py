import numpy as np
import pytest
from hypothesis import given

from minigpu import backends
from minigpu.backends import contract
from strategies import views


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
