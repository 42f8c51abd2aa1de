"""stridex.from_pointer: views of raw memory whose device comes from the memory itself
(docs/export.md, "Device truth")."""

from __future__ import annotations

import ctypes
import gc
import weakref

import ml_dtypes
import numpy as np
import pytest

import stridex
from export_support import aligned, cuda_device_count, optional, requires_cuda


def test_host_memory_is_cpu():
    arr = aligned((2, 3), np.float32)
    v = stridex.from_pointer(arr.ctypes.data, (2, 3), "float32", owner=arr)
    assert v.device == stridex.Device("cpu")
    assert v.shape == (2, 3) and v.strides == (3, 1) and v.ptr == arr.ctypes.data
    assert v.owner is arr and not v.readonly and v.stream is None


@pytest.mark.parametrize("dtype", ["float32", "stridex.Dtype", np.float32, np.dtype("f4"), np.zeros(1, np.float32)])
def test_dtype_spellings(dtype):
    if dtype == "stridex.Dtype":
        dtype = stridex.Dtype("float32")  # made here: a module-level instance outlives nanobind's leak check
    arr = aligned((2,), np.float32)
    assert stridex.from_pointer(arr.ctypes.data, (2,), dtype, owner=arr).dtype == "float32"


def test_ml_dtypes_and_bool():
    arr = aligned((2,), ml_dtypes.bfloat16)
    assert stridex.from_pointer(arr.ctypes.data, 2, ml_dtypes.bfloat16, owner=arr).dtype == "bfloat16"
    arr = aligned((2,), np.bool_)
    assert stridex.from_pointer(arr.ctypes.data, 2, np.bool_, owner=arr).dtype == "bool"


def test_strides_in_elements_and_readonly():
    arr = aligned((4, 4), np.int16)
    v = stridex.from_pointer(
        arr[3].__array_interface__["data"][0], (4, 2), "int16", strides=(-4, 2), owner=arr, readonly=True
    )
    np.testing.assert_array_equal(np.from_dlpack(v), arr[::-1, ::2])
    assert v.readonly and not np.from_dlpack(v).flags.writeable


def test_pointer_spellings():
    arr = aligned((2,), np.float32)
    for ptr in (arr.ctypes.data, np.uint64(arr.ctypes.data), ctypes.c_void_p(arr.ctypes.data).value):
        assert stridex.from_pointer(ptr, (2,), "float32", owner=arr).ptr == arr.ctypes.data

    class HasInt:
        def __int__(self):
            return arr.ctypes.data

    assert stridex.from_pointer(HasInt(), (2,), "float32", owner=arr).ptr == arr.ctypes.data


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"ptr": -1}, ValueError),
        ({"ptr": 2**64}, ValueError),
        ({"ptr": "0x10"}, TypeError),
        ({"ptr": True}, TypeError),
        ({"shape": (-1,)}, ValueError),
        ({"shape": "ab"}, TypeError),
        ({"shape": (2.0,)}, TypeError),
        ({"dtype": "float128"}, TypeError),
        ({"device": 3}, TypeError),
        ({"device": "gpu"}, ValueError),
        ({"strides": (1, 1)}, ValueError),
    ],
)
def test_bad_arguments(kwargs, error):
    arr = aligned((4,), np.float32)
    args = {"ptr": arr.ctypes.data, "shape": (4,), "dtype": "float32", "owner": arr} | kwargs
    with pytest.raises(error):
        stridex.from_pointer(**args)


def test_owner_is_kept_alive_by_views_and_exports():
    arr = aligned((3,), np.float32)

    class Owner:
        pass

    owner = Owner()
    owner.arr = arr
    ref = weakref.ref(owner)
    v = stridex.from_pointer(arr.ctypes.data, (3,), "float32", owner=owner)
    del owner
    sub = v[1:]
    out = np.from_dlpack(sub)
    del v, sub
    gc.collect()
    assert ref() is not None
    del out
    gc.collect()
    assert ref() is None


def test_null_pointer_empty_view():
    v = stridex.from_pointer(0, (0, 4), "float32")
    assert v.size == 0 and v.device == stridex.Device("cpu")
    with pytest.raises(ValueError):
        stridex.from_pointer(0, (2,), "float32")


# ---- without a GPU ------------------------------------------------------------------------------


@pytest.mark.skipif(cuda_device_count() > 0, reason="checks the no-GPU rule")
@pytest.mark.parametrize("device", ["cuda:0", "cuda", "cuda_host", "cuda_managed", (2, 0)])
def test_cuda_claim_without_a_gpu_is_refused(device):
    arr = aligned((3,), np.float32)
    with pytest.raises(ValueError, match="no CUDA GPU is usable"):
        stridex.from_pointer(arr.ctypes.data, (3,), "float32", device=device, owner=arr)


@pytest.mark.skipif(cuda_device_count() > 0, reason="checks the no-GPU rule")
def test_claims_without_a_gpu():
    arr = aligned((3,), np.float32)
    assert stridex.from_pointer(arr.ctypes.data, (3,), "float32", device="cpu", owner=arr).device == "cpu"
    # Runtimes stridex cannot ask stand as given.
    assert stridex.from_pointer(arr.ctypes.data, (3,), "float32", device="rocm:1", owner=arr).device == "rocm:1"
    # No memory, no contradiction.
    assert stridex.from_pointer(0, (0,), "float32", device="cuda:0").device == "cuda:0"


# ---- with a GPU ---------------------------------------------------------------------------------

cp = optional("cupy")
torch = optional("torch")


@requires_cuda
@pytest.mark.skipif(cp is None, reason="needs cupy to allocate CUDA memory")
class TestWithGpu:
    def test_device_memory_is_cuda_of_its_ordinal(self):
        for ordinal in range(cuda_device_count()):
            with cp.cuda.Device(ordinal):
                a = cp.zeros(4, dtype=cp.float32)
            v = stridex.from_pointer(a.data.ptr, (4,), "float32", owner=a)
            assert v.device == stridex.Device(f"cuda:{ordinal}")
            assert v.__dlpack_device__() == (2, ordinal)

    def test_contradicting_claims_are_value_errors(self):
        a = cp.zeros(4, dtype=cp.float32)
        with pytest.raises(ValueError, match="device cpu was given.*device memory of cuda:0"):
            stridex.from_pointer(a.data.ptr, (4,), "float32", device="cpu", owner=a)
        with pytest.raises(ValueError):
            stridex.from_pointer(a.data.ptr, (4,), "float32", device="cuda:1", owner=a)
        host = aligned((4,), np.float32)
        with pytest.raises(ValueError, match="host memory unknown to CUDA"):
            stridex.from_pointer(host.ctypes.data, (4,), "float32", device="cuda:0", owner=host)
        assert stridex.from_pointer(a.data.ptr, (4,), "float32", device="cuda:0", owner=a).device == "cuda:0"

    def test_view_past_the_allocation_is_refused(self):
        mem = cp.cuda.runtime.malloc(64)
        try:
            with pytest.raises(ValueError, match="outside the allocation"):
                stridex.from_pointer(mem, (17,), "float32")
            assert stridex.from_pointer(mem, (16,), "float32").size == 16
        finally:
            cp.cuda.runtime.free(mem)

    def test_pinned_and_managed(self):
        pinned = cp.cuda.alloc_pinned_memory(64)
        assert stridex.from_pointer(pinned.ptr, (16,), "float32", owner=pinned).device == "cuda_host"
        managed = cp.cuda.malloc_managed(64)
        assert stridex.from_pointer(managed.ptr, (16,), "float32", owner=managed).device == "cuda_managed"
