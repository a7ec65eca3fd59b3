"""Counter-based random numbers: cuda reproduces cpu's bits exactly (uniform) and to float
tolerance (normal: both compute Box-Muller in the output dtype, with libdevice's and NumPy's
log and cos; float32 rtol=atol=1e-5, float64 rtol=1e-12 atol=1e-12)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigpu import backends
from minigpu.backends import cpu
from minigpu.backends.cpu import random as cpu_random
from minigpu.backends.cuda import random as cuda_random

# The hash wraps mod 2**32 on purpose; it must do so silently (no NumPy overflow warnings).
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

cuda = backends.get("cuda")
FLOATS = (np.float32, np.float64)
NORMAL_TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}

seeds = st.integers(0, 2**63 - 1)
offsets = st.one_of(st.integers(0, 2**20), st.integers(2**32 - 200, 2**32 + 200),
                    st.integers(0, 2**62))


@given(n=st.integers(1, 300), seed=seeds, offset=offsets, dtype=st.sampled_from(FLOATS))
def test_uniform_bits_identical_to_cpu(n, seed, offset, dtype):
    got = cuda.random_uniform(n, seed, offset, dtype).copy_to_host()
    want = cpu.random_uniform(n, seed, offset, dtype)
    assert got.dtype == want.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)


@given(n=st.integers(1, 300), seed=seeds, offset=offsets, dtype=st.sampled_from(FLOATS))
def test_normal_close_to_cpu(n, seed, offset, dtype):
    got = cuda.random_normal(n, seed, offset, dtype).copy_to_host()
    want = cpu.random_normal(n, seed, offset, dtype)
    assert got.dtype == want.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, want, **NORMAL_TOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
def test_more_numbers_than_threads_match_cpu(dtype):
    """n larger than the grid: each thread's grid-stride loop makes several numbers, each at
    its own counter (a kernel keyed by the thread, not the element, repeats numbers)."""
    n = 1000
    np.testing.assert_array_equal(cuda.random_uniform(n, 7, 3, dtype).copy_to_host(),
                                  cpu.random_uniform(n, 7, 3, dtype))
    np.testing.assert_allclose(cuda.random_normal(n, 7, 3, dtype).copy_to_host(),
                               cpu.random_normal(n, 7, 3, dtype), **NORMAL_TOL[dtype])


def test_stream_keys_match_cpu_hash():
    for seed in (0, 1, 2**32 - 1, 2**40 + 5):
        for stream in range(3):
            with np.errstate(over="ignore"):
                want = cpu_random.mix32(np.uint32((seed + stream * 0x9E3779B9) & 0xFFFFFFFF))
            assert cuda_random.stream_key(seed, stream) == want


def test_offsets_continue_the_sequence():
    """Numbers at offset k are numbers k.. of the offset-0 sequence (how dropout masks of
    successive calls avoid reusing numbers)."""
    whole = cuda.random_uniform(200, 42, 0, np.float32).copy_to_host()
    tail = cuda.random_uniform(150, 42, 50, np.float32).copy_to_host()
    np.testing.assert_array_equal(whole[50:], tail)


def test_statistics_are_sane():
    """Loose moments: 4000 draws put the mean within ~5 standard errors of the truth."""
    n = 4000
    u = cuda.random_uniform(n, 7, 0, np.float32).copy_to_host()
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 0.01
    assert np.histogram(u, bins=10, range=(0, 1))[0].min() > 0.8 * n / 10
    z = cuda.random_normal(n, 7, 0, np.float32).copy_to_host()
    assert np.all(np.isfinite(z))
    assert abs(z.mean()) < 5 / np.sqrt(n)
    assert abs(z.std() - 1) < 0.05
    assert 0.6 < np.mean(np.abs(z) < 1) < 0.76  # P(|Z| < 1) = 0.683
    other = cuda.random_uniform(n, 8, 0, np.float32).copy_to_host()
    assert abs(np.corrcoef(u, other)[0, 1]) < 0.1  # another seed: uncorrelated


def test_zero_length():
    assert cuda.random_uniform(0, 1, 0, np.float32).size == 0
    assert cuda.random_normal(0, 1, 0, np.float64).size == 0
