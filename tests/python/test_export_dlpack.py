"""__dlpack__ / __dlpack_device__ of stridex.View: capsule kinds, fields, flags, copies, streams,
argument errors, lifetime of the owner and of the deleter (docs/export.md, "__dlpack__")."""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import textwrap
import threading
import weakref

import ml_dtypes
import numpy as np
import pytest

import stridex
from export_support import (
    FLAG_IS_COPIED,
    FLAG_READ_ONLY,
    aligned,
    capsule_name,
    consume,
    managed_of,
    shape_of,
    strides_of,
    tensor_of,
    view_of,
)


class Owner:
    """A keep-alive whose death the tests can observe."""

    def __init__(self, arr):
        self.arr = arr


def owned_view(shape=(3, 4), dtype=np.float32, readonly=False):
    """A View whose only keep-alive is an Owner instance, plus a weakref to that Owner."""
    arr = aligned(shape, dtype)
    owner = Owner(arr)
    v = stridex.from_pointer(arr.ctypes.data, arr.shape, arr.dtype, owner=owner, readonly=readonly)
    ref = weakref.ref(owner)
    del owner
    return v, ref, arr


# ---- capsule kind ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_version", "name"),
    [
        (None, "dltensor"),
        ((0, 8), "dltensor"),
        ((1, 0), "dltensor_versioned"),
        ((1, 3), "dltensor_versioned"),
        ((1, 99), "dltensor_versioned"),
        ((2, 0), "dltensor_versioned"),
        ([1, 0], "dltensor_versioned"),
    ],
)
def test_capsule_kind_follows_max_version(max_version, name):
    v = view_of(aligned((2, 3), np.float32))
    capsule = v.__dlpack__() if max_version is None else v.__dlpack__(max_version=max_version)
    assert capsule_name(capsule) == name
    if name == "dltensor_versioned":
        m = managed_of(capsule)
        assert (m.version.major, m.version.minor) == (1, 3)
        assert m.flags == 0


def test_fields_of_the_tensor():
    arr = aligned((4, 6), np.float64)
    v = view_of(arr)[1:, ::-2]  # byte offset, negative strides
    for max_version in (None, (1, 3)):
        t = tensor_of(v.__dlpack__(max_version=max_version))
        assert t.data == v.ptr == arr[1:, ::-2].__array_interface__["data"][0]
        assert t.byte_offset == 0, "torch, Warp and cuda.core < 1.2 ignore byte_offset: send 0"
        assert shape_of(t) == (3, 3)
        assert strides_of(t) == (6, -2)
        assert (t.device.device_type, t.device.device_id) == (1, 0)
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 64, 1)


def test_strides_are_explicit_even_when_contiguous():
    t = tensor_of(view_of(aligned((2, 3, 4), np.int16)).__dlpack__(max_version=(1, 3)))
    assert strides_of(t) == (12, 4, 1), "DLPack >= 1.2 requires strides for ndim != 0"


def test_dlpack_device_matches_the_capsule():
    for arr in (aligned((3,), np.int8), aligned((), np.float32), aligned((0, 2), np.complex64)):
        v = view_of(arr)
        t = tensor_of(v.__dlpack__(max_version=(1, 0)))
        assert v.__dlpack_device__() == (t.device.device_type, t.device.device_id) == (1, 0)
        assert v.__dlpack_device__() == v.device.dlpack


# ---- read-only ------------------------------------------------------------------------------------


def test_read_only_view_sets_the_flag_and_numpy_honours_it():
    arr = aligned((5,), np.float32)
    v = view_of(arr, readonly=True)
    capsule = v.__dlpack__(max_version=(1, 0))
    assert managed_of(capsule).flags & FLAG_READ_ONLY
    out = np.from_dlpack(v)
    assert not out.flags.writeable
    assert np.shares_memory(out, arr)


