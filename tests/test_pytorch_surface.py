"""The PyTorch surface that classic programs touch before their first op: ``torch.accelerator``,
modules imported at the top (``nn.parallel``, ``onnx``, ``backends.cudnn``, ``serialization``),
tensor conveniences, checkpoints to file objects, and the optimizers they pick."""
import io
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import minigpu as mg
from minigpu import nn


# --- 1. accelerator and the modules a program imports at its top ----------------------------
def test_accelerator_agrees_with_cuda_under_the_simulator():
    assert mg.cuda.is_available()  # conftest forces the simulator
    assert mg.accelerator.is_available() is True
    assert mg.accelerator.current_accelerator() == mg.device("cuda")
    assert mg.accelerator.device_count() == mg.cuda.device_count() == 1
    x = mg.ones(2, device=mg.accelerator.current_accelerator())
    assert x.is_cuda and mg.accelerator.current_device_index() == 0


def _run_without_simulator(script):
    """stdout of ``script`` run as a cpu-only user: no GPU, no simulator (a subprocess)."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_without_gpu_or_simulator_there_is_no_accelerator():
    out = _run_without_simulator("""
        import minigpu as torch
        acc = torch.accelerator.current_accelerator()
        device = acc if torch.accelerator.is_available() else torch.device("cpu")
        print(acc, torch.accelerator.device_count(), torch.cuda.device_count(), device,
              torch.cuda.is_available(), torch.backends.mps.is_available())
    """)
    assert out.split() == ["None", "0", "0", "cpu", "False", "False"]


def test_top_of_program_imports_and_attribute_paths():
    import minigpu as torch
    import minigpu.backends.cudnn
    import minigpu.nn.parallel
    import minigpu.onnx
    import minigpu.serialization  # noqa: F401
    assert torch.nn.parallel.DataParallel is torch.nn.DataParallel
    assert (torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark,
            torch.backends.cudnn.deterministic) == (True, False, False)  # torch's defaults
    torch.backends.cudnn.benchmark = True  # what programs do; changes nothing in minigpu
    torch.backends.cudnn.benchmark = False
    assert torch.backends.cudnn.is_available() is False and torch.backends.cudnn.version() is None
    assert torch.backends.get("cpu").name == "cpu"  # still the package of device backends
    assert torch.onnx.is_in_onnx_export() is False


def test_onnx_export_names_the_feature_when_called():
    with pytest.raises(NotImplementedError, match=r"torch\.onnx\.export.*ONNX"):
        mg.onnx.export(nn.Linear(2, 1), mg.zeros(1, 2), "model.onnx")


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_data_parallel_on_one_device_wraps_the_module_as_torch_does(dev):
    mg.manual_seed(0)
    inner = nn.Linear(3, 2).to(dev)
    model = nn.DataParallel(inner)
    x = mg.randn(4, 3, device=dev)
    np.testing.assert_array_equal(model(x).detach().numpy(), inner(x).detach().numpy())
    assert list(model.state_dict()) == ["module.weight", "module.bias"]
    assert model.module is inner and len(list(model.parameters())) == 2
    out = nn.parallel.data_parallel(inner, x, device_ids=[0])
    np.testing.assert_array_equal(out.detach().numpy(), inner(x).detach().numpy())


def test_multi_device_parallelism_names_the_feature():
    with pytest.raises(NotImplementedError, match=r"DataParallel over device_ids=\[0, 1\].*"
                                                  r"single-device"):
        nn.DataParallel(nn.Linear(2, 2), device_ids=[0, 1])
    with pytest.raises(NotImplementedError, match="DataParallel over device_ids=.*single-device"):
        nn.DataParallel(nn.Linear(2, 2), device_ids=["cuda:1"])
    with pytest.raises(NotImplementedError, match="DistributedDataParallel.*single-device"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2))


def test_safe_globals_registry_follows_torch():
    class Config:
        pass

    ser = mg.serialization
    ser.clear_safe_globals()
    with ser.safe_globals([Config]):
        assert ser.get_safe_globals() == [Config]
    assert ser.get_safe_globals() == []
    ser.add_safe_globals([Config, (Config, "mod.Config")])
    assert ser.get_safe_globals() == [Config, (Config, "mod.Config")]
    ser.clear_safe_globals()
    with pytest.raises(TypeError, match="list of globals"):
        ser.add_safe_globals(Config)
    with pytest.raises(TypeError, match="class or a function"):
        ser.add_safe_globals([3])


# --- 2. tensor conveniences -------------------------------------------------------------------
@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_zero_d_tensors_format_like_their_number(dev):
    loss = mg.tensor(0.123456789, device=dev)
    assert f"{loss:.4f}" == f"{loss.item():.4f}" == "0.1235"
    assert f"{mg.tensor(7, device=dev):>4d}" == "   7"
    assert "{:.2e}".format(mg.tensor(12345.0, dtype=mg.float64, device=dev)) == "1.23e+04"
    assert f"{mg.tensor([1.0], device=dev)}" == str(mg.tensor([1.0], device=dev))
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        f"{mg.tensor([1.0, 2.0], device=dev):.4f}"


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_type_strings_and_conversions(dev):
    x = mg.tensor([1.5, -2.0], device=dev)
    prefix = "minigpu.cuda." if dev == "cuda" else "minigpu."
    assert x.type() == prefix + "FloatTensor"
    assert x.long().type() == prefix + "LongTensor"
    assert x.double().type() == prefix + "DoubleTensor" and x.bool().type() == prefix + "BoolTensor"
    y = x.type(mg.int64)
    assert y.dtype == mg.int64 and y.device == x.device and y.tolist() == [1, -2]
    assert x.type(mg.float32) is x
    z = x.type("torch.cuda.DoubleTensor")
    assert (z.dtype, z.device.type) == (mg.float64, "cuda")
    w = x.type(mg.LongTensor)
    assert (w.dtype, w.device.type, w.tolist()) == (mg.int64, "cpu", [1, -2])
    with pytest.raises(ValueError, match="invalid type: 'torch.HalfTensor'"):
        x.type("torch.HalfTensor")


def test_legacy_constructors_and_isinstance():
    a = mg.LongTensor([3, 1, 2])
    assert (a.dtype, a.tolist()) == (mg.int64, [3, 1, 2])
    b = mg.FloatTensor(2, 3)
    assert (b.dtype, tuple(b.shape)) == (mg.float32, (2, 3))
    assert tuple(mg.DoubleTensor(b.shape).shape) == (2, 3)
    assert mg.BoolTensor([True, False]).dtype == mg.bool
    assert mg.FloatTensor().shape == (0,)
    assert isinstance(b, mg.FloatTensor) and not isinstance(b, mg.LongTensor)
    assert not isinstance(b.cuda(), mg.FloatTensor)  # a cpu type, as in PyTorch
    assert mg.FloatTensor(b) is b
    with pytest.raises(TypeError, match="expected FloatTensor"):
        mg.FloatTensor(a)
    with pytest.raises(RuntimeError, match="legacy constructor expects device type: cpu"):
        mg.FloatTensor([1.0], device="cuda")


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_new_factories_take_dtype_and_device_from_the_tensor(dev):
    x = mg.zeros(2, dtype=mg.float64, device=dev)
    for t, shape in ((x.new_zeros(2, 3), (2, 3)), (x.new_ones((3,)), (3,)),
                     (x.new_empty(1, 2), (1, 2)), (x.new_full((2, 2), 2.5), (2, 2)),
                     (x.new_tensor([[1, 2]]), (1, 2))):
        assert (t.dtype, t.device, tuple(t.shape)) == (mg.float64, x.device, shape)
        assert not t.requires_grad
    assert x.new_zeros(2).tolist() == [0.0, 0.0] and x.new_ones(2).tolist() == [1.0, 1.0]
    assert x.new_full((2,), 2.5).tolist() == [2.5, 2.5] and x.new_tensor([1, 2]).tolist() == [1, 2]
    i = x.new_zeros(2, dtype=mg.int64, device="cpu", requires_grad=False)
    assert (i.dtype, i.device.type) == (mg.int64, "cpu")
    assert x.new_ones(2, requires_grad=True).requires_grad
    assert not x.is_xpu and not x.is_mps and x.is_cuda == (dev == "cuda")


def test_tensor_surface_matches_torch():
    torch = pytest.importorskip("torch")
    t, m = torch.tensor(0.3333333), mg.tensor(0.3333333)
    assert f"{m:.5f}" == f"{t:.5f}" and f"{m:8.2f}" == f"{t:8.2f}"
    for make in (lambda lib: lib.LongTensor([1, 2]), lambda lib: lib.FloatTensor(2, 2)):
        assert make(mg).type().replace("minigpu", "torch") == make(torch).type()
    assert (mg.ones(2).new_zeros(3).type().replace("minigpu", "torch")
            == torch.ones(2).new_zeros(3).type())


# --- 3. checkpoints to file objects, map_location, weights_only -------------------------------
def _checkpoint(dev):
    mg.manual_seed(0)
    model = nn.Linear(3, 2).to(dev)
    return model, {"model": model.state_dict(), "epoch": 3, "step": mg.tensor(7)}


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_save_and_load_through_file_objects(tmp_path, dev):
    model, ckpt = _checkpoint(dev)
    buffer = io.BytesIO()
    mg.save(ckpt, buffer)
    buffer.seek(0)
    back = mg.load(buffer, weights_only=True)
    assert back["epoch"] == 3 and back["step"].device == "cpu"  # each where it was saved
    for key, value in model.state_dict().items():
        assert back["model"][key].device == dev
        np.testing.assert_array_equal(back["model"][key].numpy(), value.detach().numpy())
    with open(tmp_path / "ckpt.pt", "wb") as fh:
        mg.save(ckpt, fh)
    with open(tmp_path / "ckpt.pt", "rb") as fh:
        again = mg.load(fh, map_location="cpu", weights_only=False)
    assert again["model"]["weight"].device == "cpu" and again["epoch"] == 3
    fresh = nn.Linear(3, 2).to(dev)
    fresh.load_state_dict(mg.load(tmp_path / "ckpt.pt")["model"])
    np.testing.assert_array_equal(fresh.weight.detach().numpy(), model.weight.detach().numpy())


def test_map_location_forms_follow_torch():
    _, ckpt = _checkpoint("cuda")
    buffer = io.BytesIO()
    mg.save(ckpt, buffer)
    data = buffer.getvalue()

    def load(map_location):
        return mg.load(io.BytesIO(data), map_location=map_location)["model"]["weight"].device.type

    assert load(None) == "cuda" and load("cpu") == "cpu" and load(mg.device("cpu")) == "cpu"
    assert load({"cuda:0": "cpu"}) == "cpu" and load({"cpu": "cuda"}) == "cuda"
    assert load(lambda storage, loc: storage) == "cpu"  # the CPU-only idiom
    assert load(lambda storage, loc: storage.cuda()) == "cuda"
    assert load(lambda storage, loc: None) == "cuda"  # None: the default placement
    seen = []
    mg.load(io.BytesIO(data), map_location=lambda storage, loc: seen.append(loc))
    assert sorted(seen) == ["cpu", "cuda", "cuda"]  # step, weight, bias


def test_cuda_checkpoint_on_a_cpu_only_machine_says_map_location():
    _, ckpt = _checkpoint("cuda")
    buffer = io.BytesIO()
    mg.save(ckpt, buffer)
    out = _run_without_simulator(f"""
        import io
        import minigpu as torch
        data = {buffer.getvalue()!r}
        try:
            torch.load(io.BytesIO(data))
        except RuntimeError as e:
            print("refused:", e)
        print(torch.load(io.BytesIO(data), map_location="cpu")["model"]["weight"].device)
    """)
    assert "refused: Attempting to deserialize object on a CUDA device" in out
    assert "map_location=minigpu.device('cpu')" in out and out.split()[-1] == "cpu"


def test_what_cannot_be_saved_or_loaded_says_why():
    with pytest.raises(TypeError, match=r"Generator is not a module, tensor.*never use "
                                        r"pickle"):
        mg.save({"rng": mg.Generator()}, io.BytesIO())
    with pytest.raises(ValueError, match="pickle_module is not supported"):
        mg.save({}, io.BytesIO(), pickle_module=object())
    with pytest.raises(TypeError, match="unexpected keyword arguments.*encoding"):
        mg.load(io.BytesIO(b""), encoding="latin1")


def test_a_torch_save_stream_loads_without_running_its_pickle():
    torch = pytest.importorskip("torch")  # (the format both ways: test_serialization_torch.py)
    buffer = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buffer)
    buffer.seek(0)
    np.testing.assert_array_equal(mg.load(buffer)["w"].numpy(), np.ones(2, np.float32))


# --- 4. optimizers: Adadelta --------------------------------------------------------------------
class NumpyAdadelta:
    """torch/optim/adadelta.py ``_single_tensor_adadelta``, line by line, in float64."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False):
        self.params, self.lr, self.rho, self.eps = params, lr, rho, eps
        self.wd, self.maximize = weight_decay, maximize
        self.sq = [np.zeros_like(p) for p in params]
        self.acc = [np.zeros_like(p) for p in params]

    def step(self, grads):
        rho = self.rho
        for i, (p, g) in enumerate(zip(self.params, grads)):
            g = -g if self.maximize else g
            if self.wd:
                g = g + self.wd * p                                  # grad.add(param, alpha=wd)
            self.sq[i] = rho * self.sq[i] + (1 - rho) * g * g        # mul_(rho).addcmul_(g, g)
            std = np.sqrt(self.sq[i] + self.eps)                     # square_avg.add(eps).sqrt_()
            delta = np.sqrt(self.acc[i] + self.eps) / std * g        # .div_(std).mul_(grad)
            self.acc[i] = rho * self.acc[i] + (1 - rho) * delta * delta
            p -= self.lr * delta                                     # param.add_(delta, -lr)


