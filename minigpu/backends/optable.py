"""The elementwise op table: every unary and binary map of the engine, written once.

One :class:`Op` per map: its name, its exact semantics (the contract's words), its NumPy
reference (what the cpu backend runs and the tests compare the cuda kernels to), and its
derivative, and its one-element form, which the cuda backend compiles as the op's device
function (see "Adding an op"). Everything else derives from this table:

- ``contract.UNARY_OPS`` / ``BINARY_OPS`` (the primitive list) and ``contract.result_dtype``;
- the cpu backend's maps (``backends/cpu/elementwise.py``);
- the cuda backend's op tables (``backends/cuda/elementwise.py``, one device function per op);
- the differentiable ops (``ops/elementwise.py``: one ``Function`` per op with a derivative,
  one gradient rule for every binary op) and, for ``method=True``, the ``minigpu.<name>``
  function and the ``Tensor.<name>`` method (registered by ``ops/elementwise.py``).

Adding an op: one entry here. Its one-element form, what the cuda backend compiles as the
device function, is the NumPy form itself when that is plain arithmetic (``shared=True``), else
the ``scalar`` function (``math`` functions, ``np.float32(c)`` constants). A device function is
written by hand in ``backends/cuda/elementwise.py`` only where it teaches something (a select,
NaN propagation, split constants, a shared sub-function); then the entry has no ``scalar``, so
each op keeps one definition. ``a`` and ``b`` are the scalar parameters alpha and beta of the
primitive call.

The derivative is a formula, as the semantics are: text, written once, in the upstream gradient
``g``, the input(s) ``x`` (``y``) and, for unary ops, the output ``y`` and the parameters ``a``,
``b`` (``"g * cos(x)"``; ``"0"`` for a piecewise-constant op; lines ``t = ...`` before the
last may name parts it uses twice). It names the public functions of the table ops (``exp``, ``sigmoid``,
``sign``, ...), ``where``, ``clamp`` and this module's constants, and it is compiled into the
op's backward by ``ops/elementwise.py`` (floor 4, where Tensors are): this module holds no code
that runs on Tensors. ``fused="relu_grad"`` names a binary map of this table that computes the
first derivative in one kernel from ``g`` and the saved input or output (``saves``); the
formula then serves ``create_graph=True`` alone.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

SQRT1_2 = 0.7071067811865476            # 1 / sqrt(2)
INV_SQRT_2PI = 0.3989422804014327        # 1 / sqrt(2 pi)
TWO_OVER_SQRT_PI = 1.1283791670955126    # 2 / sqrt(pi), erf's slope at 0
SQRT_2_OVER_PI = 0.7978845608028654      # sqrt(2 / pi)
GELU_CUBIC = 0.044715                    # the tanh approximation's cubic coefficient


class Op(NamedTuple):
    name: str
    formula: str             # the exact semantics (the contract)
    numpy: Callable          # unary (x, a, b) / binary (x, y, a, b) on NumPy arrays
    grad: object = None      # the derivative's formula (module docstring): unary, one string
                             # in g, x, y, a, b; binary, a pair (d/dx, d/dy) in g, x, y; None:
                             # no gradient flows through it
    bool_result: bool = False  # comparisons: the output is bool
    method: bool = False     # a public ``minigpu.<name>(x)`` function and ``Tensor.<name>()``
    F: bool = False          # a public ``minigpu.nn.functional.<name>(x)`` function
    module: str = None       # the name of its ``minigpu.nn`` layer (for the op index)
    fused: str = None        # the binary map (g, saved x or y) that computes the first
                             # derivative in one kernel; ``grad`` then serves create_graph
    approx: bool = False     # the cuda result may differ from the NumPy form by rounding (math
                             # functions, a different order of operations): the tests compare
                             # within a tolerance (``tests/test_cuda_elementwise.py``'s TOL)
    scalar: Callable = None  # the op on one element, (x, a, b) -> y, compiled as the cuda device
                             # function (float32 constants as ``np.float32(c)``, math functions
                             # from ``math``); None when ``shared`` or when
                             # ``backends/cuda/elementwise.py`` writes the device function
    shared: bool = False     # the NumPy form is plain arithmetic (constants ``np.float32(c)``),
                             # valid on one element too: it is also the cuda device function,
                             # the op's one definition
    float_input: bool = True  # integer tensors become float32 first (``exp(int)`` is float)
    integer: bool = False    # integer and bool tensors only (the bitwise ops)
    saves: str = "xy"        # which of the input(s) x (and y) / output y the derivative reads:
                             # only those are saved for backward, so only an in-place change
                             # to those makes backward refuse (PyTorch's rule)
    # the test contract (``tests/test_optable.py``, and for a public op the registry's
    # generic suite, ``tests/test_registered_ops.py``):
    domain: str = "real"     # the inputs it is defined on: "real", "positive" (drawn values
                             # > 0: log, sqrt), None (integers: the bitwise ops)
    params: tuple = (0.0, 0.0)  # the a, b the tests call it with (a slope, a clamp's bounds)
    signed_zeros: bool = True  # its zeros have torch's signs (False: torch's sign of a zero
                               # is an artefact of its formula, docs/pytorch_compat.md)
    out: bool = True         # ``minigpu.<name>`` takes torch's ``out=`` (False: torch's has none)


# One-element forms (``Op.scalar``): each is compiled as its op's cuda device function.
# ``math.exp`` is libdevice's ``expf`` in a float32 kernel (float32 stays float32), ``exp`` in
# a float64 one; under the simulator, while a kernel runs, this module's ``math`` is the IEEE
# version (``simulator/ieee.py``: ``floor(nan)`` is nan, ``log(0)`` is -inf, float32 stays
# float32). Constants are ``np.float32(c)``, which promote exactly in a float64 kernel.
# ``def``, not ``lambda``: the simulator's compiled path reads a device function's source.
def erf_scalar(x, a, b):
    return math.erf(x)


def exp_scalar(x, a, b):
    return math.exp(x)


def log_scalar(x, a, b):
    return math.log(x)


def sqrt_scalar(x, a, b):
    return math.sqrt(x)


def rsqrt_scalar(x, a, b):
    return np.float32(1) / math.sqrt(x)


def tanh_scalar(x, a, b):
    return math.tanh(x)


def sin_scalar(x, a, b):
    return math.sin(x)


def cos_scalar(x, a, b):
    return math.cos(x)


def log1p_scalar(x, a, b):
    return math.log1p(x)


def expm1_scalar(x, a, b):
    return math.expm1(x)


def floor_scalar(x, a, b):
    return math.floor(x)  # a float of x's type on the GPU (libdevice floorf), not an int


def ceil_scalar(x, a, b):
    return math.ceil(x)


def trunc_scalar(x, a, b):
    return math.trunc(x)


def isnan_scalar(x, a, b):
    return x != x  # NaN is the one value unequal to itself


def isinf_scalar(x, a, b):
    return abs(x) == np.float32(math.inf)


def elu_scalar(x, a, b):
    return x if x > np.float32(0) else a * math.expm1(x)


def floor_divide_scalar(x, y, a, b):
    return x // y  # Numba lowers float // like CPython's float_divmod: NumPy's floor_divide


def remainder_scalar(x, y, a, b):
    """The sign of y, like Python's %; a zero result has the sign of x (``x * 0``), as
    PyTorch's (which adds y to ``fmod(x, y)`` where their signs differ)."""
    mod = x % y
    return x * np.float32(0) if mod == 0 else mod


