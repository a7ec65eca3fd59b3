"""Argument checks shared by the model constructors (errors name the model and the value)."""
from __future__ import annotations

import numbers


def check_positive(model: str, **values):
    for name, value in values.items():
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{model}: {name} must be a positive integer, got {value!r}")


def check_input_size(model: str, input_size, divisor: int):
    """The feature extractor halves the image ``log2(divisor)`` times: it must divide evenly."""
    check_positive(model, input_size=input_size)
    if input_size % divisor:
        raise ValueError(f"{model}: input_size must be a multiple of {divisor} (the network "
                         f"halves the image {divisor.bit_length() - 1} times), got {input_size}")


def check_input(model: str, x, in_channels: int, input_size: int):
    """Name the expected layout when a batch does not match the constructor's sizes."""
    if x.ndim != 4 or x.shape[1] != in_channels or x.shape[2] != input_size \
            or x.shape[3] != input_size:
        raise ValueError(f"{model} expected input of shape (N, {in_channels}, {input_size}, "
                         f"{input_size}), got {tuple(x.shape)}")
