"""Fused optimizer steps: cuda vs the NumPy reference (``cpu_optim``) vs a literal NumPy
transcription of PyTorch's ``_single_tensor_sgd`` / ``_single_tensor_adam``, over several steps.

Tolerances: cuda vs ``cpu_optim`` (same dtype, same order of operations; a real GPU may fuse
multiply-adds): float32 rtol=1e-5, atol=1e-6; float64 rtol=1e-12, atol=1e-14. Either against
the PyTorch transcription, which runs in float64 (and uses ``lerp`` for Adam's first moment):
float32 rtol=1e-5, atol=1e-5; float64 rtol=1e-10, atol=1e-12. The fused and unfused Adam
kernels do the same arithmetic: rtol=1e-6, atol=1e-7.
"""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigpu.backends.cpu import optim as cpu_optim
from minigpu.backends.cuda import device, memory, optim
from minigpu.lessons.fusion import adam_step_unfused_
from test_optim import NumpyAdam

SMALL = dict(block=32, max_blocks=2)
PRODUCTION = dict(block=device.BLOCK, max_blocks=device.MAX_BLOCKS)
dtypes = st.sampled_from([np.float32, np.float64])


def tol_same(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)


def tol_torch(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)


# --- PyTorch's rules, transcribed line by line (torch/optim/sgd.py; Adam is test_optim.NumpyAdam)
class TorchSGD:
    def __init__(self, param, lr, momentum, dampening, weight_decay, nesterov):
        self.param = param.astype(np.float64)
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov
        self.momentum_buffer = None

    def step(self, grad):
        grad = grad.astype(np.float64)
        if self.weight_decay != 0:
            grad = grad + self.weight_decay * self.param         # grad.add(param, alpha=wd)
        if self.momentum != 0:
            buf = self.momentum_buffer
            if buf is None:
                buf = grad.copy()                                  # torch.clone(grad)
                self.momentum_buffer = buf
            else:
                buf *= self.momentum                               # buf.mul_(momentum)
                buf += (1 - self.dampening) * grad                 # .add_(grad, alpha=1-damp)
            if self.nesterov:
                grad = grad + self.momentum * buf                  # grad.add(buf, alpha=mom)
            else:
                grad = buf
        self.param += -self.lr * grad                              # param.add_(grad, alpha=-lr)


# --- trajectories -------------------------------------------------------------------------------
@st.composite
def sgd_settings(draw):
    momentum = draw(st.sampled_from([0.0, 0.9]))
    dampening = draw(st.sampled_from([0.0, 0.3])) if momentum else 0.0
    nesterov = draw(st.booleans()) if momentum and dampening == 0 else False
    return dict(lr=draw(st.sampled_from([1e-3, 0.1, 0.5])), momentum=momentum,
                dampening=dampening, weight_decay=draw(st.sampled_from([0.0, 1e-2])),
                nesterov=nesterov)


def up(a):
    return memory.from_numpy(a)


