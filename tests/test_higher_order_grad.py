"""create_graph=True (issue #26): autograd.grad and Tensor.backward record the backward, so a
gradient can be differentiated again. WGAN-GP's gradient penalty, Hessian-vector products and
second derivatives against torch on both devices; float64 gradcheck of gradients; a clear
error through an op whose backward records no graph."""
import numpy as np
import pytest

import minigpu as mg
from minigpu.autograd import gradcheck

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "cuda"]


def _both(x, dev):
    return (torch.tensor(x, requires_grad=True), mg.tensor(x, device=dev, requires_grad=True))


def _np(t):
    return t.detach().cpu().numpy() if isinstance(t, mg.Tensor) else t.detach().numpy()


@pytest.mark.parametrize("dev", DEVICES)
def test_wgan_gp_gradient_penalty_matches_torch(dev):
    rng = np.random.default_rng(0)
    real, fake = (rng.standard_normal((5, 4)).astype(np.float32) for _ in range(2))
    alpha = rng.random((5, 1)).astype(np.float32)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LeakyReLU(0.2),
                              torch.nn.Linear(8, 1), torch.nn.Sigmoid())
    state = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    results = []
    for L, kw in ((torch, {}), (mg, {"device": dev})):
        D = L.nn.Sequential(L.nn.Linear(4, 8), L.nn.LeakyReLU(0.2), L.nn.Linear(8, 1),
                            L.nn.Sigmoid())
        D.load_state_dict({k: L.tensor(v) for k, v in state.items()})
        D = D.to(kw["device"]) if kw else D
        a, r, f = (L.tensor(v, **kw) for v in (alpha, real, fake))
        interp = (a * r + (1 - a) * f).requires_grad_(True)
        d_out = D(interp)
        g, = L.autograd.grad(outputs=d_out, inputs=interp,
                             grad_outputs=L.ones(d_out.shape, **kw), create_graph=True,
                             retain_graph=True)
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        gp.backward()
        results.append([gp] + [p.grad for p in D.parameters()])
    for want, got in zip(*results):
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-4, atol=1e-6)


FUNCTIONS = {
    "elementwise": lambda L, x, w: (L.tanh(x) * L.exp(x * 0.5) + x ** 3).sum(),
    "matmul": lambda L, x, w: ((x @ w).sigmoid() * (x @ w)).mean(),
    "linear_relu": lambda L, x, w: (L.nn.functional.linear(x, w.T, w.sum(0)).relu() ** 2).sum(),
    "reductions": lambda L, x, w: (x.sum(1) * x.mean(0).sum() - (x * x).sum(0).mean()).sum(),
    "div_norm": lambda L, x, w: (x / (1 + x * x)).sum() + x.norm(2, dim=1).sum(),
    "slice_cat": lambda L, x, w: (L.cat([x[:, :2] * x[:, 1:3].exp(), (x @ w)[:, 1:] ** 2], 1)
                                  .tanh().sum() + (x[0] * x[:, ::2].sum()).sum()),
}


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_hessian_vector_products_match_torch(dev, name):
    f = FUNCTIONS[name]
    rng = np.random.default_rng(len(name))
    x0, w0 = rng.standard_normal((3, 4)), rng.standard_normal((4, 4))
    v0 = rng.standard_normal((3, 4))
    out = []
    for L, x, w in ((torch, *_both(x0, dev)[:1], torch.tensor(w0, requires_grad=True)),
                    (mg, _both(x0, dev)[1], mg.tensor(w0, device=dev, requires_grad=True))):
        v = L.tensor(v0, device=x.device) if L is mg else torch.tensor(v0)
        g, = L.autograd.grad(f(L, x, w), x, create_graph=True)
        hv_x, hv_w = L.autograd.grad((g * v).sum(), [x, w], allow_unused=True)
        out.append((g, hv_x, hv_w))
    for want, got in zip(*out):
        if want is None:
            assert got is None
        else:
            np.testing.assert_allclose(_np(got), _np(want), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("fn", ["tanh", "exp", "sigmoid", "pow", "mul", "sqrt", "log"])
def test_second_and_third_derivatives_match_torch(dev, fn):
    f = {"tanh": lambda L, x: L.tanh(x), "exp": lambda L, x: L.exp(x),
         "sigmoid": lambda L, x: L.sigmoid(x), "pow": lambda L, x: x ** 3,
         "mul": lambda L, x: x * x * x, "sqrt": lambda L, x: L.sqrt(x),
         "log": lambda L, x: L.log(x)}[fn]
    x0 = np.linspace(0.2, 2.0, 6)
    out = []
    for L, x in zip((torch, mg), _both(x0, dev)):
        y = f(L, x).sum()
        d1, = L.autograd.grad(y, x, create_graph=True)
        d2, = L.autograd.grad(d1.sum(), x, create_graph=True)
        d3, = L.autograd.grad(d2.sum(), x)
        out.append((d1, d2, d3))
    for want, got in zip(*out):
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore:Using backward.. with create_graph=True")
@pytest.mark.parametrize("dev", DEVICES)
def test_backward_create_graph_keeps_the_grad_differentiable(dev):
    x0 = np.array([0.5, -1.0, 2.0])
    out = []
    for L, x in zip((torch, mg), _both(x0, dev)):
        (x ** 3 * L.tanh(x)).sum().backward(create_graph=True)
        assert x.grad.requires_grad
        first = x.grad.detach().clone()
        (x.grad ** 2).sum().backward()  # accumulates into x.grad: first + d/dx sum(grad^2)
        out.append((first, x.grad))
    for want, got in zip(*out):
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-10)


