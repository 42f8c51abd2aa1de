"""__array_interface__, the buffer protocol, __array__ and __cuda_array_interface__ of stridex.View
(docs/export.md, "Interfaces")."""

from __future__ import annotations

import ctypes
import gc
import weakref

import ml_dtypes
import numpy as np
import pytest

import stridex
from export_support import aligned, optional, requires_cuda, view_of

# ---- __array_interface__ --------------------------------------------------------------------------


class OnlyArrayInterface:
    """Hands NumPy the array interface and nothing else (no buffer, no __array__)."""

    def __init__(self, view):
        self.__array_interface__ = view.__array_interface__
        self.view = view


def test_array_interface_keys():
    arr = aligned((3, 4), np.float32)
    ai = view_of(arr).__array_interface__
    assert ai == {
        "shape": (3, 4),
        "typestr": "<f4",
        "descr": [("", "<f4")],
        "strides": None,
        "data": (arr.ctypes.data, False),
        "version": 3,
    }


def test_array_interface_strides_are_bytes_and_data_is_element_zero():
    arr = aligned((4, 6), np.int16)
    v = view_of(arr)[::-1, 1::2]
    ai = v.__array_interface__
    assert ai["strides"] == (-12, 4)
    assert ai["data"] == (arr[::-1, 1::2].__array_interface__["data"][0], False)
    out = np.asarray(OnlyArrayInterface(v))
    np.testing.assert_array_equal(out, arr[::-1, 1::2])
    out[0, 0] = -1
    assert arr[3, 1] == -1


def test_array_interface_read_only():
    arr = aligned((3,), np.float64)
    v = view_of(arr, readonly=True)
    assert v.__array_interface__["data"][1] is True
    out = np.asarray(OnlyArrayInterface(v))
    assert not out.flags.writeable and np.shares_memory(out, arr)


def test_array_interface_empty_keeps_the_producers_pointer_and_zero_d():
    empty = aligned((0, 2), np.float32)
    v = view_of(empty)
    assert v.ptr == empty.ctypes.data != 0
    assert v.__array_interface__["data"][0] == empty.ctypes.data, "an empty array's pointer is the producer's"
    assert np.asarray(v).__array_interface__["data"][0] == empty.ctypes.data
    ai = view_of(aligned((), np.int32)).__array_interface__
    assert ai["shape"] == () and ai["strides"] is None


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn])
def test_array_interface_absent_without_a_typestr(dtype):
    v = view_of(aligned((3,), dtype))
    assert not hasattr(v, "__array_interface__")
    with pytest.raises(AttributeError, match="no typestr"):
        v.__array_interface__


def test_array_interface_keeps_nothing_but_numpy_keeps_the_view():
    arr = aligned((3,), np.float32)

    class Owner:
        pass

    owner = Owner()
    owner.arr = arr
    ref = weakref.ref(owner)
    v = stridex.from_pointer(arr.ctypes.data, arr.shape, arr.dtype, owner=owner)
    del owner
    out = np.asarray(OnlyArrayInterface(v))
    del v
    gc.collect()
    assert ref() is not None
    del out
    gc.collect()
    assert ref() is None


# ---- __cuda_array_interface__ on host memory ------------------------------------------------------


def test_no_cuda_array_interface_for_host_memory():
    v = view_of(aligned((3,), np.float32))
    assert not hasattr(v, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="not CUDA device or managed memory"):
        v.__cuda_array_interface__


# ---- buffer protocol ------------------------------------------------------------------------------


class Py_buffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.py_object),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
        ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


PyBUF_SIMPLE, PyBUF_WRITABLE, PyBUF_FORMAT, PyBUF_ND = 0, 0x1, 0x4, 0x8
PyBUF_STRIDES = 0x10 | PyBUF_ND
PyBUF_C_CONTIGUOUS = 0x20 | PyBUF_STRIDES
PyBUF_F_CONTIGUOUS = 0x40 | PyBUF_STRIDES
PyBUF_RECORDS_RO = PyBUF_STRIDES | PyBUF_FORMAT

