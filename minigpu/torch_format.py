"""PyTorch's checkpoint format, read and written without torch and without running code.

``torch.save`` writes a zip archive: ``<prefix>/data.pkl`` (a pickle, protocol 2, of the saved
object), one ``<prefix>/data/<key>`` record of raw bytes per storage, ``<prefix>/byteorder``
and ``<prefix>/version`` (before torch 1.6, the *legacy* format: the same pickle between
others, then the raw storages, read by :func:`load_legacy`). In the pickle a tensor is a call of
``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)``, and
each storage is a *persistent id* ``("storage", torch.FloatStorage, key, location, numel)``
that names its record.

Reading: a pickle names the functions it calls, so unpickling an untrusted file runs whatever
it names (``os.system``). :class:`_Unpickler` resolves a name only from the short list of what
``torch.load(weights_only=True)`` accepts (the tensor and parameter rebuilders, the storage
types, ``OrderedDict``, ``torch.Size``, ``torch.device``, the builtin containers), each mapped
to minigpu's own function; any other name is refused with an error naming it, before anything
is called. Storages are checked against their records (present, the size the pickle says),
and every tensor's extent against its storage. Tensors that shared a storage share a buffer.

Writing: :class:`_Pickler` writes the same pickle torch writes: tensors become
``_rebuild_tensor_v2`` calls on persistent storages, and the torch names are written as names
(``GLOBAL torch._utils _rebuild_tensor_v2``), never imported; so ``torch.load(f,
weights_only=True)`` reads the file.
"""
from __future__ import annotations

import _compat_pickle
import contextlib
import io
import pickle
import struct
import zipfile
from collections import OrderedDict

import numpy as np

from .dtypes import widen_bfloat16
from .nn.module import Parameter
from .tensor import Device, Size, Tensor


class CheckpointError(RuntimeError):
    """A file that is not a readable checkpoint (truncated, edited, refused, other)."""


# --- the storage types: torch's names, NumPy's dtypes --------------------------------------------
_STORAGES = {"DoubleStorage": np.float64, "FloatStorage": np.float32,
             "HalfStorage": np.float16, "BFloat16Storage": None,  # None: widened to float32
             "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
             "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_}
_STORAGE_OF = {np.dtype(d): name for name, d in _STORAGES.items() if d is not None}


class _StorageType:
    """What the pickle's ``torch.FloatStorage`` (etc.) stands for: a dtype, not callable."""

    def __init__(self, name):
        self.name, self.dtype = name, _STORAGES[name]

    @property
    def itemsize(self):
        return 2 if self.dtype is None else np.dtype(self.dtype).itemsize

    def decode(self, raw: bytes, big_endian: bool) -> np.ndarray:
        if self.dtype is None:  # bfloat16: minigpu has none
            return widen_bfloat16(raw, big_endian)
        dtype = np.dtype(self.dtype).newbyteorder(">" if big_endian else "<")
        return np.frombuffer(raw, dtype=dtype).astype(self.dtype)  # a writable native copy


# --- reading --------------------------------------------------------------------------------
def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False, hooks=None,
                    metadata=None):
    """``torch._utils._rebuild_tensor_v2``: a tensor over ``storage`` (checked to fit in it)."""
    if not isinstance(storage, Tensor) or storage.ndim != 1:
        raise CheckpointError(f"a tensor is rebuilt on {type(storage).__name__}, not a storage")
    size, stride = tuple(size), tuple(stride)
    if (len(size) != len(stride) or not all(isinstance(v, int) and v >= 0
                                            for v in size + stride + (storage_offset,))):
        raise CheckpointError(f"a tensor of size {size}, stride {stride} and offset "
                              f"{storage_offset} is not a valid layout")
    end = storage_offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1
    if 0 not in size and end > storage.shape[0]:
        raise CheckpointError(f"a tensor of size {size}, stride {stride} and offset "
                              f"{storage_offset} reaches element {end - 1} of a storage of "
                              f"{storage.shape[0]} elements")
    t = Tensor(storage._buf, size, stride, storage_offset, storage.device)
    t._version_counter = storage._version_counter  # tensors of one storage share writes
    return t.requires_grad_(True) if requires_grad else t


def _rebuild_parameter(data, requires_grad, hooks, state=None):
    return Parameter(data, requires_grad=requires_grad)


