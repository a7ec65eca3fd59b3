"""Modules as a whole: state_dict keys, shapes and dtypes equal to PyTorch's for the same model
(the expected values below were printed by ``torch.nn`` for the identical class), load errors,
safetensors checkpoints, train/eval, zero_grad, device moves and repr.
"""
import numpy as np
import pytest
from safetensors.numpy import load_file

import minigpu as mg
from minigpu import nn


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.AvgPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.LeakyReLU(0.2), nn.Dropout(0.5),
            nn.Linear(120, 10, bias=False))
        self.norm = nn.BatchNorm1d(10, affine=False)

    def forward(self, x):
        return self.norm(self.classifier(self.features(x)))


# What torch.nn prints for the same class (torch 2.14).
TORCH_STATE = [
    ("features.0.weight", (6, 1, 5, 5), "float32"), ("features.0.bias", (6,), "float32"),
    ("features.1.weight", (6,), "float32"), ("features.1.bias", (6,), "float32"),
    ("features.1.running_mean", (6,), "float32"), ("features.1.running_var", (6,), "float32"),
    ("features.1.num_batches_tracked", (), "int64"),
    ("features.4.weight", (16, 6, 5, 5), "float32"), ("features.4.bias", (16,), "float32"),
    ("classifier.1.weight", (120, 400), "float32"), ("classifier.1.bias", (120,), "float32"),
    ("classifier.4.weight", (10, 120), "float32"),
    ("norm.running_mean", (10,), "float32"), ("norm.running_var", (10,), "float32"),
    ("norm.num_batches_tracked", (), "int64"),
]

TORCH_REPR = """SmallCNN(
  (features): Sequential(
    (0): Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2))
    (1): BatchNorm2d(6, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
    (2): ReLU()
    (3): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
    (4): Conv2d(6, 16, kernel_size=(5, 5), stride=(1, 1))
    (5): ReLU()
    (6): AvgPool2d(kernel_size=2, stride=2, padding=0)
  )
  (classifier): Sequential(
    (0): Flatten(start_dim=1, end_dim=-1)
    (1): Linear(in_features=400, out_features=120, bias=True)
    (2): LeakyReLU(negative_slope=0.2)
    (3): Dropout(p=0.5, inplace=False)
    (4): Linear(in_features=120, out_features=10, bias=False)
  )
  (norm): BatchNorm1d(10, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=True)
)"""


def test_state_dict_keys_shapes_and_dtypes_match_pytorch():
    sd = SmallCNN().state_dict()
    assert [(k, tuple(v.shape), str(v.dtype)) for k, v in sd.items()] == TORCH_STATE
    names = [n for n, _ in SmallCNN().named_parameters()]
    assert names == [k for k, _, _ in TORCH_STATE
                     if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))
                     and not k.startswith("norm.")]


def test_repr_matches_pytorch():
    assert repr(SmallCNN()) == TORCH_REPR
    assert repr(nn.Conv2d(3, 4, (3, 2), stride=2, padding=1, dilation=2, bias=False)) == \
        "Conv2d(3, 4, kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), dilation=(2, 2), " \
        "bias=False)"
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    assert repr(nn.AdaptiveAvgPool2d((1, 1))) == "AdaptiveAvgPool2d(output_size=(1, 1))"
    assert repr(nn.Softmax(dim=1)) == "Softmax(dim=1)" and repr(nn.Identity()) == "Identity()"


def test_load_state_dict_errors_and_strict_false():
    model = SmallCNN()
    sd = model.state_dict()
    missing = dict(sd)
    del missing["features.0.bias"]
    with pytest.raises(RuntimeError, match=r'Error\(s\) in loading state_dict for SmallCNN:\n\t'
                                           r'Missing key\(s\) in state_dict: "features.0.bias"'):
        model.load_state_dict(missing)
    extra = dict(sd, **{"classifier.4.bias": mg.zeros(10)})
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: '
                                           r'"classifier.4.bias"'):
        model.load_state_dict(extra)
    wrong = dict(sd, **{"features.0.weight": mg.zeros(6, 1, 3, 3)})
    with pytest.raises(RuntimeError, match=r"size mismatch for features.0.weight: copying a "
                                           r"param with shape \(6, 1, 3, 3\) from checkpoint, "
                                           r"the shape in current model is \(6, 1, 5, 5\)"):
        model.load_state_dict(wrong)
    result = model.load_state_dict(dict(missing, extra=mg.zeros(1)), strict=False)
    assert result.missing_keys == ["features.0.bias"] and result.unexpected_keys == ["extra"]


