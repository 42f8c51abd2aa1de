"""The writability rules and the faithful details with real frameworks: JAX,
Warp, CuPy, torch and cuda.core on cuda:0, and torch's dtypes (float4_e2m1fn_x2 ...) and refusals
(quantized tensors), which need torch but no GPU. Each hand-over through stridex is compared with
the same hand-over done natively. Skips cleanly without a GPU or without the framework; the CPU
rules are test_writability.py and test_faithful_details.py."""

from __future__ import annotations

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX on a shared GPU
os.environ.setdefault("XLA_PYTHON_CLIENT_ALLOCATOR", "platform")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import stridex  # noqa: E402
from export_support import FLAG_READ_ONLY, capsule_name, cuda_device_count, managed_of, optional, tensor_of  # noqa: E402

requires_gpu = pytest.mark.skipif(cuda_device_count() == 0, reason="no CUDA GPU (the GPU part runs on a GPU machine)")

jax = optional("jax")
jnp = optional("jax.numpy")
wp = optional("warp")
cp = optional("cupy") if cuda_device_count() else None
torch = optional("torch")


def jax_gpu():
    if jax is None:
        pytest.skip("jax is not installed")
    for platform in ("cuda", "gpu"):
        try:
            return jax.devices(platform)[0]
        except RuntimeError:
            continue
    pytest.skip("jax has no CUDA backend here")


def warp_cuda():
    if wp is None:
        pytest.skip("warp is not installed")
    wp.config.quiet = True
    wp.init()
    if not wp.is_cuda_available():
        pytest.skip("warp sees no CUDA device")
    return wp


def smv(obj):
    """cuda.core's StridedMemoryView of obj (with stream -1: no ordering asked)."""
    for name in ("cuda.core", "cuda.core.utils", "cuda.core.experimental.utils"):
        m = optional(name)
        if m is not None and hasattr(m, "StridedMemoryView"):
            t = m.StridedMemoryView
            return t.from_dlpack(obj, stream_ptr=-1) if hasattr(t, "from_dlpack") else t(obj, stream_ptr=-1)
    pytest.skip("cuda.core is not installed")


def host(v) -> np.ndarray:
    from test_import_gpu import device_array

    return device_array(v)


# ---- JAX on cuda:0: immutable, re-exported as JAX exports it ----------------------------------------


@requires_gpu
def test_jax_gpu_array_goes_back_to_jax_through_stridex():
    x = jax.device_put(jnp.arange(12, dtype=jnp.float32).reshape(3, 4), jax_gpu()).block_until_ready()
    v = stridex.view(x)
    assert (str(v.device), v.writability, v.readonly) == ("cuda:0", "immutable", True)
    y = jnp.from_dlpack(v)
    assert y.unsafe_buffer_pointer() == x.unsafe_buffer_pointer() == v.ptr
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    z = jax.dlpack.from_dlpack(v)
    assert z.unsafe_buffer_pointer() == v.ptr


@requires_gpu
def test_jax_gpu_array_reaches_warp_through_stridex():
    x = jax.device_put(jnp.arange(8, dtype=jnp.float32), jax_gpu()).block_until_ready()
    w_native = warp_cuda().from_dlpack(x)
    w = warp_cuda().from_dlpack(stridex.view(x))
    assert w.ptr == w_native.ptr == x.unsafe_buffer_pointer()
    np.testing.assert_array_equal(w.numpy(), np.asarray(x))


@requires_gpu
def test_jax_gpu_array_is_read_only_for_versioned_consumers():
    x = jax.device_put(jnp.arange(4, dtype=jnp.float32), jax_gpu()).block_until_ready()
    v = stridex.view(x)
    assert managed_of(v.__dlpack__(max_version=(1, 3), stream=-1)).flags & FLAG_READ_ONLY
    s = smv(v)
    assert s.readonly and s.ptr == v.ptr  # natively cuda.core cannot even import JAX's capsules here
    assert v.__cuda_array_interface__["data"][1] is True


# ---- a legacy-only producer on cuda:0 (Warp): each consumer's own rule ------------------------------


@requires_gpu
def test_warp_gpu_array_reaches_each_consumer_as_warp_gives_it():
    w = warp_cuda().array(np.arange(6, dtype=np.float32), device="cuda:0")
    v = stridex.view(w)
    assert (v.writability, v.readonly) == ("unknown", False)
    assert capsule_name(v.__dlpack__(max_version=(1, 3), stream=-1)) == "dltensor"
    if cp is not None:
        native, through = cp.from_dlpack(w), cp.from_dlpack(v)
        assert through.data.ptr == native.data.ptr == w.ptr
        through[0] = 42  # CuPy's rule for legacy capsules: writable, natively and through stridex
        np.testing.assert_array_equal(host(v)[:1], [42])
    if torch is not None and torch.cuda.is_available():
        native, through = torch.from_dlpack(w), torch.from_dlpack(v)
        assert through.data_ptr() == native.data_ptr() == w.ptr
    try:
        native = smv(w)
    except pytest.skip.Exception:
        return
    except Exception:  # noqa: BLE001 - cuda.core cannot take Warp's capsule natively: nothing to compare
        return
    s = smv(v)
    assert s.readonly == native.readonly and s.ptr == w.ptr