_get = ctypes.pythonapi.PyObject_GetBuffer
_get.argtypes = [ctypes.py_object, ctypes.POINTER(Py_buffer), ctypes.c_int]
_get.restype = ctypes.c_int
_release = ctypes.pythonapi.PyBuffer_Release
_release.argtypes = [ctypes.POINTER(Py_buffer)]
_release.restype = None


def get_buffer(obj, flags):
    b = Py_buffer()
    _get(obj, ctypes.byref(b), flags)  # raises the exporter's error (pythonapi checks it)
    return b


def test_memoryview_of_a_strided_view():
    arr = aligned((4, 6), np.int32)
    v = view_of(arr)[1:, ::-2]
    m = memoryview(v)
    assert (m.format, m.itemsize, m.shape, m.strides, m.readonly) == ("i", 4, (3, 3), (24, -8), False)
    assert m.tolist() == arr[1:, ::-2].tolist()
    m[0, 0] = -5
    assert arr[1, 5] == -5
    assert m.obj is v


@pytest.mark.parametrize(
    ("dtype", "fmt"),
    [(np.bool_, "?"), (np.uint8, "B"), (np.int64, "q"), (np.float16, "e"), (np.complex128, "Zd")],
)
def test_buffer_formats(dtype, fmt):
    arr = aligned((2,), dtype)
    m = memoryview(view_of(arr))
    assert m.format == fmt
    np.testing.assert_array_equal(np.asarray(m), arr)


def test_read_only_buffer():
    arr = aligned((3,), np.float32)
    v = view_of(arr, readonly=True)
    assert memoryview(v).readonly
    with pytest.raises(BufferError, match="read-only"):
        get_buffer(v, PyBUF_WRITABLE)
    out = np.asarray(v)
    assert not out.flags.writeable


def test_contiguity_requests():
    arr = aligned((3, 4), np.float32)
    v = view_of(arr)
    b = get_buffer(v, PyBUF_C_CONTIGUOUS)
    _release(ctypes.byref(b))
    b = get_buffer(v, PyBUF_SIMPLE)  # no shape, no strides, no format: contiguous bytes
    assert b.len == 48 and not b.shape and not b.strides and b.format is None
    _release(ctypes.byref(b))
    with pytest.raises(BufferError, match="Fortran"):
        get_buffer(v, PyBUF_F_CONTIGUOUS)
    with pytest.raises(BufferError, match="C-contiguous"):
        get_buffer(v.T, PyBUF_C_CONTIGUOUS)
    with pytest.raises(BufferError, match="takes no strides"):
        get_buffer(v[:, ::2], PyBUF_ND)
    b = get_buffer(v.T, PyBUF_F_CONTIGUOUS)
    _release(ctypes.byref(b))


def test_zero_d_and_empty_buffers():
    assert memoryview(view_of(aligned((), np.float64))).shape == ()
    assert memoryview(view_of(aligned((0, 3), np.float64))).shape == (0, 3)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn])
def test_no_buffer_for_dtypes_without_a_format(dtype):
    with pytest.raises(BufferError, match="no PEP 3118 buffer format"):
        memoryview(view_of(aligned((3,), dtype)))


def test_buffer_keeps_the_view_alive():
    arr = aligned((3,), np.float32)
    m = memoryview(view_of(arr))
    gc.collect()
    assert m.tolist() == [0.0, 1.0, 2.0]


# ---- __array__ ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_numpy_asarray_of_ml_dtypes_aliases(dtype):
    arr = aligned((2, 3), dtype)
    v = view_of(arr)[:, ::-1]
    out = np.asarray(v)
    assert out.dtype == np.dtype(dtype)
    assert np.shares_memory(out, arr)
    np.testing.assert_array_equal(out.astype(np.float32), arr[:, ::-1].astype(np.float32))
    out[0, 0] = 7
    assert arr[0, 2] == 7


def test_numpy_asarray_of_read_only_bfloat16():
    arr = aligned((3,), ml_dtypes.bfloat16)
    out = np.asarray(view_of(arr, readonly=True))
    assert out.dtype == ml_dtypes.bfloat16 and not out.flags.writeable