def test_gradients_of_gradients_pass_gradcheck():
    rng = np.random.default_rng(3)
    x = mg.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    w = mg.tensor(rng.standard_normal((3, 3)), requires_grad=True)

    def grad_of(x, w):  # gradcheck's numerical pass runs under no_grad
        with mg.enable_grad():
            y = (mg.tanh(x @ w).sigmoid() * x.exp()).sum() + (x @ w).norm(2, dim=1).sum() \
                + (mg.cat([x[:, 1:], x[:, :1]], 1) ** 3).sum()
            return mg.autograd.grad(y, [x, w], create_graph=True)
    assert gradcheck(lambda x, w: grad_of(x, w)[0], (x, w))
    assert gradcheck(lambda x, w: grad_of(x, w)[1], (x, w))


def _written_through_views(L, x, y):
    """Writes through views (CopySlices) and a view taken before a write (re-derived: ViewOf),
    an inf outside the written window."""
    h = x * 1
    row = h[1]                   # a view, written through below
    h[:, 1] = y * y              # CopySlices: a column of h
    row[0] = y[0] ** 3           # through the earlier view: h[1, 0]
    h = L.cat([h, L.full((2, 1), float("inf"), dtype=h.dtype, device=h.device)], 1)
    return (h[:, :3] ** 3).sum() + (row * row).sum() + L.isinf(h).sum()


@pytest.mark.parametrize("dev", DEVICES)
def test_create_graph_through_writes_into_views_matches_torch(dev):
    rng = np.random.default_rng(4)
    x0, y0 = rng.standard_normal((2, 3)), rng.standard_normal(2)
    results = []
    for L, (x, y) in ((torch, (torch.tensor(x0, requires_grad=True),
                               torch.tensor(y0, requires_grad=True))),
                      (mg, (mg.tensor(x0, device=dev, requires_grad=True),
                            mg.tensor(y0, device=dev, requires_grad=True)))):
        gx, gy = L.autograd.grad(_written_through_views(L, x, y), (x, y), create_graph=True)
        penalty = (gx ** 2).sum() + (gy * gy * gy).sum()
        results.append([_np(t) for t in (gx, gy, *L.autograd.grad(penalty, (x, y)))])
    for ours, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_gradient_through_writes_into_views_passes_gradcheck():
    rng = np.random.default_rng(5)
    x = mg.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    y = mg.tensor(rng.standard_normal(2), requires_grad=True)

    def grad_of(x, y):  # gradcheck's numerical pass runs under no_grad
        with mg.enable_grad():
            return mg.autograd.grad(_written_through_views(mg, x, y), (x, y), create_graph=True)
    assert gradcheck(lambda x, y: grad_of(x, y)[0], (x, y))
    assert gradcheck(lambda x, y: grad_of(x, y)[1], (x, y))


