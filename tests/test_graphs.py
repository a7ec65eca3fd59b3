"""Capture and replay on the cpu device (``minigpu/graphs``, ``docs/graphs.md``): a replayed
training step equals the eager step bit for bit (MLP, CNN, LSTM; SGD with momentum, Adam;
dropout's fresh draws), nothing is allocated while replaying, what cannot be captured raises
naming the op, and ``make_graphed_callables`` / ``compile`` keep forward and backward exact."""
import numpy as np
import pytest

import minigpu as mg
from minigpu import nn
from minigpu.graphs import CaptureError


class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(5, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(6, 16)
        self.encoder = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(1))


MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.25),
                                  nn.Linear(16, 3)), (4, 8)),
    "cnn": (lambda: nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Flatten(), nn.Linear(4 * 4 * 4, 3)), (2, 1, 8, 8)),
    "lstm": (Lstm, (3, 4, 5)),
    "batchnorm": (lambda: nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4),
                                        nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 3)),
                  (2, 1, 8, 8)),
    "transformer": (Encoder, (2, 5, 6)),
}
class ClippedSGD(mg.optim.SGD):
    """SGD whose step first scales the gradients to a norm of at most 0.5."""

    def step(self, closure=None):
        mg.nn.utils.clip_grad_norm_(self.param_groups[0]["params"], 0.5)
        return super().step(closure)


OPTIMIZERS = {
    "sgd": lambda p: mg.optim.SGD(p, lr=0.1, momentum=0.9),
    "adam": lambda p: mg.optim.Adam(p, lr=1e-2),
    "clipped-sgd": lambda p: ClippedSGD(p, lr=0.1, momentum=0.9),
}


def batches(shape, n, device="cpu", seed=0):
    rng = np.random.default_rng(seed)
    return [(mg.tensor(rng.standard_normal(shape).astype(np.float32), device=device),
             mg.tensor(rng.integers(0, 3, shape[0]), device=device)) for _ in range(n)]


def setup(model, optimizer, device="cpu"):
    mg.manual_seed(0)
    net = MODELS[model][0]().to(device)
    return net, OPTIMIZERS[optimizer](net.parameters())


def train_eager(net, opt, data):
    crit, losses = nn.CrossEntropyLoss(), []
    for x, y in data:
        opt.zero_grad()
        loss = crit(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach().numpy().copy())
    return losses


def train_captured(net, opt, data, warmup=2):
    """PyTorch's recipe: a few eager steps (the optimizer makes its state), then capture one
    step on static tensors and replay it for each further batch."""
    losses = train_eager(net, opt, data[:warmup])
    crit = nn.CrossEntropyLoss()
    static_x, static_y = data[0][0].clone(), data[0][1].clone()
    opt.zero_grad(set_to_none=True)
    g = mg.cuda.CUDAGraph()
    with mg.cuda.graph(g):
        static_loss = crit(net(static_x), static_y)
        static_loss.backward()
        opt.step()
    for x, y in data[warmup:]:
        static_x.copy_(x)
        static_y.copy_(y)
        g.replay()
        losses.append(static_loss.detach().numpy().copy())
    return losses, g


def eager_and_captured(model, optimizer, data, device="cpu"):
    """``((losses, parameters) trained eagerly, (the same) captured and replayed, the graph)``
    from one initialisation."""
    net, opt = setup(model, optimizer, device)
    eager = train_eager(net, opt, data)
    net2, opt2 = setup(model, optimizer, device)
    captured, g = train_captured(net2, opt2, data)
    return (eager, params(net)), (captured, params(net2)), g


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b)) and len(a) == len(b)


def params(net):
    """The parameters and buffers (BatchNorm's running statistics)."""
    return [t.detach().numpy().copy() for t in net.state_dict().values()]


@pytest.mark.parametrize("model,optimizer", [("mlp", "adam"), ("mlp", "sgd"), ("cnn", "sgd"),
                                             ("cnn", "adam"), ("lstm", "adam"),
                                             ("mlp", "clipped-sgd"), ("batchnorm", "sgd"),
                                             ("transformer", "adam")])
def test_replayed_training_equals_eager_bit_for_bit(model, optimizer):
    data = batches(MODELS[model][1], 6)
    eager, captured, g = eager_and_captured(model, optimizer, data)
    assert g.num_steps() > 0
    assert same(eager[0], captured[0]) and same(eager[1], captured[1])
    assert mg.default_generator.offset == _offset_after_eager(model, optimizer, data)


def _offset_after_eager(model, optimizer, data):
    net, opt = setup(model, optimizer)
    train_eager(net, opt, data)
    return mg.default_generator.offset


