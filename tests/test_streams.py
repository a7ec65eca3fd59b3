"""Pinned batches, the CudaPrefetcher's copy stream and events, and the streams lesson."""
import numpy as np
import pytest

import minigpu as mg
from minigpu.backends.cuda import allocator, device, streams
from minigpu.lessons import streams as lesson
from minigpu.utils import data as data_mod
from minigpu.utils.data import CudaPrefetcher, DataLoader, Dataset, TensorDataset, is_pinned


def _dataset(n=10):
    x = mg.arange(n * 3).float().reshape(n, 3)
    y = mg.tensor([i % 4 for i in range(n)])
    return TensorDataset(x, y)


def _batches(loader):
    return [tuple((b.device.type, b.dtype, tuple(b.shape), b.numpy().tolist()) for b in batch)
            for batch in loader]


@pytest.mark.parametrize("pin", [False, True])
def test_prefetcher_yields_the_batches_of_plain_iteration_on_cuda(pin):
    ds = _dataset()
    mg.manual_seed(5)
    plain = _batches(DataLoader(ds, batch_size=4, shuffle=True))
    mg.manual_seed(5)
    loader = DataLoader(ds, batch_size=4, shuffle=True, pin_memory=pin)
    fetched = _batches(CudaPrefetcher(loader))
    assert len(fetched) == len(plain) == len(CudaPrefetcher(loader)) == 3
    for got, want in zip(fetched, plain):
        for (dev, *rest), (wdev, *wrest) in zip(got, want):
            assert dev == "cuda" and wdev == "cpu" and rest == wrest


def test_prefetcher_passes_through_non_tensors_and_cuda_tensors():
    class Mixed(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return np.full(2, i, np.float32), i

    batches = list(CudaPrefetcher(DataLoader(Mixed(), batch_size=2, pin_memory=True)))
    assert all(x.device == "cuda" and y.device == "cuda" for x, y in batches)
    np.testing.assert_array_equal(batches[1][1].numpy(), [2, 3])
    on_gpu = TensorDataset(mg.arange(4, device="cuda"))
    (b,) = next(iter(CudaPrefetcher(DataLoader(on_gpu, batch_size=4))))
    assert b.device == "cuda" and b.numpy().tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="cuda device"):
        CudaPrefetcher(DataLoader(on_gpu), device="cpu")


def test_copies_go_on_the_copy_stream_and_compute_waits_on_their_event(monkeypatch):
    """Instrument the three stream moves and check the protocol, batch by batch."""
    log = []
    real_copy, real_record, real_wait = (streams.copy_to_device_async, streams.record_event,
                                         streams.wait_event)

    def copy(host, stream, out=None):
        log.append(("copy", stream, host.copy()))
        return real_copy(host, stream, out)

    def record(stream):
        event = real_record(stream)
        log.append(("record", stream, event))
        return event

    def wait(stream, event):
        log.append(("wait", stream, event))
        real_wait(stream, event)

    monkeypatch.setattr(streams, "copy_to_device_async", copy)
    monkeypatch.setattr(streams, "record_event", record)
    monkeypatch.setattr(streams, "wait_event", wait)

    loader = DataLoader(_dataset(8), batch_size=4, pin_memory=True)
    prefetcher = CudaPrefetcher(loader)
    compute = device.current_stream()
    yielded_at = []
    for xb, _ in prefetcher:
        yielded_at.append(len(log))
        log.append(("compute", compute, xb.numpy()))
    copy_stream = prefetcher.copy_stream
    assert copy_stream is not None and copy_stream is not compute

    copies = [i for i, e in enumerate(log) if e[0] == "copy"]
    assert len(copies) == 4 and all(log[i][1] is copy_stream for i in copies)
    # Batch k: [copy stream waits on a compute event] copy x, copy y, record on copy stream.
    for k in range(2):
        first = copies[2 * k]
        assert log[first - 2][0] == "record" and log[first - 2][1] is compute
        assert log[first - 1] == ("wait", copy_stream, log[first - 2][2])
        done = log[copies[2 * k + 1] + 1]
        assert done[0] == "record" and done[1] is copy_stream
        # compute waits on exactly that event before batch k is handed out ...
        waits = [i for i, e in enumerate(log) if e[0] == "wait" and e[2] is done[2]]
        assert len(waits) == 1 and log[waits[0]][1] is compute
        assert waits[0] < yielded_at[k]
        # ... and what compute read is what was copied
        np.testing.assert_array_equal(log[yielded_at[k]][2].reshape(-1), log[first][2])
    # Overlap: batch 1's copy was queued before batch 0 was handed out to compute.
    assert copies[2] < yielded_at[0]


