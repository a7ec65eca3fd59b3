"""User mistakes get PyTorch's errors; a machine without GPU or simulator says how to get one."""
import os
import subprocess
import sys

import numpy as np
import pytest

import minigpu as mg
from minigpu import nn


def run_without_simulator(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python without NUMBA_ENABLE_CUDASIM (the suite forces it on)."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300)


HAS_GPU = "from numba import cuda; import sys; sys.exit(0 if cuda.is_available() else 3)"


def test_cuda_without_gpu_or_simulator_says_how_to_enable_the_simulator():
    if run_without_simulator(HAS_GPU).returncode == 0:
        pytest.skip("this machine has a GPU")
    r = run_without_simulator(
        "import minigpu as mg\n"
        "assert not mg.cuda.is_available()\n"
        "print((mg.ones(3) * 2).sum().item())\n"  # the cpu device works
        "mg.zeros(2, device='cuda')\n")
    assert r.returncode == 1 and r.stdout.strip() == "6.0"
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: device='cuda' needs an NVIDIA GPU") and \
        "NUMBA_ENABLE_CUDASIM=1" in last, r.stderr


def test_device_ordinals():
    assert mg.zeros(1, device="cuda:0").device == "cuda" and mg.device("cpu:0") == "cpu"
    with pytest.raises(RuntimeError, match=r"CUDA error: invalid device ordinal: 'cuda:1' "
                                           r"\(minigpu uses one device"):
        mg.zeros(1, device="cuda:1")
    with pytest.raises(RuntimeError, match="Invalid device string: 'cuda:x'"):
        mg.device("cuda:x")
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda device type at start of "
                                           "device string: tpu:0"):
        mg.device("tpu:0")


@pytest.mark.parametrize("make", [
    lambda: mg.tensor([1, 2], requires_grad=True),
    lambda: mg.zeros(2, dtype=mg.int64, requires_grad=True),
    lambda: mg.arange(3, requires_grad=True),
    lambda: mg.ones(2, dtype=mg.bool).requires_grad_(),
])
def test_integer_tensors_cannot_require_grad(make):
    with pytest.raises(RuntimeError, match="^only Tensors of floating point dtype can require "
                                           "gradients$"):
        make()


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_randint_forms(device):
    mg.manual_seed(0)
    a = mg.randint(10, (4,), device=device)
    assert tuple(a.shape) == (4,) and a.dtype == mg.int64
    assert a.min().item() >= 0 and a.max().item() < 10
    b = mg.randint(3, 5, (2, 3), device=device)
    assert tuple(b.shape) == (2, 3) and b.min().item() >= 3 and b.max().item() < 5
    assert tuple(mg.randint(5, size=(3,)).shape) == (3,)
    assert tuple(mg.randint(2, 4).shape) == ()


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan")])
def test_bce_refuses_inputs_outside_0_1(device, bad):
    loss = nn.BCELoss()
    target = mg.tensor([0.0, 1.0, 1.0], device=device)
    # the bounds themselves are valid; on cuda, log(0) needs the simulator's IEEE math (issue
    # 10: the stock simulator raises a math domain error), so the bounds are checked on cpu
    edge = 1e-6 if device == "cuda" else 0.0
    ok = loss(mg.tensor([edge, 0.5, 1.0 - edge], device=device), target)
    assert np.isfinite(ok.item())
    with pytest.raises(RuntimeError, match="^all elements of input should be between 0 and 1$"):
        loss(mg.tensor([0.2, bad, 0.7], device=device), target)
