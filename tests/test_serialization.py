"""mg.save / mg.load: safetensors files as PyTorch writes and reads them, full checkpoints
(model + optimizer + epoch + config) that resume training exactly, atomic writes with the usual
file mode, clear errors for damaged or foreign files, and the legacy .npz checkpoints."""
import json
import os
import struct
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
import safetensors
from safetensors.numpy import load_file

import minigpu as mg
from minigpu import nn, optim
from minigpu.serialization import CheckpointError


def _model(dev):
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).to(dev)


def _data(dev):
    g = np.random.default_rng(0)
    return (mg.tensor(g.standard_normal((6, 4)).astype(np.float32), device=dev),
            mg.tensor([0, 1, 2, 0, 1, 2], device=dev))


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.CrossEntropyLoss()(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
@pytest.mark.parametrize("make_opt", [
    lambda p: optim.Adam(p, lr=0.05),
    lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
], ids=["adam", "sgd_momentum"])
def test_resume_training_equals_uninterrupted_run(tmp_path, dev, make_opt):
    x, y = _data(dev)
    mg.manual_seed(0)
    model = _model(dev)
    opt = make_opt(model.parameters())
    for _ in range(2):
        _step(model, opt, x, y)
    path = tmp_path / "ckpt.safetensors"
    mg.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 2,
             "config": {"hidden": 8, "lr": 0.05, "name": "mlp", "sizes": (4, 8, 3)}}, path)
    uninterrupted = _step(model, opt, x, y)
    expected = [p.detach().numpy() for p in model.parameters()]

    ckpt = mg.load(path, map_location=dev)
    assert ckpt["epoch"] == 2 and ckpt["config"] == {"hidden": 8, "lr": 0.05, "name": "mlp",
                                                     "sizes": (4, 8, 3)}
    mg.manual_seed(123)  # a different initialisation: everything must come from the file
    fresh = _model(dev)
    fresh_opt = make_opt(fresh.parameters())
    fresh.load_state_dict(ckpt["model"])
    fresh_opt.load_state_dict(ckpt["optimizer"])
    assert fresh_opt.state_dict()["param_groups"] == opt.state_dict()["param_groups"]
    resumed = _step(fresh, fresh_opt, x, y)
    assert resumed == uninterrupted
    for p, e in zip(fresh.parameters(), expected):
        assert p.device == dev
        np.testing.assert_array_equal(p.detach().numpy(), e)


def test_nested_checkpoint_round_trips_types_and_order(tmp_path):
    state = OrderedDict(b=mg.ones(2, 3), a=mg.arange(4))
    obj = {"state": state, "ints": {0: mg.zeros(1, dtype=mg.float64), 7: [1, 2.5, True, None]},
           "tuple": (mg.tensor(True), "text", -3), "array": np.arange(6).reshape(2, 3),
           "np_scalar": np.float32(0.5), "empty": mg.zeros(0, 5), "nan": float("nan"),
           "a.b": mg.ones(1), "a": {"b": mg.zeros(1)}}  # same dotted path twice
    path = tmp_path / "c.safetensors"
    mg.save(obj, path)
    back = mg.load(path)
    assert list(back) == list(obj)
    assert type(back["state"]) is OrderedDict and list(back["state"]) == ["b", "a"]
    np.testing.assert_array_equal(back["state"]["a"].numpy(), np.arange(4))
    assert back["state"]["a"].dtype == mg.int64 and back["ints"][0].dtype == mg.float64
    assert list(back["ints"]) == [0, 7] and back["ints"][7] == [1, 2.5, True, None]
    assert type(back["ints"][7][2]) is bool
    assert isinstance(back["tuple"], tuple) and back["tuple"][1:] == ("text", -3)
    assert back["tuple"][0].dtype == mg.bool and back["tuple"][0].item() is True
    assert isinstance(back["array"], np.ndarray)
    np.testing.assert_array_equal(back["array"], obj["array"])
    assert back["np_scalar"] == 0.5 and np.isnan(back["nan"])
    assert tuple(back["empty"].shape) == (0, 5)
    assert back["a.b"].item() == 1 and back["a"]["b"].item() == 0
    # tensors are in the file under their dotted paths, readable by any safetensors reader
    raw = load_file(path)
    assert raw["state.b"].shape == (2, 3) and raw["ints.0"].dtype == np.float64
    cuda = mg.load(path, map_location="cuda")
    assert cuda["state"]["b"].device == "cuda"


