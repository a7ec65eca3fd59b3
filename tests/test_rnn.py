"""Recurrent layers (RNN, LSTM, GRU, their cells) and Embedding against PyTorch's equations.

The reference is a NumPy transcription of the equations in PyTorch's documentation (float64),
and its gradients are central differences of that transcription — independent of minigpu's
hand-written backward passes. Every output (output, h_n, c_n) enters the loss through its own
random projection, so every gradient path is exercised. Tolerances: float32 minigpu against
the float64 reference, rtol=1e-4, atol=1e-5 (values of order 1, a few dozen terms); float64
(cpu) rtol=1e-6, atol=1e-8 (the central differences' own error).

Sizes stay tiny (L <= 3, N <= 2, H <= 3) so the CUDA simulator runs them in seconds.
"""
import contextlib
import functools
import time

import numpy as np
import pytest

import minigpu as mg
from minigpu.backends.cuda.device import SIMULATOR
from minigpu.nn.rnn import GRU, LSTM, RNN, Embedding, GRUCell, LSTMCell, RNNCell

L, N, HIN, H = 3, 2, 2, 3
MODES = {"RNN_TANH": (RNN, dict(nonlinearity="tanh")),
         "RNN_RELU": (RNN, dict(nonlinearity="relu")),
         "LSTM": (LSTM, {}), "GRU": (GRU, {})}


def npy(t):
    return t.detach().numpy()


# --- the NumPy reference: PyTorch's documented equations -----------------------------------------
def sig(x):
    return 1 / (1 + np.exp(-x))


def ref_cell(mode, x, h, c, w_ih, w_hh, b_ih, b_hh):
    """One step of one layer and direction; x (N, F), h/c (N, H)."""
    hs = w_hh.shape[1]
    gi = x @ w_ih.T + b_ih
    gh = h @ w_hh.T + b_hh
    if mode == "LSTM":
        gates = gi + gh
        i, f = sig(gates[:, :hs]), sig(gates[:, hs:2 * hs])
        g, o = np.tanh(gates[:, 2 * hs:3 * hs]), sig(gates[:, 3 * hs:])
        c = f * c + i * g
        return o * np.tanh(c), c
    if mode == "GRU":
        r = sig(gi[:, :hs] + gh[:, :hs])
        z = sig(gi[:, hs:2 * hs] + gh[:, hs:2 * hs])
        n = np.tanh(gi[:, 2 * hs:] + r * gh[:, 2 * hs:])
        return (1 - z) * n + z * h, c
    pre = gi + gh
    return (np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0)), c


def ref_rnn(mode, params, x, h0, c0, num_layers, bidirectional, batch_first):
    """-> (output, h_n, c_n) as PyTorch defines them (c_n zeros for RNN/GRU)."""
    if batch_first:
        x = x.transpose(1, 0, 2)
    steps, batch = x.shape[:2]
    dirs = 2 if bidirectional else 1
    hidden = params["weight_hh_l0"].shape[1]
    zeros = np.zeros((num_layers * dirs, batch, hidden))
    h0 = zeros if h0 is None else h0
    c0 = zeros if c0 is None else c0
    hn, cn, inp = [], [], x
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            sfx = "_reverse" if d else ""
            w = [params.get(f"{k}_l{layer}{sfx}") for k in ("weight_ih", "weight_hh",
                                                              "bias_ih", "bias_hh")]
            if w[2] is None:
                w[2] = w[3] = np.zeros(w[0].shape[0])
            h, c = h0[layer * dirs + d], c0[layer * dirs + d]
            ys = [None] * steps
            for t in (range(steps - 1, -1, -1) if d else range(steps)):
                h, c = ref_cell(mode, inp[t], h, c, *w)
                ys[t] = h
            outs.append(np.stack(ys))
            hn.append(h)
            cn.append(c)
        inp = np.concatenate(outs, axis=-1)
    out = inp.transpose(1, 0, 2) if batch_first else inp
    return out, np.stack(hn), np.stack(cn)


