"""Helpers shared by the export tests (test_export_*.py): DLPack structs through ctypes, capsule
access, aligned host buffers and CUDA detection. Holds no tests itself."""

from __future__ import annotations

import ctypes
import functools
import importlib

import numpy as np
import pytest

import stridex

# ---- DLPack ABI through ctypes (docs/protocols.md) ---------------------------------------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))),
]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]

assert ctypes.sizeof(DLTensor) == 48 and ctypes.sizeof(DLManagedTensor) == 64
assert ctypes.sizeof(DLManagedTensorVersioned) == 80

FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
FLAG_SUBBYTE_PADDED = 1 << 2

SetError = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
# The allocator runs without Python: CFUNCTYPE releases the GIL around the call, as a C caller would.
Allocator = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.POINTER(DLTensor),
    ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned)),
    ctypes.c_void_p,
    SetError,
)
# The others take Python objects and run with the GIL: PYFUNCTYPE keeps it and raises the Python
# error a -1 return leaves set.
FromPyObject = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned))
)
ToPyObject = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLManagedTensorVersioned), ctypes.POINTER(ctypes.py_object))
DLTensorFromPyObject = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
CurrentWorkStream = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))


class DLPackExchangeAPIHeader(ctypes.Structure):
    pass


DLPackExchangeAPIHeader._fields_ = [("version", DLPackVersion), ("prev_api", ctypes.POINTER(DLPackExchangeAPIHeader))]


class DLPackExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("header", DLPackExchangeAPIHeader),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.c_void_p),
    ]


assert ctypes.sizeof(DLPackExchangeAPI) == 56

# ---- capsules -----------------------------------------------------------------------------------

_api = ctypes.pythonapi
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

# Static names: PyCapsule_SetName keeps the pointer, so the bytes must live forever.
_USED = {
    b"dltensor": ctypes.c_char_p(b"used_dltensor"),
    b"dltensor_versioned": ctypes.c_char_p(b"used_dltensor_versioned"),
}


def capsule_name(capsule) -> str:
    return _api.PyCapsule_GetName(capsule).decode()


def _pointer_of(capsule):
    name = capsule_name(capsule)
    address = _api.PyCapsule_GetPointer(capsule, name.encode())
    struct = DLManagedTensorVersioned if name == "dltensor_versioned" else DLManagedTensor
    return ctypes.cast(address, ctypes.POINTER(struct))


def managed_of(capsule):
    """The DLManagedTensor[Versioned] inside an unconsumed capsule. The struct keeps the capsule
    alive (the capsule's destructor frees the struct)."""
    managed = _pointer_of(capsule).contents
    managed._keep = capsule
    return managed


def consume(capsule):
    """Takes the tensor over as a consumer does: renames the capsule used_* and returns a pointer
    to the tensor, whose deleter the caller now owns."""
    pointer = _pointer_of(capsule)
    name = capsule_name(capsule).encode()
    assert _api.PyCapsule_SetName(capsule, _USED[name]) == 0
    return pointer


def tensor_of(capsule) -> DLTensor:
    """The DLTensor of an unconsumed capsule (keeps the capsule alive)."""
    return managed_of(capsule).dl_tensor


def shape_of(t: DLTensor) -> tuple:
    return tuple(t.shape[i] for i in range(t.ndim))


def strides_of(t: DLTensor) -> tuple:
    return tuple(t.strides[i] for i in range(t.ndim))


def exchange_api() -> DLPackExchangeAPI:
    capsule = stridex.View.__dlpack_c_exchange_api__
    address = _api.PyCapsule_GetPointer(capsule, b"dlpack_exchange_api")
    return DLPackExchangeAPI.from_address(address)


# ---- host buffers and views -----------------------------------------------------------------------


def aligned(shape, dtype, align=64, fill=True):
    """A C-contiguous NumPy array whose data is `align`-byte aligned (JAX copies CPU data that is
    not 64-byte aligned instead of aliasing it)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    raw = np.zeros(n * dtype.itemsize + align, dtype=np.uint8)
    offset = (-raw.ctypes.data) % align
    out = raw[offset : offset + n * dtype.itemsize].view(dtype).reshape(shape)
    if fill and n:
        flat = out.reshape(-1)
        flat[...] = np.arange(n).astype(dtype) if dtype.kind != "b" else (np.arange(n) % 2 == 1)
    return out


def view_of(arr: np.ndarray, readonly=None, **kw) -> stridex.View:
    """A stridex.View of a NumPy array's memory through stridex.from_pointer (no stridex.view)."""
    item = arr.dtype.itemsize
    strides = tuple(s // item for s in arr.strides)
    ro = (not arr.flags.writeable) if readonly is None else readonly
    return stridex.from_pointer(
        arr.__array_interface__["data"][0], arr.shape, arr.dtype, owner=arr, strides=strides, readonly=ro, **kw
    )


def requires_stridex_view():
    return pytest.mark.skipif(
        not hasattr(stridex, "view"), reason="stridex.view (import, another engineer's issue) is not in this build yet"
    )


# ---- CUDA -----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def cuda_device_count() -> int:
    """GPUs the CUDA driver sees (0 without a driver), asked of libcuda directly."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    if cuda.cuInit(0) != 0:
        return 0
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


requires_cuda = pytest.mark.skipif(cuda_device_count() == 0, reason="no CUDA GPU (the GPU part runs on a GPU machine)")


def optional(name: str):
    """The module, or None when it is not installed (or fails to import)."""
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a broken install counts as missing
        return None


def torch_and_cupy():
    """The GPU suites' two frameworks and their skip marks: (torch, cupy, needs_torch, needs_cupy),
    each module None where it is not installed."""
    torch, cupy = optional("torch"), optional("cupy")
    needs_torch = pytest.mark.skipif(
        torch is None or not torch.cuda.is_available(), reason="torch with CUDA not installed"
    )
    needs_cupy = pytest.mark.skipif(cupy is None, reason="cupy is not installed")
    return torch, cupy, needs_torch, needs_cupy
