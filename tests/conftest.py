"""Test set-up: the CUDA simulator unless a real GPU is asked for, and hypothesis profiles.

``NUMBA_ENABLE_CUDASIM`` must be set before numba is first imported, so it is set here, at the
top of the first module pytest loads. Run with ``NUMBA_ENABLE_CUDASIM=0`` on a machine with a
GPU to run the same tests on the hardware.
"""
import atexit
import os
import shutil
import tempfile

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
# no background compiles (docs/simulator.md, "The compiled path"): the suite's kernels stay on
# the checked path, whose proof it is, and its CPUs run tests, not compilers
os.environ.setdefault("MINIGPU_SIM_BACKGROUND", "0")
# the compiled path's disk cache: each test run starts empty, as on a fresh machine (the
# xdist workers inherit the folder; the process that made it removes it at exit)
if "MINIGPU_SIM_CACHE" not in os.environ:
    os.environ["MINIGPU_SIM_CACHE"] = tempfile.mkdtemp(prefix="minigpu-sim-cache-")
    atexit.register(shutil.rmtree, os.environ["MINIGPU_SIM_CACHE"], ignore_errors=True)

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "sim", max_examples=8, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", max_examples=100, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "sim"))

SIMULATOR = os.environ["NUMBA_ENABLE_CUDASIM"] == "1"


def pytest_collection_modifyitems(config, items):
    if SIMULATOR:
        skip = pytest.mark.skip(reason="needs a real CUDA GPU (NUMBA_ENABLE_CUDASIM=1 is set)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