def numeric_grad(f, arrays, key, eps=1e-6):
    base = arrays[key]
    grad = np.zeros(base.size)
    for k in range(base.size):
        for sign in (1, -1):
            shifted = dict(arrays)
            shifted[key] = base.copy()
            shifted[key].reshape(-1)[k] += sign * eps
            grad[k] += sign * f(shifted)
    return (grad / (2 * eps)).reshape(base.shape)


# --- cases ---------------------------------------------------------------------------------------
CASES = [  # (mode, num_layers, bidirectional, batch_first, with_hx)
    ("LSTM", 1, False, False, False), ("LSTM", 1, True, True, True),
    ("LSTM", 2, False, True, True), ("LSTM", 2, True, False, True),
    ("LSTM", 2, True, True, False), ("LSTM", 1, False, True, True),
    ("RNN_TANH", 1, False, True, True), ("RNN_TANH", 2, True, False, False),
    ("RNN_RELU", 2, True, True, True), ("RNN_RELU", 1, False, False, False),
    ("GRU", 1, True, False, True), ("GRU", 2, False, True, False),
    ("GRU", 2, True, True, True),
]
CUDA_CASES = [CASES[i] for i in (0, 1, 2, 3, 4, 7, 8, 10)]
"""Under the simulator: every mode, both layer counts, directions, layouts and hx choices."""


def case_id(case):
    mode, layers, bi, bf, hx = case
    return (f"{mode}-{layers}l-{'bi' if bi else 'uni'}-{'bf' if bf else 'tf'}-"
            f"{'hx' if hx else 'nohx'}")


def make(mode, num_layers, bidirectional, batch_first, device="cpu", dtype=None, bias=True):
    mg.manual_seed(0)
    cls, kw = MODES[mode]
    return cls(input_size=HIN, hidden_size=H, num_layers=num_layers, bias=bias,
               batch_first=batch_first, bidirectional=bidirectional, dtype=dtype,
               **kw).to(device)


@functools.lru_cache(maxsize=None)
def reference(case, bias=True):
    """Inputs, reference outputs and central-difference gradients of a case (float64)."""
    mode, layers, bi, bf, with_hx = case
    rng = np.random.default_rng(abs(hash(case)) % 2**32)
    model = make(mode, layers, bi, bf, bias=bias)
    data = {k: v.numpy().astype(np.float64) for k, v in model.state_dict().items()}
    data["x"] = rng.uniform(-2, 2, (N, L, HIN) if bf else (L, N, HIN))
    states = ("h0", "c0") if mode == "LSTM" else ("h0",)
    if with_hx:
        for s in states:
            data[s] = rng.uniform(-1, 1, (layers * (2 if bi else 1), N, H))
    out, hn, cn = ref_rnn(mode, data, data["x"], data.get("h0"), data.get("c0"), layers, bi, bf)
    proj = {k: rng.standard_normal(v.shape) for k, v in (("out", out), ("hn", hn), ("cn", cn))}

    def loss(arrays):
        o, h, c = ref_rnn(mode, arrays, arrays["x"], arrays.get("h0"), arrays.get("c0"),
                          layers, bi, bf)
        total = (o * proj["out"]).sum() + (h * proj["hn"]).sum()
        return total + ((c * proj["cn"]).sum() if mode == "LSTM" else 0.0)

    grads = {k: numeric_grad(loss, data, k) for k in data}
    return model, data, (out, hn, cn), proj, grads


