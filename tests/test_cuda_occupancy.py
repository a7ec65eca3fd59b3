"""``theoretical_occupancy`` against hand-computed H200 (sm_90) cases, and the sweep kernel.

Each case below is worked out in its comment from the sm_90 limits: 64 warp slots, 32 blocks,
65536 registers in 4 sub-partitions of 16384, allocated per warp in units of 256; 228 KiB of
shared memory per SM, plus 1 KiB reserved per block, in units of 128 bytes.
"""
import importlib

import numpy as np
import pytest

from minigpu import backends
from minigpu.backends.cuda.device import scalar

cuda = backends.get("cuda")
O = importlib.import_module("minigpu.lessons.occupancy")
occ = O.theoretical_occupancy

CASES = [
    # (regs, smem, block) -> (blocks/SM, warps/SM, limited_by)
    # 32 regs: 1024/warp, 16 warps per quarter = 64; 256 threads = 8 warps -> 8 blocks, full.
    ((32, 0, 256), (8, 64, "warps")),
    # 64 regs: 2048/warp, 8 warps per quarter = 32 warps -> 4 blocks of 8 warps: 50 %.
    ((64, 0, 256), (4, 32, "registers")),
    # 32-thread blocks: 32 blocks/SM x 1 warp = 32 of 64 warps, whatever else.
    ((16, 0, 32), (32, 32, "blocks")),
    # 64-thread blocks: 32 blocks x 2 warps fill all 64 slots (warps and blocks tie).
    ((16, 0, 64), (32, 64, "warps")),
    # 32 regs, 1024 threads: 2 blocks x 32 warps = 64, full ...
    ((32, 0, 1024), (2, 64, "warps")),
    # ... one more register: 33*32 = 1056 -> 1280/warp, 12 warps per quarter = 48 < 64 -> 1 block.
    ((33, 0, 1024), (1, 32, "registers")),
    # 80 regs (old 4x4 GEMM): 2560/warp, 6 per quarter = 24 warps -> 3 blocks of 8: 37.5 %.
    ((80, 4352, 256), (3, 24, "registers")),
    # 164 regs (8x8 GEMM): 5248 -> 5376/warp, 3 per quarter = 12 warps -> 1 block: 12.5 %.
    ((164, 8448, 256), (1, 8, "registers")),
    # 48 KiB static shared: 49152 + 1024 = 50176 per block, 233472 // 50176 = 4 blocks of 4 warps.
    ((32, 49152, 128), (4, 16, "shared memory")),
    # 227 KiB (the opt-in maximum) + 1 KiB reserved = exactly the SM's 228 KiB: one block.
    ((32, 232448, 256), (1, 8, "shared memory")),
    # Too big: 227 KiB + 1 byte does not fit at all; the launch would fail.
    ((32, 232449, 256), (0, 0, "shared memory")),
    # 255 regs x 1024 threads: 8192 regs/warp x 32 warps > 65536 per block: cannot launch.
    ((255, 0, 1024), (0, 0, "registers")),
    # No registers reported (an empty kernel): only warps and blocks count.
    ((0, 0, 128), (16, 64, "warps")),
    # 40 regs: 1280/warp, 12 warps per quarter = 48; 96 threads = 3 warps -> 16 blocks.
    ((40, 0, 96), (16, 48, "registers")),
]


@pytest.mark.parametrize("args,want", CASES, ids=[str(c[0]) for c in CASES])
def test_hand_computed(args, want):
    got = occ(*args)
    assert (got.blocks_per_sm, got.active_warps, got.limited_by) == want
    assert got.max_warps == 64
    assert got.occupancy == pytest.approx(want[1] / 64)


def test_invalid_launches():
    with pytest.raises(ValueError, match="exceeds 1024"):
        occ(32, 0, 2048)
    with pytest.raises(ValueError, match="positive"):
        occ(32, 0, 0)


def test_sweep_table():
    rows = O.sweep_table(16)
    assert [r["block"] for r in rows] == list(O.BLOCK_SIZES)
    assert rows[0]["occupancy"] == 0.5 and rows[0]["limited_by"] == "blocks"
    assert all(r["occupancy"] == 1.0 for r in rows[1:])


@pytest.mark.parametrize("block", [32, 64])
def test_saxpy_matches_numpy(block):
    rng = np.random.default_rng(1)
    n = 100  # ragged: the last block is partly outside the array
    x = rng.uniform(-1, 1, n).astype(np.float32)
    y = rng.uniform(-1, 1, n).astype(np.float32)
    a = scalar(1.5, np.float32)
    out = O.saxpy(a, cuda.from_numpy(x), cuda.from_numpy(y), block=block)
    np.testing.assert_allclose(out.copy_to_host(), a * x + y, rtol=1e-6, atol=1e-6)
    assert O.saxpy_launch_config(n, block) == (-(-n // block), block)
