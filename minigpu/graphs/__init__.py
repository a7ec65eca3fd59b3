"""Capture a step once, replay it without Python op dispatch: PyTorch's CUDA-graph API
(``CUDAGraph``, ``graph``, ``make_graphed_callables``) and ``compile`` over it.

``fusion.py`` joins a captured graph's chains of elementwise maps into one generated kernel
each (``fused_kernels.py``: ``CUDAGraph.fuse()``, ``compile(mode="max-autotune")``).

A floor above ``ops/`` (``docs/architecture.md``): it records the backend calls the eager
layers make, and nothing below imports it. ``docs/graphs.md`` tells what a capture records,
how a replay runs, the guards, what cannot be captured and why.
"""
from .capture import CaptureError
from .compiler import Compiled, compile
from .cuda_graph import CUDAGraph, graph, graph_pool_handle, make_graphed_callables

__all__ = ["CaptureError", "CUDAGraph", "Compiled", "compile", "graph", "graph_pool_handle",
           "make_graphed_callables"]