def test_read_only_view_refuses_a_legacy_capsule():
    v = view_of(aligned((5,), np.float32), readonly=True)
    with pytest.raises(BufferError, match="read-only"):
        v.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        v.__dlpack__(max_version=(0, 8))


def test_read_only_view_may_leave_as_a_legacy_copy():
    arr = aligned((5,), np.float32)
    capsule = view_of(arr, readonly=True).__dlpack__(copy=True)
    assert capsule_name(capsule) == "dltensor"  # the copy is the consumer's, so writable
    assert tensor_of(capsule).data != arr.ctypes.data


# ---- copies and dl_device -------------------------------------------------------------------------


@pytest.mark.parametrize("dl_device", [None, (1, 0)])
def test_copy_true_gives_a_contiguous_copy_flagged_is_copied(dl_device):
    arr = aligned((4, 5), np.int32)
    v = view_of(arr)[::-1, 1::2]
    capsule = v.__dlpack__(max_version=(1, 3), copy=True, dl_device=dl_device)
    m = managed_of(capsule)
    assert m.flags & FLAG_IS_COPIED
    assert not m.flags & FLAG_READ_ONLY
    t = m.dl_tensor
    assert t.data != v.ptr
    assert strides_of(t) == (2, 1)
    assert t.data % 64 == 0
    np.testing.assert_array_equal(np.from_dlpack(v, copy=True), arr[::-1, 1::2])


def test_copy_of_a_read_only_view_is_writable():
    arr = aligned((3,), np.float32)
    out = np.from_dlpack(view_of(arr, readonly=True), copy=True)
    assert out.flags.writeable
    out[0] = 99
    assert arr[0] == 0


@pytest.mark.parametrize("copy", [None, False])
def test_own_device_needs_no_copy(copy):
    arr = aligned((3,), np.float32)
    v = view_of(arr)
    for dl_device in (None, (1, 0)):
        t = tensor_of(v.__dlpack__(max_version=(1, 0), dl_device=dl_device, copy=copy))
        assert t.data == arr.ctypes.data
    assert managed_of(v.__dlpack__(max_version=(1, 0), copy=copy)).flags == 0


def test_unservable_dl_device_is_a_buffer_error():
    v = view_of(aligned((3,), np.float32))
    if not stridex.cuda_available():  # with a GPU this is a copy (tests/python/test_copy.py)
        with pytest.raises(BufferError, match="copying cpu memory to cuda:0"):
            v.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    with pytest.raises(BufferError, match="copying cpu memory to cuda:4096"):
        v.__dlpack__(max_version=(1, 0), dl_device=(2, 4096))  # no such GPU
    with pytest.raises(BufferError, match="copy=False"):
        v.__dlpack__(max_version=(1, 0), dl_device=(2, 0), copy=False)
    with pytest.raises(BufferError):
        v.__dlpack__(max_version=(1, 0), dl_device=(99, 0))  # not a DLPack device type
    with pytest.raises(ValueError, match="device id must be >= 0"):  # a malformed device, as for device=
        v.__dlpack__(max_version=(1, 0), dl_device=(1, -1))


def test_numpy_from_dlpack_with_device_and_copy():
    arr = aligned((3,), np.float32)
    v = view_of(arr)
    assert np.shares_memory(np.from_dlpack(v, device="cpu"), arr)
    assert not np.shares_memory(np.from_dlpack(v, copy=True), arr)
    assert np.shares_memory(np.from_dlpack(v, copy=False), arr)


# ---- arguments ------------------------------------------------------------------------------------


def test_arguments_are_keyword_only():
    v = view_of(aligned((3,), np.float32))
    with pytest.raises(TypeError, match="positional"):
        v.__dlpack__(None)
    with pytest.raises(TypeError, match="positional"):
        v.__dlpack__(None, (1, 0))


