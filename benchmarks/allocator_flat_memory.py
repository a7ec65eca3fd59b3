"""The caching allocator keeps memory flat: train a tiny MLP with SGD on cuda and print the
reserved bytes over the steps and the final allocator counters.

    python benchmarks/allocator_flat_memory.py [steps]     # seconds on a GPU, minutes simulated
"""
import sys
import time

import minigpu as mg
from minigpu import nn, optim


def flat_memory_demo(steps=1000):
    """Train a tiny MLP with SGD for ``steps`` steps on cuda; print reserved bytes over the
    steps and the final allocator counters. Returns the reserved bytes after every step."""
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to("cuda")
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = mg.randn(8, 16, device="cuda"), mg.randint(0, 4, (8,), device="cuda")
    loss_fn = nn.CrossEntropyLoss()
    start, reserved = time.perf_counter(), []
    for step in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        reserved.append(mg.cuda.memory_stats()["reserved_bytes"])
    mg.cuda.synchronize()
    print(f"{steps} steps in {time.perf_counter() - start:.2f} s, final loss {loss.item():.4f}")
    print(f"reserved bytes after step 1: {reserved[0]}, 2: {reserved[min(1, steps - 1)]}, "
          f"max over steps 3..{steps}: {max(reserved[2:], default=reserved[-1])}")
    for key, value in mg.cuda.memory_stats().items():
        print(f"  {key:22s} {value}")
    return reserved


if __name__ == "__main__":
    flat_memory_demo(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
