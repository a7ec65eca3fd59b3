"""Differentiable operations, one module per family; this module is their flat namespace."""
from .elementwise import (abs, add, all, any, clamp, clip, compare, div, eq, exp, ge, gt, le,
                          leaky_relu, log, lt, masked_fill, maximum, minimum, mul, ne, neg,
                          pow, rdiv, reciprocal, relu, rpow, rsqrt, rsub, sigmoid, sign, sqrt,
                          square, sub, tanh, where)
from .indexing import index_select
from .linalg import bmm, matmul, mm
from .reduce import argmax, argmin, max, mean, min, std, sum, var
from .shape import (cat, chunk, clone, contiguous, copy_, expand, expand_as, fill_, flatten, getitem,
                    narrow, permute, repeat, reshape, reshape_as, setitem_, split, squeeze,
                    stack, t, transpose, unbind, unsqueeze, view, view_as, zero_)
from .softmax import log_softmax, softmax
