"""One training step on the cpu device: minigpu (NumPy backend) against PyTorch CPU, same run.

    python benchmarks/cpu_training_step.py [--threads 1] [--rounds 21] [--round-ms 40]
                                           [--only NAME ...] [--no-memory]

The workloads are the models users train on the cpu device: the demos' networks
(``demos/train_cnn.py``'s LeNet-5 with BatchNorm and dropout on 8x8 digits, the same network on
28x28 MNIST-sized images, ``demos/train_lstm.py``'s row classifier and character language
model, ``demos/train_gan.py``'s MLP GAN and DCGAN — a discriminator step plus a generator step
each) and a transformer encoder layer. Both libraries build the same modules with their default
initialisation and take one step of the same optimizer on the same random inputs.

Threads: ``--threads N`` sets ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and
``MKL_NUM_THREADS`` before NumPy and PyTorch are imported, and ``torch.set_num_threads(N)``; all
are printed. Timing: after warm-up steps, each round times a few steps of minigpu then of PyTorch
(their order alternating between rounds), and each side's ms per step is the median of its
rounds, in wall time (``ratio``) and in the process's cpu time (``cpu-time ratio``: the time
the step computed, without the time other processes held the cores). On a shared machine (the
2-core one of the recorded runs has other processes on it) the milliseconds drift between runs
more than the ratios do, and the cpu-time ratio drifts least.

Peak memory of a step (outside the timed rounds, one step after the warm-up): the highest
amount of memory allocated during the step above what was allocated when it began.
minigpu: ``tracemalloc`` (NumPy reports its buffers to it; Python objects such as graph nodes
are counted too). PyTorch: its CPU allocator's allocation and free events, recorded by
``torch.profiler.profile(profile_memory=True)`` and summed in time order (tracemalloc cannot
see PyTorch's allocator; memory that oneDNN or OpenBLAS allocate outside it is not counted).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1,
                        help="threads for BLAS/OpenMP and torch.set_num_threads (default 1)")
    parser.add_argument("--rounds", type=int, default=21, help="timed rounds per side")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--round-ms", type=float, default=40.0,
                        help="about how long one round of one side lasts")
    parser.add_argument("--only", nargs="*", default=None, help="workload names to run")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory step")
    return parser.parse_args(argv)


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None:  # before NumPy or PyTorch load their thread pools
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402
import peak_memory  # noqa: E402

import minigpu as mg  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError:
    torch = None


# --- the workloads: each builds (step function) for one library -------------------------------
# ``lib`` is ``minigpu`` or ``torch``; both are driven through the same PyTorch-shaped API.

def lenet(lib, size, channels=(32, 64), hidden=(120, 84), kernel=3):
    """demos/train_cnn.py's LeNet-5 (minigpu.models.LeNet5 with batch_norm=True, dropout=0.5)."""
    nn = lib.nn
    c1, c2 = channels
    side = size // 4
    return nn.Sequential(
        nn.Conv2d(1, c1, kernel, padding=kernel // 2), nn.BatchNorm2d(c1), nn.ReLU(),
        nn.MaxPool2d(2, 2),
        nn.Conv2d(c1, c2, kernel, padding=kernel // 2), nn.BatchNorm2d(c2), nn.ReLU(),
        nn.MaxPool2d(2, 2),
        nn.Flatten(), nn.Dropout(0.5),
        nn.Linear(c2 * side * side, hidden[0]), nn.ReLU(), nn.Linear(hidden[0], hidden[1]),
        nn.ReLU(), nn.Linear(hidden[1], 10))


def classifier_step(lib, model, x, y, lr=3e-3):
    opt = lib.optim.Adam(model.parameters(), lr=lr)
    loss_fn = lib.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return step


def cnn(lib, rng, size, batch):
    x = lib.tensor(rng.standard_normal((batch, 1, size, size)).astype(np.float32))
    y = lib.tensor(rng.integers(0, 10, batch))
    return classifier_step(lib, lenet(lib, size), x, y)


class RowLSTM:
    """demos/train_lstm.py --task rows: LSTM(8, 128) over 8 rows, last hidden -> Linear(10)."""

    @staticmethod
    def build(lib, rng, hidden=128, batch=32):
        nn = lib.nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(input_size=8, hidden_size=hidden, batch_first=True)
                self.fc = nn.Linear(hidden, 10)

            def forward(self, x):
                _, (h_n, _) = self.lstm(x)
                return self.fc(h_n[-1])

        x = lib.tensor(rng.standard_normal((batch, 8, 8)).astype(np.float32))
        y = lib.tensor(rng.integers(0, 10, batch))
        return classifier_step(lib, Model(), x, y, lr=5e-3)


def char_lm(lib, rng, vocab=96, embed=32, hidden=128, batch=32, seq=48):
    """demos/train_lstm.py --task charlm: Embedding -> LSTM(32, 128) -> Linear(vocab), BPTT 48."""
    nn = lib.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, embed)
            self.lstm = nn.LSTM(input_size=embed, hidden_size=hidden, batch_first=True)
            self.head = nn.Linear(hidden, vocab)

        def forward(self, idx):
            out, _ = self.lstm(self.embedding(idx))
            return self.head(out)

    model = Model()
    x = lib.tensor(rng.integers(0, vocab, (batch, seq)))
    y = lib.tensor(rng.integers(0, vocab, (batch * seq,)))
    opt = lib.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x).reshape(-1, vocab), y)
        loss.backward()
        opt.step()
    return step


