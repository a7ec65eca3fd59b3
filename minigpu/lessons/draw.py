"""Pictures of access patterns, drawn from a simulator trace (``minigpu.cuda.trace``).

Each view draws one panel from a :class:`minigpu.simulator.access_trace.Trace`:

- :func:`lanes`    lanes -> addresses of one warp's global request, its 32-byte sectors shaded
                   (coalesced: 4 neighbouring sectors; strided: one sector per lane);
- :func:`banks`    a shared tile coloured by bank, the words one warp's request reads marked,
                   and how many words each bank must serve (the wavefronts);
- :func:`masks`    which threads of a block execute each step (divergence: a warp with idle
                   lanes still issues the step; a warp with no active lane skips it);
- :func:`tree`     who reads what at each barrier interval (a reduction or scan tree);
- :func:`network`  the compare-exchange pairs of each step (a sorting network);
- :func:`heat`     how many times one block loads each element of a 2-D array (tiling);
- :func:`threads`  which block and thread writes each element (the launch geometry);
- :func:`counts`   accesses per element of a 1-D array (e.g. atomics per histogram bin);
- :func:`sweeps`   the columns a warp loads, request after request (passes over the data);
- :func:`traffic`  global bytes loaded and stored per array.

A :class:`Picture` is one or more panels side by side (before | after) with a caption that says
what to look for; :func:`render` writes it as a PNG. matplotlib comes with the ``demos``
extra (``pip install -e '.[demos]'``); it is imported only when a picture is rendered.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ..simulator.access_trace import trace

SECTOR, BANKS, WARP = 32, 32, 32
ACTIVE, MASKED, IDLE = "#2a7f3f", "#f2b8b5", "#eeeeee"   # lane colours of the mask views


class Panel(NamedTuple):
    title: str
    view: Callable          # view(ax, trace, **params)
    trace: object
    params: dict


class Picture(NamedTuple):
    name: str               # file stem
    caption: str            # what to look for
    panels: tuple
    share_y: bool = False   # one y scale for all panels (to compare bars)


def panel(title, view, trace, **params) -> Panel:
    return Panel(title, view, trace, params)


def traced(run, block=0, warp=None):
    """Run ``run()`` (launches on the simulator) under ``minigpu.cuda.trace(block, warp)``;
    returns the trace."""
    with trace(block, warp) as tr:
        run()
    return tr


def variant_trace(experiment, name, problem, block=0, warp=None):
    """The trace of one named variant of ``experiment`` run on ``problem``."""
    variant = next(v for v in experiment.variants if v.name == name)
    return traced(lambda: variant.run(problem), block, warp)


def _plt():
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - the demos extra is missing
        raise RuntimeError("pictures need matplotlib: pip install -e '.[demos]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def render(picture: Picture, path, dpi=100):
    """Draw ``picture`` (its panels side by side, the caption under them) into ``path``. A
    view with ``view.rows = (a, b)`` gets two axes, stacked with those heights."""
    import textwrap
    plt = _plt()
    n = len(picture.panels)
    tall = any(getattr(p.view, "rows", None) for p in picture.panels)
    width = 5.8 * n
    fig = plt.figure(figsize=(width, 5.6 if tall else 4.7))
    caption = textwrap.fill(picture.caption, int(width * 13.5))
    lines = caption.count("\n") + 1
    bottom = (0.35 + 0.17 * lines) / (5.6 if tall else 4.7)
    outer = fig.add_gridspec(1, n, left=0.07 / n * 2, right=0.98, top=0.92, bottom=bottom + 0.1,
                             wspace=0.28)
    drawn = []
    for k, p in enumerate(picture.panels):
        rows = getattr(p.view, "rows", None)
        if rows:
            inner = outer[k].subgridspec(2, 1, height_ratios=rows, hspace=0.55)
            axes = [fig.add_subplot(inner[0]), fig.add_subplot(inner[1])]
            p.view(axes, p.trace, **p.params)
            axes[0].set_title(p.title, fontsize=10, loc="left")
        else:
            ax = fig.add_subplot(outer[k])
            p.view(ax, p.trace, **p.params)
            ax.set_title(p.title, fontsize=10, loc="left")
            drawn.append(ax)
    if picture.share_y and drawn:
        lo = min(ax.get_ylim()[0] for ax in drawn)
        hi = max(ax.get_ylim()[1] for ax in drawn)
        for ax in drawn:
            ax.set_ylim(lo, hi)
    fig.text(0.01, 0.015, caption, fontsize=9, va="bottom")
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _request(trace, n, **filters):
    reqs = trace.requests(**filters)
    if not reqs:
        raise ValueError(f"no traced request matches {filters}")
    return reqs[n]


# --- global memory: lanes -> addresses ----------------------------------------------------
def lanes(ax, trace, request=0, **filters):
    """Lanes (y) against the sectors one global request fetches (x): every 32-byte sector
    the warp touches is a shaded box of 8 words, drawn side by side (a gap where sectors are
    not adjacent in memory); each lane's element is a dark bar in its box. ``request``: which
    of the matching requests."""
    from matplotlib.patches import Rectangle
    req = _request(trace, request, space="global", **filters)
    sectors = req.sectors()
    words = SECTOR // 4
    x0, x = {}, 0.0
    for k, s in enumerate(sectors):
        if k and s != sectors[k - 1] + 1:
            x += 2                                  # a gap: memory skipped
        x0[s] = x
        ax.add_patch(Rectangle((x, -0.5), words, WARP, facecolor="#c6dbef", edgecolor="#6baed6",
                               lw=0.8))
        x += words
    for lane, (off, size) in sorted(req.lanes.items()):
        for s in range(off // SECTOR, (off + size - 1) // SECTOR + 1):
            lo = max(off, s * SECTOR) - s * SECTOR
            hi = min(off + size, (s + 1) * SECTOR) - s * SECTOR
            ax.add_patch(Rectangle((x0[s] + lo / 4, lane - 0.4), (hi - lo) / 4, 0.8,
                                   facecolor="#08306b", lw=0))
    ax.set_xlim(-0.5, x + 0.5)
    ax.set_ylim(WARP - 0.5, -0.5)
    step = max(1, len(sectors) // 6)
    ticks = sectors[::step]
    ax.set_xticks([x0[s] for s in ticks], [f"{s * SECTOR}" for s in ticks], fontsize=8)
    ax.set_ylabel("lane")
    used = sum(size for _, size in set(req.lanes.values()))
    ax.set_xlabel(f"boxes: 32-byte sectors of '{req.array}' fetched (gaps: skipped memory)\n"
                  f"{req.kind} of {len(req.lanes)} lanes: {len(sectors)} sectors, {used} B used "
                  f"of {SECTOR * len(sectors)} B fetched", fontsize=9)


# --- shared memory: banks -----------------------------------------------------------------
def banks(axes, trace, shape=None, request=0, **filters):
    """Top: a shared tile of ``shape`` (rows, cols) 4-byte words coloured by bank (word % 32),
    the words one warp's request touches marked (red where a bank serves more than one of
    them). Bottom: the distinct words each bank serves; the tallest bar is the number of
    wavefronts (passes) the request needs."""
    ax, bars = axes
    req = _request(trace, request, space="shared", **filters)
    rows, cols = shape or trace.shape(req.array, req.launch)
    words = np.arange(rows * cols).reshape(rows, cols)
    ax.imshow(words % BANKS, cmap="hsv", alpha=0.28, aspect="auto", interpolation="nearest",
              extent=(-0.5, cols - 0.5, rows - 0.5, -0.5))
    per_bank = req.banks()
    for bank, ws in per_bank.items():
        colour = "#b2182b" if len(ws) > 1 else "#1a5e20"
        ys, xs = zip(*(divmod(w, cols) for w in ws if w < rows * cols))
        ax.scatter(xs, ys, s=16, color=colour, marker="s", zorder=3)
    ax.set_xlabel(f"column of the {rows}x{cols} tile '{req.array}' (colour: bank = word % 32)",
                  fontsize=9)
    ax.set_ylabel("row")
    height = [len(per_bank.get(b, ())) for b in range(BANKS)]
    bars.bar(range(BANKS), height, color=["#b2182b" if h > 1 else "#1a5e20" for h in height])
    bars.set_xlim(-0.5, BANKS - 0.5)
    bars.set_xlabel(f"bank: {req.wavefronts()} wavefront(s) for this request of "
                    f"{len(req.lanes)} lanes", fontsize=9)
    bars.set_ylabel("words")


banks.rows = (3, 1)


# --- divergence: active lanes per step ----------------------------------------------------
def masks(ax, trace, threads=None, by="phase", **filters):
    """Rows: the steps (``by="phase"``: barrier intervals; ``by="request"``: each warp-level
    execution of the matching accesses, in order); columns: the threads of one block. Green:
    the lane works; pink: idle but its warp still issues the step (divergence); grey: the
    whole warp is idle and skips it."""
    from matplotlib.patches import Patch
    touches = trace.select(**filters)
    nthreads = threads or (max(t.tid for t in touches) // WARP + 1) * WARP
    steps = {}
    for t in touches:
        key = t.phase if by == "phase" else (t.site, t.occurrence)
        steps.setdefault(key, set()).add(t.tid)
    keys = sorted(steps) if by == "phase" else list(steps)
    grid = np.zeros((len(keys), nthreads, 3))
    rgb = [np.array([int(c[i:i + 2], 16) / 255 for i in (1, 3, 5)]) for c in (ACTIVE, MASKED,
                                                                            IDLE)]
    lanes_used = issued = 0
    for r, key in enumerate(keys):
        active = steps[key]
        for w in range(0, nthreads, WARP):
            warp_active = [tid for tid in range(w, w + WARP) if tid in active]
            if warp_active:
                issued += 1
                lanes_used += len(warp_active)
            for tid in range(w, min(w + WARP, nthreads)):
                grid[r, tid] = rgb[0] if tid in active else rgb[1] if warp_active else rgb[2]
    ax.imshow(grid, aspect="auto", interpolation="nearest",
              extent=(-0.5, nthreads - 0.5, len(keys) - 0.5, -0.5))
    for w in range(WARP, nthreads, WARP):
        ax.axvline(w - 0.5, color="k", lw=1.2)
    ax.set_xlabel("thread (black lines: warp boundaries)")
    ax.set_ylabel("step (barrier interval)" if by == "phase" else "step")
    ax.set_yticks(range(len(keys)))
    eff = lanes_used / (WARP * issued) if issued else 0
    ax.legend(handles=[Patch(color=ACTIVE, label="works"),
                       Patch(color=MASKED, label="idle, warp issues the step"),
                       Patch(color=IDLE, label="warp idle: skipped")],
              loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, fontsize=8)
    ax.text(0.99, 0.02, f"{issued} warp-steps issued\nlanes working: {100 * eff:.0f} %",
            transform=ax.transAxes, ha="right", va="bottom", fontsize=9,
            bbox=dict(fc="white", ec="0.7"))


# --- trees and networks: who reads what in each barrier interval ---------------------------
def _by_phase_and_thread(trace, array, index, kinds, **filters):
    out = {}
    for t in trace.select(space="shared", array=array, **filters):
        if t.kind in kinds:
            i = index(t.index)
            if i is not None:
                out.setdefault((t.phase, t.tid), {}).setdefault(t.kind, []).append(i)
    return out


def _stores_and_sources(trace, array, index, carry, **filters):
    """[(phase, thread, stored element, {elements it was computed from})]: a store's sources
    are the thread's loads of ``array`` in its barrier interval, and with ``carry`` all of
    them since its previous storing interval (a read, a barrier, then the write, as in a
    read-barrier-write scan step)."""
    per_thread = {}
    for t in trace.select(space="shared", array=array, **filters):
        per_thread.setdefault(t.tid, []).append(t)
    out = []
    for tid, touches in per_thread.items():
        pending, phase, sources, last = set(), None, set(), None
        for t in touches:
            i = index(t.index)
            if i is None:
                continue
            if t.kind == "load":
                if not carry and pending and t.phase != last:
                    pending = set()
                pending.add(i)
                last = t.phase
            elif t.kind == "store":
                if t.phase != phase:
                    phase, sources, pending = t.phase, pending, set()
                out.append((phase, tid, i, sources))
    return out


def tree(ax, trace, array, n, index=None, carry=True, **filters):
    """Levels (y, one per barrier interval that writes ``array`` from values read from it) of
    a reduction or scan: an arrow from every element a thread read to the element it writes.
    ``index`` maps a flat shared index to the element drawn (e.g. dropping a double buffer's
    row); ``n``: how many elements to draw; ``carry``: see :func:`_stores_and_sources`."""
    index = index or (lambda i: i)
    work = [w for w in _stores_and_sources(trace, array, index, carry, **filters) if w[3]]
    phases = sorted({p for p, *_ in work})
    level = {p: k for k, p in enumerate(phases)}
    adds = {}
    for p, tid, dst, srcs in work:
        srcs = [s for s in srcs if s < n]
        if dst >= n:
            continue
        adds[p, tid] = max(len(srcs) - 1, 0)
        y = level[p]
        for src in srcs:
            colour = "#bbbbbb" if src == dst else "#c0392b"
            ax.annotate("", xy=(dst, y + 1), xytext=(src, y),
                        arrowprops=dict(arrowstyle="->", color=colour, lw=1.0))
    for y in range(len(phases) + 1):
        ax.scatter(range(n), [y] * n, s=16, color="#08519c", zorder=3)
    ax.set_ylim(len(phases) + 0.5, -0.5)
    ax.set_xlim(-1, n)
    ax.set_xlabel(f"element of '{array}'")
    ax.set_ylabel("level (top: the values loaded)")
    ax.text(0.99, 0.02, f"{len(phases)} levels, {sum(adds.values())} adds",
            transform=ax.transAxes, ha="right", va="bottom", fontsize=9,
            bbox=dict(fc="white", ec="0.7"))


def network(ax, trace, array, n, index=None, **filters):
    """A sorting network: one horizontal wire per element of ``array``, and at each step (a
    barrier interval in which the array is written) a vertical link between the two elements
    one thread compares. Links of one step that would overlap are drawn side by side."""
    index = index or (lambda i: i)
    work = _by_phase_and_thread(trace, array, index, ("load", "store"), **filters)
    written = {p for (p, _), acc in work.items() if "store" in acc}
    steps = {}
    for (p, _), acc in work.items():
        pair = sorted(set(i for i in acc.get("load", []) if i < n))
        if p in written and len(pair) >= 2:
            steps.setdefault(p, []).append((pair[0], pair[-1]))
    x, links = 0.0, 0
    for p in sorted(steps):
        columns = []                       # per column: the last interval's end
        placed = []
        for lo, hi in sorted(steps[p]):
            c = next((k for k, end in enumerate(columns) if end < lo), len(columns))
            if c == len(columns):
                columns.append(hi)
            columns[c] = hi
            placed.append((c, lo, hi))
        for c, lo, hi in placed:
            links += 1
            ax.plot([x + 0.25 * c] * 2, [lo, hi], color="#08519c", lw=1.2, zorder=2)
            ax.scatter([x + 0.25 * c] * 2, [lo, hi], s=10, color="#08519c", zorder=3)
        x += 0.25 * len(columns) + 0.6
    for i in range(n):
        ax.plot([-0.4, x - 0.4], [i, i], color="#bbbbbb", lw=0.8, zorder=1)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xticks([])
    ax.set_xlabel(f"step, left to right ({len(steps)} steps, one barrier each; "
                  f"{links} compare-exchanges)", fontsize=9)
    ax.set_ylabel(f"element of '{array}'")


# --- global arrays: loads per element, writers, counts ---------------------------------------
def heat(axes, trace, arrays, kind="load", vmax=None, tile=None, **filters):
    """How many times the traced block(s) ``kind`` each element of two 2-D arrays
    (``arrays``: two names, or (name, (rows, cols)) pairs; drawn one above the other on one
    colour scale up to ``vmax``); ``tile`` draws tile boundaries every ``tile`` elements."""
    arrays = [a if isinstance(a, tuple) else (a, trace.shape(a, 0)) for a in arrays]
    grids = []
    for name, (rows, cols) in arrays:
        grid = np.zeros(rows * cols)
        for t in trace.select(space="global", array=name, kind=kind, **filters):
            if t.index < grid.size:
                grid[t.index] += 1
        grids.append(grid.reshape(rows, cols))
    top = vmax or max(g.max() for g in grids)
    for ax, (name, (rows, cols)), grid in zip(axes, arrays, grids):
        im = ax.imshow(np.where(grid > 0, grid, np.nan), cmap="viridis_r", vmin=0, vmax=top,
                       aspect="auto", interpolation="nearest")
        if tile:
            for v in range(tile, cols, tile):
                ax.axvline(v - 0.5, color="k", lw=0.8)
            for h in range(tile, rows, tile):
                ax.axhline(h - 0.5, color="k", lw=0.8)
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.03, label=f"{kind}s")
        touched = int((grid > 0).sum())
        ax.set_ylabel(f"'{name}' row")
        ax.set_xlabel(f"column of '{name}' ({rows}x{cols}): {int(grid.sum())} {kind}s of "
                      f"{touched} elements", fontsize=9)


heat.rows = (1, 1)


def threads(ax, trace, array, n, cols=32, **filters):
    """Element i of the 1-D ``array`` (wrapped ``cols`` to a row) coloured by the block that
    writes it, labelled with the writing thread's threadIdx.x; blank: written by nobody."""
    writer = {}
    for t in trace.select(space="global", array=array, kind="store", **filters):
        writer[t.index] = (t.block[0], t.thread[0])
    rows = -(-n // cols)
    palette = ["#9ecae1", "#a1d99b", "#fdd0a2", "#dadaeb", "#fcbba1", "#c7e9c0"]
    for i in range(rows * cols):
        r, c = divmod(i, cols)
        if i in writer:
            b, tx = writer[i]
            ax.add_patch(_rect(c, r, palette[b % len(palette)]))
            ax.text(c, r, str(tx), ha="center", va="center", fontsize=7)
        elif i >= n:
            ax.add_patch(_rect(c, r, "white", hatch="///"))
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_aspect("equal")
    blocks = sorted({b for b, _ in writer.values()})
    ax.set_xlabel(f"element i of '{array}', {cols} to a row; number: the threadIdx.x that "
                  f"writes it\ncolour: its block ({len(blocks)} blocks); hatched: i >= n, "
                  f"written by no thread", fontsize=9)
    ax.set_xticks(range(0, cols, 4))
    ax.set_yticks(range(rows), [str(cols * r) for r in range(rows)])


def _rect(x, y, colour, hatch=None):
    from matplotlib.patches import Rectangle
    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=colour, edgecolor="0.6", lw=0.4,
                     hatch=hatch)


