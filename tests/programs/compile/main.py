# minigpu corpus: written for this corpus (not copied from upstream), for torch as a user
# writes it, in the style of the training part of PyTorch's torch.compile tutorial
# (pytorch/tutorials, intermediate_source/torch_compile_tutorial.py: init_model,
# generate_data, a train(mod, data) step, eager first, then the compiled model), shrunk to a
# small CNN on random 3x16x16 images that runs on the cpu. It imports minigpu as torch (the one
# line marked '# minigpu: changed'); under minigpu, torch.compile is minigpu.compile, which
# captures the model's forward and backward once and replays them.
#
# backend="aot_eager": torch's default backend (Inductor) generates and compiles C++ on the
# cpu, measured at 188 s with a cold cache and 35 s with a warm one for a 2-layer MLP on this
# 2-core machine under load; aot_eager still traces the forward and the backward (Dynamo and
# AOTAutograd) and runs the traced graphs, without generating code. minigpu reads no backend
# but "eager" (which would skip the capture).
import time

import minigpu as torch  # minigpu: changed (import torch)

N_ITERS = 5
BATCH = 8
NUM_CLASSES = 10
device = "cuda" if torch.cuda.is_available() else "cpu"


def init_model():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(16 * 4 * 4, NUM_CLASSES)).to(device)


def generate_data(b):
    return (torch.randn(b, 3, 16, 16).to(device),
            torch.randint(NUM_CLASSES, (b,)).to(device))


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def train(mod, opt, data):
    opt.zero_grad(True)
    pred = mod(data[0])
    loss = torch.nn.CrossEntropyLoss()(pred, data[1])
    loss.backward()
    opt.step()
    return loss


def run(mod, label):
    opt = torch.optim.Adam(mod.parameters())
    times = []
    for i in range(N_ITERS):
        inp = generate_data(BATCH)
        loss, seconds = timed(lambda: train(mod, opt, inp))
        times.append(seconds)
        print(f"{label} train step {i}: loss {loss.item():.4f}, {seconds * 1e3:.1f} ms")
    return times


torch.manual_seed(0)
eager_times = run(init_model(), "eager")

model = torch.compile(init_model(), backend="aot_eager")
compile_times = run(model, "compile")
print(f"median step: eager {sorted(eager_times)[N_ITERS // 2] * 1e3:.1f} ms, "
      f"compiled {sorted(compile_times)[N_ITERS // 2] * 1e3:.1f} ms "
      f"(the first compiled step includes the compilation)")