def clamp_grad_scalar(x, y, a, b):
    return x if (y >= a and y <= b) else np.float32(0)


def elu_grad_scalar(x, y, a, b):
    return x if y > np.float32(0) else x * a * math.exp(y)


def hardswish_scalar(x, a, b):
    """x * relu6(x + 3) / 6 on one element (the cuda device function)."""
    return x * min(max(x + np.float32(3), np.float32(0)), np.float32(6)) / np.float32(6)


def mish_scalar(x, a, b):
    """x * tanh(log(1 + exp(x))) on one element (exp overflowing to inf gives x, as it should)."""
    return x * math.tanh(math.log1p(math.exp(x)))


UNARY = (
    Op("neg", "-x", lambda x, a, b: -x, "-g",
       method=True, float_input=False, saves="", shared=True),
    Op("exp", "exp(x)", lambda x, a, b: np.exp(x), "g * y", method=True,
       saves="y", approx=True, scalar=exp_scalar),
    Op("log", "log(x)", lambda x, a, b: np.log(x), "g / x", method=True,
       saves="x", approx=True, scalar=log_scalar, domain="positive"),
    Op("sqrt", "sqrt(x)", lambda x, a, b: np.sqrt(x),
       "g / (y * 2)", method=True, saves="y", approx=True,
       scalar=sqrt_scalar, domain="positive"),
    Op("rsqrt", "1 / sqrt(x)  (two roundings, as PyTorch's cpu: not x ** -0.5, which is 0 "
       "at -inf)", lambda x, a, b: 1 / np.sqrt(x), "g * y * y * y * -0.5",
       method=True, saves="y", approx=True, scalar=rsqrt_scalar, domain="positive"),
    Op("square", "x * x", lambda x, a, b: x * x, "g * x * 2",
       method=True, float_input=False, saves="x", shared=True),
    Op("tanh", "tanh(x)", lambda x, a, b: np.tanh(x),
       "g * (1 - y * y)", fused="tanh_grad", method=True, module="Tanh",
       saves="y", approx=True, scalar=tanh_scalar),
    Op("sigmoid", "1 / (1 + exp(-x)), computed without overflow for large |x|",
       lambda x, a, b: sigmoid(x), "g * y * (1 - y)", fused="sigmoid_grad",
       method=True, module="Sigmoid", saves="y", approx=True),
    Op("relu", "0 if x < 0 else x  (NaN and -0.0 kept, as PyTorch)",
       lambda x, a, b: select(~(x < 0), x),
       "where(y > 0, g, 0)", fused="relu_grad", method=True,
       module="ReLU", float_input=False, saves="y", out=False),  # y > 0 exactly where x > 0
    Op("leaky_relu", "x if x > 0 else a*x", lambda x, a, b: select(x > 0, x, a * x),
       "where(x > 0, g, g * a)", fused="leaky_relu_grad", saves="x",
       params=(0.1, 0.0)),
    Op("abs", "|x|", lambda x, a, b: abs(x), "g * sign(x)",
       method=True, float_input=False, saves="x", shared=True),
    Op("sign", "-1, 0 or 1  (0 for NaN and for -0.0, as PyTorch)", lambda x, a, b: sign(x),
       "0", method=True, float_input=False, saves=""),
    Op("affine", "a*x + b  (x+3, 2*x, 3-x all use this)", lambda x, a, b: a * x + b,
       "g * a", saves="", approx=True, shared=True, params=(2.0, 3.0)),
    Op("div_scalar", "x / a  (x/255: a division, as PyTorch's cpu device, not x * (1/a))",
       lambda x, a, b: x / a, "g / a", saves="", approx=True, shared=True,
       params=(-1.5, 0.0)),
    Op("rdiv", "a / x", lambda x, a, b: a / x, "-g * y / x",
       approx=True, shared=True, domain="positive", params=(2.0, 0.0)),
    Op("pow", "x ** a", lambda x, a, b: x ** a,
       "g * 0.0 if a == 0 else g * x ** (a - 1) * a", saves="x", approx=True,
       shared=True, domain="positive", params=(2.5, 0.0)),
    Op("rpow", "a ** x", lambda x, a, b: a ** x,
       "g * y * math.log(a)", saves="y", approx=True, shared=True,
       params=(1.5, 0.0)),
    Op("clamp", "y = a if x < a else x, then b if y > b else y  (a=-inf / b=inf for a "
       "one-sided clamp; NaN and -0.0 kept, as PyTorch)", lambda x, a, b: clamp(x, a, b),
       "where((x >= a) & (x <= b), g, 0)", fused="clamp_grad", saves="x",
       params=(-0.7, 1.5)),
    Op("gt", "x > a  -> bool", lambda x, a, b: x > a, bool_result=True, shared=True,
       params=(0.5, 0.0)),
    Op("ge", "x >= a -> bool", lambda x, a, b: x >= a, bool_result=True, shared=True,
       params=(0.5, 0.0)),
    Op("lt", "x < a  -> bool", lambda x, a, b: x < a, bool_result=True, shared=True,
       params=(0.5, 0.0)),
    Op("le", "x <= a -> bool", lambda x, a, b: x <= a, bool_result=True, shared=True,
       params=(0.5, 0.0)),
    Op("eq", "x == a -> bool", lambda x, a, b: x == a, bool_result=True, shared=True,
       params=(0.5, 0.0)),
    Op("ne", "x != a -> bool", lambda x, a, b: x != a, bool_result=True, shared=True,
       params=(0.5, 0.0)),
    # math functions, rounding, predicates and activations
    Op("sin", "sin(x)", lambda x, a, b: np.sin(x), "g * cos(x)",
       method=True, saves="x", approx=True, scalar=sin_scalar),
    Op("cos", "cos(x)", lambda x, a, b: np.cos(x), "-g * sin(x)",
       method=True, saves="x", approx=True, scalar=cos_scalar),
    Op("log1p", "log(1 + x), accurate for small |x|", lambda x, a, b: np.log1p(x),
       "g / (x + 1)", method=True, saves="x", approx=True,
       scalar=log1p_scalar, domain="positive"),
    Op("expm1", "exp(x) - 1, accurate for small |x|", lambda x, a, b: np.expm1(x),
       "g * (y + 1)", method=True, saves="y", approx=True,
       scalar=expm1_scalar),
    Op("floor", "the largest integer <= x (a float)", lambda x, a, b: np.floor(x), "0",
       method=True, float_input=False, saves="", scalar=floor_scalar),
    Op("ceil", "the smallest integer >= x (a float)", lambda x, a, b: np.ceil(x), "0",
       method=True, float_input=False, saves="", scalar=ceil_scalar),
    Op("round", "x rounded to the nearest integer, halves to even", lambda x, a, b: np.round(x),
       "0", method=True, float_input=False, saves=""),
    Op("trunc", "x rounded toward zero", lambda x, a, b: np.trunc(x), "0",
       method=True, float_input=False, saves="", scalar=trunc_scalar),
    Op("isnan", "x != x  -> bool", lambda x, a, b: np.isnan(x), bool_result=True, method=True,
       float_input=False, scalar=isnan_scalar, out=False),
    Op("isinf", "|x| == inf  -> bool", lambda x, a, b: np.isinf(x), bool_result=True,
       method=True, float_input=False, scalar=isinf_scalar, out=False),
    Op("erf", "erf(x) = 2/sqrt(pi) * integral of exp(-t^2) from 0 to x", lambda x, a, b: _erf(x),
       "g * exp(x * x * -1) * TWO_OVER_SQRT_PI", method=True, saves="x",
       approx=True, scalar=erf_scalar),
    Op("gelu", "x * Phi(x) = x/2 * (1 + erf(x / sqrt(2)))  (exact GELU)",
       lambda x, a, b: gelu(x),
       "g * (erf(x * SQRT1_2) * 0.5 + 0.5 + x * exp(x * x * -0.5) * INV_SQRT_2PI)",
       fused="gelu_grad", saves="x",
       approx=True),
    Op("gelu_tanh", "x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))  (approximate GELU)",
       lambda x, a, b: gelu_tanh(x),
       """t = tanh((x + x * x * x * GELU_CUBIC) * SQRT_2_OVER_PI)
          du = (x * x * (3 * GELU_CUBIC) + 1) * SQRT_2_OVER_PI
          g * ((t + 1) * 0.5 + x * 0.5 * (1 - t * t) * du)""",
       fused="gelu_tanh_grad",
       saves="x", approx=True),
    Op("silu", "x * sigmoid(x)", lambda x, a, b: x * sigmoid(x),
       """s = sigmoid(x)
          g * s * (1 + x * (1 - s))""", fused="silu_grad", saves="x", approx=True),
    Op("softplus", "log(1 + exp(a*x)) / a, or x where a*x > b  (beta=a, threshold=b)",
       lambda x, a, b: softplus(x, a, b), "where(x * a > b, g, g * sigmoid(x * a))",
       fused="softplus_grad",
       saves="x", approx=True, params=(1.5, 2.0)),
    Op("elu", "x if x > 0 else a * (exp(x) - 1)  (alpha=a)",
       lambda x, a, b: select(x > 0, x, a * np.expm1(x)),
       "where(x > 0, g, g * exp(clamp(x, max=0)) * a)", fused="elu_grad",
       saves="x", approx=True, scalar=elu_scalar,
       params=(0.7, 0.0)),
    Op("hardswish", "x * min(max(x + 3, 0), 6) / 6", lambda x, a, b: x * np.clip(x + 3, 0, 6) / 6,
       "where((x >= -3) & (x <= 3), g * (x / 3 + 0.5), where(x > 3, g, 0))",
       F=True, module="Hardswish", scalar=hardswish_scalar, saves="x"),
    Op("mish", "x * tanh(log(1 + exp(x)))", lambda x, a, b: x * np.tanh(np.logaddexp(0, x)),
       """t = tanh(log1p(exp(x)))
          g * (t + x * (1 - t * t) * sigmoid(x))""",
       F=True, module="Mish", scalar=mish_scalar, saves="x", approx=True),
)

