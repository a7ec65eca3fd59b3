"""The lessons' pictures: each lesson's ``pictures()`` traces its before and after kernels on
the simulator and returns :class:`draw.Picture` records; this writes them as PNG files.

``python -m minigpu.lessons [NAME ...] --plot DIR`` calls :func:`write_lesson_pictures`; the
course's pictures (``docs/course/images/``) are made by it and by
``python -m minigpu.exercises plot --all DIR`` (the exercises' reference solutions).
"""
from __future__ import annotations

from pathlib import Path

from . import draw


def write_lesson_pictures(lesson, out_dir) -> list[Path]:
    """Render every picture of ``lesson`` into ``out_dir`` (created); returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [draw.render(picture, out / f"{picture.name}.png") for picture in lesson.pictures()]