@given(st.integers(1, 40), dtypes, sgd_settings(), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_sgd_trajectory_matches_reference_and_pytorch_rules(n, dtype, hp, steps, seed):
    rng = np.random.default_rng(seed)
    p0 = rng.standard_normal(n).astype(dtype)
    torch_ref = TorchSGD(p0, **hp)
    p_cpu, p_gpu = p0.copy(), up(p0)
    use_buf = hp["momentum"] != 0
    # Garbage in the fresh momentum buffer: the first step must overwrite, not read, it.
    buf_cpu = np.full(n, np.nan, dtype) if use_buf else None
    buf_gpu = up(buf_cpu) if use_buf else None
    for step in range(steps):
        g = rng.standard_normal(n).astype(dtype)
        args = (hp["lr"], hp["momentum"], hp["dampening"], hp["weight_decay"], hp["nesterov"],
                step == 0)
        cpu_optim.sgd_step_(p_cpu, g, buf_cpu, *args)
        optim.sgd_step_(p_gpu, up(g), buf_gpu, *args, **SMALL)
        torch_ref.step(g)
        got = p_gpu.copy_to_host()
        assert got.dtype == dtype
        np.testing.assert_allclose(got, p_cpu, **tol_same(dtype))
        np.testing.assert_allclose(got, torch_ref.param, **tol_torch(dtype))
        if use_buf:
            np.testing.assert_allclose(buf_gpu.copy_to_host(), buf_cpu, **tol_same(dtype))


@st.composite
def adam_settings(draw):
    return dict(lr=draw(st.sampled_from([1e-3, 1e-2, 0.1])),
                beta1=draw(st.sampled_from([0.9, 0.5])),
                beta2=draw(st.sampled_from([0.999, 0.9])),
                eps=draw(st.sampled_from([1e-8, 1e-3])),
                weight_decay=draw(st.sampled_from([0.0, 1e-2])))


def adam_args(hp, step):
    return (step, hp["lr"], hp["beta1"], hp["beta2"], hp["eps"], hp["weight_decay"])


@given(st.integers(1, 40), dtypes, adam_settings(), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_adam_trajectory_fused_unfused_reference_and_pytorch_rules(n, dtype, hp, steps, seed):
    rng = np.random.default_rng(seed)
    p0 = rng.standard_normal(n).astype(dtype)
    torch_ref = NumpyAdam([p0.astype(np.float64)], lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]),
                          eps=hp["eps"], weight_decay=hp["weight_decay"])
    zeros = np.zeros(n, dtype)
    cpu_state = [p0.copy(), zeros.copy(), zeros.copy()]
    fused = [up(p0), up(zeros), up(zeros)]
    unfused = [up(p0), up(zeros), up(zeros)]
    for step in range(1, steps + 1):
        g = rng.standard_normal(n).astype(dtype)
        g_gpu = up(g)
        cpu_optim.adam_step_(cpu_state[0], g, cpu_state[1], cpu_state[2], *adam_args(hp, step))
        optim.adam_step_(fused[0], g_gpu, fused[1], fused[2], *adam_args(hp, step), **SMALL)
        adam_step_unfused_(unfused[0], g_gpu, unfused[1], unfused[2],
                                 *adam_args(hp, step), **SMALL)
        torch_ref.step([g.astype(np.float64)])
        for got_buf, ref in zip(fused, cpu_state):
            np.testing.assert_allclose(got_buf.copy_to_host(), ref, **tol_same(dtype))
        for a, b in zip(fused, unfused):
            np.testing.assert_allclose(a.copy_to_host(), b.copy_to_host(), rtol=1e-6, atol=1e-7)
        got = fused[0].copy_to_host()
        assert got.dtype == dtype
        np.testing.assert_allclose(got, torch_ref.params[0], **tol_torch(dtype))
        np.testing.assert_allclose(cpu_state[0], torch_ref.params[0], **tol_torch(dtype))
    assert np.array_equal(g_gpu.copy_to_host(), g)  # the gradient is never written


def test_adam_first_step_moves_each_weight_by_about_lr():
    """Bias correction: after step 1, m/sqrt(v) = sign(g) (for |g| >> eps), so p moves by lr."""
    g = np.array([3.0, -0.5, 1e-2, -200.0], np.float32)
    p, m, v = up(np.zeros(4, np.float32)), up(np.zeros(4, np.float32)), up(np.zeros(4, np.float32))
    optim.adam_step_(p, up(g), m, v, 1, 0.01, 0.9, 0.999, 1e-8, 0.0, **SMALL)
    np.testing.assert_allclose(p.copy_to_host(), -0.01 * np.sign(g), rtol=1e-5)


def test_optimizer_production_launch():
    """The GPU launch configuration (device.BLOCK = 256 threads) over several blocks: fused and unfused Adam, momentum SGD."""
    rng = np.random.default_rng(3)
    n = 600
    p0, g = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    zeros = np.zeros(n, np.float32)
    fused, unfused, ref = [up(p0), up(zeros), up(zeros)], [up(p0), up(zeros), up(zeros)], \
        [p0.copy(), zeros.copy(), zeros.copy()]
    args = (1, 1e-2, 0.9, 0.999, 1e-8, 1e-2)
    optim.adam_step_(fused[0], up(g), fused[1], fused[2], *args, **PRODUCTION)
    adam_step_unfused_(unfused[0], up(g), unfused[1], unfused[2], *args, **PRODUCTION)
    cpu_optim.adam_step_(ref[0], g, ref[1], ref[2], *args)
    for a, b, r in zip(fused, unfused, ref):
        np.testing.assert_allclose(a.copy_to_host(), r, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b.copy_to_host(), r, rtol=1e-5, atol=1e-6)
    p_gpu, buf_gpu, p_cpu, buf_cpu = up(p0), up(zeros), p0.copy(), zeros.copy()
    for first in (True, False):
        optim.sgd_step_(p_gpu, up(g), buf_gpu, 0.1, 0.9, 0.0, 1e-4, True, first, **PRODUCTION)
        cpu_optim.sgd_step_(p_cpu, g, buf_cpu, 0.1, 0.9, 0.0, 1e-4, True, first)
    np.testing.assert_allclose(p_gpu.copy_to_host(), p_cpu, rtol=1e-5, atol=1e-6)


