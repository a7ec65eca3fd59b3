"""``mg.save`` / ``mg.load``: checkpoints in safetensors, the pickle-free format PyTorch and
Hugging Face users already load.

A safetensors file is an 8-byte header length, a JSON header (name -> dtype, shape, byte
range, plus a ``__metadata__`` dict of strings) and the raw tensor bytes. So:

- ``mg.save(model.state_dict(), "w.safetensors")`` stores every tensor under its state_dict
  key: ``safetensors.torch.load_file("w.safetensors")`` gives a dict that a PyTorch model's
  ``load_state_dict`` accepts, and ``mg.load`` reads files written by PyTorch's
  ``safetensors.torch.save_file`` (bfloat16 and float16 weights are widened to float32).
- A full checkpoint (nested dicts, lists and tuples of tensors, arrays, numbers, strings,
  ``None``: model and optimizer state, epoch, config) keeps its tensors in the file, named by
  their dotted path (``optimizer.state.0.exp_avg``), and its structure as JSON in the metadata
  (``minigpu.structure``), with a SHA-256 of the tensor bytes (``minigpu.sha256``) so a file
  edited or damaged after saving is refused rather than silently loaded.
- Writing goes to a temporary file in the same folder, renamed into place (``os.replace``):
  an interrupted save never leaves a truncated checkpoint. The file gets the usual mode
  (0666 minus the umask), like any file the user creates.
- Never pickle: checkpoints written by earlier minigpu versions (``.npz``) load with
  ``np.load(allow_pickle=False)``.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import uuid
import zipfile
from collections import OrderedDict

import numpy as np

from .tensor import Device, Tensor

_STRUCTURE, _SHA256, _FORMAT = "minigpu.structure", "minigpu.sha256", 1


class CheckpointError(RuntimeError):
    """A file that is not a readable minigpu/safetensors checkpoint (truncated, edited, other)."""


# --- safe globals (torch.serialization's allow-list) -----------------------------------------
_SAFE_GLOBALS = []


def add_safe_globals(safe_globals):
    """Allow these classes/functions (or ``(obj, "module.Name")`` pairs) in checkpoints, as
    ``torch.serialization.add_safe_globals`` does for ``weights_only`` loading. minigpu's
    checkpoints hold only tensors, arrays, numbers, strings, None and containers, so the list
    is kept for programs that register their classes; no class is ever loaded from a file."""
    if not isinstance(safe_globals, (list, tuple)):
        raise TypeError(f"add_safe_globals expects a list of globals, got "
                        f"{type(safe_globals).__name__}")
    for entry in safe_globals:
        if isinstance(entry, tuple):
            if len(entry) != 2 or not isinstance(entry[1], str):
                raise TypeError(f"a safe global given as a tuple must be (obj, 'module.Name'), "
                                f"got {entry!r}")
        elif not callable(entry):
            raise TypeError(f"a safe global must be a class or a function, got {entry!r}")
        if entry not in _SAFE_GLOBALS:
            _SAFE_GLOBALS.append(entry)


def get_safe_globals():
    """The globals added by :func:`add_safe_globals` (a new list)."""
    return list(_SAFE_GLOBALS)


def clear_safe_globals():
    """Forget every global added by :func:`add_safe_globals`."""
    _SAFE_GLOBALS.clear()


@contextlib.contextmanager
def safe_globals(globals_):
    """``with safe_globals([...]):`` the globals are allowed inside the block only."""
    before = list(_SAFE_GLOBALS)
    add_safe_globals(globals_)
    try:
        yield
    finally:
        _SAFE_GLOBALS[:] = before


# --- save ---------------------------------------------------------------------------------------
def save(obj, f):
    """Save ``obj`` to the path ``f`` as safetensors: a state_dict, or a nested checkpoint
    (dicts with str/int keys, lists, tuples, tensors, NumPy arrays, numbers, strings, None)."""
    tensors = {}
    structure = _encode(obj, "", tensors)
    metadata = {"format": "pt", _STRUCTURE: json.dumps({"version": _FORMAT, "tree": structure}),
                _SHA256: _digest(tensors)}
    from safetensors.numpy import save as to_bytes
    _write_atomic(os.fspath(f), to_bytes(tensors, metadata=metadata))


def _encode(obj, path, tensors):
    """The JSON form of ``obj``; tensors and arrays go into ``tensors`` under their path."""
    if isinstance(obj, (Tensor, np.ndarray)):
        array = obj.detach().numpy() if isinstance(obj, Tensor) else obj
        if array.dtype == object:
            raise TypeError(f"cannot save {path or 'the object'}: an object array (checkpoints "
                            f"never use pickle)")
        name = path or "tensor"
        while name in tensors:  # "a.b" as a key and as a nested path: keep both
            name += "_"
        tensors[name] = np.asarray(array, order="C")  # ascontiguousarray would make 0-d 1-d
        return {"tensor" if isinstance(obj, Tensor) else "array": name}
    if isinstance(obj, dict):
        items = []
        for key, value in obj.items():
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(f"cannot save a dict key {key!r} at {path or 'the top level'}: "
                                f"keys must be str or int")
            items.append([key, _encode(value, f"{path}.{key}" if path else str(key), tensors)])
        return {"odict" if isinstance(obj, OrderedDict) else "dict": items}
    if isinstance(obj, (list, tuple)):
        values = [_encode(v, f"{path}.{i}" if path else str(i), tensors) for i, v in enumerate(obj)]
        return {"tuple" if isinstance(obj, tuple) else "list": values}
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj  # JSON scalars: containers and tensors are always tagged objects
    raise TypeError(f"cannot save {path or 'the object'}: {type(obj).__name__} is not a tensor, "
                    f"array, number, string, None, dict, list or tuple (checkpoints never use "
                    f"pickle)")


def _digest(arrays) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = arrays[name]
        h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        h.update(np.asarray(a, order="C").tobytes())
    return h.hexdigest()


def _write_atomic(path, data: bytes):
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    # os.open with 0o666 lets the umask decide the mode, as for any file the user writes
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# --- load ---------------------------------------------------------------------------------------
def load(f, map_location=None):
    """Load what :func:`save` wrote (or a safetensors file from PyTorch, or a legacy ``.npz``);
    tensors are created on ``map_location`` (``"cpu"`` by default, or ``"cuda"``)."""
    path = os.fspath(f)
    device = Device(map_location or "cpu")
    with open(path, "rb") as fh:
        magic = fh.read(8)
    if magic.startswith(b"\x93NUMPY"):
        raise CheckpointError(
            f"{path} is a single NumPy array (.npy), not a checkpoint. Read it with "
            f"numpy.load({path!r}) and wrap it with minigpu.from_numpy; mg.save/mg.load use "
            f"safetensors files (and still read minigpu's old .npz checkpoints).")
    if magic.startswith(b"PK"):
        return _load_npz(path, device)
    return _load_safetensors(path, device)


def _load_npz(path, device):
    with zipfile.ZipFile(path) as z:
        if any(n.endswith(".pkl") for n in z.namelist()):
            raise CheckpointError(
                f"{path} is a pickled file (torch.save?): minigpu never unpickles. Save the "
                f"weights with safetensors.torch.save_file(model.state_dict(), path) instead.")
    with np.load(path, allow_pickle=False) as data:
        return OrderedDict((k, Tensor._from_array(data[k], device)) for k in data.files)


def _load_safetensors(path, device):
    from safetensors import SafetensorError, deserialize, safe_open
    try:
        with safe_open(path, framework="np") as fh:
            metadata = fh.metadata() or {}
            names = list(fh.keys())
            bf16 = {n for n in names if fh.get_slice(n).get_dtype() == "BF16"}
            arrays = {n: None if n in bf16 else fh.get_tensor(n) for n in names}
        if bf16:  # NumPy has no bfloat16: widen the raw bytes to float32 (exact)
            with open(path, "rb") as raw_file:
                raw = dict(deserialize(raw_file.read()))
            arrays.update({n: _bfloat16_to_float32(raw[n]) for n in bf16})
    except SafetensorError as e:
        raise CheckpointError(f"{path} is not a readable safetensors checkpoint (truncated, "
                              f"corrupted or another format): {e}") from None
    except (TypeError, ValueError) as e:  # e.g. bfloat16, which NumPy has no dtype for
        raise CheckpointError(f"{path}: cannot read its tensors as NumPy arrays ({e}); minigpu "
                              f"loads bfloat16, float16/32/64, integer and bool tensors") from None
    if _SHA256 in metadata and metadata[_SHA256] != _digest(arrays):
        raise CheckpointError(f"{path} was modified or damaged after it was saved: its tensor "
                              f"bytes do not match the checksum written with them")
    if _STRUCTURE not in metadata:  # a plain safetensors file, e.g. from PyTorch
        return OrderedDict((k, Tensor._from_array(a, device)) for k, a in arrays.items())
    try:
        header = json.loads(metadata[_STRUCTURE])
        if header.get("version") != _FORMAT:
            raise ValueError(f"unknown structure version {header.get('version')!r}")
        return _decode(header["tree"], arrays, device)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{path}: the checkpoint structure in its metadata is damaged "
                              f"({type(e).__name__}: {e})") from None


def _bfloat16_to_float32(spec):
    """bfloat16 is the top half of a float32: shift the 16 bits into place."""
    bits = np.frombuffer(bytes(spec["data"]), dtype="<u2").astype("<u4") << 16
    return bits.view("<f4").reshape(spec["shape"])


def _decode(node, arrays, device):
    if not isinstance(node, dict):
        return node
    (kind, value), = node.items()
    if kind == "tensor":
        return Tensor._from_array(arrays[value], device)
    if kind == "array":
        return arrays[value]
    if kind in ("dict", "odict"):
        pairs = ((k, _decode(v, arrays, device)) for k, v in value)
        return OrderedDict(pairs) if kind == "odict" else dict(pairs)
    if kind in ("list", "tuple"):
        items = [_decode(v, arrays, device) for v in value]
        return tuple(items) if kind == "tuple" else items
    raise ValueError(f"unknown node {kind!r}")
