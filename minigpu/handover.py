"""Hand a model (or a tensor) over to PyTorch, and back: ``to_torch`` / ``from_torch``.

minigpu is a single-device engine. A program that outgrows it (several GPUs, mixed precision,
an exporter) continues in PyTorch with the same weights::

    model = minigpu.to_torch(model)             # a torch.nn.Module with the same weights
    model = torch.nn.parallel.DistributedDataParallel(model.cuda())   # and on from there

How a module is rebuilt on the other side: the module tree is walked; each module whose class
the other library has under the same name in its ``nn`` (Linear, Conv2d, LSTM, BatchNorm2d,
Sequential, ...) is constructed there with the constructor arguments read back from the
module's attributes of the same names (``in_features``, ``kernel_size``, ``num_layers``; for
``bias``, whether the module has one), then gets a copy of the module's own parameters and
buffers and its ``training`` flag. A class of your own (``class Net(nn.Module)``) has no
counterpart to look up: build it on the other side (the same code under ``import torch``) and
pass it as ``into=``, which copies the whole ``state_dict`` into it. Copies, never shared
memory: the two models are independent afterwards. Optimizer state is not handed over.
"""
from __future__ import annotations

import inspect
from collections import OrderedDict

import numpy as np

from . import nn
from .autograd import no_grad
from .tensor import Device, Tensor


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - torch is installed where this is tested
        raise ImportError("minigpu.to_torch / from_torch need PyTorch installed "
                          "(pip install torch)") from e
    return torch


def to_torch(obj, into=None):
    """The PyTorch equivalent of a minigpu Tensor or nn.Module (a copy).

    A tensor becomes a torch tensor with the same values, dtype and ``requires_grad`` (on
    cuda when it is on cuda and PyTorch has a GPU, else on the cpu). A module is rebuilt as
    described in the module docstring; ``into`` (a torch module) receives the state instead.
    """
    torch = _torch()
    if isinstance(obj, Tensor):
        array = np.array(obj.detach().cpu().numpy())
        device = "cuda" if obj.device.type == "cuda" and torch.cuda.is_available() else "cpu"
        return torch.from_numpy(array).to(device).requires_grad_(obj.requires_grad)
    if not isinstance(obj, nn.Module):
        raise TypeError(f"to_torch expects a minigpu Tensor or nn.Module, got "
                        f"{type(obj).__name__}")
    if into is not None:
        return _copy_state(into, {k: to_torch(v) for k, v in obj.state_dict().items()},
                           obj.training)
    return _rebuild(obj, torch.nn, lambda t: to_torch(t), "to_torch")


def from_torch(obj, into=None, device=None):
    """The minigpu equivalent of a torch Tensor or torch.nn.Module (a copy), the reverse of
    :func:`to_torch`; ``device`` places the result (default: the torch object's device type,
    cpu or cuda)."""
    torch = _torch()
    if isinstance(obj, torch.Tensor):
        target = Device(device or obj.device.type)
        t = Tensor._from_array(np.array(obj.detach().cpu().numpy()), target)
        return t.requires_grad_(obj.requires_grad) if obj.requires_grad else t
    if not isinstance(obj, torch.nn.Module):
        raise TypeError(f"from_torch expects a torch Tensor or torch.nn.Module, got "
                        f"{type(obj).__name__}")
    first = next(iter(obj.state_dict().values()), None)
    device = device or (first.device.type if first is not None else "cpu")
    if into is not None:
        state = {k: from_torch(v, device=device) for k, v in obj.state_dict().items()}
        return _copy_state(into, state, obj.training)
    return _rebuild(obj, nn, lambda t: from_torch(t, device=device), "from_torch")


def _rebuild(module, target_nn, convert, caller):
    """``module`` rebuilt with ``target_nn``'s classes, its own tensors converted."""
    name = type(module).__name__
    cls = getattr(target_nn, name, None)
    if not (isinstance(cls, type) and type(module).__module__.split(".")[0] in
            ("minigpu", "torch")):
        raise TypeError(
            f"{caller}: {name} is a class of your own, which the other library does not "
            f"have; build the same model there and pass it: {caller}(model, into=that_model) "
            f"copies the state_dict into it")
    children = {k: _rebuild(m, target_nn, convert, caller)
                for k, m in module._modules.items() if m is not None}
    if name == "Sequential":
        built = cls(OrderedDict(children))  # the children keep their names
    elif name == "ModuleList":
        built = cls(list(children.values()))
    elif name == "ModuleDict":
        built = cls(children)
    else:
        built = cls(**_constructor_arguments(module, cls, caller))
        for key, child in children.items():
            setattr(built, key, child)
    with _no_grad(built):
        for table in ("_parameters", "_buffers"):
            theirs = vars(built)[table]
            for key, t in vars(module)[table].items():
                if t is None:
                    continue
                if key not in theirs or theirs[key] is None:
                    raise TypeError(f"{caller}: {name} has {table[1:-1]} {key!r} that the "
                                    f"rebuilt {cls.__module__}.{name} lacks")
                converted = convert(t)
                if tuple(converted.shape) != tuple(theirs[key].shape):
                    raise TypeError(f"{caller}: {name}.{key} has shape {tuple(t.shape)}, the "
                                    f"rebuilt module's {tuple(theirs[key].shape)}")
                if table == "_parameters":
                    theirs[key].data = converted.detach()
                else:
                    theirs[key] = converted
    built.train(module.training)
    return built


def _constructor_arguments(module, cls, caller):
    """cls's constructor arguments read from ``module``'s attributes of the same names. Where
    cls takes ``*args`` (LSTM, GRU, RNN pass them on to RNNBase with their ``mode``), the
    names come from the first base class that lists them, ``mode`` left out, plus RNN's own
    ``nonlinearity``."""
    arguments = {}
    for base in cls.__mro__:
        parameters = list(inspect.signature(base.__init__).parameters.values())[1:]
        if not any(p.kind == p.VAR_POSITIONAL for p in parameters):
            break
    for p in parameters:
        if base is not cls and p.name == "mode":
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in ("device", "dtype"):
            continue
        if p.name == "bias" and "bias" in vars(module)["_parameters"]:
            arguments["bias"] = vars(module)["_parameters"]["bias"] is not None
        elif p.name in vars(module):
            value = vars(module)[p.name]
            value = tuple(value) if isinstance(value, list) else value
            if p.default is p.empty or not _same(value, p.default):  # defaults left out:
                arguments[p.name] = value  # torch's GRU refuses even proj_size=0
        elif p.default is p.empty:
            raise TypeError(f"{caller}: cannot rebuild {cls.__module__}.{cls.__name__}: its "
                            f"argument {p.name!r} is not an attribute of the module; build "
                            f"it on the other side and pass it as into=")
    if base is not cls and vars(module).get("nonlinearity", "tanh") != "tanh":
        arguments["nonlinearity"] = vars(module)["nonlinearity"]
    return arguments


def _same(value, default):
    try:
        return bool(value == default) and type(value) is type(default)
    except (TypeError, ValueError):  # a comparison that is not a plain truth value
        return False


class _no_grad:
    """No gradient recording while tensors are swapped in (torch's or minigpu's, by module)."""

    def __init__(self, module):
        if type(module).__module__.startswith("torch"):
            self.context = _torch().no_grad()
        else:
            self.context = no_grad()

    def __enter__(self):
        self.context.__enter__()

    def __exit__(self, *exc):
        return self.context.__exit__(*exc)


def _copy_state(into, state, training):
    into.load_state_dict(state)
    into.train(training)
    return into
