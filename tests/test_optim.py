"""Optimizers: trajectories over several steps against a NumPy transcription of PyTorch's update
rules (``torch.optim.sgd._single_tensor_sgd`` / ``adam._single_tensor_adam``) on cpu (float64
and float32) and cuda (float32), PyTorch's state_dict layout, and two small models trained with
identical code on cpu and on cuda.

Tolerances: float64 rtol 1e-12; float32 rtol 1e-5 (atol 1e-6) per parameter after 5 steps;
model losses cpu vs cuda rtol 1e-4.
"""
import math

import numpy as np
import pytest

import minigpu as mg
from minigpu import nn, optim
SIMULATOR = mg.cuda.is_simulator()


# --- NumPy transcriptions of PyTorch's rules ----------------------------------------------------
class NumpySGD:
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, maximize=False):
        self.params, self.bufs = params, [None] * len(params)
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov, self.maximize = weight_decay, nesterov, maximize

    def step(self, grads):
        for i, (p, g) in enumerate(zip(self.params, grads)):
            g = -g if self.maximize else g
            if self.weight_decay:
                g = g + self.weight_decay * p
            if self.momentum:
                if self.bufs[i] is None:
                    self.bufs[i] = g.copy()
                else:
                    self.bufs[i] = self.momentum * self.bufs[i] + (1 - self.dampening) * g
                g = g + self.momentum * self.bufs[i] if self.nesterov else self.bufs[i]
            p -= self.lr * g


