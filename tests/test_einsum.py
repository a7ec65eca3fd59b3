"""einsum: values against numpy.einsum on cpu and cuda, float64 gradcheck (the rewrite into
permute/reshape/matmul/sum differentiates), and PyTorch's errors."""
import numpy as np
import pytest

import minigpu as mg

CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),            # matmul
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),   # batched matmul
    ("i,j->ij", [(3,), (4,)]),                  # outer
    ("ii->", [(3, 3)]),                         # trace
    ("ii->i", [(3, 3)]),                        # diagonal
    ("ij->ji", [(2, 3)]),                       # transpose
    ("i,i->", [(3,), (3,)]),                    # dot
    ("ij->", [(2, 3)]),                         # sum
    ("ij->j", [(2, 3)]),                        # column sums
    ("ij,ij->i", [(2, 3), (2, 3)]),             # row-wise dot
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),  # attention scores
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),  # a chain
    ("ij,jk", [(2, 3), (3, 4)]),                # implicit output
    ("iij->j", [(2, 2, 3)]),
    ("i j , j -> i", [(2, 3), (3,)]),           # spaces
]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_numpy(eq, shapes, device):
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=s) for s in shapes]
    got = mg.einsum(eq, *[mg.tensor(x, dtype=mg.float64, device=device) for x in xs])
    assert got.device.type == device
    np.testing.assert_allclose(got.numpy(), np.einsum(eq.replace(" ", ""), *xs), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_gradcheck(eq, shapes):
    rng = np.random.default_rng(1)
    ts = [mg.tensor(rng.normal(size=s), dtype=mg.float64, requires_grad=True) for s in shapes]
    assert mg.autograd.gradcheck(lambda *a: mg.einsum(eq, *a), ts)


def test_operands_as_a_list_and_float32():
    a, b = mg.randn(2, 3), mg.randn(3, 4)
    out = mg.einsum("ij,jk->ik", [a, b])
    assert out.dtype == mg.float32
    np.testing.assert_allclose(out.numpy(), (a @ b).numpy(), rtol=1e-6, atol=1e-6)


def test_errors():
    a = mg.randn(2, 3)
    with pytest.raises(NotImplementedError, match="ellipsis"):
        mg.einsum("...ij->...ji", a)
    with pytest.raises(RuntimeError, match=r"number of subscripts in the equation \(3\) does "
                                           r"not match the number of dimensions \(2\)"):
        mg.einsum("ijk->i", a)
    with pytest.raises(RuntimeError, match="subscript j has size 4 for operand 1 which does "
                                           "not broadcast with previously seen size 3"):
        mg.einsum("ij,jk->ik", a, mg.randn(4, 2))
    with pytest.raises(ValueError, match="more operands were provided"):
        mg.einsum("ij->i", a, a)
    with pytest.raises(ValueError, match="fewer operands were provided"):
        mg.einsum("ij,jk->ik", a)
    with pytest.raises(ValueError, match="output subscript k does not appear"):
        mg.einsum("ij->k", a)
    with pytest.raises(ValueError, match="output subscript i appears more than once"):
        mg.einsum("ij->ii", a)
    with pytest.raises(ValueError, match="invalid subscript"):
        mg.einsum("i1->i", a)
