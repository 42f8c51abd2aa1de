"""The caster API (include/stridex/python/caster_api.hpp): the versioned C table that
stridex._stridex._caster_api offers the nanobind and pybind11 casters, called here through ctypes
exactly as a caster calls it, and the casters' use of it (tests/python/ext: stridex_seed_ext):
the same answers as stridex.view() (fields, stream contract, exceptions), every tensor's deleter
run exactly once, and the Python path taken when the table is missing or of another version.
Runs without a GPU: "CUDA" arrays are host memory labelled cuda:0, orderings are recorded."""

from __future__ import annotations

import ctypes
import gc
import importlib
import sys

import numpy as np
import pytest

import stridex
import stridex_testing as _testing
from quirky_producers import Conformant, address, make_capsule
from stridex._stridex import _caster_api
from export_support import DLManagedTensorVersioned, DLTensor, cuda_device_count, optional, requires_cuda

CUDA = (2, 0)
H = 0x1234  # a stream handle
TensorOut = ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned))
ImportTensor = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.py_object, ctypes.c_void_p, ctypes.c_uint64, TensorOut, ctypes.POINTER(ctypes.c_ssize_t)
)
ViewFromTensor = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(DLManagedTensorVersioned), ctypes.c_ssize_t, ctypes.POINTER(ctypes.py_object)
)


class StridexArray(ctypes.Structure):
    _fields_ = [
        ("dims", ctypes.POINTER(ctypes.c_int64)),
        ("max_ndim", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("tensor", DLTensor),
        ("flags", ctypes.c_uint64),
        ("stream", ctypes.c_ssize_t),
        ("release", ctypes.CFUNCTYPE(None, ctypes.c_void_p)),
        ("context", ctypes.c_void_p),
    ]


ImportArray = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.py_object, ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(StridexArray)
)


class CasterApi(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("size", ctypes.c_uint64),
        ("import_tensor", ctypes.c_void_p),
        ("view_from_tensor", ctypes.c_void_p),
        ("import_array", ctypes.c_void_p),
    ]


MINOR0_SIZE = CasterApi.import_array.offset  # a minor-0 table ends before import_array


# Private prototypes: ctypes.pythonapi's functions are shared, and other modules set their argtypes.
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)
_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi)
)
NAME = b"stridex._stridex._caster_api"


def table() -> CasterApi:
    return CasterApi.from_address(_capsule_pointer(_caster_api, NAME))


def import_tensor(obj, stream=None, flags=0):
    """(tensor pointer, ready stream), or the exception the table set."""
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    ready = ctypes.c_ssize_t(7)
    keep = stream  # the table borrows it for the call
    rc = ImportTensor(table().import_tensor)(
        obj, None if keep is None else id(keep), flags, ctypes.byref(out), ctypes.byref(ready)
    )
    assert rc == 0
    return out, ready.value


def release(tensor):
    ctypes.cast(tensor.contents.deleter, ctypes.CFUNCTYPE(None, ctypes.c_void_p))(ctypes.cast(tensor, ctypes.c_void_p))


@pytest.fixture(autouse=True)
def _every_test_records_orders(recorded_orders):
    yield


# ---- the table itself ---------------------------------------------------------------------------


def test_the_table_says_its_version_and_size():
    t = table()
    assert (t.major, t.size) == (1, ctypes.sizeof(CasterApi))
    assert t.import_tensor and t.view_from_tensor


def test_a_numpy_array_arrives_as_stridex_view_sees_it():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-2]
    a.flags.writeable = False
    before = sys.getrefcount(a)
    t, ready = import_tensor(a)
    v = stridex.view(a)
    d = t.contents.dl_tensor
    assert d.data == v.ptr and d.byte_offset == 0
    assert [d.shape[i] for i in range(d.ndim)] == list(v.shape)
    assert [d.strides[i] for i in range(d.ndim)] == list(v.strides)
    assert (d.dtype.code, d.dtype.bits, d.dtype.lanes) == (2, 32, 1)
    assert (d.device.device_type, d.device.device_id) == (1, 0)
    assert t.contents.flags & 1  # READ_ONLY
    assert t.contents.version.major == 1
    assert ready == -1  # host memory: nothing pending
    del v
    assert sys.getrefcount(a) == before + 1  # the tensor keeps the array alive
    release(t)
    assert sys.getrefcount(a) == before


