"""minigpu.models: output shapes, argument checks, state_dict names, a few training steps on
cpu, and the cpu and cuda devices agreeing step by step on tiny models (the simulator is slow:
batch 2, 8x8 inputs, a handful of channels)."""
import math

import numpy as np
import pytest

import minigpu as mg
import minigpu.nn as nn
import minigpu.optim as optim
from minigpu.models import (VGG, VGG_CFGS, AlexNet, BasicBlock, GoogLeNet, Inception, LeNet5,
                            ResNet, resnet8, resnet14, vgg)

# Small widths keep the cpu tests fast; the architecture is what is under test.
BUILDERS = {
    "lenet5": lambda c, n, s: LeNet5(c, n, s),
    "lenet5_bn": lambda c, n, s: LeNet5(c, n, s, channels=(4, 8), kernel_size=3,
                                        batch_norm=True, dropout=0.25),
    "alexnet": lambda c, n, s: AlexNet(c, n, s, width=4, hidden=32),
    "vgg": lambda c, n, s: VGG([8, "M", 16, "M"], c, n, s, hidden=32),
    "vgg_bn": lambda c, n, s: vgg("vgg-tiny", in_channels=c, num_classes=n, input_size=s,
                                  batch_norm=True, hidden=32),
    "resnet8": lambda c, n, s: resnet8(widths=(4, 8, 16), in_channels=c, num_classes=n,
                                       input_size=s),
    "googlenet": lambda c, n, s: GoogLeNet(c, n, s, width=4),
}


def n_params(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("in_channels,num_classes,size", [(1, 10, 8), (3, 7, 16)])
def test_output_shape(name, in_channels, num_classes, size):
    mg.manual_seed(0)
    model = BUILDERS[name](in_channels, num_classes, size)
    out = model(mg.randn(3, in_channels, size, size))
    assert tuple(out.shape) == (3, num_classes)
    assert np.isfinite(out.detach().numpy()).all()


@pytest.mark.parametrize("model,size", [
    (LeNet5(3, 10, 32), 32), (AlexNet(3, 10, 32, width=2, hidden=8), 32),
    (vgg("vgg11", input_size=32, hidden=8), 32), (resnet14(input_size=32), 32),
    (GoogLeNet(3, 10, 32, width=2), 32), (LeNet5(1, 10, 28), 28),
])
def test_cifar_and_mnist_sizes(model, size):
    assert tuple(model(mg.randn(2, model.in_channels, size, size)).shape) == (2, 10)


def test_classic_lenet5_parameter_count():
    # LeNet-5 on 32x32 (unpadded in 1998: 61 706 parameters). "Same"-padded convolutions keep
    # 8x8 maps instead of 5x5 before the first fc layer: 16*8*8*120 + 120 weights there.
    model = LeNet5(1, 10, 32)
    conv = (6 * 25 + 6) + (16 * 6 * 25 + 16)
    fc = (16 * 8 * 8 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10)
    assert n_params(model) == conv + fc


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_trains_on_cpu(name):
    """Six Adam steps on one batch: the loss goes down, every parameter moves, all finite."""
    mg.manual_seed(1)
    model = BUILDERS[name](1, 10, 8)
    x, y = mg.randn(8, 1, 8, 8), mg.arange(8)
    before = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    opt = optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0], losses
    for name_, p in model.named_parameters():
        assert not np.array_equal(before[name_], p.detach().numpy()), f"{name_} did not change"


def test_resnet_state_dict_names_follow_torchvision():
    keys = set(resnet8(widths=(4, 8, 16)).state_dict())
    for key in ("conv1.weight", "bn1.running_mean", "bn1.num_batches_tracked",
                "layer1.0.conv1.weight", "layer1.0.bn2.bias", "layer2.0.downsample.0.weight",
                "layer3.0.downsample.1.running_var", "fc.weight", "fc.bias"):
        assert key in keys, key
    assert not any(k.startswith("layer1.0.downsample") for k in keys)  # identity shortcut


def test_basic_block_adds_the_shortcut():
    mg.manual_seed(0)
    block = BasicBlock(4, 4)
    for p in block.parameters():  # F(x) = 0: conv weights zero, so out = relu(bn(0) + x)
        p.data = mg.zeros(*p.shape)
    x = mg.randn(2, 4, 4, 4)
    np.testing.assert_allclose(block(x).detach().numpy(), np.maximum(x.numpy(), 0), atol=1e-6)
    down = BasicBlock(4, 8, stride=2)
    assert tuple(down(x).shape) == (2, 8, 2, 2)


