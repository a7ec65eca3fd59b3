"""``minigpu.nn``: layers with PyTorch's names, signatures, defaults and state_dict keys."""
from . import functional, init, parallel, utils
from .layers import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv2d, Dropout,
                     Dropout2d, Flatten, Identity, LeakyReLU, Linear, LogSoftmax, MaxPool2d,
                     NonDynamicallyQuantizableLinear, ReLU, Sigmoid, Softmax, Tanh)
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, MSELoss, NLLLoss
from .loss import HuberLoss, KLDivLoss, L1Loss, SmoothL1Loss
from .containers import ModuleDict
from .normalization import *  # noqa: F401,F403  (every layer of the file: its __all__)
from .activation import *  # noqa: F401,F403
from .conv import Conv1d, ConvTranspose2d
from .upsampling import Upsample
from .module import Module, ModuleList, Parameter, Sequential
from .parallel import DataParallel
from .rnn import GRU, LSTM, RNN, Embedding, GRUCell, LSTMCell, RNNCell
from .attention import MultiheadAttention
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)
from . import modules  # noqa: E402  (PyTorch's module paths: torch.nn.modules.loss, ...)
