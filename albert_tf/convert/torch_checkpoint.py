"""Reads a PyTorch state dict file (`pytorch_model.bin`) without torch, and safely:
`read_state_dict` unpickles it with an Unpickler that knows only the names of a state dict
of tensors and maps them to NumPy; any other global is refused before anything is called,
so a file can never run code. The format read, and the pre-1.6 one refused with a hint:
docs/convert.md "From Hugging Face"."""

import collections
import pickle
import zipfile

import numpy as np

# torch's storage class name -> little-endian NumPy dtype (bfloat16 is read as its 16 bits)
STORAGE_DTYPES = {
    "FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2", "BFloat16Storage": "<u2",
    "LongStorage": "<i8", "IntStorage": "<i4", "ShortStorage": "<i2", "CharStorage": "i1",
    "ByteStorage": "u1", "BoolStorage": "?", "ComplexFloatStorage": "<c8", "ComplexDoubleStorage": "<c16",
}
_RESAVE = ("re-save the model as model.safetensors (save_pretrained(..., safe_serialization=True)) "
           "or with a recent torch.save")


class _StorageType:
    """Stands for torch.<Name>Storage in the pickle."""

    def __init__(self, name):
        self.name = name
        self.dtype = np.dtype(STORAGE_DTYPES[name])


_Storage = collections.namedtuple("_Storage", "array storage_type")
_Tensor = collections.namedtuple("_Tensor", "array")  # a rebuilt tensor (so values can only be arrays)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError("_rebuild_tensor_v2 without a storage")
    size, stride, offset = tuple(int(s) for s in size), tuple(int(s) for s in stride), int(storage_offset)
    if len(size) != len(stride) or offset < 0 or any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise pickle.UnpicklingError(f"a tensor of size {list(size)}, stride {list(stride)}, offset {offset}")
    data = storage.array
    if int(np.prod(size)) == 0:
        array = np.zeros(size, data.dtype)
    else:
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= data.size:
            raise pickle.UnpicklingError(f"a tensor of size {list(size)} reads past its storage ({data.size} values)")
        view = np.lib.stride_tricks.as_strided(data[offset:], shape=size,
                                               strides=tuple(s * data.itemsize for s in stride), writeable=False)
        array = np.array(view)
    if storage.storage_type.name == "BFloat16Storage":
        array = (array.astype(np.uint32) << 16).view(np.float32)
    return _Tensor(array)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    if not isinstance(data, _Tensor):
        raise pickle.UnpicklingError("_rebuild_parameter without a tensor")
    return data


class _OrderedDict(collections.OrderedDict):
    """OrderedDict as a class (the pickle builds it with REDUCE and may set `_metadata`)."""


_GLOBALS = {
    ("collections", "OrderedDict"): _OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, archive, prefix, path):
        super().__init__(file)
        self._archive, self._prefix, self._path = archive, prefix, path
        self._storages = {}

    def find_class(self, module, name):
        if (module, name) in _GLOBALS:
            return _GLOBALS[(module, name)]
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name)
        raise pickle.UnpicklingError(f"refusing {module}.{name}: a state dict of tensors holds only tensors "
                                     "(this reader never imports what a pickle names)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str) and isinstance(pid[4], int)):
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r:.100}")
        _, storage_type, key, _location, numel = pid
        if key not in self._storages:
            name = f"{self._prefix}data/{key}"
            try:
                raw = self._archive.read(name)
            except KeyError:
                raise pickle.UnpicklingError(f"storage {name} is missing from the archive") from None
            dtype = storage_type.dtype
            if len(raw) < numel * dtype.itemsize:
                raise pickle.UnpicklingError(f"storage {name} holds {len(raw)} bytes, fewer than {numel} values")
            self._storages[key] = _Storage(np.frombuffer(raw, dtype, count=numel), storage_type)
        storage = self._storages[key]
        if storage.storage_type.name != storage_type.name:
            raise pickle.UnpicklingError(f"storage {key} read as {storage.storage_type.name} and {storage_type.name}")
        return storage


def read_state_dict(path):
    """name -> np.ndarray of the tensors in a torch.save'd state dict, without torch.

    bfloat16 tensors come back as float32 (exact). Raises ValueError naming `path` for a
    file that is not a torch zip archive, holds anything but tensors in a flat mapping,
    or names any other Python object.
    """
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not a torch zip archive (the format torch.save writes since torch 1.6); "
                         f"{_RESAVE}.")
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise ValueError(f"{path}: expected one <dir>/data.pkl in the archive, found {len(pickles)}; {_RESAVE}.")
        prefix = pickles[0][: -len("data.pkl")]
        if prefix + "byteorder" in archive.namelist():
            order = archive.read(prefix + "byteorder").decode("ascii", "replace").strip()
            if order != "little":
                raise ValueError(f"{path}: byte order {order!r}; only little-endian files are read ({_RESAVE}).")
        with archive.open(pickles[0]) as f:
            try:
                state = _Unpickler(f, archive, prefix, path).load()
            except (pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError, IndexError) as e:
                raise ValueError(f"{path}: cannot be read as a state dict of tensors: {e}") from None
    if not isinstance(state, dict):
        raise ValueError(f"{path}: holds a {type(state).__name__}, not a state dict (name -> tensor).")
    out, bad = {}, []
    for name, value in state.items():
        if isinstance(name, str) and isinstance(value, _Tensor):
            out[name] = value.array
        else:
            bad.append(repr(name))
    if bad:
        raise ValueError(f"{path}: entries that are not name -> tensor: {', '.join(bad[:10])}.")
    return out
