"""PyTorch's type promotion (``minigpu.dtypes``) against torch itself: every pair of dtypes,
every mix of dimensioned tensors, 0-d tensors and Python scalars."""
import itertools

import numpy as np
import pytest

from minigpu import dtypes

torch = pytest.importorskip("torch")

TORCH = {d: getattr(torch, name) for d, name in dtypes.TORCH_NAMES.items()}
SCALARS = [True, 3, -2, 2.5]


class Operand:
    """A stand-in tensor: what result_type reads is the shape and the dtype."""

    def __init__(self, dtype, ndim):
        self.dtype, self.shape = dtype, (2,) * ndim

    def torch(self):
        return torch.zeros(self.shape, dtype=TORCH[self.dtype])


def _torch_dtype(td):
    return next(d for d, t in TORCH.items() if t == td)


@pytest.mark.parametrize("a, b", list(itertools.product(dtypes.DTYPES, repeat=2)))
def test_promote_types_matches_torch(a, b):
    assert dtypes.promote_types(a, b) == _torch_dtype(torch.promote_types(TORCH[a], TORCH[b]))


@pytest.mark.parametrize("ndims", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_result_type_of_two_tensors_matches_torch(ndims):
    for a, b in itertools.product(dtypes.DTYPES, repeat=2):
        x, y = Operand(a, ndims[0]), Operand(b, ndims[1])
        expected = _torch_dtype(torch.result_type(x.torch(), y.torch()))
        assert dtypes.result_type(x, y) == expected, (a, b, ndims)


@pytest.mark.parametrize("ndim", [0, 1])
def test_result_type_of_a_tensor_and_a_scalar_matches_torch(ndim):
    for d, s in itertools.product(dtypes.DTYPES, SCALARS):
        expected = _torch_dtype(torch.result_type(Operand(d, ndim).torch(), s))
        assert dtypes.result_type(Operand(d, ndim), s) == expected, (d, s)
        assert dtypes.result_type(s, Operand(d, ndim)) == expected, (d, s)


def test_numpy_scalars_promote_as_python_scalars():
    assert dtypes.result_type(Operand(dtypes.int32, 1), np.float64(1.5)) == dtypes.float32
    assert dtypes.result_type(Operand(dtypes.uint8, 1), np.int64(3)) == dtypes.uint8


def test_to_dtype_reads_python_types_and_refuses_others():
    assert dtypes.to_dtype(float) == dtypes.float32
    assert dtypes.to_dtype(int) == dtypes.int64
    assert dtypes.to_dtype(bool) == dtypes.bool_
    assert dtypes.to_dtype("float16") == dtypes.float16
    with pytest.raises(TypeError, match=r"no tensors of dtype complex64 \(supported: bool, uint8"):
        dtypes.to_dtype(np.complex64)
    with pytest.raises(TypeError, match="no tensors of dtype uint16"):
        dtypes.to_dtype(np.uint16)
