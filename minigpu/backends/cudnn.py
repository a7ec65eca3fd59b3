"""``minigpu.backends.cudnn``: the flags of ``torch.backends.cudnn``, so that programs which
set them (``cudnn.benchmark = True``, ``cudnn.deterministic = True``) run unchanged.

minigpu does not use cuDNN: its convolutions are its own kernels (im2col and a tiled matmul,
``backends/cuda/conv.py``), always the same algorithm, and deterministic (no atomics in their
reductions). So ``is_available()`` is False, ``version()`` is None, and the flags are plain
module attributes, kept with PyTorch's defaults, that change nothing.
"""
enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10


def is_available() -> bool:
    """False: minigpu does not use cuDNN (see the module docstring)."""
    return False


def version():
    """None, as torch says when cuDNN is not available."""
    return None