def _latin1_bytes(text, encoding):
    """``_codecs.encode``, which protocol 2 pickles ``bytes`` as (latin-1 only)."""
    if encoding not in ("latin1", "latin-1"):
        raise CheckpointError(f"bytes encoded as {encoding!r}, not latin1")
    return text.encode("latin1")


_ALLOWED = {("collections", "OrderedDict"): OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
            ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
            ("torch", "Size"): Size,
            ("torch", "device"): lambda *args: Device(":".join(map(str, args))),
            ("_codecs", "encode"): _latin1_bytes,
            ("builtins", "set"): set, ("builtins", "frozenset"): frozenset,
            ("builtins", "bytearray"): bytearray,
            **{("torch", name): _StorageType(name) for name in _STORAGES}}
"""The globals a weights-only load accepts (torch's list, less what minigpu has no type for),
each with minigpu's stand-in."""


class _Unpickler(pickle._Unpickler):
    """The pure-Python unpickler, with globals and persistent ids from the lists above only,
    plus the user's allow-list (``add_safe_globals``: ``{"module.Name": obj}``), as
    ``torch.load(weights_only=True)`` has it: only an allowed function or class is called
    (``REDUCE``), only an allowed class is instantiated (``NEWOBJ``), and ``BUILD`` (setting an
    object's attributes, a state dict's ``_metadata``) is done on an instance of an allowed
    class only."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, stream, storage=None, build_tensors=True, safe_globals=None):
        super().__init__(stream)
        self.storage, self.build_tensors = storage, build_tensors
        self.safe_globals = safe_globals or {}
        self.callables = [*_ALLOWED.values(), _skip, *self.safe_globals.values()]
        self.classes = [c for c in self.callables if isinstance(c, type)]

    def find_class(self, module, name):
        if self.proto < 3:  # protocol 2 writes Python 2's names (__builtin__.set): as pickle
            module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if f"{module}.{name}" in self.safe_globals:
            return self.safe_globals[f"{module}.{name}"]
        if (module, name) not in _ALLOWED:
            raise CheckpointError(
                f"Weights only load failed: Unsupported global: GLOBAL {module}.{name} was not "
                f"an allowed global by default. Please use `minigpu.serialization."
                f"add_safe_globals([{module}.{name}])` or the `minigpu.serialization."
                f"safe_globals([{module}.{name}])` context manager to allowlist this global if you trust this "
                f"class/function (minigpu never runs other code from a file: there is no "
                f"weights_only=False for pickles)")
        found = _ALLOWED[module, name]
        if not self.build_tensors and found in (_rebuild_tensor, _rebuild_parameter):
            return _skip
        return found

    def persistent_load(self, pid):
        """A storage: ``("storage", type, key, location, numel)``, and in the legacy format a
        sixth item, ``None`` (views of storages, from before torch 1.0, are not read)."""
        if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str)
                and isinstance(pid[3], str) and isinstance(pid[4], int) and pid[4] >= 0
                and pid[5:] in ((), (None,))):
            raise CheckpointError(f"unexpected persistent id {pid!r} (a storage is "
                                  f"('storage', torch.<Type>Storage, key, location, numel))")
        return self.storage(*pid[1:5])

    def _check_class(self, cls):
        if not any(cls is entry for entry in self.classes):
            raise CheckpointError(f"Can only create new object for classes allowed by default "
                                  f"or with add_safe_globals, but got {cls!r}")

    def load_reduce(self):
        if not any(self.stack[-2] is entry for entry in self.callables):
            raise CheckpointError(f"Trying to call reduce for unrecognized function "
                                  f"{self.stack[-2]!r}")
        pickle._Unpickler.load_reduce(self)

    def load_newobj(self):
        self._check_class(self.stack[-2])
        pickle._Unpickler.load_newobj(self)

    def load_newobj_ex(self):
        self._check_class(self.stack[-3])
        pickle._Unpickler.load_newobj_ex(self)

    def load_build(self):
        if not any(type(self.stack[-2]) is entry for entry in self.classes):
            raise CheckpointError(f"the pickle sets the attributes of a "
                                  f"{type(self.stack[-2]).__name__}, which a weights-only "
                                  f"load does not allow (only those of a class allowed by "
                                  f"default, such as OrderedDict, or with add_safe_globals)")
        pickle._Unpickler.load_build(self)

    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex
    dispatch[pickle.BUILD[0]] = load_build


def _skip(*args, **kwargs):
    """A tensor rebuilder's stand-in while a legacy file's storages are only being listed."""


@contextlib.contextmanager
def _named_errors(name):
    """Every way a file can fail to read, as a CheckpointError naming the file."""
    try:
        yield
    except CheckpointError as e:
        raise CheckpointError(f"{name}: {e}") from None
    except zipfile.BadZipFile as e:
        raise CheckpointError(f"{name} is a truncated or damaged zip file (torch.save's "
                              f"format): {e}") from None
    except (pickle.UnpicklingError, EOFError, TypeError, ValueError, KeyError, IndexError,
            AttributeError, OverflowError, struct.error) as e:
        raise CheckpointError(f"{name}: its pickle is not a readable torch checkpoint "
                              f"({type(e).__name__}: {e})") from None


def is_torch_zip(names) -> bool:
    return any(n == "data.pkl" or n.endswith("/data.pkl") for n in names)


def load_zip(data: bytes, name: str, place, safe_globals=None):
    """The object of a ``torch.save`` zip file; ``place(array, saved_device)`` puts each
    storage (a flat NumPy array) on its device as a 1-d tensor; ``safe_globals``: the user's
    allow-list, ``{"module.Name": obj}``."""
    with _named_errors(name):
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = set(archive.namelist())
        pickles = sorted(n for n in names if n == "data.pkl" or n.endswith("/data.pkl"))
        prefix = pickles[0][:-len("data.pkl")]
        big_endian = (archive.read(prefix + "byteorder").strip() == b"big"
                      if prefix + "byteorder" in names else False)
        storages = {}

        def storage(kind, key, location, count):
            if key not in storages:
                record = f"{prefix}data/{key}"
                if record not in names:
                    raise CheckpointError(f"data.pkl refers to storage {key!r} ({record}), "
                                          f"which is not in the file")
                raw = archive.read(record)
                if len(raw) != count * kind.itemsize:
                    raise CheckpointError(
                        f"storage {key!r} ({record}) holds {len(raw)} bytes, but data.pkl "
                        f"says {count} elements of {kind.name} ({count * kind.itemsize} bytes)")
                storages[key] = place(kind.decode(raw, big_endian), location.split(":")[0])
            return storages[key]

        return _Unpickler(io.BytesIO(archive.read(pickles[0])), storage,
                          safe_globals=safe_globals).load()


_LEGACY_MAGIC, _LEGACY_VERSION = 0x1950A86A20F9469CFC6C, 1001
LEGACY_START = b"\x80\x02\x8a\x0a" + _LEGACY_MAGIC.to_bytes(10, "little")
"""How a legacy file starts: a protocol-2 pickle of its magic number."""


def load_legacy(data: bytes, name: str, place, safe_globals=None):
    """The object of a file ``torch.save(..., _use_new_zipfile_serialization=False)`` wrote:
    pickles of the magic number, the protocol version, the system's sizes and the object,
    then a pickle of the storage keys, then each storage as an 8-byte element count and its
    bytes. The object's pickle is read twice: first only to list its storages (no tensor is
    built), then, once their bytes are read, for real."""
    with _named_errors(name):
        stream = io.BytesIO(data)
        magic, version, system = (_Unpickler(stream).load() for _ in range(3))
        if magic != _LEGACY_MAGIC or version != _LEGACY_VERSION:
            raise CheckpointError(f"not torch's legacy format (magic number {magic!r}, "
                                  f"protocol version {version!r})")
        big_endian = not system.get("little_endian", True)
        start, listed = stream.tell(), {}
        _Unpickler(stream, lambda *pid: listed.setdefault(pid[1], pid),
                   build_tensors=False, safe_globals=safe_globals).load()
        storages = {}
        for key in _Unpickler(stream).load():
            if key not in listed:
                raise CheckpointError(f"storage {key!r} is in the file but not in its pickle")
            kind, _, location, count = listed[key]
            saved = int.from_bytes(stream.read(8), "big" if big_endian else "little")
            raw = stream.read(count * kind.itemsize)
            if saved != count or len(raw) != count * kind.itemsize:
                raise CheckpointError(
                    f"storage {key!r} holds {saved} elements ({len(raw)} bytes read), but the "
                    f"pickle says {count} elements of {kind.name}")
            storages[key] = place(kind.decode(raw, big_endian), location.split(":")[0])

        def storage(kind, key, location, count):
            if key not in storages:
                raise CheckpointError(f"the pickle refers to storage {key!r}, which is not "
                                      f"in the file")
            return storages[key]

        stream.seek(start)
        return _Unpickler(stream, storage, safe_globals=safe_globals).load()


# --- writing --------------------------------------------------------------------------------
class _Global:
    """A global of torch's, written by name in the pickle (never imported here)."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle requires a reduce's function to be callable
        raise TypeError(f"{self.module}.{self.name} is written to a file, not called")


_REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _Global("torch._utils", "_rebuild_parameter")
_STORAGE_GLOBALS = {name: _Global("torch", name) for name in _STORAGES}


class _Call:
    """An object pickled as ``function(*args)``."""

    def __init__(self, function, args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


class _Storage:
    """A storage to write: pickled as its persistent id, its bytes as ``data/<key>``."""

    def __init__(self, key, array, location):
        self.key, self.array, self.location = key, array, location


class _Pickler(pickle._Pickler):
    """The pure-Python pickler, writing :class:`_Global` s as names and :class:`_Storage` s
    as torch's persistent ids."""

    dispatch = dict(pickle._Pickler.dispatch)

    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            kind = _STORAGE_GLOBALS[_STORAGE_OF[obj.array.dtype]]
            return ("storage", kind, obj.key, obj.location, int(obj.array.size))
        return None

    def save_torch_global(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[_Global] = save_torch_global


class NotTorchWeights(TypeError):
    """An object that torch.load(weights_only=True) could not read back."""


def _torch_tree(obj, path, storages, seen):
    """``obj`` with its tensors as ``_rebuild_tensor_v2`` calls on storages (one per buffer,
    collected in ``storages``; a tensor met twice is one object, ``seen``)."""
    def again(value, key):
        return _torch_tree(value, f"{path}.{key}" if path else str(key), storages, seen)

    if isinstance(obj, np.ndarray):
        obj = Tensor._from_array(obj, "cpu")
    if isinstance(obj, Tensor):
        if id(obj) not in seen:
            seen[id(obj)] = (obj, _tensor_call(obj, storages))  # keep obj: ids stay unique
        return seen[id(obj)][1]
    if isinstance(obj, OrderedDict):  # a state_dict's attributes (_metadata) come along
        out = OrderedDict((key, again(value, key)) for key, value in obj.items())
        out.__dict__.update((key, again(value, key)) for key, value in vars(obj).items())
        return out
    if isinstance(obj, dict):
        return {key: again(value, key) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [again(value, i) for i, value in enumerate(obj)]
        return items if isinstance(obj, list) else tuple(items)
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return obj
    raise NotTorchWeights(f"cannot save {path or 'the object'} in torch's format: "
                          f"{type(obj).__name__} is not a tensor, container, number or string "
                          f"(what torch.load(weights_only=True) reads)")


def _tensor_call(t: Tensor, storages):
    buf_id = id(t._buf)
    if buf_id not in storages:
        if t.dtype not in _STORAGE_OF:
            raise NotTorchWeights(f"cannot save a {t.dtype} tensor in torch's format")
        flat = Tensor._dense(t._buf, (t._buf.size,), t.device).numpy()
        location = "cpu" if t.device.type == "cpu" else "cuda:0"
        storages[buf_id] = (t._buf, _Storage(str(len(storages)), flat, location))
    storage = storages[buf_id][1]
    leaf = not t.requires_grad or t.grad_fn is None
    tensor = _Call(_REBUILD_TENSOR, (storage, t._offset, tuple(t.shape), tuple(t._strides),
                                     t.requires_grad and leaf and not isinstance(t, Parameter),
                                     OrderedDict()))
    if isinstance(t, Parameter):
        return _Call(_REBUILD_PARAMETER, (tensor, t.requires_grad, OrderedDict()))
    return tensor


def dump_zip(obj) -> bytes:
    """The bytes of a ``torch.save`` zip file holding ``obj``."""
    storages = {}
    tree = _torch_tree(obj, "", storages, {})
    pickled = io.BytesIO()
    _Pickler(pickled, protocol=2).dump(tree)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickled.getvalue())
        z.writestr("archive/byteorder", "little")
        for _, storage in storages.values():
            z.writestr(f"archive/data/{storage.key}", storage.array.astype(
                storage.array.dtype.newbyteorder("<")).tobytes())
        z.writestr("archive/version", "3\n")
    return out.getvalue()
