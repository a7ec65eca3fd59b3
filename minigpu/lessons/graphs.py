"""Launch overhead, CUDA graphs and fusion by a compiler: one training step, three ways.

A small model's training step is many small ops. Eager, each op pays Python (the Tensor,
autograd, dispatch) and, on a GPU, one kernel launch (5-11 us through Numba) for a few
hundred elements of work: the step is *launch-bound*. This lesson runs one real training step
(an MLP on digits-sized inputs, 8x8 pixels -> 10 classes, cross entropy, Adam) three ways from
the same initialisation:

* ``eager``: op by op, as written (:func:`train_step`);
* ``captured``: recorded once with ``mg.cuda.graph`` and replayed (``CUDAGraph.replay``): the
  same launches on the same buffers, without Python dispatch;
* ``fused``: the captured graph after ``CUDAGraph.fuse()`` (``minigpu/graphs/fusion.py``): each
  chain of elementwise maps is one generated kernel whose intermediates stay in registers,
  and the per-parameter Adam launches are one multi-tensor launch.

The three give the same loss, bit for bit on the simulator. ``python -m minigpu.lessons.graphs``
prints the simulator's counters per step (launches, global bytes), the host time per step and
per op on the cpu device (measured in the same run), and one generated fused kernel of the
step next to the hand-written elementwise kernel it replaces.
"""
from __future__ import annotations

import inspect
import time

import numpy as np

import minigpu as mg

from .. import cuda, nn, optim
from ..backends.cuda import elementwise
from .record import Experiment, Lesson, Problem, Variant

PIXELS, HIDDEN, CLASSES, BATCH = 64, 32, 10, 8
MODES = ("eager", "captured", "fused")


def train_step(net, opt, x, y):
    """One eager training step: forward, cross entropy, backward, Adam. Returns the loss."""
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
    return loss


class Step:
    """A model, its optimizer and one batch on ``device``, after one eager warm-up step (it
    makes Adam's moments), ready to run the step as ``mode`` says; ``run()`` runs one step
    and returns the loss tensor (for a graph, its static output)."""

    def __init__(self, device: str, mode: str):
        mg.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(PIXELS, HIDDEN), nn.Tanh(),
                                 nn.Linear(HIDDEN, CLASSES)).to(device)
        self.opt = optim.Adam(self.net.parameters(), lr=1e-2)
        rng = np.random.default_rng(0)
        self.x = mg.tensor(rng.random((BATCH, PIXELS), dtype=np.float32), device=device)
        self.y = mg.tensor(rng.integers(0, CLASSES, BATCH), device=device)
        train_step(self.net, self.opt, self.x, self.y)
        self.graph, self.fused = None, []
        if mode != "eager":
            self.graph = mg.cuda.CUDAGraph()
            with mg.cuda.graph(self.graph):
                self.loss = train_step(self.net, self.opt, self.x, self.y)
            if mode == "fused":
                self.fused = self.graph.fuse()

    def run(self):
        if self.graph is None:
            return train_step(self.net, self.opt, self.x, self.y)
        self.graph.replay()
        return self.loss


def counted(mode: str) -> tuple:
    """(launches, global bytes) of one step on the simulator, counted by its counters."""
    step = Step("cuda", mode)
    with cuda.counters() as launches:
        step.run()
    return len(launches), int(sum(k.metrics["bytes_moved"] for k in launches))


def host_times(repeats: int = 30) -> dict:
    """Mode -> (microseconds per step, backend calls per step) on the cpu device, the best
    of ``repeats`` timed steps (the host time: the cpu device has no launches). Eager's calls
    are the ones its capture records (the step's ops, less cross_entropy's host check)."""
    steps = {mode: Step("cpu", mode) for mode in MODES}
    calls = steps["captured"].graph.num_steps()
    out = {}
    for mode, step in steps.items():
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            step.run()
            best = min(best, time.perf_counter() - start)
        out[mode] = (best * 1e6, step.graph.num_steps() if step.graph else calls)
    return out


def fused_example():
    """(the generated kernel, the hand-written sources it replaces): the step's fused kernel
    of Linear's bias add and Tanh, and the two maps eager launches for them, the broadcast
    add (``binary_strided``) and the dense tanh (``unary_dense``)."""
    kernels = Step("cuda", "fused").fused
    chosen = next(k for k in kernels if "tanh" in k.ops)
    hand = inspect.getsource(elementwise._binary_strided) + "\n" + \
        inspect.getsource(elementwise.dense_unary_kernel)
    return chosen, hand


def report(repeats: int = 30) -> str:
    """The lesson's numbers, measured now: counters on the simulator, host time on cpu."""
    lines = ["One training step (MLP 64-32-10, batch 8, cross entropy, Adam)", "",
             f"{'mode':10s} {'launches':>9s} {'global bytes':>13s} {'cpu us/step':>12s} "
             f"{'cpu calls':>10s} {'cpu us/call':>12s}"]
    times = host_times(repeats)
    for mode in MODES:
        launches, moved = counted(mode)
        us, calls = times[mode]
        lines.append(f"{mode:10s} {launches:9d} {moved:13,d} {us:12.0f} {calls:10d} "
                     f"{us / calls:12.1f}")
    chosen, hand = fused_example()
    lines += ["", "launches and bytes: the simulator's counters (mg.cuda.counters()); "
              "times: perf_counter on the cpu device, best of "
              f"{repeats}, this machine, this load.", "",
              f"== a generated kernel of this step: {chosen.name} (ops {', '.join(chosen.ops)}, "
              f"{chosen.bytes_saved:,} bytes saved per replay)", chosen.source.rstrip(), "",
              "== the hand-written kernels eager launches for the same two ops "
              "(backends/cuda/elementwise.py)", hand.rstrip()]
    return "\n".join(lines)


def _build(inputs) -> Problem:
    steps = {mode: Step("cuda", mode) for mode in MODES}
    params = sum(p.numel() for p in steps["eager"].net.parameters())
    return Problem(size=f"MLP {PIXELS}-{HIDDEN}-{CLASSES}, batch {BATCH}, Adam",
                   work=16 * params,  # Adam alone: p, g, m, v read, p, m, v written
                   steps=steps)


def _variant(mode: str, note: str) -> Variant:
    return Variant(mode, note, lambda p: p.steps[mode].run()._buf, Step.run)


LESSON = Lesson(
    name="graphs",
    title="Launch overhead, CUDA graphs and fusion",
    teaches="one training step eager vs captured (CUDAGraph replay) vs captured and fused: "
            "the same launches without Python, then fewer launches and bytes",
    experiments=(Experiment(
        "graphs_step", _build,
        (_variant("eager", "op by op: Python dispatch and one launch per op"),
         _variant("captured", "CUDAGraph.replay(): eager's kernels, no Python per op"),
         _variant("fused", "CUDAGraph.fuse(): elementwise chains and Adam in generated "
                           "kernels")),
        no_production="the fused kernels are generated per graph by minigpu/graphs/"
                      "fused_kernels.py, not written by hand in backends/cuda",
        look_for="captured moves almost eager's bytes: a replay saves host time, not GPU "
                 "work (its few fewer bytes are cross_entropy's host check of the targets, "
                 "which a capture cannot run); fused moves fewer global bytes in fewer "
                 "launches, since a fused chain's intermediates stay in registers. python -m "
                 "minigpu.lessons.graphs adds launches, cpu host times and a generated "
                 "kernel's source."),),
)


if __name__ == "__main__":
    print(report())
