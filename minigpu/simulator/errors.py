"""The errors the simulator raises. Pure Python (no Numba import): ``minigpu.cuda`` re-exports
them, so ``except minigpu.cuda.RaceError`` works whether or not the simulator is running."""


class SimulatorError(RuntimeError):
    """A kernel did something that is wrong (or undefined) on a real GPU, caught by the
    simulator's checks. The message names the kernel, the array, the index and shape, the
    thread and block, and the source line (for a race: both accesses)."""


class RaceError(SimulatorError):
    """racecheck: two threads touch one element, at least one of them writes, and nothing
    (a barrier, a ``syncwarp``, kernel boundaries) orders the two accesses."""


class OutOfBoundsError(SimulatorError, IndexError):
    """memcheck: an index outside ``[0, shape)`` of a global, shared or local array
    (negative indices included: Numba wraps them silently, a kernel almost never means it)."""


class UninitializedReadError(SimulatorError):
    """initcheck: a read of an element that nothing has written since it was allocated
    (shared memory, a local array, or device memory from ``cuda.device_array*``/minigpu)."""


class SyncError(SimulatorError):
    """synccheck: a barrier or warp intrinsic used in a way that hangs or is undefined on a
    real GPU (divergent ``syncthreads``, a deadlock, mismatched warp masks)."""


class LaunchConfigError(SimulatorError, ValueError):
    """A launch that every GPU refuses: too many threads per block, a grid or block dimension
    over its limit, more than 48 KiB of static shared memory, or a shared/local array whose
    shape is not a compile-time constant."""


__all__ = ["SimulatorError", "RaceError", "OutOfBoundsError", "UninitializedReadError",
           "SyncError", "LaunchConfigError"]