def counts(ax, trace, array, n, space="global", kind="atomic", **filters):
    """Bars: how many ``kind`` accesses each element of the 1-D ``array`` received."""
    per = [0] * n
    for t in trace.select(space=space, array=array, kind=kind, **filters):
        if t.index < n:
            per[t.index] += 1
    from matplotlib.ticker import MaxNLocator
    ax.bar(range(n), per, color="#08519c")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(f"element of '{array}' ({space})")
    ax.set_ylabel(f"{kind}s")
    ax.text(0.99, 0.97, f"{sum(per)} {kind}s in all", transform=ax.transAxes, ha="right",
            va="top", fontsize=9, bbox=dict(fc="white", ec="0.7"))


def sweeps(ax, trace, array, cols, warp=0, **filters):
    """One warp's loads of a 2-D ``array`` with ``cols`` columns: request number (x) against
    the column each lane reads (y). Each rising ramp is one pass over the row."""
    reqs = trace.requests(space="global", kind="load", array=array, warp=warp, **filters)
    for k, req in enumerate(reqs):
        cs = [(off // size) % cols for off, size in req.lanes.values()]
        ax.scatter([k] * len(cs), cs, s=6, color="#08519c")
    ax.set_xlabel(f"request of warp {warp} (in order)")
    ax.set_ylabel(f"column of '{array}' read by a lane")
    ax.text(0.99, 0.02, f"{len(reqs)} load requests", transform=ax.transAxes, ha="right",
            va="bottom", fontsize=9, bbox=dict(fc="white", ec="0.7"))


def traffic_bytes(trace, **filters):
    """{(launch, array, "load" | "store"): global bytes (32 x sectors of every request)}."""
    moved = {}
    for req in trace.requests(space="global", **filters):
        if req.kind != "atomic":
            key = (req.launch, req.array, req.kind)
            moved[key] = moved.get(key, 0) + SECTOR * len(req.sectors())
    return moved


def traffic(ax, trace, ymax=None, **filters):
    """Global bytes moved per array and launch (32 x sectors of every request), loaded and
    stored; ``ymax`` puts several panels on one scale."""
    moved = traffic_bytes(trace, **filters)
    keys = list(dict.fromkeys((launch, a) for launch, a, _ in moved))
    many = len({launch for launch, _ in keys}) > 1
    names = [f"launch {launch + 1}:\n{a}" if many else a for launch, a in keys]
    loads = [moved.get((*k, "load"), 0) for k in keys]
    stores = [moved.get((*k, "store"), 0) for k in keys]
    xs = range(len(keys))
    ax.bar([x - 0.2 for x in xs], loads, width=0.4, label="loaded", color="#08519c")
    ax.bar([x + 0.2 for x in xs], stores, width=0.4, label="stored", color="#e6550d")
    ax.set_xticks(list(xs), names, fontsize=8)
    ax.set_ylabel("global bytes (32 x sectors)")
    if ymax:
        ax.set_ylim(0, ymax)
    ax.legend(fontsize=8, loc="best")
    ax.set_xlabel(f"{sum(loads) + sum(stores):,} bytes in all", fontsize=9)