BINARY = (
    Op("add", "x + y", lambda x, y, a, b: x + y,
       ("g", "g"), saves="", shared=True),
    Op("sub", "x - y", lambda x, y, a, b: x - y,
       ("g", "-g"), saves="", shared=True),
    Op("mul", "x * y", lambda x, y, a, b: x * y,
       ("g * y", "g * x"), shared=True),
    Op("div", "x / y", lambda x, y, a, b: x / y,
       ("g / y", "-(g / y) * x / y"), shared=True),
    Op("pow", "x ** y", lambda x, y, a, b: x ** y,
       ("g * y * x ** (y - 1)", "g * x ** y * log(x)"), approx=True,
       shared=True),
    Op("maximum", "max(x, y)", lambda x, y, a, b: np.maximum(x, y),
       ("where(x >= y, g, 0)", "where(x >= y, 0, g)"), method=True, float_input=False),
    Op("minimum", "min(x, y)", lambda x, y, a, b: np.minimum(x, y),
       ("where(x <= y, g, 0)", "where(x <= y, 0, g)"), method=True, float_input=False),
    Op("gt", "x > y  -> bool", lambda x, y, a, b: x > y, bool_result=True, shared=True),
    Op("ge", "x >= y -> bool", lambda x, y, a, b: x >= y, bool_result=True, shared=True),
    Op("lt", "x < y  -> bool", lambda x, y, a, b: x < y, bool_result=True, shared=True),
    Op("le", "x <= y -> bool", lambda x, y, a, b: x <= y, bool_result=True, shared=True),
    Op("eq", "x == y -> bool", lambda x, y, a, b: x == y, bool_result=True, shared=True),
    Op("ne", "x != y -> bool", lambda x, y, a, b: x != y, bool_result=True, shared=True),
    Op("floor_divide", "floor(x / y)  (Python's //: rounds toward -inf)",
       lambda x, y, a, b: np.floor_divide(x, y),
       ("0", "0"), method=True, float_input=False,
       saves="", scalar=floor_divide_scalar),
    Op("remainder", "x - floor(x / y) * y  (Python's %: the sign of y; a zero has x's sign)",
       lambda x, y, a, b: remainder(x, y),
       ("g", "-g * floor_divide(x, y)"), method=True,
       float_input=False, scalar=remainder_scalar),
    # Integer and bool only (``ops/elementwise.py`` refuses floats, as PyTorch): the NumPy
    # form is also the one-element form the cuda kernel compiles.
    *(Op(name, f"x {sym} y  (integers and bool; shifts: integers)", form, shared=True,
         float_input=False, integer=True, domain=None)
      for name, sym, form in (
          ("bitwise_and", "&", lambda x, y, a, b: x & y),
          ("bitwise_or", "|", lambda x, y, a, b: x | y),
          ("bitwise_xor", "^", lambda x, y, a, b: x ^ y),
          ("bitwise_left_shift", "<<", lambda x, y, a, b: x << y),
          ("bitwise_right_shift", ">>", lambda x, y, a, b: x >> y))),
    # Fused backward maps: one pass instead of building a mask and multiplying.
    Op("relu_grad", "x (the upstream grad) where y > 0 else 0   (y = relu input or output)",
       lambda x, y, a, b: select(y > 0, x)),
    Op("leaky_relu_grad", "x where y > 0 else a*x   (y = input)",
       lambda x, y, a, b: select(y > 0, x, a * x), params=(0.1, 0.0)),
    Op("tanh_grad", "x * (1 - y*y)   (y = tanh output)",
       lambda x, y, a, b: x * (np.float32(1) - y * y), approx=True, shared=True),
    Op("sigmoid_grad", "x * y * (1 - y)   (y = sigmoid output)",
       lambda x, y, a, b: x * y * (np.float32(1) - y), approx=True, shared=True),
    Op("clamp_grad", "x where a <= y <= b else 0   (y = clamp input)",
       lambda x, y, a, b: select((y >= a) & (y <= b), x), scalar=clamp_grad_scalar,
       params=(-0.7, 1.5)),
    Op("gelu_grad", "x * (Phi(y) + y * phi(y))   (y = gelu input)",
       lambda x, y, a, b: gelu_grad(x, y), approx=True),
    Op("gelu_tanh_grad", "x * d/dy gelu_tanh(y)   (y = input)",
       lambda x, y, a, b: gelu_tanh_grad(x, y), approx=True),
    Op("silu_grad", "x * s * (1 + y * (1 - s)), s = sigmoid(y)   (y = input)",
       lambda x, y, a, b: x * sigmoid(y) * (1 + y * (1 - sigmoid(y))), approx=True),
    Op("softplus_grad", "x * sigmoid(a*y), or x where a*y > b   (y = input)",
       lambda x, y, a, b: select(y * a > b, x, x * sigmoid(y * a)), approx=True, params=(1.5, 2.0)),
    Op("elu_grad", "x where y > 0 else x * a * exp(y)   (y = input)",
       lambda x, y, a, b: select(y > 0, x, x * a * np.exp(y)), approx=True,
       scalar=elu_grad_scalar, params=(0.7, 0.0)),
)

