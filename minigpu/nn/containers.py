"""``ModuleDict`` (``torch.nn.ModuleDict``): sub-modules by string key, in insertion order.

The keys are the sub-modules' names, so a parameter of ``d['conv']`` appears in
``state_dict()`` as ``'conv.weight'``, exactly as in PyTorch. Like PyTorch's, a ModuleDict has
no ``forward``: the owning module decides how to call its entries.
"""
from __future__ import annotations

from collections.abc import Mapping

from .module import Module


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        if not isinstance(key, str):
            raise TypeError(f"module name should be a string. Got {type(key).__name__}")
        if "." in key:
            raise KeyError(f'module name can\'t contain ".", got: {key}')
        if key == "":
            raise KeyError('module name can\'t be empty string ""')
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        """Add (or replace) entries from a mapping or an iterable of (key, module) pairs; a
        plain dict keeps its insertion order, as in Python 3.7+ and PyTorch."""
        if isinstance(modules, (ModuleDict, Mapping)):
            pairs = list(modules.items())
        else:
            pairs = []
            for j, pair in enumerate(modules):
                if not isinstance(pair, (tuple, list)):
                    raise TypeError(f"ModuleDict update sequence element #{j} should be "
                                    f"Iterable; is {type(pair).__name__}")
                if len(pair) != 2:
                    raise ValueError(f"ModuleDict update sequence element #{j} has length "
                                     f"{len(pair)}; 2 is required")
                pairs.append(tuple(pair))
        for key, module in pairs:
            self[key] = module
