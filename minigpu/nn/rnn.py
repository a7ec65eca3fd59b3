"""Recurrent layers and embeddings: ``RNN``, ``LSTM``, ``GRU``, ``RNNCell``, ``LSTMCell``,
``GRUCell``, ``Embedding`` — PyTorch's constructor arguments, parameter names and shapes
(``weight_ih_l{k}[_reverse]``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``; gate
order (i, f, g, o) for LSTM and (r, z, n) for GRU), input/state layouts and error messages, so a
state_dict moves to and from PyTorch unchanged.

How a layer runs (``ops/rnn.py`` has the autograd side)
    1. The input projection of **all** timesteps is one GEMM before the time loop:
       ``xproj = x.reshape(L*N, H_in) @ W_ih^T + (b_ih + b_hh)`` (LSTM/RNN fold both biases
       into it; GRU keeps ``b_hh`` apart because ``b_hn`` sits inside ``r * (.)``).
    2. The time loop does only the recurrent part. Per timestep, LSTM and RNN (one
       ``Recurrence`` autograd node per layer and direction, BPTT inside it):

       - forward, per timestep: 1 GEMM ``h @ W_hh^T`` + 1 add ``xproj[t] + .`` + 1 fused cell
         kernel (LSTM ``lstm_cell``; RNN one tanh/relu map) + 1 copy of h into the output
         = **4 launches** (the first step of a zero initial state: 2, no GEMM and no add);
       - backward, per timestep: 1 add (output grad + recurrent grad) + 1 fused cell-backward
         kernel + 1 copy of the gate grads into ``grad_xproj`` + 1 GEMM ``dgates @ W_hh``
         = **4 launches**;
       - backward, once per sequence: ``dW_hh`` as 1 GEMM over all L*N rows (+1 GEMM and 1
         add for a given h_0) instead of L small GEMMs and L accumulating adds; ``dx``,
         ``dW_ih`` and the bias grads through the input projection's one GEMM each;
       - saved for backward: per step the LSTM's (N, 4H) activations and (N, H) cell state,
         and the outputs, which it returns anyway (RNN: only the outputs).

       Against an LSTM built from elementwise ops (``sigmoid``/``tanh``/``mul``/``add`` as
       separate autograd ops on slices of the gates, ``xproj[t]`` sliced per step), counting
       the kernels launched on the cuda backend per steady-state timestep
       (``tests/test_rnn.py::test_launch_counts_per_timestep``; L=3 vs L=4, N=2, H=3):

       ========================  ======================  ==================================
       per timestep              fused (this module)     naive elementwise LSTM
       ========================  ======================  ==================================
       forward                   4: GEMM, add,           12: GEMM, add, 4 activations,
                                 lstm_cell, copy         5 mul/add/tanh, copy
       backward                  4: add, cell backward,  31: 17 elementwise grads, 5 zero
                                 copy, GEMM              fills + 5 copies (slice backward),
                                                         2 GEMMs (dh and dW_hh), 2 more
       whole sequence, L=4       21 forward, 23 back     51 forward, 124 back
       ========================  ======================  ==================================

       On the CUDA simulator (where every launch costs its threads' Python) the fused layer's
       L=4 forward+backward takes ~0.5 s against ~2.3 s. ``RNN`` has the same 4 + 4 launches
       per step (the cell is one tanh/relu map; its backward one ``tanh_grad``/``relu_grad``).
    3. ``GRU`` (no fused kernel in the contract) runs a per-step autograd graph: per timestep
       1 GEMM + 1 bias add + the GRU cell as 10 elementwise launches (``ops.rnn.gru_cell``,
       on column views, no copies) + 1 copy to stack the outputs = 13 launches forward, 23
       backward (measured as above).

Layouts: input (L, N, H_in), or (N, L, H_in) with ``batch_first``, or unbatched (L, H_in);
h_0/c_0 and h_n/c_n are (num_layers * num_directions, N, H) (unbatched: without N), entry
``layer * num_directions + direction``; ``output`` is (L, N, num_directions * H) with the
forward direction first. Dropout (``nn.functional.dropout``, drawing from the global
generator) is applied to each layer's output except the last, in training mode.
"""
from __future__ import annotations

import math
import numbers
import warnings

