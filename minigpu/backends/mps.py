"""``minigpu.backends.mps``: Apple's Metal device, which minigpu does not have (programs ask
``torch.backends.mps.is_available()`` to choose a device)."""


def is_available() -> bool:
    """False: minigpu's devices are ``cpu`` and ``cuda``."""
    return False


def is_built() -> bool:
    """False: minigpu has no Metal backend."""
    return False
