"""Differentiable operations, one module per family; this module is their flat namespace."""
from .elementwise import (abs, add, all, any, clamp, clip, compare, div, eq, exp, ge, gt, le,
                          leaky_relu, log, lt, masked_fill, maximum, minimum, mul, ne, neg,
                          pow, rdiv, reciprocal, relu, rpow, rsqrt, rsub, sigmoid, sign, sqrt,
                          square, sub, tanh, where)
from .indexing import index_select
from .linalg import bmm, matmul, mm
from .reduce import argmax, argmin, max, mean, min, std, sum, var
from .inplace import (add_, clamp_, copy_, div_, fill_, masked_fill_, mul_, normal_, pow_,
                      refresh_view, setitem_, sub_, uniform_, zero_)
from .shape import (cat, chunk, clone, contiguous, expand, expand_as, flatten, getitem, narrow,
                    permute, repeat, reshape, reshape_as, split, squeeze, stack, t, transpose,
                    unbind, unsqueeze, view, view_as)
from .softmax import log_softmax, softmax
from .elementwise import (ceil, cos, expm1, floor, floor_divide, isinf, isnan, log1p,
                          remainder, round, sin, trunc)
from .activation import elu, gelu, silu, softplus
from .einsum import einsum
