"""Module, Parameter and containers, with PyTorch's names and state_dict keys."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..tensor import Device, Tensor


class Parameter(Tensor):
    """A tensor that a Module registers as trainable (requires_grad by default)."""

    def __init__(self, data: Tensor, requires_grad=True):
        super().__init__(data._buf, data.shape, data._strides, data._offset, data.device,
                         requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Base class of layers: holds parameters, buffers and sub-modules by attribute name."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # --- registration ----------------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign before Module.__init__() call")
        for table in (self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        elif name in self.__dict__.get("_buffer_names", ()):
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def __getattr__(self, name):
        for table in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is None:
            self._parameters[name] = None
        else:
            setattr(self, name, param)

    def register_buffer(self, name, tensor, persistent=True):
        """A non-trainable tensor that is saved in state_dict (e.g. BatchNorm's running_mean)."""
        self.__dict__.setdefault("_buffer_names", set()).add(name)
        if not persistent:
            self.__dict__.setdefault("_non_persistent", set()).add(name)
        self._buffers[name] = tensor

    def add_module(self, name, module):
        self._modules[name] = module

    # --- traversal -------------------------------------------------------------------------
    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return (m for _, m in self.named_modules())

    def named_children(self):
        return ((n, m) for n, m in self._modules.items() if m is not None)

    def children(self):
        return (m for _, m in self.named_children())

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mod_prefix, module in modules:
            for name, p in module._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mod_prefix}.{name}" if mod_prefix else name), p

    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix=""):
        for mod_prefix, module in self.named_modules(prefix):
            for name, b in module._buffers.items():
                if b is not None:
                    yield (f"{mod_prefix}.{name}" if mod_prefix else name), b

    def buffers(self):
        return (b for _, b in self.named_buffers())

    def apply(self, fn):
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # --- modes and devices -------------------------------------------------------------------
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None

    def to(self, *args, **kwargs):
        """Move (or cast) every parameter and buffer in place; returns self."""
        for module in self.modules():
            for p in module._parameters.values():
                if p is not None:
                    p.data = p.detach().to(*args, **kwargs)
                    if p.grad is not None:
                        p.grad = p.grad.to(*args, **kwargs)
            for name, b in module._buffers.items():
                if b is not None and (b.dtype.kind == "f" or not _is_dtype_only(args, kwargs)):
                    module._buffers[name] = b.to(*args, **kwargs)
        return self

    def cuda(self):
        return self.to("cuda")

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)

    # --- state ---------------------------------------------------------------------------------
    def state_dict(self, prefix=""):
        """Parameters and persistent buffers by dotted name, as PyTorch names them."""
        out = OrderedDict()
        for mod_prefix, module in self.named_modules(prefix.rstrip(".")):
            skip = module.__dict__.get("_non_persistent", set())
            for table in (module._parameters, module._buffers):
                for name, t in table.items():
                    if t is not None and name not in skip:
                        out[f"{mod_prefix}.{name}" if mod_prefix else name] = t.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copy tensors (minigpu, NumPy or anything array-like) into this module's entries."""
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing))
            if unexpected:
                parts.append("Unexpected key(s) in state_dict: " +
                             ", ".join(f'"{k}"' for k in unexpected))
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(parts))
        errors = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            array = value.detach().numpy() if isinstance(value, Tensor) else np.asarray(value)
            if tuple(array.shape) != tuple(target.shape):
                errors.append(f'size mismatch for {key}: copying a param with shape '
                              f'{tuple(array.shape)} from checkpoint, the shape in current model '
                              f'is {tuple(target.shape)}.')
                continue
            self._assign(key, Tensor._from_array(array.astype(target.dtype), target.device))
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    def _assign(self, key, value):
        *path, name = key.split(".")
        module = self
        for part in path:
            module = module._modules[part]
        if name in module._parameters:
            module._parameters[name].data = value
        else:
            module._buffers[name] = value

    # --- calling and printing ------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required "
                                  f"\"forward\" function")

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ")
                 for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return list(super().__dir__()) + list(self._parameters) + list(self._modules)


class _IncompatibleKeys(tuple):
    def __new__(cls, missing, unexpected):
        obj = super().__new__(cls, (missing, unexpected))
        obj.missing_keys, obj.unexpected_keys = missing, unexpected
        return obj


def _is_dtype_only(args, kwargs):
    """True when a Module.to() call changes dtype but not device (integer buffers keep theirs)."""
    values = list(args) + list(kwargs.values())
    return not any(isinstance(v, (str, Device)) for v in values)


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, index):
        items = list(self._modules.values())
        if isinstance(index, slice):
            return Sequential(*items[index])
        return items[index]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, index):
        items = list(self._modules.values())
        return ModuleList(items[index]) if isinstance(index, slice) else items[index]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())
