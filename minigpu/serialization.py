"""``mg.save`` / ``mg.load``: checkpoints in safetensors, the pickle-free format PyTorch and
Hugging Face users already load.

A safetensors file is an 8-byte header length, a JSON header (name -> dtype, shape, byte
range, plus a ``__metadata__`` dict of strings) and the raw tensor bytes. So:

- ``mg.save(model.state_dict(), "w.safetensors")`` stores every tensor under its state_dict
  key: ``safetensors.torch.load_file("w.safetensors")`` gives a dict that a PyTorch model's
  ``load_state_dict`` accepts, and ``mg.load`` reads files written by PyTorch's
  ``safetensors.torch.save_file`` (bfloat16 weights are widened to float32: minigpu has no
  bfloat16, see ``dtypes.py``).
- A full checkpoint (nested dicts, lists and tuples of tensors, arrays, numbers, strings,
  ``None``: model and optimizer state, epoch, config) keeps its tensors in the file, named by
  their dotted path (``optimizer.state.0.exp_avg``), and its structure as JSON in the metadata
  (``minigpu.structure``), with a SHA-256 of the tensor bytes (``minigpu.sha256``) so a file
  edited or damaged after saving is refused rather than silently loaded.
- ``f`` is a path or a binary file object (``io.BytesIO``, ``open(path, "wb")``). The device
  of each cuda tensor is kept in the metadata (``minigpu.devices``), so ``load`` restores it
  there unless ``map_location`` says otherwise (PyTorch's rules).
- Writing to a path goes to a temporary file in the same folder, renamed into place
  (``os.replace``): an interrupted save never leaves a truncated checkpoint. The file gets
  the usual mode (0666 minus the umask), like any file the user creates. A file object is
  written as it is given.
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

_STRUCTURE, _SHA256, _DEVICES, _FORMAT = ("minigpu.structure", "minigpu.sha256",
                                      "minigpu.devices", 1)


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
def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True):
    """Save ``obj`` as safetensors to ``f``, a path or a binary file object (``io.BytesIO``,
    ``open(path, "wb")``): a state_dict, or a nested checkpoint (dicts with str/int keys,
    lists, tuples, tensors, NumPy arrays, numbers, strings, None). Each cuda tensor's device is
    recorded, so that ``load`` puts it back there, as PyTorch does. ``pickle_protocol`` and
    ``_use_new_zipfile_serialization`` are accepted and unused: nothing is pickled."""
    _refuse_pickle_module("save", pickle_module)
    tensors, devices = {}, {}
    structure = _encode(obj, "", tensors, devices)
    metadata = {"format": "pt", _STRUCTURE: json.dumps({"version": _FORMAT, "tree": structure}),
                _SHA256: _digest(tensors)}
    if devices:
        metadata[_DEVICES] = json.dumps(devices)
    from safetensors.numpy import save as to_bytes
    data = to_bytes(tensors, metadata=metadata)
    if hasattr(f, "write"):
        f.write(data)
    else:
        _write_atomic(os.fspath(f), data)


def _refuse_pickle_module(what, pickle_module):
    if pickle_module is not None:
        raise ValueError(f"minigpu.{what}: pickle_module is not supported: minigpu checkpoints "
                         f"are safetensors files and never use pickle")


def _encode(obj, path, tensors, devices):
    """The JSON form of ``obj``; tensors and arrays go into ``tensors`` under their path, and
    the device of each cuda tensor into ``devices``."""
    if isinstance(obj, (Tensor, np.ndarray)):
        array = obj.detach().numpy() if isinstance(obj, Tensor) else obj
        if array.dtype == object:
            raise TypeError(f"cannot save {path or 'the object'}: an object array (checkpoints "
                            f"never use pickle)")
        name = path or "tensor"
        while name in tensors:  # "a.b" as a key and as a nested path: keep both
            name += "_"
        tensors[name] = np.asarray(array, order="C")  # ascontiguousarray would make 0-d 1-d
        if isinstance(obj, Tensor) and obj.device.type != "cpu":
            devices[name] = obj.device.type
        return {"tensor" if isinstance(obj, Tensor) else "array": name}
    if isinstance(obj, dict):
        items = []
        for key, value in obj.items():
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(f"cannot save a dict key {key!r} at {path or 'the top level'}: "
                                f"keys must be str or int")
            items.append([key, _encode(value, f"{path}.{key}" if path else str(key), tensors,
                                       devices)])
        return {"odict" if isinstance(obj, OrderedDict) else "dict": items}
    if isinstance(obj, (list, tuple)):
        values = [_encode(v, f"{path}.{i}" if path else str(i), tensors, devices)
                  for i, v in enumerate(obj)]
        return {"tuple" if isinstance(obj, tuple) else "list": values}
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj  # JSON scalars: containers and tensors are always tagged objects
    hint = (" To save a model, save model.state_dict() and restore it with "
            "model.load_state_dict(minigpu.load(f))." if hasattr(obj, "state_dict") else "")
    raise TypeError(f"cannot save {path or 'the object'}: {type(obj).__name__} is not a tensor, "
                    f"array, number, string, None, dict, list or tuple (checkpoints never use "
                    f"pickle).{hint}")


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
def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Load what :func:`save` wrote (or a safetensors file from PyTorch, or a legacy ``.npz``)
    from ``f``, a path or a binary file object (read from its current position).

    ``map_location``, as in PyTorch: ``None`` puts each tensor back on the device it was saved
    from (cpu for files that do not say); a device or string puts every tensor there; a dict
    maps saved devices to devices (``{"cuda:0": "cpu"}``); a callable is called as
    ``fn(tensor_on_cpu, saved_device)`` and its tensor is used (``None``: the default).
    ``weights_only`` (any value) and ``mmap`` are accepted: minigpu's files hold only tensors,
    numbers, strings and containers, so every load is a weights-only load."""
    _refuse_pickle_module("load", pickle_module)
    if pickle_load_args:
        raise TypeError(f"minigpu.load: unexpected keyword arguments {sorted(pickle_load_args)} "
                        f"(pickle load arguments; minigpu never unpickles)")
    if hasattr(f, "read"):
        name, data = getattr(f, "name", "the file object"), f.read()
    else:
        name = os.fspath(f)
        with open(name, "rb") as fh:
            data = fh.read()
    place = _placer(map_location)
    if data.startswith(b"\x93NUMPY"):
        raise CheckpointError(
            f"{name} is a single NumPy array (.npy), not a checkpoint. Read it with "
            f"numpy.load({name!r}) and wrap it with minigpu.from_numpy; mg.save/mg.load use "
            f"safetensors files (and still read minigpu's old .npz checkpoints).")
    if data.startswith(b"PK"):
        return _load_npz(data, name, place)
    return _load_safetensors(data, name, place)