def run_minigpu(case, device, dtype=np.float32, bias=True):
    """The case on minigpu: returns ({output name: array}, {grad name: array})."""
    mode, layers, bi, bf, with_hx = case
    _, data, _, proj, _ = reference(case, bias)
    model = make(mode, layers, bi, bf, device=device, dtype=dtype, bias=bias)
    model.load_state_dict({k: v for k, v in data.items() if k not in ("x", "h0", "c0")})
    t = lambda a: mg.tensor(a.astype(dtype), device=device, requires_grad=True)  # noqa: E731
    x = t(data["x"])
    hx = None
    if with_hx:
        hx = (t(data["h0"]), t(data["c0"])) if mode == "LSTM" else t(data["h0"])
    out, states = model(x, hx)
    hn, cn = states if mode == "LSTM" else (states, None)
    c = lambda a: mg.tensor(a.astype(dtype), device=device)  # noqa: E731
    loss = (out * c(proj["out"])).sum() + (hn * c(proj["hn"])).sum()
    if cn is not None:
        loss = loss + (cn * c(proj["cn"])).sum()
    loss.backward()
    outs = {"out": out, "hn": hn, "cn": cn}
    outs = {k: npy(v) for k, v in outs.items() if v is not None}
    grads = {name: p.grad.numpy() for name, p in model.named_parameters()}
    grads["x"] = x.grad.numpy()
    if with_hx:
        grads["h0"] = (hx[0] if mode == "LSTM" else hx).grad.numpy()
        if mode == "LSTM":
            grads["c0"] = hx[1].grad.numpy()
    return outs, grads


def assert_matches_reference(case, device, dtype=np.float32, bias=True):
    _, data, (out, hn, cn), _, ref_grads = reference(case, bias)
    outs, grads = run_minigpu(case, device, dtype, bias)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(outs["out"], out, err_msg="output", **tol)
    np.testing.assert_allclose(outs["hn"], hn, err_msg="h_n", **tol)
    if "cn" in outs:
        np.testing.assert_allclose(outs["cn"], cn, err_msg="c_n", **tol)
    assert set(grads) == set(ref_grads)
    for name, ref in ref_grads.items():
        np.testing.assert_allclose(grads[name], ref, err_msg=f"grad of {name}", **tol)


# --- layers against the reference ----------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_layer_matches_reference_cpu(case):
    assert_matches_reference(case, "cpu")


@pytest.mark.parametrize("case", CASES[:4] + CASES[6:8] + CASES[10:11], ids=case_id)
def test_layer_matches_reference_cpu_float64(case):
    assert_matches_reference(case, "cpu", np.float64)


@pytest.mark.parametrize("case", CUDA_CASES, ids=case_id)
def test_layer_matches_reference_cuda(case):
    assert_matches_reference(case, "cuda")


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
def test_layer_without_bias(mode):
    case = (mode, 2, True, False, True)
    assert_matches_reference(case, "cpu", bias=False)
    assert "bias_ih_l0" not in make(mode, 1, False, False, bias=False).state_dict()


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_unbatched_input_equals_batch_of_one(mode, device):
    model = make(mode, 2, True, False, device=device)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (L, HIN)).astype(np.float32)
    h0 = rng.uniform(-1, 1, (4, H)).astype(np.float32)
    hx1 = (mg.tensor(h0, device=device),) * 2 if mode == "LSTM" else mg.tensor(h0, device=device)
    out1, st1 = model(mg.tensor(x, device=device), hx1)
    hx3 = tuple(s.unsqueeze(1) for s in hx1) if mode == "LSTM" else hx1.unsqueeze(1)
    out3, st3 = model(mg.tensor(x[:, None], device=device), hx3)
    assert tuple(out1.shape) == (L, 2 * H)
    np.testing.assert_allclose(npy(out1), npy(out3)[:, 0], rtol=1e-6, atol=1e-7)
    h1, h3 = (st1[0], st3[0]) if mode == "LSTM" else (st1, st3)
    assert tuple(h1.shape) == (4, H)
    np.testing.assert_allclose(npy(h1), npy(h3)[:, 0], rtol=1e-6, atol=1e-7)


def test_gradcheck_lstm_float64():
    model = LSTM(2, 2, bidirectional=True, dtype=np.float64)
    names = [n for n, _ in model.named_parameters()]
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.uniform(-1, 1, (3, 1, 2)), dtype=np.float64, requires_grad=True)
    h0 = mg.tensor(rng.uniform(-1, 1, (2, 1, 2)), dtype=np.float64, requires_grad=True)
    c0 = mg.tensor(rng.uniform(-1, 1, (2, 1, 2)), dtype=np.float64, requires_grad=True)

    def fn(x, h0, c0, *weights):
        model._parameters.update(zip(names, weights))  # gradcheck's float64 copies
        out, (hn, cn) = model(x, (h0, c0))
        return out, hn, cn

    params = [p.detach().requires_grad_() for p in model.parameters()]
    assert mg.autograd.gradcheck(fn, [x, h0, c0, *params])


