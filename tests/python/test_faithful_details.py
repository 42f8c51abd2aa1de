"""Details a View must carry exactly as the producer gave them, on CPU:
an empty array's pointer, void and structured dtypes, every dtype torch exports over DLPack
(sub-byte floats included), and a producer's refusal to export. The GPU and torch parts are in
test_writability_gpu.py."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import stridex
from quirky_producers import make_capsule
from export_support import aligned, tensor_of

# ---- an empty array's pointer is the producer's -----------------------------------------------------


@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0, 2)])
def test_empty_array_keeps_the_producers_pointer(shape):
    base = aligned((8,), np.float32)
    empty = base[:0].reshape(shape) if 0 in shape else base  # an empty array over real memory
    assert empty.size == 0 and empty.ctypes.data == base.ctypes.data != 0
    v = stridex.view(empty)
    assert v.ptr == base.ctypes.data
    assert v.__array_interface__["data"][0] == base.ctypes.data
    assert np.asarray(v).ctypes.data == base.ctypes.data
    assert np.from_dlpack(v).ctypes.data == base.ctypes.data
    for versioned in (False, True):
        capsule = v.__dlpack__(max_version=(1, 3) if versioned else None)
        assert tensor_of(capsule).data == base.ctypes.data
    assert stridex.view(memoryview(empty)).ptr == base.ctypes.data


def test_empty_capsule_keeps_the_producers_pointer():
    base = aligned((4,), np.float32)
    capsule, _ = make_capsule(base, shape=(0, 4), strides=(4, 1))
    v = stridex.view(capsule)
    assert v.size == 0 and v.ptr == base.ctypes.data
    assert v.__array_interface__["data"][0] == base.ctypes.data


# ---- void and structured dtypes -----------------------------------------------------------------------

RECORD = np.dtype([("a", "<i4"), ("b", "<f8")])  # packed: 12 bytes, NumPy's typestr '|V12'
ALIGNED_RECORD = np.dtype([("a", "<i4"), ("b", "<f8")], align=True)  # 16 bytes, padding in descr


def records(dtype=RECORD, n=5):
    out = np.zeros(n, dtype)
    out["a"] = np.arange(n)
    out["b"] = np.arange(n) * 1.5
    return out


class ArrayInterfaceOnly:
    """A producer with only __array_interface__ (no buffer protocol, no DLPack)."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


@pytest.mark.parametrize("dtype", [RECORD, ALIGNED_RECORD, np.dtype("V12"), np.dtype("V1")])
@pytest.mark.parametrize("protocol", ["array", "array_interface", "buffer"])
def test_void_dtypes_import_as_opaque_elements_and_alias(dtype, protocol):
    r = np.zeros((4, 3), dtype)
    r.view(np.uint8).reshape(-1)[:] = np.arange(r.nbytes) % 251
    part = r[::2, 1:]  # strided: element strides (6, 1) in items
    source = {"array": part, "array_interface": ArrayInterfaceOnly(part), "buffer": memoryview(part)}[protocol]
    v = stridex.view(source)
    assert v.dtype.itemsize == v.itemsize == dtype.itemsize
    assert v.dtype.code == 3  # DLPack's opaque handle: no one may read a number out of it
    assert (v.ptr, v.shape, v.byte_strides) == (part.ctypes.data, part.shape, part.strides)
    out = np.asarray(v)
    # What NumPy makes of the producer itself (a PEP 3118 format, or a descr, loses padding names,
    # and a format plain voids: NumPy's own limits, kept as they are).
    native = np.asarray(source)
    assert out.dtype == native.dtype, "the producer's own dtype comes back"
    assert out.ctypes.data == part.ctypes.data and out.strides == part.strides
    np.testing.assert_array_equal(out.view(np.uint8), part.view(np.uint8))
    # Aliasing: a write through the round-tripped array is seen by the producer, and back.
    np.asarray(out).view(np.uint8)[0, 0] = 250  # first byte of element (0, 0), via the consumer
    assert part.view(np.uint8)[0, 0] == 250
    part.view(np.uint8)[0, -1] = 7
    assert out.view(np.uint8)[0, -1] == 7


def test_structured_dtype_reexports_the_producers_typestr_and_descr():
    r = records(ALIGNED_RECORD)
    v = stridex.view(r)
    ai = v.__array_interface__
    assert ai["typestr"] == r.__array_interface__["typestr"] == "|V16"
    assert ai["descr"] == r.__array_interface__["descr"]  # the fields, padding included
    assert memoryview(v).format == memoryview(r).format
    out = np.asarray(v[1:4])
    np.testing.assert_array_equal(out["b"], [1.5, 3.0, 4.5])
    out["a"][0] = 99
    assert r["a"][1] == 99