UNARY_BY_NAME = {op.name: op for op in UNARY}
BINARY_BY_NAME = {op.name: op for op in BINARY}


# --- the helpers of the NumPy forms (what the cpu backend runs) -----------------------------
_SAME_SIZE_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
SELECT_BY_BITS_FROM = 1 << 10
"""Arrays from this many elements select by bit masks (:func:`select`): with a new mask at
every call, as in training, ``np.where`` took 4.4 us at 1024 elements (the masks 2.2 us), 62 us
at 16384 (5.4 us), 0.9 us at 256 (1.9 us)."""


def select(cond, x, y=None):
    """``np.where(cond, x, y)`` (``y`` None: ``+0``), bit for bit. ``np.where`` branches per
    element: on a mask without runs (ReLU's over activations) the CPU mispredicts about half
    of them, and a 1.6-million-element ReLU gradient took 10 ms. For arrays ``x`` and ``y`` of
    one dtype, each element's bits are ANDed with an all-ones or all-zeros mask made from
    ``cond`` instead: a few branch-free passes, several times faster on large arrays (small
    ones keep ``np.where``, which makes fewer passes)."""
    x = np.asarray(x)
    if y is None:
        if np.size(cond) < SELECT_BY_BITS_FROM or x.dtype.itemsize not in _SAME_SIZE_UINT:
            return np.where(cond, x, 0)
    elif (np.size(cond) < SELECT_BY_BITS_FROM or not isinstance(y, np.ndarray)
          or y.dtype != x.dtype or x.dtype.itemsize not in _SAME_SIZE_UINT):
        return np.where(cond, x, y)
    bits = _SAME_SIZE_UINT[x.dtype.itemsize]
    keep = np.asarray(cond, np.bool_).view(np.uint8).astype(bits)
    np.negative(keep, out=keep)  # 1 -> all ones, 0 -> 0
    out = np.bitwise_and(x.view(bits), keep)
    if y is not None:
        np.invert(keep, out=keep)
        np.bitwise_and(keep, y.view(bits), out=keep)
        np.bitwise_or(out, keep, out=out)
    return out.view(x.dtype)


