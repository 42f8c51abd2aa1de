"""The DLPack C exchange API on stridex.View (DLPack 1.2 int / 1.3 capsule), called through ctypes
as a C consumer would (docs/export.md, "Exchange API")."""

from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
import pytest

import stridex
from export_support import (
    FLAG_READ_ONLY,
    Allocator,
    CurrentWorkStream,
    DLManagedTensorVersioned,
    DLTensor,
    DLTensorFromPyObject,
    FromPyObject,
    SetError,
    ToPyObject,
    aligned,
    cuda_device_count,
    exchange_api,
    requires_cuda,
    view_of,
)


def api():
    return exchange_api()


_decref = ctypes.pythonapi.Py_DecRef
_decref.argtypes = [ctypes.py_object]


def to_py(managed):
    """managed_tensor_to_py_object_no_sync, owning the new reference it returns (ctypes'
    py_object does not take ownership of what C writes into it)."""
    out = ctypes.py_object()
    assert ToPyObject(api().managed_tensor_to_py_object_no_sync)(managed, ctypes.byref(out)) == 0
    obj = out.value
    _decref(obj)
    return obj


def test_discovery_on_the_type():
    capsule = stridex.View.__dlpack_c_exchange_api__
    assert type(capsule).__name__ == "PyCapsule"
    a = api()
    assert (a.header.version.major, a.header.version.minor) == (1, 3)
    assert not a.header.prev_api
    assert stridex.View.__c_dlpack_exchange_api__ == ctypes.addressof(a)
    assert all(
        getattr(a, f)
        for f in (
            "managed_tensor_allocator",
            "managed_tensor_from_py_object_no_sync",
            "managed_tensor_to_py_object_no_sync",
            "dltensor_from_py_object_no_sync",
            "current_work_stream",
        )
    )


def from_py(obj):
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    assert FromPyObject(api().managed_tensor_from_py_object_no_sync)(obj, ctypes.byref(out)) == 0
    return out


def delete(managed):
    ctypes.cast(managed.contents.deleter, ctypes.CFUNCTYPE(None, ctypes.c_void_p))(
        ctypes.cast(managed, ctypes.c_void_p)
    )


def test_managed_tensor_from_py_object():
    arr = aligned((3, 4), np.float32)

    class Owner:
        pass

    owner = Owner()
    owner.arr = arr
    ref = weakref.ref(owner)
    v = stridex.from_pointer(arr.ctypes.data, arr.shape, arr.dtype, owner=owner, readonly=True)[:, ::2]
    del owner
    m = from_py(v)
    t = m.contents.dl_tensor
    assert (m.contents.version.major, m.contents.version.minor) == (1, 3)
    assert m.contents.flags == FLAG_READ_ONLY
    assert t.data == v.ptr and t.ndim == 2 and t.byte_offset == 0
    assert (t.shape[0], t.shape[1], t.strides[0], t.strides[1]) == (3, 2, 4, 2)
    del v
    gc.collect()
    assert ref() is not None, "the tensor holds the owner"
    delete(m)
    gc.collect()
    assert ref() is None


def test_managed_tensor_from_a_foreign_object_is_a_buffer_error():
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    with pytest.raises(BufferError, match="expected a stridex.View"):
        FromPyObject(api().managed_tensor_from_py_object_no_sync)(np.zeros(3), ctypes.byref(out))


def test_managed_tensor_to_py_object_steals_the_tensor():
    arr = aligned((5,), np.int64)
    m = from_py(view_of(arr))
    v = to_py(m)
    assert isinstance(v, stridex.View)
    assert v.ptr == arr.ctypes.data and v.shape == (5,) and v.dtype == "int64" and v.device == "cpu"
    np.testing.assert_array_equal(np.from_dlpack(v), arr)


def test_round_trip_keeps_read_only():
    arr = aligned((2,), np.float32)
    m = from_py(view_of(arr, readonly=True))
    assert to_py(m).readonly


def test_dltensor_from_py_object_is_borrowed():
    arr = aligned((2, 3), np.float32)
    v = view_of(arr).T
    t = DLTensor()
    assert DLTensorFromPyObject(api().dltensor_from_py_object_no_sync)(v, ctypes.byref(t)) == 0
    assert t.data == v.ptr and t.ndim == 2 and t.byte_offset == 0
    assert (t.shape[0], t.shape[1]) == (3, 2) and (t.strides[0], t.strides[1]) == (1, 3)
    assert (t.device.device_type, t.dtype.code, t.dtype.bits) == (1, 2, 32)


