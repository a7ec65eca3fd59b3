"""Differentiable operations, one module per family; this module is their flat namespace."""
from .elementwise import (abs, add, all, any, ceil, clamp, clip, compare, cos, div, eq, exp,
                          expm1, floor, floor_divide, ge, gt, isinf, isnan, le, leaky_relu, log,
                          log1p, lt, masked_fill, maximum, minimum, mul, ne, neg, pow, rdiv,
                          reciprocal, relu, remainder, round, rpow, rsqrt, rsub, sigmoid, sign,
                          sin, sqrt, square, sub, tanh, trunc, where)
from .indexing import flip, gather, index_select, scatter_add, scatter_add_, tril, triu
from .linalg import bmm, dot, linear, matmul, mm
from .reduce import (allclose, amax, amin, argmax, argmin, logsumexp, max, mean, min, norm, std,
                     sum, var)
from .inplace import (add_, addcdiv_, addcmul_, clamp_, copy_, div_, fill_, masked_fill_, mul_,
                      normal_, pow_, refresh_view, setitem_, sqrt_, sub_, uniform_, zero_)
from .shape import (cat, chunk, clone, contiguous, expand, expand_as, flatten, getitem, narrow,
                    permute, repeat, reshape, reshape_as, split, squeeze, stack, t, transpose,
                    unbind, unsqueeze, view, view_as)
from .softmax import log_softmax, softmax
from .scan import cumprod, cumsum, masked_select, nonzero, prod, unique
from .sort import argsort, sort, topk
from .activation import elu, gelu, silu, softplus
from .einsum import einsum