def test_a_stridex_view_is_exported_without_a_new_import():
    a = np.arange(4.0)
    v = stridex.view(a)[1:]
    t, ready = import_tensor(v)
    assert t.contents.dl_tensor.data == v.ptr and ready == -1
    release(t)


def test_the_deleter_of_a_consumed_capsule_runs_exactly_once():
    a = np.arange(3.0)
    capsule, counter = make_capsule(a)
    t, _ = import_tensor(capsule)
    assert t.contents.dl_tensor.data == address(a)
    del capsule  # consumed: renamed used_*, so its destructor leaves the tensor alone
    gc.collect()
    assert counter.calls == 0
    release(t)
    assert counter.calls == 1


@pytest.mark.parametrize(
    "bad,error,match",
    [
        (3, TypeError, "cannot import an object of type int"),
        (np.zeros(2, dtype="i4,f8"), BufferError, "DLPack"),  # structured elements: no DLPack dtype
    ],
)
def test_errors_are_stridex_views(bad, error, match):
    with pytest.raises(error, match=match) as ours:
        import_tensor(bad)
    if error is TypeError:  # word for word what stridex.view says
        with pytest.raises(error) as theirs:
            stridex.view(bad)
        assert str(ours.value) == str(theirs.value)


def test_a_producers_failure_is_reported_as_stridex_view_reports_it():
    class Broken(Conformant):
        def __dlpack__(self, **kwargs):
            raise KeyError("the producer's own error")

    with pytest.raises(BufferError, match="the producer's own error") as ours:
        import_tensor(Broken(np.zeros(2)))
    with pytest.raises(BufferError) as theirs:
        stridex.view(Broken(np.zeros(2)))
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "stream,error,match",
    [
        (0, ValueError, "stream 0 is forbidden"),
        (True, TypeError, "found bool"),
        ("legacy", TypeError, "stream must be None"),
    ],
)
def test_bad_streams_are_refused_as_stridex_view_refuses_them(stream, error, match):
    with pytest.raises(error, match=match):
        import_tensor(np.zeros(2), stream=stream)


def test_unknown_flags_are_refused():
    with pytest.raises(ValueError, match="unknown flags 4 "):
        import_tensor(np.zeros(2), flags=4)


def test_the_caller_stream_flag_asks_the_types_exchange_api():
    # kImportCallerStream: ordered on the stream the type's exchange API names for the array's GPU.
    class Sub(_testing.ExchangeProducer):
        def __dlpack_device__(self):
            return CUDA

    _testing.set_work_stream(H)
    try:
        t, ready = import_tensor(Sub(np.zeros(3, np.float32), device=CUDA), flags=1)
        assert ready == H
        release(t)
    finally:
        _testing.set_work_stream(0)
    t, ready = import_tensor(np.zeros(2), flags=1)  # no exchange API, host memory: nothing pending
    assert ready == -1
    release(t)
    with pytest.raises(ValueError, match="takes no stream"):
        import_tensor(np.zeros(2), stream=1, flags=1)


def test_null_arguments_are_refused():
    with pytest.raises(ValueError, match="NULL argument"):
        ImportTensor(table().import_tensor)(np.zeros(2), None, 0, None, None)


@pytest.mark.parametrize("stream", [None, stridex.NO_SYNC, 1, 2, H])
def test_the_stream_contract_is_stridex_views(stream):
    p = Conformant(np.zeros(3), device=CUDA)
    expected = stridex.view(p, stream=stream).stream
    expected_orders = _testing.captured_orders()
    t, ready = import_tensor(p, stream=stream)
    assert ready == (-1 if expected is None else expected)
    assert _testing.captured_orders() == expected_orders
    assert p.calls[0] == p.calls[1]  # the producer was asked the same
    release(t)
    gc.collect()
    assert [c.calls for c in p.counters] == [1, 1]


def test_a_pending_stridex_view_is_ordered_like_stridex_view_orders_it():
    v = stridex.view(Conformant(np.zeros(3), device=CUDA), stream=H)
    _testing.captured_orders()
    t, ready = import_tensor(v)
    assert ready == 1 and _testing.captured_orders() == [(H, 1, "cuda:0")]  # legacy stream after H
    release(t)
    t, ready = import_tensor(v, stream=stridex.NO_SYNC)
    assert ready == H and _testing.captured_orders() == []
    release(t)


