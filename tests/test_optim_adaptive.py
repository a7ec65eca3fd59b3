"""AdamW, RMSprop and Adagrad: the fused kernels against their NumPy reference (``cpu_optim``),
and the optimizers on cpu and cuda against a literal NumPy transcription of PyTorch's
``_single_tensor_adamw`` / ``_single_tensor_rmsprop`` / ``_single_tensor_adagrad`` over several
steps, with every option PyTorch has (weight decay, amsgrad, momentum, centered, lr_decay,
initial accumulator, maximize).

Tolerances: cuda kernel vs ``cpu_optim`` (same dtype, same order of operations): float32
rtol 1e-5, atol 1e-6; float64 rtol 1e-12, atol 1e-14. Optimizer trajectories against the
float64 transcription: float64 rtol 1e-12; float32 rtol 1e-5, atol 1e-6.
"""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigpu as mg
from minigpu import nn, optim
from minigpu.backends.cpu import optim as cpu_optim
from minigpu.backends.cuda import device, memory
from minigpu.backends.cuda import optim as cuda_optim
from test_optim import NumpyAdamW, check_round_trip, run_trajectory, small_mlp

SMALL = dict(block=32, max_blocks=2)
PRODUCTION = dict(block=device.BLOCK, max_blocks=device.MAX_BLOCKS)


# --- PyTorch's rules, transcribed line by line (torch/optim/rmsprop.py, adagrad.py; AdamW is
# test_optim.NumpyAdamW) ---
class NumpyRMSprop:
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, maximize=False):
        self.params, self.lr, self.alpha, self.eps = params, lr, alpha, eps
        self.wd, self.momentum, self.centered, self.maximize = (weight_decay, momentum,
                                                                centered, maximize)
        self.sq = [np.zeros_like(p) for p in params]
        self.ga = [np.zeros_like(p) for p in params]
        self.buf = [np.zeros_like(p) for p in params]

    def step(self, grads):
        a = self.alpha
        for i, (p, g) in enumerate(zip(self.params, grads)):
            g = -g if self.maximize else g
            if self.wd:
                g = g + self.wd * p                           # grad.add(param, alpha=wd)
            self.sq[i] = a * self.sq[i] + (1 - a) * g * g     # mul_(alpha).addcmul_(g, g, 1-a)
            if self.centered:
                self.ga[i] += (1 - a) * (g - self.ga[i])      # grad_avg.lerp_(grad, 1 - alpha)
                avg = np.sqrt(self.sq[i] - self.ga[i] * self.ga[i])
            else:
                avg = np.sqrt(self.sq[i])
            avg = avg + self.eps
            if self.momentum > 0:
                self.buf[i] = self.momentum * self.buf[i] + g / avg  # mul_(m).addcdiv_(g, avg)
                p -= self.lr * self.buf[i]
            else:
                p -= self.lr * g / avg                        # addcdiv_(grad, avg, value=-lr)


class NumpyAdagrad:
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, maximize=False):
        self.params, self.lr, self.lr_decay, self.wd, self.eps = (params, lr, lr_decay,
                                                                  weight_decay, eps)
        self.maximize, self.t = maximize, 0
        self.sum = [np.full_like(p, initial_accumulator_value) for p in params]

    def step(self, grads):
        self.t += 1
        for i, (p, g) in enumerate(zip(self.params, grads)):
            g = -g if self.maximize else g
            if self.wd:
                g = g + self.wd * p
            clr = self.lr / (1 + (self.t - 1) * self.lr_decay)
            self.sum[i] += g * g                              # state_sum.addcmul_(g, g, 1)
            p -= clr * g / (np.sqrt(self.sum[i]) + self.eps)  # addcdiv_(g, std, value=-clr)


CONFIGS = [
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.02, betas=(0.5, 0.9), eps=1e-3, weight_decay=0.1)),
    ("AdamW", dict(lr=0.05, amsgrad=True, maximize=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, alpha=0.9, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
    ("RMSprop", dict(lr=0.005, momentum=0.5, eps=1e-3, maximize=True)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, weight_decay=0.05)),
    ("Adagrad", dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-3, maximize=True)),
]
REFERENCE = {"AdamW": NumpyAdamW, "RMSprop": NumpyRMSprop, "Adagrad": NumpyAdagrad}


