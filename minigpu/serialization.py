"""``mg.save`` / ``mg.load``: checkpoints in safetensors, the pickle-free format PyTorch and
Hugging Face users already load, or in PyTorch's own format (``torch_format.py``: the zip that
``torch.save`` writes, read without running code), chosen by the file's name or ``format=``;
``load`` tells them apart by their first bytes.

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
- Never unpickle code: checkpoints written by earlier minigpu versions (``.npz``) load with
  ``np.load(allow_pickle=False)``; a torch file's pickle may name only what
  ``torch.load(weights_only=True)`` accepts.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import io
import json
import os
import uuid
import zipfile
from collections import OrderedDict

import numpy as np

from . import cuda
from .dtypes import widen_bfloat16
from .nn.module import Module, Parameter
from .tensor import Device, Tensor
from .torch_format import (LEGACY_START, CheckpointError, NotTorchWeights, dump_zip,
                           is_torch_zip, load_legacy, load_zip)

_STRUCTURE, _SHA256, _DEVICES, _FORMAT = ("minigpu.structure", "minigpu.sha256",
                                      "minigpu.devices", 1)


# --- safe globals (torch.serialization's allow-list) -----------------------------------------
_SAFE_GLOBALS = []


def add_safe_globals(safe_globals):
    """Allow these classes/functions (or ``(obj, "module.Name")`` pairs) in checkpoints, as
    ``torch.serialization.add_safe_globals`` does for ``weights_only`` loading: a saved whole
    module names its classes (and functions it keeps, such as an activation), and
    ``load(weights_only=True)``, the default, builds only those in this list."""
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


def _safe_globals_by_name():
    """The allow-list by the name a pickle gives each global, ``{"module.Name": obj}`` (an
    ``(obj, "module.Name")`` entry under its name): what the torch checkpoint reader accepts
    besides torch's own list, as torch's weights-only unpickler does."""
    return {entry[1] if isinstance(entry, tuple) else f"{entry.__module__}.{entry.__qualname__}":
            entry[0] if isinstance(entry, tuple) else entry for entry in _SAFE_GLOBALS}


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
def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         *, format=None):
    """Save ``obj`` to ``f``, a path or a binary file object (``io.BytesIO``,
    ``open(path, "wb")``), in one of two formats:

    - ``format="torch"``, and by default for a name ending in ``.pt``, ``.pth`` or ``.bin``:
      PyTorch's own (``torch_format.py``), which ``torch.load(f, weights_only=True)`` reads: a
      state_dict or a nested checkpoint of tensors, containers, numbers and strings. An object
      torch could not read back that way (a whole module) goes to safetensors when the format
      came from the name, and is an error when ``format="torch"`` was given.
    - ``format="safetensors"``, the default otherwise: pickle-free. ``obj`` is a state_dict, a
      nested checkpoint (dicts with str/int keys,
    lists, tuples, tensors, NumPy arrays, numbers, strings, None), or a whole ``nn.Module``
    (its class's import path and its attributes: the tensors in the file, the rest as JSON;
    functions and classes it keeps by import path; a tensor used twice, tied weights, once). Each cuda tensor's device is
    recorded, so that ``load`` puts it back there, as PyTorch does. ``pickle_protocol`` and
    ``_use_new_zipfile_serialization`` are accepted and unused."""
    _refuse_pickle_module("save", pickle_module)
    if format not in (None, "torch", "safetensors"):
        raise ValueError(f"minigpu.save: format must be 'torch' or 'safetensors', got {format!r}")
    data = None
    if format == "torch" or (format is None and _torch_name(f)):
        try:
            data = dump_zip(obj)
        except NotTorchWeights:
            if format == "torch":
                raise
    if data is None:
        data = _safetensors_bytes(obj)
    if hasattr(f, "write"):
        f.write(data)
    else:
        _write_atomic(os.fspath(f), data)


_TORCH_SUFFIXES = (".pt", ".pth", ".bin")


def _torch_name(f) -> bool:
    """Whether ``f`` (a path, or a file object opened on one) is named like torch's files."""
    name = getattr(f, "name", None) if hasattr(f, "write") else os.fspath(f)
    return isinstance(name, str) and name.lower().endswith(_TORCH_SUFFIXES)


def _safetensors_bytes(obj) -> bytes:
    tensors, devices = {}, {}
    structure = _encode(obj, "", tensors, devices)
    metadata = {"format": "pt", _STRUCTURE: json.dumps({"version": _FORMAT, "tree": structure}),
                _SHA256: _digest(tensors)}
    if devices:
        metadata[_DEVICES] = json.dumps(devices)
    from safetensors.numpy import save as to_bytes
    return to_bytes(tensors, metadata=metadata)


