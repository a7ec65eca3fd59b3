"""PyTorch's checkpoint format both ways (``minigpu/torch_format.py``): files ``torch.save``
writes load with ``mg.load`` (layouts, shared storages, dtypes, a model that trains on with
torch's losses), files ``mg.save`` writes in torch's format load with
``torch.load(weights_only=True)``, and hostile files are refused with nothing run."""
import io
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import minigpu as mg
from minigpu import nn
from minigpu.serialization import CheckpointError
from minigpu.torch_format import _REBUILD_TENSOR, _Call, _Pickler, _Storage


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def torch_bytes(torch, obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def torch_zip(data_pkl: bytes, records=None) -> bytes:
    """A zip laid out as torch.save lays it out, with this data.pkl and these storages."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("archive/data.pkl", data_pkl)
        z.writestr("archive/byteorder", "little")
        for key, raw in (records or {}).items():
            z.writestr(f"archive/data/{key}", raw)
        z.writestr("archive/version", "3\n")
    return out.getvalue()


def rezip(data: bytes, change) -> bytes:
    """The zip ``data`` with each record's bytes passed through ``change(name, raw)`` (None:
    the record is left out)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            raw = change(name, src.read(name))
            if raw is not None:
                dst.writestr(name, raw)
    return out.getvalue()


def cnn(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Conv2d(1, 4, 3), lib.nn.BatchNorm2d(4), lib.nn.ReLU(),
                             lib.nn.Flatten(), lib.nn.Linear(4 * 6 * 6, 3))


def train_step(lib, model, opt, x, y):
    """One step of SGD on the cross-entropy, written once for torch and minigpu (``lib``)."""
    opt.zero_grad()
    loss = lib.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


# --- torch.save -> mg.load ----------------------------------------------------------------------
def test_a_torch_state_dict_loads_with_every_tensor_equal(torch):
    model = cnn(torch)
    model(torch.randn(5, 1, 8, 8))  # running statistics that are not the initial ones
    sd = model.state_dict()
    loaded = mg.load(io.BytesIO(torch_bytes(torch, sd)))
    assert type(loaded) is OrderedDict and list(loaded) == list(sd)
    assert loaded._metadata == sd._metadata  # the versions load_state_dict reads
    for key, value in sd.items():
        assert loaded[key].dtype == value.numpy().dtype and loaded[key].shape == value.shape
        np.testing.assert_array_equal(loaded[key].numpy(), value.numpy())
    assert loaded["1.num_batches_tracked"].dtype == np.int64


def test_layouts_dtypes_and_shared_storages_survive(torch):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    obj = {"base": base, "t": base.t(), "slice": base[1:, 2::3], "row": base[2],
           "scalar": torch.tensor(7, dtype=torch.int64), "empty": torch.zeros(0, 3),
           "half": torch.tensor([0.5, -2.0, 65504.0], dtype=torch.float16),
           "bf16": torch.tensor([1.5, -2.25, 3e38], dtype=torch.bfloat16),
           "flags": torch.tensor([True, False]), "bytes": torch.arange(5, dtype=torch.uint8),
           "param": torch.nn.Parameter(torch.ones(2)),
           "meta": {"epoch": 3, "lr": 0.5, "name": "run", "none": None, "raw": b"\x00\xff",
                    "shape": torch.Size([2, 3]), "pair": (1, [2, 3]), "tags": {"a", "b"}}}
    loaded = mg.load(io.BytesIO(torch_bytes(torch, obj)))
    for key in ("base", "t", "slice", "row", "scalar", "empty", "half", "flags", "bytes"):
        np.testing.assert_array_equal(loaded[key].numpy(), obj[key].numpy(), err_msg=key)
        assert loaded[key].stride() == obj[key].stride(), key
        assert loaded[key].dtype == obj[key].numpy().dtype, key
    # bfloat16 widens to float32 exactly (minigpu has no bfloat16)
    np.testing.assert_array_equal(loaded["bf16"].numpy(), obj["bf16"].float().numpy())
    assert isinstance(loaded["param"], nn.Parameter) and loaded["param"].requires_grad
    assert loaded["meta"] == {"epoch": 3, "lr": 0.5, "name": "run", "none": None,
                              "raw": b"\x00\xff", "shape": (2, 3), "pair": (1, [2, 3]),
                              "tags": {"a", "b"}}
    # the views share the storage, as in torch: a write through one is seen by the others
    loaded["base"][2, 2] = -1.0
    assert loaded["t"][2, 2].item() == -1.0 and loaded["row"][2].item() == -1.0
    assert loaded["slice"][1, 0].item() == -1.0


