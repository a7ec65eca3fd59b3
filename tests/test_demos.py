"""The demos run end to end: ``--smoke --device cuda`` (on the simulator without a GPU) for
each, seed_examples on cpu too, and bad options stop with one clear line.

Each demo's ``main(argv)`` is called in this process (no interpreter start-up per demo) and
must write a sane metrics.json. The digits demos need scikit-learn and the pictures need
matplotlib (the ``demos`` extra); without them those tests skip.
"""
import importlib
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import minigpu as mg

DEMOS = Path(__file__).resolve().parent.parent / "demos"


def demo(name):
    if str(DEMOS) not in sys.path:
        sys.path.insert(0, str(DEMOS))
    return importlib.import_module(name)


def needs(*modules):
    for module in modules:
        pytest.importorskip(module, reason=f"the demos need {module} (pip install "
                                           f"'minigpu[demos]')")


@pytest.fixture
def cuda():
    if not mg.cuda.is_available():
        pytest.skip("the cuda device is not available (no GPU and NUMBA_ENABLE_CUDASIM unset)")
    return "cuda"


def read_metrics(out):
    path = Path(out) / "metrics.json"
    assert path.is_file(), f"{path} missing"
    return json.loads(path.read_text())


def finite(*values):
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def test_train_cnn_smoke(tmp_path, cuda):
    needs("sklearn", "matplotlib")
    returned = demo("train_cnn").main(["--smoke", "--device", cuda, "--out", str(tmp_path)])
    m = read_metrics(tmp_path)
    assert m == json.loads(json.dumps(returned))
    assert m["device"] == "cuda" and m["smoke"] and m["epochs"] == 1
    assert 0 <= m["test_accuracy"] <= 1 and finite(m["test_loss"], m["train_seconds"])
    for name in ("model.safetensors", "config.json", "curves.png"):
        assert (tmp_path / name).is_file(), name
    # The checkpoint loads into the network its config.json describes.
    from minigpu.models import LeNet5
    model = LeNet5(**json.loads((tmp_path / "config.json").read_text()))
    model.load_state_dict(mg.load(tmp_path / "model.safetensors"))


def test_train_cnn_amp_smoke(tmp_path):
    needs("sklearn", "matplotlib")
    demo("train_cnn").main(["--smoke", "--amp", "--device", "cpu", "--out", str(tmp_path)])
    m = read_metrics(tmp_path)
    assert m["amp"] and finite(m["test_loss"], m["train_loss"])


def test_train_lstm_rows_smoke(tmp_path, cuda):
    needs("sklearn", "matplotlib")
    demo("train_lstm").main(["--smoke", "--device", cuda, "--bidirectional",
                             "--out", str(tmp_path)])
    m = read_metrics(tmp_path)
    assert m["task"] == "rows" and m["bidirectional"] and m["device"] == "cuda"
    assert 0 <= m["test_accuracy"] <= 1 and finite(m["train_loss"], m["train_seconds"])
    assert (tmp_path / "curves.png").is_file()


def test_train_lstm_charlm_smoke(tmp_path, cuda):
    needs("matplotlib")
    demo("train_lstm").main(["--task", "charlm", "--smoke", "--device", cuda,
                             "--out", str(tmp_path)])
    m = read_metrics(tmp_path)
    assert m["task"] == "charlm" and m["device"] == "cuda"
    assert finite(m["val_loss"], m["train_loss"], m["unigram_entropy"])
    # The uniform guess over the vocabulary bounds the unigram entropy from above.
    assert 2 < m["unigram_entropy"] < math.log(m["vocab"])
    assert all(s.startswith(("def ", "class ")) for s in m["samples"])
    assert (tmp_path / "samples.txt").is_file()


def test_train_gpt_smoke(tmp_path, cuda):
    needs("matplotlib")
    demo("train_gpt").main(["--smoke", "--device", cuda, "--out", str(tmp_path)])
    m = read_metrics(tmp_path)
    assert m["device"] == "cuda" and finite(m["val_loss"], m["train_loss"], m["train_seconds"])
    assert all(s.startswith(("def ", "class ")) for s in m["samples"])
    assert (tmp_path / "curves.png").is_file() and (tmp_path / "samples.txt").is_file()


def test_gpt_key_value_cache_gives_the_tokens_of_full_recomputation():
    """Incremental decoding: the cached logits equal the recomputed ones (one new position,
    and several after a cached prefix), and sampling 14 characters with a context of 6
    (so the window restarts twice) gives the same characters either way."""
    gpt = demo("train_gpt")
    mg.manual_seed(0)
    model = gpt.GPT(vocab=11, width=8, heads=2, layers=2, context=6).eval()
    for emb in (model.tokens, model.positions):     # larger than the init: peaked logits
        mg.nn.init.normal_(emb.weight, std=1.0)
    idx = mg.tensor([[1, 5, 2, 9, 3, 7]], dtype=mg.int64)
    with mg.no_grad():
        full = model(idx).numpy()
        caches = [{} for _ in model.blocks]
        parts = [model(idx[:, :2], caches), model(idx[:, 2:3], caches),
                 model(idx[:, 3:6], caches)]
    np.testing.assert_allclose(np.concatenate([p.numpy() for p in parts], 1), full,
                               rtol=1e-5, atol=1e-6)
    sampled = [gpt.generate(model, [1, 2, 3], 14, 1.0, np.random.default_rng(4), cache=c)
               for c in (True, False)]
    assert sampled[0] == sampled[1] and len(sampled[0]) == 17