@pytest.mark.parametrize("device,dtype", [("cpu", np.float64), ("cpu", np.float32),
                                          ("cuda", np.float32)])
@pytest.mark.parametrize("name,kwargs", CONFIGS,
                         ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}"
                              for n, kw in CONFIGS])
def test_trajectory_matches_pytorch_rule(name, kwargs, device, dtype):
    """Five steps on two parameters (``test_optim.run_trajectory``): float64 rtol 1e-12,
    float32 rtol 1e-5, atol 1e-6."""
    run_trajectory(getattr(optim, name), REFERENCE[name], kwargs, device, dtype)


# --- the kernels against the NumPy reference -------------------------------------------------
def tol_same(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)


def up(a):
    return memory.from_numpy(a)


def run_both(kind, hp, n, dtype, steps, seed, launch):
    """``steps`` updates of one n-element parameter by the cuda kernel and the cpu reference;
    every buffer compared after every step."""
    rng = np.random.default_rng(seed)
    p0 = rng.standard_normal(n).astype(dtype)
    if kind == "adamw":
        extra = [np.zeros(n, dtype), np.zeros(n, dtype),
                 np.zeros(n, dtype) if hp["amsgrad"] else None]
    elif kind == "rmsprop":
        extra = [np.zeros(n, dtype), np.zeros(n, dtype) if hp["centered"] else None,
                 np.zeros(n, dtype) if hp["momentum"] else None]
    else:
        extra = [np.full(n, hp["initial"], dtype)]
    cpu = [p0.copy()] + [None if b is None else b.copy() for b in extra]
    gpu = [up(p0)] + [None if b is None else up(b) for b in extra]
    for step in range(1, steps + 1):
        g = rng.standard_normal(n).astype(dtype)
        g_gpu = up(g)
        if kind == "adamw":
            args = (step, hp["lr"], hp["beta1"], hp["beta2"], hp["eps"], hp["weight_decay"])
            cpu_optim.adamw_step_(cpu[0], g, *cpu[1:], *args)
            cuda_optim.adamw_step_(gpu[0], g_gpu, *gpu[1:], *args, **launch)
        elif kind == "rmsprop":
            args = (hp["lr"], hp["alpha"], hp["eps"], hp["weight_decay"], hp["momentum"])
            cpu_optim.rmsprop_step_(cpu[0], g, *cpu[1:], *args)
            cuda_optim.rmsprop_step_(gpu[0], g_gpu, *gpu[1:], *args, **launch)
        else:
            args = (step, hp["lr"], hp["lr_decay"], hp["weight_decay"], hp["eps"])
            cpu_optim.adagrad_step_(cpu[0], g, cpu[1], *args)
            cuda_optim.adagrad_step_(gpu[0], g_gpu, gpu[1], *args, **launch)
        for got, ref in zip(gpu, cpu):
            if ref is not None:
                out = got.copy_to_host()
                assert out.dtype == dtype
                np.testing.assert_allclose(out, ref, **tol_same(dtype))
        assert np.array_equal(g_gpu.copy_to_host(), g)  # the gradient is never written


@st.composite
def settings(draw, kind):
    pick = lambda *xs: draw(st.sampled_from(xs))  # noqa: E731
    wd = pick(0.0, 1e-2)
    if kind == "adamw":
        return dict(lr=pick(1e-3, 0.1), beta1=pick(0.9, 0.5), beta2=pick(0.999, 0.9),
                    eps=pick(1e-8, 1e-3), weight_decay=wd, amsgrad=draw(st.booleans()))
    if kind == "rmsprop":
        return dict(lr=pick(1e-2, 0.1), alpha=pick(0.99, 0.8), eps=pick(1e-8, 1e-3),
                    weight_decay=wd, momentum=pick(0.0, 0.9), centered=draw(st.booleans()))
    return dict(lr=pick(1e-2, 0.1), lr_decay=pick(0.0, 0.1), weight_decay=wd,
                eps=pick(1e-10, 1e-3), initial=pick(0.0, 0.1))


