"""The seed case (the "GPU arrays returned as CPU arrays" bug report) through
include/stridex/python/nanobind.hpp: a nanobind extension (tests/python/ext, built with CMake by
ext_build.py) returns memory it allocated in C++ as stridex::View,
without stating the device. It must arrive on the right device through every export path; a View
mislabelled by hand must be refused, never handed out. And stridex::View arguments take arrays."""

from __future__ import annotations

import ctypes
import importlib

import numpy as np
import pytest

import stridex
from ext_build import build_test_extensions
from export_support import (
    DLManagedTensorVersioned,
    FromPyObject,
    aligned,
    cuda_device_count,
    exchange_api,
    optional,
    requires_cuda,
    view_of,
)


@pytest.fixture(scope="session")
def ext():
    build_test_extensions()  # done by conftest already; here for a reader of this file
    return importlib.import_module("stridex_seed_ext")


# ---- C++ -> Python, host memory -------------------------------------------------------------------


def test_cpu_allocation_arrives_as_cpu_in_numpy(ext):
    v = ext.cpu_iota(8)
    assert isinstance(v, stridex.View)
    assert v.device == "cpu" and v.__dlpack_device__() == (1, 0)
    out = np.from_dlpack(v)
    np.testing.assert_array_equal(out, np.arange(8, dtype=np.float32))
    assert np.asarray(v).__array_interface__["data"][0] == v.ptr
    assert memoryview(v).tolist() == list(range(8))
    del v
    out[0] = 1  # the consumer keeps the C++ allocation alive


def test_layout_and_read_only_cross(ext):
    v = ext.cpu_matrix_t(2, 3, readonly=True)
    assert v.shape == (3, 2) and v.strides == (1, 3) and v.readonly
    out = np.from_dlpack(v)
    np.testing.assert_array_equal(out, np.arange(6, dtype=np.float64).reshape(2, 3).T)
    assert not out.flags.writeable


def test_host_memory_labelled_cuda_is_refused(ext):
    expected = "no CUDA GPU is usable" if cuda_device_count() == 0 else "host memory unknown to CUDA"
    with pytest.raises(ValueError, match=expected):
        ext.cpu_labelled_cuda(4)


# ---- Python -> C++ ------------------------------------------------------------------------------


def test_stridex_view_argument(ext):
    arr = aligned((6,), np.float32)
    v = view_of(arr)[::-2]
    d = ext.describe(v)
    assert (d["device_type"], d["device_id"], d["ptr"], d["shape"], d["strides"]) == (1, 0, v.ptr, [3], [-2])
    assert d["dtype"] == "float32" and d["readonly"] is False and d["stream"] == -1
    assert ext.sum(v) == 5 + 3 + 1
    ext.fill(v, 9)
    np.testing.assert_array_equal(arr, [0, 9, 2, 9, 4, 9])


def test_read_only_argument_cannot_be_written(ext):
    v = view_of(aligned((3,), np.float32), readonly=True)
    assert ext.describe(v)["readonly"] is True
    with pytest.raises(BufferError, match="read-only"):
        ext.fill(v, 1)


def test_foreign_arrays_convert_through_stridex_view(ext):
    if not hasattr(stridex, "view"):
        pytest.skip("stridex.view (import) is not in this build yet")
    arr = aligned((4,), np.float32)
    assert ext.sum(arr) == 6
    assert ext.describe(arr)["ptr"] == arr.ctypes.data
    with pytest.raises(TypeError):
        ext.identity_strict(arr)  # no implicit conversion: only stridex.View itself
    with pytest.raises(TypeError):
        ext.sum("not an array")


def test_round_trip_through_cpp(ext):
    arr = aligned((3, 4), np.int16)
    v = view_of(arr, readonly=True)[:, 1::2]
    w = ext.identity(v)
    assert (w.ptr, w.shape, w.strides, w.dtype, w.readonly, w.device) == (
        v.ptr,
        v.shape,
        v.strides,
        v.dtype,
        True,
        v.device,
    )


