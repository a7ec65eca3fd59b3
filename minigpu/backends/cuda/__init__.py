"""The CUDA backend: every primitive of ``contract.py`` as Numba ``@cuda.jit`` kernels.

One kernel family per file. This module gathers the primitives from the family modules
(``contract.gather``: each is defined in exactly one; a new family file needs no import line
here). Under ``NUMBA_ENABLE_CUDASIM=1`` the same kernels run on Numba's CUDA simulator, which
``import minigpu`` has already upgraded into a sanitizer (``minigpu/simulator/``).
"""
from .. import contract
from .device import SIMULATOR, is_available  # noqa: F401

globals().update(contract.gather(__name__))

name = "cuda"
