"""Graded kernel exercises that need no GPU: ``python -m minigpu.exercises list | stub | check``.

Each exercise has a stub to fill in (``stubs/``), a reference solution kept apart
(``solutions/``), and in ``specs.py`` the block-size constants it reads from your module, the
sizes drawn from them, a NumPy reference and access budgets; ``grader.py`` grades a solution in
three layers (correctness under the sanitizer, measured access budgets, static sm_90 limits)
and ``pictures.py`` draws its access pattern next to the reference's. The course pages in
``docs/course/`` teach what each one needs; ``EXERCISES`` is in course order.
"""
from pathlib import Path

from .grader import Result, check
from .specs import BY_NAME, EXERCISES

HERE = Path(__file__).parent


def stub_path(name: str) -> Path:
    return HERE / "stubs" / f"{name}.py"


def solution_path(name: str) -> Path:
    return HERE / "solutions" / f"{name}.py"


__all__ = ["EXERCISES", "BY_NAME", "Result", "check", "stub_path", "solution_path"]
