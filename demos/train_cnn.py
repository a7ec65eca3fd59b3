"""Train a LeNet-style CNN on scikit-learn's 8x8 handwritten digits.

    python demos/train_cnn.py                     # cpu (or the GPU when there is one)
    python demos/train_cnn.py --device cuda       # the Numba kernels (simulator: add --smoke)

Writes into --out (default runs/train_cnn): metrics.json, the checkpoint model.safetensors
(load it with ``model.load_state_dict(mg.load(path))``), config.json (the model's constructor
arguments), curves.png (loss and accuracy per epoch) and misclassified.png (the test digits
the network gets wrong).
"""
from __future__ import annotations

import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _demo_utils as du  # noqa: E402

import minigpu as mg  # noqa: E402
import minigpu.nn as nn  # noqa: E402
from minigpu.datasets import load_digits  # noqa: E402
from minigpu.models import LeNet5  # noqa: E402
from minigpu.utils.data import DataLoader, TensorDataset  # noqa: E402

DEMO = "train_cnn"


def parse_args(argv=None):
    parser = du.make_parser(DEMO, "LeNet-style CNN on the 8x8 digits", default_epochs=12)
    parser.add_argument("--batch-size", type=du.positive_int, default=32,
                        help="digits per training batch")
    parser.add_argument("--lr", type=du.positive_float, default=3e-3,
                        help="Adam's peak learning rate (cosine decay to 0 over the epochs)")
    parser.add_argument("--channels", type=du.positive_int, nargs=2, default=(32, 64),
                        metavar=("C1", "C2"), help="output channels of the two convolutions")
    parser.add_argument("--dropout", type=du.fraction, default=0.5,
                        help="dropout on the flattened features, before the fully connected layers")
    parser.add_argument("--amp", action="store_true",
                        help="mixed precision: forward in mg.autocast (convolutions and linear "
                             "layers in float16) with a GradScaler; weights stay float32")
    return du.finish_args(parser, parser.parse_args(argv), default_epochs=12)


def model_config(args):
    """Constructor arguments of the network (saved next to the checkpoint as config.json)."""
    if args.smoke:
        return dict(in_channels=1, num_classes=10, input_size=8, channels=(2, 4),
                    hidden=(8, 8), kernel_size=3, batch_norm=True, dropout=args.dropout)
    return dict(in_channels=1, num_classes=10, input_size=8, channels=tuple(args.channels),
                hidden=(120, 84), kernel_size=3, batch_norm=True, dropout=args.dropout)


def evaluate(model, x, y, loss_fn, batch=512):
    """Mean loss, accuracy and the predicted classes (host array) over (x, y), no autograd."""
    model.eval()
    losses, preds = [], []
    with mg.no_grad():
        for start in range(0, x.shape[0], batch):
            logits = model(x[start:start + batch])
            losses.append(loss_fn(logits, y[start:start + batch]).item()
                          * logits.shape[0])
            preds.append(logits.numpy().argmax(axis=1))
    model.train()
    preds = np.concatenate(preds)
    return sum(losses) / x.shape[0], float((preds == y.numpy()).mean()), preds


def train_epoch(model, loader, optimizer, loss_fn, desc, scaler=None):
    """One pass over the loader; returns (mean loss, accuracy) of the training batches. With a
    ``GradScaler``, the forward pass runs under ``mg.autocast`` (mixed precision)."""
    total, correct, seen = 0.0, 0, 0
    bar = du.progress(loader, desc=desc, unit="batch")
    for x, y in bar:
        optimizer.zero_grad()
        with mg.autocast(x.device.type, dtype=mg.float16, enabled=scaler is not None):
            logits = model(x)
            loss = loss_fn(logits, y)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        n = y.shape[0]
        total += loss.item() * n
        correct += int((logits.detach().numpy().argmax(axis=1) == y.numpy()).sum())
        seen += n
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{total / seen:.4f}")
    return total / seen, correct / seen


