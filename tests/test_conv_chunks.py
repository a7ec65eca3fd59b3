"""Convolutions whose columns are made a few images at a time (``ops/conv.py``,
``image_chunks``): the same values and gradients as the whole batch at once, on both devices,
and gradcheck through the chunked path."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigpu as mg
import minigpu.nn.functional as F
from minigpu.autograd import gradcheck
from minigpu.ops import conv


def run(fn, device, x0, w0, b0):
    x = mg.tensor(x0, device=device, requires_grad=True)
    w = mg.tensor(w0, device=device, requires_grad=True)
    b = mg.tensor(b0, device=device, requires_grad=True)
    out = fn(x, w, b)
    (out * out).sum().backward()
    return [t.detach().cpu().numpy() for t in (out, x.grad, w.grad, b.grad)]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@settings(deadline=None, max_examples=6)
@given(n=st.integers(2, 5), transposed=st.booleans(), stride=st.integers(1, 2),
       padding=st.integers(0, 1), dilation=st.integers(1, 2), seed=st.integers(0, 2**16))
def test_chunked_columns_give_the_whole_batch_results(device, n, transposed, stride, padding,
                                                      dilation, seed):
    rng = np.random.default_rng(seed)
    c, oc, k = 2, 3, 3
    x0 = rng.standard_normal((n, c, 6, 5)).astype(np.float32)
    w0 = rng.standard_normal((c, oc, k, k) if transposed else (oc, c, k, k)).astype(np.float32)
    b0 = rng.standard_normal(oc).astype(np.float32)

    def fn(x, w, b):
        if transposed:
            return F.conv_transpose2d(x, w, b, stride=stride, padding=padding,
                                      dilation=dilation)
        return F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation)

    whole = run(fn, device, x0, w0, b0)
    backend = mg.backends.get(device)
    with pytest.MonkeyPatch.context() as patch:
        gathers = []
        im2col = backend.im2col
        patch.setattr(backend, "im2col", lambda x, *a: gathers.append(x.shape[0]) or im2col(x, *a))
        patch.setattr(conv, "CHUNK_COLUMNS_BYTES", 1)  # one image a chunk
        single = run(fn, device, x0, w0, b0)
        assert gathers == [1] * (n if transposed else 2 * n)  # (forward and) backward
        patch.setattr(conv, "CHUNK_COLUMNS_BYTES", 2 * _column_bytes(x0, w0, transposed,
                                                                     stride, padding, dilation))
        pairs = run(fn, device, x0, w0, b0)  # two images a chunk: an odd n ends with one
    for got in (single, pairs):
        for a, b in zip(got, whole):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def _column_bytes(x0, w0, transposed, stride, padding, dilation):
    """One image's columns, as the op computes them (float32)."""
    _, c, h, w = x0.shape
    k = w0.shape[2]
    if transposed:  # (C_out*k*k, H*W) columns of the output
        return w0.shape[1] * k * k * h * w * 4
    oh = (h + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    ow = (w + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    return c * k * k * oh * ow * 4


def test_the_chunks_cover_the_batch_once():
    conv_bytes = conv.CHUNK_COLUMNS_BYTES
    assert conv.image_chunks(5, conv_bytes) == [(i, 1) for i in range(5)]
    assert conv.image_chunks(7, conv_bytes // 3) == [(0, 3), (3, 3), (6, 1)]
    assert conv.image_chunks(4, 1) == [(0, 4)]
    assert conv.image_chunks(3, conv_bytes * 10) == [(0, 1), (1, 1), (2, 1)]


@pytest.mark.parametrize("transposed", [False, True])
def test_gradcheck_through_chunked_columns(monkeypatch, transposed):
    monkeypatch.setattr(conv, "CHUNK_COLUMNS_BYTES", 1)
    rng = np.random.default_rng(1)
    x = mg.tensor(rng.standard_normal((3, 2, 4, 4)), dtype=mg.float64, requires_grad=True)
    w = mg.tensor(rng.standard_normal((2, 2, 3, 3)), dtype=mg.float64, requires_grad=True)
    b = mg.tensor(rng.standard_normal(2), dtype=mg.float64, requires_grad=True)
    fn = F.conv_transpose2d if transposed else F.conv2d
    assert gradcheck(lambda *a: fn(*a, stride=2, padding=1), [x, w, b])