def test_reads_safetensors_written_by_pytorch(tmp_path):
    # safetensors.torch.save_file(tensors, path) is serialize_file over {name: TensorSpec}
    w = np.arange(6, dtype=np.float16).reshape(2, 3)
    b = np.array([1.5, -2.0], dtype=np.float32)
    n = np.array(3, dtype=np.int64)
    spec = {name: safetensors.TensorSpec(dtype=dt, shape=list(a.shape), data_ptr=a.ctypes.data,
                                         data_len=a.nbytes)
            for name, dt, a in [("fc.weight", "float16", w), ("fc.bias", "float32", b),
                                ("bn.num_batches_tracked", "int64", n)]}
    path = str(tmp_path / "torch.safetensors")
    safetensors.serialize_file(spec, path, metadata={"format": "pt"})
    sd = mg.load(path)
    assert set(sd) == {"fc.weight", "fc.bias", "bn.num_batches_tracked"}
    assert sd["fc.weight"].dtype == mg.float16  # kept, as torch keeps it
    np.testing.assert_array_equal(sd["fc.weight"].numpy(), w)
    np.testing.assert_array_equal(sd["fc.bias"].numpy(), b)
    assert sd["bn.num_batches_tracked"].dtype == mg.int64 and sd["bn.num_batches_tracked"] == 3


def test_reads_bfloat16_weights_as_float32(tmp_path):
    values = np.array([[1.5, -2.0], [3.140625, 0.0]], dtype=np.float32)  # exact in bfloat16
    bits = (values.view(np.uint32) >> 16).astype(np.uint16)
    f8 = np.array([1.0], dtype=np.float32)
    path = str(tmp_path / "bf16.safetensors")
    safetensors.serialize_file({
        "w": safetensors.TensorSpec(dtype="bfloat16", shape=[2, 2], data_ptr=bits.ctypes.data,
                                    data_len=bits.nbytes),
        "b": safetensors.TensorSpec(dtype="float32", shape=[1], data_ptr=f8.ctypes.data,
                                    data_len=f8.nbytes)}, path, metadata=None)
    sd = mg.load(path)
    assert list(sd) == ["b", "w"] and sd["w"].dtype == mg.float32
    np.testing.assert_array_equal(sd["w"].numpy(), values)
    assert sd["b"].item() == 1.0


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_file_mode_follows_the_umask_and_the_write_is_atomic(tmp_path, umask):
    path = tmp_path / "w.safetensors"
    old = os.umask(umask)
    try:
        mg.save({"w": mg.ones(3)}, path)
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask
    before = path.read_bytes()
    with pytest.raises(TypeError, match="never use pickle"):
        mg.save({"w": mg.zeros(3), "bad": object()}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["w.safetensors"]


def _header(data):
    n = struct.unpack("<Q", data[:8])[0]
    return n, json.loads(data[8:8 + n])


def test_truncated_and_tampered_files_give_clear_errors(tmp_path):
    path = tmp_path / "w.safetensors"
    mg.save({"model": {"w": mg.arange(10, dtype=mg.float32)}, "epoch": 1}, path)
    data = path.read_bytes()

    (tmp_path / "short.safetensors").write_bytes(data[:-7])
    with pytest.raises(CheckpointError, match="short.safetensors is not a readable safetensors "
                                              "checkpoint .truncated"):
        mg.load(tmp_path / "short.safetensors")
    (tmp_path / "tiny").write_bytes(data[:5])
    with pytest.raises(CheckpointError, match="not a readable safetensors"):
        mg.load(tmp_path / "tiny")

    flipped = bytearray(data)
    flipped[-1] ^= 0x40  # one tensor byte changed
    (tmp_path / "flipped.safetensors").write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="modified or damaged after it was saved"):
        mg.load(tmp_path / "flipped.safetensors")

    n, header = _header(data)
    structure = json.loads(header["__metadata__"]["minigpu.structure"])
    structure["tree"]["dict"][0][1]["dict"][0][1] = {"tensor": "nope"}
    header["__metadata__"]["minigpu.structure"] = json.dumps(structure)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    (tmp_path / "edited.safetensors").write_bytes(struct.pack("<Q", len(text)) + text
                                                  + data[8 + n:])
    with pytest.raises(CheckpointError, match="structure in its metadata is damaged"):
        mg.load(tmp_path / "edited.safetensors")


