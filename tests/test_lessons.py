"""``minigpu.lessons``: the one list of lessons, its records and the docs (the layering, that
production never imports a lesson, is ``test_layering.py``).

Every variant running and agreeing is ``test_bench.py::test_lessons_smoke`` (the benchmark
runs exactly ``variant.run(experiment.build(inputs))``); the kernels compiling for sm_90 is
``test_kernel_report.py``.
"""
import re
from pathlib import Path

from minigpu import lessons

ROOT = Path(__file__).resolve().parents[1]


def test_names_are_unique_and_every_module_has_its_record():
    names = [lesson.name for lesson in lessons.ALL]
    assert len(names) == len(set(names))
    modules = {p.stem for p in (ROOT / "minigpu" / "lessons").glob("*.py")} - {
        "__init__", "__main__", "record", "measure", "draw", "pictures"}
    assert modules == set(names)
    experiments = [e.name for lesson in lessons.ALL for e in lesson.experiments]
    assert len(experiments) == len(set(experiments))


def test_the_last_variant_is_production_or_says_why_not():
    for lesson in lessons.ALL:
        for exp in lesson.experiments:
            assert len(exp.variants) >= 2, exp.name
            last = exp.variants[-1]
            assert last.production != bool(exp.no_production), (exp.name, last.name)
            assert not any(v.production for v in exp.variants[:-1] if v.name == last.name)


def test_docs_have_one_section_per_lesson():
    """docs/lessons.md: every lesson has a ``## N. Title`` section naming it with
    ``(lesson `name`)``, and every numbered section names a lesson."""
    text = (ROOT / "docs" / "lessons.md").read_text()
    sections = re.findall(r"^## \d+\. .*$", text, re.M)
    named = [re.search(r"\(lesson `(\w+)`\)", s) for s in sections]
    assert all(named), [s for s, m in zip(sections, named) if not m]
    assert sorted(m.group(1) for m in named) == sorted(lesson.name for lesson in lessons.ALL)


def test_every_experiment_says_what_to_look_for_and_lessons_have_pictures():
    """The text the CLI prints under each table, and the before/after pictures (lessons
    about timing alone have none: the simulator cannot see time)."""
    for lesson in lessons.ALL:
        for exp in lesson.experiments:
            assert len(exp.look_for) > 60, exp.name
    timing_only = {"streams", "unrolling", "graphs"}  # graphs: a whole step, host time
    assert {lesson.name for lesson in lessons.ALL if lesson.pictures is list} == timing_only


def test_cli_names_a_bad_lesson_and_lists_the_good_ones():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "minigpu.lessons", "coalesing"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "unknown lesson 'coalesing'; the lessons are: coalescing, bank_conflicts" in r.stderr
    r = subprocess.run([sys.executable, "-m", "minigpu.lessons", "--list"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and all(lesson.name in r.stdout for lesson in lessons.ALL)


def test_streams_prints_no_speedup_on_the_simulator():
    """Nothing is timed on the simulator: the lesson's own command prints no number for it."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "minigpu.lessons.streams"], capture_output=True,
                       text=True, env={**__import__("os").environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert r.returncode == 0, r.stderr
    speed = [line for line in r.stdout.splitlines() if line.startswith("speedup")]
    assert speed == ["speedup                not timed"], r.stdout
    assert not re.search(r"_ms\s+\d", r.stdout)