def test_train_gan_smoke(tmp_path, cuda):
    needs("sklearn", "matplotlib")
    out = tmp_path / "train_gan"  # no train_cnn run next to it: a classifier is trained here
    demo("train_gan").main(["--smoke", "--device", cuda, "--out", str(out),
                            "--min-classifier-accuracy", "0"])  # score even a 1-step CNN
    m = read_metrics(out)
    assert m["device"] == "cuda" and m["d_steps"] == 1
    assert m["classifier"] == "trained here" and m["scores_refused"] is None
    assert 0 <= m["classifier_test_accuracy"] <= 1
    for key in ("trained_confidence", "untrained_confidence"):
        assert 0.1 - 1e-6 <= m[key] <= 1, key  # max-softmax over 10 classes is >= 1/10
    for key in ("trained_class_entropy", "untrained_class_entropy"):
        assert 0 <= m[key] <= math.log(10) + 1e-6, key
    assert finite(m["final_d_loss"], m["final_g_loss"])
    for name in ("samples.png", "progress.png", "losses.png", "generator.safetensors"):
        assert (out / name).is_file(), name



def test_train_gan_dcgan_smoke(tmp_path, cuda):
    needs("sklearn", "matplotlib")
    out = tmp_path / "train_gan"
    m = demo("train_gan").main(["--arch", "dcgan", "--smoke", "--device", cuda, "--out",
                                str(out), "--min-classifier-accuracy", "0"])
    assert m["arch"] == "dcgan" and m["device"] == "cuda" and m["epochs"] == 1
    assert finite(m["final_d_loss"], m["final_g_loss"])
    state = mg.load(out / "generator.safetensors")
    assert state["net.0.weight"].shape == (100, 8, 2, 2)  # ConvTranspose2d: (in, out, kH, kW)
    assert "net.1.running_mean" in state
    for name in ("samples.png", "progress.png", "losses.png"):
        assert (out / name).is_file(), name

def test_gan_uses_the_classifier_next_to_its_run_and_refuses_weak_scores(tmp_path,
                                                                         monkeypatch):
    needs("sklearn", "matplotlib")
    decoy = tmp_path / "cwd" / "runs" / "train_cnn"  # what the old demo read from the cwd
    decoy.mkdir(parents=True)
    (decoy / "config.json").write_text("{}")
    (decoy / "model.safetensors").write_bytes(b"not a checkpoint")
    monkeypatch.chdir(tmp_path / "cwd")
    runs = tmp_path / "runs"
    demo("train_cnn").main(["--smoke", "--device", "cpu", "--out", str(runs / "train_cnn")])
    m = demo("train_gan").main(["--smoke", "--device", "cpu", "--out", str(runs / "train_gan")])
    assert m["classifier"] == str(runs / "train_cnn")
    assert m["classifier_test_accuracy"] < 0.95  # one optimizer step on 8 digits
    assert m["scores"] is None and "trained_confidence" not in m
    assert m["scores_refused"].startswith(f"no sample scores: the classifier "
                                          f"({runs / 'train_cnn'}) reaches only")
    assert "below --min-classifier-accuracy 95 %" in m["scores_refused"]
    assert read_metrics(runs / "train_gan") == json.loads(json.dumps(m))


def _figures_of(module, call, monkeypatch):
    """The matplotlib figures ``call()`` saves through the demos' save_figure."""
    du = demo("_demo_utils")
    figures, save = [], du.save_figure

    def spy(fig, path, **kwargs):
        figures.append(fig)
        return save(fig, path, **kwargs)
    monkeypatch.setattr(du, "save_figure", spy)
    call(demo(module))
    return figures


def _every_panel_shows_its_single_point(figures):
    assert figures
    for fig in figures:
        for ax in fig.axes:
            assert ax.lines and all(line.get_marker() not in (None, "", " ", "None")
                                    for line in ax.lines if len(line.get_xdata()) == 1), ax


def test_one_epoch_curves_have_no_empty_panels(tmp_path, monkeypatch):
    needs("matplotlib")
    one = [dict(epoch=1, lr=1e-3, train_loss=0.5, test_loss=0.6, train_accuracy=0.8,
                test_accuracy=0.7, d_loss=1.3, g_loss=0.7, d_real=0.5, d_fake=0.4, val_loss=2.0)]
    for module, call in [
        ("train_cnn", lambda m: m.plot_curves(one, tmp_path / "cnn.png")),
        ("train_gan", lambda m: m.plot_losses(one, tmp_path / "gan.png")),
        ("train_lstm", lambda m: m.plot_curves(one, tmp_path / "lstm.png",
                                               [("train_loss", "train")], "loss", 1.0, "h")),
    ]:
        _every_panel_shows_its_single_point(_figures_of(module, call, monkeypatch))