@pytest.mark.parametrize("which", ["h_n", "c_n"])
def test_gradcheck_lstm_final_state_only(which):
    """Backward with no gradient for the output sequence (a classifier reading h_n or c_n)."""
    model = LSTM(2, 2, num_layers=2, dtype=np.float64)
    names = [n for n, _ in model.named_parameters()]
    rng = np.random.default_rng(2)
    x = mg.tensor(rng.uniform(-1, 1, (2, 1, 2)), dtype=np.float64, requires_grad=True)
    c0 = mg.tensor(rng.uniform(-1, 1, (2, 1, 2)), dtype=np.float64, requires_grad=True)

    def fn(x, c0, *weights):
        model._parameters.update(zip(names, weights))
        _, (hn, cn) = model(x, (mg.zeros(2, 1, 2, dtype=np.float64), c0))
        return hn if which == "h_n" else cn

    params = [p.detach().requires_grad_() for p in model.parameters()]
    assert mg.autograd.gradcheck(fn, [x, c0, *params])


@pytest.mark.parametrize("cls", [GRU, lambda *a, **k: RNN(*a, nonlinearity="relu", **k)])
def test_gradcheck_gru_and_relu_rnn_float64(cls):
    model = cls(2, 2, bidirectional=True, batch_first=True, dtype=np.float64)
    names = [n for n, _ in model.named_parameters()]
    rng = np.random.default_rng(1)
    x = mg.tensor(rng.uniform(-1, 1, (1, 3, 2)), dtype=np.float64, requires_grad=True)
    h0 = mg.tensor(rng.uniform(-1, 1, (2, 1, 2)), dtype=np.float64, requires_grad=True)

    def fn(x, h0, *weights):
        model._parameters.update(zip(names, weights))
        return model(x, h0)

    params = [p.detach().requires_grad_() for p in model.parameters()]
    assert mg.autograd.gradcheck(fn, [x, h0, *params])


# --- cells ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("kind", ["RNN_TANH", "RNN_RELU", "LSTM", "GRU"])
def test_cells_match_reference(kind, device):
    mg.manual_seed(1)
    cell = {"RNN_TANH": lambda: RNNCell(HIN, H),
            "RNN_RELU": lambda: RNNCell(HIN, H, nonlinearity="relu"),
            "LSTM": lambda: LSTMCell(HIN, H), "GRU": lambda: GRUCell(HIN, H)}[kind]().to(device)
    w = {k: v.numpy().astype(np.float64) for k, v in cell.state_dict().items()}
    rng = np.random.default_rng(2)
    xs, hs, cs = (rng.uniform(-2, 2, (N, s)) for s in (HIN, H, H))
    proj_h, proj_c = rng.standard_normal((N, H)), rng.standard_normal((N, H))

    def loss(a):
        h, c = ref_cell(kind, a["x"], a["h"], a["c"], a["weight_ih"], a["weight_hh"],
                        a["bias_ih"], a["bias_hh"])
        return (h * proj_h).sum() + ((c * proj_c).sum() if kind == "LSTM" else 0.0)

    arrays = dict(w, x=xs, h=hs, c=cs)
    ref_h, ref_c = ref_cell(kind, xs, hs, cs, *(w[k] for k in ("weight_ih", "weight_hh",
                                                               "bias_ih", "bias_hh")))
    t = lambda a: mg.tensor(a.astype(np.float32), device=device, requires_grad=True)  # noqa: E731
    x, h, c = t(xs), t(hs), t(cs)
    if kind == "LSTM":
        h1, c1 = cell(x, (h, c))
        total = (h1 * mg.tensor(proj_h, device=device)).sum() + \
            (c1 * mg.tensor(proj_c, device=device)).sum()
        np.testing.assert_allclose(npy(c1), ref_c, rtol=1e-4, atol=1e-5)
    else:
        h1 = cell(x, h)
        total = (h1 * mg.tensor(proj_h, device=device)).sum()
    np.testing.assert_allclose(npy(h1), ref_h, rtol=1e-4, atol=1e-5)
    total.backward()
    got = {"x": x.grad, "h": h.grad, **{n: p.grad for n, p in cell.named_parameters()}}
    if kind == "LSTM":
        got["c"] = c.grad
    for name, g in got.items():
        np.testing.assert_allclose(g.numpy(), numeric_grad(loss, arrays, name), rtol=1e-4,
                                   atol=1e-5, err_msg=name)


