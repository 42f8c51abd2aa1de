"""stridex.view() against real producers on the CPU: NumPy, ml_dtypes, JAX, Warp, torch (when
installed), the buffer protocol of the standard library, and stridex.View itself.

Every test checks what a user relies on: the View aliases the producer's memory (writes on one
side are seen on the other, read back through the View's own pointer), exact dtype, shape,
strides and device, the read-only flag, and the producer kept alive by the View."""

from __future__ import annotations

import array
import ctypes
import sys
import weakref

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stridex
from quirky_producers import Conformant, address, host_array
from stridex._stridex import _internals

# ---- NumPy ------------------------------------------------------------------------------------

NUMPY_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_numpy_dtypes_alias(name):
    a = (np.arange(12) % 2).astype(name).reshape(3, 4) if name == "bool" else np.arange(12).astype(name).reshape(3, 4)
    v = stridex.view(a)
    assert v.dtype == name
    assert (v.shape, v.strides, v.byte_strides) == ((3, 4), (4, 1), a.strides)
    assert v.ptr == address(a)
    assert v.device == "cpu" and not v.readonly and v.stream is None
    assert v.owner is a
    np.testing.assert_array_equal(host_array(v), a)
    a[2, 3] = 1  # write through the producer, read through the View
    assert host_array(v)[2, 3] == a[2, 3]


def test_numpy_write_through_the_view_is_seen_by_numpy():
    a = np.zeros((4, 5), np.float64)
    host_array(stridex.view(a))[1, 2] = 7.5
    assert a[1, 2] == 7.5


def test_numpy_read_only():
    a = np.arange(6.0)
    a.flags.writeable = False
    v = stridex.view(a)
    assert v.readonly and v.ptr == address(a)
    np.testing.assert_array_equal(host_array(v), a)


def test_numpy_zero_d():
    a = np.array(3.25, np.float32)
    v = stridex.view(a)
    assert (v.shape, v.strides, v.ndim, v.size) == ((), (), 0, 1)
    assert v.ptr == address(a) and host_array(v)[()] == 3.25


@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0, 2)])
def test_numpy_empty(shape):
    a = np.zeros(shape, np.int32)
    v = stridex.view(a)
    assert v.shape == shape and v.size == 0 and v.nbytes == 0 and v.dtype == "int32"


def test_numpy_negative_strides_point_at_element_zero():
    base = np.arange(24, dtype=np.int16).reshape(4, 6)
    a = base[::-1, ::-2]
    v = stridex.view(a)
    assert v.strides == (-6, -2) and v.byte_strides == a.strides
    assert v.ptr == address(a) == address(base) + (3 * 6 + 5) * 2  # element 0 is base[3, 5]
    np.testing.assert_array_equal(host_array(v), a)
    base[3, 5] = -1
    assert host_array(v)[0, 0] == -1


def test_numpy_fortran_order_and_broadcast():
    f = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    v = stridex.view(f)
    assert v.strides == (1, 2) and v.is_f_contiguous and not v.is_c_contiguous
    b = np.broadcast_to(np.arange(3.0), (4, 3))
    vb = stridex.view(b)
    assert vb.strides == (0, 1) and vb.readonly  # NumPy marks broadcasts read-only
    np.testing.assert_array_equal(host_array(vb), b)


@pytest.mark.parametrize("dtype", [">f4", ">i8", ">c8"])
def test_numpy_non_native_byte_order_is_a_buffer_error(dtype):
    with pytest.raises(BufferError):
        stridex.view(np.zeros(3, dtype))


# (Void and structured dtypes import as opaque elements: test_faithful_details.py.)
@pytest.mark.parametrize("dtype", [np.dtype("O"), np.dtype("M8[s]"), np.dtype("U3"), np.dtype("S3")])
def test_numpy_dtypes_stridex_cannot_describe_are_buffer_errors(dtype):
    with pytest.raises(BufferError):
        stridex.view(np.zeros(2, dtype))