def cosine_lr(optimizer, base_lr, epoch, epochs):
    lr = base_lr * 0.5 * (1 + math.cos(math.pi * epoch / epochs))
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def plot_curves(history, path):
    """Loss and accuracy per epoch; markers show every epoch (and a 1-epoch run at all)."""
    plt = du.pyplot()
    epochs = [h["epoch"] for h in history]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8, 3))
    style = dict(marker="o", markersize=3)
    ax1.plot(epochs, [h["train_loss"] for h in history], label="train", **style)
    ax1.plot(epochs, [h["test_loss"] for h in history], label="test", **style)
    ax1.set_xlabel("epoch"), ax1.set_ylabel("cross-entropy"), ax1.set_yscale("log")
    ax1.legend()
    ax2.plot(epochs, [100 * h["train_accuracy"] for h in history], label="train", **style)
    ax2.plot(epochs, [100 * h["test_accuracy"] for h in history], label="test", **style)
    ax2.set_xlabel("epoch"), ax2.set_ylabel("accuracy (%)"), ax2.legend()
    fig.tight_layout()
    return du.save_figure(fig, path)


def main(argv=None):
    args = parse_args(argv)
    device = args.device
    du.header(DEMO, device, args)
    mg.manual_seed(args.seed)

    x_train, y_train = load_digits("train", device=device)
    x_test, y_test = load_digits("test", device=device)
    batch_size = args.batch_size
    if args.smoke:  # one optimizer step per epoch, a tiny test set: a run-through, not a result
        x_train, y_train = x_train[:8], y_train[:8]
        x_test, y_test = x_test[:8], y_test[:8]
        batch_size = 8
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=batch_size, shuffle=True)

    config = model_config(args)
    model = LeNet5(**config).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"LeNet5 {config['channels']} conv channels, {n_params} parameters; "
          f"{x_train.shape[0]} training / {x_test.shape[0]} test digits")
    optimizer = mg.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = mg.amp.GradScaler(device) if args.amp else None

    history = []
    with du.Timer() as timer:
        for epoch in range(1, args.epochs + 1):
            lr = cosine_lr(optimizer, args.lr, epoch - 1, args.epochs)
            train_loss, train_acc = train_epoch(model, loader, optimizer, loss_fn,
                                                f"epoch {epoch}/{args.epochs}", scaler)
            test_loss, test_acc, _ = evaluate(model, x_test, y_test, loss_fn)
            history.append(dict(epoch=epoch, lr=lr, train_loss=train_loss,
                                train_accuracy=train_acc, test_loss=test_loss,
                                test_accuracy=test_acc))
            print(f"epoch {epoch:3d}  lr {lr:.2e}  train loss {train_loss:.4f}  "
                  f"train acc {100 * train_acc:6.2f}%  test loss {test_loss:.4f}  "
                  f"test acc {100 * test_acc:6.2f}%", flush=True)
    train_seconds = timer.seconds

    test_loss, test_acc, preds = evaluate(model, x_test, y_test, loss_fn)
    out = args.out
    mg.save(model.state_dict(), out / "model.safetensors")
    (out / "config.json").write_text(json.dumps(config) + "\n")
    plot_curves(history, out / "curves.png")
    labels, images = y_test.numpy(), x_test.numpy()[:, 0]
    wrong = np.flatnonzero(preds != labels)[:32]
    if len(wrong):
        du.image_grid([images[i] for i in wrong], out / "misclassified.png",
                      titles=[f"{labels[i]}→{preds[i]}" for i in wrong], scale=1.4,
                      title=f"{int((preds != labels).sum())} of {len(labels)} test digits "
                            f"misclassified (true→predicted)")

    metrics = dict(demo=DEMO, device=device, simulator=device == "cuda" and
                   mg.cuda.is_simulator(), epochs=args.epochs, seed=args.seed,
                   smoke=args.smoke, amp=args.amp, batch_size=batch_size, lr=args.lr,
                   parameters=n_params,
                   model="LeNet5", model_config=config, train_size=int(x_train.shape[0]),
                   test_size=int(x_test.shape[0]), test_accuracy=test_acc, test_loss=test_loss,
                   test_errors=int((preds != labels).sum()),
                   train_loss=history[-1]["train_loss"],
                   train_accuracy=history[-1]["train_accuracy"], train_seconds=train_seconds,
                   seconds_per_epoch=train_seconds / args.epochs, history=history)
    du.write_metrics(out, metrics)
    print(f"test accuracy {100 * test_acc:.2f}% ({metrics['test_errors']} errors) after "
          f"{args.epochs} epoch{'s' if args.epochs != 1 else ''}, "
          f"{train_seconds:.1f} s of training on {device}; "
          f"wrote {out}/metrics.json, model.safetensors, curves.png"
          f"{', misclassified.png' if len(wrong) else ''}")
    return metrics


if __name__ == "__main__":
    main()
