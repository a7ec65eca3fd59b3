"""Helpers for tests that check performance through the simulator's counters
(``minigpu.cuda.counters()``, issue 13): performance-only bugs (a lost padding column, an
uncoalesced load) leave every output identical, so only the counters can catch them. The tests
skip, saying why, only while ``minigpu.cuda`` has no ``counters`` (before issue 13 is merged)."""
import pytest

import minigpu.cuda

needs_counters = pytest.mark.skipif(
    not hasattr(minigpu.cuda, "counters"),
    reason="minigpu.cuda.counters() (issue 13) is not merged yet: the performance-only bugs "
           "(lost padding, uncoalesced loads) go unchecked until it is")


def kernel_metrics(run, name):
    """The metrics dict of the one launch of a kernel whose name contains ``name`` made by
    ``run()``."""
    with minigpu.cuda.counters() as launches:
        run()
    found = [launch for launch in launches if name in launch.name]
    assert len(found) == 1, f"expected one {name} launch, got {[l.name for l in launches]}"
    return found[0].metrics
