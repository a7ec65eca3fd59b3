"""The CUDA backend: every primitive of ``contract.py`` as Numba ``@cuda.jit`` kernels.

One kernel family per file; this module only gathers the public primitives. Under
``NUMBA_ENABLE_CUDASIM=1`` the same kernels run on Numba's CUDA simulator, which
``import minigpu`` has already upgraded into a sanitizer (``minigpu/simulator/``).
"""
from .device import SIMULATOR, empty, is_available, synchronize  # noqa: E402
from .memory import assign_, cast, contiguous, from_numpy, full, to_numpy  # noqa: E402
from .elementwise import binary, unary, where  # noqa: E402
from .reduce import argreduce, reduce  # noqa: E402
from .matmul import matmul  # noqa: E402
from .softmax import softmax, softmax_backward  # noqa: E402
from .conv import col2im, im2col  # noqa: E402
from .pool import avgpool2d, avgpool2d_backward, maxpool2d, maxpool2d_backward  # noqa: E402
from .indexing import gather, index_add, index_select, scatter  # noqa: E402
from .lstm import lstm_cell, lstm_cell_backward  # noqa: E402
from .optim import adam_step_, sgd_step_  # noqa: E402
from .optim import adagrad_step_, adamw_step_, rmsprop_step_  # noqa: E402
from .random import random_normal, random_uniform  # noqa: E402
from .layernorm import layer_norm, layer_norm_backward  # noqa: E402
from .scan import masked_scatter, masked_select, scan  # noqa: E402
from .indexing import gather_dim, scatter_add_dim  # noqa: E402
from .sort import sort  # noqa: E402
from .attention import attention, attention_backward  # noqa: E402

name = "cuda"
