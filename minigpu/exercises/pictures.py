"""Pictures of an exercise: a solution's access pattern, traced on the simulator, next to the
reference solution's (run with the same constants, on the same inputs).

``python -m minigpu.exercises plot NAME [FILE]`` and ``check NAME FILE --plot DIR`` call
:func:`draw_solution`; ``plot --all DIR`` (:func:`draw_all`) draws every reference, the
pictures of the course pages (``docs/course/images/exercise_NAME.png``).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from ..lessons import draw
from .harness import _execute, _problem, constants_of, load
from .specs import BY_NAME, DEBUGGING

# view name -> (the view, which part of the launch it traces: (block, warp))
VIEWS = {
    "lanes": (draw.lanes, (0, None)),
    "banks": (draw.banks, (0, 0)),
    "masks": (draw.masks, (0, None)),
    "tree": (draw.tree, (0, None)),
    "network": (draw.network, (0, None)),
    "heat": (draw.heat, ((1, 1), None)),
    "counts": (draw.counts, (None, None)),
    "sweeps": (draw.sweeps, (0, 0)),
    "traffic": (draw.traffic, (None, None)),
}


def restart_on_simulator():
    """Pictures are traced on the simulator: restart this command under it if needed."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        os.execv(sys.executable, [sys.executable, "-m", "minigpu.exercises", *sys.argv[1:]])


def _params(ex, c, shape, tr):
    view, params = ex.picture[:2]
    params = dict(params)
    if view in ("tree", "network"):
        params.setdefault("array", next(iter(tr.arrays("shared")), None))
        params["n"] = min(c.get("TPB", 32), 32)
    if view == "counts":
        params.setdefault("space", "global")
        arr = params["array"]
        length = tr.shape(arr, 0) or (shape if isinstance(shape, int) else shape[0],)
        params["n"] = int(np.prod(length))
    if view == "heat":
        params["arrays"] = [a for a in tr.arrays("global") if tr.shape(a, 0) and
                            len(tr.shape(a, 0)) == 2][:2]
        params["vmax"] = params["tile"] = c["TILE"]   # one colour scale: 1 ... TILE loads
    if view == "sweeps":
        params["cols"] = shape[1]
    return params


def _trace(ex, module, c, shape):
    block, warp = VIEWS[ex.picture[0]][1]
    ins, out = _problem(ex, c, shape, 0)
    return draw.traced(lambda: _execute(ex, module, c, shape, ins, out), block, warp)


def picture(name, path=None, label=None) -> draw.Picture:
    """The :class:`draw.Picture` of exercise ``name``: the solution at ``path`` (if any,
    titled ``label``) next to the reference with the same constants, on the first size of
    seed 0."""
    ex = BY_NAME[name]
    if not ex.picture:    # a RuntimeError: check notes it, plot says it
        raise RuntimeError(f"exercise {name} has no picture: its bug shows in the sanitizer's "
                           f"message (see {ex.chapter})")
    solution = load(path) if path else None
    c = constants_of(ex, solution if solution else load(Path(__file__).parent / "solutions"
                                                         / f"{name}.py"))
    reference = load(Path(__file__).parent / "solutions" / f"{name}.py", c)
    shape = ex.sizes(np.random.default_rng(0), c)[ex.picture[2] if len(ex.picture) > 2 else 0]
    view = VIEWS[ex.picture[0]][0]
    panels = []
    if solution is not None:
        tr = _trace(ex, solution, c, shape)
        panels.append(draw.panel(label or f"your {Path(path).name}", view, tr,
                                 **_params(ex, c, shape, tr)))
    tr = _trace(ex, reference, c, shape)
    panels.append(draw.panel("reference solution" + (" (your constants)" if path else ""),
                             view, tr, **_params(ex, c, shape, tr)))
    consts = ", ".join(f"{k} = {v}" for k, v in c.items())
    size = "x".join(map(str, shape)) if isinstance(shape, tuple) else str(shape)
    return draw.Picture(f"exercise_{name}", f"{name}: {ex.summary}; {consts}, size {size}. "
                        f"{CAPTIONS[ex.picture[0]]}", tuple(panels),
                        share_y=ex.picture[0] in ("counts", "traffic"))


CAPTIONS = {
    "lanes": "Lanes of the first warp that loads it against the 32-byte sectors it fetches: "
             "a coalesced load fills few, neighbouring sectors.",
    "banks": "Warp 0's first shared load: the tile coloured by bank, the words read marked; "
             "the bars count words per bank (the tallest is the wavefronts).",
    "masks": "Which threads of block 0 touch shared memory in each barrier interval "
             "(pink: idle lanes of a warp that still issues the access).",
    "tree": "Block 0's shared-memory tree: at each barrier interval, an arrow from every "
            "element a thread reads to the one it writes.",
    "network": "Block 0's compare-exchange network in shared memory, one step per barrier.",
    "heat": "Global loads per element by block (1, 1): once per element is the goal.",
    "counts": "Accesses per element over the whole launch.",
    "sweeps": "Warp 0's loads of x, request after request: each ramp is one pass over its row.",
    "traffic": "Global bytes per launch and array over the whole run.",
}


def draw_solution(name, path, out_dir, label=None) -> Path:
    """Write ``exercise_NAME.png`` (the solution at ``path``, if any, next to the reference)
    into ``out_dir``; returns its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pic = picture(name, path, label)
    return draw.render(pic, out / f"{pic.name}.png")


def draw_all(out_dir) -> list[Path]:
    """The pictures of the course pages, into ``out_dir``: every exercise's reference that has
    a picture, a debugging exercise's starter (its stub, with the bug) next to its fix."""
    stubs = Path(__file__).parent / "stubs"
    return [draw_solution(ex.name, stubs / f"{ex.name}.py", out_dir, "the starter (the bug)")
            if ex in DEBUGGING else draw_solution(ex.name, None, out_dir)
            for ex in BY_NAME.values() if ex.picture]
