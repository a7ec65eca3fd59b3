"""``minigpu.onnx``: importable like ``torch.onnx``, so a program that imports it at its top
runs; exporting a model to ONNX is not a minigpu feature and says so when called."""
from __future__ import annotations


def export(model, args=(), f=None, *unused, **kwargs):
    """Not in minigpu: raises ``NotImplementedError`` naming the feature."""
    raise NotImplementedError("torch.onnx.export (exporting a model to ONNX) is not supported "
                              "by minigpu: it has no graph tracer/exporter. Hand the model "
                              "over with minigpu.to_torch(model) and export it from PyTorch.")


def is_in_onnx_export() -> bool:
    """False: minigpu never runs inside an ONNX export."""
    return False
