"""Activations beyond relu/tanh/sigmoid: GELU (exact and tanh), SiLU, Softplus, ELU.

Each is one op of the table (``backends/optable.py``) with a fused backward map, so the forward
is one kernel and the backward another, whatever the formula's length.
"""
from __future__ import annotations

from .common import as_float
from .elementwise import UNARY_FUNCTIONS
from .registry import op

Gelu, GeluTanh, Silu, Softplus, Elu = (
    UNARY_FUNCTIONS[n] for n in ("gelu", "gelu_tanh", "silu", "softplus", "elu"))


@op(method=False, F=True, module="GELU", signed_zeros=False,
    example=lambda r: (r.standard_normal((3, 5)),))
def gelu(input, approximate="none"):
    """x * Phi(x), Phi the standard normal cdf; ``approximate="tanh"`` uses
    x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return (Gelu if approximate == "none" else GeluTanh).apply(as_float(input))


@op(method=False, F=True, module="SiLU", example=lambda r: (r.standard_normal((3, 5)),))
def silu(input):
    """x * sigmoid(x) (also called swish)."""
    return Silu.apply(as_float(input))


@op(method=False, F=True, module="Softplus",
    example=lambda r: (r.standard_normal((3, 5)), 1.5, 2.0))
def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""
    return Softplus.apply(as_float(input), alpha=float(beta), beta=float(threshold))


@op(method=False, module="ELU", torch="F.elu", example=lambda r: (r.standard_normal((3, 5)), 0.7))
def elu(input, alpha=1.0):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return Elu.apply(as_float(input), alpha=float(alpha))
