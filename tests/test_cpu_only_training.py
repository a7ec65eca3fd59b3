"""A cpu-only user (no GPU, no simulator) trains with the newer layers and optimizers: LayerNorm,
AdamW / RMSprop / Adagrad, a scheduler, gradient clipping, the new losses and random_split.
Runs in a subprocess without ``NUMBA_ENABLE_CUDASIM`` (conftest.py forces the simulator here)."""
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import minigpu as mg
    from minigpu import nn, optim
    from minigpu.optim.lr_scheduler import OneCycleLR
    from minigpu.utils.data import DataLoader, TensorDataset, random_split

    mg.manual_seed(0)
    data = TensorDataset(mg.randn(20, 6), mg.randn(20, 1))
    train, _ = random_split(data, [0.75, 0.25])
    model = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 1))
    for name, loss_fn in (("AdamW", nn.HuberLoss()), ("RMSprop", nn.SmoothL1Loss()),
                          ("Adagrad", nn.L1Loss())):
        opt = getattr(optim, name)(model.parameters(), lr=0.01)
        sched = OneCycleLR(opt, max_lr=0.05, total_steps=8) if name == "AdamW" else None
        for x, y in DataLoader(train, batch_size=4):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if sched is not None:
                sched.step()
    kl = nn.KLDivLoss(reduction="batchmean")(mg.randn(2, 3).log_softmax(1), mg.ones(2, 3) / 3)
    print("CPU-OK", round(loss.item(), 4), round(kl.item(), 4))
""")


def test_cpu_only_user_trains_with_the_new_pieces():
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert "CPU-OK" in result.stdout, result.stderr[-3000:]