# ---- import_array (minor 1): the same import as a C description and a release callback --------


def import_array(obj, stream=None, flags=0, max_ndim=64):
    """The filled StridexArray (its dims buffer attached), or the exception the table set."""
    dims = (ctypes.c_int64 * max(2 * max_ndim, 1))()
    out = StridexArray(dims=dims, max_ndim=max_ndim)
    out._dims = dims  # kept alive with the struct
    keep = stream  # the table borrows it for the call
    rc = ImportArray(table().import_array)(obj, None if keep is None else id(keep), flags, ctypes.byref(out))
    assert rc == 0
    return out


def release_array(a):
    if a.release:
        a.release(a.context)


def test_the_table_has_import_array_since_minor_1():
    t = table()
    assert t.minor >= 1 and t.size >= MINOR0_SIZE + ctypes.sizeof(ctypes.c_void_p) and t.import_array


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-2],
        lambda: np.arange(6.0).reshape(2, 3).T,
        lambda: np.float64(2.5).reshape(()),
        lambda: np.zeros((0, 3), dtype=np.int16),
        lambda: stridex.view(np.arange(8, dtype=np.uint8))[1::3],
    ],
    ids=["strided", "transposed", "0-d", "empty", "stridex.View"],
)
def test_import_array_describes_what_import_tensor_exports(make):
    x = make()
    a = import_array(x)
    t, ready = import_tensor(x)
    d, e = a.tensor, t.contents.dl_tensor
    assert (d.data, d.ndim, d.byte_offset) == (e.data, e.ndim, 0)
    assert [d.shape[i] for i in range(d.ndim)] == [e.shape[i] for i in range(e.ndim)]
    assert [d.strides[i] for i in range(d.ndim)] == [e.strides[i] for i in range(e.ndim)]
    assert (d.dtype.code, d.dtype.bits, d.dtype.lanes) == (e.dtype.code, e.dtype.bits, e.dtype.lanes)
    assert (d.device.device_type, d.device.device_id) == (e.device.device_type, e.device.device_id)
    assert (a.flags, a.stream) == (t.contents.flags & 0b101, ready)  # READ_ONLY and padded, as exported
    if d.ndim:
        assert ctypes.addressof(d.shape.contents) == ctypes.addressof(a._dims)  # written into the caller's dims
    release(t)
    release_array(a)


def test_import_array_flags_read_only_as_the_export_does():
    a = np.arange(3.0)
    a.flags.writeable = False
    assert import_array(a).flags & 1
    release_array(import_array(np.arange(3.0)))


def test_import_array_hands_over_the_keep_alive_and_release_runs_it_once():
    a = np.arange(5, dtype=np.float32)
    before = sys.getrefcount(a)
    out = import_array(a)
    assert out.release and sys.getrefcount(a) == before + 1  # the producer's tensor keeps `a`
    release_array(out)
    assert sys.getrefcount(a) == before
    capsule, counter = make_capsule(np.arange(3.0))
    out = import_array(capsule)
    del capsule
    gc.collect()
    assert counter.calls == 0
    release_array(out)
    assert counter.calls == 1


def test_import_array_of_a_stridex_view_shares_its_owner():
    a = np.arange(4.0)
    before = sys.getrefcount(a)
    v = stridex.view(a)
    out = import_array(v)
    assert out.tensor.data == v.ptr
    del v
    gc.collect()
    assert sys.getrefcount(a) == before + 1  # still held, by the owner reference handed over
    release_array(out)
    assert sys.getrefcount(a) == before


@pytest.mark.parametrize("bad,error", [(3, TypeError), (np.zeros(2, dtype="i4,f8"), BufferError)])
def test_import_array_refuses_what_import_tensor_refuses(bad, error):
    with pytest.raises(error) as ours:
        import_array(bad)
    with pytest.raises(error) as theirs:
        import_tensor(bad)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("stream", [None, stridex.NO_SYNC, 1, 2, H])