def test_array_dtype_and_copy():
    arr = aligned((3,), np.float32)
    v = view_of(arr)
    assert np.shares_memory(v.__array__(), arr)
    c = v.__array__(copy=True)
    assert not np.shares_memory(c, arr)
    d = v.__array__(dtype=np.float64)
    assert d.dtype == np.float64 and not np.shares_memory(d, arr)
    with pytest.raises(ValueError, match="copy=False"):
        v.__array__(dtype=np.float64, copy=False)
    assert np.array(v, copy=True).base is None


def test_numpy_asarray_follows_the_buffer():
    arr = aligned((2, 2), np.complex64)
    out = np.asarray(view_of(arr).T)
    np.testing.assert_array_equal(out, arr.T)
    assert np.shares_memory(out, arr)


# ---- CUDA memory (GPU machine) --------------------------------------------------------------------

cp = optional("cupy")


@requires_cuda
@pytest.mark.skipif(cp is None, reason="needs cupy to allocate and check CUDA memory")
class TestCudaInterfaces:
    def test_cuda_array_interface_keys(self):
        a = cp.arange(12, dtype=cp.float32).reshape(3, 4)
        v = stridex.from_pointer(a.data.ptr, a.shape, "float32", owner=a)
        assert v.device == stridex.Device(f"cuda:{a.device.id}")
        cai = v.__cuda_array_interface__
        assert cai["version"] == 3 and cai["typestr"] == "<f4" and cai["shape"] == (3, 4)
        assert cai["strides"] is None and cai["data"] == (a.data.ptr, False)
        assert cai["stream"] is None, "nothing pending"
        t = v[:, ::-2].__cuda_array_interface__
        assert t["strides"] == (16, -8)

    def test_cuda_array_interface_empty_read_only_and_pending_stream(self):
        a = cp.zeros((0, 3), dtype=cp.float32)  # no memory (NULL): the device is the caller's word
        e = stridex.from_pointer(a.data.ptr, a.shape, "float32", device=f"cuda:{a.device.id}", owner=a)
        assert e.__cuda_array_interface__["data"][0] == 0
        b = cp.zeros(3, dtype=cp.float32)
        v = stridex.from_pointer(b.data.ptr, b.shape, "float32", owner=b, readonly=True)
        assert v.__cuda_array_interface__["data"] == (b.data.ptr, True)
        s = cp.cuda.Stream(non_blocking=True)
        assert v._with_stream(s.ptr).__cuda_array_interface__["stream"] == s.ptr

    def test_no_host_interfaces_for_device_memory(self):
        a = cp.zeros(3, dtype=cp.float32)
        v = stridex.from_pointer(a.data.ptr, a.shape, "float32", owner=a)
        assert not hasattr(v, "__array_interface__")
        with pytest.raises(BufferError):
            memoryview(v)
        with pytest.raises(TypeError, match="without a copy to the host"):
            np.asarray(v)

    def test_bfloat16_has_no_cuda_array_interface(self):
        a = cp.zeros(3, dtype=cp.uint16)
        v = stridex.from_pointer(a.data.ptr, a.shape, "bfloat16", owner=a)
        with pytest.raises(AttributeError, match="no typestr"):
            v.__cuda_array_interface__

    def test_managed_memory_has_both_interfaces(self):
        mem = cp.cuda.malloc_managed(64)
        v = stridex.from_pointer(mem.ptr, (16,), "float32", owner=mem)
        assert v.device == stridex.Device("cuda_managed")
        assert v.__cuda_array_interface__["data"][0] == mem.ptr
        host = np.asarray(v)
        host[:] = 3
        cp.cuda.Device().synchronize()
        assert float(cp.asarray(v).sum()) == 48.0

    def test_pinned_memory_is_host_memory(self):
        mem = cp.cuda.alloc_pinned_memory(64)
        v = stridex.from_pointer(mem.ptr, (16,), "float32", owner=mem)
        assert v.device == stridex.Device("cuda_host")
        assert not hasattr(v, "__cuda_array_interface__")
        assert v.__array_interface__["data"][0] == mem.ptr
        # A CPU consumer may ask for it as CPU memory: relabelled, not copied.
        out = np.from_dlpack(v, device="cpu")
        assert out.__array_interface__["data"][0] == mem.ptr
