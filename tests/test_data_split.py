"""Subset, random_split (PyTorch's length rule for fractions, seeded generator) and
default_collate of dict / tuple / namedtuple / nested samples (PyTorch's output types)."""
from collections import namedtuple

import numpy as np
import pytest

import minigpu as mg
from minigpu.utils.data import (DataLoader, Dataset, Subset, TensorDataset, default_collate,
                                random_split)


class Range(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return int(i)


def test_subset_indexes_the_dataset():
    data = TensorDataset(mg.arange(10) * 10)
    sub = Subset(data, [7, 2, 5])
    assert len(sub) == 3 and sub[0][0].item() == 70 and sub[-1][0].item() == 50
    (batch,) = next(iter(DataLoader(sub, batch_size=3)))
    np.testing.assert_array_equal(batch.numpy(), [70, 20, 50])


@pytest.mark.parametrize("n,lengths,sizes", [
    (10, [3, 7], [3, 7]),
    (10, [0.5, 0.5], [5, 5]),
    (11, [0.3, 0.3, 0.4], [4, 3, 4]),   # floors 3, 3, 4; the remainder 1 goes to split 0
    (7, [0.25, 0.25, 0.25, 0.25], [2, 2, 2, 1]),  # floors 1,1,1,1, remainder 3 round-robin
])
def test_random_split_sizes_follow_pytorch(n, lengths, sizes):
    parts = random_split(Range(n), lengths, generator=mg.Generator().manual_seed(42))
    assert [len(p) for p in parts] == sizes
    everything = sorted(i for p in parts for i in (p[k] for k in range(len(p))))
    assert everything == list(range(n))  # disjoint and complete


def test_random_split_is_seeded_and_validated():
    def split(seed):
        return [p.indices for p in random_split(Range(20), [0.5, 0.5],
                                                generator=mg.Generator().manual_seed(seed))]

    assert split(1) == split(1) and split(1) != split(2)
    mg.manual_seed(5)
    a = random_split(Range(20), [10, 10])[0].indices
    mg.manual_seed(5)
    assert random_split(Range(20), [10, 10])[0].indices == a  # the global generator by default
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of "
                                         "the input dataset!"):
        random_split(Range(5), [2, 2])
    with pytest.raises(ValueError, match="Fraction at index 0 is not between 0 and 1"):
        random_split(Range(5), [1.5, -0.5])
    with pytest.warns(UserWarning) as caught:
        random_split(Range(2), [0.9, 0.05, 0.05])
    assert [str(w.message) for w in caught] == [
        f"Length of split at index {i} is 0. This might result in an empty dataset."
        for i in (1, 2)]


Pair = namedtuple("Pair", "image label")


def test_default_collate_nested_like_pytorch():
    samples = [{"x": mg.full((2,), float(i)), "meta": (i, f"s{i}"), "w": 0.5 * i,
                "flag": i % 2 == 0, "arr": np.full(3, i, np.float32)} for i in range(3)]
    batch = default_collate(samples)
    assert set(batch) == {"x", "meta", "w", "flag", "arr"}
    assert tuple(batch["x"].shape) == (3, 2)
    assert isinstance(batch["meta"], list)  # PyTorch collates tuples into lists
    np.testing.assert_array_equal(batch["meta"][0].numpy(), [0, 1, 2])
    assert batch["meta"][0].dtype == mg.int64 and batch["meta"][1] == ["s0", "s1", "s2"]
    assert batch["w"].dtype == mg.float64  # Python floats: float64, as torch.tensor(batch)
    assert batch["flag"].dtype == mg.bool and batch["flag"].numpy().tolist() == [True, False,
                                                                                 True]
    assert batch["arr"].dtype == mg.float32 and tuple(batch["arr"].shape) == (3, 3)
    pairs = default_collate([Pair(mg.ones(2), 1), Pair(mg.zeros(2), 0)])
    assert isinstance(pairs, Pair) and tuple(pairs.image.shape) == (2, 2)
    np.testing.assert_array_equal(pairs.label.numpy(), [1, 0])
    nested = default_collate([[(1, 2.0)], [(3, 4.0)]])
    assert isinstance(nested, list) and isinstance(nested[0], list)
    np.testing.assert_array_equal(nested[0][1].numpy(), [2.0, 4.0])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal "
                                           "size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors"):
        default_collate([object(), object()])


def test_loader_collates_dict_samples():
    class Dicts(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"image": np.full((1, 2), i, np.float32), "label": i}

    batches = list(DataLoader(Dicts(), batch_size=2))
    assert len(batches) == 3 and tuple(batches[0]["image"].shape) == (2, 1, 2)
    np.testing.assert_array_equal(batches[2]["label"].numpy(), [4])
    x, y = next(iter(DataLoader(TensorDataset(mg.zeros(4, 2), mg.arange(4)), batch_size=2)))
    assert tuple(x.shape) == (2, 2) and y.numpy().tolist() == [0, 1]
