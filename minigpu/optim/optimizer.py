"""The Optimizer base class: parameter groups, per-parameter state, zero_grad, state_dict.

Layout follows ``torch.optim.Optimizer``: ``param_groups`` is a list of dicts, each with a
``'params'`` list and every hyper-parameter (defaults filled in); ``state`` maps a parameter to
a dict of its buffers. ``state_dict()`` replaces parameters by their index in the order of the
groups: ``{'state': {0: {...}, 1: {...}}, 'param_groups': [{'lr': ..., 'params': [0, 1]}]}``.
"""
from __future__ import annotations

from collections import defaultdict

from ..autograd import enable_grad, no_grad
from ..tensor import Tensor, owns_dense_buffer


def _dense_copy(t: Tensor) -> Tensor:
    """A new dense tensor, with its own writable buffer, holding t's values."""
    out = Tensor._dense(t.backend.empty(t.numel(), t.dtype), t.shape, t.device)
    t.backend.assign_(out._view(), t._view())
    return out


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + type(params).__name__)
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):  # tensors, or (name, tensor) pairs
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        names = None
        if params and all(isinstance(p, tuple) and len(p) == 2 for p in params):
            names, params = [n for n, _ in params], [p for _, p in params]  # named_parameters()
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group, params=params)
        if names is not None:
            group["param_names"] = names
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in params}) != len(params):
            raise ValueError("optimizer contains a parameter group with duplicate parameters")
        if seen & {id(p) for p in params}:
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Clear the gradients: drop them (default) or fill them with zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:  # in place: backward gives every leaf a .grad buffer of its own
                    p.grad.zero_()

    def step(self, closure=None):
        raise NotImplementedError

    def _closure_loss(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    @staticmethod
    def _flat(t: Tensor, what: str, written=True):
        """The flat buffer of a dense tensor (what the fused primitives update in place). A
        tensor to be ``written`` gets a new version, so that a graph which saved it before the
        step refuses to backward, as in PyTorch."""
        if not owns_dense_buffer(t):
            raise RuntimeError(f"optimizer: the {what} must be a dense tensor that owns its "
                               f"buffer (got shape {tuple(t.shape)}, strides {t._strides}, "
                               f"offset {t._offset})")
        if written:
            t._version_counter[0] += 1
        return t._buf

    def _grad_buffer(self, p, maximize=False):
        """The flat buffer of ``p.grad`` (step() runs under no_grad)."""
        g = p.grad
        if g.device != p.device or g.dtype != p.dtype or g.shape != p.shape:
            raise RuntimeError(f"optimizer: gradient of shape {tuple(g.shape)} ({g.dtype}, "
                               f"{g.device}) does not match its parameter {tuple(p.shape)} "
                               f"({p.dtype}, {p.device})")
        if maximize:
            g = -g  # a new dense tensor
        elif not owns_dense_buffer(g):
            g = _dense_copy(g)
        return self._flat(g, "gradient", written=False)

    # --- state_dict --------------------------------------------------------------------------
    def state_dict(self):
        """``{'state': {index: {name: value}}, 'param_groups': [{..., 'params': [index]}]}``
        with parameters numbered in group order, as PyTorch does."""
        index, groups, start = {}, [], 0
        for group in self.param_groups:
            ids = list(range(start, start + len(group["params"])))
            index.update({id(p): i for p, i in zip(group["params"], ids)})
            start += len(ids)
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = ids
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self._state_items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def _state_items(self):
        by_id = {id(p): p for g in self.param_groups for p in g["params"]}
        return [(by_id[k], v) for k, v in ((id(p), self.state[p]) for p in self.state)
                if k in by_id and v]

    def load_state_dict(self, state_dict):
        """Restore hyper-parameters and buffers saved by :meth:`state_dict` (buffers are
        moved to each parameter's device and floating dtype)."""
        groups, saved_groups = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, s in zip(groups, saved_groups):
            if len(g["params"]) != len(s["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
        params = {i: p for g, s in zip(groups, saved_groups) for i, p in zip(s["params"],
                                                                            g["params"])}
        self.state = defaultdict(dict)
        for key, value in state_dict["state"].items():
            key = int(key)
            if key not in params:
                continue
            p = params[key]
            self.state[p] = {name: self._cast_state(name, v, p) for name, v in value.items()}
        for g, s in zip(groups, saved_groups):
            g.update({k: v for k, v in s.items() if k != "params"})

    @staticmethod
    def _cast_state(name, value, param):
        if not isinstance(value, Tensor):
            return value
        if name == "step":  # kept on the host, like PyTorch's non-capturable optimizers
            return value.detach().to("cpu")
        with no_grad():
            out = value.detach().to(param.device)
            if out.dtype.kind == "f":
                out = out.to(param.dtype)
            return _dense_copy(out)  # private: the fused step updates it in place

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)
