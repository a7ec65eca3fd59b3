"""Recurrent ops: the LSTM cell step, whole-sequence recurrences with backprop through time,
the GRU cell, time-step unbinding, and the embedding lookup.

Two granularities, both exact:

* **Cell steps** (``lstm_cell``, ``gru_cell``): one autograd node per timestep. ``nn.LSTMCell``
  and ``nn.GRUCell`` use them, and ``nn.GRU`` builds its time loop from them.
* **Sequence recurrences** (``LSTMRecurrence``, ``TanhRecurrence``, ``ReluRecurrence``): one
  autograd node per (layer, direction) running the whole time loop, the way cuDNN does. Its
  input is the input projection of *all* timesteps, ``xproj = x @ W_ih^T + b`` (L, N, G*H),
  computed by one GEMM before the loop. Per timestep the forward launches 1 GEMM
  (``h @ W_hh^T``), 1 add (``xproj[t] + ...``), 1 fused cell kernel and 1 copy of h into the
  output sequence; the first step of a zero initial state skips the GEMM and the add. It keeps
  only what backward needs: per step the cell's activations (LSTM: (N, 4H) ``act`` and the
  (N, H) cell state), and the outputs it returns anyway. Backward runs the loop in reverse:
  per step 1 add (output grad + recurrent grad), 1 fused cell-backward kernel, 1 copy of the
  gate grads into the (L, N, G*H) ``grad_xproj``, and 1 GEMM (``dgates @ W_hh``); the weight
  gradient ``dW_hh = sum_t dgates_t^T h_{t-1}`` is then *one* GEMM over all timesteps instead of
  L small ones plus L accumulating adds.

Forward and backward call backend primitives only; views of per-timestep slices are built
directly from strides (``_step``), so no slicing autograd nodes are created.
"""
from __future__ import annotations

import numpy as np

from ..autograd import Function
from ..backends.contract import View, dense
from ..tensor import Tensor
from .common import check_same_device, filled
from .elementwise import where
from .registry import op
from .shape import stack


# --- view helpers --------------------------------------------------------------------------------
def _step(v: View, t: int) -> View:
    """Row ``t`` along the first dimension of a view (a view of one dimension less)."""
    return View(v.buf, v.shape[1:], v.strides[1:], v.offset + t * v.strides[0])


def _cols(v: View, start: int, width: int) -> View:
    """Columns ``start:start+width`` of a 2-D view."""
    return View(v.buf, (v.shape[0], width), v.strides, v.offset + start * v.strides[1])


def _batch1(v: View) -> View:
    """A 2-D view as the (1, R, C) batched operand of ``matmul``."""
    return View(v.buf, (1,) + tuple(v.shape), (0,) + tuple(v.strides), v.offset)


def _transposed(v: View) -> View:
    """The transpose of a 2-D view, as a (1, C, R) batched operand of ``matmul``."""
    return View(v.buf, (1, v.shape[1], v.shape[0]), (0, v.strides[1], v.strides[0]), v.offset)


def _zeros_view(backend, shape, dtype) -> View:
    """A stride-0 view of a single zero: a zero tensor of any shape for one element's cost."""
    return View(backend.full(1, 0, dtype), tuple(shape), (0,) * len(shape), 0)


def _tensor(buf, shape, like: Tensor) -> Tensor:
    return Tensor._dense(buf, tuple(shape), like.device)


def lstm_step(gates, c_prev):
    """PyTorch's LSTM cell on gate pre-activations in the order (i, f, g, o)."""
    hs = c_prev.shape[1]
    i, f, g, o = (gates.narrow(1, k * hs, hs) for k in range(4))
    c = f.sigmoid() * c_prev + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def unrolled(step):
    """A ``Recurrence``'s unfused form over ``step(gates, state) -> (h, state)``: the sequence one
    step at a time, each step a matmul with W_hh^T and the cell's maps."""
    def recurrence(ctx, xproj, h0, c0, w_hh, reverse=False):
        steps = xproj.shape[0]
        h, state = h0, c0
        if ctx.has_state and state is None:
            state = filled(xproj, (xproj.shape[1], w_hh.shape[1]), 0.0)
        outputs = [None] * steps
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            gates = xproj[t] if h is None else xproj[t] + h @ w_hh.t()
            h, state = step(gates, state)
            outputs[t] = h
        output = stack(outputs, 0)
        return (output, h, state) if ctx.has_state else (output, h)
    return recurrence