class NumpyAdam:
    """``_single_tensor_adam`` of PyTorch 2.x, with both weight decays (L2, or decoupled as
    AdamW) and amsgrad; ``NumpyAdamW`` is it with AdamW's defaults. The one NumPy Adam of the
    tests (``test_optim_adaptive`` and ``test_cuda_optim`` import it)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, maximize=False, decoupled_weight_decay=False):
        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.wd, self.amsgrad, self.maximize, self.t = weight_decay, amsgrad, maximize, 0
        self.decoupled = decoupled_weight_decay
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.vmax = [np.zeros_like(p) for p in params]

    def step(self, grads):
        self.t += 1
        b1, b2 = self.betas
        for i, (p, g) in enumerate(zip(self.params, grads)):
            g = -g if self.maximize else g
            if self.decoupled:
                p *= 1 - self.lr * self.wd                    # param.mul_(1 - lr * wd)
            elif self.wd:
                g = g + self.wd * p                           # grad.add(param, alpha=wd)
            self.m[i] += (1 - b1) * (g - self.m[i])           # exp_avg.lerp_(grad, 1 - beta1)
            self.v[i] = b2 * self.v[i] + (1 - b2) * g * g     # mul_(b2).addcmul_(g, g, 1-b2)
            v = self.v[i]
            if self.amsgrad:
                self.vmax[i] = np.maximum(self.vmax[i], self.v[i])
                v = self.vmax[i]
            step_size = self.lr / (1 - b1 ** self.t)
            denom = np.sqrt(v) / math.sqrt(1 - b2 ** self.t) + self.eps
            p -= step_size * self.m[i] / denom                # addcdiv_(m, denom, -step_size)


class NumpyAdamW(NumpyAdam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize,
                         decoupled_weight_decay=True)


CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.02, betas=(0.5, 0.9), eps=1e-3, weight_decay=0.1)),
    ("Adam", dict(lr=0.02, maximize=True)),
    ("Adam", dict(lr=0.02, weight_decay=0.1, decoupled_weight_decay=True, amsgrad=True)),
]
REFERENCE = {"SGD": NumpySGD, "Adam": NumpyAdam}


@pytest.mark.parametrize("device,dtype", [("cpu", np.float64), ("cpu", np.float32),
                                          ("cuda", np.float32)])
@pytest.mark.parametrize("name,kwargs", CONFIGS,
                         ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}"
                              for n, kw in CONFIGS])
def test_trajectory_matches_pytorch_rule(name, kwargs, device, dtype):
    run_trajectory(getattr(optim, name), REFERENCE[name], kwargs, device, dtype)


def run_trajectory(optimizer, reference, kwargs, device, dtype):
    """Five steps of loss = sum(scale * (p - target)**2) over two parameters, by
    ``optimizer`` on ``device`` and by the float64 NumPy ``reference``."""
    rng = np.random.default_rng(0)
    shapes = [(3, 4), (4,)]
    starts = [rng.standard_normal(s).astype(dtype) for s in shapes]
    targets = [rng.standard_normal(s).astype(dtype) for s in shapes]
    scales = [rng.uniform(0.5, 2, s).astype(dtype) for s in shapes]
    params = [nn.Parameter(mg.tensor(a, device=device)) for a in starts]
    opt = optimizer(params, **kwargs)
    ref_params = [a.astype(np.float64) for a in starts]
    ref = reference(ref_params, **kwargs)
    tt = [mg.tensor(t, device=device) for t in targets]
    ss = [mg.tensor(s, device=device) for s in scales]
    for _ in range(5):
        opt.zero_grad()
        loss = sum(((p - t) ** 2 * s).sum() for p, t, s in zip(params, tt, ss))
        loss.backward()
        opt.step()
        ref.step([2 * s * (p - t) for p, t, s in zip(ref_params, targets, scales)])
    rtol, atol = (1e-12, 1e-14) if dtype == np.float64 else (1e-5, 1e-6)
    for p, r in zip(params, ref_params):
        assert p.device == device and p.dtype == np.dtype(dtype)
        np.testing.assert_allclose(p.detach().numpy(), r, rtol=rtol, atol=atol)


def test_param_groups_and_skipped_parameters():
    a = nn.Parameter(mg.ones(2))
    b = nn.Parameter(mg.ones(2))
    c = nn.Parameter(mg.ones(2))
    opt = optim.SGD([{"params": [a]}, {"params": [b, c], "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["momentum"] == 0.9
    (a.sum() + b.sum()).backward()  # c gets no gradient: skipped, no state
    opt.step()
    np.testing.assert_allclose(a.detach().numpy(), [0.9, 0.9])
    np.testing.assert_allclose(b.detach().numpy(), [0.5, 0.5])
    np.testing.assert_allclose(c.detach().numpy(), [1, 1])
    assert c not in opt.state and "momentum_buffer" in opt.state[a]


def test_zero_grad_and_closure():
    p = nn.Parameter(mg.ones(3))
    opt = optim.SGD([p], lr=0.1)
    (p * 2).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and not p.grad.numpy().any()
    opt.zero_grad()
    assert p.grad is None

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 3.0
    np.testing.assert_allclose(p.detach().numpy(), [0.8] * 3, rtol=1e-6)


def test_constructor_validation_like_pytorch():
    p = [nn.Parameter(mg.ones(1))]
    for call, message in [
        (lambda: optim.SGD(p, lr=-1), "Invalid learning rate: -1"),
        (lambda: optim.SGD(p, momentum=-0.5), "Invalid momentum value"),
        (lambda: optim.SGD(p, nesterov=True), "Nesterov momentum requires a momentum and zero "
                                              "dampening"),
        (lambda: optim.Adam(p, betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
        (lambda: optim.Adam(p, eps=-1), "Invalid epsilon value"),
        (lambda: optim.Adam(p, weight_decay=-1), "Invalid weight_decay value"),
        (lambda: optim.SGD([], lr=0.1), "optimizer got an empty parameter list"),
        (lambda: optim.SGD([{"params": p}, {"params": p}]), "more than one parameter group"),
    ]:
        with pytest.raises(ValueError, match=message):
            call()
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(p[0])
    with pytest.raises(NotImplementedError, match="amsgrad"):
        optim.Adam(p, amsgrad=True)
    assert isinstance(optim.AdamW(p), optim.Adam)
    assert optim.AdamW(p).defaults == optim.Adam(p, weight_decay=1e-2,
                                                 decoupled_weight_decay=True).defaults
    assert optim.SGD(p).defaults["lr"] == 1e-3 and optim.Adam(p).defaults["betas"] == (0.9,
                                                                                        0.999)


def small_mlp():
    mg.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 2), nn.Tanh(), nn.Linear(2, 1))


def train_mlp(model, opt, steps, device="cpu"):
    x = mg.tensor(np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32),
                  device=device)
    for _ in range(steps):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()


def check_round_trip(name, kwargs):
    """Train ``small_mlp`` 3 steps with ``optim.<name>(**kwargs)``, snapshot the model's and the
    optimizer's state_dict, train 2 more. A fresh model and optimizer (built with another lr)
    that load the snapshots continue exactly like the original, on cpu and on cuda, with the
    buffers on the parameters' device. Returns the optimizer's state_dict after 3 steps."""
    model = small_mlp()
    opt = getattr(optim, name)(model.parameters(), **kwargs)
    train_mlp(model, opt, 3)
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"} and sorted(sd["state"]) == [0, 1, 2, 3]
    assert sd["param_groups"][0]["params"] == [0, 1, 2, 3]
    # state_dict() holds references (as in PyTorch): snapshot before training on.
    model_sd = {k: v.numpy().copy() for k, v in model.state_dict().items()}  # numpy() shares
    opt_sd = {"state": {i: {k: mg.tensor(v.numpy(), dtype=v.dtype) for k, v in s.items()}
                        for i, s in sd["state"].items()},
              "param_groups": sd["param_groups"]}
    train_mlp(model, opt, 2)
    expected = [p.detach().numpy() for p in model.parameters()]
    for device in ("cpu", "cuda"):
        twin = small_mlp()
        twin.load_state_dict(model_sd)
        twin.to(device)
        opt2 = getattr(optim, name)(twin.parameters(), lr=1.0)
        opt2.load_state_dict(opt_sd)
        assert opt2.param_groups[0]["lr"] == kwargs["lr"]
        state = opt2.state[next(twin.parameters())]
        assert all(v.device == device for k, v in state.items() if k != "step")
        train_mlp(twin, opt2, 2, device)
        for p, e in zip(twin.parameters(), expected):
            np.testing.assert_allclose(p.detach().numpy(), e, rtol=1e-5, atol=1e-6)
    return sd


def test_state_dict_has_pytorch_layout_and_round_trips():
    sd = check_round_trip("Adam", dict(lr=0.05, weight_decay=0.01))
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    assert sd["state"][0]["step"].item() == 3.0 and sd["state"][0]["step"].device == "cpu"
    assert tuple(sd["state"][0]["exp_avg"].shape) == (2, 3)
    group = sd["param_groups"][0]
    assert group["lr"] == 0.05 and group["betas"] == (0.9, 0.999)
    model = small_mlp()
    sgd = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train_mlp(model, sgd, 1)
    assert set(sgd.state_dict()["state"][0]) == {"momentum_buffer"}
    assert optim.SGD(model.parameters(), lr=0.1).state_dict()["state"] == {}
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.SGD([{"params": [p]} for p in model.parameters()]).load_state_dict(sd)


def test_step_updates_parameters_in_place():
    m = nn.Linear(2, 2)
    weight, buf = m.weight, m.weight._buf
    opt = optim.SGD(m.parameters(), lr=0.1)
    m(mg.ones(1, 2)).sum().backward()
    opt.step()
    assert m.weight is weight and m.weight._buf is buf  # one fused in-place update


# --- models trained with identical code on cpu and cuda -------------------------------------------
def gan(latent, hidden, image):
    """The source material's GAN (there 100 -> 256 -> 784)."""
    generator = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, image),
                              nn.Tanh())
    discriminator = nn.Sequential(nn.Linear(image, hidden), nn.LeakyReLU(0.2),
                                  nn.Linear(hidden, 1), nn.Sigmoid())
    return generator, discriminator


