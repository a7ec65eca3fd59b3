"""The source material's GAN, sized for the 8x8 digits.

Generator ``Linear(100, 256) -> ReLU -> Linear(256, 64) -> Tanh`` turns a latent vector into an
image (pixels in [-1, 1]); discriminator ``Linear(64, 256) -> LeakyReLU(0.2) -> Linear(256, 1)
-> Sigmoid`` says how likely an image is real. Both train with ``BCELoss`` and
``Adam(lr=0.0002)`` (with beta1 = 0.5, as DCGAN recommends: ``--beta1 0.9`` is the source's
PyTorch default and collapses onto fewer digits). Per iteration: ``--d-steps`` discriminator
updates on a real batch and a ``fake_data.detach()`` batch (the generator gets no gradient
from them), then one generator update that labels its fakes as real.

    python demos/train_gan.py
    python demos/train_gan.py --arch dcgan

``--arch dcgan`` swaps both networks for a DCGAN sized for 8x8 (Radford et al. 2016): the
generator reshapes z to (100, 1, 1) and grows it with ``ConvTranspose2d`` (1 -> 2 -> 4 -> 8
pixels, BatchNorm + ReLU between, Tanh last); the discriminator mirrors it with strided
``Conv2d`` (8 -> 4 -> 2 -> 1, BatchNorm + LeakyReLU(0.2), Sigmoid last); weights start from
N(0, 0.02) and BatchNorm scales from N(1, 0.02), as the paper does. Its defaults differ from the
MLP's: 40 epochs, 32 channels at the widest, Adam lr 0.0005 (at 0.0002 the small initial weights
have not grown enough after 40 epochs: gray backgrounds, inception score about 2.4). Both keep
the MLP's interface (flat 64-pixel images), so the training loop, sample grids and scores are
the same.

How good are the samples? A digits CNN classifies generated images: digit-like samples get
confident predictions (mean max-softmax), and a generator that has not collapsed onto a few
digits covers many classes (entropy of the predicted-class histogram; ln 10 = 2.30 is uniform).
Both are reported for the trained generator, an untrained one, and real test digits. The CNN
is the train_cnn demo's run next to this one (``--classifier``, default ``OUT/../train_cnn``:
``runs/train_cnn`` for the default ``--out runs/train_gan``), else one trained here for a few
epochs. Scores from a weak classifier mean little, so when its test accuracy is below
``--min-classifier-accuracy`` the scores are refused (metrics.json says why).

Writes into --out (default runs/train_gan): metrics.json, generator.safetensors,
discriminator.safetensors, samples.png (final samples), progress.png (the same latent vectors
over training), losses.png.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _demo_utils as du  # noqa: E402

import minigpu as mg  # noqa: E402
import minigpu.nn as nn  # noqa: E402
import minigpu.optim as optim  # noqa: E402
from minigpu.datasets import load_digits  # noqa: E402
from minigpu.models import LeNet5  # noqa: E402
from minigpu.utils.data import DataLoader, TensorDataset  # noqa: E402

DEMO = "train_gan"
LATENT = 100
DEFAULT_EPOCHS = {"mlp": 100, "dcgan": 40}
DEFAULT_HIDDEN = {"mlp": 256, "dcgan": 32}
DEFAULT_LR = {"mlp": 2e-4, "dcgan": 5e-4}


def parse_args(argv=None):
    parser = du.make_parser(DEMO, "MLP GAN or DCGAN on the 8x8 digits, scored by a digits CNN",
                            default_epochs="100 (mlp) or 40 (dcgan)")
    parser.add_argument("--arch", choices=("mlp", "dcgan"), default="mlp",
                        help="mlp: the source material's GAN; dcgan: ConvTranspose2d generator "
                             "and conv discriminator with BatchNorm")
    parser.add_argument("--batch-size", type=du.positive_int, default=64,
                        help="real digits (and generated ones) per discriminator batch")
    parser.add_argument("--lr", type=du.positive_float, default=None,
                        help="Adam learning rate of both networks (mlp: the source's 0.0002; "
                             "dcgan: 0.0005, which the N(0, 0.02) initial weights need to "
                             "grow in 40 epochs)")
    parser.add_argument("--beta1", type=du.fraction, default=0.5,
                        help="Adam's beta1 for both networks: 0.5 as in DCGAN (the source's "
                             "snippet keeps PyTorch's default 0.9, which collapses more "
                             "often here)")
    parser.add_argument("--real-label", type=du.positive_float, default=1.0,
                        help="discriminator target for real digits (< 1: one-sided label "
                             "smoothing)")
    parser.add_argument("--d-steps", type=du.positive_int, default=1,
                        help="discriminator updates per generator update")
    parser.add_argument("--hidden", type=du.positive_int, default=None,
                        help="hidden units of the generator and of the discriminator (mlp; "
                             "default 256), or the channels of their widest conv layer "
                             "(dcgan; 32)")
    parser.add_argument("--sample-every", type=du.positive_int, default=None,
                        help="epochs between sample grids (default: epochs / 5)")
    parser.add_argument("--num-eval", type=du.positive_int, default=1000,
                        help="generated samples scored by the classifier")
    parser.add_argument("--classifier", type=Path, default=None,
                        help="a train_cnn run folder (model.safetensors + config.json) to "
                             "score samples with (default: OUT/../train_cnn, the train_cnn "
                             "run next to this one); a CNN is trained here when it has none")
    parser.add_argument("--min-classifier-accuracy", type=du.fraction, default=0.95,
                        help="refuse the scores when the classifier's accuracy on the test "
                             "digits is below this")
    args = parser.parse_args(argv)
    args = du.finish_args(parser, args, default_epochs=DEFAULT_EPOCHS[args.arch])
    if args.hidden is None:
        args.hidden = DEFAULT_HIDDEN[args.arch]
    if args.lr is None:
        args.lr = DEFAULT_LR[args.arch]
    if args.classifier is None:
        args.classifier = args.out.parent / "train_cnn"
    if args.sample_every is None:
        args.sample_every = max(1, args.epochs // 5)
    return args


def make_generator(hidden, latent=LATENT, pixels=64):
    return nn.Sequential(
        nn.Linear(latent, hidden),
        nn.ReLU(),
        nn.Linear(hidden, pixels),
        nn.Tanh(),
    )


def make_discriminator(hidden, pixels=64):
    return nn.Sequential(
        nn.Linear(pixels, hidden),
        nn.LeakyReLU(0.2),
        nn.Linear(hidden, 1),
        nn.Sigmoid(),
    )


class DCGANGenerator(nn.Module):
    """z (N, latent) -> (N, latent, 1, 1) -> ConvTranspose2d stack -> (N, 64) flat pixels."""

    def __init__(self, width, latent=LATENT):
        super().__init__()
        self.net = nn.Sequential(
            nn.ConvTranspose2d(latent, width, 2, 1, 0, bias=False),          # 1 -> 2
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.ConvTranspose2d(width, width // 2, 4, 2, 1, bias=False),      # 2 -> 4
            nn.BatchNorm2d(width // 2),
            nn.ReLU(),
            nn.ConvTranspose2d(width // 2, 1, 4, 2, 1),                      # 4 -> 8
            nn.Tanh(),
        )

    def forward(self, z):
        return self.net(z.reshape(z.shape[0], -1, 1, 1)).reshape(z.shape[0], 64)


class DCGANDiscriminator(nn.Module):
    """(N, 64) flat pixels -> (N, 1, 8, 8) -> strided Conv2d stack -> (N, 1) probability."""

    def __init__(self, width):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, width // 2, 4, 2, 1, bias=False),                  # 8 -> 4
            nn.LeakyReLU(0.2),
            nn.Conv2d(width // 2, width, 4, 2, 1, bias=False),              # 4 -> 2
            nn.BatchNorm2d(width),
            nn.LeakyReLU(0.2),
            nn.Conv2d(width, 1, 2, 1, 0, bias=False),                        # 2 -> 1
            nn.Flatten(),
            nn.Sigmoid(),
        )

    def forward(self, x):
        return self.net(x.reshape(x.shape[0], 1, 8, 8))


def dcgan_init_(module):
    """DCGAN's initialisation: conv weights N(0, 0.02) (biases 0), BatchNorm weights
    N(1, 0.02) and biases 0."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(m.weight, 0.0, 0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.normal_(m.weight, 1.0, 0.02)
            nn.init.zeros_(m.bias)
    return module


