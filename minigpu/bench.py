"""Benchmark harness: ``python -m minigpu.bench [--suite lessons|ops|train|all] [--smoke]``.

Suites
    lessons  every optimisation lesson of the kernel files, variant against variant (the
             "before" first): coalescing, bank conflicts, the reduction ladder, the matmul
             ladder, the block-size/occupancy sweep, kernel fusion (bias+activation, Adam, LSTM
             cell), constant memory, branch divergence, and copy/compute overlap with streams.
    ops      the production primitives at sizes that fill an H200: matmul 4096^3, sums,
             elementwise maps, transpose, softmax.
    train    one training step (forward, loss, backward, SGD) of an MLP and of LeNet-5.

How it measures
    Each variant runs once to warm up (compilation, caches), ``--warmup`` - 1 more times, then
    ``--repeat`` times between two CUDA events recorded on minigpu's stream; the report is the
    median. Output buffers are allocated during the first call and handed out again, in the
    same order, on every later call (:class:`_ReplayAllocations`): the caching allocator
    already makes ``empty`` cheap, and this also keeps every timed call on the same addresses.
    Rates are GB/s for memory-bound kernels (bytes = the *minimum* traffic
    of the operation, the same for every variant of a lesson, so a variant that moves more
    bytes shows as a lower effective rate) or GFLOP/s. Every row is compared with references
    measured in the same run: ``x first`` (speed-up over the lesson's first variant), ``% copy``
    (share of the device-to-device copy bandwidth, for memory-bound rows) and ``vs torch``
    (PyTorch, or CuPy, when importable with a GPU; TF32 off so matmul is true float32).
    Variants that return a buffer are checked against the first variant (``check`` column).

``--smoke`` runs tiny sizes on Numba's CUDA simulator (the test suite does), to prove that every
lesson and op runs end to end; its timings are meaningless and labelled so. ``--json PATH``
writes the rows, ``--save`` writes them to ``benchmarks/results/<date>_<device>_<suite>.json``.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import json
import os
import platform
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

SUITES = ("lessons", "ops", "train")


# --- what a lesson is ----------------------------------------------------------------------------
@dataclass
class Lesson:
    name: str
    title: str
    where: str                     # file and kernels, before -> after
    build: Callable | None = None  # (ctx) -> Group

    def describe(self):
        return f"{self.name:17s} {self.title}  [{self.where}]"


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


class Context:
    """Sizes, random data and the modules a suite needs."""

    def __init__(self, smoke: bool, seed: int = 0):
        import numpy as np

        self.np = np
        self.smoke = smoke
        self.rng = np.random.default_rng(seed)
        self.cuda = importlib.import_module("minigpu.backends.cuda")
        self.device = _mod("device")
        self.stream = self.device.current_stream()
        self.ref = _reference()

    def size(self, full, smoke):
        return smoke if self.smoke else full

    def upload(self, a):
        return self.cuda.from_numpy(self.np.ascontiguousarray(a, dtype=self.np.float32))

    def uniform(self, *shape, lo=-1.0, hi=1.0):
        return self.rng.uniform(lo, hi, shape).astype(self.np.float32)

    def empty(self, n, dtype="float32"):
        return self.device.empty(n, self.np.dtype(dtype))


def _mod(name):
    return importlib.import_module(f"minigpu.backends.cuda.{name}")


def _view(buf, shape, strides=None, offset=0):
    from .backends.contract import View, contiguous_strides

    return View(buf, tuple(shape), tuple(strides or contiguous_strides(shape)), offset)


# --- the lessons ---------------------------------------------------------------------------------
def _transpose_data(ctx):
    R, C = ctx.size((8192, 8192), (24, 40))
    src = ctx.upload(ctx.uniform(R * C))
    view = _view(src, (C, R), (1, C))     # the transpose of a dense (R, C) matrix
    T = _mod("transpose")
    return R, C, src, view, T.as_batched_transpose(view), ctx.empty(R * C)


def lesson_coalescing(ctx):
    R, C, src, _, spec, out = _transpose_data(ctx)
    T, M = _mod("transpose"), _mod("memory")
    n = R * C
    return Group("coalescing", f"{R}x{C} float32 transpose", "GB/s", 2 * n * 4, [
        ("gather_strided (coalesced writes, strided reads)",
         lambda: (M._launch_1d(M.gather_strided_kernel, n, src, (C, R), (1, C), 0, out), out)[1]),
        ("transpose_naive (coalesced reads, strided writes)",
         lambda: T.transpose_copy(spec, out, "naive")),
        ("transpose_tiled_padded (both coalesced, via shared memory)",
         lambda: T.transpose_copy(spec, out, "padded")),
    ], tol=dict(rtol=0, atol=0))


def lesson_bank_conflicts(ctx):
    R, C, _, _, spec, out = _transpose_data(ctx)
    T = _mod("transpose")
    tile = f"{T.TILE}x{T.TILE}"
    return Group("bank_conflicts", f"{R}x{C} float32 transpose", "GB/s", 2 * R * C * 4, [
        (f"transpose_tiled_naive ({tile} tile: {T.TILE}-way conflicts)",
         lambda: T.transpose_copy(spec, out, "tiled_naive")),
        (f"transpose_tiled_padded ({T.TILE}x{T.TILE + 1} tile: conflict-free)",
         lambda: T.transpose_copy(spec, out, "padded")),
    ], tol=dict(rtol=0, atol=0))


def lesson_reduction(ctx):
    R = _mod("reduce")
    n = ctx.size(1 << 26, 300)
    x = _view(ctx.upload(ctx.rng.random(n)), (n,))
    variants = [(f"{name} ({R.MAX_BLOCK} threads)", functools_partial(fn, x))
                for name, fn in R.SUM_LADDER.items()
                if R.WARP_SHUFFLE or name not in R.SHUFFLE_RUNGS]
    return Group("reduction", f"sum of {n} float32", "GB/s", n * 4, variants,
                 tol=dict(rtol=1e-4, atol=1e-3))


def functools_partial(fn, *args, **kw):
    return lambda: fn(*args, **kw)


def lesson_matmul(ctx):
    MM = _mod("matmul")
    M, K, N = ctx.size((2048, 2048, 2048), (12, 14, 10))
    a = _view(ctx.upload(ctx.uniform(M * K)), (1, M, K))
    b = _view(ctx.upload(ctx.uniform(K * N)), (1, K, N))
    cfg, threads = MM.register_tiled_config()
    labels = {"naive": "naive (16x16, warp along M)", "coalesced": "coalesced (warp along N)",
              "tiled": "tiled (16x16 shared tiles)",
              "register_tiled": "register_tiled ({BM}x{BN}x{BK}, {TM}x{TN} per thread)".format(
                  **cfg)}
    variants = [(labels[name], functools_partial(fn, a, b))
                for name, fn in MM.MATMUL_LADDER.items()]
    return Group("matmul", f"{M}x{K} @ {K}x{N} float32", "GFLOP/s", 2 * M * N * K, variants,
                 memory_bound=False, tol=dict(rtol=1e-4, atol=1e-4 * K),
                 reference=ctx.ref.matmul(M, N, K) if ctx.ref else None)


def lesson_occupancy(ctx):
    O = _mod("occupancy")
    n = ctx.size(1 << 26, 200)
    x, y, out = ctx.upload(ctx.uniform(n)), ctx.upload(ctx.uniform(n)), ctx.empty(n)
    a = ctx.np.float32(2)
    blocks = O.BLOCK_SIZES if not ctx.smoke else (32, 64)
    if not ctx.device.SIMULATOR:  # compile it, so that the driver can report its registers
        O.saxpy(a, x, y, 256, out)
        ctx.device.synchronize()
    regs, source = _registers(O.saxpy_kernel, ctx)
    variants, notes = [], {}
    for block in blocks:
        name = f"saxpy, block {block}"
        variants.append((name, functools_partial(O.saxpy, a, x, y, block, out)))
        occ = O.theoretical_occupancy(regs, 0, block)
        notes[name] = (f"{occ.active_warps}/64 warps ({100 * occ.occupancy:.0f}%, limited by "
                       f"{occ.limited_by}; {regs} regs {source})")
    return Group("occupancy", f"{n} float32", "GB/s", 12 * n, variants, notes=notes)


def _registers(kernel, ctx):
    """Registers per thread: from the driver once the kernel ran on a GPU, else the static
    number ``python -m minigpu.inspect`` printed for it."""
    if not ctx.device.SIMULATOR:
        try:
            regs = kernel.get_regs_per_thread()
            if isinstance(regs, dict):
                regs = max(regs.values())
            if regs:
                return int(regs), "(driver)"
        except Exception:
            pass
    return 15, "(static, sm_90 ptxas)"


def lesson_fusion_bias_act(ctx):
    F = _mod("fused")
    R, C = ctx.size((16384, 4096), (5, 7))
    x = _view(ctx.upload(ctx.uniform(R * C)), (R, C))
    b = _view(ctx.upload(ctx.uniform(C)), (C,))
    return Group("fusion_bias_act", f"relu(x + bias), x {R}x{C} float32", "GB/s",
                 (2 * R * C + C) * 4, [
                     ("bias_act_unfused (add, then relu: 2 launches, 4 passes)",
                      functools_partial(F.bias_act_unfused, x, b, "relu")),
                     ("bias_act (fused: 1 launch, 2 passes)",
                      functools_partial(F.bias_act, x, b, "relu")),
                 ], tol=dict(rtol=0, atol=0))


def lesson_fusion_adam(ctx):
    O = _mod("optim")
    n = ctx.size(1 << 26, 100)
    bufs = [ctx.upload(ctx.uniform(n)) for _ in range(3)] + [ctx.upload(ctx.rng.random(n))]
    args = (1, 1e-3, 0.9, 0.999, 1e-8, 0.01)  # step, lr, betas, eps, weight decay
    return Group("fusion_adam", f"Adam step, {n} float32 parameters", "GB/s", 7 * n * 4, [
        ("adam_step_unfused_ (5 launches, 15 passes)",
         functools_partial(O.adam_step_unfused_, *bufs, *args)),
        ("adam_step_ (fused: 1 launch, 7 passes)", functools_partial(O.adam_step_, *bufs, *args)),
    ], check=False)


def lesson_fusion_lstm(ctx):
    L = _mod("lstm")
    N, H = ctx.size((4096, 1024), (3, 5))
    gates = _view(ctx.upload(ctx.uniform(N * 4 * H, lo=-3, hi=3)), (N, 4 * H))
    c_prev = _view(ctx.upload(ctx.uniform(N * H)), (N, H))
    return Group("fusion_lstm", f"LSTM cell, N={N} H={H} float32", "GB/s", 11 * N * H * 4, [
        ("lstm_cell_unfused (13 launches, 30 passes)",
         lambda: L.lstm_cell_unfused(gates, c_prev)[0]),
        ("lstm_cell (fused: 1 launch, 11 passes)", lambda: L.lstm_cell(gates, c_prev)[0]),
    ], tol=dict(rtol=1e-5, atol=1e-6))


def lesson_constant_memory(ctx):
    Cv = _mod("conv")
    N, C, H, W, OC, k = ctx.size((16, 3, 256, 256, 16, 5), (1, 2, 6, 6, 2, 3))
    x = _view(ctx.upload(ctx.uniform(N * C * H * W)), (N, C, H, W))
    w = ctx.uniform(OC, C, k, k)
    bias = ctx.uniform(OC)
    dims, pad = Cv._conv_geometry(x, w.shape, k // 2)
    n_out = N * OC * dims[4] * dims[5]
    out_g, out_c = ctx.empty(n_out), ctx.empty(n_out)
    wt = ctx.upload(w).reshape(w.shape)
    bs = ctx.upload(bias)
    const_kernel = Cv._constmem_kernel(w, bias)
    grid, block = ctx.device.launch_1d(n_out)
    xs = tuple(x.strides)

    def run_global():
        Cv.conv2d_global_kernel[grid, block, ctx.stream](x.buf, xs, x.offset, dims, pad, wt, bs,
                                                         out_g)
        return out_g

    def run_const():
        const_kernel[grid, block, ctx.stream](x.buf, xs, x.offset, dims, pad, out_c)
        return out_c

    flops = 2 * n_out * C * k * k
    return Group("constant_memory", f"direct conv {N}x{C}x{H}x{W}, {OC} filters {k}x{k}",
                 "GFLOP/s", flops, [
                     ("conv2d_direct_global (filter in global memory)", run_global),
                     ("conv2d_direct_constmem (filter in constant memory)", run_const),
                 ], memory_bound=False, tol=dict(rtol=1e-5, atol=1e-5))


def lesson_divergence(ctx):
    E = _mod("elementwise")
    n = ctx.size(1 << 26, 100)
    x = ctx.upload(ctx.rng.standard_normal(n))  # signs mixed inside every warp
    out = ctx.empty(n)
    a, b = ctx.np.float32(0.01), ctx.np.float32(0)

    def launcher(kernel):
        def run():
            E._launch(kernel, n, x, 0, out, a, b)
            return out
        return run

    return Group("divergence", f"leaky_relu of {n} float32, random signs", "GB/s", 8 * n, [
        ("leaky_relu_branch_dense (if/else)", launcher(E.leaky_relu_branch_dense)),
        ("leaky_relu_select_dense (select the slope, one multiply)",
         launcher(E.leaky_relu_select_dense)),
    ], tol=dict(rtol=0, atol=0))


def lesson_streams(ctx):
    """``streams.py``'s pair: copy k / compute k on one stream, against copies on a second
    stream overlapping the compute, ordered by events. Pinned host batches; the compute
    (``spin``) is calibrated to last about as long as one batch's copy, where overlap pays
    most. Rate: host-to-device GB/s of the whole program."""
    try:
        S, A = _mod("streams"), _mod("allocator")
    except ImportError as exc:
        return Group("streams", "-", "GB/s", 0, [], skipped=f"no streams lesson ({exc})")
    if not hasattr(S, "overlapped_copy_compute"):
        return Group("streams", "-", "GB/s", 0, [],
                     skipped="streams.py has no overlapped_copy_compute")
    n_batches, elems = ctx.size((8, 8 << 20), (3, 64))      # 8 x 32 MiB on a GPU
    hosts = []
    for k in range(n_batches):
        h = A.pinned_empty(elems, ctx.np.float32)
        h[:] = k
        hosts.append(h)
    compute_stream, copy_stream = ctx.stream, S.new_stream()
    iters = 2
    if not ctx.smoke and not ctx.device.SIMULATOR:  # one compute ~ one copy
        timer = Timer(ctx, 1, 3)
        probe = ctx.empty(elems)
        copy_ms, _ = timer.measure(lambda: S.copy_to_device_async(hosts[0], compute_stream,
                                                                  out=probe))
        spin_ms, _ = timer.measure(lambda: S.spin(probe, 64, compute_stream))
        iters = max(1, round(64 * copy_ms / max(spin_ms, 1e-3)))

    def compute(buf, stream):
        S.spin(buf, iters, stream)

    size = f"{elems * 4 >> 20} MiB" if elems * 4 >= 1 << 20 else f"{elems * 4} B"
    return Group("streams", f"{n_batches} pinned batches of {size}, "
                 f"compute {iters} FMA/element", "GB/s", n_batches * elems * 4, [
                     ("copy_then_compute (one stream: nothing overlaps)",
                      lambda: S.copy_then_compute(hosts, compute, compute_stream)),
                     ("overlapped_copy_compute (copy stream + events, 2 buffers)",
                      lambda: S.overlapped_copy_compute(hosts, compute, compute_stream,
                                                        copy_stream)),
                 ], memory_bound=False, tol=dict(rtol=1e-6, atol=1e-6))


LESSONS = [
    Lesson("coalescing", "coalesced vs strided global access",
           "memory.py gather_strided_kernel, transpose.py transpose_naive -> "
           "transpose_tiled_padded", lesson_coalescing),
    Lesson("bank_conflicts", "shared-memory tile without vs with +1 padding",
           "transpose.py transpose_tiled_naive -> transpose_tiled_padded",
           lesson_bank_conflicts),
    Lesson("reduction", "the reduction ladder",
           "reduce.py SUM_LADDER: interleaved -> sequential -> first_add -> shuffle_tail -> "
           "warp_shuffle -> grid_two_pass", lesson_reduction),
    Lesson("matmul", "the matmul ladder",
           "matmul.py MATMUL_LADDER: naive -> coalesced -> tiled -> register_tiled",
           lesson_matmul),
    Lesson("occupancy", "block size / occupancy sweep",
           "occupancy.py saxpy_kernel at 32..1024 threads, theoretical_occupancy",
           lesson_occupancy),
    Lesson("fusion_bias_act", "kernel fusion: bias + activation",
           "fused.py bias_act_unfused -> bias_act", lesson_fusion_bias_act),
    Lesson("fusion_adam", "kernel fusion: Adam step",
           "optim.py adam_step_unfused_ -> adam_step_", lesson_fusion_adam),
    Lesson("fusion_lstm", "kernel fusion: LSTM cell",
           "lstm.py lstm_cell_unfused -> lstm_cell", lesson_fusion_lstm),
    Lesson("constant_memory", "constant memory for conv filters",
           "conv.py conv2d_global_kernel -> conv2d_constmem_kernel", lesson_constant_memory),
    Lesson("divergence", "branch divergence vs predication (select)",
           "elementwise.py leaky_relu_branch_dense -> leaky_relu_select_dense",
           lesson_divergence),
    Lesson("streams", "overlapping host-to-device copies with compute (streams, events)",
           "streams.py copy_then_compute -> overlapped_copy_compute", lesson_streams),
]


# --- the ops suite -----------------------------------------------------------------------------
def ops_groups(ctx):
    cu = ctx.cuda
    ref = ctx.ref
    groups = []

    M = ctx.size(4096, 16)
    a = _view(ctx.upload(ctx.uniform(M * M)), (1, M, M))
    b = _view(ctx.upload(ctx.uniform(M * M)), (1, M, M))
    groups.append(Group("matmul", f"{M}x{M} @ {M}x{M} float32", "GFLOP/s", 2 * M ** 3,
                        [("matmul (register_tiled)", functools_partial(cu.matmul, a, b))],
                        memory_bound=False, reference=ref.matmul(M, M, M) if ref else None))

    n = ctx.size(1 << 26, 1000)
    x = _view(ctx.upload(ctx.rng.random(n)), (n,))
    y = _view(ctx.upload(ctx.rng.random(n)), (n,))
    groups.append(Group("sum_all", f"sum of {n} float32", "GB/s", 4 * n,
                        [("reduce('sum', all)", functools_partial(cu.reduce, "sum", x, (0,)))],
                        reference=ref.unary("sum", n) if ref else None))
    R, C = ctx.size((8192, 8192), (12, 40))
    m = _view(ctx.upload(ctx.rng.random(R * C)), (R, C))
    groups.append(Group("sum_rows", f"sum over axis 1 of {R}x{C} float32", "GB/s", 4 * R * C,
                        [("reduce('sum', axis=1)", functools_partial(cu.reduce, "sum", m, (1,)))],
                        reference=ref.rowsum(R, C) if ref else None))
    groups.append(Group("add", f"{n} float32", "GB/s", 12 * n,
                        [("binary('add')", functools_partial(cu.binary, "add", x, y))],
                        reference=ref.binary("add", n) if ref else None))
    groups.append(Group("relu", f"{n} float32", "GB/s", 8 * n,
                        [("unary('relu')", functools_partial(cu.unary, "relu", x))],
                        reference=ref.unary("relu", n) if ref else None))
    t = _view(m.buf, (C, R), (1, C))
    groups.append(Group("transpose", f"{R}x{C} float32", "GB/s", 8 * R * C,
                        [("contiguous(x.T)", functools_partial(cu.contiguous, t))],
                        reference=ref.transpose(R, C) if ref else None))
    SR, SC = ctx.size((65536, 1024), (6, 10))
    s = _view(ctx.upload(ctx.uniform(SR * SC, lo=-4, hi=4)), (SR, SC))
    groups.append(Group("softmax", f"rows of {SR}x{SC} float32", "GB/s", 8 * SR * SC,
                        [("softmax(dim=1)", functools_partial(cu.softmax, s, False))],
                        reference=ref.softmax(SR, SC) if ref else None))
    return groups


# --- the train suite ---------------------------------------------------------------------------
def train_groups(ctx):
    import minigpu as mg
    from minigpu.models import LeNet5

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


# --- references: PyTorch or CuPy, and the device copy ------------------------------------------
class _TorchReference:
    """The same work in PyTorch (cuBLAS/cuDNN), TF32 off, timed with torch's CUDA events."""

    name = "torch"

    def __init__(self, torch):
        self.t = torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        self.dev = torch.device("cuda")

    def _rand(self, *shape):
        return self.t.rand(*shape, device=self.dev)

    def time(self, fn, warmup, repeat):
        t = self.t
        for _ in range(max(warmup, 1)):
            fn()
        t.cuda.synchronize()
        times = []
        for _ in range(repeat):
            start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    def matmul(self, M, N, K):
        a, b = self._rand(M, K), self._rand(K, N)
        return "torch.mm (cuBLAS, TF32 off)", lambda: self.t.mm(a, b)

    def unary(self, op, n):
        x = self._rand(n)
        fn = {"sum": lambda: x.sum(), "relu": lambda: self.t.relu(x)}[op]
        return f"torch.{op}", fn

    def rowsum(self, R, C):
        x = self._rand(R, C)
        return "torch.sum(dim=1)", lambda: x.sum(1)

    def binary(self, op, n):
        x, y = self._rand(n), self._rand(n)
        return "torch.add", lambda: x + y

    def transpose(self, R, C):
        x = self._rand(R, C)
        return "torch .t().contiguous()", lambda: x.t().contiguous()

    def softmax(self, R, C):
        x = self._rand(R, C)
        return "torch.softmax", lambda: self.t.softmax(x, 1)

    def _step(self, model, x, y):
        nn = self.t.nn
        opt = self.t.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()

        def step():
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return step

    def mlp_step(self, sizes, batch):
        nn = self.t.nn
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        model = nn.Sequential(*layers).to(self.dev)
        x = self.t.randn(batch, sizes[0], device=self.dev)
        y = self.t.randint(0, sizes[-1], (batch,), device=self.dev)
        return "torch MLP step", self._step(model, x, y)

    def lenet_step(self, side, batch):
        nn = self.t.nn
        model = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(6, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
            nn.Linear(16 * (side // 4) ** 2, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, 10)).to(self.dev)
        x = self.t.randn(batch, 1, side, side, device=self.dev)
        y = self.t.randint(0, 10, (batch,), device=self.dev)
        return "torch LeNet-5 step (cuDNN, TF32 off)", self._step(model, x, y)


class _CupyReference(_TorchReference):
    """The same work in CuPy (cuBLAS; CuPy uses TF32 only when CUPY_TF32=1)."""

    name = "cupy"

    def __init__(self, cp):
        self.t = None
        self.cp = cp

    def _rand(self, *shape):
        return self.cp.random.random(shape, dtype=self.cp.float32)

    def time(self, fn, warmup, repeat):
        cp = self.cp
        for _ in range(max(warmup, 1)):
            fn()
        cp.cuda.Device().synchronize()
        times = []
        for _ in range(repeat):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end))
        return statistics.median(times)

    def matmul(self, M, N, K):
        a, b = self._rand(M, K), self._rand(K, N)
        return "cupy.matmul (cuBLAS)", lambda: a @ b

    def unary(self, op, n):
        x = self._rand(n)
        fn = {"sum": lambda: x.sum(), "relu": lambda: self.cp.maximum(x, 0)}[op]
        return f"cupy.{op}", fn

    def rowsum(self, R, C):
        x = self._rand(R, C)
        return "cupy.sum(axis=1)", lambda: x.sum(1)

    def binary(self, op, n):
        x, y = self._rand(n), self._rand(n)
        return "cupy.add", lambda: x + y

    def transpose(self, R, C):
        x = self._rand(R, C)
        return "cupy.ascontiguousarray(x.T)", lambda: self.cp.ascontiguousarray(x.T)

    def softmax(self, R, C):
        x = self._rand(R, C)
        cp = self.cp

        def softmax():
            e = cp.exp(x - x.max(1, keepdims=True))
            return e / e.sum(1, keepdims=True)
        return "cupy softmax (4 kernels)", softmax

    def mlp_step(self, sizes, batch):
        return None

    def lenet_step(self, side, batch):
        return None


_REF_CACHE: dict = {}


def _reference():
    """A PyTorch (or CuPy) reference on a real GPU, or None (simulator, or neither installed)."""
    if "ref" in _REF_CACHE:
        return _REF_CACHE["ref"]
    ref = None
    if not _mod("device").SIMULATOR:
        try:
            import torch

            if torch.cuda.is_available():
                ref = _TorchReference(torch)
        except Exception:
            ref = None
        if ref is None:
            try:
                import cupy

                cupy.cuda.runtime.getDeviceCount()
                ref = _CupyReference(cupy)
            except Exception:
                ref = None
    _REF_CACHE["ref"] = ref
    return ref


# --- timing --------------------------------------------------------------------------------------
class _ReplayAllocations:
    """While timing, ``device.empty`` in every kernel module hands out the buffers the first
    call allocated, in the same order: no timed call allocates, whatever the allocator, and
    every call works on the same addresses. A call that asks for a different size or dtype
    than recorded gets a fresh buffer, so results stay correct."""

    def __init__(self):
        self.device = _mod("device")
        self.real = self.device.empty
        self.buffers, self.index, self.recording = [], 0, True

    def __call__(self, *args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        if self.recording:
            buf = self.real(*args, **kwargs)
            self.buffers.append((key, buf))
            return buf
        if self.index < len(self.buffers) and self.buffers[self.index][0] == key:
            buf = self.buffers[self.index][1]
            self.index += 1
            return buf
        self.index = len(self.buffers)  # out of step: allocate from here on
        return self.real(*args, **kwargs)

    def rewind(self):
        self.recording, self.index = False, 0

    @contextlib.contextmanager
    def installed(self):
        patched = []
        for name, mod in list(sys.modules.items()):
            if name.startswith("minigpu.backends.cuda") and getattr(mod, "empty", None) is \
                    self.real:
                patched.append(mod)
                mod.empty = self
        try:
            yield self
        finally:
            for mod in patched:
                mod.empty = self.real


class Timer:
    def __init__(self, ctx, warmup: int, repeat: int):
        self.ctx, self.warmup, self.repeat = ctx, max(warmup, 1), max(repeat, 1)
        from numba import cuda

        self.nbcuda = cuda

    def measure(self, fn):
        """(median ms, last result): first call records allocations, then warm-up, then
        ``repeat`` timed calls."""
        device, stream = self.ctx.device, self.ctx.stream
        replay = _ReplayAllocations()
        with replay.installed():
            result = fn()
            for _ in range(self.warmup - 1):
                replay.rewind()
                result = fn()
            device.synchronize()
            times = []
            for _ in range(self.repeat):
                replay.rewind()
                if device.SIMULATOR:  # events carry no time there: wall clock, meaningless
                    t0 = time.perf_counter()
                    result = fn()
                    device.synchronize()
                    times.append(1e3 * (time.perf_counter() - t0))
                    continue
                start, end = self.nbcuda.event(), self.nbcuda.event()
                start.record(stream)
                result = fn()
                end.record(stream)
                end.synchronize()
                times.append(self.nbcuda.event_elapsed_time(start, end))
        return statistics.median(times), result


def copy_bandwidth(ctx, timer):
    """GB/s of a device-to-device copy (``cudaMemcpyAsync``) of 256 MiB (read + write)."""
    n = ctx.size(1 << 26, 1024)
    src, dst = ctx.upload(ctx.np.zeros(n)), ctx.empty(n)
    ms, _ = timer.measure(lambda: dst.copy_to_device(src, stream=ctx.stream))
    return 2 * n * 4 / (ms * 1e-3) / 1e9, ms


# --- running and reporting -----------------------------------------------------------------------
def _host(result):
    import numpy as np

    if result is None or not hasattr(result, "copy_to_host"):
        return None
    return np.asarray(result.copy_to_host())


def run_group(group: Group, suite: str, timer: Timer, copy_gbps, ctx) -> list[dict]:
    import numpy as np

    rows = []
    if group.skipped or not group.variants:
        rows.append(dict(suite=suite, group=group.name, variant="(skipped)", size=group.size,
                         note=group.skipped or "no variants"))
        return rows
    first_ms = first_out = None
    for k, (name, fn) in enumerate(group.variants):
        row = dict(suite=suite, group=group.name, variant=name, size=group.size,
                   unit=group.unit)
        try:
            ms, result = timer.measure(fn)
        except Exception as exc:  # report and go on: one broken variant must not hide others
            row.update(error=f"{type(exc).__name__}: {exc}"[:300])
            rows.append(row)
            continue
        rate = group.work / (ms * 1e-3) / (1e9 if group.unit != "samples/s" else 1)
        row.update(ms=ms, rate=rate, note=group.notes.get(name, ""))
        if first_ms is None:
            first_ms = ms
        row["x_first"] = first_ms / ms
        if group.memory_bound and copy_gbps:
            row["pct_copy"] = 100 * rate / copy_gbps
        if group.check:
            out = _host(result)
            if k == 0:
                first_out = out
            elif out is not None and first_out is not None:
                ok = out.shape == first_out.shape and np.allclose(out, first_out, **group.tol)
                row["check"] = "equal" if ok else "DIFFERS"
        rows.append(row)
    if group.reference:
        name, fn = group.reference
        try:
            ms = ctx.ref.time(fn, timer.warmup, timer.repeat)
            ref_rate = group.work / (ms * 1e-3) / (1e9 if group.unit != "samples/s" else 1)
            for row in rows:
                if "rate" in row:
                    row["vs_ref"] = row["rate"] / ref_rate
            rows.append(dict(suite=suite, group=group.name, variant=f"reference: {name}",
                             size=group.size, unit=group.unit, ms=ms, rate=ref_rate,
                             reference=True))
        except Exception as exc:
            rows.append(dict(suite=suite, group=group.name, variant=f"reference: {name}",
                             error=f"{type(exc).__name__}: {exc}"[:300], reference=True))
    return rows


def format_rows(rows, meta) -> str:
    out = []
    group = None
    ref_name = meta.get("reference") or "none"
    for row in rows:
        if row["group"] != group:
            group = row["group"]
            out.append("")
            out.append(f"== {row['suite']} / {group}: {row.get('size', '')}")
        if "error" in row:
            out.append(f"  {row['variant']:60s} ERROR {row['error']}")
            continue
        if "ms" not in row:
            out.append(f"  {row['variant']:60s} {row.get('note', '')}")
            continue
        cells = [f"{row['ms']:10.3f} ms", f"{row['rate']:10.1f} {row['unit']:9s}"]
        if not row.get("reference"):
            cells.append(f"x first {row['x_first']:5.2f}")
            if "pct_copy" in row:
                cells.append(f"{row['pct_copy']:5.1f}% copy")
            if "vs_ref" in row:
                cells.append(f"{row['vs_ref']:5.2f}x {ref_name}")
            if "check" in row:
                cells.append(row["check"])
            if row.get("note"):
                cells.append(row["note"])
        out.append(f"  {row['variant']:60s} " + "  ".join(cells))
    return "\n".join(out)


def device_name(device) -> str:
    if device.SIMULATOR:
        return "simulator"
    from numba import cuda

    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def run_suite(suite: str, ctx: Context, timer: Timer, copy_gbps, only=None, log=print):
    rows = []
    if suite == "lessons":
        builders = [(lesson.name, lesson.build) for lesson in LESSONS
                    if not only or lesson.name in only]
    elif suite == "ops":
        builders = [("ops", ops_groups)]
    else:
        builders = [("train", train_groups)]
    for name, build in builders:
        try:
            groups = build(ctx)
        except Exception as exc:
            rows.append(dict(suite=suite, group=name, variant="(setup)", size="",
                             error=f"{type(exc).__name__}: {exc}"[:300]))
            continue
        for group in groups if isinstance(groups, list) else [groups]:
            new = run_group(group, suite, timer, copy_gbps, ctx)
            rows += new
            log(format_rows(new, dict(reference=ctx.ref.name if ctx.ref else None)))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m minigpu.bench",
        description="Time minigpu's kernels: the optimisation lessons, the production ops, "
                    "and training steps.")
    parser.add_argument("--suite", choices=SUITES + ("all",), default="lessons")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes on Numba's CUDA simulator: proves the harness runs; "
                             "timings meaningless")
    parser.add_argument("--lesson", action="append", metavar="NAME",
                        help="only this lesson (repeatable; lessons suite)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs per variant (median reported; default 20, smoke 1)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed runs first (default 3, smoke 1)")
    parser.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    parser.add_argument("--save", action="store_true",
                        help="write JSON to benchmarks/results/<date>_<device>_<suite>.json")
    parser.add_argument("--list", action="store_true", help="list the lessons and exit")
    args = parser.parse_args(argv)

    if args.list:
        print("lessons (python -m minigpu.bench --suite lessons):")
        for lesson in LESSONS:
            print("  " + lesson.describe())
        return 0
    if args.smoke and "numba" not in sys.modules:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba is first imported
    device = _mod("device")
    if not device.SIMULATOR:
        from numba import cuda

        if not cuda.is_available():
            print("No CUDA GPU here: timings need one. `python -m minigpu.bench --smoke` runs "
                  "the harness on Numba's simulator (timings meaningless).", file=sys.stderr)
            return 2
    warmup = args.warmup if args.warmup is not None else (1 if args.smoke else 3)
    repeat = args.repeat if args.repeat is not None else (1 if args.smoke else 20)
    ctx = Context(smoke=args.smoke)
    timer = Timer(ctx, warmup, repeat)
    dev_name = device_name(device)
    if device.SIMULATOR:
        print("*** Numba CUDA simulator: every timing below is MEANINGLESS (this run only "
              "proves that the harness and every lesson work) ***")
    elif args.smoke:
        print("*** smoke sizes: timings are not representative ***")
    copy_gbps, copy_ms = copy_bandwidth(ctx, timer)
    ref = ctx.ref.name if ctx.ref else None
    print(f"device: {dev_name}; median of {repeat} runs after {warmup} warm-up; "
          f"device-to-device copy: {copy_gbps:.1f} GB/s; reference library: "
          f"{ref or 'none importable'}")
    suites = SUITES if args.suite == "all" else (args.suite,)
    rows = []
    for suite in suites:
        rows += run_suite(suite, ctx, timer, copy_gbps, only=args.lesson)
    meta = dict(date=datetime.date.today().isoformat(), device=dev_name,
                simulator=bool(device.SIMULATOR), smoke=args.smoke, warmup=warmup,
                repeat=repeat, copy_gbps=copy_gbps, reference=ref, suites=list(suites),
                python=platform.python_version(),
                meaningless=bool(device.SIMULATOR))
    payload = dict(meta=meta, rows=rows)
    paths = []
    if args.json:
        paths.append(Path(args.json))
    if args.save:
        slug = re.sub(r"[^a-z0-9]+", "-", dev_name.lower()).strip("-")
        paths.append(Path("benchmarks/results") /
                     f"{meta['date']}_{slug}_{args.suite}.json")
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=1, default=float))
        print(f"wrote {path}")
    errors = [r for r in rows if "error" in r]
    differs = [r for r in rows if r.get("check") == "DIFFERS"]
    print(f"\n{len(rows)} rows, {len(errors)} errors, {len(differs)} result mismatches")
    return 1 if errors or differs else 0


if __name__ == "__main__":
    sys.exit(main())
