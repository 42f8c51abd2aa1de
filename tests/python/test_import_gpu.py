"""stridex.view() against real GPU producers: torch, CuPy, JAX, Numba-CUDA and cuda.core, and the
stream contract on real streams (a producer kernel still running on stream A when the View is made
for stream B). Skips cleanly, with the reason, on a machine without a CUDA device.

Device memory is read back with cuMemcpyDtoH on the View's own pointer (ctypes, libcuda), so these
tests check aliasing without relying on any export protocol of stridex."""

from __future__ import annotations

import ctypes
import time

import numpy as np
import pytest

import stridex
from conftest import cuda_device_count

pytestmark = pytest.mark.skipif(cuda_device_count() == 0, reason="no CUDA device (stridex.cuda_available() is False)")

SLEEP_CYCLES = int(3e8)  # torch.cuda._sleep: ~0.15 s at ~2 GHz, far longer than an import


# ---- reading device memory through the View's pointer ---------------------------------------------

_libcuda = None


def _cuda():
    global _libcuda
    if _libcuda is None:
        _libcuda = ctypes.CDLL("libcuda.so.1")
        _libcuda.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        _libcuda.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        _libcuda.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
        _libcuda.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
    return _libcuda


def device_array(v) -> np.ndarray:
    """A host copy of exactly the memory the View describes (synchronous cuMemcpyDtoH)."""
    cu = _cuda()
    ctx = ctypes.c_void_p()
    assert cu.cuCtxGetCurrent(ctypes.byref(ctx)) == 0
    if not ctx.value:
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), v.device.id) == 0
        assert cu.cuCtxSetCurrent(ctx) == 0
    dtype = v.dtype.numpy
    shape, strides = tuple(v.shape), tuple(v.byte_strides)
    if v.size == 0:
        return np.empty(shape, dtype)
    lo, hi = v.byte_span
    host = np.empty(hi - lo, np.uint8)
    assert cu.cuMemcpyDtoH_v2(host.ctypes.data, v.ptr + lo, hi - lo) == 0
    return np.ndarray(shape, dtype, buffer=host, offset=-lo, strides=strides)


# ---- torch --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch(torch_with_cuda):
    return torch_with_cuda


def test_torch_cuda_tensor(torch):
    t = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)[1:, ::2]
    v = stridex.view(t)
    assert (v.shape, v.strides, v.dtype) == ((3, 3), (6, 2), "float32")
    assert v.device == f"cuda:{torch.cuda.current_device()}" and v.ptr == t.data_ptr()
    assert v.stream == 1 and not v.readonly
    torch.cuda.synchronize()
    np.testing.assert_array_equal(device_array(v), t.cpu().numpy())
    t.fill_(5)
    torch.cuda.synchronize()
    assert (device_array(v) == 5).all()


def test_a_producer_no_row_names_is_sent_the_legacy_stream_as_1(torch):
    # As torch's own DLPack suite checks of torch.from_dlpack: a wrapper written against torch's
    # consumer expects the legacy stream spelt 1, which stridex in the middle must send too.
    sent = []

    class DLPackTensor:
        def __init__(self, tensor):
            self.tensor = tensor

        def __dlpack_device__(self):
            return self.tensor.__dlpack_device__()

        def __dlpack__(self, stream=None):  # no max_version: stridex retries with stream only
            sent.append(stream)
            assert stream == 1
            return self.tensor.__dlpack__(stream=stream)

    with torch.cuda.stream(torch.cuda.default_stream()):
        x = torch.arange(5.0, device="cuda")
        y = torch.from_dlpack(stridex.view(DLPackTensor(x)))
    assert sent == [1] and y.data_ptr() == x.data_ptr() and torch.equal(x, y)


@pytest.mark.parametrize(
    "dtype,name",
    [
        ("bfloat16", "bfloat16"),
        ("float8_e4m3fn", "float8_e4m3fn"),
        ("bool", "bool"),
        ("complex64", "complex64"),
        ("int8", "int8"),
    ],
)
def test_torch_cuda_dtypes(torch, dtype, name):
    t = torch.zeros(5, device="cuda").to(getattr(torch, dtype))
    v = stridex.view(t)
    assert v.dtype == name and v.ptr == t.data_ptr()


def test_torch_cuda_lifetime(torch, collect):
    v = stridex.view(torch.full((1000,), 7.0, device="cuda"))
    collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    assert (device_array(v) == 7).all()


def test_torch_non_current_device(torch):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    with torch.cuda.device(0):
        t = torch.arange(10.0, device="cuda:1")
        s1 = torch.cuda.Stream(device=1)
        for stream in (None, s1, stridex.NO_SYNC):
            v = stridex.view(t, stream=stream)
            assert v.device == "cuda:1" and v.ptr == t.data_ptr()
    torch.cuda.synchronize(1)
    np.testing.assert_array_equal(device_array(v), np.arange(10.0))