# --- the LSTM cell step --------------------------------------------------------------------------
class LSTMCellFunction(Function):
    """(gates (N, 4H), c_prev (N, H)) -> (h, c): one fused kernel forward, one backward."""

    def forward(self, gates, c_prev):
        b = gates.backend
        n, hs = c_prev.shape
        h, c, act = b.lstm_cell(gates._view(), c_prev._view())
        h, c = _tensor(h, (n, hs), gates), _tensor(c, (n, hs), gates)
        self.save_for_backward(_tensor(act, (n, 4 * hs), gates), c_prev, c)
        return h, c

    def backward(self, grad_h, grad_c):
        act, c_prev, c = self.saved_tensors
        b, shape = act.backend, tuple(c.shape)
        gh = grad_h._view() if grad_h is not None else _zeros_view(b, shape, c.dtype)
        gc = grad_c._view() if grad_c is not None else _zeros_view(b, shape, c.dtype)
        dg, dc = b.lstm_cell_backward(act._view(), c_prev._view(), c._view(), gh, gc)
        return _tensor(dg, act.shape, act), _tensor(dc, shape, act)

    def unfused(self, gates, c_prev):
        """The unfused form: (h, c) from the gates and the previous cell state."""
        return lstm_step(gates, c_prev)


def lstm_cell(gates, c_prev):
    """One LSTM step's pointwise math on precomputed gate pre-activations (order i, f, g, o):
    returns (h, c) with c = f*c_prev + i*g and h = o*tanh(c)."""
    if gates.ndim != 2 or c_prev.ndim != 2 or gates.shape[1] != 4 * c_prev.shape[1] or \
            gates.shape[0] != c_prev.shape[0]:
        raise RuntimeError(f"lstm_cell: expected gates (N, 4H) and c_prev (N, H), got "
                           f"{list(gates.shape)} and {list(c_prev.shape)}")
    return LSTMCellFunction.apply(gates, c_prev)


