"""LSTMs on real data, two tasks in one script (``--task``):

``rows`` (default)
    Read each 8x8 digit as a sequence of 8 rows of 8 pixels, one row per timestep, and
    classify it from the LSTM's final hidden state (``--bidirectional``: the forward and the
    backward final states, concatenated).

        python demos/train_lstm.py
        python demos/train_lstm.py --bidirectional

``charlm``
    A character-level language model on Python source code from the standard library
    (``minigpu.datasets.load_text()``): Embedding -> LSTM -> Linear predicts the next character.
    Its cross-entropy (nats per character) is compared with the unigram entropy of the
    corpus, the loss of the best model that ignores context; generated samples are printed.

        python demos/train_lstm.py --task charlm

Writes metrics.json (and for rows: curves.png, for charlm: curves.png and samples.txt) into
--out (default runs/train_lstm/<task>).
"""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _demo_utils as du  # noqa: E402

import minigpu as mg  # noqa: E402
import minigpu.nn as nn  # noqa: E402
from minigpu.datasets import load_digits, load_text  # noqa: E402
from minigpu.utils.data import DataLoader, TensorDataset  # noqa: E402

DEMO = "train_lstm"
DEFAULTS = {  # per task: epochs, hidden size, batch size, learning rate
    "rows": dict(epochs=25, hidden=128, batch_size=32, lr=5e-3),
    "charlm": dict(epochs=8, hidden=128, batch_size=32, lr=1e-2),
}


def parse_args(argv=None):
    parser = du.make_parser(DEMO, "LSTM on digit rows (--task rows) or a character-level "
                                  "language model (--task charlm)",
                            default_epochs="rows 25, charlm 8",
                            default_out=f"runs/{DEMO}/TASK")
    parser.add_argument("--task", choices=tuple(DEFAULTS), default="rows",
                        help="rows: classify digits read row by row; charlm: predict the next "
                             "character of Python source")
    parser.add_argument("--hidden", type=du.positive_int, default=None,
                        help="LSTM hidden size (default: 128)")
    parser.add_argument("--batch-size", type=du.positive_int, default=None,
                        help="sequences per batch (default: 32)")
    parser.add_argument("--lr", type=du.positive_float, default=None,
                        help="Adam's peak learning rate, cosine decay (default: rows 5e-3, "
                             "charlm 1e-2)")
    parser.add_argument("--bidirectional", action="store_true",
                        help="rows: a bidirectional LSTM (charlm must not see the future)")
    charlm = parser.add_argument_group("charlm")
    charlm.add_argument("--seq-len", type=du.positive_int, default=48,
                        help="characters per training sequence (truncated BPTT length)")
    charlm.add_argument("--steps-per-epoch", type=du.positive_int, default=100,
                        help="training batches per epoch")
    charlm.add_argument("--embed", type=du.positive_int, default=32,
                        help="character embedding size")
    charlm.add_argument("--temperature", type=du.positive_float, default=0.7,
                        help="sampling temperature for the generated text")
    charlm.add_argument("--sample-chars", type=du.positive_int, default=300,
                        help="length of each generated text sample")
    args = parser.parse_args(argv)
    if args.bidirectional and args.task == "charlm":
        parser.error("--bidirectional applies to --task rows only: a language model that reads "
                     "the sequence backwards sees the characters it must predict")
    for key, value in DEFAULTS[args.task].items():
        if getattr(args, key) is None and key != "epochs":
            setattr(args, key, value)
    if args.out is None:
        args.out = Path("runs") / DEMO / args.task
    return du.finish_args(parser, args, default_epochs=DEFAULTS[args.task]["epochs"])


def cosine_lr(optimizer, base_lr, step, total):
    lr = base_lr * 0.5 * (1 + math.cos(math.pi * step / total))
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def plot_curves(history, path, keys, ylabel, hline=None, hlabel=None):
    plt = du.pyplot()
    fig, ax = plt.subplots(figsize=(5, 3))
    for key, label in keys:
        ax.plot([h["epoch"] for h in history], [h[key] for h in history], label=label,
                marker="o", markersize=3)
    if hline is not None:
        ax.axhline(hline, color="gray", linestyle="--", label=hlabel)
    ax.set_xlabel("epoch"), ax.set_ylabel(ylabel), ax.legend()
    fig.tight_layout()
    return du.save_figure(fig, path)