def test_import_array_keeps_the_stream_contract(stream):
    p = Conformant(np.zeros(3), device=CUDA)
    expected = stridex.view(p, stream=stream).stream
    expected_orders = _testing.captured_orders()
    out = import_array(p, stream=stream)
    assert out.stream == (-1 if expected is None else expected)
    assert _testing.captured_orders() == expected_orders
    release_array(out)
    gc.collect()
    assert [c.calls for c in p.counters] == [1, 1]


def test_import_array_refuses_more_axes_than_the_caller_takes_and_releases_them():
    capsule, counter = make_capsule(np.zeros((1, 2, 3)))
    out = StridexArray(dims=(ctypes.c_int64 * 4)(), max_ndim=2)
    with pytest.raises(BufferError, match="at most 2 axes, found 3"):
        ImportArray(table().import_array)(capsule, None, 0, ctypes.byref(out))
    assert not out.release
    del capsule
    gc.collect()
    assert counter.calls == 1  # the import was released, not leaked
    release_array(import_array(np.float32(1.0).reshape(()), max_ndim=0))  # 0-d needs no dims


@pytest.mark.parametrize(
    "case,match",
    [
        ("NULL out", "NULL argument"),
        ("NULL dims", "NULL dims for max_ndim 2"),
        ("negative max_ndim", "max_ndim must be >= 0, found -1"),
        ("flags", "unknown flags 2 "),  # 1 is kImportCallerStream (minor 2)
    ],
)
def test_import_array_refuses_bad_arguments(case, match):
    fn = ImportArray(table().import_array)
    a = np.zeros(2)
    before = sys.getrefcount(a)
    out = StridexArray(dims=(ctypes.c_int64 * 4)(), max_ndim=2)
    with pytest.raises(ValueError, match=match):
        if case == "NULL out":
            fn(a, None, 0, None)
        elif case == "NULL dims":
            fn(a, None, 0, ctypes.byref(StridexArray(max_ndim=2)))
        elif case == "negative max_ndim":
            fn(a, None, 0, ctypes.byref(StridexArray(max_ndim=-1)))
        else:
            fn(a, None, 2, ctypes.byref(out))
    assert not out.release and sys.getrefcount(a) == before


def test_import_array_refuses_a_null_object():
    fn = ctypes.PYFUNCTYPE(
        ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(StridexArray)
    )(table().import_array)
    out = StridexArray(dims=(ctypes.c_int64 * 2)(), max_ndim=1)
    with pytest.raises(ValueError, match="NULL argument"):
        fn(None, None, 0, ctypes.byref(out))


# ---- view_from_tensor: the return path ------------------------------------------------------------


def view_from(tensor, stream):
    out = ctypes.py_object()
    assert ViewFromTensor(table().view_from_tensor)(tensor, stream, ctypes.byref(out)) == 0
    view = out.value
    _decref(view)  # the reference the table wrote, which ctypes does not own
    return view


_decref = ctypes.pythonapi.Py_DecRef
_decref.argtypes = [ctypes.py_object]


def test_view_from_tensor_owns_the_tensor_and_carries_the_stream():
    a = np.arange(3.0)
    capsule, counter = make_capsule(a, device=CUDA)
    t, _ = import_tensor(capsule, stream=stridex.NO_SYNC)
    v = view_from(t, H)
    assert isinstance(v, stridex.View) and v.ptr == address(a) and v.stream == H and v.device == "cuda:0"
    assert view_from(import_tensor(np.zeros(1))[0], -1).stream is None
    del v
    gc.collect()
    assert counter.calls == 1


@pytest.mark.parametrize("stream", [0, -2])
def test_view_from_tensor_refuses_a_bad_stream_and_still_runs_the_deleter(stream):
    capsule, counter = make_capsule(np.arange(3.0))
    t, _ = import_tensor(capsule)
    with pytest.raises(ValueError, match="stream"):
        view_from(t, stream)
    assert counter.calls == 1


# ---- the casters: the table when it fits, the Python path otherwise --------------------------------


@pytest.fixture(scope="module")
def ext():
    return importlib.import_module("stridex_seed_ext")


