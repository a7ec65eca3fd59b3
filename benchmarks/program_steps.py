"""The PyTorch example programs of the corpus (``tests/programs``), timed: PyTorch CPU against
minigpu's cpu device, eager and captured, each program run unchanged (it imports ``minigpu as
torch``).

    python benchmarks/program_steps.py [--steps 20] [--warmup 5] [--repeat 2] [--threads 1]
                                       [--only NAME ...]

Each (program, library) runs in a process of its own, ``--repeat`` times, alternating the
libraries. "captured" is minigpu with every module call the program makes itself (a call from
its own files, not one inside another such call: the model, a loss module) going through
``minigpu.compile`` of that module (one per module): forward and backward captured on the first
call per guard key and replayed afterwards; the loss's ``backward()`` replays, the optimizer
runs eagerly. The losses of the first ``--warmup`` backward calls must equal eager minigpu's
bit for bit (a mismatch is printed loudly), and each program's graphs and graph breaks are
reported. The PyTorch run maps ``import minigpu`` to ``torch`` with the import hook of
``tests/programs/lockstep.py`` (its ``_TorchAlias``; the program's directory, arguments and
working directory also come from there). A run times the program's ``Tensor.backward()``
calls: after ``--warmup`` of them, the wall time from one call to the call ``--steps`` later,
divided by ``--steps``, is its ms per step, and the program is stopped there. A "step" is
thus all the program does from one backward to the next (loading its batch, forward, loss,
backward, the optimizer; for ``time_sequence_prediction`` one LBFGS closure), the same work in
both libraries. Each side's best of its runs is printed, and their ratio. Peak memory: one more step after
the timed ones, measured as ``cpu_training_step.py`` measures it (``peak_memory.py``).

The programs run at their own default sizes (batch 64 for MNIST, 128 for the VAE, a 64x64
DCGAN, a 2-layer 200-wide word-level LSTM over 35 steps with batch 20, ...), on the synthetic
datasets of ``tests/programs/fakevision``, enlarged here so that an epoch holds the steps
timed. Threads: ``--threads N`` sets ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and
``MKL_NUM_THREADS`` before NumPy and PyTorch are imported, and ``torch.set_num_threads(N)``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "tests", "programs")

# name -> (program, options): each program's defaults, options only to run on the cpu, with the
# synthetic data and with logging rare (the timed steps should not print)
CORPUS = {
    "mnist": ("mnist/main.py", "--no-accel --log-interval 1000"),
    "vae": ("vae/main.py", "--no-accel --log-interval 1000"),
    "dcgan": ("dcgan/main.py", "--dataset fake --workers 0 --niter 1 --manualSeed 1"),
    "mnist_rnn": ("mnist_rnn/main.py", "--log-interval 1000"),
    "word_language_model": ("word_language_model/main.py", "--data data --log-interval 1000"),
    "word_language_model_transformer": ("word_language_model/main.py",
                                        "--model Transformer --data data --log-interval 1000"),
    "time_sequence_prediction": ("time_sequence_prediction/train.py", "--steps 1"),
    "regression": ("regression/main.py", ""),
    "mnist_forward_forward": ("mnist_forward_forward/main.py", "--no_accel --log-interval 1000"),
    "quickstart_tutorial": ("tutorials/quickstart_tutorial.py", ""),
}
LIBRARIES = ("torch", "minigpu", "captured")
BACKWARD_CALLS = {"time_sequence_prediction": 20}
"""Programs that make few backward calls with their options (one LBFGS step: 20 closures):
their warm-up and timed steps are cut to fit, so that the timed ones stay inside one step."""
ENLARGED = {"MNIST": (4096, 64), "FashionMNIST": (4096, 64), "CIFAR10": (1024, 64)}
"""fakevision's (train, test) sizes for the runs: enough batches for the timed steps."""


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="backward calls timed per run")
    parser.add_argument("--warmup", type=int, default=5, help="backward calls before timing")
    parser.add_argument("--repeat", type=int, default=2, help="runs per library (best kept)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", nargs="*", help="program names to run")
    parser.add_argument("--child", nargs=2, metavar=("LIBRARY", "NAME"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


class _Enough(BaseException):
    """Raised from the timed backward that ends the run (a BaseException: the program's own
    ``except Exception`` does not swallow it)."""


def _lockstep():
    spec = importlib.util.spec_from_file_location("lockstep", os.path.join(PROGRAMS,
                                                                           "lockstep.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compile_the_programs_modules(minigpu) -> list:
    """Route each module call made from the program's own files (outside another such call)
    through ``minigpu.compile`` of that module; the list collects the compiled ones."""
    call, compiled, depth = minigpu.nn.Module.__call__, {}, [0]

    def captured_call(self, *args, **kwargs):
        if depth[0] or not sys._getframe(1).f_code.co_filename.startswith(PROGRAMS):
            return call(self, *args, **kwargs)
        if id(self) not in compiled:
            compiled[id(self)] = minigpu.compile(self)
        depth[0] += 1
        try:
            return compiled[id(self)](*args, **kwargs)
        finally:
            depth[0] -= 1

    minigpu.nn.Module.__call__ = captured_call
    return compiled


def _graphs(compiled) -> dict:
    """How the compiled modules fared: guard keys captured, and each graph break's reason."""
    keys = [k for c in compiled.values() for k in c.graphs]
    breaks = sorted({f"{type(c._orig_mod).__name__}: {str(e)[:90]}"
                     for c in compiled.values() for e in c.graph_breaks()})
    return {"captured": len(keys) - sum(len(c.graph_breaks()) for c in compiled.values()),
            "broken": sum(len(c.graph_breaks()) for c in compiled.values()), "breaks": breaks}


def child(library, name, args):
    """One run: {"ms": ms per step, "peak": bytes, "steps": steps timed, "losses": the first
    ``warmup`` ones} (with "graphs" for the captured side) or {"error": ...}."""
    import torch
    torch.set_num_threads(args.threads)
    import peak_memory
    lockstep = _lockstep()
    compiled = None
    if library == "torch":
        sys.meta_path.insert(0, lockstep._TorchAlias())
        tensor = torch.Tensor
    else:
        import minigpu
        tensor = minigpu.Tensor
        if library == "captured":
            compiled = _compile_the_programs_modules(minigpu)
    program, options = CORPUS[name]
    program = os.path.join(PROGRAMS, program)
    available = BACKWARD_CALLS.get(name, args.warmup + args.steps + 2)
    warmup = min(args.warmup, available // 4)
    steps = min(args.steps, available - warmup - 2)
    meter = peak_memory.PeakMemory("torch" if library == "torch" else "minigpu")
    stamps, backward, losses, ran = [], tensor.backward, [], set()

    def timed_backward(self, *a, **k):
        if len(stamps) < warmup:  # before the timed steps: the loss, to compare
            losses.append(self.item())
        stamps.append(time.perf_counter())
        ran.add(type(self).__module__.split(".")[0])
        if len(stamps) == warmup + steps + 1:
            meter.start()
        elif len(stamps) == warmup + steps + 2:
            stamps.append(meter.stop())
            raise _Enough
        return backward(self, *a, **k)

    tensor.backward = timed_backward
    with tempfile.TemporaryDirectory() as cwd:
        try:
            with lockstep._program_context(program, options.split(), cwd):
                import fakevision.datasets
                fakevision.datasets.SIZES.update(ENLARGED)
                runpy.run_path(program, run_name="__main__")
        except _Enough:
            pass
    wanted = "torch" if library == "torch" else "minigpu"
    if ran != {wanted}:
        return {"error": f"the program's tensors came from {sorted(ran)}, not {wanted}"}
    if len(stamps) < warmup + steps + 3:
        return {"error": f"only {len(stamps)} backward calls (wanted {warmup + steps + 2})"}
    result = {"ms": (stamps[warmup + steps] - stamps[warmup]) / steps * 1e3,
              "peak": stamps[-1], "steps": steps, "losses": losses}
    if compiled is not None:
        result["graphs"] = _graphs(compiled)
    return result


def run_child(library, name, args):
    env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg", NUMBA_ENABLE_CUDASIM="0")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", library, name,
           "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--threads", str(args.threads)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    lines = done.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}


def main(args):
    names = args.only or list(CORPUS)
    unknown = sorted(set(names) - set(CORPUS))
    if unknown:
        sys.exit(f"unknown program(s) {unknown}; choose from {list(CORPUS)}")
    import numpy
    import torch
    print(f"threads {args.threads}; numpy {numpy.__version__}, torch {torch.__version__}, "
          f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f} at start")
    print(f"ms per step: best of {args.repeat} runs per library, {args.steps} backward calls "
          f"timed after {args.warmup} (fewer where a program makes fewer); peak MiB: the step "
          f"after them, tracemalloc (minigpu), torch.profiler allocator events (torch)")
    print(f"{'program':34s} {'torch ms':>9s} {'minigpu ms':>10s} {'ratio':>6s} "
          f"{'captured ms':>11s} {'ratio':>6s} {'torch MiB':>9s} {'minigpu MiB':>11s} "
          f"{'ratio':>6s}")
    ratios, captured_ratios, notes = [], [], []
    for name in names:
        runs = {library: [] for library in LIBRARIES}
        errors = []
        for r in range(args.repeat):
            for library in (LIBRARIES if r % 2 == 0 else LIBRARIES[::-1]):
                result = run_child(library, name, args)
                if "error" in result:
                    errors.append(f"{library}: {result['error']}")
                else:
                    runs[library].append(result)
        if errors or not all(runs.values()):
            print(f"{name:34s} error: {'; '.join(errors)[:200]}")
            continue
        t, m, c = (min(r["ms"] for r in runs[lib]) for lib in LIBRARIES)
        tp, mp = (runs[lib][0]["peak"] / 2**20 for lib in ("torch", "minigpu"))
        ratios.append(m / t)
        captured_ratios.append(c / t)
        print(f"{name:34s} {t:9.2f} {m:10.2f} {m / t:5.2f}x {c:11.2f} {c / t:5.2f}x "
              f"{tp:9.2f} {mp:11.2f} {mp / tp if tp > 0 else float('nan'):5.2f}x")
        eager, captured = runs["minigpu"][0], runs["captured"][0]
        if eager["losses"] != captured["losses"]:
            notes.append(f"!!! LOSS MISMATCH {name}: eager {eager['losses']} "
                         f"captured {captured['losses']}")
        graphs = captured["graphs"]
        notes.append(f"{name}: {len(eager['losses'])} losses "
                     f"{'equal' if eager['losses'] == captured['losses'] else 'DIFFER'}; "
                     f"{graphs['captured']} guard keys captured, {graphs['broken']} broken"
                     + "".join(f"\n    break {b}" for b in graphs["breaks"]))
    if ratios:
        print(f"geometric mean of the time ratios: {statistics.geometric_mean(ratios):.2f}x "
              f"(max {max(ratios):.2f}x); captured "
              f"{statistics.geometric_mean(captured_ratios):.2f}x "
              f"(max {max(captured_ratios):.2f}x); load average {os.getloadavg()[0]:.1f} "
              f"at the end")
    print("\n".join(notes))


if __name__ == "__main__":
    arguments = parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(arguments.threads)
    if arguments.child:
        print(json.dumps(child(*arguments.child, arguments)))
    else:
        main(arguments)