# --- the GRU cell step (composed from elementwise primitives) ------------------------------------
class GRUCellFunction(Function):
    """(gx (N, 3H), gh (N, 3H), h_prev (N, H)) -> h, PyTorch's GRU in gate order (r, z, n)::

        r = sig(gx_r + gh_r)   z = sig(gx_z + gh_z)   n = tanh(gx_n + r*gh_n)
        h = (1 - z)*n + z*h_prev = n + z*(h_prev - n)

    gx = x W_ih^T + b_ih and gh = h W_hh^T + b_hh come from matmuls; b_hn stays inside r*(.),
    which is why the input and hidden projections are kept apart. No fused kernel (the contract
    has none for GRU): 10 elementwise launches forward and 14 backward (6 of them copies into
    the two (N, 3H) gradients), on column views of gx and gh (no slicing copies), instead of
    ~25 autograd nodes and the zero-fill + copy that each slice's backward costs.
    """

    def forward(self, gx, gh, h_prev):
        b = gx.backend
        n, hs = h_prev.shape
        vx, vh, hp = gx._view(), gh._view(), h_prev._view()
        d = lambda buf: dense(buf, (n, hs))  # noqa: E731
        r = b.unary("sigmoid", d(b.binary("add", _cols(vx, 0, hs), _cols(vh, 0, hs))))
        z = b.unary("sigmoid", d(b.binary("add", _cols(vx, hs, hs), _cols(vh, hs, hs))))
        rgh = b.binary("mul", d(r), _cols(vh, 2 * hs, hs))
        nn = b.unary("tanh", d(b.binary("add", _cols(vx, 2 * hs, hs), d(rgh))))
        diff = b.binary("sub", hp, d(nn))
        h = b.binary("add", d(nn), d(b.binary("mul", d(z), d(diff))))
        self.save_for_backward(gh, _tensor(r, (n, hs), gx), _tensor(z, (n, hs), gx),
                               _tensor(nn, (n, hs), gx), _tensor(diff, (n, hs), gx))
        return _tensor(h, (n, hs), gx)

    def backward(self, g):
        gh, r, z, nn, diff = self.saved_tensors
        b = g.backend
        n, hs = r.shape
        d = lambda buf: dense(buf, (n, hs))  # noqa: E731
        gv, rv, zv, nv = g._view(), r._view(), z._view(), nn._view()
        gz = b.binary("mul", gv, zv)  # also grad_h_prev
        dz = b.binary("sigmoid_grad", d(b.binary("mul", gv, diff._view())), zv)
        dn = b.binary("tanh_grad", d(b.binary("sub", gv, d(gz))), nv)
        dr = b.binary("sigmoid_grad", d(b.binary("mul", d(dn), _cols(gh._view(), 2 * hs, hs))),
                      rv)
        dgh_n = b.binary("mul", d(dn), rv)
        dgx = b.empty(n * 3 * hs, g.dtype)
        dgh = b.empty(n * 3 * hs, g.dtype)
        for k, buf in enumerate((dr, dz, dn)):
            b.assign_(View(dgx, (n, hs), (3 * hs, 1), k * hs), d(buf))
        for k, buf in enumerate((dr, dz, dgh_n)):
            b.assign_(View(dgh, (n, hs), (3 * hs, 1), k * hs), d(buf))
        return (_tensor(dgx, (n, 3 * hs), g), _tensor(dgh, (n, 3 * hs), g),
                _tensor(gz, (n, hs), g))

    def unfused(self, gx, gh, h_prev):
        """The unfused form: PyTorch's GRU step from the two projections (gate order r, z, n)."""
        hs = h_prev.shape[1]
        r = (gx.narrow(1, 0, hs) + gh.narrow(1, 0, hs)).sigmoid()
        z = (gx.narrow(1, hs, hs) + gh.narrow(1, hs, hs)).sigmoid()
        n = (gx.narrow(1, 2 * hs, hs) + r * gh.narrow(1, 2 * hs, hs)).tanh()
        return n + z * (h_prev - n)


def gru_cell(gx, gh, h_prev):
    """One GRU step from the input and hidden projections (each (N, 3H), gate order r, z, n)."""
    return GRUCellFunction.apply(gx, gh, h_prev)