@pytest.mark.parametrize("kind", ["adamw", "rmsprop", "adagrad"])
@given(data=st.data(), n=st.integers(1, 40), dtype=st.sampled_from([np.float32, np.float64]),
       steps=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_kernel_matches_reference(kind, data, n, dtype, steps, seed):
    run_both(kind, data.draw(settings(kind)), n, dtype, steps, seed, SMALL)


@pytest.mark.parametrize("kind,hp", [
    ("adamw", dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2,
                   amsgrad=True)),
    ("rmsprop", dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=1e-4, momentum=0.9,
                     centered=True)),
    ("adagrad", dict(lr=1e-2, lr_decay=1e-3, weight_decay=1e-4, eps=1e-10, initial=0.1)),
])
def test_production_launch(kind, hp):
    """The GPU launch configuration (device.BLOCK = 256 threads) over several blocks."""
    run_both(kind, hp, 600, np.float32, 2, 3, PRODUCTION)


def test_mismatched_buffers_are_rejected():
    a, b = up(np.zeros(4, np.float32)), up(np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="optimizer buffers must match"):
        cuda_optim.adagrad_step_(a, b, a, 1, 0.1, 0.0, 0.0, 1e-10)
    with pytest.raises(ValueError, match="optimizer buffers must match"):
        cuda_optim.rmsprop_step_(a, a, a, None, b, 0.1, 0.99, 1e-8, 0.0, 0.9)
    with pytest.raises(ValueError, match="optimizer buffers must match"):
        cuda_optim.adamw_step_(a, a, a, a, b, 1, 0.1, 0.9, 0.999, 1e-8, 0.0)


# --- PyTorch's defaults, validation and state_dict layout ---------------------------------------
def test_defaults_and_validation_like_pytorch():
    p = [nn.Parameter(mg.ones(1))]
    d = optim.AdamW(p).defaults
    assert (d["lr"], d["betas"], d["eps"], d["weight_decay"], d["amsgrad"]) == (
        1e-3, (0.9, 0.999), 1e-8, 1e-2, False)
    d = optim.RMSprop(p).defaults
    assert (d["lr"], d["alpha"], d["eps"], d["weight_decay"], d["momentum"], d["centered"]) == (
        1e-2, 0.99, 1e-8, 0, 0, False)
    d = optim.Adagrad(p).defaults
    assert (d["lr"], d["lr_decay"], d["weight_decay"], d["initial_accumulator_value"],
            d["eps"]) == (1e-2, 0, 0, 0, 1e-10)
    for call, message in [
        (lambda: optim.AdamW(p, lr=-1), "Invalid learning rate: -1"),
        (lambda: optim.AdamW(p, betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
        (lambda: optim.AdamW(p, weight_decay=-1), "Invalid weight_decay value: -1"),
        (lambda: optim.RMSprop(p, alpha=-0.1), "Invalid alpha value: -0.1"),
        (lambda: optim.RMSprop(p, momentum=-1), "Invalid momentum value: -1"),
        (lambda: optim.RMSprop(p, eps=-1), "Invalid epsilon value: -1"),
        (lambda: optim.Adagrad(p, lr_decay=-1), "Invalid lr_decay value: -1"),
        (lambda: optim.Adagrad(p, initial_accumulator_value=-1),
         "Invalid initial_accumulator_value value: -1"),
    ]:
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize("name,kwargs,keys", [
    ("AdamW", dict(lr=0.05), ["step", "exp_avg", "exp_avg_sq"]),
    ("AdamW", dict(lr=0.05, amsgrad=True), ["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"]),
    ("RMSprop", dict(lr=0.01), ["step", "square_avg"]),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True),
     ["step", "square_avg", "momentum_buffer", "grad_avg"]),
    ("Adagrad", dict(lr=0.1, initial_accumulator_value=0.2), ["step", "sum"]),
])
def test_state_dict_layout_and_round_trip(name, kwargs, keys):
    """PyTorch's state keys in PyTorch's order; a fresh optimizer that loads the state (on cpu
    or cuda) continues exactly like the original (``test_optim.check_round_trip``)."""
    if name == "Adagrad":  # PyTorch creates Adagrad's state in the constructor
        opt = optim.Adagrad(small_mlp().parameters(), **kwargs)
        assert opt.state_dict()["state"][0]["step"].item() == 0.0
        np.testing.assert_allclose(opt.state_dict()["state"][0]["sum"].numpy(), 0.2)
    sd = check_round_trip(name, kwargs)
    assert list(sd["state"][0]) == keys
    assert sd["state"][0]["step"].item() == 3.0 and sd["state"][0]["step"].device == "cpu"
    assert all(tuple(v.shape) == (2, 3) for k, v in sd["state"][0].items() if k != "step")