def test_void_through_the_buffer_protocol_keeps_the_producers_format():
    v = stridex.view(memoryview(records()))
    assert memoryview(v).format == memoryview(records()).format
    assert v.__array_interface__["typestr"] == "|V12"
    assert np.asarray(v).dtype == RECORD  # NumPy parses the struct format back


def test_void_through_the_cuda_array_interface_parser():
    # The CAI parser reads void typestrs too; a pointer CUDA does not know is cpu memory.
    r = records()

    class Cai:
        __cuda_array_interface__ = {
            "shape": (5,),
            "typestr": "|V12",
            "descr": RECORD.descr,
            "data": (r.ctypes.data, False),
            "version": 3,
            "strides": None,
        }

    v = stridex.view(Cai())
    assert v.itemsize == 12 and v.ptr == r.ctypes.data
    assert v.__array_interface__["descr"] == RECORD.descr
    np.testing.assert_array_equal(np.asarray(v)["a"], r["a"])


@pytest.mark.parametrize("dtype", [RECORD, np.dtype("V12")])
def test_dlpack_export_of_void_dtypes_says_why(dtype):
    v = stridex.view(np.zeros(3, dtype))
    for kwargs in ({}, {"max_version": (1, 3)}, {"max_version": (1, 3), "copy": True}):
        with pytest.raises(BufferError, match="opaque element of .* bytes .*no DLPack dtype"):
            v.__dlpack__(**kwargs)
    with pytest.raises(BufferError, match="no DLPack dtype"):
        np.from_dlpack(v)


def test_plain_void_keeps_its_typestr_through_numpy():
    a = np.zeros((3, 2), "V12")
    v = stridex.view(a[::2])
    out = np.asarray(v)
    assert out.dtype == np.dtype("V12") and out.strides == (48, 12) and out.ctypes.data == a.ctypes.data
    assert v.dtype.numpy == np.dtype("V12")


def test_object_and_string_dtypes_are_still_refused():
    for arr in (np.array([object(), 1], dtype=object), np.array([b"ab", b"cd"]), np.array(["x"])):
        with pytest.raises(BufferError):
            stridex.view(arr)


# ---- every dtype torch exports over DLPack ----------------------------------------------------------

# (code, bits, lanes) of every dtype torch's DLPack converter emits, with torch's name; float4 x 2 is
# torch's packed float4_e2m1fn_x2 (two 4-bit values in each byte-sized element).
TORCH_DLPACK_DTYPES = {
    "uint8": (1, 8, 1),
    "int8": (0, 8, 1),
    "int16": (0, 16, 1),
    "int32": (0, 32, 1),
    "int64": (0, 64, 1),
    "uint16": (1, 16, 1),
    "uint32": (1, 32, 1),
    "uint64": (1, 64, 1),
    "float16": (2, 16, 1),
    "float32": (2, 32, 1),
    "float64": (2, 64, 1),
    "bfloat16": (4, 16, 1),
    "complex32": (5, 32, 1),
    "complex64": (5, 64, 1),
    "complex128": (5, 128, 1),
    "bool": (6, 8, 1),
    "float8_e4m3fn": (10, 8, 1),
    "float8_e4m3fnuz": (11, 8, 1),
    "float8_e5m2": (12, 8, 1),
    "float8_e5m2fnuz": (13, 8, 1),
    "float8_e8m0fnu": (14, 8, 1),
    "float4_e2m1fn_x2": (17, 4, 2),
}


def _raw(address: int, n: int) -> bytes:
    return ctypes.string_at(address, n)


@pytest.mark.parametrize("name", list(TORCH_DLPACK_DTYPES))
@pytest.mark.parametrize("versioned", [True, False])
def test_every_torch_dlpack_dtype_imports_and_reexports(name, versioned):
    code, bits, lanes = TORCH_DLPACK_DTYPES[name]
    itemsize = bits * lanes // 8
    memory = aligned((2 * 3 * itemsize,), np.uint8)
    capsule, counter = make_capsule(
        memory, versioned=versioned, shape=(2, 3), strides=(1, 2), dtype=(code, bits, lanes)
    )
    v = stridex.view(capsule)
    assert (v.dtype.code, v.dtype.bits, v.dtype.lanes, v.itemsize) == (code, bits, lanes, itemsize)
    assert (v.ptr, v.shape, v.strides) == (memory.ctypes.data, (2, 3), (1, 2))
    memory[itemsize] = 0x5A  # element (1, 0), written by the producer, read through the View
    assert _raw(v.ptr + v.strides[0] * itemsize, 1) == b"\x5a"
    for max_version in (None, (1, 3)):
        again = v.__dlpack__(max_version=max_version)
        t = tensor_of(again)
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (code, bits, lanes)
        assert t.data == v.ptr
        w = stridex.view(again)
        assert (w.dtype, w.ptr, w.strides) == (v.dtype, v.ptr, v.strides)
        del w
    del v
    gc.collect()
    assert counter.calls == 1