def minor0_table(import_array_slot=None, size=MINOR0_SIZE):
    """A capsule of the real table as a minor-0 wheel has it (import_tensor and view_from_tensor only),
    and what keeps it alive. `import_array_slot` lies beyond `size`: no caster may read it."""
    real = table()
    t = CasterApi(
        major=1,
        minor=0,
        size=size,
        import_tensor=real.import_tensor,
        view_from_tensor=real.view_from_tensor,
        import_array=import_array_slot,
    )
    return _new_capsule(ctypes.addressof(t), NAME, None), t


@pytest.fixture
def path(ext, request):
    """The caster path to test with: the table's import_array ("api"), a minor-0 table's
    import_tensor ("api minor 0") or the Python fallback ("python")."""
    keep = None
    if request.param == "api minor 0":
        capsule, keep = minor0_table(import_array_slot=table().import_array)
        assert ext.use_caster_api(capsule) and ext.caster_slot() == "import_tensor"
    else:
        ext.use_caster_api(_caster_api if request.param == "api" else None)
    yield request.param
    assert ext.use_caster_api(_caster_api)
    del keep


both_paths = pytest.mark.parametrize("path", ["api", "api minor 0", "python"], indirect=True)


def test_the_casters_use_the_table(ext):
    assert ext.caster_path() == "caster API"
    assert ext.caster_slot() == "import_array"


def test_a_table_without_import_array_keeps_to_import_tensor(ext):
    capsule, keep = minor0_table(size=ctypes.sizeof(CasterApi))  # minor-1 size, NULL import_array
    try:
        assert ext.use_caster_api(capsule) and ext.caster_slot() == "import_tensor"
        a = np.arange(4, dtype=np.float32)
        assert ext.describe(a)["ptr"] == address(a) and ext.sum(a) == 6
    finally:
        assert ext.use_caster_api(_caster_api)
    del keep


def fake_table(major=1, size=ctypes.sizeof(CasterApi), name=NAME):
    """A capsule of a table that no caster may call (its slots are NULL)."""
    t = CasterApi(major=major, minor=0, size=size)
    return _new_capsule(ctypes.addressof(t), name, None), t


@pytest.mark.parametrize("kind", ["major 2", "major 0", "too small", "another name"])
def test_a_table_that_does_not_fit_leaves_the_python_path(ext, kind):
    capsule, keep = {
        "major 2": lambda: fake_table(major=2),
        "major 0": lambda: fake_table(major=0),
        "too small": lambda: fake_table(size=16),
        "another name": lambda: fake_table(name=b"stridex._stridex._other"),
    }[kind]()
    try:
        assert ext.use_caster_api(capsule) is False
        assert ext.caster_path() == "Python"
        a = np.arange(4, dtype=np.float32)
        assert ext.describe(a)["ptr"] == address(a) and ext.sum(a) == 6
    finally:
        assert ext.use_caster_api(_caster_api)
    del keep