def test_map_location_and_the_cuda_location(torch):
    sd = {"w": torch.ones(2, 3)}
    on_cuda = mg.load(io.BytesIO(torch_bytes(torch, sd)), map_location="cuda")
    assert on_cuda["w"].device == "cuda"
    np.testing.assert_array_equal(on_cuda["w"].cpu().numpy(), np.ones((2, 3)))
    # a file mg.save wrote from cuda says cuda:0 as torch's would; it comes back there
    buf = io.BytesIO()
    mg.save({"w": mg.ones(2, device="cuda")}, buf, format="torch")
    assert mg.load(io.BytesIO(buf.getvalue()))["w"].device == "cuda"
    back = torch.load(io.BytesIO(buf.getvalue()), weights_only=True, map_location="cpu")
    assert torch.equal(back["w"], torch.ones(2))


def test_a_torch_checkpoint_trains_on_with_torchs_losses(torch, tmp_path):
    x, y = torch.randn(6, 1, 8, 8), torch.tensor([0, 1, 2, 0, 1, 2])
    model = cnn(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        train_step(torch, model, opt, x, y)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 2},
               tmp_path / "ckpt.pt")
    expected = [train_step(torch, model, opt, x, y) for _ in range(3)]

    ckpt = mg.load(tmp_path / "ckpt.pt")
    ours = cnn(mg)
    ours.load_state_dict(ckpt["model"])
    ours_opt = mg.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    ours_opt.load_state_dict(ckpt["opt"])
    mx, my = mg.tensor(x.numpy()), mg.tensor(y.numpy())
    losses = [train_step(mg, ours, ours_opt, mx, my) for _ in range(3)]
    assert ckpt["epoch"] == 2
    np.testing.assert_allclose(losses, expected, rtol=3e-5)