from .. import creation, ops
from ..ops import rnn as rnn_ops
from . import functional, init
from .module import Module, Parameter

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
           "Embedding"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _new_param(shape, device, dtype):
    return Parameter(creation.empty(*shape, device=device, dtype=dtype))


def _check_device(input, weight):
    if input.device != weight.device:
        raise RuntimeError(f"Input and parameter tensors are not at the same device, found "
                           f"input tensor at {input.device} and parameter tensor at "
                           f"{weight.device}")


def _dropout(x, p):
    return functional.dropout(x, p=p, training=True)


class RNNBase(Module):
    """The stack of layers and directions shared by RNN, LSTM and GRU."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}")
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size),
                            ("num_layers", num_layers)):
            if not isinstance(value, numbers.Integral) or isinstance(value, bool):
                raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size != 0:
            raise NotImplementedError("minigpu's LSTM does not support proj_size > 0")
        self.mode = mode
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers, self.bias = int(num_layers), bool(bias)
        self.batch_first, self.dropout = bool(batch_first), float(dropout)
        self.bidirectional, self.proj_size = bool(bidirectional), 0
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * self.hidden_size
        self._flat_weights_names = []
        for layer in range(self.num_layers):
            for direction in range(directions):
                layer_input = self.input_size if layer == 0 else self.hidden_size * directions
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih", (gate_size, layer_input)),
                          ("weight_hh", (gate_size, self.hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                for kind, shape in shapes:
                    name = f"{kind}_l{layer}{suffix}"
                    setattr(self, name, _new_param(shape, device, dtype))
                    self._flat_weights_names.append(name)
        self.reset_parameters()

    def reset_parameters(self):
        """Every weight and bias ~ U(-1/sqrt(H), 1/sqrt(H)), drawn in registration order
        (PyTorch's order) from minigpu's generator: one seed, the same weights on cpu/cuda."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        """A no-op kept for PyTorch compatibility (cuDNN's packed weight buffer)."""

    @property
    def _flat_weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        per = 4 if self.bias else 2
        w = self._flat_weights
        return [w[i:i + per] for i in range(0, len(w), per)]

    def _layer_weights(self, layer, direction):
        suffix = "_reverse" if direction == 1 else ""
        get = lambda kind: getattr(self, f"{kind}_l{layer}{suffix}", None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")

    # --- argument checks (PyTorch's wording) -------------------------------------------------
    def _name(self):
        return "RNN" if self.mode.startswith("RNN") else self.mode

    def check_input(self, input):
        weight = self.weight_ih_l0
        if input.dtype != weight.dtype:
            raise ValueError(f"input must have the type {weight.dtype}, got type {input.dtype}")
        if input.dim() != 3:
            raise RuntimeError(f"input must have 3 dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.size(-1)}")
        _check_device(input, weight)

    def expected_hidden_size(self, input):
        batch = input.size(0) if self.batch_first else input.size(1)
        return (self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)

    @staticmethod
    def check_hidden_size(hx, expected, msg="Expected hidden size {}, got {}"):
        if tuple(hx.shape) != tuple(expected):
            raise RuntimeError(msg.format(tuple(expected), list(hx.shape)))

    def _batch_input(self, input, hx):
        """Checks the input's rank; returns (input 3-D, hx with a batch dim, is_batched)."""
        name = self._name()
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                             f"{'tensor ' if name == 'RNN' else ''}instead")
        batched = input.dim() == 3
        states = hx if isinstance(hx, (tuple, list)) else (hx,) if hx is not None else ()
        want = 3 if batched else 2
        if any(s.dim() != want for s in states):
            kind = "batched 3-D" if batched else "unbatched 2-D"
            if self.mode == "LSTM":
                dims = ", ".join(f"{s.dim()}-D" for s in states)
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but "
                                   f"got ({dims}) tensors")
            raise RuntimeError(f"For {kind} input, hx should also be {want}-D but got "
                               f"{states[0].dim()}-D tensor")
        if not batched:
            input = ops.unsqueeze(input, 0 if self.batch_first else 1)
            if hx is not None:
                hx = (tuple(ops.unsqueeze(s, 1) for s in hx) if isinstance(hx, (tuple, list))
                      else ops.unsqueeze(hx, 1))
        return input, hx, batched

    # --- the computation --------------------------------------------------------------------
    def _project(self, x, w_ih, bias, batch_major):
        """x (A, B, F) -> (A*B, F) @ W_ih^T + bias as (L, N, G*H): one GEMM for every step.
        A batch-major input is projected in its own row order and transposed as a view."""
        a, b, f = x.shape
        proj = ops.matmul(ops.reshape(x, a * b, f), w_ih.mT)
        if bias is not None:
            proj = proj + bias
        proj = ops.reshape(proj, a, b, w_ih.shape[0])
        return ops.transpose(proj, 0, 1) if batch_major else proj

    def _direction(self, xproj, h0, c0, layer, direction):
        """One layer, one direction: -> (output (L, N, H), h_n, c_n or None)."""
        w_hh = self._layer_weights(layer, direction)[1]
        rec = rnn_ops.RECURRENCES[self.mode]
        if self.mode == "LSTM":
            return rec.apply(xproj, h0, c0, w_hh, direction == 1)
        out, h_n = rec.apply(xproj, h0, None, w_hh, direction == 1)
        return out, h_n, None

    def _bias(self, layer, direction):
        _, _, b_ih, b_hh = self._layer_weights(layer, direction)
        return None if b_ih is None else b_ih + b_hh

    def _run(self, input, h0, c0):
        """input 3-D in the module's layout; h0/c0 (layers*dirs, N, H) or None."""
        directions = 2 if self.bidirectional else 1
        x, batch_major = input, self.batch_first
        steps = x.shape[1] if batch_major else x.shape[0]
        if steps == 0:
            raise RuntimeError(f"Expected sequence length to be larger than 0 in "
                               f"{self._name()}")
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                xproj = self._project(x, self._layer_weights(layer, direction)[0],
                                      self._bias(layer, direction), batch_major)
                out, h_n, c_n = self._direction(
                    xproj, h0[k] if h0 is not None else None,
                    c0[k] if c0 is not None else None, layer, direction)
                outs.append(out)
                hs.append(h_n)
                cs.append(c_n)
            x = outs[0] if directions == 1 else ops.cat(outs, 2)
            batch_major = False
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = _dropout(x, self.dropout)
        if self.batch_first:
            x = ops.contiguous(ops.transpose(x, 0, 1))
        h_n = ops.stack(hs, 0)
        c_n = ops.stack(cs, 0) if self.mode == "LSTM" else None
        return x, h_n, c_n

    def forward(self, input, hx=None):
        input, hx, batched = self._batch_input(input, hx)
        self.check_input(input)
        if hx is not None:
            self.check_hidden_size(hx, self.expected_hidden_size(input))
            _check_device(hx, self.weight_ih_l0)
        output, h_n, _ = self._run(input, hx, None)
        if not batched:
            output = ops.squeeze(output, 0 if self.batch_first else 1)
            h_n = ops.squeeze(h_n, 1)
        return output, h_n

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


def _rnn_args(args, kwargs, names):
    """Positional arguments of a PyTorch RNN constructor as keywords."""
    if len(args) > len(names):
        raise TypeError(f"expected at most {len(names)} positional arguments, got {len(args)}")
    for name, value in zip(names, args):
        if name in kwargs:
            raise TypeError(f"got multiple values for argument '{name}'")
        kwargs[name] = value
    return kwargs


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu).

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None)``;
    ``forward(input, hx=None) -> (output, h_n)``.
    """

    def __init__(self, *args, **kwargs):
        kwargs = _rnn_args(args, kwargs, ("input_size", "hidden_size", "num_layers",
                                          "nonlinearity", "bias", "batch_first", "dropout",
                                          "bidirectional"))
        nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             f"'relu'.")
        super().__init__(mode, **kwargs)
        self.nonlinearity = nonlinearity

    def extra_repr(self):
        s = super().extra_repr()
        return s if self.nonlinearity == "tanh" else s + f", nonlinearity={self.nonlinearity}"


class LSTM(RNNBase):
    """Long short-term memory, gates (i, f, g, o):
    c_t = f*c_{t-1} + i*g, h_t = o*tanh(c_t), one fused kernel per step.

    ``LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, proj_size=0, device=None, dtype=None)``;
    ``forward(input, (h_0, c_0)=None) -> (output, (h_n, c_n))``.
    """

    def __init__(self, *args, **kwargs):
        kwargs = _rnn_args(args, kwargs, ("input_size", "hidden_size", "num_layers", "bias",
                                          "batch_first", "dropout", "bidirectional",
                                          "proj_size"))
        super().__init__("LSTM", **kwargs)

    def forward(self, input, hx=None):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise RuntimeError("LSTM expects hx to be a tuple (h_0, c_0)")
        input, hx, batched = self._batch_input(input, hx)
        self.check_input(input)
        h0 = c0 = None
        if hx is not None:
            expected = self.expected_hidden_size(input)
            h0, c0 = hx
            self.check_hidden_size(h0, expected, "Expected hidden[0] size {}, got {}")
            self.check_hidden_size(c0, expected, "Expected hidden[1] size {}, got {}")
            _check_device(h0, self.weight_ih_l0)
            _check_device(c0, self.weight_ih_l0)
        output, h_n, c_n = self._run(input, h0, c0)
        if not batched:
            output = ops.squeeze(output, 0 if self.batch_first else 1)
            h_n, c_n = ops.squeeze(h_n, 1), ops.squeeze(c_n, 1)
        return output, (h_n, c_n)


class GRU(RNNBase):
    """Gated recurrent unit, gates (r, z, n): r = sig(.), z = sig(.),
    n = tanh(x W_in^T + b_in + r*(h W_hn^T + b_hn)), h_t = (1-z)*n + z*h_{t-1}.

    ``GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, device=None, dtype=None)``; ``forward(input, hx=None) ->
    (output, h_n)``. The time loop is a per-step autograd graph (module docstring, item 3).
    """

    def __init__(self, *args, **kwargs):
        kwargs = _rnn_args(args, kwargs, ("input_size", "hidden_size", "num_layers", "bias",
                                          "batch_first", "dropout", "bidirectional"))
        super().__init__("GRU", **kwargs)

    def _bias(self, layer, direction):
        return self._layer_weights(layer, direction)[2]  # b_ih only; b_hh is added per step

    def _direction(self, xproj, h0, c0, layer, direction):
        _, w_hh, _, b_hh = self._layer_weights(layer, direction)
        steps = rnn_ops.unbind_steps(xproj)
        n, hs = xproj.shape[1], self.hidden_size
        order = range(len(steps) - 1, -1, -1) if direction == 1 else range(len(steps))
        outs, h = [None] * len(steps), h0
        for t in order:
            if h is None:  # zero initial state: h @ W_hh^T is zero, skip the GEMM
                h = creation.zeros(n, hs, dtype=xproj.dtype, device=xproj.device)
                gh = (ops.expand(b_hh, n, 3 * hs) if b_hh is not None else
                      creation.zeros(n, 3 * hs, dtype=xproj.dtype, device=xproj.device))
            else:
                gh = ops.matmul(h, w_hh.mT)
                if b_hh is not None:
                    gh = gh + b_hh
            h = rnn_ops.gru_cell(steps[t], gh, h)
            outs[t] = h
        return ops.stack(outs, 0), h, None


# --- cells ---------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """weight_ih (G*H, H_in), weight_hh (G*H, H), bias_ih, bias_hh (G*H,), U(-1/sqrt(H), .)."""

    _kind = "RNNCell"

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = int(input_size), int(hidden_size), bias
        gate_size = num_chunks * self.hidden_size
        self.weight_ih = _new_param((gate_size, self.input_size), device, dtype)
        self.weight_hh = _new_param((gate_size, self.hidden_size), device, dtype)
        if bias:
            self.bias_ih = _new_param((gate_size,), device, dtype)
            self.bias_hh = _new_param((gate_size,), device, dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s

    def _prepare(self, input, states):
        """Rank checks and unsqueezing; returns (input 2-D, states 2-D or None, batched)."""
        if input.dim() not in (1, 2):
            raise ValueError(f"{self._kind}: Expected input to be 1D or 2D, got "
                             f"{input.dim()}D instead")
        for k, s in enumerate(states):
            if s is not None and s.dim() not in (1, 2):
                what = "hidden" if len(states) == 1 else f"hx[{k}]"
                raise ValueError(f"{self._kind}: Expected {what} to be 1D or 2D, got "
                                 f"{s.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = ops.unsqueeze(input, 0)
            states = [ops.unsqueeze(s, 0) if s is not None else None for s in states]
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} "
                               f"expected {self.input_size}")
        if input.dtype != self.weight_ih.dtype:
            raise ValueError(f"input must have the type {self.weight_ih.dtype}, got type "
                             f"{input.dtype}")
        _check_device(input, self.weight_ih)
        for k, s in enumerate(states):
            if s is None:
                continue
            if s.size(0) != input.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{k} "
                                   f"batch size {s.size(0)}")
            if s.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {s.size(1)}, "
                                   f"expected {self.hidden_size}")
            _check_device(s, self.weight_ih)
        return input, states, batched

    def _zeros(self, input):
        return creation.zeros(input.size(0), self.hidden_size, dtype=input.dtype,
                              device=input.device)

    def _projection(self, input, hx=None):
        """x W_ih^T + b_ih (+ h W_hh^T + b_hh): the gate pre-activations. Each product with
        its bias is one ``linear`` node (PyTorch's two addmm), not a transpose, a matmul and
        an add."""
        gates = ops.linear(input, self.weight_ih, self.bias_ih)
        if hx is not None:
            gates = gates + ops.linear(hx, self.weight_hh, self.bias_hh)
        return gates


class RNNCell(RNNCellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu); ``forward(input, hx=None)``."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        input, (hx,), batched = self._prepare(input, [hx])
        # a missing state is zeros that W_hh multiplies, as in PyTorch: its gradient is 0,
        # not None (an optimizer's weight decay still applies to it)
        pre = self._projection(input, hx if hx is not None else self._zeros(input))
        h = ops.tanh(pre) if self.nonlinearity == "tanh" else ops.relu(pre)
        return h if batched else ops.squeeze(h, 0)


class LSTMCell(RNNCellBase):
    """One LSTM step; ``forward(input, (h, c)=None) -> (h', c')`` with the fused cell kernel."""

    _kind = "LSTMCell"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise RuntimeError("LSTMCell expects hx to be a tuple (h, c)")
        h, c = hx if hx is not None else (None, None)
        input, (h, c), batched = self._prepare(input, [h, c])
        gates = self._projection(input, h if h is not None else self._zeros(input))  # as RNNCell
        h, c = rnn_ops.lstm_cell(gates, c if c is not None else self._zeros(input))
        if not batched:
            h, c = ops.squeeze(h, 0), ops.squeeze(c, 0)
        return h, c


class GRUCell(RNNCellBase):
    """One GRU step; ``forward(input, hx=None) -> h'`` (gate order r, z, n)."""

    _kind = "GRUCell"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        input, (hx,), batched = self._prepare(input, [hx])
        gx = self._projection(input)
        if hx is None:
            hx = self._zeros(input)
        gh = ops.linear(hx, self.weight_hh, self.bias_hh)
        h = rnn_ops.gru_cell(gx, gh, hx)
        return h if batched else ops.squeeze(h, 0)


# --- embedding -----------------------------------------------------------------------------------
class Embedding(Module):
    """A lookup table: ``forward(idx)`` -> ``weight[idx]`` of shape (*idx.shape, embedding_dim).

    ``weight`` (num_embeddings, embedding_dim) starts N(0, 1); the ``padding_idx`` row starts at
    zero and receives no gradient. The forward is a gather (``index_select``), the backward a
    scatter-add with atomics on cuda (``index_add``: repeated indices accumulate).
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        if padding_idx is not None:
            if padding_idx > 0:
                assert padding_idx < self.num_embeddings, \
                    "Padding_idx must be within num_embeddings"
            elif padding_idx < 0:
                assert padding_idx >= -self.num_embeddings, \
                    "Padding_idx must be within num_embeddings"
                padding_idx = self.num_embeddings + padding_idx
        self.padding_idx = padding_idx
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("minigpu's Embedding supports neither max_norm, "
                                      "scale_grad_by_freq nor sparse gradients")
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = _new_param((self.num_embeddings, self.embedding_dim), device, dtype)
            self.reset_parameters()
        else:
            if list(_weight.shape) != [self.num_embeddings, self.embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")
            self.weight = Parameter(_weight.detach(), requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            w = self.weight.detach()
            w[self.padding_idx] = 0  # in place on the shared buffer, outside the graph

    def forward(self, input):
        return rnn_ops.embedding(input, self.weight, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx,
                   max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