ADADELTA_CASES = [dict(), dict(lr=0.5, rho=0.8, eps=1e-4), dict(weight_decay=0.1),
                  dict(lr=0.3, maximize=True, weight_decay=0.05)]


@pytest.mark.parametrize("kwargs", ADADELTA_CASES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_adadelta_follows_torchs_rule(dev, dtype, kwargs):
    from test_optim import run_trajectory
    run_trajectory(mg.optim.Adadelta, NumpyAdadelta, kwargs, dev, dtype)


def test_adadelta_defaults_checks_and_state():
    from test_optim import check_round_trip
    p = nn.Parameter(mg.ones(2))
    opt = mg.optim.Adadelta([p])
    assert {k: opt.defaults[k] for k in ("lr", "rho", "eps", "weight_decay")} == dict(
        lr=1.0, rho=0.9, eps=1e-6, weight_decay=0)
    assert not opt.state[p]  # created at the first step, as in PyTorch
    for bad, message in ((dict(lr=-1), "Invalid learning rate: -1"),
                         (dict(rho=1.5), "Invalid rho value: 1.5"),
                         (dict(eps=-1e-3), "Invalid epsilon value: -0.001"),
                         (dict(weight_decay=-1), "Invalid weight_decay value: -1")):
        with pytest.raises(ValueError, match=message):
            mg.optim.Adadelta([p], **bad)
    sd = check_round_trip("Adadelta", dict(lr=0.7, rho=0.85, weight_decay=0.01))
    assert set(sd["state"][0]) == {"step", "square_avg", "acc_delta"}
    assert sd["state"][0]["step"].item() == 3


def test_adadelta_matches_torch_step_by_step():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    w0, x, y = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5, 4), (5, 3)))
    mw = nn.Parameter(mg.tensor(w0))
    tw = torch.nn.Parameter(torch.tensor(w0))
    mopt = mg.optim.Adadelta([mw], lr=0.9, weight_decay=0.01)
    topt = torch.optim.Adadelta([tw], lr=0.9, weight_decay=0.01)
    for _ in range(4):
        for opt, w, lib in ((mopt, mw, mg), (topt, tw, torch)):
            opt.zero_grad()
            ((lib.tensor(x) @ w.T - lib.tensor(y)) ** 2).mean().backward()
            opt.step()
        np.testing.assert_allclose(mw.detach().numpy(), tw.detach().numpy(), rtol=1e-6,
                                   atol=1e-7)