def test_unknown_keyword_is_a_type_error():
    v = view_of(aligned((3,), np.float32))
    with pytest.raises(TypeError, match="unexpected keyword argument 'device'"):
        v.__dlpack__(device=(1, 0))
    # Names built at run time are not interned: still matched by text.
    assert capsule_name(v.__dlpack__(**{"".join(["max_", "version"]): (1, 0)})) == "dltensor_versioned"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"stream": 0}, ValueError, "stream 0 is forbidden"),
        ({"stream": -2}, ValueError, "stream must be"),
        ({"stream": 5}, BufferError, "take only stream=None"),
        ({"stream": 1}, BufferError, "take only stream=None"),
        ({"stream": 1.0}, TypeError, "stream must be an int"),
        ({"stream": True}, TypeError, "stream must be an int"),
        ({"max_version": 1}, TypeError, "max_version"),
        ({"max_version": (1,)}, TypeError, "max_version"),
        ({"max_version": ("1", "0")}, TypeError, "max_version"),
        ({"dl_device": [1, 0]}, TypeError, "dl_device must be a device"),
        ({"dl_device": (1, 0, 0)}, TypeError, "dl_device must be a .device_type, device_id. pair, found a tuple of 3"),
        ({"copy": 1}, TypeError, "copy must be"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    v = view_of(aligned((3,), np.float32))
    with pytest.raises(error, match=match):
        v.__dlpack__(**kwargs)


def test_cpu_view_takes_stream_none_and_minus_one():
    v = view_of(aligned((3,), np.float32))
    for stream in (None, -1):
        assert capsule_name(v.__dlpack__(stream=stream, max_version=(1, 0))) == "dltensor_versioned"


def test_int_enum_arguments_are_ints():
    import enum

    class DLDeviceType(enum.IntEnum):
        kDLCPU = 1

    v = view_of(aligned((3,), np.float32))
    assert tensor_of(v.__dlpack__(max_version=(1, 0), dl_device=(DLDeviceType.kDLCPU, 0))).data == v.ptr


# ---- dtypes and layouts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "code", "bits"),
    [
        (np.bool_, 6, 8),
        (np.int8, 0, 8),
        (np.uint16, 1, 16),
        (np.float16, 2, 16),
        (np.complex64, 5, 64),
        (np.complex128, 5, 128),
        (ml_dtypes.bfloat16, 4, 16),
        (ml_dtypes.float8_e4m3fn, 10, 8),
        (ml_dtypes.float8_e5m2, 12, 8),
    ],
)
def test_dtypes(dtype, code, bits):
    arr = aligned((4,), dtype)
    t = tensor_of(view_of(arr).__dlpack__(max_version=(1, 3)))
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (code, bits, 1)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.float16, np.float64, np.complex64, np.complex128])
def test_numpy_reads_every_numpy_dtype(dtype):
    arr = aligned((5,), dtype)
    np.testing.assert_array_equal(np.from_dlpack(view_of(arr)), arr)


def test_zero_dimensional():
    arr = aligned((), np.float64)
    arr[()] = 2.5
    v = view_of(arr)
    t = tensor_of(v.__dlpack__(max_version=(1, 3)))
    assert t.ndim == 0 and t.data == arr.ctypes.data
    out = np.from_dlpack(v)
    assert out.shape == () and out[()] == 2.5 and np.shares_memory(out, arr)


def test_empty():
    arr = aligned((0, 3), np.float32)
    v = view_of(arr)
    t = tensor_of(v.__dlpack__(max_version=(1, 3)))
    assert shape_of(t) == (0, 3)
    assert np.from_dlpack(v).shape == (0, 3)


def test_empty_with_null_pointer():
    v = stridex.from_pointer(0, (0,), "float32")
    assert np.from_dlpack(v).shape == (0,)


def test_negative_strides_and_offset():
    arr = aligned((4, 5), np.float32)
    v = view_of(arr)[::-1, 3:0:-2]
    out = np.from_dlpack(v)
    np.testing.assert_array_equal(out, arr[::-1, 3:0:-2])
    assert np.shares_memory(out, arr)
    out[0, 0] = -7
    assert arr[3, 3] == -7


