"""A small GPT: a decoder-only transformer character model on Python source from the standard
library (``minigpu.datasets.load_text()``, the text of ``train_lstm.py --task charlm``, split
the same way, so the two validation losses compare).

Token and position embeddings -> ``--layers`` pre-norm blocks (causal multi-head
self-attention through ``F.scaled_dot_product_attention``, a GELU MLP) -> LayerNorm -> a head
tied to the token embedding. On cuda the attention runs the flash-attention kernels.
Sampling uses a key/value cache: each new character attends to the cached keys and values of
the ones before it instead of recomputing the whole prefix (``generate(..., cache=False)``
recomputes it; both give the same characters).

    python demos/train_gpt.py
    python demos/train_gpt.py --layers 4 --epochs 12

Writes metrics.json, curves.png and samples.txt into --out (default runs/train_gpt).
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _demo_utils as du  # noqa: E402
from train_lstm import CharCorpus, charlm_epoch, plot_curves  # noqa: E402

import minigpu as mg  # noqa: E402
import minigpu.nn as nn  # noqa: E402
import minigpu.nn.functional as F  # noqa: E402

DEMO = "train_gpt"
EPOCHS = 8


def parse_args(argv=None):
    parser = du.make_parser(DEMO, "a decoder-only transformer character model on Python "
                                  "source", default_epochs=EPOCHS)
    parser.add_argument("--width", type=du.positive_int, default=64,
                        help="embedding width (a multiple of --heads)")
    parser.add_argument("--heads", type=du.positive_int, default=4, help="attention heads")
    parser.add_argument("--layers", type=du.positive_int, default=2, help="transformer blocks")
    parser.add_argument("--context", type=du.positive_int, default=32,
                        help="context window: training sequence length and the most "
                             "characters a prediction sees")
    parser.add_argument("--batch-size", type=du.positive_int, default=16, help="sequences per step")
    parser.add_argument("--lr", type=du.positive_float, default=3e-3, help="peak learning rate")
    parser.add_argument("--steps-per-epoch", type=du.positive_int, default=50,
                        help="optimizer steps per epoch")
    parser.add_argument("--temperature", type=du.positive_float, default=0.7,
                        help="sampling temperature")
    parser.add_argument("--sample-chars", type=du.positive_int, default=300,
                        help="characters generated per sample")
    args = parser.parse_args(argv)
    if args.width % args.heads:
        parser.error(f"--width {args.width} is not a multiple of --heads {args.heads}")
    return du.finish_args(parser, args, default_epochs=EPOCHS)


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x, cache=None):
        """x (N, T, width) -> (N, T, width). With ``cache`` (a dict, empty at first) the keys
        and values of earlier calls are reused and this call's are appended: x holds the T
        positions after the cached ones."""
        N, T, C = x.shape
        qkv = self.qkv(x.reshape(N * T, C))         # a matrix: one GEMM, not N small ones
        q, k, v = (t.reshape(N, T, self.heads, C // self.heads).transpose(1, 2)
                   for t in qkv.chunk(3, dim=-1))
        past = 0
        if cache is not None:
            if cache:
                past = cache["k"].shape[2]
                k, v = mg.cat([cache["k"], k], 2), mg.cat([cache["v"], v], 2)
            cache["k"], cache["v"] = k, v
        if past and T > 1:      # new queries see every cached key and the new ones up to them
            keep = mg.tensor(np.tril(np.ones((T, past + T), bool), past), device=x.device)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        else:                   # no cache: causal; one new query: it sees everything
            out = F.scaled_dot_product_attention(q, k, v, is_causal=not past)
        return self.proj(out.transpose(1, 2).reshape(N * T, C)).reshape(N, T, C)


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * width, width))

    def forward(self, x, cache=None):
        x = x + self.attn(self.ln1(x), cache)
        N, T, C = x.shape
        return x + self.mlp(self.ln2(x).reshape(N * T, C)).reshape(N, T, C)


class GPT(nn.Module):
    def __init__(self, vocab, width, heads, layers, context):
        super().__init__()
        self.context = context
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tokens.weight          # weight tying
        for embedding in (self.tokens, self.positions):  # small: logits near 0 at the start
            nn.init.normal_(embedding.weight, std=0.02)

    def forward(self, idx, caches=None):
        """idx (N, T) int64 -> logits (N, T, vocab). ``caches``: one dict per block (see
        ``CausalSelfAttention``); positions continue after the cached ones."""
        start = caches[0]["k"].shape[2] if caches and caches[0] else 0
        T = idx.shape[1]
        if start + T > self.context:
            raise ValueError(f"GPT: {start + T} positions, the context window is {self.context}")
        pos = mg.arange(start, start + T, device=idx.device)
        x = self.tokens(idx) + self.positions(pos)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])
        N, _, C = x.shape
        return self.head(self.ln(x).reshape(N * T, C)).reshape(N, T, -1)


def generate(model, codes, length, temperature, rng, cache=True):
    """``codes`` followed by ``length`` sampled codes. The model sees a window of at most its
    context; when the window is full it restarts from its last half. With ``cache`` each step
    feeds one character and the blocks' key/value caches (re-primed on a restart), else each
    step recomputes the whole window: the same logits, so the same characters."""
    model.eval()
    out = list(codes)
    window = max(len(out) - model.context + 1, 0)   # where the model's window starts
    caches, fed = None, window                       # fed: codes already in the caches
    device = model.tokens.weight.device
    with mg.no_grad():
        for _ in range(length):
            if len(out) - window >= model.context:
                window = len(out) - model.context // 2
                caches, fed = None, window
            if cache:
                if caches is None:
                    caches = [{} for _ in model.blocks]
                idx = mg.tensor([out[fed:]], dtype=mg.int64, device=device)
                logits = model(idx, caches)
                fed = len(out)
            else:
                logits = model(mg.tensor([out[window:]], dtype=mg.int64, device=device))
            z = logits[0, -1].numpy().astype(np.float64) / temperature
            p = np.exp(z - z.max())
            out.append(int(rng.choice(len(p), p=p / p.sum())))
    model.train()
    return out


def sequence_loss(model, loss_fn, x, y):
    logits = model(x)
    return loss_fn(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def main(argv=None):
    args = parse_args(argv)
    du.header(DEMO, args.device, args)
    mg.manual_seed(args.seed)
    device = args.device
    corpus = CharCorpus()
    width, heads, layers, context = args.width, args.heads, args.layers, args.context
    batch_size, steps_per_epoch = args.batch_size, args.steps_per_epoch
    sample_chars, val_batches = args.sample_chars, 8
    if args.smoke:
        width, heads, layers, context, batch_size = 8, 2, 1, 8, 2
        steps_per_epoch, sample_chars, val_batches = 2, 2, 1
    model = GPT(corpus.vocab, width, heads, layers, context).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"corpus: {corpus.chars} characters, vocabulary {corpus.vocab}, unigram entropy "
          f"{corpus.entropy:.3f} nats/char; model GPT(width {width}, {heads} heads, {layers} "
          f"layers, context {context}), {n_params} parameters")
    rng = np.random.default_rng(args.seed)
    val_sets = corpus.validation(context, batch_size, val_batches, device)
    optimizer = mg.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss()
    total_steps, step = args.epochs * steps_per_epoch, 0
    history = []
    with du.Timer() as timer:
        for epoch in range(1, args.epochs + 1):
            train_loss, val_loss, lr, step = charlm_epoch(
                model, optimizer, loss_fn, sequence_loss, corpus.train, val_sets, rng,
                batch_size, context, steps_per_epoch, args.lr, step, total_steps, device,
                f"epoch {epoch}/{args.epochs}")
            history.append(dict(epoch=epoch, lr=lr, train_loss=train_loss, val_loss=val_loss))
            print(f"epoch {epoch:3d}  train loss {train_loss:.3f}  val loss "
                  f"{val_loss:.3f} nats/char  (unigram entropy {corpus.entropy:.3f})",
                  flush=True)
    samples = []
    for prompt in ("def ", "class "):
        codes = generate(model, corpus.encode(prompt), sample_chars, args.temperature, rng)
        samples.append(corpus.decode(codes))
        print(f"--- sample (temperature {args.temperature}, key/value cache) ---\n"
              f"{samples[-1]}\n---")
    (args.out / "samples.txt").write_text("\n\n".join(samples) + "\n")
    plot_curves(history, args.out / "curves.png",
                [("train_loss", "train"), ("val_loss", "validation")], "nats per character",
                hline=corpus.entropy, hlabel="unigram entropy")
    final = history[-1]
    print(f"validation loss {final['val_loss']:.3f} nats/char vs unigram entropy "
          f"{corpus.entropy:.3f} ({final['val_loss'] / corpus.entropy:.0%}) after "
          f"{total_steps} steps, {timer.seconds:.1f} s")
    metrics = dict(demo=DEMO, device=device,
                   simulator=device == "cuda" and mg.cuda.is_simulator(),
                   epochs=args.epochs, seed=args.seed, smoke=args.smoke, lr=args.lr,
                   vocab=corpus.vocab, corpus_chars=corpus.chars, width=width, heads=heads,
                   layers=layers, context=context, batch_size=batch_size, steps=total_steps,
                   parameters=n_params, unigram_entropy=corpus.entropy,
                   train_loss=final["train_loss"], val_loss=final["val_loss"],
                   loss_ratio=final["val_loss"] / corpus.entropy,
                   bits_per_char=final["val_loss"] / math.log(2), samples=samples,
                   train_seconds=timer.seconds, history=history)
    du.write_metrics(args.out, metrics)
    print(f"wrote {args.out}/metrics.json")
    return metrics


if __name__ == "__main__":
    main()
