"""``minigpu.utils.tensorboard``: a clear ImportError without the tensorboard package, and, where
it is installed, scalars written through its event writer."""
import importlib
import sys

import pytest

import minigpu as mg


def test_without_tensorboard_the_import_error_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "minigpu.utils.tensorboard", raising=False)
    with pytest.raises(ImportError, match="pip install tensorboard"):
        importlib.import_module("minigpu.utils.tensorboard")


def test_scalars_reach_the_event_file(tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard package is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from minigpu.utils.tensorboard import SummaryWriter
    with SummaryWriter(log_dir=tmp_path) as writer:
        for step, loss in enumerate([mg.tensor(2.5), 1.25, mg.tensor([0.5]).sum()]):
            writer.add_scalar("loss/train", loss, step)
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("loss/train")] == [(0, 2.5), (1, 1.25),
                                                                          (2, 0.5)]


def test_add_scalars_writes_one_run_per_tag(tmp_path):
    """As torch's ``add_scalars``: each tag's values in ``<log_dir>/<main_tag>_<tag>`` (a ``/``
    in the main tag becomes ``_``), recorded under the main tag."""
    pytest.importorskip("tensorboard", reason="the tensorboard package is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from minigpu.utils.tensorboard import SummaryWriter
    with SummaryWriter(log_dir=tmp_path) as writer:
        for step in range(3):
            writer.add_scalars("run/loss", {"train": mg.tensor(1.0 / (step + 1)),
                                            "test": 2.0 * step}, step)
        writer.add_scalar("lr", 0.5, 0)
    expected = {"train": [(0, 1.0), (1, 0.5), (2, 1.0 / 3)], "test": [(0, 0.0), (1, 2.0),
                                                                      (2, 4.0)]}
    for tag, values in expected.items():
        events = EventAccumulator(str(tmp_path / f"run_loss_{tag}"))
        events.Reload()
        assert events.Tags()["scalars"] == ["run/loss"]
        got = [(e.step, e.value) for e in events.Scalars("run/loss")]
        assert [s for s, _ in got] == [s for s, _ in values]
        assert [v for _, v in got] == pytest.approx([v for _, v in values])
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert events.Tags()["scalars"] == ["lr"]
