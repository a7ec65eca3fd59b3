"""Learning-rate schedules (``torch.optim.lr_scheduler``) with PyTorch's exact values.

A scheduler owns no math on tensors: it rewrites ``group['lr']`` of its optimizer's parameter
groups once per ``scheduler.step()`` (usually once per epoch, after ``optimizer.step()``).
Like PyTorch, each schedule is written in its *recursive* (chainable) form: ``get_lr()``
derives the next learning rate from the group's current one, so two schedulers can act on one
optimizer, and ``step(epoch)`` (deprecated) uses the closed form where PyTorch has one. The
constructor stores ``initial_lr`` in every group, ``base_lrs`` holds it, ``last_epoch``
counts the steps (-1 before the constructor's own first step) and ``get_last_lr()`` returns
the learning rates the last step set. ``state_dict()`` is every attribute but the optimizer.
"""
from __future__ import annotations

import math
import types
import warnings
from bisect import bisect_right
from collections import Counter

from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR",
           "CosineAnnealingLR", "LinearLR", "OneCycleLR"]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
    "possible. Please use `scheduler.step()` to step the scheduler. During the deprecation, if "
    "epoch is different from None, the closed form is used instead of the new chainable form, "
    "where available. Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose.")


def _mark_optimizer_steps(optimizer):
    """Wrap ``optimizer.step`` (once) so the scheduler can tell whether it ran, as PyTorch does
    to warn about ``scheduler.step()`` called before ``optimizer.step()``."""
    if getattr(optimizer.step, "_wrapped_by_lr_sched", False):
        return
    step = optimizer.step

    def wrapper(*args, **kwargs):
        optimizer._opt_called = True
        return step(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    optimizer.step = wrapper


def _format_param(name, optimizer, param):
    """One value per parameter group (a list of them, or one value for all)."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(param)} values, param_groups has "
                             f"{len(optimizer.param_groups)}.")
        return list(param)
    return [param] * len(optimizer.param_groups)


class LRScheduler:
    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   f"when resuming scheduler with last_epoch >= 0.\nThis "
                                   f"typically happens when:\n1. You're trying to resume "
                                   f"training from a checkpoint but haven't properly loaded "
                                   f"the optimizer state\n2. You're using last_epoch >= 0 for "
                                   f"a fresh training run (not recommended)")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        _mark_optimizer_steps(optimizer)
        self.optimizer._opt_called = False
        self._step_count = 0
        self.step()

    def get_lr(self):
        """The learning rates of step ``last_epoch``, one per group (chainable form)."""
        raise NotImplementedError

    def get_last_lr(self):
        """The learning rates set by the last ``step()``, one per parameter group."""
        return self._last_lr

    def step(self, epoch=None):
        if self._step_count == 1 and not self.optimizer._opt_called:
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
                          "In PyTorch 1.1.0 and later, you should call them in the opposite "
                          "order: `optimizer.step()` before `lr_scheduler.step()`.  Failure to "
                          "do this will result in PyTorch skipping the first value of the "
                          "learning rate schedule. See more details at https://pytorch.org/"
                          "docs/stable/optim.html#how-to-adjust-learning-rate", UserWarning,
                          stacklevel=2)
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def _group_lrs(self):
        return [group["lr"] for group in self.optimizer.param_groups]


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(epoch)``, one function for all groups or one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        else:
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                                 f"{len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self):
        """As PyTorch: plain functions are not saved; callable objects save their __dict__."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        lambdas = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._group_lrs()
        return [lr * self.gamma for lr in self._group_lrs()]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each milestone epoch (a repeated milestone counts twice)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return self._group_lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._group_lrs()]

    def _get_closed_form_lr(self):
        passed = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return self._group_lrs()
        return [lr * self.gamma for lr in self._group_lrs()]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """``eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``, computed
    recursively from the current lr (PyTorch's form; past ``T_max`` the cosine continues, so
    the lr climbs back to ``base_lr`` at ``2*T_max``)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        lrs = self._group_lrs()
        if e == 0:
            return lrs
        if self._step_count == 1 and e > 0:
            return [lo + (base - lo) * (1 + math.cos(e * math.pi / t)) / 2
                    for base in self.base_lrs]
        if (e - 1 - t) % (2 * t) == 0:
            return [lr + (base - lo) * (1 - math.cos(math.pi / t)) / 2
                    for lr, base in zip(lrs, self.base_lrs)]
        return [(1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t)) *
                (lr - lo) + lo for lr in lrs]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min) *
                (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the lr linearly from ``start_factor * base_lr`` to ``end_factor * base_lr`` over
    ``total_iters`` epochs, then hold it."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = (start_factor, end_factor,
                                                                total_iters)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        lrs = self._group_lrs()
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in lrs]
        if self.last_epoch > self.total_iters:
            return lrs
        change = self.end_factor - self.start_factor
        return [lr * (1.0 + change / (self.total_iters * self.start_factor +
                                      (self.last_epoch - 1) * change)) for lr in lrs]

    def _get_closed_form_lr(self):
        fraction = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (self.start_factor + (self.end_factor - self.start_factor) * fraction)
                for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin): the lr warms up from ``max_lr/div_factor`` to
    ``max_lr`` over ``pct_start`` of the steps, then anneals to ``initial_lr/final_div_factor``
    (``three_phase``: back down to the initial lr first, then to the minimum). The momentum
    (SGD's ``momentum`` or Adam's ``beta1``) cycles the opposite way between
    ``max_momentum`` and ``base_momentum``. Stepped once per *batch*, ``total_steps`` times."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got "
                                 f"{steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND "
                             "steps_per_epoch)")
        warm_end = float(pct_start * self.total_steps) - 1
        if three_phase:
            self._schedule_phases = [
                dict(end_step=warm_end, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * self.total_steps) - 2, start_lr="max_lr",
                     end_lr="initial_lr", start_momentum="base_momentum",
                     end_momentum="max_momentum"),
                dict(end_step=self.total_steps - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum")]
        else:
            self._schedule_phases = [
                dict(end_step=warm_end, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=self.total_steps - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum")]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _format_param("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, top in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            tops = _format_param("max_momentum", optimizer, max_momentum)
            bases = _format_param("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for top, base, group in zip(tops, bases, optimizer.param_groups):
                    self._set_momentum(group, top)
                    group["max_momentum"], group["base_momentum"] = top, base
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps "
                             f"is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]],
                                            pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(
                            group[phase["start_momentum"]], group[phase["end_momentum"]], pct))
                    break
                start = end
        return lrs
