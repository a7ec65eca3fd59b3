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
from minigpu.cuda import OutOfBoundsError, RaceError, SyncError  # noqa: E402
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


def corpus():
    sys.path.insert(0, str(OUTSIDE))
    try:
        import kernel_corpus
        from corpus import BUGS, SOURCES, load
        return kernel_corpus, BUGS, SOURCES, load()
    finally:
        sys.path.remove(str(OUTSIDE))


def test_every_case_has_a_source_a_label_and_every_known_disagreement_a_case():
    kernel_corpus, BUGS, SOURCES, cases = corpus()
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)) >= 60
    assert {c.source for c in cases} == set(SOURCES)
    assert all(c.label in ("clean", *BUGS) for c in cases)
    assert set(kernel_corpus.KNOWN) <= set(ids)


@cuda.jit(device=True)
def take(lock, fenced):
    while cuda.atomic.cas(lock, 0, 0, 1) != 0:
        pass
    if fenced:
        cuda.threadfence()


@cuda.jit(device=True)
def give_back(lock, fenced):
    if fenced:
        cuda.threadfence()
    cuda.atomic.exch(lock, 0, 0)


@cuda.jit
def count_under_a_lock(total, lock, fenced):
    take(lock, fenced)
    total[0] += 1                             # a plain read-modify-write, one thread at a time
    give_back(lock, fenced)


@cuda.jit
def hand_on_a_ticket(out, turn, fenced):
    i = cuda.grid(1)
    while cuda.atomic.add(turn, 0, 0) != i:   # wait for the previous thread's ticket
        pass
    if fenced:
        cuda.threadfence()
    out[i + 1] = out[i] + 1                   # reads what the previous thread wrote
    if fenced:
        cuda.threadfence()
    cuda.atomic.add(turn, 0, 1)


def test_a_fenced_spin_lock_orders_its_critical_sections_across_blocks():
    """A lock taken with atomic.cas and given back with atomic.exch, threadfence inside: the
    CUDA memory model orders each critical section after the one before (DataRaceBench's
    DRB152 translated; it used to be reported as a race)."""
    total = np.zeros(1, np.int32)
    count_under_a_lock[3, 16](total, np.zeros(1, np.int32), True)
    assert total[0] == 48


def test_a_spin_lock_without_fences_still_races():
    with pytest.raises(RaceError, match="total"):
        count_under_a_lock[3, 16](np.zeros(1, np.int32), np.zeros(1, np.int32), False)


def test_a_ticket_handed_on_through_fences_and_atomics_orders_the_threads():
    out = np.zeros(65, np.int32)
    hand_on_a_ticket[1, 64](out, np.zeros(1, np.int32), True)
    assert (out == np.arange(65)).all()
    with pytest.raises(RaceError, match="out"):
        hand_on_a_ticket[1, 64](np.zeros(65, np.int32), np.zeros(1, np.int32), False)


def test_the_barriers_volta_completes_are_reported_in_strict_mode(monkeypatch):
    """The corpus's known misses of GPUVerify's barrier-divergence cases: a barrier that the
    other half of the block never reaches (it exits) completes on Volta and later GPUs and by
    default here; strict mode reports it, as the list of known disagreements says."""
    cases = {c.id: c for c in corpus()[3]}
    for name in ("gpuverify:cg_divergence_grid_group", "gpuverify:cg_divergence_thread_block"):
        monkeypatch.setattr(config, "STRICT", False)
        cases[name].run()
        monkeypatch.setattr(config, "STRICT", True)
        with pytest.raises(SyncError, match="Volta"):
            cases[name].run()