def test_numpy_producer_kept_alive_after_last_reference(collect):
    v = stridex.view(np.arange(100, dtype=np.int64) * 3)  # the only reference is the View's
    collect()
    assert host_array(v)[99] == 297
    assert isinstance(v.owner, np.ndarray)


def test_numpy_deleter_runs_once_and_releases_the_array(collect):
    a = np.arange(10.0)
    before = sys.getrefcount(a)
    views = [stridex.view(a) for _ in range(10)]
    assert sys.getrefcount(a) > before
    del views
    collect()
    assert sys.getrefcount(a) == before  # every capsule's deleter ran, exactly once each


def test_numpy_repeated_imports_use_the_type_cache():
    a = np.ones(3)
    stridex.view(a)
    hits = _internals.cache_stats()[0]
    for _ in range(5):
        stridex.view(a)
    assert _internals.cache_stats()[0] >= hits + 5


@settings(max_examples=200, deadline=None)
@given(
    shape=st.lists(st.integers(0, 5), min_size=0, max_size=4),
    data=st.data(),
    dtype=st.sampled_from(["int8", "int32", "float32", "float64", "complex128", "bool"]),
)
def test_numpy_random_slices_match_numpy(shape, data, dtype):
    base = (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)
    index = tuple(
        slice(
            data.draw(st.none() | st.integers(-6, 6)),
            data.draw(st.none() | st.integers(-6, 6)),
            data.draw(st.sampled_from([None, 1, 2, 3, -1, -2])),
        )
        for _ in shape
    )
    a = base[index]
    if data.draw(st.booleans()) and a.ndim > 1:
        a = a.transpose(data.draw(st.permutations(range(a.ndim))))
    v = stridex.view(a)
    assert v.shape == a.shape and v.dtype == dtype
    assert v.byte_strides == a.strides or a.size == 0
    if a.size:
        assert v.ptr == address(a)
        np.testing.assert_array_equal(host_array(v), a)


# ---- ml_dtypes: NumPy refuses them through DLPack; stridex reads the array interface --------------

ML_DTYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz"]


@pytest.mark.parametrize("name", ML_DTYPES)
def test_ml_dtypes_come_out_with_their_dtype(name):
    a = np.linspace(-2, 2, 12).astype(getattr(ml_dtypes, name)).reshape(3, 4)
    v = stridex.view(a)
    assert v.dtype == name and v.dtype.bits == 8 * a.dtype.itemsize
    assert (v.shape, v.byte_strides, v.ptr) == (a.shape, a.strides, address(a))
    assert host_array(v).dtype == a.dtype
    np.testing.assert_array_equal(host_array(v).view(np.uint8), a.view(np.uint8))
    a[0, 0] = 1.5
    assert host_array(v)[0, 0] == a[0, 0]


def test_bfloat16_strided_and_read_only():
    a = np.arange(20).astype(ml_dtypes.bfloat16).reshape(4, 5)[::2, ::-1]
    a.flags.writeable = False
    v = stridex.view(a)
    assert v.dtype == "bfloat16" and v.readonly and v.strides == (10, -1)
    np.testing.assert_array_equal(host_array(v), a)


@pytest.mark.parametrize("name", ["int4", "uint4", "float4_e2m1fn"])
def test_ml_dtypes_sub_byte_types_are_one_per_byte(name):
    a = np.arange(6).astype(getattr(ml_dtypes, name))
    v = stridex.view(a)
    assert v.dtype == name and v.byte_strides == (1,) and v.ptr == address(a)


# ---- JAX (CPU) ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def jnp():
    """jax.numpy with arrays on the CPU (on a GPU machine too; the GPU tests are elsewhere)."""
    jax = pytest.importorskip("jax")
    with jax.default_device(jax.devices("cpu")[0]):
        yield pytest.importorskip("jax.numpy")


def test_jax_array(jnp):
    j = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    v = stridex.view(j)
    assert (v.shape, v.strides, v.dtype, v.device) == ((3, 4), (4, 1), "float32", "cpu")
    # JAX arrays are immutable, though its legacy capsule cannot say so (jax#19123): read-only.
    assert v.readonly
    np.testing.assert_array_equal(host_array(v), np.asarray(j))
    assert v.ptr == j.unsafe_buffer_pointer()