def test_torch_pinned_memory(torch):
    t = torch.arange(6.0).pin_memory()
    v = stridex.view(t, stream=7)  # pinned memory is host memory to torch: it gets stream None
    assert v.ptr == t.data_ptr() and v.device.host_accessible


def _producer_busy_on(torch, stream, x):
    """Queues a long sleep then x.fill_(1) on `stream`; returns while the kernel still runs."""
    with torch.cuda.stream(stream):
        torch.cuda._sleep(SLEEP_CYCLES)
        x.fill_(1.0)


@pytest.mark.parametrize("how", ["object", "int", "protocol"])
def test_torch_stream_order_is_an_event_not_a_host_sync(torch, how):
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.zeros(1 << 20, device="cuda")
    torch.cuda.synchronize()
    _producer_busy_on(torch, a, x)
    consumer = {
        "object": b,
        "int": b.cuda_stream,
        "protocol": type("S", (), {"__cuda_stream__": lambda self: (0, b.cuda_stream)})(),
    }[how]
    with torch.cuda.stream(a):  # DLPack: the producer's pending work is on its current stream
        t0 = time.perf_counter()
        v = stridex.view(x, stream=consumer)
        elapsed = time.perf_counter() - t0
    assert not a.query(), "the producer's kernel finished already: the test cannot tell event from sync"
    assert elapsed < 0.05, f"stridex.view blocked the host for {elapsed:.3f} s"
    assert v.stream == b.cuda_stream
    with torch.cuda.stream(b):  # work on B, queued now, must see the finished fill
        y = x.clone()
    b.synchronize()
    assert bool((y == 1).all())


def test_torch_default_stream_request_orders_the_legacy_stream(torch):
    a = torch.cuda.Stream()
    x = torch.zeros(1 << 20, device="cuda")
    torch.cuda.synchronize()
    _producer_busy_on(torch, a, x)
    with torch.cuda.stream(a):
        v = stridex.view(x)
    assert v.stream == 1
    y = x.clone()  # torch's default stream is the legacy one
    torch.cuda.current_stream().synchronize()
    assert bool((y == 1).all())


def test_torch_per_thread_stream_is_never_sent_to_torch(torch):
    x = torch.ones(4, device="cuda")
    v = stridex.view(x, stream=2)  # torch raises BufferError on 2; stridex orders it itself
    assert v.stream == 2


# ---- CuPy ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def test_cupy_array(cp):
    a = cp.arange(12, dtype=cp.int32).reshape(3, 4)[:, ::-1]
    v = stridex.view(a)
    assert (v.shape, v.strides, v.dtype, v.ptr) == ((3, 4), (4, -1), "int32", a.data.ptr)
    assert v.device == f"cuda:{a.device.id}"
    cp.cuda.Device().synchronize()
    np.testing.assert_array_equal(device_array(v), cp.asnumpy(a))


def test_cupy_streams(cp):
    s = cp.cuda.Stream(non_blocking=True)
    a = cp.ones(10)
    # NO_SYNC promises the caller ordered the producer's work itself: here, by waiting for it (the
    # sanitizer reports the hand-over otherwise, STRIDEX_SANITIZE=streams).
    cp.cuda.get_current_stream().synchronize()
    for stream in (s, s.ptr, stridex.NO_SYNC, None):
        v = stridex.view(a, stream=stream)
        assert v.ptr == a.data.ptr
    assert stridex.view(a, stream=s).stream == s.ptr


def test_cupy_through_the_cuda_array_interface_with_a_stream_key(cp):
    s = cp.cuda.Stream(non_blocking=True)

    class OnlyCAI:
        def __init__(self, a):
            self.a = a

        @property
        def __cuda_array_interface__(self):
            return self.a.__cuda_array_interface__

    with s:
        a = cp.arange(8.0)
        cai = OnlyCAI(a)
        assert cai.__cuda_array_interface__.get("stream") == s.ptr
        v = stridex.view(cai)
    assert v.ptr == a.data.ptr and v.device == f"cuda:{a.device.id}" and v.stream == 1
    cp.cuda.Device().synchronize()
    np.testing.assert_array_equal(device_array(v), np.arange(8.0))


def test_cupy_managed_memory(cp):
    pool = cp.cuda.MemoryPool(cp.cuda.malloc_managed)
    with cp.cuda.using_allocator(pool.malloc):
        a = cp.arange(4.0)
    v = stridex.view(a)
    assert v.ptr == a.data.ptr and v.device.cuda_accessible