@requires_gpu
def test_read_only_view_on_gpu_still_refuses_legacy_capsules():
    if cp is None:
        pytest.skip("cupy is not installed")
    a = cp.arange(4, dtype=cp.float32)
    ro = stridex.from_pointer(a.data.ptr, a.shape, "float32", owner=a, readonly=True)
    assert ro.writability == "readonly"
    with pytest.raises(BufferError, match="read-only"):
        ro.__dlpack__(stream=-1)
    if jax is not None:
        jax_gpu()
        with pytest.raises(BufferError, match="read-only"):
            jnp.from_dlpack(ro)


# ---- an empty array's pointer on cuda:0 -------------------------------------------------------------


@requires_gpu
def test_empty_gpu_array_keeps_the_producers_pointer():
    if cp is None:
        pytest.skip("cupy is not installed")
    a = cp.arange(8, dtype=cp.float32)
    empty = a[:0]
    assert empty.data.ptr == a.data.ptr != 0
    v = stridex.view(empty)
    assert v.ptr == a.data.ptr
    assert v.__cuda_array_interface__["data"][0] == a.data.ptr
    assert tensor_of(v.__dlpack__(max_version=(1, 3), stream=-1)).data == a.data.ptr


# ---- void dtypes through the CUDA array interface on cuda:0 ------------------------------------------


@requires_gpu
def test_void_dtype_through_the_cuda_array_interface():
    if cp is None:
        pytest.skip("cupy is not installed")
    memory = cp.arange(60, dtype=cp.uint8)
    descr = [("a", "<i4"), ("b", "<f8")]

    class Records:
        __cuda_array_interface__ = {
            "shape": (5,),
            "typestr": "|V12",
            "descr": descr,
            "strides": None,
            "data": (memory.data.ptr, False),
            "version": 3,
            "stream": None,
        }

    v = stridex.view(Records())
    assert (str(v.device), v.itemsize, v.ptr) == ("cuda:0", 12, memory.data.ptr)
    cai = v[1:].__cuda_array_interface__
    assert (cai["typestr"], cai["descr"], cai["data"][0]) == ("|V12", descr, memory.data.ptr + 12)
    with pytest.raises(BufferError, match="no DLPack dtype"):
        v.__dlpack__(stream=-1)


# ---- torch: every DLPack dtype, float4_e2m1fn_x2, refusals (no GPU needed) ---------------------------

TORCH_DTYPES = [
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "complex32",
    "complex64",
    "complex128",
    "bool",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
]


def torch_dtype(name):
    if torch is None:
        pytest.skip("torch is not installed")
    dtype = getattr(torch, name, None)
    if dtype is None:
        pytest.skip(f"this torch has no {name}")
    return dtype


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=requires_gpu)])
@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_every_torch_dlpack_dtype_round_trips(name, device):
    dtype = torch_dtype(name)
    t = (
        torch.zeros((4, 6), dtype=torch.uint8, device=device).view(dtype)
        if dtype.itemsize == 1
        else torch.zeros((4, 6), dtype=dtype, device=device)
    )
    t = t[:, 1:]  # strided
    try:
        native = torch.from_dlpack(t.__dlpack__())  # torch's own exchange, for comparison
    except (BufferError, RuntimeError, TypeError) as exc:
        pytest.skip(f"torch itself does not exchange {name} over DLPack here: {exc}")
    v = stridex.view(t)
    assert (v.ptr, v.shape, v.strides, v.itemsize) == (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.itemsize)
    back = torch.from_dlpack(v)
    assert back.dtype == native.dtype == dtype
    assert (back.data_ptr(), back.shape, back.stride()) == (t.data_ptr(), t.shape, t.stride())
    if dtype.itemsize == 1:  # aliasing, byte-wise: written through the producer, read through the import
        t.view(torch.uint8)[0, 0] = 7
        assert back.view(torch.uint8)[0, 0].item() == 7


def test_torch_float4_e2m1fn_x2_imports_and_reexports():
    dtype = torch_dtype("float4_e2m1fn_x2")
    t = torch.arange(16, dtype=torch.uint8).view(dtype).reshape(4, 4)
    v = stridex.view(t)
    assert (v.dtype.code, v.dtype.bits, v.dtype.lanes, v.itemsize) == (17, 4, 2, 1)
    back = torch.from_dlpack(v[:, 1:])
    assert back.dtype == dtype and back.data_ptr() == t.data_ptr() + 1
    assert torch.equal(back.view(torch.uint8), t[:, 1:].view(torch.uint8))


def test_torch_quantized_tensor_refusal_is_a_buffer_error():
    if torch is None:
        pytest.skip("torch is not installed")
    q = torch.quantize_per_tensor(torch.ones(4), scale=0.1, zero_point=0, dtype=torch.qint8)
    try:
        q.__dlpack__()
    except Exception as exc:  # noqa: BLE001 - whatever torch raises natively
        native = exc
    else:
        pytest.skip("this torch exports quantized tensors")
    with pytest.raises(BufferError) as info:
        stridex.view(q)
    # torch's own words reach the caller (its exchange API and __dlpack__ may word them differently)
    assert isinstance(native, BufferError) or isinstance(info.value.__cause__, Exception)
    assert "Tensor" in str(info.value) or str(native) in str(info.value)