@pytest.mark.parametrize("cls", [RNNCell, LSTMCell, GRUCell])
def test_cells_default_zero_state_and_unbatched(cls):
    mg.manual_seed(0)
    cell = cls(HIN, H)
    x = mg.randn(HIN)
    out = cell(x)
    zeros = mg.zeros(H)
    ref = cell(x, (zeros, zeros) if cls is LSTMCell else zeros)
    for a, b in zip(out if cls is LSTMCell else (out,), ref if cls is LSTMCell else (ref,)):
        assert tuple(a.shape) == (H,)
        np.testing.assert_allclose(npy(a), npy(b), rtol=1e-6, atol=1e-7)


# --- seed examples, shapes, state_dict, initialisation -------------------------------------------
def test_seed_examples_give_pytorch_shapes():
    x = mg.randn(2, 3, 32)
    rnn = RNN(input_size=32, hidden_size=64, num_layers=1, batch_first=True)
    out, h_n = rnn(x)
    assert tuple(out.shape) == (2, 3, 64) and tuple(h_n.shape) == (1, 2, 64)
    lstm = LSTM(input_size=32, hidden_size=64, num_layers=1, batch_first=True)
    out, (h_n, c_n) = lstm(x)
    assert tuple(out.shape) == (2, 3, 64)
    assert tuple(h_n.shape) == (1, 2, 64) and tuple(c_n.shape) == (1, 2, 64)
    np.testing.assert_array_equal(npy(out)[:, -1], npy(h_n)[0])
    bi = LSTM(input_size=32, hidden_size=64, num_layers=1, batch_first=True, bidirectional=True)
    out, (h_n, c_n) = bi(x)
    assert tuple(out.shape) == (2, 3, 128)
    assert tuple(h_n.shape) == (2, 2, 64) and tuple(c_n.shape) == (2, 2, 64)
    # forward direction first: its final state is the last step, the reverse one's the first
    np.testing.assert_array_equal(npy(out)[:, -1, :64], npy(h_n)[0])
    np.testing.assert_array_equal(npy(out)[:, 0, 64:], npy(h_n)[1])
    assert out.is_contiguous()


