"""The stream contract of stridex.view(obj, stream=...): how the argument is read, and what each
producer of the quirk table (src/extension/stream/producers.cpp) is sent. One test per row of the table, in
two forms: the translation itself (_internals.dlpack_stream) and a producer that pretends to be that
framework (its __module__ and package version), checked for exactly what its __dlpack__ received.
Runs without a GPU: "CUDA" arrays here are host memory labelled cuda:0, and stream orderings are
recorded instead of reaching a driver."""

from __future__ import annotations

import ctypes
import enum
import sys
import types

import numpy as np
import pytest

import stridex
from quirky_producers import Recorder, address, host_array, make_capsule
from stridex._stridex import _internals
import stridex_testing as _testing

CPU, CUDA, PINNED, ROCM = (1, 0), (2, 0), (3, 0), (10, 0)
H = 0x1234  # a stream handle


@pytest.fixture(autouse=True)
def _every_test_records_orders(recorded_orders):
    yield


# ---- reading the stream argument ----------------------------------------------------------------


class Color(enum.IntEnum):
    H = 0x1234


class CudaStreamProtocol:
    def __init__(self, handle, as_property=False):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


class TorchLikeStream:  # torch.cuda.Stream: .cuda_stream (0 for the default stream)
    def __init__(self, handle):
        self.cuda_stream = handle


class TorchWithProtocol(TorchLikeStream):
    def __cuda_stream__(self):
        return (0, 0x777)


CupyLikeStream = type("Stream", (), {"__module__": "cupy.cuda.stream", "__init__": lambda s, p: setattr(s, "ptr", p)})


class _NumbaStream:
    def __init__(self, handle):
        self.handle = ctypes.c_void_p(handle)


_NumbaStream.__module__ = "numba.cuda.cudadrv.driver"


@pytest.mark.parametrize(
    "stream,expected",
    [
        (None, ("default", 0)),
        (stridex.NO_SYNC, ("no_sync", 0)),
        (-1, ("no_sync", 0)),
        (1, ("stream", 1)),
        (2, ("stream", 2)),
        (H, ("stream", H)),
        (2**62, ("stream", 2**62)),
        (np.int64(H), ("stream", H)),
        (np.uint64(7), ("stream", 7)),
        (Color.H, ("stream", H)),
        (CudaStreamProtocol(H), ("stream", H)),
        (CudaStreamProtocol(0), ("stream", 1)),  # the NULL stream object is the legacy default stream
        (TorchLikeStream(H), ("stream", H)),
        (TorchLikeStream(0), ("stream", 1)),  # torch.cuda.default_stream().cuda_stream == 0
        (TorchWithProtocol(H), ("stream", 0x777)),  # __cuda_stream__ is preferred
        (CupyLikeStream(H), ("stream", H)),
        (_NumbaStream(H), ("stream", H)),
        (_NumbaStream(0), ("stream", 1)),
    ],
    ids=repr,
)
def test_parse_stream(stream, expected):
    assert _internals.parse_stream(stream) == expected


@pytest.mark.parametrize(
    "stream,error",
    [
        (0, ValueError),
        (-2, ValueError),
        (-(2**70), ValueError),
        (2**64, ValueError),
        (True, TypeError),
        (False, TypeError),
        (1.5, TypeError),
        ("1", TypeError),
        (object(), TypeError),
        (CudaStreamProtocol(-5), ValueError),
        (CudaStreamProtocol("x"), TypeError),
    ],
    ids=repr,
)
def test_parse_stream_errors(stream, error):
    with pytest.raises(error):
        _internals.parse_stream(stream)


def test_cuda_stream_protocol_must_return_a_pair():
    class Bad:
        def __cuda_stream__(self):
            return 5

    with pytest.raises(ValueError, match="version, handle"):
        _internals.parse_stream(Bad())


# ---- the quirk table: one entry per row ------------------------------------------------------------
# For each row: (keywords, host_only, takes -1, takes 2, needs the current device, immutable,
# stream=None spelt out rather than left to the parameter's default, negative strides repaired,
# the default request's legacy stream sent as 1 rather than None).
ROWS = {
    "numpy<2.1": ("stream_only", True, True, True, False, False, False, False, False),
    "numpy": ("full", True, True, True, False, False, False, False, False),
    "torch<2.9": ("stream_only", False, True, False, False, False, True, False, False),
    "torch": ("full", False, True, False, True, False, True, False, False),
    "jax<0.4.27": ("stream_only", False, False, True, False, True, False, False, False),
    "jax": ("full", False, False, True, False, True, False, False, False),
    "cupy<13.4": ("stream_only", False, True, True, False, False, False, False, False),
    "cupy": ("full", False, True, True, False, False, False, True, False),
    "warp": ("stream_only", False, True, True, False, False, False, False, False),
    "mlx<0.32": ("none", False, True, True, False, False, False, False, False),
    "mlx": ("full", False, True, True, False, False, False, False, False),
    "cuda.core": ("full", False, True, True, False, False, False, False, False),
    "nanobind": ("full", False, True, True, False, False, False, False, False),
    "generic": ("full", False, True, True, False, False, False, False, True),
}
TABLE = {row["name"]: row for row in _internals.producer_rows()}


