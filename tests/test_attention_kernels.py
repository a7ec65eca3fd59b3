"""The attention kernels (``backends/cuda/attention.py``): flash-attention forward and fused
backward, and the naive three-kernel path, against the NumPy reference
(``backends/cpu/attention.py``) on hypothesis-drawn problems; the production tiles; a float64
gradcheck of the fused Function (cpu reference and cuda); ``F.scaled_dot_product_attention``
taking the fused path on cuda.

Shapes are ragged (sequence lengths that are no multiple of the tiles), head dims 16 to 128,
causal or not, with no mask, a broadcast (L, S) additive mask or a per-batch one with -inf
entries (whole rows included). Tolerances: float32 rtol 1e-4 and atol 2e-5 per 16 of the head
dim (sums in another order; the reference is computed in float64); float64 rtol 1e-10, atol
1e-12. The float32 atol grows with the head dim because dS = P * (dP - D) is the difference of
two length-Ev dot products: where the exact answer is 0 (a row with one live key) the kernel
keeps their rounding, about Ev float32 ulps of terms of size |dO| |V|.
"""
import importlib
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigpu as mg
import minigpu.nn.functional as F
from minigpu import backends
from minigpu.autograd import gradcheck
from minigpu.backends import contract
from minigpu.ops.attention import FlashAttention

cpu = backends.get("cpu")
cuda = backends.get("cuda")
A = importlib.import_module("minigpu.backends.cuda.attention")


def tol(problem):
    q, _, v, _ = problem["arrays"]
    if q.dtype == np.float64:
        return dict(rtol=1e-10, atol=1e-12)
    return dict(rtol=1e-4, atol=2e-5 * max(q.shape[2], v.shape[2]) / 16)


@st.composite
def problems(draw, max_len=9):
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    B, L, S = draw(st.integers(1, 2)), draw(st.integers(1, max_len)), draw(st.integers(1, max_len))
    E = draw(st.sampled_from([16, 24, 40, 64, 100, 128]))
    Ev = draw(st.sampled_from([16, E]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    arrays = [rng.standard_normal(shape).astype(dtype)
              for shape in ((B, L, E), (B, S, E), (B, S, Ev), (B, L, Ev))]
    mask_kind = draw(st.sampled_from(["none", "broadcast", "per_batch"]))
    mask = None
    if mask_kind == "broadcast":       # an (L, S) mask seen through a batch stride of 0
        mask = (rng.standard_normal((1, L, S)).astype(dtype), (0, S, 1))
    elif mask_kind == "per_batch":     # -inf entries, the first query row of batch 0 dead
        m = np.where(rng.random((B, L, S)) < 0.3, -np.inf, rng.standard_normal((B, L, S)))
        m[0, 0] = -np.inf
        mask = (m.astype(dtype), (L * S, S, 1))
    causal = draw(st.booleans()) and mask is None
    return dict(arrays=arrays, mask=mask, causal=causal, scale=draw(st.sampled_from([None, 0.7])))


def run(backend, problem, forward="attention", **launch):
    """(out, lse, dq, dk, dv) of one backend as host arrays."""
    q, k, v, g = problem["arrays"]
    B, L, E = q.shape
    S, Ev = k.shape[1], v.shape[2]
    views = [contract.dense(backend.from_numpy(a), a.shape) for a in (q, k, v, g)]
    mask = None
    if problem["mask"] is not None:
        m, strides = problem["mask"]
        mask = contract.View(backend.from_numpy(m), (B, L, S), strides, 0)
    scale = problem["scale"] or 1 / math.sqrt(E)
    fwd = A.attention_naive if forward == "naive" and backend is cuda else backend.attention
    out, lse = fwd(*views[:3], mask, problem["causal"], scale, **launch)
    out, lse = contract.dense(out, (B, L, Ev)), contract.dense(lse, (B, L))
    results = [out, lse]
    if forward == "attention":
        grads = backend.attention_backward(*views[:3], out, lse, views[3], mask,
                                           problem["causal"], scale, **launch)
        results += [contract.dense(t, s) for t, s in zip(grads, ((B, L, E), (B, S, E),
                                                                 (B, S, Ev)))]
    return [backend.to_numpy(t) for t in results]


def assert_match(problem, got, want):
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), got, want):
        np.testing.assert_allclose(a, b, err_msg=name, **tol(problem))


