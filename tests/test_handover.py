"""minigpu.to_torch / from_torch: a model handed over to PyTorch (and back) computes the same,
and training that continues in PyTorch gives PyTorch's own losses."""
import numpy as np
import pytest

import minigpu as mg

torch = pytest.importorskip("torch")
nn = mg.nn

# (module, input shape or "tokens") for every minigpu module class that PyTorch has and that
# rebuilds from its attributes; Transformer* are checked through into= below.
MODULES = [
    (lambda: nn.Linear(4, 3), (2, 4)), (lambda: nn.Linear(4, 3, bias=False), (2, 4)),
    (lambda: nn.Conv1d(2, 3, 3, padding=1), (2, 2, 6)),
    (lambda: nn.Conv2d(2, 3, 3, stride=2, padding=1), (2, 2, 6, 6)),
    (lambda: nn.ConvTranspose2d(2, 3, 4, 2, 1, bias=False), (1, 2, 3, 3)),
    (lambda: nn.BatchNorm1d(4), (3, 4)), (lambda: nn.BatchNorm2d(2), (2, 2, 3, 3)),
    (lambda: nn.LayerNorm(4), (2, 4)), (lambda: nn.Embedding(10, 4), "tokens"),
    (lambda: nn.LSTM(4, 5, num_layers=2, batch_first=True), (2, 3, 4)),
    (lambda: nn.GRU(4, 3), (3, 2, 4)), (lambda: nn.RNN(4, 3, nonlinearity="relu"), (3, 2, 4)),
    (lambda: nn.LSTMCell(4, 3), (2, 4)), (lambda: nn.GRUCell(4, 3), (2, 4)),
    (lambda: nn.RNNCell(4, 3), (2, 4)),
    (lambda: nn.MaxPool2d(2), (1, 2, 4, 4)), (lambda: nn.AvgPool2d(2), (1, 2, 4, 4)),
    (lambda: nn.AdaptiveAvgPool2d(1), (1, 2, 4, 4)), (lambda: nn.Upsample(scale_factor=2),
                                                      (1, 1, 2, 2)),
    (lambda: nn.Flatten(), (2, 3, 2)), (lambda: nn.Dropout(0.5), (2, 3)),
    (lambda: nn.Identity(), (2, 3)), (lambda: nn.Softmax(dim=1), (2, 3)),
    (lambda: nn.LogSoftmax(dim=1), (2, 3)),
    (lambda: nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2), nn.Tanh()), (2, 4)),
] + [(lambda cls=cls: cls(), (2, 3)) for cls in (
    nn.ReLU, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Tanh, nn.ELU, nn.Softplus, nn.LeakyReLU)]


def _input(shape):
    if shape == "tokens":
        return mg.tensor([[1, 4, 9], [0, 2, 2]])
    return mg.randn(*shape)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("make,shape", MODULES, ids=lambda v: "" if callable(v) else None)
def test_a_module_handed_over_computes_the_same(make, shape):
    mg.manual_seed(0)
    ours = make().eval()
    x = _input(shape)
    theirs = mg.to_torch(ours)
    assert type(theirs).__name__ == type(ours).__name__
    assert isinstance(theirs, torch.nn.Module) and not theirs.training
    expected = _first(ours(x)).detach().numpy()
    np.testing.assert_allclose(_first(theirs(mg.to_torch(x))).detach().numpy(), expected,
                               rtol=1e-5, atol=1e-6)
    back = mg.from_torch(theirs)
    assert type(back) is type(ours)
    np.testing.assert_allclose(_first(back(x)).detach().numpy(), expected, rtol=1e-6, atol=1e-7)


def test_a_multihead_attention_handed_over_computes_the_same():
    ours = nn.MultiheadAttention(4, 2).eval()
    q = mg.randn(3, 2, 4)
    theirs = mg.to_torch(ours)
    expected = ours(q, q, q)[0].detach().numpy()
    t = mg.to_torch(q)
    np.testing.assert_allclose(theirs(t, t, t)[0].detach().numpy(), expected, rtol=1e-5,
                               atol=1e-6)


def test_training_continues_in_torch_with_torchs_losses():
    """3 SGD steps in minigpu, hand over, 3 more in PyTorch == 6 steps in PyTorch alone from
    the same initial weights."""
    mg.manual_seed(1)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    reference = mg.to_torch(model)
    x, y = mg.randn(16, 5), mg.tensor(np.arange(16) % 3)
    tx, ty = mg.to_torch(x), mg.to_torch(y)

    expected = []
    opt = torch.optim.SGD(reference.parameters(), lr=0.5)
    for _ in range(6):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(reference(tx), ty)
        loss.backward()
        opt.step()
        expected.append(loss.item())

    losses = []
    opt = mg.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model = mg.to_torch(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(tx), ty)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    np.testing.assert_allclose(losses, expected, rtol=1e-5)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x).relu()


class TorchNet(torch.nn.Module):  # the same model written for PyTorch
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x).relu()


def test_a_class_of_your_own_goes_into_the_same_model_built_in_torch():
    ours = Net()
    with pytest.raises(TypeError, match="class of your own.*into="):
        mg.to_torch(ours)
    theirs = mg.to_torch(ours, into=TorchNet())
    x = mg.randn(4, 3)
    np.testing.assert_allclose(theirs(mg.to_torch(x)).detach().numpy(),
                               ours(x).detach().numpy(), rtol=1e-6)
    again = mg.from_torch(theirs, into=Net())
    np.testing.assert_array_equal(again.fc.weight.detach().numpy(),
                                  ours.fc.weight.detach().numpy())


def test_a_transformer_layer_goes_over_with_into():
    ours = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0).eval()
    with pytest.raises(TypeError, match="'d_model' is not an attribute.*into="):
        mg.to_torch(ours)
    theirs = mg.to_torch(ours, into=torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0))
    x = mg.randn(3, 2, 8)
    np.testing.assert_allclose(theirs(mg.to_torch(x)).detach().numpy(),
                               ours(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_tensors_keep_values_dtype_and_requires_grad():
    x = mg.randn(2, 3, dtype=mg.float64, requires_grad=True)
    t = mg.to_torch(x)
    assert t.dtype == torch.float64 and t.requires_grad and t.is_leaf
    np.testing.assert_array_equal(t.detach().numpy(), x.detach().numpy())
    back = mg.from_torch(t)
    assert back.dtype == mg.float64 and back.requires_grad
    np.testing.assert_array_equal(back.detach().numpy(), x.detach().numpy())
    assert mg.from_torch(torch.arange(3)).dtype == mg.int64
    with pytest.raises(TypeError, match="expects a minigpu Tensor or nn.Module"):
        mg.to_torch([1, 2])


def test_multi_device_features_name_themselves_and_the_hand_over():
    with pytest.raises(NotImplementedError, match="DistributedDataParallel.*to_torch"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
    with pytest.raises(NotImplementedError, match="ONNX.*to_torch"):
        mg.onnx.export(nn.Linear(2, 2), mg.randn(1, 2), "model.onnx")