@pytest.mark.parametrize("stream", [None, 1, 2, 12345, -1, stridex.NO_SYNC])
def test_jax_cpu_takes_any_stream_argument(jnp, stream):
    # JAX on the CPU refuses any stream but None (UNIMPLEMENTED): stridex sends None to host arrays.
    j = jnp.ones((2, 2), jnp.float32)
    v = stridex.view(j, stream=stream)
    assert v.device == "cpu" and v.stream is None
    np.testing.assert_array_equal(host_array(v), np.ones((2, 2)))


def test_jax_bfloat16_and_lifetime(jnp, collect):
    v = stridex.view(jnp.arange(8, dtype=jnp.bfloat16) * 2)
    collect()
    assert v.dtype == "bfloat16"
    np.testing.assert_array_equal(host_array(v).astype(np.float32), np.arange(8) * 2)


# ---- Warp (CPU) ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wp():
    wp = pytest.importorskip("warp")
    wp.config.quiet = True
    wp.init()
    return wp


@pytest.mark.parametrize("stream", [None, 7, stridex.NO_SYNC])
def test_warp_cpu_array(wp, stream):
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    w = wp.array(src, dtype=wp.float32, device="cpu")
    v = stridex.view(w, stream=stream)
    assert (v.shape, v.strides, v.dtype, v.device) == ((3, 4), (4, 1), "float32", "cpu")
    assert v.ptr == w.ptr
    w.numpy()[1, 1] = -3.0  # Warp's CPU numpy() aliases
    assert host_array(v)[1, 1] == -3.0
    np.testing.assert_array_equal(host_array(v), w.numpy())


def test_warp_stream_only_dlpack_is_remembered(wp):
    # Warp's __dlpack__(stream=None) refuses max_version (TypeError): retried once, then cached.
    w = wp.array(np.arange(4, dtype=np.int32), dtype=wp.int32, device="cpu")
    assert stridex.view(w).dtype == "int32"
    assert stridex.view(w).dtype == "int32"


# ---- torch (when installed) ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def test_torch_cpu_tensor(torch):
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    v = stridex.view(t)
    assert (v.shape, v.strides, v.dtype, v.device) == ((4, 3), (1, 4), "float32", "cpu")
    assert v.ptr == t.data_ptr()
    t[0, 0] = 42
    assert host_array(v)[0, 0] == 42


def test_torch_cpu_bfloat16_and_bool(torch):
    for dt, name in [(torch.bfloat16, "bfloat16"), (torch.bool, "bool")]:
        t = torch.zeros(5, dtype=dt)
        v = stridex.view(t, stream=5)
        assert v.dtype == name and v.ptr == t.data_ptr() and v.stream is None


# ---- the buffer protocol -------------------------------------------------------------------------


def test_buffer_protocol_of_builtins():
    b = bytearray(b"abcdef")
    v = stridex.view(b)
    assert (v.dtype, v.shape, v.readonly) == ("uint8", (6,), False)
    b[0] = ord("z")
    assert bytes(host_array(v)) == b"zbcdef"
    assert stridex.view(b"xyz").readonly

    d = array.array("d", [1.0, 2.0, 3.0])
    vd = stridex.view(d)
    assert vd.dtype == "float64" and vd.shape == (3,)
    d[2] = 9.0
    assert host_array(vd)[2] == 9.0

    c = (ctypes.c_int16 * 4)(1, 2, 3, 4)
    vc = stridex.view(c)
    assert vc.dtype == "int16" and vc.ptr == ctypes.addressof(c)

    m = memoryview(bytearray(24)).cast("B", (2, 3, 4))
    vm = stridex.view(m)
    assert (vm.shape, vm.strides) == ((2, 3, 4), (12, 4, 1))