def make_networks(arch, hidden):
    """(generator, discriminator) of the chosen architecture."""
    if arch == "dcgan":
        return dcgan_init_(DCGANGenerator(hidden)), dcgan_init_(DCGANDiscriminator(hidden))
    return make_generator(hidden), make_discriminator(hidden)


def generate(generator, latent_vector):
    """Images (N, 1, 8, 8) in [0, 1] (what the classifier was trained on) from latent vectors."""
    generator.eval()
    with mg.no_grad():
        fake = generator(latent_vector)
    generator.train()
    return ((fake + 1) * 0.5).reshape(-1, 1, 8, 8)


# --- the classifier that scores samples -----------------------------------------------------------
def load_classifier(folder: Path, device):
    """The train_cnn demo's network from its run folder, or None (with the reason printed)."""
    config_path = folder / "config.json"
    model_path = next((folder / name for name in ("model.safetensors", "model.npz")
                       if (folder / name).is_file()), None)  # .npz: runs of older versions
    if model_path is None or not config_path.is_file():
        print(f"no train_cnn run in {folder}; training a classifier here")
        return None
    try:
        config = json.loads(config_path.read_text())
        model = LeNet5(**config)
        model.load_state_dict(mg.load(model_path, map_location="cpu"))  # a GPU run, read anywhere
    except Exception as e:  # a checkpoint from another version of the demo
        print(f"cannot use the classifier in {folder} ({type(e).__name__}: {e}); training one")
        return None
    print(f"scoring samples with the CNN from {model_path}")
    return model.to(device).eval()


