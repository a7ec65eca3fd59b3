"""The static kernel report's marker, written beside each kernel.

``python -m minigpu.tools.kernel_report`` compiles every production kernel for sm_90. It finds
them here, not in a list of its own: each ``@cuda.jit`` kernel, or each factory that builds
kernels, carries ``@reported(specs)``, where ``specs(kernel, x)`` returns the specialisations
to compile, as :class:`KernelSpec`\\ s named without the module (``reduce.py`` says
``row[sum,256]``, the report shows ``reduce.row[sum,256]``). ``kernel`` is the marked object
itself (the kernel, or the factory to call), ``x`` the example arguments :data:`EXAMPLES`,
whose NumPy types form the compiled signatures. The report imports every module of this
package, collects the marks, and refuses to run when a ``@cuda.jit`` kernel of a module is
compiled by none of them.

Nothing here runs at import: ``specs`` is called by the report only.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np

from .device import BLOCK

MARK = "__kernel_report__"


class KernelSpec(NamedTuple):
    """One kernel for the static report: ``args`` are example arguments whose Numba types form
    the compiled signature (NumPy arrays stand in for device arrays: they type the same)."""

    name: str
    kernel: Any          # a numba.cuda dispatcher
    args: tuple
    block: int           # threads per block of the launch
    dtype: str = "float32"
    ffma_lds: str = ""   # 'report': the inner-loop FFMA : LDS ratio; 'goal': also check >= 4
    f64_reason: str = ""  # why float64 instructions are expected in this float32 kernel

    @property
    def family(self):
        return self.name.split(".", 1)[0]


_F32 = np.dtype(np.float32)
EXAMPLES = SimpleNamespace(
    f32=_F32,                          # the dtype a factory takes
    f=np.zeros(1, _F32),               # float32[::1]
    f2=np.zeros((1, 1), _F32),         # float32[:, ::1]
    h=np.zeros(1, np.float16),         # float16[::1]
    i64=np.zeros(1, np.int64),         # int64[::1]
    b8=np.zeros(1, np.bool_),          # bool[::1]
    s=np.float32(0),                   # a float32 scalar
    u32=np.uint32(0),                  # a uint32 scalar (random seeds)
    **{f"t{k}": (1,) * k for k in (2, 3, 4, 6, 8)},  # int64 tuples
    block=BLOCK,                       # threads per block of a launch_1d on a GPU
)
"""Example arguments for the specialisations of :func:`reported`."""


def reported(specs):
    """Mark a kernel, or a kernel factory, for the static report: ``specs(kernel, x)`` returns
    the :class:`KernelSpec`\\ s to compile (see the module docstring)."""
    def mark(obj):
        setattr(obj, MARK, specs)
        return obj

    return mark