BUFFER_CASES = [
    ("?", "bool", lambda: memoryview(bytearray(4)).cast("?")),
    ("e", "float16", lambda: memoryview(np.zeros(4, np.float16))),
    ("Zf", "complex64", lambda: memoryview(np.zeros(4, np.complex64))),
    ("Zd", "complex128", lambda: memoryview(np.zeros(4, np.complex128))),
    ("l", "int64", lambda: memoryview(np.zeros(4, np.int64))),
    ("<q", "int64", lambda: memoryview((ctypes.c_int64 * 4)())),
    ("<H", "uint16", lambda: memoryview((ctypes.c_uint16 * 4)())),
]


@pytest.mark.parametrize("fmt,name,make", BUFFER_CASES, ids=[c[0] for c in BUFFER_CASES])
def test_buffer_formats(fmt, name, make):
    m = make()
    assert m.format == fmt
    v = stridex.view(m)
    assert v.dtype == name and v.shape == (4,) and v.byte_strides == (m.itemsize,)


def test_buffer_non_native_byte_order_is_a_buffer_error():
    m = memoryview((ctypes.c_int32.__ctype_be__ * 3)())
    assert m.format.startswith(">")
    with pytest.raises(BufferError, match="byte order"):
        stridex.view(m)


def test_buffer_keeps_the_exporter_alive(collect):
    v = stridex.view(memoryview(bytearray(b"hello")))
    collect()
    assert bytes(host_array(v)) == b"hello"


# ---- stridex.View in, stridex.View out -------------------------------------------------------------


def test_view_of_a_view_is_the_same_memory_without_asking_the_producer_again():
    p = Conformant(np.arange(6.0))
    v = stridex.view(p)
    assert len(p.calls) == 1
    w = stridex.view(v)
    assert len(p.calls) == 1
    assert (w.ptr, w.shape, w.strides, w.dtype, w.device, w.readonly) == (
        v.ptr,
        v.shape,
        v.strides,
        v.dtype,
        v.device,
        v.readonly,
    )
    assert w.owner is v.owner is p
    sliced = stridex.view(v[::-2])
    assert sliced.ptr == v.ptr + 5 * 8 and sliced.strides == (-2,)


def test_view_of_a_view_outlives_both(collect):
    a = np.arange(5.0)
    ref = weakref.ref(p := Conformant(a))
    w = stridex.view(stridex.view(p))
    del p
    collect()
    assert ref() is not None  # the producer is kept alive by the second View
    np.testing.assert_array_equal(host_array(w), a)


# ---- errors --------------------------------------------------------------------------------------


def test_no_protocol_is_a_type_error_listing_what_was_tried():
    with pytest.raises(TypeError) as e:
        stridex.view(object())
    for name in ("__dlpack__", "__cuda_array_interface__", "__array_interface__", "buffer protocol"):
        assert name in str(e.value)


@pytest.mark.parametrize(
    "stream,error",
    [(0, ValueError), (-2, ValueError), (True, TypeError), ("1", TypeError), (1.0, TypeError), (2**70, ValueError)],
)
def test_bad_stream_arguments(stream, error):
    with pytest.raises(error):
        stridex.view(np.zeros(2), stream=stream)


def test_stream_zero_message_says_what_to_use():
    with pytest.raises(ValueError, match="1 for the legacy default stream"):
        stridex.view(np.zeros(2), stream=0)


def test_signature():
    with pytest.raises(TypeError):
        stridex.view(np.zeros(2), 1)  # stream is keyword-only
    with pytest.raises(TypeError, match="unexpected keyword"):
        stridex.view(np.zeros(2), streem=1)
    assert stridex.view.__text_signature__ == (
        "(obj, /, *, stream=None, dtype=None, ndim=None, shape=None, device=None, writable=None, contiguous=None)"
    )


def test_byte_span_covers_negative_strides():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert stridex.view(a).byte_span == (0, 48)
    v = stridex.view(a[::-1, 1::2])
    # ptr is element (2, 1): two rows of 16 bytes below it, one 8-byte column step plus an item above
    assert v.byte_span == (-32, 8 + 4)
    assert stridex.view(a[:0]).byte_span == (0, 0)