def gan_step(lib, generator, discriminator, real, latent, lr):
    """demos/train_gan.py's iteration: a discriminator step on real and detached fake data,
    then a generator step; BCE losses, Adam(betas=(0.5, 0.999))."""
    batch = real.shape[0]
    g_opt = lib.optim.Adam(generator.parameters(), lr=lr, betas=(0.5, 0.999))
    d_opt = lib.optim.Adam(discriminator.parameters(), lr=lr, betas=(0.5, 0.999))
    bce = lib.nn.BCELoss()
    ones, zeros = lib.ones(batch, 1), lib.zeros(batch, 1)

    def step():
        d_opt.zero_grad()
        d_loss = bce(discriminator(real), ones)
        fake = generator(lib.randn(batch, latent))
        d_loss = d_loss + bce(discriminator(fake.detach()), zeros)
        d_loss.backward()
        d_opt.step()
        g_opt.zero_grad()
        g_loss = bce(discriminator(generator(lib.randn(batch, latent))), ones)
        g_loss.backward()
        g_opt.step()
    return step


def mlp_gan(lib, rng, hidden=256, latent=100, batch=64):
    nn = lib.nn
    gen = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, 64), nn.Tanh())
    disc = nn.Sequential(nn.Linear(64, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, 1),
                         nn.Sigmoid())
    real = lib.tensor(rng.uniform(-1, 1, (batch, 64)).astype(np.float32))
    return gan_step(lib, gen, disc, real, latent, 2e-4)