def test_stopping_early_is_clean():
    loader = DataLoader(_dataset(12), batch_size=2, pin_memory=True)
    for k, (xb, _) in enumerate(CudaPrefetcher(loader)):
        if k == 1:
            break
    np.testing.assert_array_equal(xb.numpy()[:, 0], [6, 9])


def test_pin_memory_batches_are_pinned_and_recycled():
    loader = DataLoader(_dataset(), batch_size=4, pin_memory=True)
    plain = DataLoader(_dataset(), batch_size=4)
    before = mg.cuda.pinned_memory_stats()
    for (xb, yb), (px, py) in zip(loader, plain):
        assert is_pinned(xb) and is_pinned(yb) and xb.device == "cpu"
        assert not is_pinned(px)
        np.testing.assert_array_equal(xb.numpy(), px.numpy())
        np.testing.assert_array_equal(yb.numpy(), py.numpy())
    for _ in loader:
        pass
    after = mg.cuda.pinned_memory_stats()
    assert after["num_cache_hits"] > before["num_cache_hits"]
    assert is_pinned(data_mod.pin_memory(mg.ones(3))) and not is_pinned(mg.ones(3))


def test_plain_loader_on_cpu_is_unchanged(monkeypatch):
    loader = DataLoader(_dataset(), batch_size=4)
    assert loader.pin_memory is False
    xb, yb = next(iter(loader))
    assert xb.device == "cpu" and not is_pinned(xb)
    np.testing.assert_array_equal(yb.numpy(), [0, 1, 2, 3])
    monkeypatch.setattr(data_mod.dataloader, "_cuda_available", lambda: False)
    with pytest.warns(UserWarning, match="pin_memory"):
        loader = DataLoader(_dataset(), batch_size=4, pin_memory=True)
    assert loader.pin_memory is False


def test_lesson_programs_agree():
    """Serial and overlapped copy/compute compute the same thing (sequential on the simulator)."""
    hosts = [allocator.pinned_empty(64, np.float32) for _ in range(3)]
    for k, h in enumerate(hosts):
        h[:] = np.arange(64) * (k + 1)

    def compute(buf, stream):
        lesson.spin(buf, 3, stream)

    def reference(h):
        v = h.astype(np.float32)
        for _ in range(3):
            v = v * np.float32(0.999) + np.float32(0.001)
        return v

    compute_stream = device.current_stream()
    serial = lesson.copy_then_compute(hosts, compute, compute_stream).copy_to_host()
    overlapped = lesson.overlapped_copy_compute(hosts, compute, compute_stream,
                                                 streams.new_stream()).copy_to_host()
    np.testing.assert_allclose(serial, reference(hosts[-1]), rtol=1e-6)
    np.testing.assert_allclose(overlapped, reference(hosts[-1]), rtol=1e-6)


def test_benchmark_overlap_runs():
    result = lesson.benchmark_overlap()
    assert {"copy_then_compute_ms", "overlapped_ms", "speedup", "timer"} <= set(result)
    if device.SIMULATOR:
        assert "simulator" in result["timer"]


@pytest.mark.gpu
def test_overlap_is_faster_on_a_gpu():
    result = lesson.benchmark_overlap()
    assert result["timer"] == "cuda events (device time)"
    assert result["speedup"] > 1.3, result
