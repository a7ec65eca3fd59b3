"""Every PyTorch snippet of the source material, run by minigpu.

The tutorial this project grew from ("GPU optimisation for peak performance", its CNN, RNN and
GAN sections) shows its layers in PyTorch. Each snippet below is copied as it stands there;
the only changes are

* the imports: ``import torch.nn as nn`` -> ``import minigpu.nn as nn``, ``import torch`` ->
  ``import minigpu as torch``, ``import torch.optim as optim`` -> ``import minigpu.optim as
  optim``;
* placing things on ``--device``: a ``.to(device)`` after a layer is built and ``device=device``
  where a tensor is created (each such line is marked ``# + device``). minigpu has no global
  default device, so on cpu these are no-ops;
* small inputs to run the layers on, and the values the GAN loop leaves undefined
  (``num_epochs``, ``d_steps``, ``batch_size``);
* the GAN's image size is a variable, ``pixels = 784`` (28x28) as in the source, except with
  ``--smoke``, which uses 64 (8x8): the CUDA simulator interprets every CUDA thread, and
  the 256x784 weight gradient alone is 200 704 of them (minutes per step).

    python demos/seed_examples.py                 # cpu (the GPU when there is one)
    NUMBA_ENABLE_CUDASIM=1 python demos/seed_examples.py --device cuda --smoke
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _demo_utils as du  # noqa: E402

DEMO = "seed_examples"


def shape(t):
    return tuple(t.shape)


def cnn_layers(device, batch):
    """Convolution, pooling and fully connected layers, chained on a batch of 3x8x8 images:
    the 32 feature maps of 4x4 after pooling are exactly the 512 inputs of the fc layer."""
    import minigpu as torch

    import minigpu.nn as nn

    # 畳み込み層を定義する
    conv_layer = nn.Conv2d(in_channels=3, out_channels=32, kernel_size=3, stride=1, padding=1)
    conv_layer = conv_layer.to(device)  # + device

    import minigpu.nn as nn

    # 最大プーリング層を定義する
    pool_layer = nn.MaxPool2d(kernel_size=2, stride=2)

    import minigpu.nn as nn

    # 全結合層を定義する
    fc_layer = nn.Linear(in_features=512, out_features=10)
    fc_layer = fc_layer.to(device)  # + device

    images = torch.randn(batch, 3, 8, 8, device=device)  # + device
    features = conv_layer(images)
    pooled = pool_layer(features)
    logits = fc_layer(pooled.flatten(1))
    print(f"Conv2d(3, 32, 3, padding=1): {shape(images)} -> {shape(features)}")
    print(f"MaxPool2d(2, 2):             {shape(features)} -> {shape(pooled)}")
    print(f"Linear(512, 10):             {shape(pooled.flatten(1))} -> {shape(logits)}")
    return dict(conv=shape(features), pool=shape(pooled), fc=shape(logits))


def recurrent_layers(device, batch, seq_len):
    """RNN, LSTM and bidirectional LSTM on a (batch, seq_len, 32) sequence batch."""
    import minigpu as torch

    import minigpu.nn as nn

    # RNNレイヤーを定義する
    rnn_layer = nn.RNN(input_size=32, hidden_size=64, num_layers=1, batch_first=True)
    rnn_layer = rnn_layer.to(device)  # + device

    import minigpu.nn as nn

    # LSTMレイヤーを定義する
    lstm_layer = nn.LSTM(input_size=32, hidden_size=64, num_layers=1, batch_first=True)
    lstm_layer = lstm_layer.to(device)  # + device

    import minigpu.nn as nn

    # Bidirectional LSTMレイヤーを定義する
    bi_lstm_layer = nn.LSTM(input_size=32, hidden_size=64, num_layers=1, batch_first=True, bidirectional=True)  # noqa: E501
    bi_lstm_layer = bi_lstm_layer.to(device)  # + device

    x = torch.randn(batch, seq_len, 32, device=device)  # + device
    out, h_n = rnn_layer(x)
    print(f"RNN(32, 64):        input {shape(x)} -> output {shape(out)}, h_n {shape(h_n)}")
    shapes = dict(rnn=(shape(out), shape(h_n)))
    out, (h_n, c_n) = lstm_layer(x)
    print(f"LSTM(32, 64):       input {shape(x)} -> output {shape(out)}, h_n {shape(h_n)}, "
          f"c_n {shape(c_n)}")
    shapes["lstm"] = (shape(out), shape(h_n), shape(c_n))
    out, (h_n, c_n) = bi_lstm_layer(x)
    print(f"LSTM(32, 64, bidirectional=True): input {shape(x)} -> output {shape(out)}, "
          f"h_n {shape(h_n)}, c_n {shape(c_n)}")
    shapes["bi_lstm"] = (shape(out), shape(h_n), shape(c_n))
    return shapes


def gan(device, num_epochs, batch_size, d_steps, pixels=784):
    """The GAN: networks, losses and optimizers, then its training loop (on random "real"
    data, as in the source: ``real_data = torch.randn(batch_size, 784)``)."""
    import minigpu.nn as nn
    import minigpu.optim as optim
    import minigpu.utils.data  # noqa: F401

    # ジェネレータネットワークを定義する
    generator = nn.Sequential(
        nn.Linear(100, 256),
        nn.ReLU(),
        nn.Linear(256, pixels),  # 784 in the source
        nn.Tanh()
    )
    generator = generator.to(device)  # + device

    # ディスクリミネータネットワークを定義する
    discriminator = nn.Sequential(
        nn.Linear(pixels, 256),  # 784 in the source
        nn.LeakyReLU(0.2),
        nn.Linear(256, 1),
        nn.Sigmoid()
    )
    discriminator = discriminator.to(device)  # + device

    # 損失関数とオプティマイザを定義する
    g_loss_fn = nn.BCELoss()
    d_loss_fn = nn.BCELoss()
    g_optimizer = optim.Adam(generator.parameters(), lr=0.0002)
    d_optimizer = optim.Adam(discriminator.parameters(), lr=0.0002)

    import minigpu as torch

    losses = []
    # 訓練ループ
    for epoch in range(num_epochs):
        # ディスクリミネータを訓練する
        for _ in range(d_steps):
            d_optimizer.zero_grad()
            real_data = torch.randn(batch_size, pixels, device=device)  # + device; 784
            real_labels = torch.ones(batch_size, 1, device=device)  # + device
            d_real_output = discriminator(real_data)
            d_real_loss = d_loss_fn(d_real_output, real_labels)

            latent_vector = torch.randn(batch_size, 100, device=device)  # + device
            fake_data = generator(latent_vector)
            fake_labels = torch.zeros(batch_size, 1, device=device)  # + device
            d_fake_output = discriminator(fake_data.detach())
            d_fake_loss = d_loss_fn(d_fake_output, fake_labels)

            d_loss = d_real_loss + d_fake_loss
            d_loss.backward()
            d_optimizer.step()

        # ジェネレータを訓練する
        g_optimizer.zero_grad()
        latent_vector = torch.randn(batch_size, 100, device=device)  # + device
        fake_data = generator(latent_vector)
        fake_labels = torch.ones(batch_size, 1, device=device)  # + device
        g_output = discriminator(fake_data)
        g_loss = g_loss_fn(g_output, fake_labels)
        g_loss.backward()
        g_optimizer.step()

        losses.append((d_loss.item(), g_loss.item()))
        print(f"GAN epoch {epoch + 1}/{num_epochs}: d_loss {losses[-1][0]:.4f}  "
              f"g_loss {losses[-1][1]:.4f}  fake_data {shape(fake_data)}  "
              f"d output {shape(g_output)}")
    return dict(generator_output=shape(fake_data), discriminator_output=shape(g_output),
                losses=losses)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog=f"{DEMO}.py", description=(
        "the source material's PyTorch snippets, run by minigpu"),
        formatter_class=du.HelpFormatter)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="auto = cuda when a real GPU is present, else cpu")
    parser.add_argument("--epochs", type=du.positive_int, default=None,
                        help="num_epochs of the GAN loop (default 3; 1 with --smoke)")
    parser.add_argument("--batch-size", type=du.positive_int, default=None,
                        help="batch size of every example (default 4; 2 with --smoke)")
    parser.add_argument("--d-steps", type=du.positive_int, default=1,
                        help="discriminator updates per generator update in the GAN loop")
    parser.add_argument("--seq-len", type=du.positive_int, default=None,
                        help="sequence length for the recurrent layers (default 6; 3 with "
                             "--smoke)")
    parser.add_argument("--seed", type=du.non_negative_int, default=0,
                        help="seed of minigpu's generator")
    parser.add_argument("--out", type=du.Path, default=du.Path("runs") / DEMO,
                        help="folder for metrics.json")
    parser.add_argument("--smoke", action="store_true",
                        help="the smallest inputs (fast on the CUDA simulator)")
    args = parser.parse_args(argv)
    args.batch_size = args.batch_size or (2 if args.smoke else 4)
    args.seq_len = args.seq_len or (3 if args.smoke else 6)
    return du.finish_args(parser, args, default_epochs=3)


def main(argv=None):
    import minigpu as mg

    args = parse_args(argv)
    du.header(DEMO, args.device, args)
    mg.manual_seed(args.seed)
    with du.Timer() as timer:
        print("--- CNN layers ---")
        cnn = cnn_layers(args.device, args.batch_size)
        print("--- recurrent layers ---")
        rnn = recurrent_layers(args.device, args.batch_size, args.seq_len)
        print("--- GAN ---")
        gan_result = gan(args.device, args.epochs, args.batch_size, args.d_steps,
                         pixels=64 if args.smoke else 784)
    metrics = dict(demo=DEMO, device=args.device, simulator=args.device == "cuda" and
                   mg.cuda.is_simulator(), epochs=args.epochs, seed=args.seed,
                   smoke=args.smoke, batch_size=args.batch_size, seq_len=args.seq_len,
                   gan_pixels=64 if args.smoke else 784,
                   seconds=timer.seconds, cnn=cnn, rnn=rnn, gan=gan_result)
    du.write_metrics(args.out, metrics)
    print(f"all snippets ran on {args.device} in {timer.seconds:.1f} s; wrote "
          f"{args.out}/metrics.json")
    return metrics


if __name__ == "__main__":
    main()