def train_classifier(device, seed, smoke):
    """A digits CNN trained here: the train_cnn demo's network, fewer epochs."""
    import train_cnn

    epochs = 1 if smoke else 6
    config = dict(in_channels=1, num_classes=10, input_size=8, channels=(32, 64),
                  hidden=(120, 84), kernel_size=3, batch_norm=True, dropout=0.5)
    x, y = load_digits("train", device=device)
    if smoke:
        config.update(channels=(2, 4), hidden=(8, 8))
        x, y = x[:8], y[:8]
    print(f"training a digits CNN to score the samples ({epochs} epochs)")
    mg.manual_seed(seed + 1)
    model = LeNet5(**config).to(device)
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    for epoch in range(epochs):
        train_cnn.cosine_lr(optimizer, 3e-3, epoch, epochs)
        train_cnn.train_epoch(model, loader, optimizer, nn.CrossEntropyLoss(),
                              f"classifier {epoch + 1}/{epochs}")
    return model.eval()


def classifier_accuracy(classifier, x, y, batch=500):
    with mg.no_grad():
        preds = np.concatenate([classifier(x[s:s + batch]).numpy().argmax(axis=1)
                                for s in range(0, x.shape[0], batch)])
    return float((preds == y.numpy()).mean())


def sample_scores(classifier, images, batch=500):
    """Mean max-softmax confidence, entropy (nats) of the predicted-class histogram, classes
    predicted for at least 1 % of the images, and the inception score exp(E[KL(p(y|x)||p(y))])."""
    with mg.no_grad():
        probs = np.concatenate([mg.softmax(classifier(images[s:s + batch]), dim=1).numpy()
                                for s in range(0, images.shape[0], batch)]).astype(np.float64)
    counts = np.bincount(probs.argmax(axis=1), minlength=probs.shape[1])
    hist = counts / counts.sum()
    nz = hist[hist > 0]
    marginal = probs.mean(axis=0)
    kl = (probs * (np.log(probs + 1e-12) - np.log(marginal + 1e-12))).sum(axis=1).mean()
    return dict(confidence=float(probs.max(axis=1).mean()),
                class_entropy=float(-(nz * np.log(nz)).sum()) + 0.0,  # no -0.0
                classes_covered=int((hist >= 0.01).sum()),
                inception_score=float(math.exp(kl)),
                class_histogram=[int(c) for c in counts])


# --- pictures -------------------------------------------------------------------------------------
def plot_losses(history, path):
    plt = du.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3))
    epochs = [h["epoch"] for h in history]
    style = dict(marker="o", markersize=2)  # visible for a single epoch too
    ax.plot(epochs, [h["d_loss"] for h in history], label="discriminator (real + fake)",
            **style)
    ax.plot(epochs, [h["g_loss"] for h in history], label="generator", **style)
    ax.plot(epochs, [h["d_real"] for h in history], label="D(real)", linestyle=":", **style)
    ax.plot(epochs, [h["d_fake"] for h in history], label="D(G(z))", linestyle=":", **style)
    ax.axhline(2 * math.log(2), color="gray", linewidth=0.8, linestyle="--")
    ax.set_xlabel("epoch"), ax.set_ylabel("BCE loss / probability"), ax.legend(fontsize=7)
    fig.tight_layout()
    return du.save_figure(fig, path)