def test_every_row_has_a_test():
    assert set(TABLE) == set(ROWS)
    assert list(TABLE)[-1] == "generic"


def expected_stream(row, stream, device):
    """(value sent as __dlpack__(stream=...), stream the data is then ready on): the contract of
    docs/import.md, written out independently of the C++."""
    keywords, host_only, takes_no_sync, takes_per_thread, *_, spells_default = ROWS[row]
    if host_only:
        return None, None
    if device is None:  # not asked: the default request
        return None, 1
    if device in (CUDA, (13, 0)):
        if stream is None:
            return (1 if spells_default else None), 1
        if stream is stridex.NO_SYNC:
            return (-1, None) if takes_no_sync else (None, 1)
        if stream == 2 and not takes_per_thread:
            return 1, 1
        return stream, stream
    if device == ROCM:
        return (-1 if stream is stridex.NO_SYNC else None if stream is None else stream), None
    return None, None  # CPU, pinned and everything else


@pytest.mark.parametrize("row", list(ROWS))
def test_row_translation(row):
    facts = TABLE[row]
    assert (
        facts["keywords"],
        facts["host_only"],
        facts["takes_no_sync"],
        facts["takes_per_thread"],
        facts["needs_current_device"],
        facts["immutable"],
        facts["spell_none"],
        facts["repair_negative_strides"],
        facts["spells_default_stream"],
    ) == ROWS[row]
    # The performance column: NumPy >= 2.1 only (versioned capsules); CuPy from 13.4 (its C API, or
    # the layout it vouches for); JAX >= 0.4.27 (__dlpack__'s Python layers skipped where they give the
    # same capsule, test_import_jax.py); torch >= 2.9 (its exchange API: test_import_borrowed.py)
    assert facts["shortcuts"] == {
        "numpy": ["numpy_struct"],
        "cupy": ["cupy_c_api", "cupy_layout"],
        "jax": ["jaxlib_export"],
        "torch": ["torch_getter", "torch_borrowed"],
    }.get(row, [])
    assert facts["why"]
    for device in (None, CPU, CUDA, PINNED, ROCM, (13, 0)):
        for stream in (None, stridex.NO_SYNC, 1, 2, H):
            assert _internals.dlpack_stream(row, stream, device) == expected_stream(row, stream, device), (
                row,
                stream,
                device,
            )


def row_version(row):
    """A version inside the row's range, as its package would report it."""
    since, until = TABLE[row]["since"], TABLE[row]["until"]
    if until[0] >= 1 << 30:
        return ".".join(map(str, since)) if since != (0, 0, 0) else "99.0.0"
    major, minor, patch = until
    return f"{major}.{minor}.{patch - 1}" if patch else f"{major}.{minor - 1}.0" if minor else f"{major - 1}.99.0"


class Emulated(Recorder):
    """A producer whose __dlpack__ accepts exactly the keywords of the row's framework, and records
    every attempt (refused ones too)."""

    accepts = ("stream", "max_version", "dl_device", "copy")
    attempts: list

    def __dlpack__(self, *args, **kwargs):
        self.attempts.append(dict(kwargs))
        unknown = set(kwargs) - set(self.accepts)
        if args or unknown:
            raise TypeError(f"__dlpack__() got an unexpected keyword argument {sorted(unknown)}")
        self.calls.append(dict(kwargs))
        return self._capsule(versioned=False)


ACCEPTS = {"full": ("stream", "max_version", "dl_device", "copy"), "stream_only": ("stream",), "none": ()}


def emulate(row, monkeypatch, array, device):
    """An Emulated producer that stridex must map to `row`: its module is the framework's, and the
    framework's package reports a version inside the row's range."""
    module = TABLE[row]["module"].split("|")[0] or "somewhere.else"
    package = TABLE[row]["package"]
    if package:
        if package in sys.modules:
            monkeypatch.setattr(sys.modules[package], "__version__", row_version(row))
        else:
            monkeypatch.setitem(sys.modules, package, types.SimpleNamespace(__version__=row_version(row)))
    cls = type(f"Emulated_{row}", (Emulated,), {"__module__": module + ".fake", "accepts": ACCEPTS[ROWS[row][0]]})
    assert _internals.producer_for(cls) == row
    p = cls(array, device=device)
    p.attempts = []
    return p