def test_inception_concatenates_branches():
    block = Inception(6, 2, 3, 4, 1, 2, 3)
    out = block(mg.randn(2, 6, 5, 5))
    assert block.out_channels == 2 + 4 + 2 + 3
    assert tuple(out.shape) == (2, 11, 5, 5)


def test_vgg_cfgs_and_names():
    model = VGG("vgg11", batch_norm=True)
    assert model.cfg == VGG_CFGS["vgg11"]
    assert "features.0.weight" in model.state_dict()
    assert "features.1.running_mean" in model.state_dict()  # BatchNorm after the first conv


@pytest.mark.parametrize("build,message", [
    (lambda: LeNet5(1, 10, 10), "multiple of 4"),
    (lambda: AlexNet(1, 10, 12), "multiple of 8"),
    (lambda: VGG([8, "M", 8, "M", 8, "M"], 1, 10, 12), "multiple of 8"),
    (lambda: VGG("vgg99"), "unknown cfg"),
    (lambda: VGG([8, "X"]), "cfg entries"),
    (lambda: ResNet((1, 1), (4,)), "same"),
    (lambda: resnet8(num_classes=0), "num_classes must be a positive integer"),
    (lambda: GoogLeNet(input_size=7), "multiple of 2"),
    (lambda: LeNet5(kernel_size=4), "odd"),
    (lambda: LeNet5(activation="gelu"), "activation"),
])
def test_bad_arguments_name_the_value(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_wrong_input_shape_is_explained():
    with pytest.raises(ValueError, match=r"expected input of shape \(N, 1, 8, 8\), got "
                                         r"\(2, 1, 16, 16\)"):
        LeNet5(1, 10, 8)(mg.randn(2, 1, 16, 16))


def _steps(model, device, steps=2):
    """Losses of `steps` SGD steps on a fixed batch (built on cpu, copied to device)."""
    model = model.to(device)
    x = mg.tensor(np.linspace(-1, 1, 2 * 64, dtype=np.float32).reshape(2, 1, 8, 8),
                  device=device)
    y = mg.tensor([3, 7], device=device)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}


def _need_cuda():
    if not mg.cuda.is_available():
        pytest.skip("the cuda device is not available (no GPU and NUMBA_ENABLE_CUDASIM unset)")


@pytest.mark.parametrize("build", [
    lambda: LeNet5(1, 10, 8, channels=(2, 4), hidden=(8, 8)),
    lambda: VGG([2, "M", 4, "M"], 1, 10, 8, batch_norm=True, hidden=8, dropout=0.0),
    pytest.param(lambda: ResNet((1, 1), (2, 4), 1, 10, 8),
                 marks=pytest.mark.slow),
    pytest.param(lambda: GoogLeNet(1, 10, 8, width=1, dropout=0.0),
                 marks=pytest.mark.slow),
], ids=["lenet5", "vgg_bn", "resnet", "googlenet"])
def test_cuda_matches_cpu(build):
    """The same model (same seed) on cpu and on cuda: same losses, same updated weights."""
    _need_cuda()
    mg.manual_seed(0)
    cpu_losses, cpu_state = _steps(build(), "cpu")
    mg.manual_seed(0)
    cuda_losses, cuda_state = _steps(build(), "cuda")
    np.testing.assert_allclose(cuda_losses, cpu_losses, rtol=1e-4, atol=1e-5)
    assert cpu_losses[1] < cpu_losses[0]
    for key, value in cpu_state.items():
        np.testing.assert_allclose(cuda_state[key], value, rtol=1e-3, atol=1e-5, err_msg=key)


@pytest.mark.parametrize("build", [lambda: BasicBlock(2, 3, stride=2),
                                   lambda: Inception(2, 1, 1, 1, 1, 1, 1)],
                         ids=["basic_block", "inception"])
def test_cuda_blocks_match_cpu(build):
    """Residual add and channel concat on cuda: forward output and input gradient."""
    _need_cuda()
    results = []
    for device in ("cpu", "cuda"):
        mg.manual_seed(0)
        block = build().to(device)
        x = mg.tensor(np.linspace(-1, 1, 2 * 2 * 4 * 4, dtype=np.float32).reshape(2, 2, 4, 4),
                      device=device, requires_grad=True)
        out = block(x)
        (out * out).sum().backward()
        results.append((out.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-4, atol=1e-5)