# --- 5. composed tensor ops ---------------------------------------------------------------------
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import minigpu.nn.functional as F  # noqa: E402
from minigpu.autograd import gradcheck  # noqa: E402
from strategies import arrays, shapes  # noqa: E402


def _np_logsumexp(a, axis):
    m = a.max(axis=axis, keepdims=True)
    return np.log(np.exp(a - m).sum(axis=axis)) + m.squeeze(axis)


def _np_unit(a, axis, eps):
    return a / np.maximum(np.sqrt((a * a).sum(axis=axis, keepdims=True)), eps)


# name -> (minigpu function of x, NumPy reference); x has at least 2 dims
COMPOSED = {
    "tril": (lambda x: x.tril(), np.tril),
    "triu(1)": (lambda x: mg.triu(x, 1), lambda a: np.triu(a, 1)),
    "tril(-1)": (lambda x: x.tril(diagonal=-1), lambda a: np.tril(a, -1)),
    "flip(0,-1)": (lambda x: x.flip((0, -1)), lambda a: np.flip(a, (0, -1))),
    "flip(1)": (lambda x: mg.flip(x, 1), lambda a: np.flip(a, 1)),
    "logsumexp(-1)": (lambda x: x.logsumexp(-1), lambda a: _np_logsumexp(a, -1)),
    "logsumexp(0,keep)": (lambda x: mg.logsumexp(x, 0, keepdim=True),
                          lambda a: _np_logsumexp(a, 0)[None]),
    "amax": (lambda x: x.amax(), np.max),
    "amax(1)": (lambda x: x.amax(1), lambda a: a.max(1)),
    "amin((0,1),keep)": (lambda x: mg.amin(x, (0, 1), keepdim=True),
                         lambda a: a.min((0, 1), keepdims=True)),
    "dot": (lambda x: mg.dot(x.flatten(1)[0], x.flatten(1)[-1]),
            lambda a: np.dot(a.reshape(len(a), -1)[0], a.reshape(len(a), -1)[-1])),
    "normalize": (lambda x: F.normalize(x), lambda a: _np_unit(a, 1, 1e-12)),
    "normalize(p=1,dim=0)": (lambda x: F.normalize(x, p=1, dim=0),
                             lambda a: a / np.maximum(np.abs(a).sum(0, keepdims=True), 1e-12)),
    "cosine_similarity": (lambda x: F.cosine_similarity(x, x.flip(0) + 1, dim=-1),
                          lambda a: (_np_unit(a, -1, 1e-8)
                                     * _np_unit(np.flip(a, 0) + 1, -1, 1e-8)).sum(-1)),
    "addcmul_": (lambda x: (x * 1).addcmul_(x, x.flip(0), value=0.5),
                 lambda a: a + 0.5 * a * np.flip(a, 0)),
    "addcdiv_": (lambda x: (x * 1).addcdiv_(x, x * x + 1, value=-2),
                 lambda a: a - 2 * a / (a * a + 1)),
    "sqrt_": (lambda x: (x * x + 0.5).sqrt_(), lambda a: np.sqrt(a * a + 0.5)),
}