def test_mismatched_buffers_are_rejected():
    a, b = up(np.zeros(4, np.float32)), up(np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="optimizer buffers must match"):
        optim.sgd_step_(a, b, None, 0.1, 0.0, 0.0, 0.0, False, True)
    c = up(np.zeros(4, np.float64))
    with pytest.raises(ValueError, match="optimizer buffers must match"):
        optim.adam_step_(a, a, a, c, 1, 1e-3, 0.9, 0.999, 1e-8, 0.0)


CONFIGS = [
    ("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)), ("SGD", dict(lr=0.1, momentum=0.9)),
    ("Adam", dict()), ("Adam", dict(weight_decay=0.01)), ("Adam", dict(maximize=True)),
    ("AdamW", dict()), ("AdamW", dict(amsgrad=True)),
    ("RMSprop", dict()), ("RMSprop", dict(centered=True, momentum=0.5, weight_decay=0.1)),
    ("Adagrad", dict(lr_decay=0.1, weight_decay=0.01)),
]


def test_specialized_launches_see_one_argument_type_per_key(monkeypatch):
    """The optimizer kernels (and the elementwise maps) launch through
    ``blocks.specialized``: on a GPU, a dispatcher compiled for one tuple of argument types,
    which reinterprets (never checks) what it is given. So its key (for the optimizers, the
    buffers' dtype) must decide every argument's numba type: every launch of every optimizer,
    option and dtype is typed here, as numba-cuda would."""
    import numba

    import minigpu as mg
    from minigpu.backends.cuda import blocks

    seen, original = {}, blocks.specialized

    def typed(kernel, key, args):
        seen.setdefault((kernel.py_func.__name__, key), set()).add(
            tuple(numba.typeof(a) for a in args))
        return original(kernel, key, args)

    monkeypatch.setattr(blocks, "specialized", typed)
    for dtype in (mg.float32, mg.float64):
        for name, options in CONFIGS:
            mg.manual_seed(0)
            model = mg.nn.Sequential(mg.nn.Linear(3, 4), mg.nn.Tanh(), mg.nn.Linear(4, 1))
            model = model.to(device="cuda", dtype=dtype)
            opt = getattr(mg.optim, name)(model.parameters(), **options)
            for _ in range(2):
                opt.zero_grad()
                model(mg.ones(2, 3, device="cuda", dtype=dtype)).sum().backward()
                opt.step()
    optimizers = {"sgd_kernel", "sgd_momentum_kernel", "adam_kernel", "adamw_kernel",
                  "rmsprop_kernel", "adagrad_kernel"}
    assert optimizers <= {kernel for kernel, _ in seen}  # (the maps of forward and backward too)
    for (kernel, key), types in seen.items():
        assert len(types) == 1, (kernel, key, types)
        if kernel in optimizers:
            assert key in (np.dtype(np.float32), np.dtype(np.float64))
            (arrays,) = {t for t in next(iter(types)) if isinstance(t, numba.types.Array)}
            assert arrays == numba.types.Array(numba.from_dtype(key), 1, "C"), (kernel, arrays)


def test_a_specialization_is_made_once_per_kernel_and_key():
    from minigpu.backends.cuda import blocks

    class Kernel:
        made = 0

        def specialize(self, *args):
            Kernel.made += 1
            return ("specialized", args)

    k = Kernel()
    first = blocks.specialized(k, "float32", (1, 2))
    assert blocks.specialized(k, "float32", (3, 4)) is first and Kernel.made == 1
    assert blocks.specialized(k, "float64", (1.0,)) == ("specialized", (1.0,))
    assert Kernel.made == 2
