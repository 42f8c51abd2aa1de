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
from test_export_support import DLManagedTensorVersioned, cuda_device_count, optional, requires_cuda

CUDA = (2, 0)
H = 0x1234  # a stream handle
TensorOut = ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned))
ImportTensor = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p, ctypes.c_uint64, TensorOut,
                                 ctypes.POINTER(ctypes.c_ssize_t))
ViewFromTensor = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLManagedTensorVersioned), ctypes.c_ssize_t,
                                   ctypes.POINTER(ctypes.py_object))


class CasterApi(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("size", ctypes.c_uint64),
                ("import_tensor", ctypes.c_void_p), ("view_from_tensor", ctypes.c_void_p)]


# Private prototypes: ctypes.pythonapi's functions are shared, and other modules set their argtypes.
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))
NAME = b"stridex._stridex._caster_api"


def table() -> CasterApi:
    return CasterApi.from_address(_capsule_pointer(_caster_api, NAME))


def import_tensor(obj, stream=None, flags=0):
    """(tensor pointer, ready stream), or the exception the table set."""
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    ready = ctypes.c_ssize_t(7)
    keep = stream  # the table borrows it for the call
    rc = ImportTensor(table().import_tensor)(obj, None if keep is None else id(keep), flags, ctypes.byref(out),
                                             ctypes.byref(ready))
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


@pytest.mark.parametrize("bad,error,match", [
    (3, TypeError, "cannot import an object of type int"),
    (np.zeros(2, dtype="i4,f8"), BufferError, "DLPack"),  # structured elements: no DLPack dtype
])
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


@pytest.mark.parametrize("stream,error,match", [
    (0, ValueError, "stream 0 is forbidden"),
    (True, TypeError, "found bool"),
    ("legacy", TypeError, "stream must be None"),
])
def test_bad_streams_are_refused_as_stridex_view_refuses_them(stream, error, match):
    with pytest.raises(error, match=match):
        import_tensor(np.zeros(2), stream=stream)


def test_unknown_flags_are_refused():
    with pytest.raises(ValueError, match="unknown flags 4 "):
        import_tensor(np.zeros(2), flags=4)


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


@pytest.fixture
def path(ext, request):
    """The caster path to test with: the table ("api") or the Python fallback ("python")."""
    ext.use_caster_api(_caster_api if request.param == "api" else None)
    yield request.param
    assert ext.use_caster_api(_caster_api)


both_paths = pytest.mark.parametrize("path", ["api", "python"], indirect=True)


def test_the_casters_use_the_table(ext):
    assert ext.caster_path() == "caster API"


def fake_table(major=1, size=ctypes.sizeof(CasterApi), name=NAME):
    """A capsule of a table that no caster may call (its slots are NULL)."""
    t = CasterApi(major=major, minor=0, size=size)
    return _new_capsule(ctypes.addressof(t), name, None), t


@pytest.mark.parametrize("kind", ["major 2", "major 0", "too small", "another name"])
def test_a_table_that_does_not_fit_leaves_the_python_path(ext, kind):
    capsule, keep = {"major 2": lambda: fake_table(major=2), "major 0": lambda: fake_table(major=0),
                     "too small": lambda: fake_table(size=16),
                     "another name": lambda: fake_table(name=b"stridex._stridex._other")}[kind]()
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