@pytest.mark.parametrize("name", COMPOSED)
@given(data=st.data())
def test_composed_ops_cuda_matches_cpu_and_numpy(name, data):
    fn, reference = COMPOSED[name]
    a = data.draw(shapes(min_dims=2, max_dims=3, max_side=4).flatmap(arrays))
    w = data.draw(arrays(np.shape(reference(a.astype(np.float64)))))
    out, grads = {}, {}
    for dev in ("cpu", "cuda"):
        x = mg.tensor(a, device=dev, requires_grad=True)
        y = fn(x)
        (y * mg.tensor(w, device=dev)).sum().backward()
        out[dev], grads[dev] = y.detach().numpy(), x.grad.numpy()
        assert y.device == dev and x.grad.device == dev
    np.testing.assert_allclose(out["cpu"], reference(a.astype(np.float64)), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(out["cuda"], out["cpu"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads["cuda"], grads["cpu"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", COMPOSED)
def test_composed_ops_gradcheck(name):
    fn, _ = COMPOSED[name]
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.permutation(12).reshape(3, 4) * 0.37 - 2.0, dtype=mg.float64,
                  requires_grad=True)  # distinct values: no ties for amax/amin
    assert gradcheck(fn, [x])


def test_composed_ops_edge_cases_follow_torch():
    inf = float("inf")
    x = mg.tensor([[-inf, -inf], [1.0, inf], [0.0, 0.0]])
    assert mg.logsumexp(x, 1).tolist() == [-inf, inf, pytest.approx(np.log(2))]
    ties = mg.tensor([[2.0, 2.0, 1.0]], requires_grad=True)
    ties.amax().backward()
    assert ties.grad.tolist() == [[0.5, 0.5, 0.0]]  # shared, unlike max(dim)'s one index
    z = mg.zeros(2, 3, requires_grad=True)
    F.cosine_similarity(z, mg.ones(2, 3)).sum().backward()  # eps keeps the gradient finite
    assert np.isfinite(z.grad.numpy()).all()
    assert F.normalize(mg.zeros(1, 2)).tolist() == [[0.0, 0.0]]
    assert mg.tril(mg.ones(2, 2, dtype=mg.int64)).tolist() == [[1, 0], [1, 1]]
    assert mg.arange(3).flip(0).tolist() == [2, 1, 0]


def test_composed_ops_errors_in_torchs_words():
    with pytest.raises(RuntimeError, match="1D tensors expected, but got 2D and 1D tensors"):
        mg.dot(mg.ones(2, 2), mg.ones(2))
    with pytest.raises(RuntimeError, match="inconsistent tensor size, expected tensor \\[3\\] "
                                           "and src \\[4\\]"):
        mg.dot(mg.ones(3), mg.ones(4))
    with pytest.raises(RuntimeError, match="dot : expected both vectors to have same dtype"):
        mg.dot(mg.ones(3), mg.ones(3, dtype=mg.float64))
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dimensions"):
        mg.ones(3).tril()
    with pytest.raises(RuntimeError, match="dims has duplicates"):
        mg.ones(2, 2).flip((0, -2))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        mg.ones(2, requires_grad=True).sqrt_()


def test_composed_ops_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((1, 4))
    pairs = [(lambda lib, f, x, y: lib.logsumexp(x, dim=(0, 1)), None),
             (lambda lib, f, x, y: f.normalize(x, p=3, dim=0, eps=1e-3), None),
             (lambda lib, f, x, y: f.cosine_similarity(x, y, dim=1, eps=1e-6), None),
             (lambda lib, f, x, y: x.triu(-1).flip(1).amin(0), None),
             (lambda lib, f, x, y: x.clone().addcdiv_(x, y.abs() + 1, value=0.3), None)]
    for fn, _ in pairs:
        results = []
        for lib, f in ((mg, F), (torch, torch.nn.functional)):
            x = lib.tensor(a, requires_grad=True)
            y = lib.tensor(b, requires_grad=True)
            out = fn(lib, f, x, y)
            out.sum().backward()
            results.append([out.detach().numpy(), x.grad.numpy(), y.grad.numpy()
                            if y.grad is not None else None])
        for mine, theirs in zip(*results):
            if theirs is None:
                assert mine is None
            else:
                np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)


# --- torch.nn.modules paths ---------------------------------------------------------------------
def test_nn_modules_paths_import_and_are_the_nn_classes():
    import importlib
    from minigpu.nn.modules import TORCH_FILES
    from minigpu.nn.modules.loss import _Loss  # noqa: F401  (what custom losses subclass)
    for file, names in TORCH_FILES.items():
        sub = importlib.import_module(f"minigpu.nn.modules.{file}")
        assert getattr(mg.nn.modules, file) is sub
        for name in names:
            assert getattr(sub, name) is getattr(mg.nn, name, getattr(mg.nn.loss, name, None))
    assert issubclass(nn.MSELoss, mg.nn.modules.loss._Loss)
    assert mg.nn.modules.Linear is nn.Linear and mg.nn.modules.module.Module is nn.Module


def test_nn_modules_paths_are_torchs():
    torch = pytest.importorskip("torch")
    import importlib
    from minigpu.nn.modules import TORCH_FILES
    for file, names in TORCH_FILES.items():
        theirs = importlib.import_module(f"torch.nn.modules.{file}")
        missing = [n for n in names if not hasattr(theirs, n)]
        assert not missing, f"torch.nn.modules.{file} has no {missing}"


# --- data-dependent ops, namespace functions, grad modes, memory formats ----------------------
@given(data=st.data())
def test_nonzero_and_unique_cuda_matches_cpu_and_numpy(data):
    shape = data.draw(shapes(min_dims=1, max_dims=3, max_side=4))
    a = data.draw(arrays(shape).map(lambda v: np.round(v) * (np.abs(v) > 1)))  # zeros, repeats
    expected_values, expected_inverse, expected_counts = np.unique(a, return_inverse=True,
                                                                   return_counts=True)
    for dev in ("cpu", "cuda"):
        x = mg.tensor(a, device=dev)
        nz = x.nonzero()
        assert nz.dtype == mg.int64 and nz.device == dev
        np.testing.assert_array_equal(nz.numpy(), np.argwhere(a))
        for mine, theirs in zip(mg.nonzero(x, as_tuple=True), np.nonzero(a)):
            np.testing.assert_array_equal(mine.numpy(), theirs)
        values, inverse, counts = x.unique(return_inverse=True, return_counts=True)
        np.testing.assert_array_equal(values.numpy(), expected_values)
        np.testing.assert_array_equal(inverse.numpy(), expected_inverse.reshape(a.shape))
        np.testing.assert_array_equal(counts.numpy(), expected_counts)
        np.testing.assert_array_equal(mg.unique(x).numpy(), expected_values)


def test_nonzero_and_unique_edge_cases_follow_torch():
    assert tuple(mg.tensor(3.0).nonzero().shape) == (1, 0)
    assert tuple(mg.tensor(0.0).nonzero().shape) == (0, 0)
    assert [t.tolist() for t in mg.tensor(2.0).nonzero(as_tuple=True)] == [[0]]
    assert tuple(mg.zeros(0, 3).nonzero().shape) == (0, 2)
    values, counts = mg.tensor([], dtype=mg.int64).unique(return_counts=True)
    assert values.tolist() == [] and counts.tolist() == []
    assert mg.tensor([True, False, True]).unique().tolist() == [False, True]
    with pytest.raises(NotImplementedError, match="unique\\(dim=...\\)"):
        mg.ones(2, 2).unique(dim=0)


def test_namespace_functions_grad_modes_and_is_tensor():
    x, y = mg.tensor([1.0, 4.0]), mg.tensor([2.0, 2.0])
    assert mg.mul(x, y).tolist() == [2.0, 8.0] and mg.add(x, y, alpha=2).tolist() == [5.0, 8.0]
    assert mg.sub(x, y).tolist() == [-1.0, 2.0] and mg.div(x, y).tolist() == [0.5, 2.0]
    assert mg.pow(x, 2).tolist() == [1.0, 16.0] and mg.neg(x).tolist() == [-1.0, -4.0]
    assert mg.square(y).tolist() == [4.0, 4.0] and mg.rsqrt(x).tolist() == [1.0, 0.5]
    assert mg.masked_fill(x, x > 2, 0.0).tolist() == [1.0, 0.0]
    assert mg.is_tensor(x) and mg.is_tensor(nn.Parameter(x)) and not mg.is_tensor([1.0])
    w = mg.ones(2, requires_grad=True)
    with mg.inference_mode():
        assert not (w * 2).requires_grad and not mg.is_grad_enabled()
    with mg.inference_mode(False):
        assert (w * 2).requires_grad

    @mg.inference_mode()
    def predict(v):
        return v * 2
    assert not predict(w).requires_grad and mg.is_grad_enabled()


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_memory_format_and_to_keywords(dev):
    x = mg.arange(6.0, device=dev).reshape(2, 3).T
    y = x.contiguous(memory_format=mg.contiguous_format)
    assert y.is_contiguous() and y.tolist() == x.tolist()
    z = x.clone(memory_format=mg.preserve_format)
    assert z.tolist() == x.tolist() and z._buf is not x._buf
    assert x.to(dev, non_blocking=True) is x
    c = x.to(dev, copy=True)
    assert c is not x and c._buf is not x._buf and c.tolist() == x.tolist()
    model = nn.Linear(2, 2).to(dev, memory_format=mg.contiguous_format, non_blocking=True)
    assert model.weight.device == dev
    with pytest.raises(NotImplementedError, match="memory_format=minigpu.channels_last"):
        x.contiguous(memory_format=mg.channels_last)
    with pytest.raises(NotImplementedError, match="channels-last strides"):
        nn.Conv2d(1, 1, 1).to(memory_format=mg.channels_last)
    assert repr(mg.contiguous_format) == "minigpu.contiguous_format"


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_stack_and_cat_of_empty_tensors(dev):
    empty = mg.zeros(0, dtype=mg.int64, device=dev)
    assert tuple(mg.stack([empty, empty], 1).shape) == (0, 2)
    assert mg.cat([mg.ones(2, device=dev), mg.zeros(0, device=dev)]).tolist() == [1.0, 1.0]
    assert tuple(mg.cat([mg.zeros(2, 0, device=dev), mg.zeros(2, 0, device=dev)], 1).shape) == (
        2, 0)


# --- torch.autograd.grad ------------------------------------------------------------------------
@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_autograd_grad_returns_what_backward_accumulates_and_changes_no_grad(dev):
    mg.manual_seed(0)
    w = mg.randn(3, 2, device=dev, requires_grad=True)
    b = mg.randn(2, device=dev, requires_grad=True)
    other = mg.randn(2, device=dev, requires_grad=True)
    x = mg.randn(4, 3, device=dev)

    def loss_fn():
        h = (x @ w + b).tanh()
        return h, (h * other).sum() + (h ** 2).mean()

    h, loss = loss_fn()
    gw, gh = mg.autograd.grad(loss, [w, h], retain_graph=True)
    assert w.grad is None and b.grad is None and other.grad is None  # nothing accumulated
    (gb,) = mg.autograd.grad(loss, b)
    h2, loss2 = loss_fn()
    h2.retain_grad()
    loss2.backward()
    for mine, expected in ((gw, w.grad), (gb, b.grad), (gh, h2.grad)):
        assert mine.device == dev
        np.testing.assert_allclose(mine.numpy(), expected.numpy(), rtol=1e-6, atol=1e-7)
    # two outputs with their grad_outputs add up
    _, loss3 = loss_fn()
    g2 = mg.autograd.grad([loss3, (b * 3).sum()], [b], grad_outputs=[mg.tensor(2.0, device=dev),
                                                                    None])[0]
    np.testing.assert_allclose(g2.numpy(), 2 * b.grad.numpy() + 3, rtol=1e-6, atol=1e-6)


def test_autograd_grad_errors_and_unused_inputs():
    a = mg.ones(2, requires_grad=True)
    unused = mg.ones(2, requires_grad=True)
    y = (a * 2).sum()
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        mg.autograd.grad(y, [a, unused], retain_graph=True)
    ga, gu = mg.autograd.grad(y, [a, unused], allow_unused=True, retain_graph=True)
    assert ga.tolist() == [2.0, 2.0] and gu is None
    assert mg.autograd.grad(y, [unused], materialize_grads=True,
                            retain_graph=True)[0].tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="does not require grad"):
        mg.autograd.grad(y, [mg.ones(2)], retain_graph=True)
    assert mg.autograd.grad(y, [a], create_graph=True)[0].tolist() == [2.0, 2.0]
    mg.autograd.grad(y, [a])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        mg.autograd.grad(y, [a])


def test_once_differentiable_under_torchs_module_path():
    from minigpu.autograd.function import Function, once_differentiable

    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x ** 2

    x = mg.tensor([1.0, -2.0], dtype=mg.float64, requires_grad=True)
    Cube.apply(x).sum().backward()
    assert x.grad.tolist() == [3.0, 12.0] and Function is mg.autograd.Function
    assert gradcheck(Cube.apply, [x])


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_to_num_follows_torch(dev, dtype):
    """NaN, +inf and -inf replaced (defaults: 0 and the dtype's extremes), the gradient passing
    only where the input is finite; the in-place form; integers come back unchanged."""
    torch = pytest.importorskip("torch")
    x = np.array([np.nan, np.inf, -np.inf, 1.5, -2.0, 0.0], dtype)
    for kwargs in ({}, dict(nan=1.0, posinf=2.0, neginf=-3.0), dict(posinf=7.0)):
        mine = mg.tensor(x, device=dev, requires_grad=True)
        ref = torch.tensor(x, requires_grad=True)
        out, want = mine.nan_to_num(**kwargs), ref.nan_to_num(**kwargs)
        (out * mg.arange(6, device=dev)).sum().backward()
        (want * torch.arange(6)).sum().backward()
        assert out.dtype == getattr(mg, dtype)
        np.testing.assert_array_equal(out.detach().cpu().numpy(), want.detach().numpy())
        np.testing.assert_array_equal(mine.grad.cpu().numpy(), ref.grad.numpy())
        inplace = mg.tensor(x, device=dev)
        assert inplace.nan_to_num_(**kwargs) is inplace
        np.testing.assert_array_equal(inplace.cpu().numpy(), want.detach().numpy())
    ints = mg.tensor([1, -2], device=dev)
    assert mg.nan_to_num(ints).tolist() == [1, -2] and mg.nan_to_num(ints).dtype == mg.int64
