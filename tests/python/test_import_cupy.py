"""cupy.ndarray read from CuPy's own description (src/extension/import/import_cupy.cpp) against the
__dlpack__ path it replaces: the View must be the same, field by field, and the streams ordered
alike. The oracle is the same memory viewed as a cupy.ndarray subclass, which stridex imports
through __dlpack__ (a subclass may override anything, so it never takes the struct path).

Both ways of reading are covered: CuPy 13.4-14.2's object layout (the GPU image has 14.2) and
CuPy >= 14.3's public C API, driven by a stand-in capsule from stridex_testing over the same arrays.
Impostors (a Python class calling itself cupy.ndarray) run without a GPU."""

from __future__ import annotations

import importlib
import sys
import types

import numpy as np
import pytest

import stridex
from conftest import cuda_device_count, needs_shortcut, shortcut_on

_internals = stridex._stridex._internals

try:
    import cupy
except Exception:  # noqa: BLE001 - not installed, or no CUDA libraries for it
    cupy = None

needs_cupy = pytest.mark.skipif(cupy is None or cuda_device_count() == 0, reason="needs CuPy and a CUDA device")
# What only the struct path does (its stream semantics are the exchange API's, not __dlpack__'s):
# CuPy's version picks one of the two shortcuts, so both must be on.
needs_struct = needs_shortcut("cupy_c_api", "cupy_layout")

LEGACY = 1


# ---- without a GPU: what may pass for cupy.ndarray -------------------------------------------------


