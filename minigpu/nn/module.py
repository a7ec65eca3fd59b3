"""Module, Parameter and containers, with PyTorch's names and state_dict keys."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..autograd import Function, _add_hook, is_grad_enabled, no_grad
from ..tensor import Device, Tensor


class Parameter(Tensor):
    """A tensor that a Module registers as trainable (requires_grad by default)."""

    def __init__(self, data: Tensor, requires_grad=True):
        super().__init__(data._buf, data.shape, data._strides, data._offset, data.device,
                         requires_grad=requires_grad)
        self._version_counter = data._version_counter  # an alias of data, as in PyTorch

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
        """Drop the gradients (default) or zero them in place."""
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

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
            with no_grad():  # in place, as PyTorch does: the Parameter and its views stay
                module._parameters[name].copy_(value)
        else:
            module._buffers[name] = value

    # --- calling and printing ------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        hooks = self.__dict__
        pre, post = hooks.get("_forward_pre_hooks"), hooks.get("_forward_hooks")
        back = hooks.get("_backward_hooks")
        if not (pre or post or back):
            return self.forward(*args, **kwargs)
        for hook in list((pre or {}).values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        tap = _BackwardHooks(self, back) if back and is_grad_enabled() else None
        if tap is not None:
            args = tap.wrap_inputs(args)
        out = self.forward(*args, **kwargs)
        for hook in list((post or {}).values()):
            result = hook(self, args, out)
            if result is not None:
                out = result
        return out if tap is None else tap.wrap_outputs(out)

    # --- hooks (each register_* returns a handle; handle.remove() unregisters) ----------------
    def register_forward_pre_hook(self, hook):
        """``hook(module, args)`` before ``forward``; a returned value replaces ``args``."""
        return _add_hook(self, "_forward_pre_hooks", hook)

    def register_forward_hook(self, hook):
        """``hook(module, args, output)`` after ``forward``; a returned value replaces the
        output."""
        return _add_hook(self, "_forward_hooks", hook)

    def register_full_backward_hook(self, hook):
        """``hook(module, grad_input, grad_output)`` once the gradients with respect to the
        module's tensor inputs are computed (``grad_input`` has one entry per tensor argument,
        None where it needs no gradient); a returned tuple replaces ``grad_input``."""
        return _add_hook(self, "_backward_hooks", hook)

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


class _GradTap(Function):
    """Identity on tensors whose backward hands their gradients to ``callback`` (which may
    replace them): how a full backward hook sees a module's grad_output and grad_input."""

    # its backward returns the gradients it is given (or the hook's replacements, made of
    # Tensor ops): under create_graph they are already recorded
    differentiable_backward = True

    def forward(self, *tensors, callback):
        self.callback = callback
        return tuple(t._alias() for t in tensors)

    def backward(self, *grads):
        return tuple(self.callback(grads))


class _BackwardHooks:
    """One forward call's full backward hooks: taps on its inputs and outputs."""

    def __init__(self, module, hooks):
        self.module, self.hooks, self.grad_output = module, hooks, None
        self.tensor_args, self.tapped = [], []

    def wrap_inputs(self, args):
        self.tensor_args = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.tapped = [i for i in self.tensor_args if args[i].requires_grad]
        if not self.tapped:
            return args
        args = list(args)
        for i, t in zip(self.tapped, _GradTap.apply(*[args[i] for i in self.tapped],
                                                    callback=self._grad_input)):
            args[i] = t
        return tuple(args)

    def wrap_outputs(self, out):
        single = isinstance(out, Tensor)
        outs = (out,) if single else out
        if not isinstance(outs, tuple) or not any(
                isinstance(o, Tensor) and o.requires_grad for o in outs):
            return out
        where = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        tapped = list(outs)
        for i, t in zip(where, _GradTap.apply(*[outs[i] for i in where],
                                              callback=self._grad_output)):
            tapped[i] = t
        return tapped[0] if single else tuple(tapped)

    def _grad_output(self, grads):
        self.grad_output = grads
        if not self.tapped:  # no input needs a gradient: the hooks run now, grad_input all None
            self._run((None,) * len(self.tensor_args))
        return grads

    def _grad_input(self, grads):
        by_arg = dict(zip(self.tapped, grads))
        grad_input = self._run(tuple(by_arg.get(i) for i in self.tensor_args))
        return tuple(grad_input[self.tensor_args.index(i)] for i in self.tapped)

    def _run(self, grad_input):
        for hook in list(self.hooks.values()):
            result = hook(self.module, grad_input, self.grad_output)
            if result is not None:
                grad_input = tuple(result)
        return grad_input


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