# --- task rows ------------------------------------------------------------------------------------
class RowLSTM(nn.Module):
    """LSTM over the 8 rows of a digit; the final hidden state(s) -> Linear -> 10 logits."""

    def __init__(self, hidden, bidirectional):
        super().__init__()
        self.lstm = nn.LSTM(input_size=8, hidden_size=hidden, num_layers=1, batch_first=True,
                            bidirectional=bidirectional)
        self.fc = nn.Linear(hidden * (2 if bidirectional else 1), 10)

    def forward(self, x):  # x: (N, 8 rows, 8 pixels)
        _, (h_n, _) = self.lstm(x)  # h_n: (num_directions, N, hidden)
        feature = mg.cat([h_n[0], h_n[1]], dim=1) if self.lstm.bidirectional else h_n[0]
        return self.fc(feature)


def accuracy(model, x, y, batch=512):
    model.eval()
    with mg.no_grad():
        preds = np.concatenate([model(x[s:s + batch]).numpy().argmax(axis=1)
                                for s in range(0, x.shape[0], batch)])
    model.train()
    return float((preds == y.numpy()).mean())


def run_rows(args):
    device = args.device
    x_train, y_train = load_digits("train", device=device)
    x_test, y_test = load_digits("test", device=device)
    x_train, x_test = x_train.reshape(-1, 8, 8), x_test.reshape(-1, 8, 8)  # (N, time, feature)
    batch_size, hidden = args.batch_size, args.hidden
    if args.smoke:
        x_train, y_train, x_test, y_test = x_train[:8], y_train[:8], x_test[:8], y_test[:8]
        batch_size, hidden = 4, 4
    model = RowLSTM(hidden, args.bidirectional).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{'bidirectional ' if args.bidirectional else ''}LSTM(8, {hidden}) + Linear, "
          f"{n_params} parameters; {x_train.shape[0]} training / {x_test.shape[0]} test digits")
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=batch_size, shuffle=True)
    optimizer = mg.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    history = []
    with du.Timer() as timer:
        for epoch in range(1, args.epochs + 1):
            lr = cosine_lr(optimizer, args.lr, epoch - 1, args.epochs)
            total, seen = 0.0, 0
            bar = du.progress(loader, desc=f"epoch {epoch}/{args.epochs}", unit="batch")
            for x, y in bar:
                optimizer.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
                total, seen = total + loss.item() * y.shape[0], seen + y.shape[0]
                if hasattr(bar, "set_postfix"):
                    bar.set_postfix(loss=f"{total / seen:.4f}")
            test_acc = accuracy(model, x_test, y_test)
            history.append(dict(epoch=epoch, lr=lr, train_loss=total / seen,
                                test_accuracy=test_acc))
            print(f"epoch {epoch:3d}  lr {lr:.2e}  train loss {total / seen:.4f}  "
                  f"test acc {100 * test_acc:6.2f}%", flush=True)
    train_acc = accuracy(model, x_train, y_train)
    plot_curves(history, args.out / "curves.png", [("train_loss", "train loss")],
                "cross-entropy")
    print(f"test accuracy {100 * history[-1]['test_accuracy']:.2f}% (train "
          f"{100 * train_acc:.2f}%) after {args.epochs} "
          f"epoch{'s' if args.epochs != 1 else ''}, {timer.seconds:.1f} s")
    return dict(bidirectional=args.bidirectional, hidden=hidden, batch_size=batch_size,
                parameters=n_params, test_accuracy=history[-1]["test_accuracy"],
                train_accuracy=train_acc, train_loss=history[-1]["train_loss"],
                train_seconds=timer.seconds, history=history)