# --- mg.save(format torch) -> torch.load(weights_only=True) --------------------------------------
def test_mg_save_in_torchs_format_loads_in_torch_weights_only(torch):
    base = mg.arange(12).float().reshape(3, 4)
    model = cnn(mg)
    obj = {"model": model.state_dict(), "base": base, "t": base.t(), "cols": base[:, 1::2],
           "ids": mg.tensor([3, -1]), "half": mg.tensor([0.5], dtype=mg.float16),
           "flags": mg.tensor([True]), "param": nn.Parameter(mg.ones(2)),
           "array": np.arange(3.0), "step": 4, "history": [0.5, (1, "a")], "note": None}
    buf = io.BytesIO()
    mg.save(obj, buf, format="torch")
    back = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(back["model"][key].numpy(), value.numpy(), err_msg=key)
    for key in ("base", "t", "cols", "ids", "half", "flags"):
        np.testing.assert_array_equal(back[key].numpy(), obj[key].numpy(), err_msg=key)
        assert back[key].stride() == obj[key].stride(), key
    assert back["t"].untyped_storage().data_ptr() == back["base"].untyped_storage().data_ptr()
    assert isinstance(back["param"], torch.nn.Parameter) and back["param"].requires_grad
    assert back["array"].tolist() == [0.0, 1.0, 2.0]
    assert (back["step"], back["history"], back["note"]) == (4, [0.5, (1, "a")], None)
    # and the model's state_dict loads into torch's model
    twin = cnn(torch)
    twin.load_state_dict(back["model"])
    x = np.random.default_rng(0).standard_normal((2, 1, 8, 8)).astype(np.float32)
    model.eval(), twin.eval()
    np.testing.assert_allclose(twin(torch.tensor(x)).detach().numpy(),
                               model(mg.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_the_name_picks_the_format_and_load_reads_both(torch, tmp_path):
    sd = cnn(mg).state_dict()
    for name in ("model.pt", "model.pth", "weights.bin"):
        mg.save(sd, tmp_path / name)
        assert zipfile.is_zipfile(tmp_path / name)
        back = torch.load(tmp_path / name, weights_only=True)
        assert list(back) == list(sd)
    with open(tmp_path / "opened.pt", "wb") as fh:  # a file object named like torch's files
        mg.save(sd, fh)
    assert zipfile.is_zipfile(tmp_path / "opened.pt")
    mg.save(sd, tmp_path / "model.safetensors")
    buf = io.BytesIO()
    mg.save(sd, buf)
    for data in ((tmp_path / "model.safetensors").read_bytes(), buf.getvalue()):
        assert not data.startswith(b"PK")  # safetensors: the default otherwise
    mg.save(sd, tmp_path / "forced.safetensors", format="torch")
    assert zipfile.is_zipfile(tmp_path / "forced.safetensors")
    for name in ("model.pt", "model.safetensors", "forced.safetensors", "opened.pt"):
        loaded = mg.load(tmp_path / name)
        for key, value in sd.items():
            np.testing.assert_array_equal(loaded[key].numpy(), value.numpy())


def test_what_torch_could_not_read_stays_minigpus(tmp_path):
    model = nn.Linear(2, 2)
    mg.save(model, tmp_path / "whole.pt")  # a whole module: minigpu's format, by the name
    assert not zipfile.is_zipfile(tmp_path / "whole.pt")
    assert type(mg.load(tmp_path / "whole.pt", weights_only=False)) is nn.Linear
    with pytest.raises(TypeError, match="in torch's format: Linear is not a tensor"):
        mg.save({"model": model}, io.BytesIO(), format="torch")
    with pytest.raises(ValueError, match="format must be 'torch' or 'safetensors'"):
        mg.save({}, io.BytesIO(), format="pickle")


# --- hostile files ------------------------------------------------------------------------------
class RunsACommand:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


class CallsEval:
    def __reduce__(self):
        return eval, ("1 + 1",)


def test_a_pickle_that_runs_a_command_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "marker"
    payload = pickle.dumps({"w": RunsACommand(f"touch {marker}")}, protocol=2)
    for data in (torch_zip(payload), payload):  # inside a torch zip, and as a bare pickle
        with pytest.raises(CheckpointError):
            mg.load(io.BytesIO(data))
    with pytest.raises(CheckpointError, match=r"Unsupported global: GLOBAL (posix|nt|os)\.system"):
        mg.load(io.BytesIO(torch_zip(payload)), weights_only=False)
    assert not marker.exists()


def test_a_reduce_of_eval_is_refused():
    with pytest.raises(CheckpointError, match=r"GLOBAL builtins\.eval was not an allowed"):
        mg.load(io.BytesIO(torch_zip(pickle.dumps([CallsEval()], protocol=2))))


def test_setting_attributes_of_anything_but_a_state_dict_is_refused():
    build_on_a_list = b"\x80\x02]}X\x01\x00\x00\x00aK\x01sb."  # [] then BUILD {'a': 1}
    with pytest.raises(CheckpointError, match="sets the attributes of a list"):
        mg.load(io.BytesIO(torch_zip(build_on_a_list)))


def test_a_truncated_zip_is_refused(torch):
    data = torch_bytes(torch, {"w": torch.ones(100)})
    for cut in (len(data) // 2, len(data) - 10):
        with pytest.raises(CheckpointError, match="truncated or damaged zip"):
            mg.load(io.BytesIO(data[:cut]))


def test_a_storage_of_the_wrong_size_is_refused(torch):
    data = torch_bytes(torch, {"w": torch.ones(4)})
    short = rezip(data, lambda name, raw: raw[:-4] if name.endswith("data/0") else raw)
    with pytest.raises(CheckpointError, match=r"storage '0' \(archive/data/0\) holds 12 bytes, "
                                              r"but data.pkl says 4 elements of FloatStorage"):
        mg.load(io.BytesIO(short))


def test_a_missing_storage_record_is_refused(torch):
    data = torch_bytes(torch, {"w": torch.ones(4)})
    missing = rezip(data, lambda name, raw: None if name.endswith("data/0") else raw)
    with pytest.raises(CheckpointError, match=r"refers to storage '0' \(archive/data/0\), "
                                              r"which is not in the file"):
        mg.load(io.BytesIO(missing))


def test_a_tensor_reaching_past_its_storage_is_refused():
    storage = _Storage("0", np.zeros(4, np.float32), "cpu")
    pickled = io.BytesIO()
    _Pickler(pickled, protocol=2).dump(
        {"w": _Call(_REBUILD_TENSOR, (storage, 2, (3,), (1,), False, OrderedDict()))})
    data = torch_zip(pickled.getvalue(), {"0": np.zeros(4, np.float32).tobytes()})
    with pytest.raises(CheckpointError, match=r"reaches element 4 of a storage of 4 elements"):
        mg.load(io.BytesIO(data))


def test_torchs_legacy_format_loads_too(torch):
    base = torch.arange(6, dtype=torch.float64)
    obj = {"base": base, "tail": base[2:], "ids": torch.tensor([[1, 2]]),
           "bf16": torch.tensor([0.5], dtype=torch.bfloat16), "meta": {"epoch": 1}}
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=False)
    data = buf.getvalue()
    loaded = mg.load(io.BytesIO(data))
    for key in ("base", "tail", "ids"):
        np.testing.assert_array_equal(loaded[key].numpy(), obj[key].numpy(), err_msg=key)
    assert loaded["bf16"].tolist() == [0.5] and loaded["meta"] == {"epoch": 1}
    loaded["base"][3] = -1.0
    assert loaded["tail"][1].item() == -1.0  # one storage, as in torch
    for cut in (len(data) - 4, len(data) // 2, 30):
        with pytest.raises(CheckpointError):
            mg.load(io.BytesIO(data[:cut]))


def test_a_legacy_file_that_runs_a_command_is_refused(tmp_path):
    marker = tmp_path / "marker"
    header = b"".join(pickle.dumps(v, protocol=2) for v in (
        0x1950A86A20F9469CFC6C, 1001, {"protocol_version": 1001, "little_endian": True}))
    data = header + pickle.dumps(RunsACommand(f"touch {marker}"), protocol=2)
    with pytest.raises(CheckpointError, match=r"GLOBAL (posix|nt|os)\.system"):
        mg.load(io.BytesIO(data))
    assert not marker.exists()