def _placer(map_location):
    """``place(array, saved_device)``: the Tensor of ``array`` on the device map_location picks."""
    if callable(map_location) and not isinstance(map_location, (str, Device)):
        def place(array, saved):
            out = map_location(Tensor._from_array(array, "cpu"), saved)
            return out if isinstance(out, Tensor) else _restore(array, saved)
        return place
    if isinstance(map_location, dict):
        table = {Device(k).type: Device(v) for k, v in map_location.items()}
        return lambda array, saved: (Tensor._from_array(array, table[saved]) if saved in table
                                     else _restore(array, saved))
    if map_location is None:
        return _restore
    device = Device(map_location)
    return lambda array, saved: Tensor._from_array(array, device)


def _restore(array, saved):
    if saved == "cuda":
        from . import cuda
        if not cuda.is_available():
            raise RuntimeError("Attempting to deserialize object on a CUDA device but "
                               "minigpu.cuda.is_available() is False. If you are running on a "
                               "CPU-only machine, please use minigpu.load with "
                               "map_location=minigpu.device('cpu') to map your storages to the "
                               "CPU.")
    return Tensor._from_array(array, saved)


def _load_npz(data, name, place):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        if any(n.endswith(".pkl") for n in z.namelist()):
            raise CheckpointError(
                f"{name} is a pickled file (torch.save?): minigpu never unpickles. Save the "
                f"weights with safetensors.torch.save_file(model.state_dict(), path) instead.")
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        return OrderedDict((k, place(arrays[k], "cpu")) for k in arrays.files)


_NUMPY_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
                 "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def _load_safetensors(data, name, place):
    from safetensors import SafetensorError, deserialize
    try:
        specs = deserialize(data)  # checks the header and the byte ranges
    except SafetensorError as e:
        raise CheckpointError(f"{name} is not a readable safetensors checkpoint (truncated, "
                              f"corrupted or another format): {e}") from None
    arrays = {}
    for key, spec in sorted(specs, key=lambda item: item[0]):  # safe_open's order: by name
        if spec["dtype"] == "BF16":  # NumPy has no bfloat16: widen the raw bytes (exact)
            arrays[key] = _bfloat16_to_float32(spec)
        elif spec["dtype"] in _NUMPY_DTYPES:
            arrays[key] = np.frombuffer(spec["data"], _NUMPY_DTYPES[spec["dtype"]]).reshape(
                spec["shape"])
        else:
            raise CheckpointError(f"{name}: cannot read tensor {key!r} of dtype {spec['dtype']}; "
                                  f"minigpu loads bfloat16, float16/32/64, integer and bool "
                                  f"tensors")
    header_size = int.from_bytes(data[:8], "little")
    metadata = json.loads(data[8:8 + header_size]).get("__metadata__") or {}
    if _SHA256 in metadata and metadata[_SHA256] != _digest(arrays):
        raise CheckpointError(f"{name} was modified or damaged after it was saved: its tensor "
                              f"bytes do not match the checksum written with them")
    try:
        devices = json.loads(metadata.get(_DEVICES, "{}"))
        if _STRUCTURE not in metadata:  # a plain safetensors file, e.g. from PyTorch
            return OrderedDict((k, place(a, devices.get(k, "cpu"))) for k, a in arrays.items())
        header = json.loads(metadata[_STRUCTURE])
        if header.get("version") != _FORMAT:
            raise ValueError(f"unknown structure version {header.get('version')!r}")
        return _decode(header["tree"], arrays, lambda key: place(arrays[key],
                                                                 devices.get(key, "cpu")))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{name}: the checkpoint structure in its metadata is damaged "
                              f"({type(e).__name__}: {e})") from None


def _bfloat16_to_float32(spec):
    """bfloat16 is the top half of a float32: shift the 16 bits into place."""
    bits = np.frombuffer(bytes(spec["data"]), dtype="<u2").astype("<u4") << 16
    return bits.view("<f4").reshape(spec["shape"])


def _decode(node, arrays, tensor):
    if not isinstance(node, dict):
        return node
    (kind, value), = node.items()
    if kind == "tensor":
        return tensor(value)
    if kind == "array":
        return arrays[value]
    if kind in ("dict", "odict"):
        pairs = ((k, _decode(v, arrays, tensor)) for k, v in value)
        return OrderedDict(pairs) if kind == "odict" else dict(pairs)
    if kind in ("list", "tuple"):
        items = [_decode(v, arrays, tensor) for v in value]
        return tuple(items) if kind == "tuple" else items
    raise ValueError(f"unknown node {kind!r}")