def _refuse_pickle_module(what, pickle_module):
    if pickle_module is not None:
        raise ValueError(f"minigpu.{what}: pickle_module is not supported: minigpu checkpoints "
                         f"are safetensors files and never use pickle")


def _encode(obj, path, tensors, devices, shared=None):
    """The JSON form of ``obj``; tensors and arrays go into ``tensors`` under their path, and
    the device of each cuda tensor into ``devices``. Inside a saved module (``shared``: the
    tensors met so far, by id) a tensor met again is saved as a reference to the first (tied
    weights), and functions and classes as their import path."""
    if isinstance(obj, Module):
        return {"module": _encode_module(obj, path, tensors, devices,
                                         {} if shared is None else shared)}
    if shared is not None and isinstance(obj, Tensor):
        if id(obj) in shared:
            return {"same": shared[id(obj)]}
        node = _encode(obj.detach(), path, tensors, devices)
        shared[id(obj)] = node
        if isinstance(obj, Parameter):
            return {"parameter": [node, obj.requires_grad]}
        return node
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
                                       devices, shared)])
        return {"odict" if isinstance(obj, OrderedDict) else "dict": items}
    if isinstance(obj, (list, tuple)):
        values = [_encode(v, f"{path}.{i}" if path else str(i), tensors, devices, shared)
                  for i, v in enumerate(obj)]
        return {"tuple" if isinstance(obj, tuple) else "list": values}
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj  # JSON scalars: containers and tensors are always tagged objects
    if shared is not None:
        if isinstance(obj, (set, frozenset)):
            return {"set": [_encode(v, path, tensors, devices, shared) for v in sorted(obj)]}
        if isinstance(obj, type) or inspect.isfunction(obj) or inspect.isbuiltin(obj):
            return {"global": _global_name(obj, path)}
    raise TypeError(f"cannot save {path or 'the object'}: {type(obj).__name__} is not a module, "
                    f"tensor, array, number, string, None, dict, list or tuple (checkpoints "
                    f"never use pickle)")


def _encode_module(module, path, tensors, devices, shared):
    """A module as its class (import path) and its attributes: the parameters, buffers and
    submodules by name, every other attribute encoded as a value. Loading makes the object
    without calling its constructor (as unpickling does) and puts the attributes back."""
    cls = type(module)
    node = {"class": _global_name(cls, path), "attributes": []}
    for name, value in vars(module).items():
        where = f"{path}.{name}" if path else name
        if name in ("_parameters", "_buffers", "_modules"):
            value = [[k, _encode(v, f"{path}.{k}" if path else k, tensors, devices, shared)]
                     for k, v in value.items()]
            node["attributes"].append([name, {"table": value}])
        else:
            try:
                node["attributes"].append([name, _encode(value, where, tensors, devices,
                                                         shared)])
            except TypeError as e:
                raise TypeError(f"cannot save the module {cls.__name__}: its attribute "
                                f"{name!r} ({e})") from None
    return node


def _global_name(obj, path):
    """"module:qualname" of a class or function that can be imported back."""
    name = f"{obj.__module__}:{obj.__qualname__}"
    if "<locals>" in obj.__qualname__ or _resolve(name) is not obj:
        raise TypeError(f"cannot save {path or 'the object'}: {obj.__qualname__} cannot be "
                        f"imported back by its name {name!r} (a class or function defined "
                        f"inside a function?)")
    return name


def _resolve(name):
    module, _, qualname = name.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


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
    """Load what :func:`save` wrote, a file ``torch.save`` wrote (its zip format), a
    safetensors file from PyTorch, or a legacy ``.npz``, from ``f``, a path or a binary file
    object (read from its current position). The format is told by the first bytes.

    ``map_location``, as in PyTorch: ``None`` puts each tensor back on the device it was saved
    from (cpu for files that do not say); a device or string puts every tensor there; a dict
    maps saved devices to devices (``{"cuda:0": "cpu"}``); a callable is called as
    ``fn(tensor_on_cpu, saved_device)`` and its tensor is used (``None``: the default).
    ``weights_only`` (PyTorch's rule; default True): a file holding a whole module names its
    classes, and they are imported and built only when allowlisted (:func:`add_safe_globals`,
    :func:`safe_globals`), or with ``weights_only=False`` (trust the file). Either way nothing is
    unpickled: the classes are built without their constructors and get their attributes
    back. ``mmap`` is accepted and unused."""
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
        return _load_zip(data, name, place)
    if data.startswith(LEGACY_START):
        return load_legacy(data, name, place, _safe_globals_by_name())
    allowed = _weights_only_check if weights_only in (None, True) else (lambda obj, name: None)
    return _load_safetensors(data, name, place, allowed)


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
        if not cuda.is_available():
            raise RuntimeError("Attempting to deserialize object on a CUDA device but "
                               "minigpu.cuda.is_available() is False. If you are running on a "
                               "CPU-only machine, please use minigpu.load with "
                               "map_location=minigpu.device('cpu') to map your storages to the "
                               "CPU.")
    return Tensor._from_array(array, saved)