@pytest.mark.parametrize("row", list(ROWS))
def test_row_behaviour(row, monkeypatch):
    (
        keywords,
        host_only,
        takes_no_sync,
        takes_per_thread,
        needs_device,
        immutable,
        spell_none,
        repair,
        spells_default,
    ) = ROWS[row]
    a = np.arange(6.0)
    device = CPU if host_only else CUDA
    p = emulate(row, monkeypatch, a, device)
    for stream in (None, stridex.NO_SYNC, 2, H):
        v = stridex.view(p, stream=stream)
        assert v.ptr == address(a) and v.readonly == immutable
    # The row's keywords are used from the first call on: no TypeError round trip.
    assert p.attempts == p.calls
    sent = [c.get("stream", "absent") for c in p.calls]
    if host_only:
        assert p.device_calls == 0 and sent == ["absent"] * 4  # NumPy takes nothing but None
        assert all(c.get("max_version") in (None, (1, 3)) for c in p.calls)
        return
    if keywords == "none":
        assert sent == ["absent"] * 4
        return
    none = None if spell_none else "absent"  # None is the default: left out unless the row says otherwise
    assert sent == [1 if spells_default else none, -1 if takes_no_sync else none, 2 if takes_per_thread else 1, H]
    if keywords == "full":
        assert all(c["max_version"] == (1, 3) for c in p.calls)
    # __dlpack_device__ is asked only when the answer matters (or the framework needs its device current).
    assert p.device_calls == (4 if needs_device or spells_default else 3)
    orders = _testing.captured_orders()
    assert orders == ([] if takes_per_thread else [(1, 2, "cuda:0")])

    # Negative strides as CuPy 13.4-14.2 sends them (-1 float64 element as 2**61 - 1): repaired only
    # where the row says the producer has that bug; elsewhere they are what they say (and too big).
    q = emulate(row, monkeypatch, a, device)
    q.capsule_fields = dict(byte_offset=5 * 8, shape=(6,), strides=(2**61 - 1,))
    if repair:
        v = stridex.view(q)
        assert v.strides == (-1,) and v.ptr == address(a) + 40
        np.testing.assert_array_equal(host_array(v), a[::-1])
    else:
        with pytest.raises(ValueError, match="overflows"):
            stridex.view(q)


def test_a_subclass_takes_the_row_of_its_nearest_base_a_row_names():
    # A subclass defined elsewhere inherits its framework's __dlpack__ (and exchange API), and
    # with them the framework's quirks; its own module decides first when a row names it.
    def cls(module, *bases):
        c = type("C", bases or (object,), {})
        c.__module__ = module
        return c

    jax_array = cls("jax._src.array")
    assert _internals.producer_for(cls("mylib.arrays", jax_array)) == _internals.producer_for(jax_array)
    assert _internals.producer_for(jax_array).startswith("jax")
    assert _internals.producer_for(cls("cupy._core", jax_array)).startswith("cupy")
    assert _internals.producer_for(cls("mylib", cls("mylib.base"))) == "generic"
    sub = cls("mylib", np.ndarray)
    assert _internals.producer_for(sub) == _internals.producer_for(np.ndarray) != "generic"


def test_cpu_arrays_of_gpu_frameworks_get_none():
    # torch and JAX refuse a CUDA stream for host arrays (and pinned memory, for torch).
    for device in (CPU, PINNED):
        p = type("T", (Emulated,), {"__module__": "torch.fake"})(np.zeros(2), device=device)
        p.attempts = []
        stridex.view(p, stream=H)
        stridex.view(p, stream=stridex.NO_SYNC)
        assert [c["stream"] for c in p.calls] == [None, None]


def test_producer_without_dlpack_device_gets_none_and_stridex_orders_the_rest():
    class NoDevice:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, *, stream=None, max_version=None):
            self.stream = stream
            return make_capsule(self.a, device=CUDA)[0]

    p = NoDevice(np.zeros(3))
    v = stridex.view(p, stream=H)
    assert p.stream is None  # the device is unknown: None is the only value every producer takes
    assert v.stream == H and _testing.captured_orders() == [(1, H, "cuda:0")]  # None = legacy stream


def test_view_records_the_stream_and_a_view_of_it_is_reordered():
    p = type("C", (Emulated,), {})(np.zeros(3), device=CUDA)
    p.attempts = []
    v = stridex.view(p, stream=H)
    assert v.stream == H
    w = stridex.view(v, stream=0x99)
    assert w.stream == 0x99 and _testing.captured_orders() == [(H, 0x99, "cuda:0")]
    assert stridex.view(v, stream=stridex.NO_SYNC).stream == H
    host = stridex.view(np.zeros(2), stream=H)
    assert host.stream is None  # host memory: nothing is ever pending
