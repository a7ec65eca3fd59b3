"""minigpu: a small, readable GPU deep-learning engine with a PyTorch-shaped API.

    import minigpu as mg
    x = mg.randn(4, 3, device="cuda", requires_grad=True)
    (x @ x.T).relu().sum().backward()

``device="cuda"`` runs Numba CUDA kernels (on Numba's simulator when NUMBA_ENABLE_CUDASIM=1);
``device="cpu"`` runs the NumPy reference backend.
"""
import os as _os

if _os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":  # kernels will run on Numba's simulator:
    from .simulator import install as _install     # make it the sanitizer (minigpu/simulator)

    _install()

from . import (accelerator, backends, cuda, datasets, nn, onnx, optim, profiler, serialization,
               utils)
from .autograd import (Function, enable_grad, inference_mode, is_grad_enabled, no_grad,
                       set_grad_enabled)
from .creation import (arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like,
                       linspace, ones, ones_like, rand, rand_like, randint, randn, randn_like,
                       randperm, tensor, zeros, zeros_like)
from .ops import (abs, argmax, argmin, bmm, cat, chunk, clamp, clip, exp, flatten,
                  index_select, log, log_softmax, matmul, max, maximum, mean, min, minimum, mm,
                  permute, relu, reshape, sigmoid, softmax, split, sqrt, squeeze, stack, std,
                  sum, tanh, transpose, unsqueeze, var, where)
from .ops import (ceil, cos, expm1, floor, floor_divide, isinf, isnan, log1p, remainder,
                  round, sign, sin, trunc)
from .ops import einsum
from .interop import from_dlpack
from .ops import allclose, cumprod, cumsum, gather, masked_select, norm, prod, scatter_add
from .ops import argsort, sort, topk
from .ops import amax, amin, dot, flip, logsumexp, nonzero, tril, triu, unique
from .ops import add, div, masked_fill, mul, neg, pow, rsqrt, square, sub
from .random import Generator, default_generator, initial_seed, manual_seed
from .serialization import load, save
from .tensor import Device, Size, Tensor, bool_ as bool, device, float32
from .tensor import float64, int64, long
from .tensor_types import BoolTensor, DoubleTensor, FloatTensor, LongTensor
from .tensor_types import channels_last, contiguous_format, memory_format, preserve_format

float = float32


def is_tensor(obj) -> bool:
    """True for a minigpu Tensor (or a Parameter)."""
    return isinstance(obj, Tensor)

double = float64

__version__ = "0.1.0"

# Hand-over to PyTorch and back (issue 26): minigpu.to_torch(model), minigpu.from_torch(model).
from .handover import from_torch, to_torch  # noqa: E402