# Fused ops differentiated through their unfused forms (each Function's ``unfused``) under
# create_graph: f(L, x, p) with x (2, 3, 5, 5) and p (3, 3, 3, 3), both differentiated.
_T = np.array([[0, 2, 1, 4, 3], [4, 4, 0, 1, 2]])


def _t(L, like, array):
    return L.tensor(array, device=like.device)


UNFUSED = {
    "conv2d": lambda L, x, p: L.nn.functional.conv2d(x, p, p[0, 0, 0], stride=(1, 2),
                                                     padding=(2, 1), dilation=(2, 1)),
    "conv_transpose2d": lambda L, x, p: L.nn.functional.conv_transpose2d(
        x, p, p[0, 0, 0], stride=(2, 3), padding=(1, 0), output_padding=(1, 2),
        dilation=(1, 2)),
    "max_pool2d": lambda L, x, p: L.nn.functional.max_pool2d(x.round() * p[0, 0, 0, 0], 3, 2,
                                                             1),  # ties and padding
    "avg_pool2d": lambda L, x, p: L.nn.functional.avg_pool2d(x * p[0, 0, 0, 0], 3, 2, 1),
    "avg_pool2d_no_pad_count": lambda L, x, p: L.nn.functional.avg_pool2d(
        x * p[0, 0, 0, 0], 3, 2, 1, count_include_pad=False),
    "batch_norm": lambda L, x, p: L.nn.functional.batch_norm(x, None, None, p[0, :, 0, 0],
                                                             p[1, :, 0, 0], training=True),
    "layer_norm": lambda L, x, p: L.nn.functional.layer_norm(
        x, (5, 5), p.reshape(-1)[:25].reshape(5, 5), p[2].reshape(-1)[:25].reshape(5, 5)),
    "softmax": lambda L, x, p: L.softmax(x * p[0, 0, 0, 0], 1),
    "log_softmax": lambda L, x, p: L.log_softmax(x * p[0, 0, 0, 0], -1),
    "gelu": lambda L, x, p: L.nn.functional.gelu(x * p[0, 0, 0, 0]),
    "gelu_tanh": lambda L, x, p: L.nn.functional.gelu(x * p[0, 0, 0, 0], approximate="tanh"),
    "elu": lambda L, x, p: L.nn.functional.elu(x * p[0, 0, 0, 0] * 3, 0.7),
    "softplus": lambda L, x, p: L.nn.functional.softplus(x * p[0, 0, 0, 0], 2.0, 1.0),
    "erf": lambda L, x, p: L.erf(x * p[0, 0, 0, 0]),
    "cross_entropy": lambda L, x, p: L.nn.functional.cross_entropy(
        x[:, 0, 0] * p[0, 0, 0, 0], _t(L, x, _T[:, 0]), weight=x[1, 1, 1].detach().abs(),
        label_smoothing=0.2),
    "cross_entropy_spatial": lambda L, x, p: L.nn.functional.cross_entropy(
        x[:, :, 0] * p[0, 0, 0, 0], _t(L, x, _T % 3), ignore_index=2, reduction="sum"),
    "nll_loss": lambda L, x, p: L.nn.functional.nll_loss(
        L.log_softmax(x[:, 0, 0] * p[0, 0, 0, 0], 1), _t(L, x, _T[:, 1])),
    "binary_cross_entropy": lambda L, x, p: L.nn.functional.binary_cross_entropy(
        (x * p[0, 0, 0, 0]).sigmoid(), (x.detach() * 0.3).sigmoid()),
    "bce_with_logits": lambda L, x, p: L.nn.functional.binary_cross_entropy_with_logits(
        x * p[0, 0, 0, 0], (x.detach() * 0.3).sigmoid(), pos_weight=x[1, 1, 1].detach().abs()),
    "embedding": lambda L, x, p: L.nn.functional.embedding(_t(L, x, _T), x[0, 0] * p[0, 0, 0, 0],
                                                           padding_idx=2),
    "index_select": lambda L, x, p: x.index_select(3, _t(L, x, _T[0])) * p[0, 0, 0, 0],
    "gather_scatter_add": lambda L, x, p: L.zeros(2, 3, 5, 7, dtype=L.float64,
                                                  device=x.device).scatter_add(
        3, _t(L, x, np.tile(_T[1], (2, 3, 5, 1))), x.gather(
            2, _t(L, x, np.tile(_T[0], (2, 3, 5, 1)).transpose(0, 1, 3, 2))) * p[0, 0, 0, 0]),
    "scans": lambda L, x, p: (x.cumsum(3) * p[0, 0, 0, 0] + (x.round() * p[0, 0, 0, 0])
                              .cumprod(2) + x.round().prod(1, keepdim=True) * p[1, 1, 1, 1]),
    "masked_select": lambda L, x, p: (x * p[0, 0, 0, 0])[x.detach() > 0],
    "attention": lambda L, x, p: _attention(L, x * p[0, 0, 0, 0], x.transpose(2, 3), x.tanh(),
                                            p[1, 1, :, :].repeat(2, 2)[:5, :5], False),
    "attention_causal": lambda L, x, p: _attention(L, x * p[0, 0, 0, 0], x.transpose(2, 3),
                                                   x.tanh(), None, True),
    "sort_max_topk": lambda L, x, p: (x.sort(-1).values * p[0, 0, 0, 0] + x.amax(2, keepdim=True)
                                      + x.max(1, keepdim=True).values
                                      + x.topk(2, dim=-1).values.sum(-1, keepdim=True)),
}


