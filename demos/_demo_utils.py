"""What every demo shares: its command line, the device choice, metrics.json, progress bars,
and figures (matplotlib with the Agg backend: no display needed).

Each demo imports this file as a sibling module (``demos/`` is not a package), and exposes
``main(argv=None) -> dict`` (the metrics it wrote), so tests call it without a new interpreter.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from pathlib import Path

import minigpu as mg
from minigpu.simulator import config as sim_config


# --- command line ---------------------------------------------------------------------------
def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text}")
    return value


def fraction(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text}")
    return value


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" to an option's help, unless the help already states its default
    (options whose default depends on others) or there is none to state (flags, None)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def make_parser(demo: str, description: str, default_epochs,
                default_out: str | None = None) -> argparse.ArgumentParser:
    """The options every demo has: --device, --epochs, --seed, --out, --smoke.

    --epochs defaults to ``default_epochs``, or 1 with --smoke (see :func:`finish_args`);
    ``default_out`` describes an --out default computed later (the caller sets it)."""
    parser = argparse.ArgumentParser(prog=f"{demo}.py", description=description,
                                     formatter_class=HelpFormatter)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="auto = cuda when a real GPU is present, else cpu; cuda without a "
                             "GPU needs NUMBA_ENABLE_CUDASIM=1 (Numba's simulator, slow)")
    parser.add_argument("--epochs", type=positive_int, default=None,
                        help=f"training epochs (default: {default_epochs}; 1 with --smoke)")
    parser.add_argument("--seed", type=non_negative_int, default=0,
                        help="seed of minigpu's generator (weights, batches, noise)")
    out_help = "folder for metrics.json, checkpoints and pictures"
    if default_out is not None:
        out_help += f" (default: {default_out})"
    parser.add_argument("--out", type=Path, default=None if default_out else Path("runs") / demo,
                        help=out_help)
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, a few steps: checks the demo runs (< 1 minute even on "
                             "the CUDA simulator)")
    return parser


def finish_args(parser: argparse.ArgumentParser, args, default_epochs: int):
    """Fill in what depends on other options: epochs, the device, and create --out."""
    if args.epochs is None:
        args.epochs = 1 if args.smoke else default_epochs
    args.device = resolve_device(parser, args.device)
    if args.device == "cuda" and mg.cuda.is_simulator() and not args.smoke \
            and "MINIGPU_SIM_FAST" not in os.environ:
        # a training run: every kernel pays for its compile on the simulator's compiled path
        # (docs/simulator.md); ``auto`` would first run each one checked for ~30 s
        sim_config.FAST = "always"
        show_compiles()
    prepare_out(parser, args.out)
    return args


def show_compiles() -> None:
    """Print the simulator's compile messages (``minigpu.simulator`` logger, INFO) to stderr:
    a first run compiles each kernel for minutes in all, and says so."""
    log = logging.getLogger("minigpu.simulator")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("simulator: %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)


def resolve_device(parser: argparse.ArgumentParser, choice: str) -> str:
    """'auto' -> 'cuda' on a real GPU, else 'cpu'; 'cuda' must be usable (GPU or simulator)."""
    if choice == "auto":
        return "cuda" if mg.cuda.has_gpu() else "cpu"
    if choice == "cuda" and not mg.cuda.is_available():
        parser.error("--device cuda: no usable CUDA device (no GPU found); set "
                     "NUMBA_ENABLE_CUDASIM=1 to run the kernels on Numba's CUDA simulator")
    return choice


def prepare_out(parser: argparse.ArgumentParser, out: Path) -> Path:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        parser.error(f"--out {out}: cannot create the folder ({e.strerror})")
    if not os.access(out, os.W_OK):
        parser.error(f"--out {out}: the folder is not writable")
    return out


def write_metrics(out: Path, metrics: dict) -> Path:
    path = Path(out) / "metrics.json"
    path.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    return path


def header(demo: str, device: str, args) -> None:
    where = device
    if device == "cuda":
        where += (f" (Numba CUDA simulator, MINIGPU_SIM_FAST={sim_config.FAST})"
                  if mg.cuda.is_simulator() else " (GPU)")
    print(f"{demo}: device={where} epochs={args.epochs} seed={args.seed}"
          f"{' smoke' if args.smoke else ''} -> {args.out}")


# --- progress ---------------------------------------------------------------------------------
def progress(iterable, **kwargs):
    """A tqdm bar when tqdm is installed (the demos extra), else the bare iterable."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iterable
    kwargs.setdefault("leave", False)
    kwargs.setdefault("disable", None)  # None: no bar when stderr is not a terminal (logs, CI)
    kwargs.setdefault("dynamic_ncols", True)
    kwargs.setdefault("file", sys.stderr)
    return tqdm(iterable, **kwargs)


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start


# --- figures ------------------------------------------------------------------------------------
def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, path: Path, dpi=80) -> Path:
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
    return path


def image_grid(images, path: Path, titles=None, columns=8, title=None, scale=1.0) -> Path:
    """A grid of grey 2-D images (values in [0, 1]) with optional per-image titles."""
    plt = pyplot()
    n = len(images)
    columns = max(1, min(columns, n))
    rows = max(1, -(-n // columns))
    fig, axes = plt.subplots(rows, columns, figsize=(columns * 1.0 * scale,
                                                     rows * (1.15 if titles else 1.0) * scale),
                             squeeze=False)
    for i, ax in enumerate(axes.flat):
        ax.axis("off")
        if i < n:
            ax.imshow(images[i], cmap="gray_r", vmin=0, vmax=1, interpolation="nearest")
            if titles:
                ax.set_title(titles[i], fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)
