"""The outside kernel corpus (``tools/outside/kernel_corpus.py``) and the simulator fixes it
led to, each tested with a kernel of our own showing the pattern."""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda  # noqa: E402

import minigpu  # noqa: E402,F401  (installs the simulator)
from minigpu.cuda import OutOfBoundsError  # noqa: E402
from minigpu.simulator import config  # noqa: E402

OUTSIDE = Path(__file__).resolve().parents[1] / "tools" / "outside"

pytestmark = [pytest.mark.skipif(not cuda.config.ENABLE_CUDASIM, reason="tests the simulator"),
              pytest.mark.skipif(not config.CHECKS, reason="MINIGPU_SIM_CHECKS=0")]


@cuda.jit
def fail_while_holding_a_lock(out, lock, x):
    while cuda.atomic.cas(lock, 0, 0, 1) != 0:
        pass                                  # the other threads spin here
    out[0] = x[cuda.threadIdx.x + 31]         # thread 1 reads past the end, lock held
    cuda.atomic.exch(lock, 0, 0)


def test_threads_spinning_on_a_lock_whose_holder_failed_end_with_its_error():
    """A thread that fails while holding a spin lock never releases it; the launch must end
    with that thread's error, not spin for ever (DataRaceBench's DRB144 hung so)."""
    with pytest.raises(OutOfBoundsError, match="index 32"):
        fail_while_holding_a_lock[1, 8](np.zeros(1, np.float32), np.zeros(1, np.int32),
                                         np.zeros(32, np.float32))


def test_every_case_has_a_source_a_label_and_every_known_disagreement_a_case():
    sys.path.insert(0, str(OUTSIDE))
    try:
        import kernel_corpus
        from corpus import BUGS, SOURCES, load
        cases = load()
    finally:
        sys.path.remove(str(OUTSIDE))
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)) >= 60
    assert {c.source for c in cases} == set(SOURCES)
    assert all(c.label in ("clean", *BUGS) for c in cases)
    assert set(kernel_corpus.KNOWN) <= set(ids)
