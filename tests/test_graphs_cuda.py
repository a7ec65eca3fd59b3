"""Capture and replay on the cuda device: a replay re-launches the recorded kernels and
copies on the same buffers (``minigpu/graphs/capture.py``), bit for bit the eager step, with
no allocation, and on the simulator every replayed launch is checked by the sanitizer again."""
import numpy as np
import pytest
from numba import cuda

import minigpu as mg
from test_graphs import (batches, eager_and_captured, params, same, setup, train_captured,
                         train_eager)


def test_replayed_mlp_training_equals_eager_on_cuda_and_allocates_nothing():
    eager, captured, g = eager_and_captured("mlp", "adam", batches((4, 8), 4, "cuda"), "cuda")
    assert same(eager[0], captured[0]) and same(eager[1], captured[1])
    before = mg.cuda.memory_stats()["num_allocs"]
    g.replay()
    assert mg.cuda.memory_stats()["num_allocs"] == before


def test_replayed_cnn_training_equals_eager_on_cuda():
    """Conv2d, MaxPool2d and Linear with SGD and momentum (the LSTM is equal too, ~100 s on
    the simulator: left to the cpu test)."""
    eager, captured, g = eager_and_captured("cnn", "sgd", batches((2, 1, 8, 8), 4, "cuda"),
                                            "cuda")
    assert same(eager[0], captured[0]) and same(eager[1], captured[1])


def test_each_replay_launches_the_recorded_kernels_through_the_simulator():
    net, opt = setup("mlp", "sgd", "cuda")
    data = batches((4, 8), 2, device="cuda")
    _, g = train_captured(net, opt, data, warmup=1)
    for _ in range(2):
        with mg.cuda.counters() as launches:
            g.replay()
        assert len(launches) == g.num_launches() > 10


@cuda.jit
def put_one(out, where):
    out[where[0]] = 1.0


def test_a_replayed_launch_is_still_sanitized():
    """The index a captured kernel writes at comes from a buffer changed after the capture:
    the replay's out-of-bounds store is reported, as an eager launch's would be."""
    out, where = mg.zeros(4, device="cuda"), mg.zeros(1, dtype=mg.int64, device="cuda")
    g = mg.cuda.CUDAGraph()
    with mg.cuda.graph(g):
        put_one[1, 1](out._buf, where._buf)
    assert g.num_launches() == 1
    out.zero_()  # (a kernel launched by hand runs during the capture too)
    g.replay()
    assert out.tolist() == [1.0, 0.0, 0.0, 0.0]
    where.fill_(9)
    with pytest.raises(mg.cuda.OutOfBoundsError):
        g.replay()


def test_random_draws_advance_across_replays_on_cuda_as_on_cpu():
    g = mg.cuda.CUDAGraph()
    x = mg.ones(32, device="cuda")
    mg.manual_seed(5)
    with mg.cuda.graph(g):
        y = mg.nn.functional.dropout(x, 0.5) + mg.randn(32, device="cuda")
    replays = []
    for _ in range(2):
        g.replay()
        replays.append(y.cpu().numpy().copy())
    mg.manual_seed(5)
    eager = [(mg.nn.functional.dropout(x, 0.5) + mg.randn(32, device="cuda")).cpu().numpy()
             for _ in range(2)]
    assert same(replays, eager) and not np.array_equal(*replays)


def test_compiled_model_trains_like_eager_on_cuda():
    data = batches((4, 8), 3, device="cuda")
    net, opt = setup("mlp", "sgd", "cuda")
    eager = train_eager(net, opt, data)
    net2, opt2 = setup("mlp", "sgd", "cuda")
    compiled = mg.compile(net2)
    assert same(eager, train_eager(compiled, opt2, data)) and not compiled.graph_breaks()
    assert same(params(net), params(net2))


@pytest.mark.gpu
def test_replayed_training_equals_eager_on_a_gpu():
    """On a GPU the replay is the recorded launch list too (no cuda.core graph yet)."""
    eager, captured, g = eager_and_captured("mlp", "adam", batches((64, 8), 5, "cuda"), "cuda")
    assert g.num_launches() > 10
    assert same(eager[0], captured[0]) and same(eager[1], captured[1])