def test_caster_uses_the_exchange_api(ext):
    # The caster's path, checked by hand: a stridex.View becomes a versioned tensor without Python.
    v = view_of(aligned((2,), np.float32))
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    assert FromPyObject(exchange_api().managed_tensor_from_py_object_no_sync)(v, ctypes.byref(out)) == 0
    assert out.contents.dl_tensor.data == v.ptr
    ctypes.cast(out.contents.deleter, ctypes.CFUNCTYPE(None, ctypes.c_void_p))(ctypes.cast(out, ctypes.c_void_p))


# ---- C++ -> Python, GPU memory: the seed case ------------------------------------------------------

torch = optional("torch")
cp = optional("cupy")


@requires_cuda
class TestSeedCaseOnGpu:
    @pytest.fixture(params=range(max(cuda_device_count(), 1)), ids=lambda i: f"cuda:{i}")
    def ordinal(self, request):
        return request.param

    def test_view_reports_the_device_of_the_memory(self, ext, ordinal):
        v = ext.gpu_iota(16, ordinal)
        assert v.device == f"cuda:{ordinal}"
        assert v.__dlpack_device__() == (2, ordinal)
        assert v.__cuda_array_interface__["data"][0] == v.ptr
        assert not hasattr(v, "__array_interface__")
        with pytest.raises(BufferError):
            memoryview(v)
        with pytest.raises(TypeError, match="without a copy to the host"):
            np.asarray(v)
        assert ext.sum(v) == sum(range(16))

    @pytest.mark.skipif(torch is None, reason="needs torch")
    def test_torch_from_dlpack(self, ext, ordinal):
        t = torch.from_dlpack(ext.gpu_iota(16, ordinal))
        assert t.device == torch.device("cuda", ordinal)
        assert t.sum().item() == sum(range(16))

    @pytest.mark.skipif(torch is None, reason="needs torch")
    def test_torch_as_tensor_through_the_cuda_array_interface(self, ext, ordinal):
        v = ext.gpu_iota(16, ordinal)
        t = torch.as_tensor(v, device=f"cuda:{ordinal}")
        assert t.device == torch.device("cuda", ordinal) and t.data_ptr() == v.ptr
        assert t.sum().item() == sum(range(16))

    @pytest.mark.skipif(torch is None, reason="needs torch")
    def test_exchange_api(self, ext, ordinal):
        v = ext.gpu_iota(16, ordinal)
        out = ctypes.POINTER(DLManagedTensorVersioned)()
        assert FromPyObject(exchange_api().managed_tensor_from_py_object_no_sync)(v, ctypes.byref(out)) == 0
        t = out.contents.dl_tensor
        assert (t.device.device_type, t.device.device_id, t.data) == (2, ordinal, v.ptr)
        ctypes.cast(out.contents.deleter, ctypes.CFUNCTYPE(None, ctypes.c_void_p))(ctypes.cast(out, ctypes.c_void_p))
        # torch >= 2.10 consumes producers' exchange APIs in from_dlpack; either way it lands here.
        assert torch.from_dlpack(v).device == torch.device("cuda", ordinal)

    @pytest.mark.skipif(cp is None, reason="needs cupy")
    def test_cupy(self, ext, ordinal):
        for consume in (cp.from_dlpack, cp.asarray):
            a = consume(ext.gpu_iota(16, ordinal))
            assert a.device.id == ordinal and int(a.sum()) == sum(range(16))

    def test_mislabelled_gpu_memory_is_refused(self, ext, ordinal):
        with pytest.raises(ValueError, match=f"device cpu was given.*device memory of cuda:{ordinal}"):
            ext.gpu_mislabelled(16, ordinal, "cpu")
        with pytest.raises(ValueError):
            ext.gpu_mislabelled(16, ordinal, f"cuda:{ordinal + 1}")

    def test_pending_stream_travels_along(self, ext, ordinal):
        v = ext.gpu_pending(16, ordinal)
        assert v.stream is not None and v.stream > 2
        assert v.__cuda_array_interface__["stream"] == v.stream
        d = ext.describe(v)  # back to C++: ordered before the legacy stream, and says so
        assert d["stream"] == 1
        assert ext.sum(v) == sum(range(16))