def sigmoid(x):
    """1 / (1 + exp(-x)) from e = exp(-|x|) only, so it never overflows; stays in x's dtype:
    1 / (1 + e) for x >= 0, e / (1 + e) below. The numerator is max(e, x >= 0) (1 where
    x >= 0, as e <= 1; e elsewhere; NaN stays NaN): one division and no select."""
    e = np.exp(-np.abs(x))
    return np.maximum(e, x >= 0) / (x.dtype.type(1) + e)


def _erf(x):
    """erf elementwise in x's dtype (NumPy has no erf ufunc; math.erf is exact to double)."""
    return np.vectorize(math.erf, otypes=[x.dtype])(x) if x.size else x.copy()


def _c(x, value):
    """A constant in x's dtype (float32 stays float32)."""
    return x.dtype.type(value)


def gelu(x):
    return _c(x, 0.5) * x * (1 + _erf(x * _c(x, SQRT1_2)))


def gelu_grad(g, x):
    """g * (Phi(x) + x * phi(x))."""
    cdf = _c(x, 0.5) * (1 + _erf(x * _c(x, SQRT1_2)))
    pdf = np.exp(_c(x, -0.5) * x * x) * _c(x, INV_SQRT_2PI)
    return g * (cdf + x * pdf)


def gelu_tanh(x):
    u = _c(x, SQRT_2_OVER_PI) * (x + _c(x, GELU_CUBIC) * x * x * x)
    return _c(x, 0.5) * x * (1 + np.tanh(u))