def train_gan(generator, discriminator, device, real, noise):
    criterion = nn.BCELoss()
    opt_g = optim.Adam(generator.parameters(), lr=2e-4)
    opt_d = optim.Adam(discriminator.parameters(), lr=2e-4)
    batch = real.shape[1]
    ones, zeros = mg.ones(batch, 1, device=device), mg.zeros(batch, 1, device=device)
    losses = []
    for real_batch, z in zip(real, noise):
        real_batch, z = mg.tensor(real_batch, device=device), mg.tensor(z, device=device)
        opt_d.zero_grad()
        fake = generator(z)
        d_loss = (criterion(discriminator(real_batch), ones) +
                  criterion(discriminator(fake.detach()), zeros))
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_loss = criterion(discriminator(fake), ones)
        g_loss.backward()
        opt_g.step()
        losses.append((d_loss.item(), g_loss.item()))
    return np.array(losses)


def gan_losses_on(devices, latent, hidden, image, steps=3, batch=4):
    rng = np.random.default_rng(0)
    real = rng.uniform(-1, 1, (steps, batch, image)).astype(np.float32)
    noise = rng.standard_normal((steps, batch, latent)).astype(np.float32)
    mg.manual_seed(0)
    g_cpu, d_cpu = gan(latent, hidden, image)
    out = []
    for device in devices:
        g, d = gan(latent, hidden, image)
        g.load_state_dict(g_cpu.state_dict())  # identical initial weights
        d.load_state_dict(d_cpu.state_dict())
        g.to(device)
        d.to(device)
        out.append(train_gan(g, d, device, real, noise))
    return out


