"""L-BFGS (``torch.optim.LBFGS``): a quasi-Newton method that approximates the inverse Hessian
from the last ``history_size`` steps and gradient changes.

Written from the algorithm in Nocedal & Wright, *Numerical Optimization* (2nd ed.): the
two-loop recursion (Algorithm 7.4) with the initial scaling ``H0 = (s'y / y'y) I`` (eq. 7.20),
and, with ``line_search_fn="strong_wolfe"``, a line search for a step satisfying the strong
Wolfe conditions (Algorithm 3.5, bracketing, and 3.6, zoom, with the cubic interpolation of
eq. 3.59). The arguments and their defaults are PyTorch's.

One ``step(closure)`` runs up to ``max_iter`` iterations (``max_eval`` closure calls at most)
and returns the loss of the closure's first call. Each iteration:

1. direction ``d = -H g`` (the steepest descent ``-g`` at the very first iteration);
2. step length ``t``: ``lr`` (at the very first iteration ``lr * min(1, 1/|g|_1)``, so that the
   first move is not larger than the unscaled gradient), or the line search's;
3. ``x += t d``, then the closure again for the new loss and gradient (not after the last
   iteration when there is no line search);
4. the pair ``s = t d``, ``y = g_new - g`` joins the history when ``y's > 1e-10`` (the
   curvature condition; otherwise H would lose positive definiteness).

It stops when the gradient is small (``max|g| <= tolerance_grad``), when the direction is not
a descent direction (``g'd > -tolerance_change``), or when the step or the change of loss is
below ``tolerance_change``. The history, the direction and the step length persist across
``step`` calls (``state``), as in PyTorch. The vectors live on the host as one flat NumPy array
in the parameters' dtype (L-BFGS is for problems whose parameters fit in a few vectors); each
closure call is a device round trip.
"""
from __future__ import annotations

import numpy as np

from ..autograd import enable_grad, no_grad
from ..tensor import Tensor
from .optimizer import Optimizer


