"""Launches and global bytes per training step, eager vs captured and fused, on the simulator.

For an MLP, LeNet-5 and a small Transformer LM, one training step (forward, backward, Adam) is
run eagerly and, from the same initialisation, captured once and fused
(``minigpu.graphs.fusion``: chains of elementwise maps -> one generated kernel each). The
simulator's counters (``mg.cuda.counters()``) count the launches of one eager step and of one
fused replay, and the global bytes they move (32-byte sectors, loads and stores). The losses of
``--steps`` steps of each are compared (the bound of ``docs/graphs.md``: equal, 0 ulp, on the
simulator).

    NUMBA_ENABLE_CUDASIM=1 python benchmarks/graphs_fusion.py [--models mlp,lenet,lm]
        [--steps 5] [--device cuda]

The LM reads its tokens one-hot (its embedding a bias-free Linear): ``nn.Embedding`` checks the
token range on the host, which a capture cannot repeat (a graph break).
"""
import argparse

import numpy as np

import minigpu as mg
from minigpu import nn
from minigpu.models.lenet import LeNet5
from minigpu.lessons.graphs import train_step

VOCAB, CONTEXT, WIDTH = 12, 8, 16


class TinyLM(nn.Module):
    """A one-block causal Transformer language model over one-hot tokens."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(VOCAB, WIDTH, bias=False)
        self.position = nn.Parameter(mg.randn(CONTEXT, WIDTH) * 0.1)
        self.block = nn.TransformerEncoderLayer(WIDTH, 2, 2 * WIDTH, dropout=0.0,
                                                batch_first=True)
        self.head = nn.Linear(WIDTH, VOCAB)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(CONTEXT))

    def forward(self, tokens):
        h = self.embed(tokens) + self.position
        return self.head(self.block(h, src_mask=self.mask, is_causal=True)).flatten(0, 1)


def lm_batch(rng, device):
    tokens = rng.integers(0, VOCAB, (2, CONTEXT + 1))
    one_hot = np.eye(VOCAB, dtype=np.float32)[tokens[:, :-1]]
    return mg.tensor(one_hot, device=device), mg.tensor(tokens[:, 1:].reshape(-1), device=device)


MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(),
                                  nn.Linear(32, 3)),
            lambda rng, device: (mg.tensor(rng.standard_normal((4, 8)).astype(np.float32),
                                           device=device),
                                 mg.tensor(rng.integers(0, 3, 4), device=device))),
    "lenet": (lambda: LeNet5(input_size=8, channels=(2, 4), hidden=(16, 8)),
              lambda rng, device: (mg.tensor(rng.standard_normal((2, 1, 8, 8)).astype(
                  np.float32), device=device), mg.tensor(rng.integers(0, 10, 2), device=device))),
    "lm": (TinyLM, lm_batch),
}


def setup(model, device, steps):
    mg.manual_seed(0)
    make, batch = MODELS[model]
    net = make().to(device)
    rng = np.random.default_rng(0)
    return net, mg.optim.Adam(net.parameters(), lr=1e-2), [batch(rng, device)
                                                           for _ in range(steps + 1)]


def parameters(net):
    return [p.detach().cpu().numpy().copy() for p in net.parameters()]


def eager_losses(model, device, steps):
    """The losses of ``steps`` eager steps after one warm-up step, the last step's launches
    (counted on the simulator, ``[]`` elsewhere) and the parameters after them."""
    net, opt, data = setup(model, device, steps)
    train_step(net, opt, *data[0])
    losses, launches = [], None
    for x, y in data[1:]:
        with _counted() as launches:
            loss = train_step(net, opt, x, y)
        losses.append(loss.item())
    return losses, launches, parameters(net)


def graphed_losses(model, device, steps, fuse=True):
    """The same steps captured once (after the same warm-up step) and replayed, fused when
    ``fuse``: the losses, the last replay's launches, the parameters and the graph."""
    net, opt, data = setup(model, device, steps)
    train_step(net, opt, *data[0])
    static_x, static_y = data[1][0].clone(), data[1][1].clone()
    graph = mg.cuda.CUDAGraph()
    with mg.cuda.graph(graph):
        static_loss = train_step(net, opt, static_x, static_y)
    if fuse:
        graph.fuse()
    losses, launches = [], None
    for x, y in data[1:]:
        static_x.copy_(x)
        static_y.copy_(y)
        with _counted() as launches:
            graph.replay()
        losses.append(static_loss.item())
    return losses, launches, parameters(net), graph


class _counted:
    """``mg.cuda.counters()`` on the simulator, an empty list elsewhere."""

    def __enter__(self):
        self.inner = mg.cuda.counters() if mg.cuda.is_simulator() else None
        return self.inner.__enter__() if self.inner is not None else []

    def __exit__(self, *exc):
        return self.inner.__exit__(*exc) if self.inner is not None else False


def global_bytes(launches) -> int:
    return int(sum(k.metrics["bytes_moved"] for k in launches))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,lenet,lm")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    rows = []
    print(f"{'model':8s} {'launches: eager':>16s} {'fused':>6s} {'ratio':>6s} "
          f"{'bytes: eager':>13s} {'fused':>9s} {'ratio':>6s} {'kernels':>8s} "
          f"{'losses equal':>13s}")
    for model in args.models.split(","):
        eager, eager_launches, _ = eager_losses(model, args.device, args.steps)
        fused, fused_launches, _, graph = graphed_losses(model, args.device, args.steps)
        row = {"model": model, "eager_launches": len(eager_launches),
               "fused_launches": len(fused_launches),
               "eager_bytes": global_bytes(eager_launches),
               "fused_bytes": global_bytes(fused_launches), "kernels": len(graph.fused),
               "losses_equal": eager == fused}
        rows.append(row)
        print(f"{model:8s} {row['eager_launches']:16d} {row['fused_launches']:6d} "
              f"{row['fused_launches'] / max(row['eager_launches'], 1):6.2f} "
              f"{row['eager_bytes']:13d} {row['fused_bytes']:9d} "
              f"{row['fused_bytes'] / max(row['eager_bytes'], 1):6.2f} {row['kernels']:8d} "
              f"{str(row['losses_equal']):>13s}")
    return rows


if __name__ == "__main__":
    main()