@pytest.fixture
def fake_cupy(monkeypatch):
    """A module named cupy (version 14.2.0, so the layout path would apply) whose ndarray is a
    Python class with __dlpack__; the real CuPy, if loaded, is hidden for the test."""
    module = types.ModuleType("cupy")
    module.__version__ = "14.2.0"
    for name in [n for n in sys.modules if n == "cupy" or n.startswith(("cupy.", "cupy_backends"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "cupy", module)
    yield module
    _internals.clear_type_cache()


def _impostor(base=object, dlpack=None):
    host = np.arange(6, dtype=np.float32)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return host.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return (1, 0)

    return type(
        "ndarray",
        (base,),
        {"__module__": "cupy", "__dlpack__": dlpack or __dlpack__, "__dlpack_device__": __dlpack_device__},
    ), host


def test_a_python_class_named_cupy_ndarray_is_not_read_as_cupys_struct(fake_cupy):
    fake, host = _impostor()
    fake_cupy.ndarray = fake
    assert _internals.producer_for(fake) == "cupy"  # the quirk row applies ...
    assert _internals.array_struct(fake) is None  # ... but no struct is read from it
    v = stridex.view(fake())  # through __dlpack__
    assert (v.ptr, v.shape) == (host.ctypes.data, (6,))


def test_a_borrowed_c_method_does_not_make_a_layout(fake_cupy):
    # __dlpack__ is a C method here, but of numpy.ndarray: not CuPy's base, not its struct.
    fake, _ = _impostor(dlpack=np.ndarray.__dlpack__)
    fake_cupy.ndarray = fake
    assert _internals.array_struct(fake) is None


def test_a_forged_api_capsule_name_is_not_taken(fake_cupy):
    import stridex_testing

    fake, _ = _impostor()
    fake_cupy.ndarray = fake
    fake_cupy._public_c_api = object()  # not a capsule
    assert _internals.array_struct(fake) is None
    # A capsule of another name is no API either, and a version below 14.3 none of 14.3's.
    fake_cupy._public_c_api = stridex_testing.make_capsule(np.zeros(1))[0]
    assert _internals.array_struct(fake) is None
    fake_cupy._public_c_api = stridex_testing.fake_cupy_api(fake, major=14, minor=2)
    assert _internals.array_struct(fake) is None


def test_a_rocm_cupy_or_one_without_its_modules_is_not_read(fake_cupy):
    import stridex_testing

    fake, _ = _impostor()
    fake_cupy.ndarray = fake
    fake_cupy._public_c_api = stridex_testing.fake_cupy_api(fake)
    assert _internals.array_struct(fake) is None  # cupy_backends is not loaded: is_hip unknown
    runtime = types.ModuleType("cupy_backends.cuda.api.runtime")
    runtime.is_hip = True
    sys.modules["cupy_backends.cuda.api.runtime"] = runtime
    try:
        assert _internals.array_struct(fake) is None  # ROCm: __dlpack__ says kDLROCM, the struct cannot
        runtime.is_hip = False
        # a 14.3 API for exactly this type: taken (while the shortcut is on)
        assert _internals.array_struct(fake) == ("cupy" if shortcut_on("cupy_c_api") else None)
        fake_cupy._public_c_api = stridex_testing.fake_cupy_api(type("other", (), {}))
        assert _internals.array_struct(fake) is None  # an API for another type is not this type's
    finally:
        del sys.modules["cupy_backends.cuda.api.runtime"]


# ---- on a GPU: the struct path against __dlpack__ --------------------------------------------------


if cupy is not None:

    class Sub(cupy.ndarray):
        """Imported through __dlpack__: the oracle. Its module keeps it on CuPy's quirk row, whose
        repair of cupy#10172 makes __dlpack__'s negative strides true ones."""

    Sub.__module__ = "cupy.stridex_oracle"
else:  # pragma: no cover
    Sub = None


def outcome(make):
    """What an import gives: the View's fields, or the exception's type."""
    try:
        v = make()
    except Exception as e:  # noqa: BLE001 - the type is the outcome
        return (type(e).__name__,)
    return (v.ptr, v.shape, v.strides, str(v.dtype), str(v.device), v.readonly, v.stream)


def same_as_dlpack(x, **kw):
    assert type(x) is cupy.ndarray
    fast = outcome(lambda: stridex.view(x, **kw))
    slow = outcome(lambda: stridex.view(x.view(Sub), **kw))
    assert fast == slow
    return fast


@needs_cupy
@needs_struct
def test_cupy_ndarray_is_read_from_its_struct_and_subclasses_are_not():
    assert _internals.array_struct(cupy.ndarray) == "cupy"
    assert _internals.array_struct(Sub) is None
    assert _internals.producer_for(Sub) == "cupy"  # the oracle's __dlpack__ is repaired like CuPy's


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
    "int_",
    "longlong",
    "ulonglong",
]


@needs_cupy
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_as_dlpack_gives_it(dtype):
    x = cupy.zeros((2, 3), dtype=dtype)
    assert same_as_dlpack(x)[3] == str(stridex.view(np.zeros(1, dtype)).dtype)


@needs_cupy
@pytest.mark.parametrize(
    "make",
    [
        lambda: cupy.float32(3) * cupy.ones(()),  # 0-d
        lambda: cupy.arange(24, dtype=cupy.float32).reshape(2, 3, 4),
        lambda: cupy.arange(24, dtype=cupy.float64).reshape(4, 6).T,  # F order
        lambda: cupy.arange(24, dtype=cupy.int16).reshape(4, 6)[1:, ::2],
        lambda: cupy.arange(24, dtype=cupy.float32)[::-3],  # negative strides (cupy#10172 on __dlpack__)
        lambda: cupy.arange(24, dtype=cupy.complex128).reshape(4, 6)[::-1, ::-2],
        lambda: cupy.broadcast_to(cupy.arange(3, dtype=cupy.int32), (4, 3)),  # zero strides
        lambda: cupy.zeros((3, 0, 2), dtype=cupy.float32),  # empty
        lambda: cupy.zeros((1,) * 32, dtype=cupy.uint8),
    ],
    ids=["0d", "3d", "F", "slice", "negative", "negative2d", "broadcast", "empty", "32 axes"],
)
def test_layouts_as_dlpack_gives_them(make):
    x = make()
    fast = same_as_dlpack(x)
    assert fast[1] == x.shape
    if x.size:
        assert fast[2] == tuple(s // x.itemsize for s in x.strides)  # the true strides


@needs_cupy
def test_random_slicings_as_dlpack_gives_them():
    rng = np.random.default_rng(7)
    base = cupy.arange(6 * 7 * 8, dtype=cupy.float32).reshape(6, 7, 8)
    for _ in range(100):
        index = tuple(slice(int(rng.integers(0, n)), None, int(rng.choice([-3, -2, -1, 1, 2, 3]))) for n in base.shape)
        x = base[index]
        if rng.integers(2):
            x = x.transpose(tuple(rng.permutation(3)))
        same_as_dlpack(x)


@needs_cupy
def test_managed_memory_is_cuda_managed_as_dlpack_says():
    memory = cupy.cuda.malloc_managed(64)
    x = cupy.ndarray((4, 4), cupy.float32, memptr=memory)
    assert same_as_dlpack(x)[4] == "cuda_managed"
    assert str(stridex.view(cupy.ones(2)).device) == "cuda:0"


@needs_cupy
@needs_shortcut("cupy_layout")
def test_strides_that_are_not_whole_elements_are_refused():
    # __dlpack__ would floor-divide them (6 // 4 = 1 element) and describe other memory. Only the
    # array's own byte strides show it: with cupy_layout off, stridex sees what CuPy's __dlpack__
    # says (docs/import.md, "Framework shortcuts").
    base = cupy.zeros(16, dtype=cupy.float32)
    x = cupy.ndarray((3,), cupy.float32, memptr=base.data, strides=(6,))
    with pytest.raises(BufferError, match="not a multiple of the item size"):
        stridex.view(x)


@needs_cupy
def test_the_view_aliases_and_keeps_the_array_alive(collect):
    torch = pytest.importorskip("torch")
    x = cupy.arange(6, dtype=cupy.float32)
    before = sys.getrefcount(x)
    v = stridex.view(x)
    assert sys.getrefcount(x) == before + 2  # the View's owner, and its source
    t = torch.from_dlpack(v)
    t[2] = 42
    torch.cuda.synchronize()
    assert float(x[2]) == 42
    x[3] = 7
    cupy.cuda.Device().synchronize()
    assert float(t[3]) == 7
    ptr = x.data.ptr
    del x, t
    collect()
    assert v.ptr == ptr
    w = cupy.from_dlpack(v)
    assert w.tolist() == [0, 1, 42, 7, 4, 5]
    del w, v
    collect()


@needs_cupy
@needs_struct
def test_the_current_stream_is_ordered_before_the_callers(recorded_orders):
    import stridex_testing

    s = cupy.cuda.Stream(non_blocking=True)
    x = cupy.arange(4, dtype=cupy.float32)
    with s:
        v = stridex.view(x)  # default: ready for the legacy stream, after the work on s
        assert v.stream == LEGACY
        assert stridex_testing.captured_orders() == [(s.ptr, LEGACY, "cuda:0")]
        v = stridex.view(x, stream=s)  # the caller's stream is CuPy's: nothing to order
        assert v.stream == s.ptr and stridex_testing.captured_orders() == []
        v = stridex.view(x, stream=stridex.NO_SYNC)  # no ordering; the View names CuPy's stream
        assert v.stream == s.ptr and stridex_testing.captured_orders() == []
    v = stridex.view(x)  # outside: CuPy's null stream is the legacy one
    assert v.stream == LEGACY and stridex_testing.captured_orders() == []
    v = stridex.view(x, stream=s)
    assert v.stream == s.ptr and stridex_testing.captured_orders() == [(LEGACY, s.ptr, "cuda:0")]


@needs_cupy
def test_a_pending_kernel_is_waited_for_on_the_callers_stream():
    # Real streams: a CuPy kernel still running on s when the View is made for the legacy stream.
    s = cupy.cuda.Stream(non_blocking=True)
    x = cupy.zeros(1 << 22, dtype=cupy.float32)
    with s:
        for _ in range(20):
            x += 1  # queued on s
        v = stridex.view(x)
    out = cupy.from_dlpack(stridex.view(v, stream=stridex.NO_SYNC))  # read on the legacy stream
    with cupy.cuda.Stream.null:
        total = float(out.sum())
    assert total == 20 * (1 << 22)


@needs_cupy
@needs_struct
def test_the_casters_caller_stream_is_cupys_current():
    ext = importlib.import_module("stridex_seed_ext")
    x = cupy.zeros(3, dtype=cupy.float32)
    s = cupy.cuda.Stream(non_blocking=True)
    assert ext.caller_stream(x) == LEGACY
    with s:
        assert ext.caller_stream(x) == s.ptr


@needs_cupy
@needs_struct
def test_the_public_api_path_gives_the_same_views():
    # CuPy >= 14.3's capsule, stood in for by stridex_testing over the same arrays.
    import stridex_testing

    arrays = [
        cupy.arange(24, dtype=cupy.float32).reshape(4, 6)[::-1, 1::2],
        cupy.zeros((), cupy.int8),
        cupy.ndarray((4,), cupy.float32, memptr=cupy.cuda.malloc_managed(16)),
    ]
    layout = [outcome(lambda: stridex.view(x)) for x in arrays]
    saved = (getattr(cupy, "_public_c_api", None), cupy.__version__)
    cupy._public_c_api = stridex_testing.fake_cupy_api(cupy.ndarray)
    _internals.clear_type_cache()
    try:
        calls = stridex_testing.fake_cupy_api_calls()
        assert _internals.array_struct(cupy.ndarray) == "cupy"
        s = cupy.cuda.Stream(non_blocking=True)
        assert [outcome(lambda: stridex.view(x)) for x in arrays] == layout
        with s:
            assert stridex.view(arrays[0], stream=stridex.NO_SYNC).stream == s.ptr
        after = stridex_testing.fake_cupy_api_calls()
        assert after[0] - calls[0] == 4 and after[1] - calls[1] == 4  # every import asked the API
    finally:
        if saved[0] is None:
            del cupy._public_c_api
        else:
            cupy._public_c_api = saved[0]
        _internals.clear_type_cache()
    assert [outcome(lambda: stridex.view(x)) for x in arrays] == layout
