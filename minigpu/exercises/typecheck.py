"""Layer (c) without the CUDA toolchain: the kernels typed and lowered for the CUDA target.

When NVVM or ptxas is missing the grader cannot compile for sm_90, but Numba's front end needs
neither: it types a kernel for the CUDA target and lowers it to LLVM IR with llvmlite (only
the IR's data layout and version tag come from NVVM, and they are constants). So even then a
kernel is refused here when a GPU build would refuse it:

* it does not type for the CUDA target (a Python list built in the kernel,
  ``sum([tile[t], ...])``, an unsupported call): Numba's ``TypingError`` is the message;
* it computes in float64 in a float32 exercise: the IR, optimised by LLVM's O3 pipeline for
  NVPTX (as NVVM would, folding ``v > 0`` to a float32 compare), still holds float64
  arithmetic (``x * 0.1`` promotes ``x`` to float64).

What this cannot say without ptxas (registers, spills, occupancy) the grader reports as not
checked. Runs in the grader's process without the simulator (``python -m minigpu.exercises
static``).
"""
from __future__ import annotations

import re

# float64 arithmetic, comparisons, conversions to it and calls returning it, in LLVM IR
_FLOAT64 = re.compile(r"= (fadd|fsub|fmul|fdiv|frem|fneg|fcmp \w+)( \w+)* double\b"
                      r"|= (fpext|sitofp|uitofp) \S+ \S+ to double\b|= call( \w+)* double @")


class _NVVMConstants:
    """Stands in for ``numba.cuda.cudadrv.nvvm.NVVM`` when libNVVM is absent: lowering asks it
    only for the data layout (a constant of numba-cuda) and the NVVM IR version tag."""

    def __init__(self):
        from numba.cuda.cudadrv import nvvm
        self.data_layout = nvvm._datalayout

    def get_ir_version(self):
        return (2, 0, 3, 1)


def _without_nvvm():
    from numba.cuda.cudadrv import nvvm
    if not nvvm.is_available():
        nvvm.NVVM = _NVVMConstants


def _optimised(library):
    """The kernel's LLVM IR with every device function it calls, after LLVM's O3 for NVPTX."""
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    modules = [llvm.parse_assembly(str(m)) for m in library.modules]
    for extra in modules[1:]:
        modules[0].link_in(extra)
    machine = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(
        cpu="sm_90", opt=3)
    passes = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(
        speed_level=3))
    passes.getModulePassManager().run(modules[0], passes)
    return str(modules[0])


def float64_lines(kernel, args, cc, device):
    """The LLVM IR lines computing in float64 when ``kernel`` is typed for the CUDA target of
    compute capability ``cc`` with the types of ``args``; raises Numba's error when it does
    not type. ``device`` answers for the current device (a driver may be absent), as in
    :mod:`minigpu.tools.kernel_report`."""
    import numba
    from numba.cuda import dispatcher
    from numba.cuda.compiler import compile_cuda

    _without_nvvm()
    sig = tuple(a if isinstance(a, numba.types.Type) else numba.typeof(a) for a in args)
    real = dispatcher.get_current_device
    dispatcher.get_current_device = device
    try:
        cres = compile_cuda(kernel.py_func, numba.types.void, sig, cc=cc)
    finally:
        dispatcher.get_current_device = real
    lines = [line.strip() for line in _optimised(cres.library).splitlines()
             if _FLOAT64.search(line)]
    return sorted(lines, key=lambda line: " to double" in line)   # arithmetic first