# --- task charlm ----------------------------------------------------------------------------------
class CharLM(nn.Module):
    def __init__(self, vocab, embed, hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(input_size=embed, hidden_size=hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, idx, state=None):  # idx: (N, L) int64 -> logits (N, L, vocab)
        out, state = self.lstm(self.embedding(idx), state)
        return self.head(out), state


def unigram_entropy(codes, vocab):
    """Entropy (nats) of the character frequencies: the loss of the best context-free model."""
    p = np.bincount(codes, minlength=vocab) / len(codes)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def chunks(codes, starts, length, device):
    """(inputs, targets): rows codes[s:s+length] and codes[s+1:s+length+1] for s in starts."""
    index = starts[:, None] + np.arange(length + 1)[None, :]
    rows = codes[index]
    return (mg.tensor(rows[:, :-1], dtype=mg.int64, device=device),
            mg.tensor(rows[:, 1:], dtype=mg.int64, device=device))


class CharCorpus:
    """The standard-library text as character codes: every 10th block of 2 000 characters is
    held out (validation text from every module); ``train_gpt.py`` uses the same split."""

    def __init__(self):
        text = load_text()
        self.itos = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        codes = np.array(self.encode(text), dtype=np.int64)
        block = np.arange(len(codes)) // 2000
        self.train, self.val = codes[block % 10 != 9], codes[block % 10 == 9]
        self.vocab, self.chars = len(self.itos), len(codes)
        self.entropy = unigram_entropy(self.train, self.vocab)

    def encode(self, text):
        return [self.stoi[c] for c in text]

    def decode(self, codes):
        return "".join(self.itos[c] for c in codes)

    def validation(self, seq_len, batch_size, batches, device):
        """A fixed validation set: ``batches`` (inputs, targets) pairs of evenly spaced chunks
        of the held-out text."""
        if seq_len + 2 > len(self.val):
            raise SystemExit(f"error: a sequence length of {seq_len} is longer than the "
                             f"{len(self.val)} held-out characters")
        starts = np.linspace(0, len(self.val) - seq_len - 2, batches * batch_size,
                             dtype=np.int64)
        return [chunks(self.val, s, seq_len, device) for s in np.split(starts, batches)]


def sequence_loss(model, loss_fn, x, y):
    logits, _ = model(x)
    return loss_fn(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def generate(model, prompt, length, stoi, itos, temperature, rng, device):
    """Feed the prompt, then sample one character at a time, carrying the LSTM state."""
    model.eval()
    text = prompt
    with mg.no_grad():
        idx = mg.tensor([[stoi[c] for c in prompt]], dtype=mg.int64, device=device)
        state = None
        for _ in range(length):
            logits, state = model(idx, state)
            z = logits[0, -1].numpy().astype(np.float64) / temperature
            p = np.exp(z - z.max())
            code = int(rng.choice(len(p), p=p / p.sum()))
            text += itos[code]
            idx = mg.tensor([[code]], dtype=mg.int64, device=device)
    model.train()
    return text


def charlm_epoch(model, optimizer, loss_fn, sequence_loss, codes, val_sets, rng, batch_size,
                 seq_len, steps, base_lr, step, total_steps, device, desc):
    """One epoch of next-character training on ``steps`` batches of random windows of
    ``codes`` (cosine learning rate), then the mean validation loss; ``sequence_loss(model,
    loss_fn, x, y)`` is the model's loss. Returns (train loss, val loss, lr, step)."""
    total = 0.0
    bar = du.progress(range(steps), desc=desc, unit="step")
    for _ in bar:
        lr = cosine_lr(optimizer, base_lr, step, total_steps)
        starts = rng.integers(0, len(codes) - seq_len - 1, batch_size)
        x, y = chunks(codes, starts, seq_len, device)
        optimizer.zero_grad()
        loss = sequence_loss(model, loss_fn, x, y)
        loss.backward()
        optimizer.step()
        total += loss.item()
        step += 1
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    with mg.no_grad():
        val_loss = float(np.mean([sequence_loss(model, loss_fn, x, y).item()
                                  for x, y in val_sets]))
    model.train()
    return total / steps, val_loss, lr, step


def run_charlm(args):
    device = args.device
    corpus = CharCorpus()
    stoi, itos, train_codes, vocab = corpus.stoi, corpus.itos, corpus.train, corpus.vocab
    entropy = corpus.entropy
    seq_len, batch_size, hidden, embed = args.seq_len, args.batch_size, args.hidden, args.embed
    steps_per_epoch, sample_chars, val_batches = args.steps_per_epoch, args.sample_chars, 8
    if args.smoke:
        seq_len, batch_size, hidden, embed = 4, 2, 4, 4
        steps_per_epoch, sample_chars, val_batches = 2, 4, 1
    model = CharLM(vocab, embed, hidden).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"corpus: {corpus.chars} characters, vocabulary {vocab}, unigram entropy "
          f"{entropy:.3f} nats/char ({entropy / math.log(2):.3f} bits); model Embedding("
          f"{vocab}, {embed}) -> LSTM({embed}, {hidden}) -> Linear({hidden}, {vocab}), "
          f"{n_params} parameters")
    rng = np.random.default_rng(args.seed)
    val_sets = corpus.validation(seq_len, batch_size, val_batches, device)
    optimizer = mg.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    total_steps, step = args.epochs * steps_per_epoch, 0
    history, samples = [], []
    with du.Timer() as timer:
        for epoch in range(1, args.epochs + 1):
            train_loss, val_loss, lr, step = charlm_epoch(
                model, optimizer, loss_fn, sequence_loss, train_codes, val_sets, rng,
                batch_size, seq_len, steps_per_epoch, args.lr, step, total_steps, device,
                f"epoch {epoch}/{args.epochs}")
            history.append(dict(epoch=epoch, lr=lr, train_loss=train_loss, val_loss=val_loss))
            print(f"epoch {epoch:3d}  train loss {train_loss:.3f}  val loss "
                  f"{val_loss:.3f} nats/char  (unigram entropy {entropy:.3f})", flush=True)
    for prompt in ("def ", "class "):
        sample = generate(model, prompt, sample_chars, stoi, itos, args.temperature, rng,
                          device)
        samples.append(sample)
        print(f"--- sample (temperature {args.temperature}) ---\n{sample}\n---")
    (args.out / "samples.txt").write_text("\n\n".join(samples) + "\n")
    plot_curves(history, args.out / "curves.png",
                [("train_loss", "train"), ("val_loss", "validation")], "nats per character",
                hline=entropy, hlabel="unigram entropy")
    final = history[-1]
    print(f"validation loss {final['val_loss']:.3f} nats/char vs unigram entropy "
          f"{entropy:.3f} ({final['val_loss'] / entropy:.0%}) after {total_steps} steps, "
          f"{timer.seconds:.1f} s")
    return dict(vocab=vocab, corpus_chars=corpus.chars, hidden=hidden, embed=embed,
                seq_len=seq_len, batch_size=batch_size, steps=total_steps,
                parameters=n_params, unigram_entropy=entropy,
                train_loss=final["train_loss"], val_loss=final["val_loss"],
                loss_ratio=final["val_loss"] / entropy,
                bits_per_char=final["val_loss"] / math.log(2), samples=samples,
                train_seconds=timer.seconds, history=history)


def main(argv=None):
    args = parse_args(argv)
    du.header(f"{DEMO} --task {args.task}", args.device, args)
    mg.manual_seed(args.seed)
    result = run_rows(args) if args.task == "rows" else run_charlm(args)
    metrics = dict(demo=DEMO, task=args.task, device=args.device,
                   simulator=args.device == "cuda" and mg.cuda.is_simulator(),
                   epochs=args.epochs, seed=args.seed, smoke=args.smoke, lr=args.lr, **result)
    du.write_metrics(args.out, metrics)
    print(f"wrote {args.out}/metrics.json")
    return metrics


if __name__ == "__main__":
    main()
