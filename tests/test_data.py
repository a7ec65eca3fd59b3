"""DataLoader, TensorDataset and the bundled datasets."""
import numpy as np
import pytest

import minigpu as mg
from minigpu.utils.data import DataLoader, Dataset, TensorDataset


def test_tensor_dataset_batches_cover_everything_once():
    x = mg.arange(10).float().reshape(10, 1)
    y = mg.arange(10)
    loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)
    assert len(loader) == 3
    seen = np.concatenate([yb.numpy() for _, yb in loader])
    assert sorted(seen.tolist()) == list(range(10))
    for xb, yb in loader:
        np.testing.assert_array_equal(xb.numpy()[:, 0], yb.numpy())


def test_shuffle_is_seeded_and_drop_last():
    data = TensorDataset(mg.arange(10))
    mg.manual_seed(3)
    first = [b[0].numpy().tolist() for b in DataLoader(data, 3, shuffle=True, drop_last=True)]
    mg.manual_seed(3)
    again = [b[0].numpy().tolist() for b in DataLoader(data, 3, shuffle=True, drop_last=True)]
    assert first == again and len(first) == 3 and all(len(b) == 3 for b in first)
    assert len(set(sum(first, []))) == 9
    mg.manual_seed(4)
    other = [b[0].numpy().tolist() for b in DataLoader(data, 3, shuffle=True, drop_last=True)]
    assert other != first


def test_generic_dataset_is_collated():
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return np.full(2, i, dtype=np.float32), i * i

    xb, yb = next(iter(DataLoader(Squares(), batch_size=5)))
    assert xb.shape == (5, 2) and xb.dtype == mg.float32 and yb.dtype == mg.int64
    np.testing.assert_array_equal(yb.numpy(), [0, 1, 4, 9, 16])


def test_loader_on_cuda_tensors():
    x = mg.arange(6, device="cuda").float()
    (xb,) = next(iter(DataLoader(TensorDataset(x), batch_size=4)))
    assert xb.device == "cuda"
    np.testing.assert_array_equal(xb.numpy(), [0, 1, 2, 3])


def test_bad_arguments():
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        DataLoader(TensorDataset(mg.zeros(2)), batch_size=0)
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(mg.zeros(2), mg.zeros(3))


def test_digits_split_is_fixed_and_stratified():
    pytest.importorskip("sklearn")
    xtr, ytr = mg.datasets.load_digits("train")
    xte, yte = mg.datasets.load_digits("test")
    assert xtr.shape[1:] == (1, 8, 8) and xtr.shape[0] + xte.shape[0] == 1797
    assert 0.0 <= xtr.numpy().min() and xtr.numpy().max() <= 1.0
    train_counts = np.bincount(ytr.numpy(), minlength=10)
    test_counts = np.bincount(yte.numpy(), minlength=10)
    np.testing.assert_allclose(test_counts / (train_counts + test_counts), 0.2, atol=0.01)
    np.testing.assert_array_equal(mg.datasets.load_digits("test")[1].numpy(), yte.numpy())


def test_text_corpus_ships_with_python():
    text = mg.datasets.load_text()
    assert len(text) > 10_000 and "def " in text
