"""DataLoader(num_workers > 0): worker processes (started with the platform's default
method, 'fork' on Linux, as PyTorch does), their seeding, get_worker_info, worker_init_fn,
persistent_workers, prefetch_factor, errors, and no process left behind."""
import gc
import multiprocessing
import os
import random

import numpy as np
import pytest

import minigpu as mg
from minigpu.utils.data import DataLoader, Dataset, TensorDataset, get_worker_info


class Probe(Dataset):
    """Sample i: (i, worker id, pid, a draw of Python's random and of minigpu's generator)."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return {"i": i, "worker": -1 if info is None else info.id, "pid": os.getpid(),
                "random": random.random(), "mg": float(mg.rand(1).item()),
                "init": os.environ.get("PROBE_INIT", "")}


class Failing(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise ValueError("sample 5 is broken")
        return i


def assert_no_workers_left():
    gc.collect()
    for child in multiprocessing.active_children():
        child.join(timeout=5)
    assert multiprocessing.active_children() == []


def test_workers_give_the_same_batches_in_the_same_order():
    data = TensorDataset(mg.arange(20).float().reshape(10, 2), mg.arange(10))
    mg.manual_seed(5)
    main = [[t.numpy().tolist() for t in b] for b in DataLoader(data, 3, shuffle=True)]
    mg.manual_seed(5)
    workers = [[t.numpy().tolist() for t in b]
               for b in DataLoader(data, 3, shuffle=True, num_workers=2)]
    assert workers == main
    assert_no_workers_left()


def test_each_worker_is_seeded_and_knows_itself():
    def init(worker_id):
        os.environ["PROBE_INIT"] = f"ran in {worker_id}"

    assert get_worker_info() is None
    mg.manual_seed(0)
    batches = list(DataLoader(Probe(), batch_size=2, num_workers=2, worker_init_fn=init))
    assert [b["i"].tolist() for b in batches] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [b["worker"].tolist() for b in batches] == [[0, 0], [1, 1], [0, 0], [1, 1]]
    assert [b["init"] for b in batches] == [["ran in 0"] * 2, ["ran in 1"] * 2] * 2
    assert len({int(p) for b in batches for p in b["pid"]} - {os.getpid()}) == 2
    draws = [v for b in batches for v in b["random"].tolist()]
    assert len(set(draws)) == 8  # the two workers' generators differ
    mg.manual_seed(0)
    again = list(DataLoader(Probe(), batch_size=2, num_workers=2, worker_init_fn=init))
    assert [v for b in again for v in b["random"].tolist()] == draws  # and are seeded
    assert [b["mg"].tolist() for b in again] == [b["mg"].tolist() for b in batches]
    assert_no_workers_left()


def test_worker_info_seed_is_base_seed_plus_id():
    class Seeds(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return get_worker_info().seed

    seeds = [int(s) for b in DataLoader(Seeds(), batch_size=1, num_workers=2) for s in b]
    assert seeds[1] - seeds[0] == 1 and seeds[2] == seeds[0] and seeds[3] == seeds[1]


def test_persistent_workers_live_across_epochs():
    loader = DataLoader(Probe(), batch_size=4, num_workers=2, persistent_workers=True,
                        prefetch_factor=1)
    pids = [{int(p) for b in loader for p in b["pid"]} for _ in range(2)]
    assert pids[0] == pids[1] and len(pids[0]) == 2
    for _ in loader:  # an epoch abandoned half-way
        break
    assert {int(p) for b in loader for p in b["pid"]} == pids[0]
    loader._workers.shutdown()
    assert_no_workers_left()


def test_an_error_in_a_worker_is_raised_in_the_main_process():
    with pytest.raises(ValueError, match="Caught ValueError in DataLoader worker process 1"
                                         "(.|\n)*sample 5 is broken"):
        list(DataLoader(Failing(), batch_size=1, num_workers=2))
    assert_no_workers_left()


def test_a_worker_that_dies_is_reported():
    class Dies(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            os._exit(3)

    with pytest.raises(RuntimeError, match="DataLoader worker .* exited unexpectedly"):
        list(DataLoader(Dies(), batch_size=1, num_workers=1))
    assert_no_workers_left()


def test_break_and_interrupt_leave_no_process():
    loader = DataLoader(Probe(), batch_size=1, num_workers=2)
    for _ in loader:
        break
    assert_no_workers_left()
    with pytest.raises(KeyboardInterrupt):
        for _ in loader:
            raise KeyboardInterrupt
    assert_no_workers_left()


def test_worker_options_are_checked_as_torch_does():
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        DataLoader(Probe(), num_workers=-1)
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified"):
        DataLoader(Probe(), prefetch_factor=2)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(Probe(), persistent_workers=True)
    assert DataLoader(Probe(), num_workers=2).prefetch_factor == 2


def test_pinned_batches_from_workers():
    if not mg.cuda.is_available():
        pytest.skip("pin_memory needs the cuda device (or the simulator)")
    from minigpu.utils.data import is_pinned
    data = TensorDataset(mg.arange(6).float())
    batches = list(DataLoader(data, batch_size=3, num_workers=1, pin_memory=True))
    assert all(is_pinned(b[0]) for b in batches)
    np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in batches]), np.arange(6))