def test_seed_example_on_cuda_matches_cpu():
    mg.manual_seed(5)
    cpu_model = LSTM(input_size=32, hidden_size=64, num_layers=1, batch_first=True)
    mg.manual_seed(5)
    cuda_model = LSTM(input_size=32, hidden_size=64, num_layers=1, batch_first=True,
                      device="cuda")
    for (name, a), (_, b) in zip(cpu_model.state_dict().items(),
                                 cuda_model.state_dict().items()):
        np.testing.assert_array_equal(npy(a), npy(b), err_msg=name)  # same seed, same weights
    x = np.random.default_rng(0).standard_normal((1, 2, 32)).astype(np.float32)
    out_c, (h_c, _) = cpu_model(mg.tensor(x))
    out_g, (h_g, _) = cuda_model(mg.tensor(x, device="cuda"))
    assert tuple(out_g.shape) == (1, 2, 64)
    np.testing.assert_allclose(npy(out_g), npy(out_c), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(npy(h_g), npy(h_c), rtol=1e-4, atol=1e-5)


def test_state_dict_keys_and_shapes_match_pytorch():
    m = LSTM(10, 20, num_layers=2, bidirectional=True)
    expected = []
    for layer in range(2):
        for sfx in ("", "_reverse"):
            expected += [f"{k}_l{layer}{sfx}" for k in ("weight_ih", "weight_hh", "bias_ih",
                                                        "bias_hh")]
    sd = m.state_dict()
    assert list(sd) == expected
    assert tuple(sd["weight_ih_l0"].shape) == (80, 10)
    assert tuple(sd["weight_ih_l1_reverse"].shape) == (80, 40)
    assert tuple(sd["weight_hh_l1"].shape) == (80, 20) and tuple(sd["bias_hh_l1"].shape) == (80,)
    assert tuple(GRU(10, 20).state_dict()["weight_ih_l0"].shape) == (60, 10)
    assert tuple(RNN(10, 20).state_dict()["weight_hh_l0"].shape) == (20, 20)
    assert list(LSTMCell(3, 4).state_dict()) == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    assert list(GRUCell(3, 4, bias=False).state_dict()) == ["weight_ih", "weight_hh"]
    assert list(Embedding(5, 2).state_dict()) == ["weight"]
    # a state_dict round trip
    m2 = LSTM(10, 20, num_layers=2, bidirectional=True)
    m2.load_state_dict(sd)
    for k in sd:
        np.testing.assert_array_equal(m2.state_dict()[k].numpy(), sd[k].numpy())


def test_initialisation_is_uniform_in_pytorch_bound():
    m = LSTM(4, 16, num_layers=2)
    bound = 1 / np.sqrt(16)
    for name, p in m.named_parameters():
        a = npy(p)
        assert a.dtype == np.float32 and np.all(np.abs(a) <= bound), name
        assert a.std() > bound / 3, name  # not a constant fill
    assert "LSTM(4, 16, num_layers=2)" == repr(m)
    assert repr(RNN(3, 5, nonlinearity="relu", bidirectional=True)) == \
        "RNN(3, 5, bidirectional=True, nonlinearity=relu)"


def test_dropout_between_layers():
    model = make("LSTM", 2, False, False)
    model.dropout = 0.5
    x = mg.tensor(np.random.default_rng(0).uniform(-1, 1, (L, N, HIN)).astype(np.float32),
                  requires_grad=True)
    model.eval()
    out_eval, _ = model(x)
    data = {k: npy(v).astype(np.float64) for k, v in model.state_dict().items()}
    # eval: no dropout, the reference output
    ref_eval, _, _ = ref_rnn("LSTM", data, npy(x).astype(np.float64), None, None,
                             2, False, False)
    np.testing.assert_allclose(npy(out_eval), ref_eval, rtol=1e-4, atol=1e-5)
    model.train()
    mg.manual_seed(7)
    out1, _ = model(x)
    mg.manual_seed(7)
    out2, _ = model(x)
    np.testing.assert_array_equal(npy(out1), npy(out2))  # seeded
    assert not np.allclose(npy(out1), npy(out_eval))
    out1.sum().backward()
    assert np.all(np.isfinite(x.grad.numpy()))


# --- errors --------------------------------------------------------------------------------------
def test_bad_inputs_raise_pytorch_messages():
    rnn = RNN(input_size=32, hidden_size=64, num_layers=1, batch_first=True)
    with pytest.raises(RuntimeError, match=r"input.size\(-1\) must be equal to input_size. "
                                           r"Expected 32, got 16"):
        rnn(mg.randn(2, 3, 16))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 64\), got \[2, 2, 64\]"):
        rnn(mg.randn(2, 3, 32), mg.randn(2, 2, 64))
    with pytest.raises(ValueError, match="RNN: Expected input to be 2D or 3D, got 4D tensor"):
        rnn(mg.randn(1, 2, 3, 32))
    with pytest.raises(RuntimeError, match="For batched 3-D input, hx should also be 3-D but "
                                           "got 2-D tensor"):
        rnn(mg.randn(2, 3, 32), mg.randn(2, 64))
    lstm = LSTM(input_size=32, hidden_size=64, batch_first=True)
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 2, 64\), got "
                                           r"\[1, 3, 64\]"):
        lstm(mg.randn(2, 3, 32), (mg.randn(1, 3, 64), mg.randn(1, 2, 64)))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(1, 2, 64\), got "
                                           r"\[1, 2, 32\]"):
        lstm(mg.randn(2, 3, 32), (mg.randn(1, 2, 64), mg.randn(1, 2, 32)))
    with pytest.raises(RuntimeError, match=r"For unbatched 2-D input, hx and cx should also be "
                                           r"2-D but got \(3-D, 3-D\) tensors"):
        lstm(mg.randn(3, 32), (mg.randn(1, 1, 64), mg.randn(1, 1, 64)))
    with pytest.raises(ValueError, match="input must have the type float32, got type float64"):
        lstm(mg.randn(2, 3, 32, dtype=np.float64))
    with pytest.raises(RuntimeError, match="input has inconsistent input_size: got 5 "
                                           "expected 3"):
        LSTMCell(3, 4)(mg.randn(2, 5))
    with pytest.raises(RuntimeError, match="hidden0 has inconsistent hidden_size: got 5, "
                                           "expected 4"):
        GRUCell(3, 4)(mg.randn(2, 3), mg.randn(2, 5))
    with pytest.raises(RuntimeError, match="Input batch size 2 doesn't match hidden0 batch "
                                           "size 3"):
        RNNCell(3, 4)(mg.randn(2, 3), mg.randn(3, 4))
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        LSTM(3, 4, dropout=1.5)