@given(problems(), st.sampled_from([dict(fwd=(4, 8), bwd=(4, 4), TD=4),
                                    dict(fwd=(2, 4), bwd=(4, 2), TD=8)]))
def test_flash_forward_and_backward_match_reference(problem, tiles):
    assert_match(problem, run(cuda, problem, tiles=tiles), run(cpu, problem))


def test_one_key_gives_zero_dq_up_to_rounding():
    """With one key the softmax is constant, so dq is exactly 0: the float32 kernel's dq is
    the rounding of dP - D alone, within the head-dim-scaled atol (E = Ev = 128, scale 0.7)."""
    rng = np.random.default_rng(4)
    problem = dict(arrays=[rng.standard_normal(s).astype(np.float32)
                           for s in ((2, 5, 128), (2, 1, 128), (2, 1, 128), (2, 5, 128))],
                   mask=None, causal=False, scale=0.7)
    got, want = run(cuda, problem, tiles=dict(fwd=(4, 8), bwd=(4, 4), TD=4)), run(cpu, problem)
    assert not want[2].any()
    assert_match(problem, got, want)


@given(problems(max_len=6))
def test_naive_path_matches_reference(problem):
    assert_match(problem, run(cuda, problem, forward="naive"), run(cpu, problem, forward="naive"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_production_tiles(dtype):
    """The GPU configuration (256 / 128 threads per block) on a ragged causal problem."""
    rng = np.random.default_rng(1)
    problem = dict(arrays=[rng.standard_normal(s).astype(dtype)
                           for s in ((1, 19, 16), (1, 21, 16), (1, 21, 16), (1, 19, 16))],
                   mask=None, causal=True, scale=None)
    assert_match(problem, run(cuda, problem, tiles=A.PRODUCTION[np.dtype(dtype)]),
                 run(cpu, problem))


def test_production_tiles_fit_a_block():
    """Static shared memory of every production kernel at DMAX = 128 within 48 KiB."""
    for dtype, cfg in A.PRODUCTION.items():
        words = lambda rows, cols: 2 * (rows + cols) * (A.MAX_HEAD_DIM + 1)  # noqa: E731
        (fq, fk), (bq, bk), td = cfg["fwd"], cfg["bwd"], cfg["TD"]
        forward = (fq + 2 * fk) * (A.MAX_HEAD_DIM + 1) + 2 * fq * fk
        backward = words(bq, bk) + 2 * bq * bk + 2 * bq
        assert max(forward, backward) * dtype.itemsize <= 48 * 1024, dtype
        assert A.MAX_HEAD_DIM % td == 0


def test_causal_skips_the_tiles_right_of_the_diagonal():
    """With L = S = 16 and 4x4 tiles, the causal forward loads 10 of the 16 (query, key) tile
    pairs' K and V tiles: half the global loads of K and V, plus the diagonal."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((1, 16, 16)).astype(np.float32) for _ in range(4)]
    loads = {}
    for causal in (False, True):
        problem = dict(arrays=arrays, mask=None, causal=causal, scale=None)
        views = [contract.dense(cuda.from_numpy(a), a.shape) for a in arrays[:3]]
        with mg.cuda.counters() as launches:
            cuda.attention(*views, None, causal, 0.25, tiles=dict(fwd=(4, 4), bwd=(4, 4), TD=4))
        loads[causal] = sum(k.metrics["global_load_requests"] for k in launches)
        assert_match(problem, run(cuda, problem, tiles=dict(fwd=(4, 4), bwd=(4, 4), TD=4)),
                     run(cpu, problem))
    assert loads[True] < 0.75 * loads[False]


def test_dead_rows_give_zero_output_and_gradients():
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s) for s in ((1, 3, 16), (1, 5, 16), (1, 5, 16), (1, 3, 16))]
    mask = np.zeros((1, 3, 5))
    mask[0, 1] = -np.inf
    problem = dict(arrays=arrays, mask=(mask, (15, 5, 1)), causal=False, scale=None)
    out, lse, dq, dk, dv = got = run(cuda, problem)
    assert (out[0, 1] == 0).all() and lse[0, 1] == -np.inf and (dq[0, 1] == 0).all()
    assert_match(problem, got, run(cpu, problem))


def test_head_dims_past_the_kernel_are_refused():
    q = contract.dense(cuda.from_numpy(np.zeros((1, 2, 130), np.float32)), (1, 2, 130))
    with pytest.raises(ValueError, match="head dims up to 128"):
        cuda.attention(q, q, q, None, False, 1.0)


@pytest.mark.parametrize("causal", [False, True])
def test_fused_function_gradcheck_on_the_reference(causal):
    """float64 gradcheck of the Function over the cpu primitives (the kernels' reference),
    with an additive mask holding a dead row when not causal."""
    rng = np.random.default_rng(4)
    mask = None
    if not causal:
        m = rng.standard_normal((4, 5))
        m[2] = -np.inf
        mask = contract.View(m.reshape(-1), (2, 4, 5), (0, 5, 1), 0)
    q, k, v = (mg.tensor(rng.standard_normal(s), requires_grad=True)
               for s in ((2, 4, 3), (2, 5, 3), (2, 5, 2)))
    assert gradcheck(lambda a, b, c: FlashAttention.apply(a, b, c, mask, causal, 0.6), [q, k, v])


def test_sdpa_gradcheck_through_the_flash_kernels():
    """float64 gradcheck of F.scaled_dot_product_attention on cuda (the fused path), causal
    with L != S and a broadcast boolean mask over heads."""
    rng = np.random.default_rng(5)
    keep = mg.tensor(rng.random((3, 2)) > 0.3, device="cuda")

    def sdpa(a, b, c):
        a, b, c = a.cuda(), b.cuda(), c.cuda()
        return (F.scaled_dot_product_attention(a, b, c, is_causal=True)
                + F.scaled_dot_product_attention(a, b, c, attn_mask=keep)).cpu()

    q, k, v = (mg.tensor(rng.standard_normal(s), requires_grad=True)
               for s in ((2, 3, 2), (2, 2, 2), (2, 2, 1)))
    assert gradcheck(sdpa, [q, k, v])


def test_sdpa_takes_the_fused_path_on_cuda(monkeypatch):
    calls = []
    fused = cuda.attention
    monkeypatch.setattr(cuda, "attention", lambda *a, **k: calls.append(a) or fused(*a, **k))
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 2, 5, 16), (2, 2, 7, 16),
                                                                  (2, 2, 7, 16)))
    keep = rng.random((5, 7)) > 0.2            # one (L, S) mask for every batch and head
    kpm = rng.random((2, 1, 1, 7)) > 0.2       # per batch, broadcast over heads and queries
    for mask, strides in ((keep, (0, 7, 1)), (kpm, (7 * 5, 7, 1))):
        calls.clear()
        got = F.scaled_dot_product_attention(*(mg.tensor(a, device="cuda") for a in (q, k, v)),
                                             attn_mask=mg.tensor(mask, device="cuda"))
        assert len(calls) == 1 and calls[0][3].strides == strides  # (L, S): never copied
        want = F.scaled_dot_product_attention(*(mg.tensor(a) for a in (q, k, v)),
                                              attn_mask=mg.tensor(mask))
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    F.scaled_dot_product_attention(*(mg.tensor(a, device="cuda") for a in (q, k, v)),
                                   dropout_p=0.5)
    assert len(calls) == 1                     # dropout: the composed path
