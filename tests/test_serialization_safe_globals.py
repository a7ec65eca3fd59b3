"""``add_safe_globals`` / ``safe_globals`` for PyTorch's checkpoint files: what the user allows,
``mg.load`` builds as ``torch.load(weights_only=True)`` does (a checkpoint holding an
``argparse.Namespace``, a dataclass, an enum), each checked against torch itself; and what is
not allowed, or is not an allowed class's own construction, stays refused with nothing run."""
import argparse
import dataclasses
import enum
import io
import os
import pickle
import zipfile

import numpy as np
import pytest

import minigpu as mg
from minigpu.serialization import CheckpointError

torch = pytest.importorskip("torch")


@dataclasses.dataclass
class Config:
    n_layer: int
    lr: float


class Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


class RunsWhenCalled:
    """An allowed class whose *instances* run a command when called: a pickle may build one,
    never call it."""

    marker = None

    def __call__(self, *args):
        os.system(f"touch {self.marker}")


class RunsACommand:
    def __reduce__(self):
        return os.system, (f"touch {RunsWhenCalled.marker}",)


@pytest.fixture(autouse=True)
def empty_allow_lists(tmp_path):
    RunsWhenCalled.marker = tmp_path / "marker"
    yield
    mg.serialization.clear_safe_globals()
    torch.serialization.clear_safe_globals()
    assert not RunsWhenCalled.marker.exists()


def torch_bytes(obj, **kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf, **kwargs)
    return buf.getvalue()


def torch_zip(data_pkl: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("archive/data.pkl", data_pkl)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
    return out.getvalue()


def both_load(data):
    """What torch.load(weights_only=True) and mg.load make of ``data``: (torch's, minigpu's),
    an exception standing for a refusal."""
    results = []
    for load, error in ((lambda f: torch.load(f, weights_only=True), pickle.UnpicklingError),
                        (mg.load, CheckpointError)):
        try:
            results.append(load(io.BytesIO(data)))
        except error as e:
            results.append(e)
    return results


def checkpoint():
    return {"model": torch.nn.Linear(3, 2).state_dict(),
            "args": argparse.Namespace(lr=0.1, epochs=3, name="run"),
            "config": Config(n_layer=2, lr=1e-3), "mode": Mode.TRAIN}


def assert_same_checkpoint(theirs, ours):
    assert vars(ours["args"]) == vars(theirs["args"]) == {"lr": 0.1, "epochs": 3, "name": "run"}
    assert type(ours["args"]) is argparse.Namespace
    assert ours["config"] == theirs["config"] == Config(2, 1e-3)
    assert ours["mode"] is theirs["mode"] is Mode.TRAIN
    for key, t in theirs["model"].items():
        np.testing.assert_array_equal(ours["model"][key].numpy(), t.numpy(), err_msg=key)


def test_without_the_allow_list_both_refuse_naming_the_global():
    theirs, ours = both_load(torch_bytes(checkpoint()))
    assert isinstance(theirs, Exception) and isinstance(ours, CheckpointError)
    for error in (theirs, ours):
        assert "GLOBAL argparse.Namespace was not an allowed global by default" in str(error)
        assert "add_safe_globals([argparse.Namespace])" in str(error)


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_allowed_classes_load_as_in_torch(zip_format):
    data = torch_bytes(checkpoint(), _use_new_zipfile_serialization=zip_format)
    allowed = [argparse.Namespace, Config, Mode]
    with torch.serialization.safe_globals(allowed), mg.serialization.safe_globals(allowed):
        theirs, ours = both_load(data)
    assert_same_checkpoint(theirs, ours)
    theirs, ours = both_load(data)  # the context manager's list is gone again
    assert isinstance(theirs, Exception) and isinstance(ours, CheckpointError)


def test_add_safe_globals_lasts_and_a_name_can_be_given():
    """``add_safe_globals`` keeps its entries; ``(obj, "module.Name")`` allows a class under the
    name a file gives it (a class that has moved since the file was written)."""
    data = torch_bytes(checkpoint())
    moved = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(moved, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name).replace(
                f"c{Config.__module__}\nConfig\n".encode(), b"cold.place\nConfig\n"))
    moved = moved.getvalue()
    assert b"old.place" in moved
    for lib in (torch, mg):
        lib.serialization.add_safe_globals([argparse.Namespace, Mode])
        lib.serialization.add_safe_globals([(Config, "old.place.Config")])
    assert_same_checkpoint(*both_load(moved))
    theirs, ours = both_load(data)  # under its own name it is not allowed
    assert "GLOBAL " + Config.__module__ + ".Config was not an allowed" in str(ours)
    assert isinstance(theirs, Exception)


def test_allowing_a_class_allows_nothing_else():
    """With classes allowed: a pickle calling os.system is refused, and an instance of an
    allowed class is built (NEWOBJ) but never called (REDUCE): in torch as in minigpu, and
    nothing runs."""
    allowed = [argparse.Namespace, Config, RunsWhenCalled]
    module = RunsWhenCalled.__module__.encode()
    call_an_instance = (b"\x80\x02c" + module + b"\nRunsWhenCalled\n)\x81)R.")  # NEWOBJ, REDUCE
    with torch.serialization.safe_globals(allowed), mg.serialization.safe_globals(allowed):
        system = both_load(torch_zip(pickle.dumps([RunsACommand()], protocol=2)))
        called = both_load(torch_zip(call_an_instance))
        built = both_load(torch_zip(b"\x80\x02c" + module + b"\nRunsWhenCalled\n)\x81."))
    assert all(isinstance(r, Exception) for r in system + called)
    assert "GLOBAL posix.system" in str(system[1]) or "GLOBAL nt.system" in str(system[1])
    assert "unrecognized function" in str(called[0]) and "unrecognized function" in str(called[1])
    assert all(type(r) is RunsWhenCalled for r in built)


def test_setstate_is_used_for_an_allowed_class():
    class_name = f"c{Config.__module__}\nConfig\n".encode()
    # Config built by NEWOBJ, then BUILD with a (dict, slots) state pair: as pickle does it
    data = (b"\x80\x02" + class_name + b")\x81}X\x07\x00\x00\x00n_layerK\x04sN\x86b.")
    with torch.serialization.safe_globals([Config]), mg.serialization.safe_globals([Config]):
        theirs, ours = both_load(torch_zip(data))
    assert vars(ours) == vars(theirs) == {"n_layer": 4}