def test_save_load_safetensors_round_trip_as_torch_reads_it(tmp_path):
    mg.manual_seed(0)
    model = SmallCNN()
    x = mg.randn(3, 1, 28, 28)
    model(x)  # one training step of the batch-norm statistics
    model.eval()
    expected = model(x).detach().numpy()
    path = tmp_path / "small_cnn.safetensors"
    mg.save(model.state_dict(), path)
    # what safetensors.torch.load_file reads: the same names, shapes and dtypes as torch.nn
    raw = load_file(path)
    assert sorted((k, v.shape, str(v.dtype)) for k, v in raw.items()) == sorted(TORCH_STATE)
    assert raw["features.1.num_batches_tracked"] == 1
    mg.manual_seed(1)
    fresh = SmallCNN().eval()
    assert not np.allclose(fresh(x).detach().numpy(), expected)
    fresh.load_state_dict(mg.load(path))
    np.testing.assert_allclose(fresh(x).detach().numpy(), expected, rtol=1e-6, atol=1e-6)
    assert fresh.features[1].num_batches_tracked.dtype == mg.int64
    # NumPy arrays load too (e.g. exported from another framework under the same keys)
    fresh.load_state_dict({k: v.numpy() for k, v in model.state_dict().items()})
    with pytest.raises(TypeError, match="never use pickle"):
        mg.save({"bad": object()}, tmp_path / "bad.safetensors")


def test_train_eval_switches_every_submodule():
    mg.manual_seed(2)
    model = SmallCNN()
    assert all(m.training for m in model.modules())
    x = mg.randn(2, 1, 28, 28)
    assert model.eval() is model and not any(m.training for m in model.modules())
    a, b = model(x).detach().numpy(), model(x).detach().numpy()
    np.testing.assert_array_equal(a, b)  # no dropout, running statistics, no update
    assert model.features[1].num_batches_tracked.item() == 0
    model.train()
    assert all(m.training for m in model.modules())
    model(x)
    assert model.features[1].num_batches_tracked.item() == 1


def test_zero_grad_and_requires_grad():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
    model(mg.ones(4, 3)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    model.requires_grad_(False)
    assert not any(p.requires_grad for p in model.parameters())


def test_to_device_and_dtype_keep_parameter_objects_and_int_buffers():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    params = list(model.parameters())
    model.to("cuda")
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]
    assert all(t.device == "cuda" for t in model.state_dict().values())
    assert model[1].num_batches_tracked.dtype == mg.int64
    model.cpu().double()
    assert all(p.dtype == mg.float64 for p in model.parameters())
    assert model[1].running_mean.dtype == mg.float64
    assert model[1].num_batches_tracked.dtype == mg.int64


def test_functional_and_layer_names_exported():
    for name in ["Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d",
                 "BatchNorm1d", "BatchNorm2d", "Dropout", "Flatten", "ReLU", "LeakyReLU", "Tanh",
                 "Sigmoid", "Softmax", "LogSoftmax", "Identity", "MSELoss", "BCELoss",
                 "BCEWithLogitsLoss", "CrossEntropyLoss", "NLLLoss", "Module", "Sequential",
                 "ModuleList", "Parameter"]:
        assert hasattr(nn, name), name
    for name in ["linear", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
                 "batch_norm", "dropout", "mse_loss", "binary_cross_entropy",
                 "binary_cross_entropy_with_logits", "cross_entropy", "nll_loss", "softmax",
                 "log_softmax", "relu", "leaky_relu", "tanh", "sigmoid", "flatten"]:
        assert callable(getattr(nn.functional, name)), name