def _attention(L, q, k, v, mask, causal):
    """minigpu's scaled_dot_product_attention (FlashAttention's kernels on cuda); for torch
    the formula itself (torch's CPU attention kernel has no double backward)."""
    if L is mg:
        return mg.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                             is_causal=causal)
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores + mask
    if causal:
        keep = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return scores.softmax(-1) @ v


def _penalty_grads(L, name, dev, x0, p0, u0):
    """f's gradient g (create_graph) and the gradients of sum(u * g^2) w.r.t. x and p."""
    kw = {"device": dev} if L is mg else {}
    x = L.tensor(x0, requires_grad=True, **kw)
    p = L.tensor(p0, requires_grad=True, **kw)
    y = UNFUSED[name](L, x, p)
    v = L.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)), **kw)
    gx, gp = L.autograd.grad((y * v).sum(), [x, p], create_graph=True)
    penalty = (gx * gx * L.tensor(u0, **kw)).sum() + (gp * gp).sum()
    hx, hp = L.autograd.grad(penalty, [x, p], allow_unused=True)
    return [gx, gp, hx, hp]


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("name", sorted(UNFUSED))
def test_unfused_forms_give_torchs_second_derivatives(dev, name):
    """A gradient penalty through each fused op: its gradient (from the unfused form) and
    the gradient of the penalty match torch's in float64."""
    rng = np.random.default_rng(len(name))
    x0, p0 = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((3, 3, 3, 3))
    u0 = rng.random((2, 3, 5, 5))
    want = _penalty_grads(torch, name, None, x0, p0, u0)
    got = _penalty_grads(mg, name, dev, x0, p0, u0)
    for w, g in zip(want, got):
        if w is None:
            assert g is None or not _np(g).any()
        else:
            np.testing.assert_allclose(_np(g), _np(w), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", ["conv2d", "softmax", "max_pool2d", "cross_entropy"])
def test_third_derivatives_through_unfused_forms_match_torch(name):
    """Each order recomputes the unfused form (autograd.engine._Recomputed): the third derivative is a
    node of the graph too."""
    rng = np.random.default_rng(7)
    x0, p0 = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((3, 3, 3, 3))
    out = []
    for L in (torch, mg):
        x, p = L.tensor(x0, requires_grad=True), L.tensor(p0, requires_grad=True)
        y = (UNFUSED[name](L, x, p) ** 2).sum()
        d1, = L.autograd.grad(y, p, create_graph=True)
        d2, = L.autograd.grad((d1 * d1).sum(), p, create_graph=True)
        d3, = L.autograd.grad(d2.sum(), [x])
        out.append((d1, d2, d3))
    for want, got in zip(*out):
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-9, atol=1e-11)