# --- whole-sequence recurrences with backprop through time ---------------------------------------
class Recurrence(Function):
    """One layer and one direction of a recurrent net over a whole sequence.

    ``forward(xproj (L, N, G*H), h0 (N, H) or None, c0 (N, H) or None, w_hh (G*H, H), reverse)``
    returns ``(output (L, N, H), h_n)`` plus ``c_n`` for a cell with a state (LSTM). ``xproj``
    holds every timestep's input projection *with both biases folded in* (so a step is
    ``gates = xproj[t] + h @ W_hh^T``). ``reverse`` runs t = L-1 .. 0 (the backward direction of
    a bidirectional layer); ``output[t]`` is always the hidden state at time t. A None initial
    state is zero, and the first step then skips its GEMM. Subclasses give the cell's pointwise
    forward and backward (``cell`` and ``cell_backward``) in backend primitives.
    """

    has_state = False

    def cell(self, b, gates: View, state: View):
        """-> (h_buf, state_buf or None, saved buffers for backward)."""
        raise NotImplementedError

    def cell_backward(self, b, saved, h: View, state_prev: View, dh: View, dstate: View):
        """-> (grad_gates_buf, grad_state_prev_buf or None)."""
        raise NotImplementedError

    def forward(self, xproj, h0, c0, w_hh, reverse=False):
        b, dt = xproj.backend, xproj.dtype
        steps, n, gh = xproj.shape
        hs = w_hh.shape[1]
        if steps == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        self.dims, self.reverse = (steps, n, hs), bool(reverse)
        self.with_h0 = h0 is not None
        # W_hh^T made row-major once: every step's GEMM then reads B along its rows (OpenBLAS's
        # transposed-B GEMM took 84 us against 52 us at (32,128)@(128,512)).
        xv, w_t = xproj._view(), dense(b.contiguous(_transposed(w_hh._view())), (1, hs, gh))
        out = b.empty(steps * n * hs, dt)
        h = h0._view() if h0 is not None else None
        state = None
        if self.has_state:
            state = c0._view() if c0 is not None else _zeros_view(b, (n, hs), dt)
        saved = []
        for t in self.order(steps):
            gates = _step(xv, t)
            if h is not None:
                rec = dense(b.matmul(_batch1(h), w_t), (n, gh))
                gates = dense(b.binary("add", gates, rec), (n, gh))
            h_buf, state_buf, keep = self.cell(b, gates, state)
            b.assign_(View(out, (n, hs), (hs, 1), t * n * hs), dense(h_buf, (n, hs)))
            saved.append((state, keep))
            h = dense(h_buf, (n, hs))
            state = dense(state_buf, (n, hs)) if state_buf is not None else None
        output = _tensor(out, (steps, n, hs), xproj)
        h_n = Tensor._dense(h.buf, (n, hs), xproj.device)
        # The per-step buffers ride in saved_tensors, so the engine frees them after backward.
        self.save_for_backward(output, h0, w_hh, saved)
        if self.has_state:
            return output, h_n, Tensor._dense(state.buf, (n, hs), xproj.device)
        return output, h_n

    def order(self, steps):
        return range(steps - 1, -1, -1) if self.reverse else range(steps)

    def backward(self, grad_out, grad_hn, grad_cn=None):
        output, h0, w_hh, saved_steps = self.saved_tensors
        b, dt = output.backend, output.dtype
        steps, n, hs = self.dims
        gh = w_hh.shape[0]
        ov, wv = output._view(), _batch1(w_hh._view())
        gout = grad_out._view() if grad_out is not None else None
        dgates_all = b.empty(steps * n * gh, dt)
        dh_rec = grad_hn._view() if grad_hn is not None else None
        dstate = None
        if self.has_state:
            dstate = grad_cn._view() if grad_cn is not None else _zeros_view(b, (n, hs), dt)
        order = list(self.order(steps))
        for s in range(steps - 1, -1, -1):
            t = order[s]
            dh = _step(gout, t) if gout is not None else None
            if dh is None:
                dh = dh_rec
            elif dh_rec is not None:
                dh = dense(b.binary("add", dh, dh_rec), (n, hs))
            if dh is None:
                dh = _zeros_view(b, (n, hs), dt)
            state_prev, keep = saved_steps[s]
            dg, dstate_buf = self.cell_backward(b, keep, _step(ov, t), state_prev, dh, dstate)
            dg = dense(dg, (n, gh))
            b.assign_(View(dgates_all, (n, gh), (gh, 1), t * n * gh), dg)
            if s > 0 or (self.with_h0 and self.needs_input_grad[1]):
                dh_rec = dense(b.matmul(_batch1(dg), wv), (n, hs))
            dstate = dense(dstate_buf, (n, hs)) if dstate_buf is not None else None
        grad_w = None
        if self.needs_input_grad[3]:
            grad_w = _tensor(self.weight_grad(b, dgates_all, ov, h0), w_hh.shape, output)
        grad_xproj = _tensor(dgates_all, (steps, n, gh), output)
        grad_h0 = (Tensor._dense(dh_rec.buf, (n, hs), output.device) if h0 is not None and
                   self.needs_input_grad[1] else None)
        grad_c0 = (Tensor._dense(dstate.buf, (n, hs), output.device) if self.has_state and
                   self.needs_input_grad[2] else None)
        return grad_xproj, grad_h0, grad_c0, grad_w, None

    def weight_grad(self, b, dgates_all, ov: View, h0):
        """dW_hh = sum over steps that used h_prev of dgates_t^T @ h_prev: one GEMM over the
        (L-1)*N rows whose h_prev is an output row, plus one for the h0 step if h0 was given."""
        steps, n, hs = self.dims
        gh = dgates_all.size // (steps * n)
        rows = (steps - 1) * n
        # Forward direction: step t uses output[t-1]; reverse: output[t+1].
        g_off, h_off = (0, n * hs) if self.reverse else (n * gh, 0)
        dg = View(dgates_all, (1, gh, rows), (0, 1, gh), g_off)
        hp = View(ov.buf, (1, rows, hs), (0, hs, 1), ov.offset + h_off)
        grad = b.matmul(dg, hp) if rows else None
        if h0 is not None:
            t0 = steps - 1 if self.reverse else 0
            dg0 = View(dgates_all, (1, gh, n), (0, 1, gh), t0 * n * gh)
            first = b.matmul(dg0, _batch1(h0._view()))
            grad = first if grad is None else b.binary("add", dense(grad, (gh, hs)),
                                                       dense(first, (gh, hs)))
        if grad is None:
            grad = b.full(gh * hs, 0, ov.dtype)
        return grad


