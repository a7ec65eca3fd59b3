"""Loss functions, with PyTorch's formulas, gradients, reductions and error messages.

Every loss first computes one loss value per element (or per row, for the class losses) and
then reduces it with ordinary differentiable ops (``'mean'``, ``'sum'`` or ``'none'``).

* ``mse_loss`` composes ``(input - target)**2`` from elementwise ops; autograd does the rest.
* ``binary_cross_entropy`` and ``binary_cross_entropy_with_logits`` are Functions whose
  forward composes elementwise ops (no graph recorded inside) and whose backward is the closed
  form PyTorch uses: ``(x - t) / max(x(1-x), 1e-12)`` for BCE and ``sigmoid(x) - t`` for the
  logits version. The closed forms matter: BCE clamps its logs at -100 (so ``log(0)`` is
  finite) and differentiating the clamp would give a zero gradient exactly where the loss is
  worst; the logits version is computed as ``(1-t)*x + softplus(-x)``, stable for any x.
* ``cross_entropy`` (integer class targets) is one fused Function over rows (R, C):
  forward ``loss_r = -log_softmax(x_r)[t_r]`` with one ``softmax(log=True)`` and one
  ``gather``; backward ``softmax(x_r) - onehot(t_r)`` with one ``scatter``, never building
  a one-hot matrix in the forward pass. ``nll_loss`` is the gather/scatter half alone.
  Both handle ``weight``, ``ignore_index`` and (cross_entropy) ``label_smoothing`` exactly as
  PyTorch, including ``'mean'`` dividing by the summed weights of the non-ignored targets.
"""
from __future__ import annotations

import warnings

from ..autograd import Function, is_grad_enabled, no_grad
from ..dtypes import autocast_cast
from ..tensor import Tensor, int64
from . import elementwise as ew
from .common import check_same_device
from .reduce import picked
from .registry import op
from .shape import contiguous, stack, sum_to
from .softmax import _rows, log_softmax

_EPSILON = 1e-12  # PyTorch's floor for x*(1-x) in the BCE gradient


def legacy_reduction(size_average, reduce, reduction):
    """Map the deprecated ``size_average``/``reduce`` arguments to ``reduction``."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    result = ("mean" if size_average else "sum") if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use "
                  f"reduction='{result}' instead.", stacklevel=3)
    return result


def _check_reduction(reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_float(name, *tensors):
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): expected Tensor arguments, got {type(t).__name__}")
    check_same_device(*tensors)


# --- regression ----------------------------------------------------------------------------------
def _warn_broadcast(input, target, stacklevel=3):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({tuple(target.shape)}) that is different to the "
                      f"input size ({tuple(input.shape)}). This will likely lead to incorrect "
                      f"results due to broadcasting. Please ensure they have the same size.",
                      stacklevel=stacklevel)


@op(method=False, F=True, module="MSELoss",
    example=lambda r: (r.standard_normal((3, 4)), r.standard_normal((3, 4))))
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean squared error; composed of elementwise ops, differentiable in both arguments."""
    input, target = autocast_cast("mse_loss", input, target)
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_float("mse_loss", input, target)
    _warn_broadcast(input, target)
    diff = input - target
    return _reduce(diff * diff, reduction)


# --- binary classification ------------------------------------------------------------------------
class BinaryCrossEntropy(Function):
    """Elementwise ``-(t*log(x) + (1-t)*log(1-x))``, each log clamped at -100."""

    def forward(self, x, t):
        with no_grad():
            log_x = ew.clamp(ew.log(x), min=-100.0)
            log_1mx = ew.clamp(ew.log(1.0 - x), min=-100.0)
            loss = -(log_1mx + t * (log_x - log_1mx))
        self.save_for_backward(x, t, log_x, log_1mx)
        return loss

    differentiable_backward = True  # Tensor ops (the logs recomputed under create_graph)

    def backward(self, g):
        x, t, log_x, log_1mx = self.saved_tensors
        if is_grad_enabled():  # create_graph: the logs as recorded functions of x
            log_x = ew.clamp(ew.log(x), min=-100.0)
            log_1mx = ew.clamp(ew.log(1.0 - x), min=-100.0)
        gx = gt = None
        if self.needs_input_grad[0]:
            gx = g * (x - t) / ew.clamp(x * (1.0 - x), min=_EPSILON)
        if self.needs_input_grad[1]:
            gt = g * (log_1mx - log_x)
        return gx, gt