def test_broadcast_zero_strides():
    arr = aligned((4,), np.int32)
    v = stridex.from_pointer(arr.ctypes.data, (3, 4), "int32", strides=(0, 1), owner=arr)
    assert strides_of(tensor_of(v.__dlpack__(max_version=(1, 3)))) == (0, 1)
    out = np.from_dlpack(v)
    assert out.strides == (0, 4)
    np.testing.assert_array_equal(out, np.broadcast_to(arr, (3, 4)))


def test_high_rank_heap_layout():
    arr = aligned((1, 2, 1, 2, 1, 2, 1, 2, 1, 2), np.uint8)  # 10 axes: past the inline 8
    v = view_of(arr)
    t = tensor_of(v.__dlpack__(max_version=(1, 3)))
    assert shape_of(t) == arr.shape
    np.testing.assert_array_equal(np.from_dlpack(v), arr)


# ---- lifetime -------------------------------------------------------------------------------------


def test_unconsumed_capsule_releases_the_owner_once():
    v, ref, _ = owned_view()
    capsule = v.__dlpack__(max_version=(1, 0))
    del v
    gc.collect()
    assert ref() is not None, "the capsule keeps the owner alive"
    del capsule
    gc.collect()
    assert ref() is None


def test_consumed_capsule_leaves_the_deleter_to_the_consumer():
    v, ref, _ = owned_view()
    capsule = v.__dlpack__(max_version=(1, 0))
    del v
    managed = consume(capsule)
    del capsule  # renamed used_*: the destructor must not run the deleter
    gc.collect()
    assert ref() is not None
    managed.contents.deleter(managed)  # the consumer's one call
    gc.collect()
    assert ref() is None


def test_consumed_legacy_capsule():
    v, ref, _ = owned_view()
    capsule = v.__dlpack__()
    del v
    managed = consume(capsule)
    del capsule
    gc.collect()
    assert ref() is not None
    managed.contents.deleter(managed)
    assert ref() is None


def test_consumer_array_keeps_the_owner_alive():
    v, ref, arr = owned_view()
    out = np.from_dlpack(v)
    del v
    gc.collect()
    assert ref() is not None
    out[0, 0] = 5
    assert arr[0, 0] == 5
    del out
    gc.collect()
    assert ref() is None


def test_capsule_in_a_reference_cycle_is_collected():
    v, ref, _ = owned_view()
    holder = {"capsule": v.__dlpack__(max_version=(1, 0))}
    holder["self"] = holder
    del v, holder
    gc.collect()
    assert ref() is None


def test_capsule_dying_during_an_exception_keeps_the_exception(monkeypatch):
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    v, ref, _ = owned_view()

    def fail_with_a_capsule():
        # F821: v is used before the `del v` below; F841: the capsule dies as the frame unwinds
        capsule = v.__dlpack__(max_version=(1, 0))  # noqa: F821, F841
        raise KeyError("the consumer's own error")

    with pytest.raises(KeyError, match="the consumer's own error"):
        fail_with_a_capsule()
    assert unraisable == []
    del v
    gc.collect()
    assert ref() is None


def test_many_exports_release_every_owner():
    refs = []
    for _ in range(200):  # more than the per-thread block cache holds
        v, ref, _ = owned_view((2,), np.int64)
        capsules = [v.__dlpack__(max_version=(1, 0)) for _ in range(3)] + [v.__dlpack__()]
        refs.append(ref)
        del v, capsules
    gc.collect()
    assert all(r() is None for r in refs)


# ---- threads and shutdown -------------------------------------------------------------------------