@both_paths
def test_both_paths_give_the_same_view(ext, path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    ro = a.copy()
    ro.flags.writeable = False
    for x, expected in [
        (a[:, ::-3], dict(ptr=address(a) + 12, shape=[3, 2], strides=[4, -3], readonly=False, stream=-1)),
        (ro, dict(ptr=address(ro), shape=[3, 4], strides=[4, 1], readonly=True, stream=-1)),
        (stridex.view(a)[1], dict(ptr=address(a) + 16, shape=[4], strides=[1], readonly=False, stream=-1)),
    ]:
        d = ext.describe(x)
        assert {k: d[k] for k in expected} == expected
        assert (d["device_type"], d["dtype"]) == (1, "float32")


@both_paths
def test_both_paths_keep_the_stream_contract(ext, path):
    p = Conformant(np.zeros(3, np.float32), device=CUDA)
    assert ext.describe(p)["stream"] == 1  # the legacy default stream, ordered by stridex.view's rules
    pending = stridex.view(Conformant(np.zeros(3, np.float32), device=CUDA), stream=H)
    _testing.captured_orders()
    assert ext.describe(pending)["stream"] == 1
    assert _testing.captured_orders() == [(H, 1, "cuda:0")]


@both_paths
def test_both_paths_run_each_deleter_exactly_once(ext, path):
    capsule, counter = make_capsule(np.arange(4, dtype=np.float32))
    assert ext.sum(capsule) == 6
    del capsule
    gc.collect()
    assert counter.calls == 1


@both_paths
def test_both_paths_refuse_what_stridex_view_refuses(ext, path):
    with pytest.raises(TypeError, match="incompatible function arguments"):
        ext.sum("not an array")
    with pytest.raises(TypeError, match="incompatible function arguments"):
        ext.sum(np.zeros(2, dtype="i4,f8"))  # no DLPack dtype: not convertible


@both_paths
def test_both_paths_return_the_same_view(ext, path):
    a = np.arange(6, dtype=np.float32)
    v = stridex.view(a)[::-2]
    out = ext.identity(v)
    assert out is not v and isinstance(out, stridex.View)
    assert (out.ptr, out.shape, out.strides, out.stream, out.readonly) == (v.ptr, (3,), (-2,), None, False)
    # (A returned View's stream goes along through view_from_tensor, tested above; on a GPU,
    # test_export_ext.py's gpu_pending checks it end to end.)


# (Not the Python path: without a CUDA driver, its export of a View pending on a stream handle
# cannot run, whatever the caller stream.)
@pytest.mark.parametrize("path", ["api", "api minor 0"], indirect=True)
def test_caller_stream_asks_each_call_and_follows_a_changed_type(ext, path):
    class Sub(_testing.ExchangeProducer):  # the exchange API's current_work_stream answers H
        def __dlpack_device__(self):
            return CUDA

    p = Sub(np.zeros(3, np.float32), device=CUDA)
    _testing.set_work_stream(H)
    try:
        counts = [_testing.exchange_calls()[1]]
        for _ in range(3):
            assert ext.caller_stream(p) == H
            counts.append(_testing.exchange_calls()[1])
        steps = {b - a for a, b in zip(counts, counts[1:])}
        assert len(steps) == 1 and steps.pop() >= 1  # the current stream is asked on every call, alike
        assert ext.caller_stream(np.zeros(2, np.float32)) == -1  # host memory: nothing to order
        assert ext.caller_stream(Conformant(np.zeros(2, np.float32), device=CUDA)) == 1  # no API: legacy
        Sub.__dlpack_c_exchange_api__ = None  # the type changed: its API is looked up again, and gone
        calls = _testing.exchange_calls()[1]
        try:
            ext.caller_stream(p)
        except TypeError:
            pass  # (without the exchange API this producer may offer nothing else)
        assert _testing.exchange_calls()[1] == calls
    finally:
        _testing.set_work_stream(0)


class ForgedExchangeApi(Conformant):
    """A Python class that points the DLPack 1.2 exchange API attribute at an arbitrary address."""

    __c_dlpack_exchange_api__ = 12345


@both_paths
def test_caller_stream_never_follows_an_exchange_api_address_a_class_made_up(ext, path):
    # The address is checked by the wheel before use (an invalid one is no API at all), and the
    # casters themselves read only the 1.3 capsule: the default contract, no crash.
    p = ForgedExchangeApi(np.zeros(3, np.float32), device=CUDA)
    assert stridex.view(p).stream == 1
    if path != "python":  # (the Python path needs a CUDA driver to export a View pending on a stream)
        assert ext.caller_stream(p) == 1


# ---- on a GPU: real CUDA producers through both paths ---------------------------------------------


def _cuda_inputs():
    out = []
    torch = optional("torch")
    if torch is not None and torch.cuda.is_available():
        out.append(("torch", lambda: torch.arange(5, dtype=torch.float32, device="cuda")))
    cupy = optional("cupy")
    if cupy is not None and cuda_device_count() > 0:
        out.append(("cupy", lambda: cupy.arange(5, dtype=cupy.float32)))
    return out


@requires_cuda
@both_paths
@pytest.mark.parametrize("make", [m for _, m in _cuda_inputs()], ids=[n for n, _ in _cuda_inputs()])
def test_cuda_arrays_arrive_the_same_on_both_paths(ext, path, make):
    _testing.capture_orders(False)  # real orderings on a real driver
    x = make()
    d = ext.describe(x)
    v = stridex.view(x)
    assert (d["ptr"], d["device_type"], d["device_id"], d["stream"]) == (v.ptr, 2, 0, 1)  # legacy stream
    assert ext.sum(x) == 10.0