def test_legacy_npz_loads_without_pickle_and_npy_is_refused(tmp_path):
    np.savez(tmp_path / "old.npz", **{"fc.weight": np.ones((2, 3), np.float32),
                                      "n": np.array(4, np.int64)})
    sd = mg.load(tmp_path / "old.npz", map_location="cuda")
    assert list(sd) == ["fc.weight", "n"] and sd["fc.weight"].device == "cuda"
    assert sd["n"].item() == 4
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle=False"):
        mg.load(tmp_path / "objects.npz")

    np.save(tmp_path / "w.npy", np.ones(3))
    with pytest.raises(CheckpointError, match=r"w.npy is a single NumPy array \(.npy\), not a "
                                              r"checkpoint. Read it with numpy.load"):
        mg.load(tmp_path / "w.npy")

    with zipfile.ZipFile(tmp_path / "model.pt", "w") as z:  # torch.save's layout: its pickle
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")  # is read, restricted
    assert mg.load(tmp_path / "model.pt") == {}  # (test_serialization_torch.py)


class TiedModel(nn.Module):
    """A language-model shape: tied embedding/decoder weights, a recurrent layer, an
    activation function kept as an attribute, and plain settings."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(6, 4)
        self.rnn = nn.LSTM(4, 4)
        self.decoder = nn.Linear(4, 6)
        self.decoder.weight = self.encoder.weight
        self.activation = mg.nn.functional.relu
        self.settings = {"kind": "LSTM", "sizes": (4, 4)}

    def forward(self, x):
        return self.decoder(self.activation(self.rnn(self.encoder(x))[0]))


TIED_CLASSES = [TiedModel, nn.Embedding, nn.LSTM, nn.Linear, mg.nn.functional.relu]


def test_a_whole_module_saves_without_pickle_and_loads_when_allowed(tmp_path):
    model = TiedModel().eval()
    path = tmp_path / "model.pt"
    mg.save(model, path)
    assert set(load_file(str(path))) == {  # the tensors, the tied one once
        "encoder.weight", "rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0",
        "rnn.bias_hh_l0", "decoder.bias"}
    with pytest.raises(CheckpointError, match="Unsupported global: GLOBAL (tests.)?test_serializ"
                                              "ation.TiedModel.*add_safe_globals"):
        mg.load(path)  # weights_only=True by default, as in PyTorch
    with mg.serialization.safe_globals(TIED_CLASSES[1:]):
        with pytest.raises(CheckpointError, match="TiedModel"):
            mg.load(path)
    x = mg.tensor([[1, 2], [3, 5]])
    for loaded in (mg.load(path, weights_only=False), _load_allowed(path)):
        assert type(loaded) is TiedModel and not loaded.training
        assert loaded.decoder.weight is loaded.encoder.weight
        assert isinstance(loaded.encoder.weight, nn.Parameter)
        assert loaded.activation is mg.nn.functional.relu
        assert loaded.settings == {"kind": "LSTM", "sizes": (4, 4)}
        np.testing.assert_array_equal(loaded(x).detach().numpy(), model(x).detach().numpy())
        loaded.train()
        loss = loaded(x).sum()
        loss.backward()  # a model that trains on
        assert loaded.encoder.weight.grad is not None


def _load_allowed(path):
    with mg.serialization.safe_globals(TIED_CLASSES):
        return mg.load(path)


def test_what_a_module_file_cannot_hold_is_named(tmp_path):
    model = nn.Linear(2, 2)
    model.optimizer = optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="Linear: its attribute 'optimizer'.*SGD"):
        mg.save(model, tmp_path / "m.pt")

    def local_activation(x):
        return x

    model = nn.Linear(2, 2)
    model.activation = local_activation
    with pytest.raises(TypeError, match="cannot be imported back"):
        mg.save(model, tmp_path / "m.pt")
