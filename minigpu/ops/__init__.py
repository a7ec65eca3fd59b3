"""Differentiable operations, one module per family.

Importing this package imports every family module it holds (a new family file needs no line
here); each op's ``@op`` line (``registry.py``) sets its Tensor methods as the family is
imported. This namespace is then every op by name (``minigpu.ops.exp``), filled from the
registry: no list of ops is kept here.
"""
import importlib
import pkgutil

from .registry import exported

for _family in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_family.name}")

globals().update(exported("ops"))
