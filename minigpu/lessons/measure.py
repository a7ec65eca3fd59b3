"""Every lesson measured: each variant run under the simulator with ``minigpu.cuda.counters()``.

``python -m minigpu.lessons`` prints, per experiment, the counters of its variants side by side
(every launch of a variant summed); ``--markdown`` rewrites the measured tables in
``docs/lessons.md`` (between the ``counters`` markers); ``--production`` prints the sector
efficiency of the production kernels (:func:`production`). Sizes are the small (simulator) ones.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import minigpu as mg
import minigpu.nn.functional as F

from .. import cuda
from ..backends.cuda.matmul import PRODUCTION, matmul_register_tiled
from ..simulator.counters import SECTOR, table, total
from . import ALL
from .record import Inputs

BEGIN, END = "<!-- counters:begin (python -m minigpu.lessons --markdown) -->", "<!-- counters:end -->"
PROD_BEGIN = "<!-- production:begin (python -m minigpu.lessons --production --markdown) -->"
PROD_END = "<!-- production:end -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "lessons.md"

COLUMNS = (  # (header, function of the metrics dict) for the markdown tables
    ("global ld req", lambda m: m["global_load_requests"]),
    ("ld sectors/req", lambda m: _ratio(m["global_load_sectors"], m["global_load_requests"])),
    ("st sectors/req", lambda m: _ratio(m["global_store_sectors"], m["global_store_requests"])),
    ("shared ld req", lambda m: m["shared_load_requests"]),
    ("ld wavefronts/req", lambda m: _ratio(m["shared_load_wavefronts"], m["shared_load_requests"])),
    ("st wavefronts/req", lambda m: _ratio(m["shared_store_wavefronts"],
                                           m["shared_store_requests"])),
    ("barriers", lambda m: m["barriers"]),
    ("warp eff.", lambda m: _pct(m["warp_efficiency"])),
    ("global bytes", lambda m: f"{m['bytes_moved']:,}"),
    ("sector eff.", lambda m: _pct(m["sector_efficiency"])),
)


def _ratio(a, b):
    return f"{a / b:.2f}" if b else "-"


def _pct(x):
    return "-" if x is None else f"{100 * x:.1f} %"


def measure_experiment(experiment, inputs=None):
    """(problem, [KernelCounters summed per variant]) of one experiment at the small size."""

    problem = experiment.build(inputs or Inputs(small=True))
    out = []
    for variant in experiment.runnable(small=True):
        with cuda.counters() as launches:
            variant.run(problem)
        out.append(total(launches, variant.name))
    return problem, out


def measure_all(lessons=None):
    """[(lesson, experiment, problem, [per-variant totals])] for every lesson of ``lessons.ALL``."""
    return [(lesson, exp, *measure_experiment(exp))
            for lesson in (lessons or ALL) for exp in lesson.experiments]


def text(measured):
    return "\n\n".join(f"== {lesson.name} / {exp.name}: {problem.size}\n{table(rows)}\n"
                       f"{_look_for(exp)}" for lesson, exp, problem, rows in measured)


def _look_for(exp):
    return textwrap.fill(f"What to look for: {exp.look_for}", 100, subsequent_indent="  ")


def markdown(measured):
    parts = []
    for lesson, exp, problem, rows in measured:
        head = ["variant"] + [h for h, _ in COLUMNS]
        lines = [f"**{lesson.name} / {exp.name}** ({problem.size}):", "",
                 "| " + " | ".join(head) + " |", "|---" + "|---:" * len(COLUMNS) + "|"]
        lines += ["| " + " | ".join([f"`{r.name}`"] + [str(f(r.metrics)) for _, f in COLUMNS])
                  + " |" for r in rows]
        lines += ["", f"*What to look for:* {exp.look_for}"]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def between(doc_text, begin, end, body):
    """``doc_text`` with the part between the markers ``begin`` and ``end`` replaced."""
    start, stop = doc_text.index(begin) + len(begin), doc_text.index(end)
    return doc_text[:start] + "\n" + body + "\n" + doc_text[stop:]


def updated_doc(measured, doc_text):
    """``doc_text`` with the part between the counters markers replaced by the tables."""
    return between(doc_text, BEGIN, END, markdown(measured))


# --- production kernels ---------------------------------------------------------------------

def _production_cases():
    """(label, setup) pairs: setup() -> (run, useful bytes, kernel-name filter, loads only).
    Useful bytes: each input read once plus the output written once (float32)."""

    def t(*shape):
        return mg.randn(*shape, device="cuda")

    R, C = 64, 96
    x, y, row, col = t(R, C), t(R, C), t(C), t(R, 1)
    img, w = t(2, 3, 10, 10), t(4, 3, 3, 3)
    a, b = t(32, 64), t(64, 32)
    f = 4  # bytes per float32
    n = R * C * f
    return [
        ("elementwise dense (x + y)", lambda: x + y, 3 * n, None, False),
        ("elementwise broadcast row (x + b[C])", lambda: x + row, 2 * n + C * f, None, False),
        ("elementwise broadcast col (x + b[R, 1])", lambda: x + col, 2 * n + R * f, None, False),
        ("reduce rows (x.sum(1))", lambda: x.sum(1), n + R * f, None, False),
        ("reduce columns (x.sum(0))", lambda: x.sum(0), n + C * f, None, False),
        ("softmax (last dim)", lambda: F.softmax(x, -1), 2 * n, None, False),
        ("transpose (x.T.contiguous())", lambda: x.T.contiguous(), 2 * n, None, False),
        ("im2col (conv2d 2x3x10x10, 3x3)", lambda: F.conv2d(img, w),
         (2 * 3 * 10 * 10 + 2 * 27 * 64) * f, "im2col", False),
        ("GEMM loads, simulator tiles 16x16x4 (32x64 @ 64x32)", lambda: a @ b,
         (32 * 64 + 64 * 32) * f, "matmul", True),
        ("GEMM loads, production tiles 128x128x8 (128x16 @ 16x128)", _production_gemm(),
         2 * 128 * 16 * f, "matmul", True),
    ]


def _production_gemm():
    """The register-tiled GEMM at its production configuration (the simulator's default tiles
    are smaller, for speed): one 128x128 block tile, K = 16 (two BK = 8 slices)."""

    inputs = Inputs(small=True)
    a, b = inputs.tensor(1, 128, 16), inputs.tensor(1, 16, 128)
    return lambda: matmul_register_tiled(a, b, **PRODUCTION)


def production():
    """[(label, [kernel names], bytes moved, useful bytes, load / store / overall sector
    efficiency)] for the production kernels, measured on the simulator at small sizes."""

    out = []
    for label, run, useful, only, loads_only in _production_cases():
        with cuda.counters() as launches:
            run()
        picked = [e for e in launches if only is None or only in e.name]
        m = total(picked).metrics
        req_ld, req_st = m["_raw"][:2]
        ld, st = SECTOR * m["global_load_sectors"], SECTOR * m["global_store_sectors"]
        moved = ld if loads_only else m["bytes_moved"]
        out.append((label, sorted({e.name.split(".")[-1] for e in picked}), moved, useful,
                    req_ld / ld if ld else None, req_st / st if st else None,
                    (req_ld / ld if loads_only else m["sector_efficiency"])))
    return out


def production_table(rows=None):
    rows = production() if rows is None else rows
    head = ("kernel", "launches", "bytes moved", "useful bytes", "moved/useful", "load eff.",
            "store eff.", "sector eff.")
    lines = ["| " + " | ".join(head) + " |", "|---|---" + "|---:" * 6 + "|"]
    for label, names, moved, useful, ld, st, eff in rows:
        lines.append(f"| {label} | {', '.join(names)} | {moved:,} | {useful:,} | "
                     f"{moved / useful:.2f} | {_pct(ld)} | {_pct(st)} | {_pct(eff)} |")
    return "\n".join(lines)