def test_dltensor_from_read_only_view_is_refused():
    t = DLTensor()
    with pytest.raises(BufferError, match="read-only"):
        DLTensorFromPyObject(api().dltensor_from_py_object_no_sync)(
            view_of(aligned((2,), np.float32), readonly=True), ctypes.byref(t)
        )
    with pytest.raises(BufferError, match="expected a stridex.View"):
        DLTensorFromPyObject(api().dltensor_from_py_object_no_sync)(object(), ctypes.byref(t))


class Errors:
    """A SetError callback that records (kind, message)."""

    def __init__(self):
        self.seen = []
        self.callback = SetError(lambda ctx, kind, msg: self.seen.append((kind.decode(), msg.decode())))


def allocate(shape, dtype=(2, 32, 1), device=(1, 0)):
    shape_array = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    prototype = DLTensor()
    prototype.ndim = len(shape)
    prototype.shape = ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64))
    prototype.dtype.code, prototype.dtype.bits, prototype.dtype.lanes = dtype
    prototype.device.device_type, prototype.device.device_id = device
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    errors = Errors()
    rc = Allocator(api().managed_tensor_allocator)(ctypes.byref(prototype), ctypes.byref(out), None, errors.callback)
    return rc, out, errors.seen


def test_allocator_host_tensor():
    rc, m, errors = allocate((3, 5), dtype=(5, 64, 1))
    assert rc == 0 and errors == []
    t = m.contents.dl_tensor
    assert (t.ndim, t.shape[0], t.shape[1], t.strides[0], t.strides[1]) == (2, 3, 5, 5, 1)
    assert (t.dtype.code, t.dtype.bits, t.device.device_type) == (5, 64, 1)
    assert t.data % 64 == 0
    ctypes.memset(t.data, 0, 3 * 5 * 8)  # all of it is writable
    assert m.contents.flags == 0
    delete(m)


def test_allocator_zero_d_and_empty():
    for shape in ((), (0, 4)):
        rc, m, errors = allocate(shape)
        assert rc == 0 and errors == [] and m.contents.dl_tensor.data
        delete(m)


@pytest.mark.parametrize(
    ("dtype", "device", "kind"),
    [
        ((2, 32, 1), (8, 0), "BufferError"),  # Metal
        ((2, 32, 1), (3, 0), "BufferError"),  # pinned
        ((2, 7, 1), (1, 0), "TypeError"),  # float7
        ((99, 8, 1), (1, 0), "BufferError"),
    ],
)  # unknown code
def test_allocator_errors_go_through_set_error(dtype, device, kind):
    rc, m, errors = allocate((2,), dtype=dtype, device=device)
    assert rc == -1 and not m
    assert len(errors) == 1 and errors[0][0] == kind, errors


@pytest.mark.skipif(cuda_device_count() > 0, reason="checks the no-GPU answer")
def test_allocator_cuda_without_a_gpu():
    rc, _, errors = allocate((2,), device=(2, 0))
    assert rc == -1 and errors[0][0] == "RuntimeError" and "CUDA" in errors[0][1]


def test_current_work_stream():
    f = CurrentWorkStream(api().current_work_stream)
    stream = ctypes.c_void_p(123)
    assert f(1, 0, ctypes.byref(stream)) == 0 and stream.value is None  # CPU: NULL
    assert f(2, 0, ctypes.byref(stream)) == 0 and stream.value == 1  # CUDA: the legacy default stream
    assert f(13, 0, ctypes.byref(stream)) == 0 and stream.value == 1


def test_stridex_view_of_a_view_goes_through_the_exchange_api():
    view = getattr(stridex, "view", None)
    if view is None:
        pytest.skip("stridex.view (import) is not in this build yet")
    arr = aligned((3, 4), np.float32)
    v = view_of(arr, readonly=True)[::-1]
    w = view(v)
    assert (w.ptr, w.shape, w.strides, w.readonly, w.device) == (v.ptr, v.shape, v.strides, True, v.device)


@requires_cuda
def test_allocator_cuda_tensor():
    for ordinal in range(cuda_device_count()):
        rc, m, errors = allocate((4, 4), device=(2, ordinal))
        assert rc == 0, errors
        t = m.contents.dl_tensor
        assert (t.device.device_type, t.device.device_id) == (2, ordinal)
        v = to_py(m)
        assert v.device == f"cuda:{ordinal}"
        torch = pytest.importorskip("torch")
        tt = torch.from_dlpack(v)
        tt.fill_(2.0)
        assert tt.device == torch.device("cuda", ordinal) and float(tt.sum()) == 32.0
