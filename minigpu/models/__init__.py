"""Small versions of the classic CNN architectures, sized for 8x8 to 32x32 inputs.

Every model takes ``in_channels``, ``num_classes`` and ``input_size`` (the side of a square
input image) and returns class logits of shape (N, num_classes). They are built only from
``minigpu.nn`` layers, so each runs unchanged on ``"cpu"`` and ``"cuda"`` and its
``state_dict`` keys follow PyTorch's naming.

==============  =========================================================================
LeNet5          two 5x5 convolutions + pooling, three fully connected layers (1998)
AlexNet         five 3x3 convolutions, three max-pools, dropout MLP head (2012)
VGG             stacks of 3x3 convolutions between 2x2 max-pools, from a ``cfg`` list (2014)
ResNet          BasicBlocks ``relu(F(x) + shortcut(x))``: residual addition (2015)
GoogLeNet       Inception blocks: four parallel branches joined by ``minigpu.cat`` (2014)
==============  =========================================================================
"""
from .alexnet import AlexNet
from .googlenet import GoogLeNet, Inception
from .lenet import LeNet5
from .resnet import BasicBlock, ResNet, resnet8, resnet14
from .vgg import VGG, VGG_CFGS, vgg

__all__ = ["LeNet5", "AlexNet", "VGG", "VGG_CFGS", "vgg", "ResNet", "BasicBlock", "resnet8",
           "resnet14", "GoogLeNet", "Inception"]