def test_device_mismatch_is_reported():
    lstm = LSTM(3, 4)
    with pytest.raises(RuntimeError, match="Input and parameter tensors are not at the same "
                                           "device, found input tensor at cuda and parameter "
                                           "tensor at cpu"):
        lstm(mg.randn(2, 1, 3, device="cuda"))


# --- embedding -----------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_embedding_forward_backward_with_repeated_indices(device):
    mg.manual_seed(0)
    emb = Embedding(6, 3).to(device)
    w = npy(emb.weight)
    idx = np.array([[1, 4, 1], [0, 1, 5]])
    out = emb(mg.tensor(idx, device=device))
    assert tuple(out.shape) == (2, 3, 3)
    np.testing.assert_array_equal(npy(out), w[idx])
    g = np.random.default_rng(0).standard_normal((2, 3, 3)).astype(np.float32)
    (out * mg.tensor(g, device=device)).sum().backward()
    ref = np.zeros_like(w)
    np.add.at(ref, idx.reshape(-1), g.reshape(-1, 3))
    np.testing.assert_allclose(emb.weight.grad.numpy(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_embedding_padding_idx(device):
    mg.manual_seed(0)
    emb = Embedding(5, 2, padding_idx=-1).to(device)
    assert emb.padding_idx == 4 and repr(emb) == "Embedding(5, 2, padding_idx=4)"
    np.testing.assert_array_equal(npy(emb.weight)[4], [0, 0])
    idx = mg.tensor([4, 2, 4, 2], device=device)
    emb(idx).sum().backward()
    grad = emb.weight.grad.numpy()
    np.testing.assert_array_equal(grad[4], [0, 0])  # the padding row gets no gradient
    np.testing.assert_array_equal(grad[2], [2, 2])
    with pytest.raises(IndexError, match="index out of range in self"):
        emb(mg.tensor([5], device=device))


def test_embedding_from_pretrained_and_weight_init():
    w = mg.tensor([[1.0, 2.0], [3.0, 4.0]])
    emb = Embedding.from_pretrained(w)
    assert not emb.weight.requires_grad
    np.testing.assert_array_equal(emb(mg.tensor([1, 0, 1])).numpy(), [[3, 4], [1, 2], [3, 4]])
    mg.manual_seed(0)
    big = npy(Embedding(400, 5).weight)
    assert abs(big.mean()) < 0.1 and abs(big.std() - 1) < 0.1  # N(0, 1) like PyTorch


# --- kernel launches per timestep: fused layer vs an LSTM from elementwise ops -------------------
@contextlib.contextmanager
def count_launches():
    """Record the name of every kernel launched (the simulator's kernel[config] call)."""
    from numba.cuda.simulator import kernel as simkernel

    names = []
    original = simkernel.FakeCUDAKernel.__getitem__

    def getitem(self, configuration):
        names.append(self.fn.__name__)
        return original(self, configuration)

    simkernel.FakeCUDAKernel.__getitem__ = getitem
    try:
        yield names
    finally:
        simkernel.FakeCUDAKernel.__getitem__ = original


def naive_lstm(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """A one-layer LSTM from separate autograd ops: what the fused path replaces."""
    steps, n, f = x.shape
    hs = w_hh.shape[1]
    xproj = (x.reshape(steps * n, f) @ w_ih.mT + (b_ih + b_hh)).reshape(steps, n, 4 * hs)
    outs = []
    for t in range(steps):
        gates = xproj[t] + h @ w_hh.mT
        i, fg = gates[:, :hs].sigmoid(), gates[:, hs:2 * hs].sigmoid()
        g, o = gates[:, 2 * hs:3 * hs].tanh(), gates[:, 3 * hs:].sigmoid()
        c = fg * c + i * g
        h = o * c.tanh()
        outs.append(h)
    return mg.stack(outs), h, c


def launches(fn, steps):
    """(forward, backward) kernel launches of fn on a sequence of ``steps`` (cuda)."""
    rng = np.random.default_rng(0)
    mg.manual_seed(0)
    model = LSTM(HIN, H).to("cuda")
    x = mg.tensor(rng.uniform(-1, 1, (steps, N, HIN)).astype(np.float32), device="cuda",
                  requires_grad=True)
    h0 = mg.tensor(rng.uniform(-1, 1, (1, N, H)).astype(np.float32), device="cuda")
    c0 = mg.tensor(rng.uniform(-1, 1, (1, N, H)).astype(np.float32), device="cuda")
    with count_launches() as fwd:
        out = fn(model, x, h0, c0)
    loss = out.sum()
    with count_launches() as bwd:
        loss.backward()
    return fwd, bwd, out


def fused(model, x, h0, c0):
    return model(x, (h0, c0))[0]


def naive(model, x, h0, c0):
    return naive_lstm(x, h0[0], c0[0], model.weight_ih_l0, model.weight_hh_l0,
                      model.bias_ih_l0, model.bias_hh_l0)[0]


@pytest.mark.skipif(not SIMULATOR, reason="counts launches through the simulator's kernels")
def test_launch_counts_per_timestep():
    """Steady-state launches per timestep = launches(L=4) - launches(L=3); run with -s to see
    them and the simulator's wall time for L=4 (forward + backward)."""
    runs, seconds = {}, {}
    for name, fn in (("fused", fused), ("naive", naive)):
        runs[name, 3] = launches(fn, 3)
        start = time.perf_counter()
        runs[name, 4] = launches(fn, 4)
        seconds[name] = round(time.perf_counter() - start, 2)
    per_step = {name: (len(runs[name, 4][0]) - len(runs[name, 3][0]),
                       len(runs[name, 4][1]) - len(runs[name, 3][1]))
                for name in ("fused", "naive")}
    print(f"\nkernel launches per timestep (forward, backward): {per_step}; "
          f"simulator seconds for L=4: {seconds}")
    np.testing.assert_allclose(npy(runs["fused", 3][2]), npy(runs["naive", 3][2]), rtol=1e-5,
                               atol=1e-6)
    assert per_step["fused"] == (4, 4)
    assert per_step["naive"][0] > 2 * per_step["fused"][0]
    assert per_step["naive"][1] > 2 * per_step["fused"][1]
    fwd, bwd, _ = runs["fused", 4]
    assert fwd.count("lstm_cell_kernel") == 4 and bwd.count("lstm_cell_backward_kernel") == 4
