"""Samplers, the DataLoader's sampler arguments and torch's submodule paths of
``minigpu.utils.data``.

Datasets are ``range(n)`` (sample i is i), which both accept. The deterministic parts (SequentialSampler, BatchSampler, DistributedSampler without shuffle,
IterableDataset batching, ConcatDataset, the argument errors) are compared with torch's
directly. The random samplers draw from minigpu's generator, not torch's Mersenne Twister, so
they are tested on their semantics with fixed seeds: permutations, coverage, reproducibility,
and frequencies within five standard deviations of the expected counts.
"""
import itertools
import re

import numpy as np
import pytest

import minigpu as mg
from minigpu.utils.data import (BatchSampler, ConcatDataset, DataLoader,
                                DistributedSampler, IterableDataset, RandomSampler,
                                SequentialSampler, SubsetRandomSampler, TensorDataset,
                                WeightedRandomSampler)


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def torch_data():
    return pytest.importorskip("torch").utils.data


def batches(loader):
    return [b if isinstance(b, int) else np.asarray(b).tolist() for b in loader]


def within_five_sigma(counts, probabilities):
    total = counts.sum()
    expected = total * probabilities
    sigma = np.sqrt(total * probabilities * (1 - probabilities))
    return np.all(np.abs(counts - expected) <= 5 * sigma + 1e-9)


# --- the submodule paths programs import --------------------------------------------------------
TORCH_PATHS = {
    "dataloader": ["DataLoader", "default_collate", "default_convert", "get_worker_info"],
    "sampler": ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
                "WeightedRandomSampler", "BatchSampler"],
    "dataset": ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
                "ChainDataset", "random_split"],
    "distributed": ["DistributedSampler"],
}


@pytest.mark.parametrize("submodule", sorted(TORCH_PATHS))
def test_torch_submodule_paths_exist(submodule):
    import importlib
    ours = importlib.import_module(f"minigpu.utils.data.{submodule}")
    for name in TORCH_PATHS[submodule]:
        assert getattr(ours, name) is getattr(mg.utils.data, name), name
    pytest.importorskip("torch")
    theirs = importlib.import_module(f"torch.utils.data.{submodule}")
    assert all(hasattr(theirs, name) for name in TORCH_PATHS[submodule])


# --- deterministic samplers: exactly torch's ----------------------------------------------------
@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_sampler_over_sequential_is_torchs(drop_last):
    td = torch_data()
    for n, size in itertools.product(range(12), range(1, 6)):
        ours = BatchSampler(SequentialSampler(range(n)), size, drop_last)
        theirs = td.BatchSampler(td.SequentialSampler(range(n)), size, drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs), (n, size)
    order = [7, 3, 3, 9, 0, 1, 5]  # any iterable of indices, repeats kept
    assert list(BatchSampler(order, 3, drop_last)) == list(td.BatchSampler(order, 3, drop_last))


def test_sampler_argument_errors_are_torchs():
    td = torch_data()
    cases = [lambda m: m.BatchSampler(range(3), 0, False),
             lambda m: m.BatchSampler(range(3), 2, 1),
             lambda m: m.RandomSampler(range(3), replacement=1),
             lambda m: m.RandomSampler(range(3), num_samples=0),
             lambda m: m.WeightedRandomSampler([1.0, 2.0], 0),
             lambda m: m.WeightedRandomSampler([1.0, 2.0], 2, replacement="yes"),
             lambda m: m.DistributedSampler(range(4), num_replicas=2, rank=2)]
    for make in cases:
        with pytest.raises((ValueError, TypeError)) as theirs:
            make(td)
        with pytest.raises(type(theirs.value), match=re.escape(str(theirs.value))):
            make(mg.utils.data)


def test_weighted_sampler_rejects_2d_weights():
    with pytest.raises(ValueError, match=r"1d sequence .* shape \(2, 2\)"):
        WeightedRandomSampler([[1, 2], [3, 4]], 2)


@pytest.mark.parametrize("kwargs", [
    dict(sampler=SequentialSampler(range(5)), shuffle=True),
    dict(batch_sampler=[[0, 1]], batch_size=2),
    dict(batch_sampler=[[0, 1]], shuffle=True),
    dict(batch_sampler=[[0, 1]], drop_last=True),
    dict(batch_sampler=[[0, 1]], sampler=[0, 1]),
    dict(batch_size=None, drop_last=True),
], ids=["sampler+shuffle", "batch_sampler+batch_size", "batch_sampler+shuffle",
        "batch_sampler+drop_last", "batch_sampler+sampler", "None+drop_last"])
def test_dataloader_argument_conflicts_are_torchs(kwargs):
    td = torch_data()
    with pytest.raises(ValueError) as theirs:
        td.DataLoader(range(5), **kwargs)
    with pytest.raises(ValueError, match=re.escape(str(theirs.value))):
        DataLoader(range(5), **kwargs)


@pytest.mark.parametrize("kwargs", [dict(shuffle=True), dict(sampler=[0]),
                                    dict(batch_sampler=[[0]])])