class LSTMRecurrence(Recurrence):
    """LSTM (gate order i, f, g, o): the fused ``lstm_cell`` kernel per step; saves the (N, 4H)
    activations and the (N, H) cell state of every step."""

    has_state = True
    unfused = unrolled(lstm_step)  # for create_graph=True

    def cell(self, b, gates, state):
        h, c, act = b.lstm_cell(gates, state)
        return h, c, (act, c)

    def cell_backward(self, b, saved, h, state_prev, dh, dstate):
        act, c = saved
        n, hs = h.shape
        return b.lstm_cell_backward(dense(act, (n, 4 * hs)), state_prev, dense(c, (n, hs)),
                                    dh, dstate)


class TanhRecurrence(Recurrence):
    """Elman RNN, h = tanh(xproj[t] + h @ W_hh^T): one unary launch per step; backward
    ``tanh_grad(dh, h)`` from the saved output (nothing else is kept)."""

    unfused = unrolled(lambda gates, state: (gates.tanh(), None))  # for create_graph=True

    def cell(self, b, gates, state):
        return b.unary("tanh", gates), None, None

    def cell_backward(self, b, saved, h, state_prev, dh, dstate):
        return b.binary("tanh_grad", dh, h), None


class ReluRecurrence(Recurrence):
    """Elman RNN with relu: relu(pre) > 0 exactly when the output h > 0, so ``relu_grad``
    reads the saved output instead of a saved pre-activation."""

    unfused = unrolled(lambda gates, state: (gates.relu(), None))  # for create_graph=True

    def cell(self, b, gates, state):
        return b.unary("relu", gates), None, None

    def cell_backward(self, b, saved, h, state_prev, dh, dstate):
        return b.binary("relu_grad", dh, h), None


RECURRENCES = {"LSTM": LSTMRecurrence, "RNN_TANH": TanhRecurrence, "RNN_RELU": ReluRecurrence}


# --- time-step unbinding -------------------------------------------------------------------------
class UnbindSteps(Function):
    """(L, ...) -> L views x[t] (no copy). Backward writes each step's gradient into one
    (L, ...) buffer (one copy per step; zeros for steps without a gradient) instead of L
    full-size zero tensors and L full-size accumulating adds, which slicing with ``x[t]`` would
    cost (quadratic in L)."""

    def forward(self, x):
        self.shape, self.dtype = tuple(x.shape), x.dtype
        v = x._view()
        return tuple(x._make_view(v.shape[1:], v.strides[1:], v.offset + t * v.strides[0])
                     for t in range(x.shape[0]))

    def backward(self, *grads):
        like = next(g for g in grads if g is not None)
        b = like.backend
        steps, rest = self.shape[0], self.shape[1:]
        size = int(np.prod(rest, dtype=np.int64))
        if any(g is None for g in grads):
            out = b.full(steps * size, 0, self.dtype)
        else:
            out = b.empty(steps * size, self.dtype)
        full = dense(out, self.shape)
        for t, g in enumerate(grads):
            if g is not None:
                b.assign_(_step(full, t), g._view())
        return Tensor._dense(out, self.shape, like.device)

    def unfused(self, x):
        """The unfused form: x[0], x[1], ... (slices)."""
        return tuple(x[t] for t in range(x.shape[0]))