# ---- JAX ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [None, stridex.NO_SYNC, -1, "torch"])
def test_jax_gpu_never_receives_minus_one(jax_gpu, stream):
    jax, gpu = jax_gpu
    j = jax.device_put(np.arange(12, dtype=np.float32).reshape(3, 4), gpu)
    if stream == "torch":
        torch = pytest.importorskip("torch")
        stream = torch.cuda.Stream()
    v = stridex.view(j, stream=stream)  # -1 would be CUDA_ERROR_INVALID_HANDLE inside JAX
    assert (v.shape, v.dtype, v.readonly) == ((3, 4), "float32", True)
    assert v.device.type == "cuda" and v.ptr == j.unsafe_buffer_pointer()
    j.block_until_ready()
    np.testing.assert_array_equal(device_array(v), np.arange(12).reshape(3, 4))


def test_jax_gpu_explicit_stream_is_passed_as_is(jax_gpu):
    jax, gpu = jax_gpu
    torch = pytest.importorskip("torch")
    s = torch.cuda.Stream()
    j = jax.device_put(np.ones(3, np.float32), gpu)
    assert stridex.view(j, stream=s.cuda_stream).stream == s.cuda_stream


# ---- Numba-CUDA (CUDA array interface only) ----------------------------------------------------------


@pytest.fixture(scope="module")
def numba_cuda():
    cuda = pytest.importorskip("numba.cuda")
    if not cuda.is_available():
        pytest.skip("numba.cuda sees no GPU")
    return cuda


def test_numba_device_array(numba_cuda):
    host = np.arange(20, dtype=np.float64).reshape(4, 5)
    d = numba_cuda.to_device(host)
    assert not hasattr(d, "__dlpack__")
    v = stridex.view(d)
    assert (v.shape, v.strides, v.dtype) == ((4, 5), (5, 1), "float64")
    assert v.ptr == d.__cuda_array_interface__["data"][0] and v.device.type == "cuda"
    np.testing.assert_array_equal(device_array(v), host)


def test_numba_stream_key(numba_cuda):
    s = numba_cuda.stream()
    d = numba_cuda.to_device(np.arange(6.0), stream=s)
    v = stridex.view(d[::2], stream=s)
    handle = s.handle.value if hasattr(s.handle, "value") else int(s)
    assert v.strides == (2,) and v.stream == handle
    s.synchronize()
    np.testing.assert_array_equal(device_array(v), np.arange(6.0)[::2])


# ---- cuda.core -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ccore():
    try:
        import cuda.core as ccore  # noqa: F401

        if not hasattr(ccore, "Device"):
            import cuda.core.experimental as ccore
    except ImportError:
        pytest.skip("cuda.core is not installed")
    return ccore


def test_cuda_core_strided_memory_view(ccore, torch):
    smv_cls = getattr(ccore, "StridedMemoryView", None) or getattr(ccore.utils, "StridedMemoryView")
    t = torch.arange(12.0, device="cuda").reshape(3, 4)
    smv = smv_cls.from_dlpack(t, stream_ptr=-1) if hasattr(smv_cls, "from_dlpack") else smv_cls(t, stream_ptr=-1)
    if not hasattr(smv, "__dlpack__"):
        pytest.skip("this cuda.core StridedMemoryView does not export DLPack")
    v = stridex.view(smv)
    assert (v.shape, v.ptr, v.dtype) == ((3, 4), t.data_ptr(), "float32")


def test_cuda_core_buffer(ccore):
    dev = ccore.Device()
    dev.set_current()
    try:
        buf = dev.allocate(64, stream=dev.default_stream)
    except TypeError:  # cuda.core before 1.0
        buf = dev.allocate(64)
    if not hasattr(buf, "__dlpack__"):
        pytest.skip("this cuda.core Buffer does not export DLPack")
    v = stridex.view(buf)
    assert v.ptr == int(buf.handle) and v.nbytes == 64 and v.device.type == "cuda"


@pytest.mark.parametrize("framework", ["cupy", "torch"])
def test_a_capsule_used_twice_raises_what_the_frameworks_own_from_dlpack_raises(framework):
    # CuPy's suite asserts ValueError "consumed multiple times"; torch raises RuntimeError.
    fw = pytest.importorskip(framework)
    x = fw.arange(4.0, device="cuda") if framework == "torch" else fw.arange(4.0)
    capsule = x.__dlpack__()
    y = fw.from_dlpack(stridex.view(capsule))
    y[0] = 7  # the first import aliases x
    assert float(x[0]) == 7.0
    with pytest.raises(ValueError, match="consumed multiple times"):
        fw.from_dlpack(stridex.view(capsule))
    with pytest.raises(RuntimeError):
        fw.from_dlpack(stridex.view(capsule))
