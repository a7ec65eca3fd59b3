"""How :func:`minigpu.simulator.install` patches Numba's CUDA simulator: :func:`check` that its
internals are the expected ones, then :func:`apply` the sanitizer's parts over them (the launch,
checked arrays, simulated threads and barriers, warp intrinsics). Imported only under
``NUMBA_ENABLE_CUDASIM=1``: the parts import Numba.
"""
from __future__ import annotations

import os

from . import blocks, ieee, launch, memory, sites, warp

SUPPORTED = (0, 30)  # numba-cuda major.minor whose simulator internals this patch targets


def check():
    """None if the simulator's internals are the ones this patch expects, else why not."""
    from numba.cuda.simulator import args as args_mod, kernel as kernel_mod, kernelapi
    from numba.cuda.simulator.cudadrv import devicearray
    try:
        from importlib.metadata import version
        v = version("numba-cuda")
    except Exception:  # pragma: no cover - not installed as a distribution
        v = "unknown"
    if tuple(int(p) for p in v.split(".")[:2] if p.isdigit()) != SUPPORTED:
        return f"numba-cuda {v} is installed; this patch targets {SUPPORTED[0]}.{SUPPORTED[1]}.x"
    for owner, names in ((kernel_mod, ("FakeCUDAKernel", "_push_kernel_context",
                                       "_get_kernel_context")),
                         (kernelapi, ("FakeCUDAModule", "FakeCUDAShared", "FakeCUDALocal",
                                      "FakeCUDAAtomic", "FakeCUDAConst", "Dim3", "types",
                                      "numpy_support",
                                      "GridGroup")),
                         (devicearray, ("FakeCUDAArray", "FakeWithinKernelCUDAArray",
                                        "device_array")),
                         (args_mod, ("InOut", "ArgHint"))):
        for name in names:
            if not hasattr(owner, name):
                return f"{owner.__name__}.{name} is missing"
    k = kernel_mod.FakeCUDAKernel(lambda: None, device=False)
    shared = kernelapi.FakeCUDAShared(0)
    for obj, name in ((k, "fn"), (k, "_device"), (k, "_debug"), (k, "grid_dim"),
                      (k, "block_dim"), (k, "dynshared_size"), (k, "extensions"),
                      (shared, "_allocations"), (shared, "_dynshared"),
                      (shared, "_dynshared_size")):
        if not hasattr(obj, name):
            return f"{type(obj).__name__}.{name} is missing"
    return None



def apply(cuda, _set):
    """Patch the simulator of ``cuda`` (``numba.cuda``); ``_set(owner, name, value)`` sets an
    attribute and remembers the original for :func:`minigpu.simulator.uninstall`."""
    import numba.cuda.simulator as simpkg
    from numba.cuda.simulator import api, args as args_mod, kernel as kernel_mod, kernelapi
    from numba.cuda.simulator.cudadrv import devicearray

    blocks.Dim3 = kernelapi.Dim3
    memory.kernelapi = kernelapi
    launch._sim = (kernel_mod, kernelapi, devicearray, args_mod)
    launch._cuda = cuda
    launch.compiled.bind(cuda, kernel_mod.FakeCUDAKernel)
    sites.skip_dir(os.path.dirname(kernel_mod.__file__) + os.sep)
    _set(kernel_mod.FakeCUDAKernel, "__call__", launch.launch)
    _set(kernel_mod.FakeCUDAKernel, "overloads", property(launch.overloads))
    _set(kernel_mod.FakeCUDAKernel, "forall", launch.forall)
    _set(kernel_mod.FakeCUDAKernel, "configure", launch.configure)
    _set(kernelapi.GridGroup, "sync", lambda self: blocks.current().grid_sync())
    # stock computes a ** (1/3): nan for a negative a, where a GPU gives the real cube root
    _set(kernelapi.FakeCUDAModule, "cbrt", lambda self, a: ieee.MATH.cbrt(a))
    _set(cuda, "__getattr__", launch.cuda_module_getattr)
    for name, member in vars(blocks.ThreadAPI).items():
        if not name.startswith("_"):
            _set(kernelapi.FakeCUDAModule, name, member)
    stock_jit = api.jit
    jit = launch.jit_recording_signature(stock_jit)
    for owner in (api, simpkg, cuda):
        if getattr(owner, "jit", None) is stock_jit:
            _set(owner, "jit", jit)
    _set(kernelapi.FakeCUDAShared, "array", memory.shared_array)
    _set(kernelapi.FakeCUDALocal, "array", memory.local_array)
    _set(kernelapi.FakeCUDAConst, "array_like", memory.const_array)
    for name, fn in vars(memory.Atomics).items():
        if callable(fn) and not name.startswith("_"):
            _set(kernelapi.FakeCUDAAtomic, name, fn)
    for name, fn in vars(warp.WarpIntrinsics).items():
        if callable(fn) and not name.startswith("_"):
            _set(kernelapi.FakeCUDAModule, name, fn)
    stock_device_array = devicearray.device_array

    def device_array(*args, **kwargs):
        """``cuda.device_array`` (simulated): uninitialised, so filled with the poison."""
        arr = stock_device_array(*args, **kwargs)
        memory.fill_poison(arr._ary)
        return arr

    for owner in (devicearray, simpkg, cuda):
        if getattr(owner, "device_array", None) is stock_device_array:
            _set(owner, "device_array", device_array)
    for name in ("as_cuda_array", "is_cuda_array"):
        for owner in (simpkg, cuda):
            if not hasattr(owner, name):
                _set(owner, name, getattr(launch, name))
