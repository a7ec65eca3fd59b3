"""Every lesson measured: each variant run under the simulator with ``minigpu.cuda.counters()``.

``python -m minigpu.lessons`` prints, per experiment, the counters of its variants side by side
(every launch of a variant summed); ``--markdown`` rewrites the measured tables in
``docs/lessons.md`` (between the ``counters`` markers); ``--production`` prints the sector
efficiency of the production kernels (:func:`production`). Sizes are the small (simulator) ones.
"""
from __future__ import annotations

from pathlib import Path

BEGIN, END = "<!-- counters:begin (python -m minigpu.lessons --markdown) -->", "<!-- counters:end -->"
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
    from .. import cuda
    from ..simulator.counters import total
    from .record import Inputs

    problem = experiment.build(inputs or Inputs(small=True))
    out = []
    for variant in experiment.runnable(small=True):
        with cuda.counters() as launches:
            variant.run(problem)
        out.append(total(launches, variant.name))
    return problem, out


def measure_all(lessons=None):
    """[(lesson, experiment, problem, [per-variant totals])] for every lesson of ``lessons.ALL``."""
    from . import ALL
    return [(lesson, exp, *measure_experiment(exp))
            for lesson in (lessons or ALL) for exp in lesson.experiments]


def text(measured):
    from ..simulator.counters import table
    return "\n\n".join(f"== {lesson.name} / {exp.name}: {problem.size}\n{table(rows)}"
                       for lesson, exp, problem, rows in measured)


def markdown(measured):
    parts = []
    for lesson, exp, problem, rows in measured:
        head = ["variant"] + [h for h, _ in COLUMNS]
        lines = [f"**{lesson.name} / {exp.name}** ({problem.size}):", "",
                 "| " + " | ".join(head) + " |", "|---" + "|---:" * len(COLUMNS) + "|"]
        lines += ["| " + " | ".join([f"`{r.name}`"] + [str(f(r.metrics)) for _, f in COLUMNS])
                  + " |" for r in rows]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def updated_doc(measured, doc_text):
    """``doc_text`` with the part between the markers replaced by the measured tables."""
    start, end = doc_text.index(BEGIN) + len(BEGIN), doc_text.index(END)
    return doc_text[:start] + "\n" + markdown(measured) + "\n" + doc_text[end:]