def unbind_steps(x):
    return UnbindSteps.apply(x) if x.shape[0] > 1 else (x[0],)


# --- embedding -----------------------------------------------------------------------------------
class EmbeddingFunction(Function):
    """out[...] = weight[idx[...]]: ``index_select`` forward; backward ``index_add`` (atomics
    on cuda: repeated indices accumulate), with the rows of ``padding_idx`` masked to zero
    first (one ``where`` over a stride-0 broadcast of the (N,) keep-mask)."""

    def forward(self, weight, idx, padding_idx=None):
        b = weight.backend
        v, d = weight.shape
        self.rows, self.padding_idx = v, padding_idx
        flat = idx._view() if idx.is_contiguous() else dense(b.contiguous(idx._view()),
                                                             idx.shape)
        flat = View(flat.buf, (idx.numel(),), (1,), flat.offset)
        w = weight._view() if weight.is_contiguous() else dense(b.contiguous(weight._view()),
                                                                weight.shape)
        out = b.index_select(w, flat)
        self.flat = flat
        self.save_for_backward(idx)
        return Tensor._dense(out, tuple(idx.shape) + (d,), weight.device)

    def backward(self, g):
        b = g.backend
        n = self.flat.shape[0]
        d = g.shape[-1]
        gv = g._view() if g.is_contiguous() else dense(b.contiguous(g._view()), g.shape)
        rows = View(gv.buf, (n, d), (d, 1), gv.offset)
        if self.padding_idx is not None:
            keep = b.unary("ne", self.flat, self.padding_idx)
            rows = dense(b.where(View(keep, (n, d), (1, 0), 0), rows,
                                 _zeros_view(b, (n, d), g.dtype)), (n, d))
        out = b.index_add(self.flat, rows, self.rows)
        return Tensor._dense(out, (self.rows, d), g.device), None, None

    def unfused(self, weight, idx, padding_idx=None):
        """The unfused form: rows of ``weight`` selected (the ``padding_idx``
        row as a constant: it gets no gradient)."""
        flat = idx.reshape(-1)
        rows = weight.index_select(0, flat)
        if padding_idx is not None:
            rows = where((flat == padding_idx).unsqueeze(1), rows.detach(), rows)
        return rows.reshape(*idx.shape, weight.shape[1])


@op(method=False, F=True, module="Embedding",
    example=lambda r: (r.integers(0, 5, (2, 3)), r.standard_normal((5, 3))))
def embedding(input, weight, padding_idx=None):
    """``torch.nn.functional.embedding``: rows of ``weight`` (V, D) picked by an integer tensor
    of any shape -> (*input.shape, D). ``padding_idx`` rows get no gradient."""
    if not isinstance(input, Tensor) or input.dtype.kind not in "iu":
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the "
                           "following scalar types: Long, Int; but got "
                           f"{getattr(input, 'dtype', type(input).__name__)} instead")
    if weight.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D, got {weight.ndim}-D")
    check_same_device(weight, input)
    v = weight.shape[0]
    if padding_idx is not None:
        if not -v <= padding_idx < v:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = int(padding_idx) % v
    if input.numel():
        lo, hi = int(input.min().item()), int(input.max().item())
        if lo < 0 or hi >= v:
            raise IndexError("index out of range in self")
    return EmbeddingFunction.apply(weight, input, padding_idx)
