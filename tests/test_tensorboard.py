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