@pytest.mark.parametrize("module", ["train_cnn", "train_gan", "train_lstm", "train_gpt",
                                    "seed_examples"])
def test_help_states_each_default_once_and_documents_every_option(module, capsys):
    with pytest.raises(SystemExit) as exit_info:
        demo(module).parse_args(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    flat = " ".join(text.split())
    assert "(default: None)" not in flat and "(default: False)" not in flat
    options = text[text.index("options:"):]
    entries = re.split(r"\n  (?=-)", options)[1:]  # one entry per option, with its help
    assert len(entries) >= 6
    for entry in entries:
        words = " ".join(entry.split())
        name = words.split()[0].rstrip(",")
        assert words.count("default") <= 1, words
        help_text = re.sub(r"^(-\S+( [A-Z_0-9{},]+)*,? ?)+", "", words)
        assert len(help_text) > 10, f"{module} {name} has no help"


def test_gan_scores_tell_collapse_from_diversity():
    """sample_scores on fake classifier outputs: confident + spread beats unsure + collapsed."""
    gan = demo("train_gan")

    class Fixed:
        def __init__(self, logits):
            self.logits = logits

        def __call__(self, x):
            return mg.tensor(self.logits[:x.shape[0]])

    confident = np.full((100, 10), -5.0, dtype=np.float32)
    confident[np.arange(100), np.arange(100) % 10] = 5.0
    collapsed = np.zeros((100, 10), dtype=np.float32)
    collapsed[:, 3] = 0.5
    good = gan.sample_scores(Fixed(confident), mg.zeros(100, 1, 8, 8))
    bad = gan.sample_scores(Fixed(collapsed), mg.zeros(100, 1, 8, 8))
    assert good["confidence"] > 0.99 and bad["confidence"] < 0.2
    assert good["classes_covered"] == 10 and bad["classes_covered"] == 1
    assert abs(good["class_entropy"] - math.log(10)) < 1e-6 and bad["class_entropy"] == 0
    assert good["inception_score"] > 9.9 and abs(bad["inception_score"] - 1) < 1e-6


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_seed_examples(tmp_path, device):
    if device == "cuda" and not mg.cuda.is_available():
        pytest.skip("the cuda device is not available")
    argv = ["--device", device, "--out", str(tmp_path)] + (["--smoke"] if device == "cuda"
                                                           else [])
    demo("seed_examples").main(argv)
    m = read_metrics(tmp_path)
    b, L = m["batch_size"], m["seq_len"]
    assert m["cnn"] == {"conv": [b, 32, 8, 8], "pool": [b, 32, 4, 4], "fc": [b, 10]}
    assert m["rnn"]["rnn"] == [[b, L, 64], [1, b, 64]]
    assert m["rnn"]["lstm"] == [[b, L, 64], [1, b, 64], [1, b, 64]]
    assert m["rnn"]["bi_lstm"] == [[b, L, 128], [2, b, 64], [2, b, 64]]
    assert m["gan"]["generator_output"] == [b, m["gan_pixels"]]
    assert m["gan"]["discriminator_output"] == [b, 1]
    assert len(m["gan"]["losses"]) == m["epochs"]
    assert all(finite(d, g) for d, g in m["gan"]["losses"])


@pytest.mark.parametrize("module,argv,message", [
    ("train_cnn", ["--epochs", "0"], "--epochs: expected a positive integer, got 0"),
    ("train_cnn", ["--lr", "-1"], "--lr: expected a positive finite number, got -1"),
    ("train_cnn", ["--device", "tpu"], "--device: invalid choice: 'tpu'"),
    ("train_cnn", ["--dropout", "1.5"], "--dropout: expected a number in [0, 1), got 1.5"),
    ("train_lstm", ["--task", "charlm", "--bidirectional"], "--bidirectional applies to "
                                                             "--task rows only"),
    ("train_lstm", ["--task", "words"], "--task: invalid choice: 'words'"),
    ("train_gan", ["--d-steps", "two"], "--d-steps: expected a positive integer, got 'two'"),
    ("train_gpt", ["--width", "10", "--heads", "4"], "--width 10 is not a multiple of --heads 4"),
    ("seed_examples", ["--batch-size", "0"], "--batch-size: expected a positive integer"),
])
def test_bad_options_fail_with_one_line(module, argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        demo(module).main(argv + ["--out", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_out_must_be_a_folder(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(SystemExit):
        demo("seed_examples").main(["--device", "cpu", "--out", str(blocker / "sub")])
    assert "cannot create the folder" in capsys.readouterr().err