def test_capture_changes_nothing_until_replay():
    """As in PyTorch, capturing records the work: parameters, optimizer state and the
    generator are as before the capture; the first replay does the step."""
    net, opt = setup("mlp", "adam")
    data = batches((4, 8), 3)
    train_eager(net, opt, data[:1])
    before, offset = params(net), mg.default_generator.offset
    moments = [s["exp_avg"].numpy().copy() for s in opt.state.values()]
    g = mg.cuda.CUDAGraph()
    with mg.cuda.graph(g):
        nn.CrossEntropyLoss()(net(data[1][0]), data[1][1]).backward()
        opt.step()
    assert same(before, params(net)) and mg.default_generator.offset == offset
    assert same(moments, [s["exp_avg"].numpy() for s in opt.state.values()])
    g.replay()
    assert not same(before, params(net)) and mg.default_generator.offset > offset


def test_a_failed_capture_gives_everything_back():
    """An error inside the capture (here a host read after the update) leaves the parameters,
    the optimizer's moments, the generator and the backends as they were."""
    net, opt = setup("mlp", "adam")
    data = batches((4, 8), 2)
    train_eager(net, opt, data[:1])
    before, offset = params(net), mg.default_generator.offset
    g = mg.cuda.CUDAGraph()
    with pytest.raises(CaptureError, match="item"):
        with mg.cuda.graph(g):
            loss = nn.CrossEntropyLoss()(net(data[1][0]), data[1][1])
            loss.backward()
            opt.step()
            loss.item()
    assert same(before, params(net)) and mg.default_generator.offset == offset
    assert not hasattr(mg.backends.get("cpu"), "capturing")
    assert train_eager(net, opt, data[1:])  # eager again


def test_dropout_draws_fresh_numbers_on_each_replay_as_eager_does():
    x = mg.ones(64)
    g = mg.cuda.CUDAGraph()
    mg.manual_seed(3)
    with mg.cuda.graph(g):
        y = mg.nn.functional.dropout(x, 0.5) + mg.randn(64)
    masks = []
    for _ in range(3):
        g.replay()
        masks.append(y.numpy().copy())
    mg.manual_seed(3)
    eager = [(mg.nn.functional.dropout(x, 0.5) + mg.randn(64)).numpy() for _ in range(3)]
    assert same(masks, eager)
    assert not np.array_equal(masks[0], masks[1])


def test_replay_allocates_nothing():
    """The buffers of every tensor the step touches stay the same objects across replays, and
    no new NumPy array reaches the graph's tensors."""
    net, opt = setup("mlp", "sgd")
    data = batches((4, 8), 5)
    losses, g = train_captured(net, opt, data[:3], warmup=1)
    buffers = [p._buf for p in net.parameters()] + [p.grad._buf for p in net.parameters()]
    pool = [id(b) for b in g.pool_buffers()]
    for _ in range(3):
        g.replay()
    assert all(a is b for a, b in zip(buffers, [p._buf for p in net.parameters()]
                                      + [p.grad._buf for p in net.parameters()]))
    assert pool == [id(b) for b in g.pool_buffers()] and pool
    assert {id(p.grad._buf) for p in net.parameters()} <= set(pool)  # grads live in the pool


@pytest.mark.parametrize("what,op", [
    (lambda t: t.item(), "item"), (lambda t: t.numpy(), "numpy"),
    (lambda t: t.tolist(), "tolist"), (lambda t: print(t), "__repr__"),
    (lambda t: bool(t), "__bool__"), (lambda t: mg.masked_select(t, t > 0), "masked_select"),
    (lambda t: t.nonzero(), "nonzero"), (lambda t: t[t > 0], "getitem"),
    (lambda t: float(t), "__float__"), (lambda t: mg.cuda.synchronize(), "synchronize"),
    (lambda t: mg.randn(2, generator=mg.Generator().manual_seed(1)), "other than")])
def test_what_cannot_be_captured_raises_naming_the_op(what, op):
    t = mg.ones(1)
    g = mg.cuda.CUDAGraph()
    with pytest.raises(CaptureError, match=op):
        with mg.cuda.graph(g):
            what(t * 2)
    assert mg.backends.get("cpu").name == "cpu" and not hasattr(mg.backends.get("cpu"),
                                                                "capturing")
    with pytest.raises(RuntimeError, match="nothing has been captured"):
        g.replay()
    (t * 2).item()  # eager again


