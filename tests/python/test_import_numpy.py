"""stridex.view(numpy.ndarray) reads the array's struct instead of calling __dlpack__
(src/extension/import/import_numpy.cpp). The rule it must keep: the View is exactly the one __dlpack__
gives, and wherever the struct cannot say for sure, __dlpack__ decides.

Two oracles give the other path for the same memory: the array's own versioned capsule
(stridex.view(a.__dlpack__(max_version=(1, 0)))), and a view of the array as an ndarray subclass,
which stridex imports through __dlpack__ (only numpy.ndarray itself is read from its struct)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stridex
from conftest import shortcut_on
from quirky_producers import address, host_array, make_capsule
from stridex._stridex import _internals


class Sub(np.ndarray):
    """An ndarray subclass: same struct, imported through __dlpack__."""


def describe(v):
    return (v.ptr, v.shape, v.strides, str(v.dtype), str(v.device), v.readonly, v.writability, v.stream)


def outcome(make):
    try:
        return describe(make())
    except Exception as e:  # noqa: BLE001 - the class of the error is what is compared
        return type(e)


def assert_same_as_dlpack(a):
    fast = outcome(lambda: stridex.view(a))
    assert fast == outcome(lambda: stridex.view(a.view(Sub)))
    try:
        capsule = a.__dlpack__(max_version=(1, 0))
    except BufferError:
        return fast  # NumPy refuses: another protocol decided, on both paths alike
    # A raw capsule carries no stream, so the stream is left out of this comparison.
    assert fast[:7] == outcome(lambda: stridex.view(capsule))[:7]
    return fast


def test_numpy_ndarray_is_read_from_its_struct_and_subclasses_are_not():
    # ... while the shortcut numpy_struct is on; off, __dlpack__ answers for numpy.ndarray too.
    assert _internals.array_struct(np.ndarray) == ("numpy" if shortcut_on("numpy_struct") else None)
    assert _internals.array_struct(Sub) is None
    assert _internals.array_struct(np.memmap) is None
    assert _internals.array_struct(np.float64) is None  # a scalar type, not an array


DTYPES = [
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
    "intc",
    "uintc",
    "short",
    "ushort",
    "long",
    "ulong",
    "longlong",
    "ulonglong",
]


@pytest.mark.parametrize("name", DTYPES)
def test_every_dlpack_dtype_matches_dlpack(name):
    a = np.arange(24).astype(name).reshape(2, 3, 4)[:, ::2, ::-1]
    fast = assert_same_as_dlpack(a)
    assert fast[3] == np.dtype(name).name  # NumPy's canonical name for the C type
    np.testing.assert_array_equal(host_array(stridex.view(a)), a)


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(4, dtype=np.longdouble),  # no IEEE type DLPack knows
        lambda: np.arange(4, dtype=np.clongdouble),
        lambda: np.array(["a", "bc"]),  # strings
        lambda: np.array([1, None], dtype=object),  # objects
        lambda: np.zeros(3, dtype="M8[s]"),  # datetimes
        lambda: np.zeros(3, dtype="m8[s]"),
        lambda: np.zeros(3, dtype=[("x", "f4"), ("y", "i2")]),  # structured
        lambda: np.zeros(3, dtype="V4"),  # void
        lambda: np.arange(6, dtype=">f4" if np.little_endian else "<f4"),  # byte-swapped
        lambda: np.zeros(3, dtype=[("x", "f4"), ("y", "i2")])["x"],  # strides not whole elements
        lambda: np.lib.stride_tricks.as_strided(np.zeros(16, np.uint8), shape=(3,), strides=(3,)).view(np.int8),
        lambda: np.frombuffer(bytearray(13), np.uint8)[1:].view(np.int32),  # misaligned start
    ],
    ids=[
        "longdouble",
        "clongdouble",
        "str",
        "object",
        "datetime",
        "timedelta",
        "structured",
        "void",
        "swapped",
        "field",
        "as_strided",
        "misaligned",
    ],
)
def test_what_dlpack_refuses_or_decides_goes_through_dlpack(make):
    assert_same_as_dlpack(make())


def test_byte_swapped_arrays_are_refused_or_imported_exactly_as_through_dlpack():
    a = np.arange(6, dtype=np.float32).astype(">f4" if np.little_endian else "<f4")
    with pytest.raises(Exception) as fast:
        stridex.view(a)
    with pytest.raises(Exception) as slow:
        stridex.view(a.view(Sub))
    assert type(fast.value) is type(slow.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.array(2.5),  # 0-d
        lambda: np.zeros((0, 3), np.float32),  # empty
        lambda: np.zeros((3, 0), np.float32)[:, ::2],
        lambda: np.zeros((1, 1, 1), np.int16),
        lambda: np.zeros((5, 6), np.float64).T,  # F order
        lambda: np.broadcast_to(np.arange(3.0), (4, 3)),  # zero strides, read-only
        lambda: np.zeros([1] * 40, np.uint8),  # more axes than the inline storage
        lambda: np.arange(10.0)[::-3],  # negative strides
    ],
    ids=["0d", "empty", "empty-sliced", "ones", "F", "broadcast", "40-d", "negative"],
)
def test_layouts_match_dlpack(make):
    a = make()
    assert assert_same_as_dlpack(a)[0] == address(a)


def test_read_only_arrays_are_read_only_views():
    a = np.arange(6.0)
    a.flags.writeable = False
    fast = assert_same_as_dlpack(a)
    assert fast[5] is True and fast[6] == "readonly"
    b = np.arange(6.0)
    assert assert_same_as_dlpack(b)[6] == "writable"


def test_the_view_keeps_the_array_alive_and_aliases_it():
    a = np.zeros((4, 5), np.float32)
    alive = weakref.ref(a)
    v = stridex.view(a)
    assert v.owner is a
    host_array(v)[2, 3] = 7.0
    assert a[2, 3] == 7.0
    del a
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal(host_array(v)[2], [0, 0, 0, 7, 0])
    del v
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("where", ["python thread", "native thread"])
def test_the_array_is_released_from_any_thread(where):
    # The View's reference to the array is dropped with the GIL: taken by a native thread that has
    # none (a C++ consumer's own thread), used as it is by a Python thread that holds it.
    import threading

    import stridex_testing

    a = np.arange(8, dtype=np.float32)
    alive = weakref.ref(a)
    capsule = stridex.view(a).__dlpack__(max_version=(1, 0))  # the capsule's tensor owns the only View
    del a
    gc.collect()
    assert alive() is not None
    if where == "native thread":
        stridex_testing.delete_on_native_thread(capsule)
    else:
        # imported, then dropped (F821: before the `del capsule` below)
        t = threading.Thread(target=lambda: np.from_dlpack(Holder(capsule, (1, 0))))  # noqa: F821
        t.start()
        t.join()
    del capsule
    gc.collect()
    assert alive() is None


def test_numpy_reimports_through_the_view_alias():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    b = np.from_dlpack(stridex.view(a))
    b[1, 1] = -5
    assert a[1, 1] == -5 and b.ctypes.data == a.ctypes.data


class Holder:
    """A producer of one prepared capsule, for np.from_dlpack."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def test_memory_numpy_imported_from_another_device_keeps_that_device():
    # NumPy takes pinned (kDLCUDAHost) memory through DLPack and reports that device from then on;
    # the struct does not record it, so such arrays go through __dlpack__.
    source = np.arange(6, dtype=np.float32)
    capsule, _ = make_capsule(source, versioned=True, device=(3, 0))
    try:
        a = np.from_dlpack(Holder(capsule, (3, 0)))
    except (BufferError, RuntimeError, ValueError) as e:
        pytest.skip(f"this NumPy does not import kDLCUDAHost memory: {e}")
    assert a.__dlpack_device__() == (3, 0)
    view_of_a = outcome(lambda: stridex.view(a))
    assert view_of_a == outcome(lambda: stridex.view(a.view(Sub)))
    assert view_of_a[4] == "cuda_host"
    assert view_of_a[:7] == outcome(lambda: stridex.view(a.__dlpack__(max_version=(1, 0))))[:7]
    # A view of that array has the same outermost base, so it goes the same way.
    assert outcome(lambda: stridex.view(a[1:])) == outcome(lambda: stridex.view(a[1:].view(Sub)))


def test_numpy_arrays_from_dlpack_of_host_memory_still_match():
    a = np.from_dlpack(stridex.view(np.arange(5.0)))
    assert_same_as_dlpack(a)


@settings(max_examples=200, deadline=None)
@given(
    shape=st.lists(st.integers(0, 4), min_size=0, max_size=4),
    dtype=st.sampled_from(DTYPES),
    steps=st.lists(st.sampled_from([1, 2, -1, -2]), min_size=4, max_size=4),
    transpose=st.booleans(),
    readonly=st.booleans(),
)
def test_any_slicing_matches_dlpack(shape, dtype, steps, transpose, readonly):
    a = np.zeros(shape, dtype)
    a = a[tuple(slice(None, None, s) for s in steps[: len(shape)])] if shape else a
    if transpose:
        a = a.T
    a.flags.writeable = not readonly
    assert_same_as_dlpack(a)