def dcgan(lib, rng, width=32, latent=100, batch=64):
    nn = lib.nn

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.ConvTranspose2d(latent, width, 2, 1, 0, bias=False), nn.BatchNorm2d(width),
                nn.ReLU(),
                nn.ConvTranspose2d(width, width // 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(width // 2), nn.ReLU(),
                nn.ConvTranspose2d(width // 2, 1, 4, 2, 1), nn.Tanh())

        def forward(self, z):
            return self.net(z.reshape(z.shape[0], latent, 1, 1))

    disc = nn.Sequential(
        nn.Conv2d(1, width // 2, 4, 2, 1, bias=False), nn.LeakyReLU(0.2),
        nn.Conv2d(width // 2, width, 4, 2, 1, bias=False), nn.BatchNorm2d(width),
        nn.LeakyReLU(0.2), nn.Conv2d(width, 1, 2, 1, 0, bias=False), nn.Flatten(), nn.Sigmoid())
    real = lib.tensor(rng.uniform(-1, 1, (batch, 1, 8, 8)).astype(np.float32))
    return gan_step(lib, Generator(), disc, real, latent, 5e-4)


def transformer(lib, rng, d_model=128, heads=4, ff=512, batch=32, seq=32):
    """nn.TransformerEncoderLayer(128, 4, 512, batch_first=True) + Linear head, MSE, Adam."""
    nn = lib.nn
    layer = nn.TransformerEncoderLayer(d_model, heads, ff, batch_first=True)
    head = nn.Linear(d_model, 1)
    params = list(layer.parameters()) + list(head.parameters())
    opt = lib.optim.Adam(params, lr=1e-3)
    loss_fn = nn.MSELoss()
    x = lib.tensor(rng.standard_normal((batch, seq, d_model)).astype(np.float32))
    y = lib.tensor(rng.standard_normal((batch, seq, 1)).astype(np.float32))

    def step():
        opt.zero_grad()
        loss = loss_fn(head(layer(x)), y)
        loss.backward()
        opt.step()
    return step


WORKLOADS = {  # name -> (description, builder(lib, rng))
    "cnn-demo": ("LeNet-5+BN, 8x8 digits, batch 32, Adam", lambda lib, rng: cnn(lib, rng, 8, 32)),
    "cnn-mnist": ("LeNet-5+BN, 28x28, batch 64, Adam", lambda lib, rng: cnn(lib, rng, 28, 64)),
    "lstm-rows": ("LSTM(8,128) x8 steps, batch 32", RowLSTM.build),
    "lstm-charlm": ("Emb+LSTM(32,128) x48, batch 32", char_lm),
    "gan-mlp": ("MLP GAN D+G step, batch 64", mlp_gan),
    "gan-dcgan": ("DCGAN D+G step, batch 64", dcgan),
    "transformer": ("EncoderLayer(128,4,512) x32, batch 32", transformer),
}


# --- measuring ------------------------------------------------------------------------------
def steps_per_round(step, round_ms):
    start = time.perf_counter()
    step()
    once = time.perf_counter() - start
    return max(1, int(round_ms / 1e3 / max(once, 1e-6)))


def timed_ms(step, n):
    """(wall ms, process cpu ms) per step over n steps."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        step()
    return ((time.perf_counter() - wall) / n * 1e3, (time.process_time() - cpu) / n * 1e3)


def measure(name, args):
    desc, build = WORKLOADS[name]
    sides = {"minigpu": build(mg, np.random.default_rng(0))}
    if torch is not None:
        torch.manual_seed(0)
        sides["torch"] = build(torch, np.random.default_rng(0))
    mg.manual_seed(0)
    for step in sides.values():
        for _ in range(args.warmup):
            step()
    sizes = {k: steps_per_round(s, args.round_ms) for k, s in sides.items()}
    times = {k: [] for k in sides}
    order = list(sides)
    for r in range(args.rounds):
        for k in (order if r % 2 == 0 else order[::-1]):
            times[k].append(timed_ms(sides[k], sizes[k]))
    row = {"name": name, "desc": desc}
    for k in sides:
        row[f"{k}_ms"] = statistics.median(wall for wall, _ in times[k])
        row[f"{k}_cpu_ms"] = statistics.median(cpu for _, cpu in times[k])
    if not args.no_memory:
        row["minigpu_peak"] = peak_memory.peak_bytes("minigpu", sides["minigpu"])
        if torch is not None:
            row["torch_peak"] = peak_memory.peak_bytes("torch", sides["torch"])
    return row


def mib(b):
    return f"{b / 2**20:7.2f}"


def main(args):
    if torch is not None:
        torch.set_num_threads(args.threads)
    env = " ".join(f"{v}={os.environ.get(v)}" for v in
                   ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))
    print(f"{env}; torch.get_num_threads()="
          f"{torch.get_num_threads() if torch is not None else '-'}; numpy {np.__version__}, "
          f"torch {torch.__version__ if torch is not None else 'not importable'}, "
          f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f} at start")
    print(f"minigpu from {os.path.dirname(mg.__file__)}; median of {args.rounds} alternating "
          f"rounds per side; peak memory: tracemalloc (minigpu), torch.profiler allocator events "
          f"(torch)")
    names = args.only or list(WORKLOADS)
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        sys.exit(f"unknown workload(s) {unknown}; choose from {list(WORKLOADS)}")
    header = (f"{'workload':<12} {'what':<40} {'torch ms':>9} {'minigpu ms':>10} {'ratio':>6} "
              f"{'cpu-time ratio':>14} {'torch MiB':>9} {'minigpu MiB':>11} {'mem ratio':>9}")
    print(header)
    ratios, cpu_ratios = [], []
    for name in names:
        row = measure(name, args)
        t, m = row.get("torch_ms"), row["minigpu_ms"]
        ratio = f"{m / t:5.2f}x" if t else "     -"
        cpu_ratio = f"{row['minigpu_cpu_ms'] / row['torch_cpu_ms']:13.2f}x" if t else f"{'-':>14}"
        if t:
            ratios.append(m / t)
            cpu_ratios.append(row["minigpu_cpu_ms"] / row["torch_cpu_ms"])
        tp, mp = row.get("torch_peak"), row.get("minigpu_peak")
        mem = (f"{mib(tp):>9} {mib(mp):>11} {mp / tp:8.2f}x" if tp and mp is not None
               else f"{'-':>9} {mib(mp) if mp is not None else '-':>11} {'-':>9}")
        print(f"{name:<12} {row['desc']:<40} {t if t else float('nan'):9.2f} {m:10.2f} "
              f"{ratio} {cpu_ratio} {mem}", flush=True)
    if ratios:
        print(f"geometric mean of the time ratios: {geomean(ratios):.2f}x (max "
              f"{max(ratios):.2f}x), of the cpu-time ratios: {geomean(cpu_ratios):.2f}x (max "
              f"{max(cpu_ratios):.2f}x); load average {os.getloadavg()[0]:.1f} at the end")


def geomean(values):
    return float(np.exp(np.mean(np.log(values))))


if __name__ == "__main__":
    main(ARGS)
