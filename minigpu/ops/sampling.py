"""Sampling from given probabilities: ``multinomial`` (text generation picks the next token
with it), composed on the device from a uniform draw and ``topk``/``argmax``.

The draws come from minigpu's counter-based generator (``random.py``): the same seed gives the
same samples on cpu and cuda, not torch's (its Mersenne Twister is another stream).
"""
from __future__ import annotations

import math
import numbers

from .. import dtypes
from .common import uniform
from .elementwise import where
from .reduce import argmax
from .registry import Unlike, op
from .sort import topk


def _log_uniform(shape, dtype, device, generator):
    """``log(v)`` of uniform draws v in (0, 1] (``1 - u`` of the generator's u in [0, 1)):
    finite, at most 0."""
    return (1.0 - uniform(shape, dtype, device, generator)).log()


@op(mg=True, out=False, grad=False, domain="unit",
    example=lambda rng: (rng.uniform(0, 1, (3, 5)), 3),
    torch=Unlike("random draws: minigpu's counter-based generator, not torch's Mersenne "
                 "Twister (tests/test_sampling.py tests the distribution)"))
def multinomial(input, num_samples, replacement=False, *, generator=None):
    """``num_samples`` category indices per row of ``input`` (1-d or 2-d non-negative weights,
    not necessarily summing to 1), drawn with probability proportional to the weights; without
    ``replacement`` no index twice in a row. The exponential race: with q ~ Exp(1) per
    category, the index of the largest ``p / q`` is distributed as p (the first of q / p to
    finish), and the ``k`` largest are k draws without replacement, in the order drawn
    (Efraimidis and Spirakis). The keys are ``log(v) / p`` for v uniform in (0, 1] (the same
    order as ``p / q`` with ``q = -log(v)``, and no division by a zero q); a zero weight's key
    is -inf, below every positive weight's."""
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if input.dtype.kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{dtypes.SCALAR_NAMES[input.dtype]}")
    if not isinstance(num_samples, numbers.Integral) or num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    categories = input.shape[-1]
    if not replacement and num_samples > categories:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    if ((input < 0) | input.isnan() | input.isinf()).any().item():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if (input.sum(-1) <= 0).any().item():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    p = input.detach()
    if replacement:  # one race per sample
        p = p.unsqueeze(-2)
        shape = (*p.shape[:-2], num_samples, categories)
        keys = where(p > 0, _log_uniform(shape, p.dtype, p.device, generator) / p, -math.inf)
        return argmax(keys, -1)
    keys = where(p > 0, _log_uniform(p.shape, p.dtype, p.device, generator) / p, -math.inf)
    return topk(keys, num_samples, -1).indices