def test_gan_of_the_source_material_trains_on_cpu():
    (losses,) = gan_losses_on(["cpu"], 100, 256, 784)
    assert np.isfinite(losses).all()
    assert losses[-1, 0] < losses[0, 0]  # the discriminator learns


def test_gan_same_losses_on_cpu_and_cuda():
    """Identical code on both devices. Under the simulator (every CUDA thread interpreted) the
    widths are scaled down; on a GPU the source sizes (100, 256, 784) run."""
    sizes = (8, 16, 24) if SIMULATOR else (100, 256, 784)
    cpu, cuda = gan_losses_on(["cpu", "cuda"], *sizes)
    np.testing.assert_allclose(cuda, cpu, rtol=1e-4)


def small_cnn():
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3 * 3 * 3, 3))


def test_small_cnn_same_losses_on_cpu_and_cuda():
    rng = np.random.default_rng(1)
    x = np.repeat(rng.standard_normal((1, 4, 1, 6, 6)).astype(np.float32), 3, 0)  # one batch,
    y = np.repeat(rng.integers(0, 3, (1, 4)), 3, 0)                                # 3 steps
    mg.manual_seed(0)
    reference = small_cnn()
    losses = {}
    for device in ("cpu", "cuda"):
        model = small_cnn()
        model.load_state_dict(reference.state_dict())
        model.to(device)
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        criterion = nn.CrossEntropyLoss()
        losses[device] = []
        for xb, yb in zip(x, y):
            opt.zero_grad()
            loss = criterion(model(mg.tensor(xb, device=device)), mg.tensor(yb, device=device))
            loss.backward()
            opt.step()
            losses[device].append(loss.item())
        losses[device + "_running_var"] = model[1].running_var.numpy()
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=1e-4)
    np.testing.assert_allclose(losses["cuda_running_var"], losses["cpu_running_var"],
                               rtol=1e-4)
    assert losses["cpu"][-1] < losses["cpu"][0]


@pytest.mark.gpu
def test_gan_source_sizes_on_gpu_match_cpu():
    cpu, cuda = gan_losses_on(["cpu", "cuda"], 100, 256, 784, steps=5, batch=64)
    np.testing.assert_allclose(cuda, cpu, rtol=1e-4)