def plot_progress(snapshots, path):
    """One row per snapshot: the same fixed latent vectors, decoded as training proceeds."""
    plt = du.pyplot()
    rows, cols = len(snapshots), len(snapshots[0][1])
    fig, axes = plt.subplots(rows, cols, figsize=(cols * 0.6 + 0.9, rows * 0.6), squeeze=False)
    for r, (epoch, images) in enumerate(snapshots):
        for c in range(cols):
            ax = axes[r, c]
            ax.imshow(images[c], cmap="gray_r", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([]), ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(f"ep {epoch}", rotation=0, ha="right", va="center", fontsize=8)
    fig.subplots_adjust(wspace=0.05, hspace=0.05)
    return du.save_figure(fig, path)


def main(argv=None):
    args = parse_args(argv)
    device = args.device
    du.header(DEMO, device, args)
    hidden, batch_size, num_eval, d_steps = args.hidden, args.batch_size, args.num_eval, \
        args.d_steps
    x_real, _ = load_digits("train", device=device)
    if args.smoke:
        hidden, batch_size, num_eval = 8, 4, 8
        x_real = x_real[:4 * d_steps]
    if batch_size * d_steps > x_real.shape[0]:
        raise SystemExit(f"train_gan.py: error: --batch-size {batch_size} x --d-steps {d_steps} "
                         f"needs more than the {x_real.shape[0]} training digits")
    real = x_real.reshape(-1, 64) * 2 - 1  # pixels to [-1, 1], the range of Tanh

    # The same seed builds the generator twice: one to train, one kept untrained for reference.
    mg.manual_seed(args.seed)
    generator, discriminator = make_networks(args.arch, hidden)
    generator, discriminator = generator.to(device), discriminator.to(device)
    mg.manual_seed(args.seed)
    untrained = make_networks(args.arch, hidden)[0].to(device)
    sizes = sum(p.numel() for p in generator.parameters()), \
        sum(p.numel() for p in discriminator.parameters())
    print(f"{args.arch}: generator {sizes[0]} parameters, discriminator {sizes[1]}; "
          f"{real.shape[0]} real digits, batch {batch_size}, d_steps {d_steps}")

    g_loss_fn = nn.BCELoss()
    d_loss_fn = nn.BCELoss()
    betas = (args.beta1, 0.999)
    g_optimizer = optim.Adam(generator.parameters(), lr=args.lr, betas=betas)
    d_optimizer = optim.Adam(discriminator.parameters(), lr=args.lr, betas=betas)
    loader = DataLoader(TensorDataset(real), batch_size=batch_size, shuffle=True,
                        drop_last=True)
    real_labels = mg.full((batch_size, 1), args.real_label, device=device)
    ones = mg.ones(batch_size, 1, device=device)
    fake_labels = mg.zeros(batch_size, 1, device=device)
    fixed_latent = mg.randn(10, LATENT, device=device)
    snapshots = [(0, generate(generator, fixed_latent).numpy()[:, 0])]
    history = []

    with du.Timer() as timer:
        for epoch in range(1, args.epochs + 1):
            sums = dict(d_loss=0.0, g_loss=0.0, d_real=0.0, d_fake=0.0)
            g_updates = 0
            batches = iter(loader)
            bar = du.progress(range(len(loader) // d_steps), desc=f"epoch {epoch}/{args.epochs}",
                              unit="it")
            for _ in bar:
                # Train the discriminator: real digits -> 1, generated (detached) -> 0.
                for _ in range(d_steps):
                    d_optimizer.zero_grad()
                    (real_data,) = next(batches)
                    d_real_output = discriminator(real_data)
                    d_real_loss = d_loss_fn(d_real_output, real_labels)

                    latent_vector = mg.randn(batch_size, LATENT, device=device)
                    fake_data = generator(latent_vector)
                    d_fake_output = discriminator(fake_data.detach())
                    d_fake_loss = d_loss_fn(d_fake_output, fake_labels)

                    d_loss = d_real_loss + d_fake_loss
                    d_loss.backward()
                    d_optimizer.step()

                # Train the generator: make the discriminator call its fakes real.
                g_optimizer.zero_grad()
                latent_vector = mg.randn(batch_size, LATENT, device=device)
                fake_data = generator(latent_vector)
                g_output = discriminator(fake_data)
                g_loss = g_loss_fn(g_output, ones)
                g_loss.backward()
                g_optimizer.step()

                g_updates += 1
                sums["d_loss"] += d_loss.item()
                sums["g_loss"] += g_loss.item()
                sums["d_real"] += d_real_output.mean().item()
                sums["d_fake"] += g_output.mean().item()
                if hasattr(bar, "set_postfix"):
                    bar.set_postfix(d=f"{d_loss.item():.3f}", g=f"{g_loss.item():.3f}")
            record = {k: v / g_updates for k, v in sums.items()}
            history.append(dict(epoch=epoch, **record))
            if epoch % args.sample_every == 0 or epoch == args.epochs:
                snapshots.append((epoch, generate(generator, fixed_latent).numpy()[:, 0]))
                print(f"epoch {epoch:4d}  D loss {record['d_loss']:.3f}  G loss "
                      f"{record['g_loss']:.3f}  D(real) {record['d_real']:.2f}  D(G(z)) "
                      f"{record['d_fake']:.2f}", flush=True)
    train_seconds = timer.seconds

    out = args.out
    mg.save(generator.state_dict(), out / "generator.safetensors")
    mg.save(discriminator.state_dict(), out / "discriminator.safetensors")
    latent = mg.randn(num_eval, LATENT, device=device)
    samples = generate(generator, latent)
    du.image_grid(samples.numpy()[:64, 0], out / "samples.png", columns=16,
                  title=f"generated digits after {args.epochs} "
                        f"epoch{'s' if args.epochs != 1 else ''}")
    plot_progress(snapshots, out / "progress.png")
    plot_losses(history, out / "losses.png")

    classifier = load_classifier(args.classifier, device)
    classifier_source = str(args.classifier) if classifier is not None else "trained here"
    if classifier is None:
        classifier = train_classifier(device, args.seed, args.smoke)
    x_test, y_test = load_digits("test", device=device)
    if args.smoke:
        x_test, y_test = x_test[:num_eval], y_test[:num_eval]
    accuracy = classifier_accuracy(classifier, x_test, y_test)
    print(f"classifier ({classifier_source}): {100 * accuracy:.2f} % on "
          f"{x_test.shape[0]} test digits")
    scores, refused = None, None
    if accuracy < args.min_classifier_accuracy:
        refused = (f"no sample scores: the classifier ({classifier_source}) reaches only "
                   f"{100 * accuracy:.2f} % test accuracy, below --min-classifier-accuracy "
                   f"{100 * args.min_classifier_accuracy:.0f} %; its confidence and inception "
                   f"scores would mislead. Train it longer (python demos/train_cnn.py --out "
                   f"{args.classifier}) or point --classifier at a better run.")
        print(refused)
    else:
        scores = {
            "trained": sample_scores(classifier, samples),
            "untrained": sample_scores(classifier, generate(untrained, latent)),
            "real_test_digits": sample_scores(classifier, x_test),
        }
        for name, s in scores.items():
            print(f"{name:>17}: confidence {s['confidence']:.3f}  class entropy "
                  f"{s['class_entropy']:.3f} nats  classes covered {s['classes_covered']:2d}  "
                  f"inception score {s['inception_score']:.2f}")
    scored = {f"{which}_{key}": scores[which][key] for which in ("trained", "untrained")
              for key in ("confidence", "class_entropy", "classes_covered")} if scores else {}
    metrics = dict(demo=DEMO, arch=args.arch, device=device, simulator=device == "cuda" and
                   mg.cuda.is_simulator(), epochs=args.epochs, seed=args.seed,
                   smoke=args.smoke, batch_size=batch_size, lr=args.lr, d_steps=d_steps,
                   hidden=hidden, num_eval=num_eval, train_seconds=train_seconds,
                   classifier=classifier_source, classifier_test_accuracy=accuracy,
                   min_classifier_accuracy=args.min_classifier_accuracy,
                   scores_refused=refused, final_d_loss=history[-1]["d_loss"],
                   final_g_loss=history[-1]["g_loss"], **scored, scores=scores,
                   history=history)
    du.write_metrics(out, metrics)
    print(f"{train_seconds:.1f} s of training on {device}; wrote {out}/metrics.json, "
          f"samples.png, progress.png, losses.png")
    return metrics


if __name__ == "__main__":
    main()