def _load_zip(data, name, place):
    """A zip file: torch.save's (a data.pkl inside) or minigpu's old ``.npz``."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = z.namelist()
    except zipfile.BadZipFile as e:
        raise CheckpointError(f"{name} is a truncated or damaged zip file: {e}") from None
    if is_torch_zip(names):
        return load_zip(data, name, place, _safe_globals_by_name())
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        return OrderedDict((k, place(arrays[k], "cpu")) for k in arrays.files)


_NUMPY_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
                 "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def _load_safetensors(data, name, place, allowed):
    from safetensors import SafetensorError, deserialize
    try:
        specs = deserialize(data)  # checks the header and the byte ranges
    except SafetensorError as e:
        raise CheckpointError(f"{name} is not a readable safetensors checkpoint (truncated, "
                              f"corrupted or another format): {e}") from None
    arrays = {}
    for key, spec in sorted(specs, key=lambda item: item[0]):  # safe_open's order: by name
        if spec["dtype"] == "BF16":  # NumPy has no bfloat16: widen the raw bytes (exact)
            arrays[key] = widen_bfloat16(bytes(spec["data"])).reshape(spec["shape"])
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
                                                                 devices.get(key, "cpu")),
                       allowed)
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, ImportError) as e:
        raise CheckpointError(f"{name}: the checkpoint structure in its metadata is damaged "
                              f"({type(e).__name__}: {e})") from None


def _decode(node, arrays, tensor, allowed=None, memo=None):
    """The object of a JSON node. ``allowed(obj, name)`` vets every class and function a saved
    module names; ``memo`` maps the first node of each tensor met inside a module to its
    tensor, for the references to it (tied weights)."""
    if not isinstance(node, dict):
        return node
    memo = {} if memo is None else memo
    (kind, value), = node.items()

    def again(v):
        return _decode(v, arrays, tensor, allowed, memo)

    if kind == "tensor":
        return tensor(value)
    if kind == "array":
        return arrays[value]
    if kind in ("dict", "odict"):
        pairs = ((k, again(v)) for k, v in value)
        return OrderedDict(pairs) if kind == "odict" else dict(pairs)
    if kind in ("list", "tuple"):
        items = [again(v) for v in value]
        return tuple(items) if kind == "tuple" else items
    if kind == "set":
        return {again(v) for v in value}
    if kind == "parameter":
        first, requires_grad = value
        memo[json.dumps(first)] = Parameter(again(first), requires_grad=requires_grad)
        return memo[json.dumps(first)]
    if kind == "same":
        key = json.dumps(value)
        if key not in memo:
            memo[key] = again(value)
        return memo[key]
    if kind == "global":
        return _allowed_global(value, allowed)
    if kind == "module":
        return _decode_module(value, again, allowed)
    raise ValueError(f"unknown node {kind!r}")


def _decode_module(value, again, allowed):
    cls = _allowed_global(value["class"], allowed)
    if not (isinstance(cls, type) and issubclass(cls, Module)):
        raise ValueError(f"{value['class']} is not a minigpu nn.Module class")
    module = cls.__new__(cls)
    for name, attribute in value["attributes"]:
        if isinstance(attribute, dict) and "table" in attribute:
            attribute = OrderedDict((k, again(v)) for k, v in attribute["table"])
        else:
            attribute = again(attribute)
        module.__dict__[name] = attribute
    return module


def _allowed_global(name, allowed):
    if allowed is None:
        raise ValueError(f"unexpected class or function {name!r} in the checkpoint")
    obj = _resolve(name)
    allowed(obj, name)
    return obj


def _weights_only_check(obj, name):
    """torch.load's weights_only rule: a class or function named in the file is loaded only
    when it is in the allow-list (add_safe_globals / safe_globals)."""
    dotted = name.replace(":", ".")
    for entry in _SAFE_GLOBALS:
        if entry is obj or (isinstance(entry, tuple) and entry[0] is obj):
            return
    raise CheckpointError(
        f"Weights only load failed. This file can still be loaded, to do so you have two "
        f"options, do those steps only if you trust the source of the checkpoint. (1) Re-run "
        f"minigpu.load with `weights_only` set to `False`: minigpu then imports the classes the "
        f"file names and builds them without their constructors (it never unpickles, so no "
        f"other code runs). (2) Allowlist the class: Unsupported global: GLOBAL {dotted} was "
        f"not an allowed global by default. Please use `minigpu.serialization."
        f"add_safe_globals([{obj.__qualname__}])` or the `minigpu.serialization.safe_globals("
        f"[{obj.__qualname__}])` context manager to allowlist this global if you trust this "
        f"class/function.")
