"""``gradcheck``: analytical gradients against central differences, in float64 on cpu."""
from __future__ import annotations

import numpy as np

from .function import TensorBase
from .grad_mode import no_grad


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0):
    """Check ``fn``'s analytical gradients against central differences, in float64 on cpu.

    Projects the output on a random vector ``v`` (as PyTorch's fast mode does): the gradient
    of ``sum(fn(x) * v)`` from backward must equal its numerical derivative with respect to
    every element of every input that requires grad. Returns True or raises AssertionError
    naming the input and the element that disagree.
    """
    rng = np.random.default_rng(seed)
    hosts = [t.detach().cpu().numpy().astype(np.float64) if isinstance(t, TensorBase) else t
             for t in inputs]
    wants = [isinstance(t, TensorBase) and t.requires_grad for t in inputs]
    if True not in wants:
        raise AssertionError("gradcheck: no output requires grad")
    like = inputs[wants.index(True)]  # builds the float64 cpu inputs (Tensor._from_array)

    def build(values):
        return [like._from_array(v, "cpu", requires_grad=w) if w else
                (like._from_array(v, "cpu") if isinstance(v, np.ndarray) else v)
                for v, w in zip(values, wants)]

    def outputs(values):
        out = fn(*build(values))
        return out if isinstance(out, (tuple, list)) else (out,)

    outs = outputs(hosts)
    projections = [rng.standard_normal(tuple(o.shape)) for o in outs]

    def projected(values):
        with no_grad():
            return sum(float((o.detach().numpy().astype(np.float64) * v).sum())
                       for o, v in zip(outputs(values), projections))

    args = build(hosts)
    out = fn(*args)
    out = out if isinstance(out, (tuple, list)) else (out,)
    total = None
    for o, v in zip(out, projections):
        if not o.requires_grad:
            continue
        term = (o * like._from_array(v, "cpu")).sum()
        total = term if total is None else total + term
    if total is None:
        raise AssertionError("gradcheck: no output requires grad")
    total.backward()

    for k, (arg, want) in enumerate(zip(args, wants)):
        if not want:
            continue
        analytical = (np.zeros(hosts[k].shape) if arg.grad is None
                      else arg.grad.numpy().astype(np.float64))
        numerical = np.zeros(hosts[k].shape)
        flat = numerical.reshape(-1)
        for i in range(flat.size):
            shifted = [h.copy() if isinstance(h, np.ndarray) else h for h in hosts]
            shifted[k].reshape(-1)[i] += eps
            plus = projected(shifted)
            shifted[k].reshape(-1)[i] -= 2 * eps
            minus = projected(shifted)
            flat[i] = (plus - minus) / (2 * eps)
        if not np.allclose(analytical, numerical, atol=atol, rtol=rtol):
            worst = np.unravel_index(np.argmax(np.abs(analytical - numerical)), numerical.shape)
            raise AssertionError(
                f"gradcheck: input {k} gradient mismatch at {tuple(int(i) for i in worst)}: "
                f"analytical {analytical[worst]:.6g} vs numerical {numerical[worst]:.6g}\n"
                f"analytical=\n{analytical}\nnumerical=\n{numerical}")
    return True
