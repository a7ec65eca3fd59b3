"""``minigpu.nn.modules``: the layers under PyTorch's module paths, so that
``from torch.nn.modules.loss import _Loss`` or ``import torch.nn.modules.conv`` runs with
``minigpu`` in place of ``torch``.

minigpu groups its layers in its own files (``nn/layers.py``, ``nn/loss.py``, ...); this
package only maps PyTorch's file names to them: each ``minigpu.nn.modules.<file>`` is a small
module holding the classes PyTorch keeps in ``torch/nn/modules/<file>.py`` (those minigpu has),
the very same objects as ``minigpu.nn.<Name>``.
"""
from __future__ import annotations

import sys
import types

from .. import activation as _activation
from .. import loss as _loss_module
from .. import normalization as _normalization

_nn = sys.modules[__name__.rpartition(".")[0]]  # minigpu.nn, imported before this package

TORCH_FILES = {
    "module": ["Module"],
    "linear": ["Linear", "Identity", "NonDynamicallyQuantizableLinear"],
    "conv": ["Conv1d", "Conv2d", "ConvTranspose2d"],
    "pooling": ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d"],
    "batchnorm": ["BatchNorm1d", "BatchNorm2d"],
    "normalization": list(_normalization.__all__),  # LayerNorm, GroupNorm: as torch's file
    "dropout": ["Dropout", "Dropout2d"],
    "flatten": ["Flatten"],
    "activation": ["ReLU", "LeakyReLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax",
                   "MultiheadAttention", *_activation.__all__],  # + every layer of nn/activation.py
    "loss": ["_Loss", "_WeightedLoss", "MSELoss", "BCELoss", "BCEWithLogitsLoss", "NLLLoss",
             "CrossEntropyLoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "KLDivLoss"],
    "container": ["Sequential", "ModuleList", "ModuleDict"],
    "rnn": ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"],
    "sparse": ["Embedding"],
    "upsampling": ["Upsample"],
    "transformer": ["Transformer", "TransformerEncoder", "TransformerDecoder",
                    "TransformerEncoderLayer", "TransformerDecoderLayer"],
}
"""PyTorch's file (``torch/nn/modules/<file>.py``) -> the names minigpu has from it."""


def _lookup(name):
    for home in (_nn, _loss_module):  # the loss bases are private to nn/loss.py
        if hasattr(home, name):
            return getattr(home, name)
    raise AttributeError(name)


__all__ = []
for _file, _names in TORCH_FILES.items():
    _sub = types.ModuleType(f"{__name__}.{_file}", f"PyTorch's torch.nn.modules.{_file}: "
                                                   f"{', '.join(_names)}")
    for _name in _names:
        setattr(_sub, _name, _lookup(_name))
        globals()[_name] = getattr(_sub, _name)
    _sub.__all__ = list(_names)
    sys.modules[_sub.__name__] = _sub
    globals()[_file] = _sub
    __all__ += [n for n in _names if not n.startswith("_")]
del _file, _names, _sub, _name
