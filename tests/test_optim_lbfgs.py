"""optim.LBFGS (written from Nocedal & Wright) against torch.optim.LBFGS on small problems."""
import numpy as np
import pytest

import minigpu as mg

torch = pytest.importorskip("torch")


def rosenbrock_run(lib, line_search_fn, steps, max_iter=10, dtype="float64"):
    """Minimise Rosenbrock from (-1.5, 2); the point, step()'s returns, every closure loss."""
    x = lib.tensor([-1.5, 2.0], dtype=getattr(lib, dtype), requires_grad=True)
    opt = lib.optim.LBFGS([x], lr=1, max_iter=max_iter, line_search_fn=line_search_fn)
    losses = []

    def closure():
        opt.zero_grad()
        loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
        loss.backward()
        losses.append(loss.item())
        return loss

    returned = [opt.step(closure).item() for _ in range(steps)]
    return x.detach().numpy(), returned, losses


def test_fixed_steps_follow_torch():
    ours = rosenbrock_run(mg, None, steps=2)
    theirs = rosenbrock_run(torch, None, steps=2)
    assert len(ours[2]) == len(theirs[2])  # the same closure calls
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-9)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-9)


def test_strong_wolfe_line_search_finds_the_minimum_as_torch_does():
    ours = rosenbrock_run(mg, "strong_wolfe", steps=3, max_iter=20)
    theirs = rosenbrock_run(torch, "strong_wolfe", steps=3, max_iter=20)
    np.testing.assert_allclose(ours[0], [1.0, 1.0], atol=1e-4)
    np.testing.assert_allclose(ours[0], theirs[0], atol=1e-6)
    assert ours[2][-1] < 1e-9


def test_every_accepted_step_satisfies_the_strong_wolfe_conditions():
    from minigpu.optim.lbfgs import _strong_wolfe
    d = np.array([1.0, 0.5])

    def phi(t):  # f(x) = |x - (3, 1)|^2 along x = t d
        r = t * d - np.array([3.0, 1.0])
        return float(r @ r), 2 * r

    f0, g0 = phi(0.0)
    slope0 = float(g0 @ d)
    for t0 in (1e-3, 1.0, 50.0):
        f, g, t, evals = _strong_wolfe(phi, d, f0, slope0, t0, 1e-9)
        assert f <= f0 + 1e-4 * t * slope0
        assert abs(float(g @ d)) <= 0.9 * abs(slope0)
        assert evals <= 25


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-9), ("float32", 1e-4)])
def test_a_least_squares_fit_matches_torch(dtype, rtol):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((20, 3)), rng.standard_normal(20)

    def fit(lib):
        w = lib.zeros(3, dtype=getattr(lib, dtype), requires_grad=True)
        opt = lib.optim.LBFGS([w], history_size=5, max_iter=15, line_search_fn="strong_wolfe")
        A, B = (lib.tensor(v.astype(dtype)) for v in (a, b))

        def closure():
            opt.zero_grad()
            loss = ((A @ w - B) ** 2).mean()
            loss.backward()
            return loss

        opt.step(closure)
        return w.detach().numpy(), closure().item()

    (w_ours, loss_ours), (w_theirs, loss_theirs) = fit(mg), fit(torch)
    np.testing.assert_allclose(loss_ours, loss_theirs, rtol=rtol)
    if dtype == "float64":
        np.testing.assert_allclose(w_ours, w_theirs, rtol=1e-7)
        np.testing.assert_allclose(w_ours, np.linalg.lstsq(a, b, rcond=None)[0], atol=1e-4)


def test_state_persists_across_steps_as_in_torch():
    counts = {}
    for lib in (mg, torch):
        x = lib.tensor([-1.5, 2.0], dtype=lib.float64, requires_grad=True)
        opt = lib.optim.LBFGS([x], max_iter=4)  # max_eval = 5

        def closure():
            opt.zero_grad()
            loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
            loss.backward()
            return loss

        counts[lib.__name__] = []
        for _ in range(3):
            opt.step(closure)
            state = opt.state[x]
            counts[lib.__name__].append((state["n_iter"], state["func_evals"],
                                         len(state["old_dirs"])))
    assert counts["minigpu"] == counts["torch"]
    assert counts["minigpu"][-1][0] > counts["minigpu"][0][0]


def test_bad_use_is_refused():
    x = mg.tensor([-1.5, 2.0], requires_grad=True)
    opt = mg.optim.LBFGS([x])
    with pytest.raises(RuntimeError, match="LBFGS requires a closure"):
        opt.step(None)
    with pytest.raises(ValueError, match="only 'strong_wolfe' is supported"):
        mg.optim.LBFGS([x], line_search_fn="backtracking")
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        mg.optim.LBFGS([{"params": [x]}, {"params": [mg.zeros(1, requires_grad=True)]}])
