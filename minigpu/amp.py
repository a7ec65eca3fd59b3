"""``minigpu.amp``: mixed precision, shaped like ``torch.amp``.

``GradScaler`` keeps small float16 gradients from flushing to zero: the loss is multiplied by a
large scale before ``backward``, the gradients are divided by it before the optimizer step, and
a step whose gradients overflowed (inf or NaN) is skipped and the scale halved; after
``growth_interval`` clean steps the scale doubles again.
"""
from __future__ import annotations

import functools
import math
import warnings

from . import autograd, dtypes

_READY, _UNSCALED, _STEPPED = 0, 1, 2


class GradScaler:
    """Dynamic loss scaling, as ``torch.amp.GradScaler``: ``scale(loss).backward()``,
    ``step(optimizer)`` (unscales, then steps unless a gradient is inf or NaN), ``update()``."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self._device = str(device)
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> [stage, found_inf]

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def scale(self, outputs):
        """``outputs`` (a tensor, or an iterable of them) multiplied by the scale."""
        if not self._enabled:
            return outputs
        if hasattr(outputs, "shape") and hasattr(outputs, "grad_fn"):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), [_READY, False])

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale in place (e.g. before clipping them),
        and note whether any is inf or NaN."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state[0] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if state[0] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inverse = 1.0 / self._scale
        poisoned = None  # 0 * g is NaN exactly where g is inf or NaN: one sync for them all
        with autograd.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(inverse)
                    nan_if_bad = (p.grad * 0).sum()
                    poisoned = nan_if_bad if poisoned is None else poisoned + nan_if_bad
        found_inf = poisoned is not None and not math.isfinite(poisoned.item())
        state[:] = [_UNSCALED, found_inf]

    def step(self, optimizer, *args, **kwargs):
        """Unscale (if not done yet) and ``optimizer.step()``, unless a gradient was inf or
        NaN: then the step is skipped. Returns what ``optimizer.step`` returned, or None."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        state = self._state(optimizer)
        if state[0] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state[0] == _READY:
            self.unscale_(optimizer)
        result = None if state[1] else optimizer.step(*args, **kwargs)
        state[0] = _STEPPED
        return result

    def update(self, new_scale=None):
        """Back off after an overflow, grow after ``growth_interval`` clean steps (or set
        ``new_scale``); then a new iteration begins."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        else:
            if not self._per_optimizer:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(found for _, found in self._per_optimizer.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer.clear()

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


class autocast:
    """``with mg.autocast("cuda"):`` runs the ops of ``dtypes.AUTOCAST_LOWER`` (matmul, linear,
    convolutions) in float16 and those of ``dtypes.AUTOCAST_FLOAT32`` (sums, softmax, layer
    norm, losses) in float32, as ``torch.autocast``; other ops run in their inputs' promoted
    dtype. Also a decorator. Regions nest, per thread."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type not in ("cpu", "cuda"):
            raise RuntimeError(f"User specified an unsupported autocast device_type "
                               f"'{device_type}'")
        if dtype is None and device_type == "cpu":
            warnings.warn("torch's CPU autocast runs in bfloat16, which minigpu does not have "
                          "(see minigpu/dtypes.py): this region runs in float16", UserWarning,
                          stacklevel=2)
        dtype = dtypes.float16 if dtype is None else dtypes.to_dtype(dtype)
        if dtype != dtypes.float16:
            raise RuntimeError(f"minigpu's autocast runs in float16 only, not {dtype}")
        self.device_type, self.fast_dtype, self._enabled = device_type, dtype, bool(enabled)
        self._previous = []

    def __enter__(self):
        state = dtypes._autocast.dtypes
        self._previous.append(state.get(self.device_type))
        if self._enabled:
            state[self.device_type] = self.fast_dtype
        else:
            state.pop(self.device_type, None)
        return self

    def __exit__(self, *exc):
        previous = self._previous.pop()
        state = dtypes._autocast.dtypes
        if previous is None:
            state.pop(self.device_type, None)
        else:
            state[self.device_type] = previous
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)
        return wrapped


def is_autocast_available(device_type) -> bool:
    return device_type in ("cpu", "cuda")


def is_autocast_enabled(device_type="cuda") -> bool:
    return dtypes.autocast_dtype(device_type) is not None


def get_autocast_dtype(device_type):
    """The dtype autocast uses on ``device_type`` (float16: minigpu has no bfloat16)."""
    return dtypes.autocast_dtype(device_type) or dtypes.float16
