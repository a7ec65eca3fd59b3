"""Helpers for tests that check performance through the simulator's counters
(``minigpu.cuda.counters()``): performance-only bugs (a lost padding column, an uncoalesced
load) leave every output identical, so only the counters can catch them."""
import minigpu.cuda


def kernel_metrics(run, name):
    """The metrics dict of the one launch of a kernel whose name contains ``name`` made by
    ``run()``."""
    with minigpu.cuda.counters() as launches:
        run()
    found = [launch for launch in launches if name in launch.name]
    assert len(found) == 1, f"expected one {name} launch, got {[l.name for l in launches]}"
    return found[0].metrics
