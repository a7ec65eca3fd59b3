"""The demos run end to end: ``--smoke --device cuda`` (on the simulator without a GPU) for
each, seed_examples on cpu too, and bad options stop with one clear line.

Each demo's ``main(argv)`` is called in this process (no interpreter start-up per demo) and
must write a sane metrics.json. The digits demos need scikit-learn and the pictures need
matplotlib (the ``demos`` extra); without them those tests skip.
"""
import importlib
import json
import math
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
    for name in ("model.npz", "config.json", "curves.png"):
        assert (tmp_path / name).is_file(), name
    # The checkpoint loads into the network its config.json describes.
    from minigpu.models import LeNet5
    model = LeNet5(**json.loads((tmp_path / "config.json").read_text()))
    model.load_state_dict(mg.load(tmp_path / "model.npz"))


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


def test_train_gan_smoke(tmp_path, cuda):
    needs("sklearn", "matplotlib")
    demo("train_gan").main(["--smoke", "--device", cuda, "--out", str(tmp_path)])
    m = read_metrics(tmp_path)
    assert m["device"] == "cuda" and m["d_steps"] == 1
    for key in ("trained_confidence", "untrained_confidence"):
        assert 0.1 - 1e-6 <= m[key] <= 1, key  # max-softmax over 10 classes is >= 1/10
    for key in ("trained_class_entropy", "untrained_class_entropy"):
        assert 0 <= m[key] <= math.log(10) + 1e-6, key
    assert finite(m["final_d_loss"], m["final_g_loss"])
    for name in ("samples.png", "progress.png", "losses.png", "generator.npz"):
        assert (tmp_path / name).is_file(), name


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