RECURRENT = {
    "lstm": lambda L: L.nn.LSTM(4, 3),
    "lstm_2_layers_bidirectional": lambda L: L.nn.LSTM(4, 3, num_layers=2, bidirectional=True),
    "gru": lambda L: L.nn.GRU(4, 3),
    "rnn_tanh": lambda L: L.nn.RNN(4, 3),
    "rnn_relu": lambda L: L.nn.RNN(4, 3, nonlinearity="relu"),
    "lstm_cell": lambda L: L.nn.LSTMCell(4, 3),
    "gru_cell": lambda L: L.nn.GRUCell(4, 3),
}


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("name", sorted(RECURRENT))
def test_recurrent_layers_give_torchs_second_derivatives(dev, name):
    """A gradient penalty through each recurrent layer (torch's weights copied): the input
    gradient and the penalty's gradients for the input and every weight match torch."""
    rng = np.random.default_rng(len(name))
    x0 = rng.standard_normal((5, 2, 4) if "cell" not in name else (2, 4))
    u0 = rng.random(x0.shape)
    torch.manual_seed(0)
    ref = RECURRENT[name](torch).double()
    ours = RECURRENT[name](mg).double().to(dev)
    ours.load_state_dict({k: mg.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    out = []
    for L, m, kw in ((torch, ref, {}), (mg, ours, {"device": dev})):
        x = L.tensor(x0, requires_grad=True, **kw)
        y = m(x)
        y = y[0] if isinstance(y, tuple) else y
        g, = L.autograd.grad((y ** 2).sum(), x, create_graph=True)
        (g * g * L.tensor(u0, **kw)).sum().backward()
        out.append([g, x.grad] + [p.grad for p in m.parameters()])
    for want, got in zip(*out):
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-9, atol=1e-11)


def test_gradient_of_a_conv_gradient_passes_gradcheck():
    rng = np.random.default_rng(5)
    x = mg.tensor(rng.standard_normal((1, 2, 4, 4)), requires_grad=True)
    w = mg.tensor(rng.standard_normal((2, 2, 3, 3)), requires_grad=True)

    def grad_of(x, w):  # gradcheck's numerical pass runs under no_grad
        with mg.enable_grad():
            y = mg.nn.functional.conv2d(x, w, stride=2, padding=1).tanh().sum()
            return mg.autograd.grad(y, [x, w], create_graph=True)
    assert gradcheck(lambda x, w: grad_of(x, w)[0], (x, w))
    assert gradcheck(lambda x, w: grad_of(x, w)[1], (x, w))


def test_once_differentiable_refuses_create_graph():
    from minigpu.autograd.function import Function, once_differentiable

    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * x * g

    x = mg.tensor([1.0, 2.0], requires_grad=True)
    assert mg.autograd.grad(Square.apply(x).sum(), x)[0].tolist() == [2.0, 4.0]
    with pytest.raises(RuntimeError, match="create_graph=True through SquareBackward"):
        mg.autograd.grad(Square.apply(x).sum(), x, create_graph=True)


@pytest.mark.parametrize("dev", DEVICES)
def test_create_graph_through_a_full_backward_hook_matches_torch(dev):
    """A module's full backward hook that doubles grad_input, under a gradient penalty: the
    hook sees what torch's sees, in both backward passes, and the gradients agree."""
    x0 = np.random.default_rng(6).standard_normal((4, 3))
    results = []
    for L, kw in ((torch, {}), (mg, {"device": dev})):
        lin = L.nn.Linear(3, 2).double().to(**kw)
        with L.no_grad():
            lin.weight.copy_(L.tensor(np.arange(6.0).reshape(2, 3) / 7, **kw))
            lin.bias.fill_(0.1)
        seen = []

        def hook(module, grad_input, grad_output):
            seen.append((_np(grad_input[0]), _np(grad_output[0])))
            return (grad_input[0] * 2,)
        lin.register_full_backward_hook(hook)
        x = L.tensor(x0, requires_grad=True, **kw)
        gx, = L.autograd.grad(L.tanh(lin(x)).pow(2).sum(), x, create_graph=True)
        (gx ** 2).sum().backward()
        results.append([a for pair in seen for a in pair] + [_np(lin.weight.grad), _np(x.grad)])
    assert len(results[1]) == len(results[0]) == 6   # the hook ran in both passes
    for ours, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