def test_iterable_dataset_refuses_an_order_as_torch_does(kwargs):
    td = torch_data()

    class TorchStream(td.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(ValueError) as theirs:
        td.DataLoader(TorchStream(), **kwargs)
    with pytest.raises(ValueError, match=re.escape(str(theirs.value))):
        DataLoader(Stream(3), **kwargs)


def test_dataloader_with_sampler_and_batch_sampler_gives_torchs_batches():
    td = torch_data()
    order = [4, 0, 3, 3, 1, 2, 6]
    for kwargs in (dict(sampler=order, batch_size=3), dict(sampler=order, batch_size=3,
                                                          drop_last=True),
                   dict(batch_sampler=[[5, 1], [0], [2, 2, 6]]), dict(batch_size=None),
                   dict(batch_size=None, sampler=order), dict(batch_size=4)):
        ours = DataLoader(range(7), **kwargs)
        theirs = td.DataLoader(range(7), **kwargs)
        assert batches(ours) == [np.asarray(b).tolist() for b in theirs], kwargs
        assert len(ours) == len(theirs), kwargs


def test_worker_processes_follow_the_sampler():
    td = torch_data()
    for kwargs in (dict(batch_sampler=[[5, 1], [0], [2, 2, 6]]), dict(batch_size=None,
                                                                      sampler=[3, 0, 3])):
        ours = DataLoader(range(7), num_workers=2, **kwargs)
        theirs = td.DataLoader(range(7), **kwargs)
        assert batches(ours) == [np.asarray(b).tolist() for b in theirs], kwargs


@pytest.mark.parametrize("batch_size,drop_last", [(3, False), (3, True), (None, False),
                                                  (7, False)])
def test_iterable_dataset_is_batched_as_torch_batches_it(batch_size, drop_last):
    td = torch_data()

    class TorchStream(td.IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7

    ours = DataLoader(Stream(7), batch_size=batch_size, drop_last=drop_last)
    theirs = td.DataLoader(TorchStream(), batch_size=batch_size, drop_last=drop_last)
    assert batches(ours) == [np.asarray(b).tolist() for b in theirs]
    assert len(ours) == len(theirs)


def test_iterable_dataset_with_workers_is_a_clear_error():
    with pytest.raises(ValueError, match="IterableDataset.*num_workers=0"):
        DataLoader(Stream(3), num_workers=2)


def test_concat_and_chain_datasets_are_torchs():
    td = torch_data()
    ours = ConcatDataset([range(3), range(0), range(4)])
    theirs = td.ConcatDataset([range(3), range(0), range(4)])
    assert len(ours) == len(theirs) == 7
    assert [ours[i] for i in range(-7, 7)] == [theirs[i] for i in range(-7, 7)]
    assert (TensorDataset(mg.arange(2)) + TensorDataset(mg.arange(2)))[3][0].item() == 1
    assert list(Stream(2) + Stream(3)) == [0, 1, 0, 1, 2]
    with pytest.raises(AssertionError, match="IterableDataset"):
        ConcatDataset([Stream(2)])


@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_without_shuffle_is_torchs(drop_last):
    td = torch_data()
    for n, replicas in itertools.product([1, 5, 8, 11], [1, 2, 3, 4]):
        for rank in range(replicas):
            ours = DistributedSampler(range(n), replicas, rank, shuffle=False,
                                      drop_last=drop_last)
            theirs = td.DistributedSampler(range(n), replicas, rank, shuffle=False,
                                           drop_last=drop_last)
            assert list(ours) == list(theirs) and len(ours) == len(theirs), (n, replicas, rank)


def test_distributed_sampler_shuffled_shares_cover_the_dataset():
    n, replicas = 11, 3
    shares = [list(DistributedSampler(range(n), replicas, r, seed=5)) for r in range(replicas)]
    assert all(len(s) == 4 for s in shares)
    assert set(sum(shares, [])) == set(range(n))
    again = DistributedSampler(range(n), replicas, 0, seed=5)
    assert list(again) == shares[0]
    again.set_epoch(1)
    assert list(again) != shares[0]
    epoch_one = []
    for r in range(replicas):
        share = DistributedSampler(range(n), replicas, r, seed=5)
        share.set_epoch(1)
        epoch_one += list(share)
    assert set(epoch_one) == set(range(n))


def test_distributed_sampler_without_a_process_group_says_what_to_pass():
    with pytest.raises(RuntimeError, match="num_replicas= and rank="):
        DistributedSampler(range(4))


# --- random samplers: torch's semantics, minigpu's generator ----------------------------------
def test_random_sampler_is_a_seeded_permutation_from_its_generator():
    def draw(seed):
        return list(RandomSampler(range(50), generator=mg.Generator().manual_seed(seed)))

    first = draw(7)
    assert sorted(first) == list(range(50)) and first != list(range(50))
    assert draw(7) == first and draw(8) != first
    before = mg.default_generator.get_state()
    draw(9)
    np.testing.assert_array_equal(mg.default_generator.get_state(), before)  # not touched
    mg.manual_seed(3)
    a = list(RandomSampler(range(50)))
    b = list(RandomSampler(range(50)))
    mg.manual_seed(3)
    assert list(RandomSampler(range(50))) == a and a != b  # a new order every epoch


def test_random_sampler_more_samples_than_data_gives_whole_permutations():
    order = list(RandomSampler(range(6), num_samples=15, generator=mg.Generator()))
    assert len(order) == 15
    assert sorted(order[:6]) == sorted(order[6:12]) == list(range(6))
    assert len(set(order[12:])) == 3


def test_random_sampler_draws_as_it_is_consumed():
    """torch's trainers ask for int(1e10) samples (minGPT): nothing of that size is made."""
    for replacement in (True, False):
        sampler = RandomSampler(range(7), replacement=replacement, num_samples=int(1e10))
        first = list(itertools.islice(sampler, 70))
        assert len(sampler) == int(1e10) and len(first) == 70 and set(first) <= set(range(7))
        if not replacement:
            assert all(sorted(first[i:i + 7]) == list(range(7)) for i in range(0, 70, 7))


def test_random_sampler_with_replacement_is_uniform():
    g = mg.Generator().manual_seed(0)
    sampler = RandomSampler(range(10), replacement=True, num_samples=20000, generator=g)
    draws = np.array(list(sampler))
    assert len(sampler) == 20000 and draws.min() >= 0 and draws.max() <= 9
    assert within_five_sigma(np.bincount(draws, minlength=10), np.full(10, 0.1))
    assert len(list(RandomSampler(range(3), replacement=True, num_samples=5))) == 5


def test_subset_random_sampler_permutes_its_indices():
    indices = [10, 20, 30, 40, 50]
    order = list(SubsetRandomSampler(indices, generator=mg.Generator().manual_seed(1)))
    assert sorted(order) == indices
    assert order == list(SubsetRandomSampler(indices, generator=mg.Generator().manual_seed(1)))


def test_weighted_sampler_frequencies_follow_the_weights():
    weights = mg.tensor([1.0, 0.0, 2.0, 3.0, 4.0])
    g = mg.Generator().manual_seed(0)
    draws = np.array(list(WeightedRandomSampler(weights, 40000, generator=g)))
    p = weights.numpy() / weights.numpy().sum()
    counts = np.bincount(draws, minlength=5)
    assert counts[1] == 0 and within_five_sigma(counts, p)


def test_weighted_sampler_without_replacement():
    g = mg.Generator().manual_seed(2)
    for _ in range(20):
        draws = list(WeightedRandomSampler([5, 0, 1, 1], 3, replacement=False, generator=g))
        assert sorted(draws) == [0, 2, 3]
    with pytest.raises(RuntimeError, match="without replacement"):
        list(WeightedRandomSampler([5, 0, 1, 1], 4, replacement=False))
    with pytest.raises(RuntimeError, match="invalid multinomial distribution"):
        list(WeightedRandomSampler([1, -1], 2))


def test_dataloader_shuffle_is_a_random_sampler_on_the_loaders_generator():
    loader = DataLoader(range(10), batch_size=4, shuffle=True,
                        generator=mg.Generator().manual_seed(4))
    assert isinstance(loader.sampler, RandomSampler) and isinstance(loader.batch_sampler,
                                                                    BatchSampler)
    first = batches(loader)
    assert sorted(sum(first, [])) == list(range(10)) and [len(b) for b in first] == [4, 4, 2]
    again = DataLoader(range(10), batch_size=4, shuffle=True,
                       generator=mg.Generator().manual_seed(4))
    assert batches(again) == first and batches(again) != first  # a new order each epoch
    weighted = DataLoader(range(4), batch_size=2,
                          sampler=WeightedRandomSampler([0, 1, 0, 1], 6, generator=mg.Generator()))
    drawn = sum(batches(weighted), [])
    assert len(drawn) == 6 and set(drawn) <= {1, 3}


# --- the generator ------------------------------------------------------------------------------
def test_generator_is_torch_shaped():
    g = mg.Generator()
    assert g.manual_seed(12) is g and g.initial_seed() == 12
    state = g.get_state()
    a = list(RandomSampler(range(20), generator=g))
    assert g.set_state(state) is g
    assert list(RandomSampler(range(20), generator=g)) == a
    fresh = g.seed()
    assert g.initial_seed() == fresh
    assert mg.Generator(device="cuda").initial_seed() == 0


def test_cuda_manual_seed_seeds_the_one_generator():
    mg.manual_seed(11)
    expected = mg.randn(5).numpy()
    mg.manual_seed(0)
    mg.cuda.manual_seed_all(11)
    np.testing.assert_array_equal(mg.randn(5).numpy(), expected)
    mg.cuda.manual_seed(11)
    np.testing.assert_array_equal(mg.randn(5).numpy(), expected)
    assert mg.initial_seed() == 11


def test_nelement_is_numel():
    torch = pytest.importorskip("torch")
    for shape in [(), (0,), (3,), (2, 3, 4)]:
        assert mg.zeros(shape).nelement() == torch.zeros(shape).nelement()