def test_make_graphed_callables_forward_and_backward_equal_eager():
    net, opt = setup("mlp", "sgd")
    net.eval()  # no dropout: the warmup would draw numbers eager does not
    data = batches((4, 8), 4)
    graphed = mg.cuda.make_graphed_callables(net, (data[0][0],))
    net2, opt2 = setup("mlp", "sgd")
    net2.eval()
    crit = nn.CrossEntropyLoss()
    for (x, y) in data:
        for model, o in ((graphed, opt), (net2, opt2)):
            o.zero_grad()
            crit(model(x), y).backward()
            o.step()
    assert same(params(net), params(net2))
    with pytest.raises(RuntimeError, match="does not match the sample"):
        graphed(mg.randn(3, 8))


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_compile_trains_like_eager(model):
    data = batches(MODELS[model][1], 4)
    net, opt = setup(model, "adam")
    eager = train_eager(net, opt, data)
    net2, opt2 = setup(model, "adam")
    compiled = mg.compile(net2)
    assert same(eager, train_eager(compiled, opt2, data))
    assert same(params(net), params(net2))
    assert len(compiled.graphs) == 1 and not compiled.graph_breaks()


def test_compile_differentiates_the_tensors_a_function_closes_over():
    w = mg.randn(4, 2, requires_grad=True)
    x = mg.randn(3, 4, requires_grad=True)

    def layer(x):
        return (x @ w).tanh()

    def gradients(fn):
        w.grad = x.grad = None
        fn(x).sum().backward()
        return [w.grad.numpy().copy(), x.grad.numpy().copy()]

    compiled = mg.compile(layer)
    assert same(gradients(compiled), gradients(layer)) and not compiled.graph_breaks()


def test_compile_called_twice_before_backward_equals_eager():
    """A compiled module called on two inputs before one backward (a forward-forward layer's
    positive and negative passes): the second call must not overwrite what the first call's
    backward reads, nor the first call's output."""
    def run(wrap):
        mg.manual_seed(0)
        linear, act = nn.Linear(6, 5), wrap(nn.ReLU())
        opt = mg.optim.Adam(linear.parameters(), lr=1e-2)
        losses = []
        data = batches((4, 6), 6)
        for (x_pos, _), (x_neg, _) in zip(data[::2], data[1::2]):
            opt.zero_grad()
            pos, neg = act(linear(x_pos)), act(linear(x_neg))
            loss = (pos.pow(2).mean() - neg.pow(2).mean()).abs()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses + [p.detach().numpy().copy() for p in linear.parameters()]

    assert same(run(mg.compile), run(lambda m: m))


def test_a_graphed_callable_refuses_a_second_call_before_backward():
    net, _ = setup("mlp", "sgd")
    net.eval()
    x = batches((4, 8), 1)[0][0]
    graphed = mg.cuda.make_graphed_callables(net, (x,))
    first = graphed(x)
    with pytest.raises(RuntimeError, match="before the backward of its previous call"):
        graphed(x)
    first.sum().backward()
    graphed(x).sum().backward()  # its backward ran: the buffers are free again


def test_compile_guards_recapture_on_a_new_shape_and_on_eval():
    net, _ = setup("mlp", "sgd")
    compiled = mg.compile(net)
    for shape in ((4, 8), (4, 8), (2, 8)):
        x = mg.randn(*shape)
        with mg.no_grad():
            compiled.eval()
            assert np.array_equal(compiled(x).numpy(), net(x).numpy())
    assert len(compiled.graphs) == 2 and not compiled.graph_breaks()
    compiled.train()
    compiled(mg.randn(4, 8))
    assert len(compiled.graphs) == 3


def test_compile_graph_break_falls_back_to_eager_or_raises_with_fullgraph():
    def fn(x):
        return x * 2 if (x.sum() > 0).item() else x * 3

    x = mg.ones(3)
    compiled = mg.compile(fn)
    assert compiled(x).tolist() == compiled(x).tolist() == [2.0, 2.0, 2.0]
    assert "item" in str(compiled.graph_breaks()[0]) and len(compiled.graphs) == 1
    with pytest.raises(CaptureError, match="item"):
        mg.compile(fn, fullgraph=True)(x)
    assert mg.compile(fn, backend="eager") is fn


def test_the_replay_benchmark_runs(tmp_path, monkeypatch):
    """``benchmarks/graphs_replay.py`` end to end (tiny repeat): a row per workload."""
    import importlib
    import json
    import sys
    from pathlib import Path
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    bench = importlib.import_module("graphs_replay")
    monkeypatch.setattr(bench, "torch", None)  # its columns are host_overhead.py's, tested there
    out = tmp_path / "rows.json"
    bench.main(["--rounds", "1", "--round-ms", "1", "--json", str(out)])
    result = json.loads(out.read_text())
    assert len(result["cpu"]) == 4
    assert all(r["replay_us"] > 0 and r["eager_us"] > 0 and r["fused_us"] > 0
               for r in result["cpu"])
    launches = {r["workload"]: (r["eager_launches"], r["replay_launches"])
                for r in result["cuda"]}
    assert launches["a + b"] == (1, 1)  # one map, eager and replayed
    assert all(e == r for e, r in launches.values())  # a replay launches what eager does
    sys.modules.pop("graphs_replay")
