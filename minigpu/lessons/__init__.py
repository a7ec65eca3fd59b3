"""The GPU optimisation lessons: one module per technique, each a "before" and an "after".

Every module owns its "before" kernels and one :class:`record.Lesson`: title, what it teaches,
and experiments whose variants run the same way (``variant.run(experiment.build(inputs))``);
the last variant is the production kernel, imported from ``minigpu.backends.cuda``. ``ALL`` is
the only list of lessons: the benchmark (``python -m minigpu.tools.bench``), the static kernel
report (``python -m minigpu.tools.kernel_report``), the tests and the docs check
(``docs/lessons.md``) all derive from it.

Lessons import production building blocks; production never imports lessons.
"""
from . import (bank_conflicts, coalescing, constant_memory, divergence, fusion, matmul,
               occupancy, reduction, streams, unrolling)
from . import attention, graphs, half_precision, scan, sort

ALL = (coalescing.LESSON, bank_conflicts.LESSON, reduction.LESSON, matmul.LESSON,
       occupancy.LESSON, fusion.LESSON, constant_memory.LESSON, divergence.LESSON,
       streams.LESSON, unrolling.LESSON, scan.LESSON, sort.LESSON, attention.LESSON,
       half_precision.LESSON, graphs.LESSON)

BY_NAME = {lesson.name: lesson for lesson in ALL}