def _same_size(name, input, target):
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"{name}: Using a target size ({tuple(target.shape)}) that is "
                         f"different to the input size ({tuple(input.shape)}) is deprecated. "
                         f"Please ensure they have the same size.")


@op(method=False, F=True, module="BCELoss", domain="unit",
    example=lambda r: (r.uniform(0.05, 0.95, (3, 4)), r.uniform(0, 1, (3, 4))))
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """BCE on probabilities ``input`` in [0, 1]; logs clamped at -100 like PyTorch."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_float("binary_cross_entropy", input, target)
    _same_size("binary_cross_entropy", input, target)
    with no_grad():  # like PyTorch's cpu check (its cuda kernel asserts); NaN fails too
        if not (input.clamp(0.0, 1.0) == input).all().item():
            raise RuntimeError("all elements of input should be between 0 and 1")
    loss = BinaryCrossEntropy.apply(input, target.to(input.dtype))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


class BCEWithLogits(Function):
    """Elementwise ``-(pw*t*log(sigmoid(x)) + (1-t)*log(1-sigmoid(x)))``, computed stably as
    ``(1-t)*x + (1 + (pw-1)*t) * softplus(-x)`` with ``softplus(z) = relu(z) +
    log(1 + exp(-|z|))`` (no exp of a large positive number anywhere)."""

    def forward(self, x, t, pos_weight):
        with no_grad():
            sp_neg = ew.relu(-x) + ew.log(ew.exp(-ew.abs(x)) + 1.0)  # softplus(-x)
            if pos_weight is None:
                loss = (1.0 - t) * x + sp_neg
            else:
                loss = (1.0 - t) * x + ((pos_weight - 1.0) * t + 1.0) * sp_neg
        self.save_for_backward(x, t, pos_weight, sp_neg)
        return loss

    differentiable_backward = True  # Tensor ops (softplus recomputed under create_graph)

    def backward(self, g):
        x, t, pw, sp_neg = self.saved_tensors
        if is_grad_enabled():  # create_graph: softplus(-x) as a recorded function of x
            sp_neg = ew.relu(-x) + ew.log(ew.exp(-ew.abs(x)) + 1.0)
        gx = gt = gpw = None
        if self.needs_input_grad[0]:
            s = ew.sigmoid(x)
            gx = g * (s - t) if pw is None else g * (s * (pw * t + 1.0 - t) - pw * t)
            gx = sum_to(gx, x.shape)
        if self.needs_input_grad[1]:
            gt = -g * x if pw is None else g * ((pw - 1.0) * sp_neg - x)
            gt = sum_to(gt, t.shape)
        if pw is not None and self.needs_input_grad[2]:
            gpw = sum_to(g * t * sp_neg, pw.shape)
        return gx, gt, gpw


@op(method=False, F=True, module="BCEWithLogitsLoss",
    example=lambda r: (r.standard_normal((3, 4)), r.uniform(0, 1, (3, 4))))
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """BCE on logits (sigmoid fused in, numerically stable); ``pos_weight`` weighs the
    positive term of each class (broadcast along the last dim)."""
    input, target = autocast_cast("binary_cross_entropy_with_logits", input, target)
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_float("binary_cross_entropy_with_logits", input, target)
    _same_size("binary_cross_entropy_with_logits", input, target)
    if pos_weight is not None:
        check_same_device(input, pos_weight)
        pos_weight = pos_weight.to(input.dtype)
    loss = BCEWithLogits.apply(input, target.to(input.dtype), pos_weight)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


# --- multi-class classification -------------------------------------------------------------------
def _rows_and_targets(name, input, target):
    """(R, C) rows with the class dim last, (R,) targets, and the shape of a per-row result."""
    if input.ndim == 0:
        raise ValueError(f"{name}: input must have at least one dimension (the classes)")
    if input.ndim == 1:
        if target.ndim != 0:
            raise ValueError(f"{name}: for an unbatched input of shape {tuple(input.shape)} "
                             f"expected a 0-D target, got shape {tuple(target.shape)}")
        return input.unsqueeze(0), target.reshape(1), ()
    n, c = input.shape[:2]
    expected = (n,) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        if target.ndim and target.shape[0] != n:
            raise ValueError(f"Expected input batch_size ({n}) to match target batch_size "
                             f"({target.shape[0]}).")
        raise RuntimeError(f"{name}: expected target of shape {expected} for input of shape "
                           f"{tuple(input.shape)}, got {tuple(target.shape)}")
    if input.ndim == 2:
        return input, target, (n,)
    order = (0,) + tuple(range(2, input.ndim)) + (1,)
    rows = contiguous(input.permute(*order)).reshape(-1, c)
    return rows, target.reshape(-1), expected


def _class_targets(name, rows, target, weight, ignore_index):
    """Per-row constants: targets with ignored ones replaced by 0 (safe to gather), the
    per-row weight ``coef = w[t] * (t != ignore_index)`` and the non-ignored mask as floats.
    Targets out of range raise IndexError (one device->host sync, as PyTorch's cpu check)."""
    if target.dtype != int64:
        raise RuntimeError(f"{name}: expected scalar type Long (int64) for class targets but "
                           f"found {target.dtype}")
    c = rows.shape[1]
    valid = target != ignore_index
    safe = ew.where(valid, target, 0)
    # (not inside a graph capture, which cannot read values: there a bad target is caught by
    # the gather, as PyTorch's cuda kernels do; docs/graphs.md)
    if safe.numel() and not getattr(safe.backend, "capturing", False):
        lo, hi = (int(v) for v in stack([safe.min(), safe.max()]).numpy())
        if lo < 0 or hi >= c:
            raise IndexError(f"{name}: Target {lo if lo < 0 else hi} is out of bounds: "
                             f"expected class indices in [0, {c - 1}] (or ignore_index="
                             f"{ignore_index}) for input with {c} classes")
    valid_f = valid.to(rows.dtype)
    if weight is None:
        return safe, valid_f, valid_f
    if weight.ndim != 1 or weight.shape[0] != c:
        raise RuntimeError(f"{name}: weight tensor should be defined either for all {c} classes "
                           f"or no classes but got weight tensor of shape: "
                           f"{list(weight.shape)}")
    check_same_device(rows, weight)
    table = contiguous(weight.detach().to(rows.dtype))
    picked = rows.backend.index_select(table._view()._replace(shape=(c, 1), strides=(1, 1)),
                                       safe._view())  # w[t]: the primitive, no range re-check
    coef = Tensor._dense(picked, tuple(safe.shape), rows.device) * valid_f
    return safe, coef, valid_f


def _gather(rows: Tensor, idx: Tensor) -> Tensor:
    """out[r] = rows[r, idx[r]] (the ``gather`` primitive)."""
    return Tensor._dense(rows.backend.gather(rows._view(), idx._view()), (rows.shape[0],),
                         rows.device)


def _scatter(idx: Tensor, src: Tensor, c: int) -> Tensor:
    """(R, C) zeros with out[r, idx[r]] = src[r] (the ``scatter`` primitive)."""
    src = contiguous(src)
    return Tensor._dense(src.backend.scatter(idx._view(), src._view(), c),
                         (src.shape[0], c), src.device)


class NLLLoss(Function):
    """loss_r = -coef_r * logp[r, t_r]; backward scatters -g*coef into the target columns."""

    def forward(self, logp, target, coef):
        self.classes = logp.shape[1]
        logp = contiguous(logp)
        with no_grad():
            loss = -_gather(logp, target) * coef
        self.save_for_backward(target, coef)
        return loss

    def backward(self, g):
        target, coef = self.saved_tensors
        return _scatter(target, -(g * coef), self.classes), None, None

    def unfused(self, logp, target, coef):
        """The unfused form: ``-coef_r * logp[r, target_r]`` (an ignored row's target may
        lie outside the classes: it picks nothing, and its coef is 0)."""
        return -picked(logp, 1, target.unsqueeze(1)) * coef


class CrossEntropy(Function):
    """Fused log_softmax + NLL (+ label smoothing) over rows (R, C).

    forward: ``logp = log_softmax(x)``; ``loss_r = (1-eps)*coef_r*(-logp[r, t_r]) +
    (eps/C)*valid_r*sum_c w_c*(-logp[r, c])`` (``w = 1`` without class weights).
    backward: ``grad[r, c] = p[r, c]*a_r - scatter(t, (1-eps)*g*coef)[r, c] -
    (eps/C)*g_r*valid_r*w_c`` with ``p = exp(logp)`` and ``a_r = g_r*((1-eps)*coef_r +
    (eps/C)*valid_r*sum(w))``: ``softmax - onehot`` when eps = 0 and there are no weights.
    """

    def forward(self, x, target, coef, valid, weight, smoothing):
        x, view = _rows(x)
        r, c = x.shape
        logp = Tensor._dense(x.backend.softmax(view, True), (r, c), x.device)
        self.smoothing, self.classes = smoothing, c
        with no_grad():
            loss = -_gather(logp, target) * coef
            if smoothing:
                weighted = logp if weight is None else logp * weight
                smooth = -weighted.sum(1) * valid
                loss = loss * (1.0 - smoothing) + smooth * (smoothing / c)
        self.save_for_backward(logp, target, coef, valid, weight)
        return loss

    def backward(self, g):
        logp, target, coef, valid, weight = self.saved_tensors
        eps, c = self.smoothing, self.classes
        p = ew.exp(logp)
        hit = g * coef
        if not eps:
            return p * hit.unsqueeze(1) - _scatter(target, hit, c), None, None, None, None, None
        total_w = float(c) if weight is None else weight.sum()
        gv = g * valid
        a = hit * (1.0 - eps) + gv * total_w * (eps / c)
        grad = p * a.unsqueeze(1) - _scatter(target, hit * (1.0 - eps), c)
        spread = gv.unsqueeze(1) * (eps / c)
        grad = grad - (spread if weight is None else spread * weight)
        return grad, None, None, None, None, None

    def unfused(self, x, target, coef, valid, weight, smoothing):
        """The unfused form over rows (the classes last): log_softmax, NLL, and
        label smoothing's spread."""
        logp = x.reshape(-1, x.shape[-1]).log_softmax(1)
        loss = NLLLoss.unfused(self, logp, target, coef)
        if smoothing:
            weighted = logp if weight is None else logp * weight
            c = x.shape[-1]
            loss = loss * (1.0 - smoothing) - weighted.sum(1) * valid * (smoothing / c)
        return loss


def _finish(loss, coef, reduction, shape):
    if reduction == "none":
        return loss.reshape(*shape)
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / coef.sum()


@op(method=False, F=True, module="CrossEntropyLoss",
    example=lambda r: (r.standard_normal((3, 5)), r.integers(0, 5, 3)))
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """``torch.nn.functional.cross_entropy`` on logits: input (N, C), (C,) or
    (N, C, d1, ...); target integer class indices (N,) / () / (N, d1, ...), or class
    probabilities of the input's shape (then composed from ``log_softmax``)."""
    input, target = autocast_cast("cross_entropy", input, target)
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_float("cross_entropy", input, target)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input.dtype.kind != "f":
        raise RuntimeError(f"cross_entropy: expected a floating point input, got {input.dtype}")
    if target.dtype.kind == "f" and tuple(target.shape) == tuple(input.shape):
        return _soft_cross_entropy(input, target, weight, reduction, label_smoothing)
    rows, flat_target, shape = _rows_and_targets("cross_entropy", input, target)
    with no_grad():
        safe, coef, valid = _class_targets("cross_entropy", rows, flat_target, weight,
                                           ignore_index)
        w = None if weight is None else weight.detach().to(rows.dtype)
    loss = CrossEntropy.apply(rows, safe, coef, valid, w, float(label_smoothing))
    return _finish(loss, coef, reduction, shape)


def _soft_cross_entropy(input, target, weight, reduction, smoothing):
    dim = 0 if input.ndim == 1 else 1
    c = input.shape[dim]
    if smoothing:
        target = target * (1.0 - smoothing) + smoothing / c
    logp = log_softmax(input, dim)
    terms = logp * target
    if weight is not None:
        shape = [1] * input.ndim
        shape[dim] = c
        terms = terms * weight.reshape(*shape)
    loss = -terms.sum(dim)
    if reduction == "mean":
        return loss.sum() / (input.shape[0] if input.ndim > 1 else 1)
    return _reduce(loss, reduction)


@op(method=False, F=True, module="NLLLoss",
    example=lambda r: (r.standard_normal((3, 5)), r.integers(0, 5, 3)))
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """``torch.nn.functional.nll_loss`` on log-probabilities (e.g. from ``log_softmax``)."""
    input, target = autocast_cast("nll_loss", input, target)
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_float("nll_loss", input, target)
    rows, flat_target, shape = _rows_and_targets("nll_loss", input, target)
    with no_grad():
        safe, coef, _ = _class_targets("nll_loss", rows, flat_target, weight, ignore_index)
    loss = NLLLoss.apply(rows, safe, coef)
    return _finish(loss, coef, reduction, shape)


# --- L1, smooth L1, Huber and KL divergence, composed from differentiable ops --------------------
def _regression_diff(name, input, target, reduction):
    _check_reduction(reduction)
    _check_float(name, input, target)
    _warn_broadcast(input, target, stacklevel=4)
    return input - target


def _weighted(loss, weight, input):
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    check_same_device(input, weight)
    return loss * weight


@op(method=False, F=True, module="L1Loss",
    example=lambda r: (r.standard_normal((3, 4)), r.standard_normal((3, 4))))
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error ``|x - t|``; its gradient is ``sign(x - t)`` (0 where x == t).
    With ``weight`` (input's shape), ``'mean'`` is ``sum(w*|x-t|) / sum(w)`` (PyTorch's)."""
    input, target = autocast_cast("l1_loss", input, target)
    reduction = legacy_reduction(size_average, reduce, reduction)
    loss = ew.abs(_regression_diff("l1_loss", input, target, reduction))
    if weight is None:
        return _reduce(loss, reduction)
    loss = _weighted(loss, weight, input)
    return loss.sum() / weight.sum() if reduction == "mean" else _reduce(loss, reduction)


class QuadraticThenLinear(Function):
    """Elementwise ``quadratic_scale*d*d`` where ``|d| < threshold``, else ``linear_scale *
    (|d| - 0.5*threshold)`` (smooth L1 and Huber), as one graph node, as PyTorch has one: its
    gradient ``clamp(2*quadratic_scale*d, -linear_scale, linear_scale)`` is one clamp, where
    the composed form recorded seven nodes forward and ran them all backward. (The two
    branches meet at the threshold with the same slope, so the clamp is exact there too.)"""
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, d, threshold, quadratic_scale, linear_scale):
        self.save_for_backward(d)
        self.slope, self.limit = 2.0 * quadratic_scale, float(linear_scale)
        with no_grad():
            z = ew.abs(d)
            return ew.where(z < threshold, d * d * quadratic_scale,
                            (z - 0.5 * threshold) * linear_scale)

    def backward(self, g):
        d, = self.saved_tensors
        return g * ew.clamp(d * self.slope, -self.limit, self.limit), None, None, None


def _quadratic_then_linear(d, threshold, quadratic_scale, linear_scale):
    return QuadraticThenLinear.apply(d, threshold, quadratic_scale, linear_scale)


@op(method=False, F=True, module="SmoothL1Loss",
    example=lambda r: (r.standard_normal((3, 4)), r.standard_normal((3, 4)), {'beta': 0.5}))
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``0.5*(x-t)**2/beta`` where ``|x-t| < beta``, else ``|x-t| - 0.5*beta`` (L1 for
    beta = 0)."""
    input, target = autocast_cast("smooth_l1_loss", input, target)
    reduction = legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = _regression_diff("smooth_l1_loss", input, target, reduction)
    if beta == 0:
        return _reduce(ew.abs(d), reduction)
    return _reduce(_quadratic_then_linear(d, beta, 0.5 / beta, 1.0), reduction)


@op(method=False, F=True, module="HuberLoss",
    example=lambda r: (r.standard_normal((3, 4)), r.standard_normal((3, 4)), {'delta': 0.7}))
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5*(x-t)**2`` where ``|x-t| < delta``, else ``delta*(|x-t| - 0.5*delta)``
    (= ``delta * smooth_l1_loss(beta=delta)``). With ``weight`` (input's shape) the terms are
    weighted and ``'mean'`` stays the plain mean (PyTorch's; unlike ``l1_loss``)."""
    input, target = autocast_cast("huber_loss", input, target)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = _regression_diff("huber_loss", input, target, reduction)
    loss = _quadratic_then_linear(d, delta, 0.5, delta)
    return _reduce(loss if weight is None else _weighted(loss, weight, input), reduction)


@op(method=False, F=True, module="KLDivLoss",
    example=lambda r: (r.standard_normal((3, 4)), r.uniform(0.1, 1, (3, 4)),
                       {'reduction': 'batchmean'}))
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL divergence with ``input`` log-probabilities: pointwise ``t*(log t - x)`` (0 where
    t == 0, PyTorch's ``xlogy``), or ``exp(t)*(t - x)`` when ``log_target``. ``'batchmean'``
    divides the sum by the batch size (the mathematical KL); ``'mean'`` divides by every
    element and warns, as PyTorch does."""
    input, target = autocast_cast("kl_div", input, target)
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("mean", "sum", "none", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    _check_float("kl_div", input, target)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", stacklevel=2)
    if log_target:
        loss = ew.exp(target) * (target - input)
    else:
        safe = ew.where(target == 0, 1.0, target)  # xlogy: 0 * log(0) is 0, not nan
        loss = target * ew.log(safe) - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)