def gelu_tanh_grad(g, x):
    t = np.tanh(_c(x, SQRT_2_OVER_PI) * (x + _c(x, GELU_CUBIC) * x * x * x))
    du = _c(x, SQRT_2_OVER_PI) * (1 + _c(x, 3 * GELU_CUBIC) * x * x)
    return g * (_c(x, 0.5) * (1 + t) + _c(x, 0.5) * x * (1 - t * t) * du)


def softplus(x, beta, threshold):
    z = x * beta
    with np.errstate(over="ignore"):
        return select(z > threshold, x, (np.log1p(np.exp(z)) / beta).astype(x.dtype))


def clamp(x, a, b):
    """The clamp's selects: x where it is not below a (NaN, and -0.0 against a 0 bound, stay),
    then b where that is above b."""
    y = np.where(x < a, a, x)
    return np.where(y > b, b, y)


def sign(x):
    """-1, 0 or 1 in x's dtype, PyTorch's: 0 for NaN and for -0.0 (``np.sign`` keeps both)."""
    return np.where(x == x, np.sign(x), 0).astype(x.dtype, copy=False) + x.dtype.type(0)


def remainder(x, y):
    """``remainder_scalar`` on arrays: NumPy's remainder, zeros signed as x."""
    mod = np.remainder(x, y)
    with np.errstate(invalid="ignore"):
        return np.where(mod == 0, x * 0, mod)
