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

from . import (accelerator, amp, backends, cuda, datasets, nn, onnx, optim, profiler, serialization,
               utils)
from .autograd import (Function, enable_grad, inference_mode, is_grad_enabled, no_grad,
                       set_grad_enabled)
from .creation import (arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like,
                       linspace, ones, ones_like, rand, rand_like, randint, randn, randn_like,
                       randperm, tensor, zeros, zeros_like)
from .graphs import compile
from .interop import from_dlpack
from .ops.out import exported_with_out as _exported_with_out
from .random import Generator, default_generator, initial_seed, manual_seed, seed
from .serialization import load, save
from .amp import autocast
from .dtypes import promote_types, result_type
from .tensor import Device, Size, Tensor, bool_ as bool, device, float16, float32, float64
from .tensor import int8, int16, int32, int64, long, uint8
from .tensor import channels_last, contiguous_format, memory_format, preserve_format
from .tensor_types import BoolTensor, DoubleTensor, FloatTensor, LongTensor

globals().update(_exported_with_out())  # the ops marked @op(mg=True): minigpu.exp, minigpu.cat, ...

float = float32


def is_tensor(obj) -> bool:
    """True for a minigpu Tensor (or a Parameter)."""
    return isinstance(obj, Tensor)

double = float64
half = float16
short = int16
int = int32  # last: from here on ``int`` in this module is torch.int

__version__ = "0.1.0"

# Hand-over to PyTorch and back (issue 26): minigpu.to_torch(model), minigpu.from_torch(model).
from .handover import from_torch, to_torch  # noqa: E402
