"""The benchmark's suites as groups of timed variants.

lessons  every experiment of every lesson in ``minigpu.lessons.ALL``, variant against variant;
ops      the production primitives at sizes that fill an H200: matmul 4096^3, sums,
         elementwise maps, transpose, softmax;
train    one training step (forward, loss, backward, SGD) of an MLP and of LeNet-5.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import minigpu as mg

from .. import lessons
from ..backends import cuda
from ..lessons.record import Inputs
from ..models import LeNet5
from .references import reference


@dataclass
class Group:
    """Variants with the same semantics, timed one after the other (the first is the
    baseline), and the work one call does."""

    name: str
    size: str
    unit: str                      # "GB/s" or "GFLOP/s" or "samples/s"
    work: float                    # bytes, flops or samples per call
    variants: list                 # [(name, fn)] ; fn() -> device array or None
    memory_bound: bool = True
    check: bool = True
    tol: dict = field(default_factory=lambda: dict(rtol=1e-5, atol=1e-5))
    reference: tuple | None = None  # (name, fn) timed the same way, e.g. torch
    notes: dict = field(default_factory=dict)   # variant -> note
    skipped: str = ""


class Context(Inputs):
    """A suite's sizes, random data, device and reference library."""

    def __init__(self, smoke: bool, seed: int = 0):
        super().__init__(small=smoke, seed=seed)
        self.smoke = smoke
        self.cuda = cuda
        self.stream = self.device.current_stream()
        self.ref = reference()


def _call(fn, *args, **kw):
    return lambda: fn(*args, **kw)


# --- the lessons suite ---------------------------------------------------------------------
def lesson_groups(lesson, ctx) -> list:
    """One group per experiment of ``lesson``: its variants on inputs built once."""
    groups = []
    for exp in lesson.experiments:
        problem = exp.build(ctx)
        variants, notes = [], {}
        for v in exp.runnable(ctx.smoke):
            label = f"{v.name} ({v.note})"
            variants.append((label, (lambda v, p: lambda: v.run(p))(v, problem)))
            if v.name in problem.notes:
                notes[label] = problem.notes[v.name]
        ref = exp.reference(ctx.ref, problem) if exp.reference and ctx.ref else None
        groups.append(Group(exp.name, problem.size, exp.unit, problem.work, variants,
                            memory_bound=exp.memory_bound, check=exp.check, tol=exp.tol,
                            reference=ref, notes=notes))
    return groups


def lesson_builders(only=None) -> list:
    """(name, ctx -> groups) for the lessons named in ``only`` (all when None)."""
    return [(lesson.name, (lambda lesson: lambda ctx: lesson_groups(lesson, ctx))(lesson))
            for lesson in lessons.ALL if not only or lesson.name in only]


# --- the ops suite -----------------------------------------------------------------------------
def ops_groups(ctx):
    cu = ctx.cuda
    ref = ctx.ref
    groups = []

    M = ctx.size(4096, 16)
    a = ctx.view(ctx.upload(ctx.uniform(M * M)), (1, M, M))
    b = ctx.view(ctx.upload(ctx.uniform(M * M)), (1, M, M))
    groups.append(Group("matmul", f"{M}x{M} @ {M}x{M} float32", "GFLOP/s", 2 * M ** 3,
                        [("matmul (register_tiled)", _call(cu.matmul, a, b))],
                        memory_bound=False, reference=ref.matmul(M, M, M) if ref else None))

    n = ctx.size(1 << 26, 1000)
    x = ctx.view(ctx.upload(ctx.rng.random(n)), (n,))
    y = ctx.view(ctx.upload(ctx.rng.random(n)), (n,))
    groups.append(Group("sum_all", f"sum of {n} float32", "GB/s", 4 * n,
                        [("reduce('sum', all)", _call(cu.reduce, "sum", x, (0,)))],
                        reference=ref.unary("sum", n) if ref else None))
    R, C = ctx.size((8192, 8192), (12, 40))
    m = ctx.view(ctx.upload(ctx.rng.random(R * C)), (R, C))
    groups.append(Group("sum_rows", f"sum over axis 1 of {R}x{C} float32", "GB/s", 4 * R * C,
                        [("reduce('sum', axis=1)", _call(cu.reduce, "sum", m, (1,)))],
                        reference=ref.rowsum(R, C) if ref else None))
    groups.append(Group("add", f"{n} float32", "GB/s", 12 * n,
                        [("binary('add')", _call(cu.binary, "add", x, y))],
                        reference=ref.binary("add", n) if ref else None))
    groups.append(Group("relu", f"{n} float32", "GB/s", 8 * n,
                        [("unary('relu')", _call(cu.unary, "relu", x))],
                        reference=ref.unary("relu", n) if ref else None))
    t = ctx.view(m.buf, (C, R), (1, C))
    groups.append(Group("transpose", f"{R}x{C} float32", "GB/s", 8 * R * C,
                        [("contiguous(x.T)", _call(cu.contiguous, t))],
                        reference=ref.transpose(R, C) if ref else None))
    SR, SC = ctx.size((65536, 1024), (6, 10))
    s = ctx.view(ctx.upload(ctx.uniform(SR * SC, lo=-4, hi=4)), (SR, SC))
    groups.append(Group("softmax", f"rows of {SR}x{SC} float32", "GB/s", 8 * SR * SC,
                        [("softmax(dim=1)", _call(cu.softmax, s, False))],
                        reference=ref.softmax(SR, SC) if ref else None))
    return groups


# --- the train suite ---------------------------------------------------------------------------
def train_groups(ctx):
    groups = []
    batch, sizes = ctx.size((256, (784, 512, 512, 10)), (4, (16, 32, 4)))
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(mg.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(mg.nn.ReLU())
    mlp = mg.nn.Sequential(*layers).to("cuda")
    x = mg.randn(batch, sizes[0], device="cuda")
    y = mg.randint(0, sizes[-1], (batch,), device="cuda")
    groups.append(Group("mlp_step", f"MLP {'-'.join(map(str, sizes))}, batch {batch}",
                        "samples/s", batch, [("SGD step (fwd+loss+bwd+update)",
                                              _train_step(mg, mlp, x, y))],
                        memory_bound=False, check=False,
                        reference=ctx.ref.mlp_step(sizes, batch) if ctx.ref else None))
    batch, side = ctx.size((128, 28), (1, 4))
    kw = dict(input_size=side) if not ctx.smoke else dict(
        input_size=side, channels=(2, 2), hidden=(4, 4), num_classes=3)
    net = LeNet5(**kw).to("cuda")
    classes = kw.get("num_classes", 10)
    x = mg.randn(batch, 1, side, side, device="cuda")
    y = mg.randint(0, classes, (batch,), device="cuda")
    groups.append(Group("lenet_step", f"LeNet-5 {side}x{side}, batch {batch}", "samples/s",
                        batch, [("SGD step (fwd+loss+bwd+update)", _train_step(mg, net, x, y))],
                        memory_bound=False, check=False,
                        reference=ctx.ref.lenet_step(side, batch) if ctx.ref and not ctx.smoke
                        else None))
    return groups


def _train_step(mg, model, x, y):
    opt = mg.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = mg.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return step


SUITES = {"lessons": lesson_builders, "ops": lambda only=None: [("ops", ops_groups)],
          "train": lambda only=None: [("train", train_groups)]}