def test_deleter_runs_on_another_thread_without_the_gil():
    v, ref, _ = owned_view()
    managed = consume(v.__dlpack__(max_version=(1, 0)))
    del v
    # Through a CFUNCTYPE pointer, ctypes releases the GIL for the call: the deleter must take it
    # itself to drop the owner's reference.
    deleter = ctypes.cast(managed.contents.deleter, ctypes.CFUNCTYPE(None, ctypes.c_void_p))
    thread = threading.Thread(target=deleter, args=(ctypes.cast(managed, ctypes.c_void_p),))
    thread.start()
    thread.join()
    gc.collect()
    assert ref() is None


def test_exports_and_deleters_from_many_threads():
    arr = aligned((16,), np.float32)
    v = view_of(arr)
    errors = []

    def work():
        try:
            for _ in range(300):
                m = consume(v.__dlpack__(max_version=(1, 0)))
                ctypes.cast(m.contents.deleter, ctypes.CFUNCTYPE(None, ctypes.c_void_p))(
                    ctypes.cast(m, ctypes.c_void_p)
                )
                assert np.from_dlpack(v)[3] == 3
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_capsules_alive_at_interpreter_exit(tmp_path):
    # Capsules (consumed and not) outlive the interpreter's teardown; a thread runs deleters as it
    # exits. Deleters then leak their reference rather than take a GIL that is gone.
    script = tmp_path / "shutdown.py"
    script.write_text(
        textwrap.dedent("""
        import ctypes, sys, threading
        import numpy as np
        import stridex
        sys.path.insert(0, sys.argv[1])
        from export_support import consume, view_of
        arr = np.arange(10, dtype=np.float32)
        v = view_of(arr)
        KEEP = [v.__dlpack__(max_version=(1, 0)) for _ in range(50)] + [v.__dlpack__() for _ in range(50)]
        CONSUMED = [consume(v.__dlpack__(max_version=(1, 0))) for _ in range(200)]

        def late_deleters():
            for m in CONSUMED:
                f = ctypes.cast(m.contents.deleter, ctypes.CFUNCTYPE(None, ctypes.c_void_p))
                f(ctypes.cast(m, ctypes.c_void_p))

        threading.Thread(target=late_deleters, daemon=True).start()
        print("ok")
    """)
    )
    import os

    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(stridex.__path__[0]), os.environ.get("PYTHONPATH", "")])
    )
    result = subprocess.run(
        [sys.executable, str(script), os.path.dirname(__file__)], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# ---- any layout -----------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def strided_arrays(draw):
    """A NumPy view of a random buffer: 0 to 4 axes, any slicing (steps of both signs, empty
    ranges), an optional transpose and broadcast axis."""
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim)))
    dtype = draw(st.sampled_from([np.int8, np.int16, np.float32, np.complex128]))
    base = aligned(shape, dtype)
    index = tuple(
        slice(draw(st.integers(0, n)), None, draw(st.sampled_from([1, 2, -1, -2])))
        if draw(st.booleans())
        else slice(None)
        for n in shape
    )
    view = base[index]
    if ndim > 1 and draw(st.booleans()):
        view = view.transpose(draw(st.permutations(range(ndim))))
    if draw(st.booleans()):
        view = np.broadcast_to(view, (draw(st.integers(0, 3)),) + view.shape)
    return base, view


@settings(max_examples=300, deadline=None)
@given(strided_arrays())
def test_any_layout_exports_exactly(case):
    base, arr = case
    v = view_of(arr, readonly=not arr.flags.writeable)
    assert v.shape == arr.shape
    out = np.from_dlpack(v)
    assert out.shape == arr.shape
    np.testing.assert_array_equal(out, arr)
    if arr.size:
        assert out.__array_interface__["data"][0] == arr.__array_interface__["data"][0]
        assert out.strides == arr.strides
    copy = np.from_dlpack(v, copy=True)
    np.testing.assert_array_equal(copy, arr)
    assert copy.flags.c_contiguous and copy.flags.writeable
    assert not np.shares_memory(copy, base)
    np.testing.assert_array_equal(np.asarray(v), arr)
    np.testing.assert_array_equal(np.asarray(memoryview(v)), arr)