class LBFGS(Optimizer):
    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if isinstance(lr, Tensor) or not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError("only 'strong_wolfe' is supported")
        defaults = dict(lr=lr, max_iter=max_iter,
                        max_eval=max_iter * 5 // 4 if max_eval is None else max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # --- the parameters as one flat vector ------------------------------------------------
    def _gradient(self):
        return np.concatenate([np.zeros(p.numel(), _dtype(p)) if p.grad is None
                               else p.grad.detach().cpu().numpy().reshape(-1).astype(_dtype(p))
                               for p in self._params])

    def _values(self):
        return np.concatenate([p.detach().cpu().numpy().reshape(-1) for p in self._params])

    def _set(self, flat):
        with no_grad():
            start = 0
            for p in self._params:
                n = p.numel()
                p.copy_(Tensor._from_array(flat[start:start + n].reshape(p.shape), p.device,
                                           p.dtype))
                start += n

    def _move(self, t, d):
        x = self._values()  # a new vector: the sum is written into it
        x += t * d
        self._set(x)

    def _evaluate(self, closure):
        with enable_grad():
            loss = float(closure())
        return loss, self._gradient()

    # --- one step ---------------------------------------------------------------------------
    def step(self, closure):
        """Up to max_iter L-BFGS iterations; ``closure`` clears the gradients, computes the
        loss, calls ``backward()`` and returns the loss. Returns the first loss."""
        if closure is None:
            raise RuntimeError("LBFGS requires a closure: step(closure) re-evaluates the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            first_loss = closure()
        loss, g, evals = float(first_loss), self._gradient(), 1
        state["func_evals"] += 1
        if np.abs(g).max() <= tol_grad:
            return first_loss

        d, t = state.get("d"), state.get("t")
        steps, changes = state.setdefault("old_stps", []), state.setdefault("old_dirs", [])
        rho = state.setdefault("ro", [])
        h_diag = state.get("H_diag", 1.0)
        g_prev, loss_prev = state.get("prev_flat_grad"), state.get("prev_loss")

        iteration = 0
        while iteration < max_iter:
            iteration += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, h_diag = -g, 1.0
                steps.clear(), changes.clear(), rho.clear()
            else:
                h_diag = self._remember(t * d, g - g_prev, steps, changes, rho, h_diag,
                                        group["history_size"])
                d = _two_loop(-g, steps, changes, rho, h_diag)
            g_prev, loss_prev = g, loss  # g is rebound to a new vector, never changed
            t = lr * min(1.0, 1.0 / np.abs(g).sum()) if state["n_iter"] == 1 else lr
            slope = float(g @ d)
            if slope > -tol_change:  # not a descent direction (any more)
                break

            if group["line_search_fn"] == "strong_wolfe":
                x0 = self._values()
                loss, g, t, used = _strong_wolfe(
                    lambda step: self._at(closure, x0, step, d), d, loss, slope, t, tol_change)
                self._set(x0 + t * d)
            else:
                self._move(t, d)
                used = 0
                if iteration != max_iter:
                    loss, g = self._evaluate(closure)
                    used = 1
            evals += used
            state["func_evals"] += used

            if iteration == max_iter or evals >= max_eval:
                break
            if np.abs(g).max() <= tol_grad:
                break
            if np.abs(t * d).max() <= tol_change or abs(loss - loss_prev) < tol_change:
                break

        state.update(d=d, t=t, H_diag=h_diag, prev_flat_grad=g_prev, prev_loss=loss_prev)
        return first_loss

    def _at(self, closure, x0, t, d):
        """Loss and gradient at x0 + t d (the line search's trial points)."""
        self._set(x0 + t * d)
        return self._evaluate(closure)

    @staticmethod
    def _remember(s, y, steps, changes, rho, h_diag, history_size):
        """Add the pair (s, y) when it has positive curvature; the new H0 scale."""
        ys = float(y @ s)
        if ys <= 1e-10:
            return h_diag
        if len(steps) == history_size:
            steps.pop(0), changes.pop(0), rho.pop(0)
        steps.append(s)
        changes.append(y)
        rho.append(1.0 / ys)
        return ys / float(y @ y)


def _dtype(p):
    return np.dtype(p.dtype)


def _two_loop(q, steps, changes, rho, h_diag):
    """H q by the two-loop recursion (Nocedal & Wright, Algorithm 7.4), H0 = h_diag * I.
    Called with q = -g (a new vector, which becomes the result) it gives the search direction
    -H g. The updates run in place through one scratch vector: ``q = q - alpha * y`` would
    allocate two vectors per pair, and with a long history of large vectors the allocations
    cost more than the arithmetic."""
    scratch, alphas = np.empty_like(q), []
    for s, y, r in zip(reversed(steps), reversed(changes), reversed(rho)):
        alpha = r * float(s @ q)
        q -= np.multiply(y, alpha, out=scratch)
        alphas.append(alpha)
    q *= h_diag
    for s, y, r, alpha in zip(steps, changes, rho, reversed(alphas)):
        beta = r * float(y @ q)
        q += np.multiply(s, alpha - beta, out=scratch)
    return q


def _cubic_minimum(a, fa, ga, b, fb, gb):
    """The minimiser of the cubic through (a, fa, ga) and (b, fb, gb) (Nocedal & Wright
    eq. 3.59), kept inside [min(a, b), max(a, b)]; the midpoint when the cubic has none."""
    d1 = ga + gb - 3 * (fa - fb) / (a - b)
    square = d1 * d1 - ga * gb
    if square < 0:
        return (a + b) / 2
    d2 = np.sign(b - a) * np.sqrt(square)
    x = b - (b - a) * (gb + d2 - d1) / (gb - ga + 2 * d2)
    return float(min(max(x, min(a, b)), max(a, b)))


def _strong_wolfe(phi, d, f0, slope0, t, tol_change, c1=1e-4, c2=0.9, max_evals=25):
    """A step t along d satisfying the strong Wolfe conditions
    f(t) <= f(0) + c1 t f'(0) (sufficient decrease) and |f'(t)| <= c2 |f'(0)| (curvature),
    by Nocedal & Wright's Algorithm 3.5: try t, 2t, 4t, ... until [previous, current] brackets
    such a step, then :func:`_zoom`. ``phi(t)`` gives (loss, gradient) at x + t d, f'(t) is
    gradient'd. Returns (loss, gradient, t, closure calls)."""
    evals = 0
    previous = (0.0, f0, slope0, None)
    while True:
        f, g = phi(t)
        evals += 1
        current = (t, f, float(g @ d), g)
        if f > f0 + c1 * t * slope0 or (evals > 1 and f >= previous[1]):
            return _zoom(phi, d, f0, slope0, previous, current, evals, tol_change, c1, c2,
                         max_evals)
        if abs(current[2]) <= -c2 * slope0:
            return f, g, t, evals
        if current[2] >= 0:  # past a minimum along d
            return _zoom(phi, d, f0, slope0, current, previous, evals, tol_change, c1, c2,
                         max_evals)
        if evals >= max_evals:
            return f, g, t, evals
        previous, t = current, 2 * t


def _zoom(phi, d, f0, slope0, lo, hi, evals, tol_change, c1, c2, max_evals):
    """Nocedal & Wright's Algorithm 3.6: ``lo`` and ``hi`` (each (t, f, f'(t), gradient))
    bracket a strong-Wolfe step, ``lo`` the one with the lower loss that satisfies sufficient
    decrease; trial points from the cubic through both ends (bisection when the cubic's
    minimiser is within 10% of the bracket of an end) shrink the bracket until a trial
    satisfies both conditions, the bracket is below ``tol_change`` or ``max_evals`` is
    reached (then the best point found, ``lo``)."""
    while evals < max_evals:
        (t_lo, f_lo, s_lo, _), (t_hi, f_hi, s_hi, _) = lo, hi
        width = abs(t_hi - t_lo)
        if width * np.abs(d).max() < tol_change:
            break
        t = _cubic_minimum(t_lo, f_lo, s_lo, t_hi, f_hi, s_hi)
        if min(abs(t - t_lo), abs(t - t_hi)) < 0.1 * width:
            t = (t_lo + t_hi) / 2
        f, g = phi(t)
        evals += 1
        trial = (t, f, float(g @ d), g)
        if f > f0 + c1 * t * slope0 or f >= f_lo:
            hi = trial
        else:
            if abs(trial[2]) <= -c2 * slope0:
                return f, g, t, evals
            if trial[2] * (t_hi - t_lo) >= 0:
                hi = lo
            lo = trial
    t, f, _, g = lo
    if g is None:  # no trial point was better than the start: stay there
        f, g = phi(t)
        evals += 1
    return f, g, t, evals