@pytest.mark.parametrize(
    ("code", "bits", "name"),
    [
        (0, 4, "int4"),
        (1, 4, "uint4"),
        (17, 4, "float4_e2m1fn"),
        (15, 6, "float6_e2m3fn"),
        (16, 6, "float6_e3m2fn"),
        (0, 1, "int1"),
        (1, 2, "uint2"),
    ],
)
def test_sub_byte_dtypes_round_trip_packed_and_padded(code, bits, name):
    memory = aligned((8,), np.uint8)
    packed, _ = make_capsule(memory, shape=(8,), strides=(1,), dtype=(code, bits))
    v = stridex.view(packed)
    assert v.dtype.name == name and v.nbytes == (8 * bits + 7) // 8
    t = tensor_of(v.__dlpack__(max_version=(1, 3)))
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes, t.data) == (code, bits, 1, memory.ctypes.data)
    padded, _ = make_capsule(memory, shape=(8,), strides=(1,), dtype=(code, bits), flags=1 << 2)
    p = stridex.view(padded)
    assert p.nbytes == 8 and p[2:].ptr == memory.ctypes.data + 2  # one element a byte: sliceable
    again = p.__dlpack__(max_version=(1, 3))
    assert tensor_of(again).dtype.bits == bits
    with pytest.raises(BufferError, match="padded"):
        p.__dlpack__()  # a legacy capsule cannot say padded


def test_float4_x2_elements_are_bytes():
    memory = aligned((4, 4), np.uint8)
    capsule, _ = make_capsule(memory, shape=(4, 4), strides=(4, 1), dtype=(17, 4, 2))
    v = stridex.view(capsule)
    assert v.dtype.name == "float4_e2m1fnx2" and v.itemsize == 1 and v.nbytes == 16
    col = v[:, 1]  # strided: each element is a whole byte, so slicing works as for uint8
    assert (col.ptr, col.strides) == (memory.ctypes.data + 1, (4,))
    t = tensor_of(col.__dlpack__(max_version=(1, 3)))
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes, t.strides[0]) == (17, 4, 2, 4)
    assert not hasattr(v, "__array_interface__")  # NumPy has no such type: no typestr to give


def test_other_vector_dtypes_are_still_refused():
    memory = aligned((16,), np.uint8)
    capsule, _ = make_capsule(memory, shape=(1,), strides=(1,), dtype=(2, 32, 4))
    with pytest.raises(BufferError, match="lanes"):
        stridex.view(capsule)


# ---- a producer's refusal is a BufferError --------------------------------------------------------------


class Refuses:
    """A producer whose __dlpack__ refuses with its own exception type (torch's exchange API raises
    RuntimeError for quantized tensors)."""

    def __init__(self, exc):
        self.exc = exc

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        raise self.exc

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("quantized tensors are not supported"),
        ValueError("bad layout for DLPack"),
        NotImplementedError("no DLPack here"),
        TypeError("the producer's own TypeError"),
    ],
)
def test_producer_refusal_is_a_buffer_error_with_its_message(exc):
    with pytest.raises(BufferError) as info:
        stridex.view(Refuses(exc))
    text = str(info.value)
    assert str(exc) in text and type(exc).__name__ in text and "Refuses.__dlpack__" in text
    assert info.value.__cause__ is exc


def test_producer_buffer_error_passes_unchanged():
    exc = BufferError("the producer's own BufferError")
    with pytest.raises(BufferError) as info:
        stridex.view(Refuses(exc))
    assert info.value is exc


def test_refusal_falls_through_to_the_next_protocol():
    arr = aligned((3,), np.float32)

    class RefusesButHasAnInterface:
        __array_interface__ = property(lambda self: arr.__array_interface__)

        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            raise RuntimeError("no")  # raised afresh: a stored one's traceback would hold this frame

        def __dlpack_device__(self):
            return (1, 0)

    v = stridex.view(RefusesButHasAnInterface())
    assert v.ptr == arr.ctypes.data


def test_a_refusal_cuts_a_long_type_name():
    # Class names are foreign text too: messages echo at most 64 characters of them.
    LongName = type("L" * 5000, (Refuses,), {})
    with pytest.raises(BufferError) as info:
        stridex.view(LongName(ValueError("no")))
    assert str(info.value) == "L" * 64 + "... (5000 characters).__dlpack__() refused to export: ValueError: no"


def test_dlpack_device_refusal_is_a_buffer_error():
    class DeviceFails:
        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            raise AssertionError("never reached")

        def __dlpack_device__(self):
            raise RuntimeError("device query failed")

    with pytest.raises(BufferError, match="device query failed") as info:
        stridex.view(DeviceFails(), stream=1)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_keyboard_interrupt_and_memory_error_are_not_refusals():
    for exc in (KeyboardInterrupt(), MemoryError()):
        with pytest.raises(type(exc)):
            stridex.view(Refuses(exc))
