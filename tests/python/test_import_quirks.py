"""stridex.view() against producers that reproduce each known quirk (tests/python/quirky_producers.py),
DLPack capsules with chosen fields (stridex_testing.make_capsule (tests/python/ext/testing.cpp)), producers of the DLPack
C exchange API, and malformed interface dicts. Runs without a GPU."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import stridex
from quirky_producers import (
    AI,
    CAI,
    CAIv2NoStrides,
    Conformant,
    LegacyAnswer,
    NamedCapsule,
    NoKeywords,
    RefusesDLPack,
    StreamOnly,
    address,
    host_array,
    make_capsule,
)
from stridex._stridex import _internals
import stridex_testing as _testing

FLAG_READ_ONLY = 1
FLAG_SUBBYTE_PADDED = 4


@pytest.fixture(autouse=True)
def no_driver_calls(recorded_orders):
    """Streams ordered during these tests are recorded, never sent to a driver."""
    yield
    _testing.fake_cuda_pointers(False)


# ---- __dlpack__ quirks ----------------------------------------------------------------------------


def test_versioned_capsule_asked_and_taken():
    a = np.arange(6, dtype=np.float32)
    p = Conformant(a)
    v = stridex.view(p)
    assert p.calls == [dict(stream=None, max_version=(1, 3))]
    # Asked (the generic row spells the legacy stream out as 1 on CUDA); host memory gets None.
    assert p.device_calls == 1
    assert v.ptr == address(a) and v.dtype == "float32" and v.owner is p
    a[3] = 9
    assert host_array(v)[3] == 9
    del v
    gc.collect()
    assert [c.calls for c in p.counters] == [1]


def test_legacy_capsule_answering_a_versioned_request_is_read_by_its_name():
    a = np.arange(4.0)
    p = LegacyAnswer(a)
    v = stridex.view(p)
    assert p.calls[0]["max_version"] == (1, 3)
    assert v.ptr == address(a) and not v.readonly  # legacy capsules cannot say read-only
    del v
    gc.collect()
    assert p.counters[0].calls == 1


def test_stream_only_producer_is_retried_once_and_remembered():
    p = StreamOnly(np.arange(3.0))
    stridex.view(p)
    assert p.calls == [dict(stream=None)]  # the TypeError of the first call never reached a capsule
    stridex.view(p)
    stridex.view(StreamOnly(np.arange(3.0)))
    assert p.calls == [dict(stream=None), dict(stream=None)]


def test_no_keywords_producer_is_called_bare():
    p = NoKeywords(np.arange(3.0))
    v = stridex.view(p)
    assert p.calls == [{}] and v.shape == (3,)
    q = NoKeywords(np.arange(2.0))
    stridex.view(q)
    stridex.view(q)
    assert q.calls == [{}, {}]  # learned for the type: no TypeError round trip any more


def test_type_error_that_is_not_about_keywords_is_a_refusal():
    class Broken(Conformant):
        def __dlpack__(self, **kwargs):
            raise TypeError("unsupported dtype for export")

    # Still a TypeError without any keyword, so not about keywords: a refusal, a BufferError that
    # keeps the producer's words, with its TypeError as the cause.
    with pytest.raises(BufferError, match="TypeError: unsupported dtype") as info:
        stridex.view(Broken(np.zeros(2)))
    assert isinstance(info.value.__cause__, TypeError)


def test_producer_rejecting_minus_one_never_receives_it():
    # A CUDA array from a JAX-like producer: NO_SYNC is sent as None, never -1 (the fourth seed).
    fake_gpu = module_producer_jax(np.arange(4.0), device=(2, 0))
    for stream in (stridex.NO_SYNC, -1):
        v = stridex.view(fake_gpu, stream=stream)
        assert v.device == "cuda:0"
    assert [c["stream"] for c in fake_gpu.calls] == [None, None]
    v = stridex.view(fake_gpu, stream=12345)
    assert fake_gpu.calls[-1]["stream"] == 12345 and v.stream == 12345
    assert _testing.captured_orders() == []  # the producer ordered its own work: nothing left to do


def module_producer_jax(array, device):
    from quirky_producers import RejectsMinusOne

    return RejectsMinusOne(array, device=device)


def test_wrong_name_capsule_from_dlpack_is_a_buffer_error_and_released_once():
    p = NamedCapsule(np.arange(3.0), name="not_a_tensor")
    with pytest.raises(BufferError, match="not_a_tensor"):
        stridex.view(p)
    gc.collect()
    assert p.counters[0].calls == 1  # released by the capsule's own destructor


def test_refusing_producer_falls_back_to_the_array_interface():
    a = np.arange(5.0)

    class Both(RefusesDLPack):
        @property
        def __array_interface__(self):
            return self.array.__array_interface__

    p = Both(a)
    v = stridex.view(p)
    assert len(p.calls) == 1 and v.ptr == address(a) and v.owner is p


def host_producer(module, dlpack, array_interface=None):
    """An instance of a new class whose __module__ is `module`: its __dlpack__(**kwargs) is
    `dlpack`, its device the host, and its __array_interface__ (where given) `array_interface()`."""
    members = {"__dlpack__": lambda self, **kwargs: dlpack(**kwargs), "__dlpack_device__": lambda self: (1, 0)}
    if array_interface is not None:
        members["__array_interface__"] = property(lambda self: array_interface())
    cls = type("Array", (), members)
    cls.__module__ = module
    return cls()


def test_torchs_own_refusal_is_final_without_its_exchange_api_too():
    # torch < 2.10 has no exchange API: its __dlpack__ refuses a conjugate view, which its
    # __cuda_array_interface__ would export as plain, unconjugated memory. Its refusal ends the
    # import (in torch's words); the same producer on the generic row moves on to the next protocol.
    a = np.arange(3.0)
    asked = []

    def refuse(**kwargs):
        asked.append("__dlpack__")
        raise BufferError("Can't export tensors with the conjugate bit set")

    def interface():
        asked.append("__array_interface__")
        return a.__array_interface__

    def producer(module):
        return host_producer(module, refuse, interface)

    torch_like = producer("torch")
    assert _internals.producer_for(type(torch_like)) in ("torch", "torch<2.9")
    with pytest.raises(BufferError, match="^Can't export tensors with the conjugate bit set$"):
        stridex.view(torch_like)
    assert asked == ["__dlpack__"]
    asked.clear()
    assert stridex.view(producer("mylib")).ptr == address(a)
    assert asked == ["__dlpack__", "__array_interface__"]
    assert [r["name"] for r in _internals.producer_rows() if r["refusals_final"]] == ["torch<2.9", "torch"]


def test_a_proxy_forwarding_dlpack_takes_the_quirks_of_the_object_behind_it():
    # A wrapper whose __getattr__ hands out the wrapped array's bound __dlpack__: the row is the
    # wrapped producer's (JAX: read-only even through a legacy capsule; torch: stream=None spelt
    # out), not the generic one of the wrapper's own type.
    a = np.arange(3.0)
    sent = []

    def export(**kwargs):
        sent.append(kwargs)
        return a.__dlpack__()  # a legacy capsule: no read-only flag

    def producer(module):
        return host_producer(module, export)

    class Proxy:
        def __init__(self, target):
            self._target = target

        def __getattr__(self, name):
            return getattr(self._target, name)

    Proxy.__module__ = "mylib"
    assert stridex.view(Proxy(producer("jax._src.array"))).readonly
    assert not stridex.view(Proxy(producer("mylib.arrays"))).readonly
    stridex.view(Proxy(producer("torch")))
    assert "stream" in sent[-1] and sent[-1]["stream"] is None
    stridex.view(Proxy(producer("mylib.arrays")))
    assert "stream" not in sent[-1]


def test_all_refusals_are_reported_together():
    class Both(RefusesDLPack):
        __array_interface__ = property(
            lambda self: {"shape": (2,), "typestr": "<M8[s]", "data": (0, False), "version": 3}
        )

    with pytest.raises(BufferError) as e:
        stridex.view(Both(np.zeros(2)))
    assert "__dlpack__: this producer cannot export" in str(e.value)
    assert "__array_interface__" in str(e.value)


def test_dlpack_on_the_instance_is_honoured():
    a = np.arange(4.0)

    class Holder:
        pass

    h = Holder()
    h.__dlpack__ = lambda **kw: make_capsule(a)[0]
    v = stridex.view(h)
    assert v.ptr == address(a)


# ---- capsules with chosen fields ------------------------------------------------------------------


@pytest.mark.parametrize("versioned", [True, False])
def test_raw_capsule_is_consumed_renamed_and_deleted_once(versioned):
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    capsule, counter = make_capsule(a, versioned=versioned)
    v = stridex.view(capsule)
    assert "used_dltensor" in repr(capsule)
    assert v.ptr == address(a) and v.shape == (3, 4) and v.stream is None
    # Whichever class a framework's own from_dlpack raises here (CuPy ValueError, torch RuntimeError),
    # in CuPy's words, which its suite matches: code written against either still catches it.
    for expected in (stridex.ConsumedCapsuleError, BufferError, ValueError, RuntimeError):
        with pytest.raises(expected, match="consumed multiple times.*already consumed"):
            stridex.view(capsule)
    assert counter.calls == 0
    del v
    gc.collect()
    assert counter.calls == 1
    del capsule
    gc.collect()
    assert counter.calls == 1


def test_raw_capsule_of_a_foreign_name_is_a_type_error_and_released_by_its_owner():
    capsule, counter = make_capsule(np.zeros(2), name="something_else")
    with pytest.raises(TypeError, match="something_else"):
        stridex.view(capsule)
    assert counter.calls == 0
    del capsule
    gc.collect()
    assert counter.calls == 1


def test_major_version_2_is_refused_and_the_deleter_runs_exactly_once():
    capsule, counter = make_capsule(np.zeros(2), version=(2, 0))
    with pytest.raises(BufferError, match="major version 2"):
        stridex.view(capsule)
    assert counter.calls == 1
    del capsule
    gc.collect()
    assert counter.calls == 1


def test_null_strides_legacy_capsule_is_c_contiguous():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    capsule, counter = make_capsule(a, versioned=False, null_strides=True)
    v = stridex.view(capsule)
    assert v.strides == (12, 4, 1)
    np.testing.assert_array_equal(host_array(v), a)


@pytest.mark.parametrize("minor,ok", [(0, True), (1, True), (2, False), (3, False)])
def test_null_strides_versioned_capsule_follows_the_minor_version(minor, ok):
    a = np.arange(6.0).reshape(2, 3)
    capsule, counter = make_capsule(a, version=(1, minor), null_strides=True)
    if ok:
        assert stridex.view(capsule).strides == (3, 1)
    else:
        with pytest.raises(BufferError, match="requires strides"):
            stridex.view(capsule)
        assert counter.calls == 1


def test_byte_offset_is_added_to_the_data_pointer():
    a = np.arange(10, dtype=np.float32)
    capsule, _ = make_capsule(a, byte_offset=8, shape=(8,))
    v = stridex.view(capsule)
    assert v.ptr == address(a) + 8
    np.testing.assert_array_equal(host_array(v), a[2:])


def test_read_only_flag_and_negative_strides_in_a_capsule():
    a = np.arange(6.0)
    capsule, _ = make_capsule(a, flags=FLAG_READ_ONLY, byte_offset=5 * 8, shape=(6,), strides=(-1,))
    v = stridex.view(capsule)
    assert v.readonly and v.strides == (-1,) and v.ptr == address(a) + 40
    np.testing.assert_array_equal(host_array(v), a[::-1])


def test_zero_d_capsule_with_null_shape():
    a = np.array(2.5)
    capsule, _ = make_capsule(a, null_shape=True, null_strides=True)
    v = stridex.view(capsule)
    assert v.shape == () and host_array(v)[()] == 2.5


@pytest.mark.parametrize("dtype,message", [((2, 32, 0), "lanes"), ((200, 8), "code 200"), ((2, 12), "bits")])
def test_invalid_dtypes_release_the_capsule(dtype, message):
    capsule, counter = make_capsule(np.zeros(4, np.float32), dtype=dtype)
    with pytest.raises((BufferError, TypeError), match=message):
        stridex.view(capsule)
    assert counter.calls == 1


def test_unknown_device_type_is_refused_and_released():
    capsule, counter = make_capsule(np.zeros(2), device=(99, 0))
    with pytest.raises(BufferError):
        stridex.view(capsule)
    assert counter.calls == 1


def test_null_deleter_capsule():
    a = np.arange(3.0)
    capsule, counter = make_capsule(a, null_deleter=True)
    v = stridex.view(capsule)
    assert v.ptr == address(a)
    del v, capsule
    gc.collect()
    assert counter.calls == 0


def test_capsule_deleter_runs_when_the_last_derived_view_goes():
    a = np.arange(10.0)
    capsule, counter = make_capsule(a)
    v = stridex.view(capsule)
    w = v[2:5]
    del v
    gc.collect()
    assert counter.calls == 0
    np.testing.assert_array_equal(host_array(w), a[2:5])
    del w
    gc.collect()
    assert counter.calls == 1


# ---- the DLPack C exchange API --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["ExchangeProducer", "ExchangeProducerInt", "ExchangeProducerChained"])
def test_exchange_api_is_preferred_and_found_in_all_its_forms(kind):
    a = np.arange(8, dtype=np.int64).reshape(2, 4)
    producer = getattr(_testing, kind)(a)
    calls = _testing.exchange_calls()[0]
    v = stridex.view(producer)
    assert _testing.exchange_calls()[0] == calls + 1
    assert v.ptr == address(a) and v.shape == (2, 4) and v.device == "cpu" and v.stream is None
    a[1, 3] = -5
    assert host_array(v)[1, 3] == -5


def test_exchange_api_read_only_flag():
    v = stridex.view(_testing.ExchangeProducer(np.zeros(3), flags=FLAG_READ_ONLY))
    assert v.readonly


def test_exchange_api_refusal_falls_back_to_the_next_protocol():
    a = np.arange(4.0)

    class WithInterface(_testing.ExchangeProducer):
        @property
        def __array_interface__(self):
            return self.array.__array_interface__

    v = stridex.view(WithInterface(a, refuse=True))
    assert v.ptr == address(a)
    with pytest.raises(BufferError, match="refuses"):
        stridex.view(_testing.ExchangeProducer(a, refuse=True))


def test_exchange_api_orders_the_callers_stream_after_the_producers():
    # A "CUDA" tensor (host memory labelled cuda:0; no driver is reached, orders are recorded).
    a = np.arange(4.0)
    _testing.set_work_stream(0x5000)
    try:
        p = _testing.ExchangeProducer(a, device=(2, 0))
        v = stridex.view(p)  # default: the legacy default stream waits for the producer's stream
        assert v.device == "cuda:0" and v.stream == 1
        assert _testing.captured_orders() == [(0x5000, 1, "cuda:0")]
        v = stridex.view(p, stream=0x7000)
        assert v.stream == 0x7000 and _testing.captured_orders() == [(0x5000, 0x7000, "cuda:0")]
        v = stridex.view(p, stream=0x5000)  # same stream: nothing to do
        assert v.stream == 0x5000 and _testing.captured_orders() == []
        v = stridex.view(p, stream=stridex.NO_SYNC)  # no ordering; the View says where the data is ready
        assert v.stream == 0x5000 and _testing.captured_orders() == []
        _testing.set_work_stream(0)  # NULL: the producer works on the legacy default stream
        v = stridex.view(p)
        assert v.stream == 1 and _testing.captured_orders() == []
        v = stridex.view(p, stream=2)
        assert v.stream == 2 and _testing.captured_orders() == [(1, 2, "cuda:0")]
    finally:
        _testing.set_work_stream(0)


# ---- __cuda_array_interface__ -----------------------------------------------------------------------


def test_cai_v2_without_strides_is_c_contiguous():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = stridex.view(CAIv2NoStrides(a))
    assert v.strides == (4, 1) and v.ptr == address(a)
    np.testing.assert_array_equal(host_array(v), a)


@pytest.mark.parametrize("version", [2, 3])
def test_cai_strides_none_and_explicit_bytes(version):
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    assert stridex.view(CAI(a, version=version, strides=None)).strides == (4, 1)
    t = a.T
    v = stridex.view(CAI(t, version=version))
    assert v.strides == (1, 4) and v.byte_strides == t.strides
    np.testing.assert_array_equal(host_array(v), t)


def test_cai_device_comes_from_the_pointer():
    # No driver here: the pointer is plain host memory, and stridex says so rather than guessing.
    v = stridex.view(CAI(np.zeros(3)))
    assert v.device == "cpu"
    _testing.fake_cuda_pointers(True)
    assert stridex.view(CAI(np.zeros(3))).device == "cuda:0"


def test_cai_empty_array_with_null_pointer():
    v = stridex.view(CAI(np.zeros((0, 4), np.float32)))
    assert v.shape == (0, 4) and v.size == 0 and v.device.type == "cuda"


def test_cai_read_only_and_lifetime(collect):
    a = np.arange(3.0)
    p = CAI(a, data=(address(a), True))
    ref = weakref.ref(p)
    v = stridex.view(p)
    del p
    collect()
    assert v.readonly and ref() is not None and v.owner is ref()
    np.testing.assert_array_equal(host_array(v), a)


def test_cai_mask_is_refused():
    with pytest.raises(BufferError, match="mask"):
        stridex.view(CAI(np.zeros(3), mask=CAI(np.ones(3, bool))))
    assert stridex.view(CAI(np.zeros(3), mask=None)).shape == (3,)


def test_cai_stream_key_is_honoured_with_an_event_never_a_host_sync():
    _testing.fake_cuda_pointers(True)
    p = CAI(np.zeros(3), stream=0x1234)
    v = stridex.view(p)
    assert v.stream == 1 and _testing.captured_orders() == [(0x1234, 1, "cuda:0")]
    v = stridex.view(p, stream=0x99)
    assert v.stream == 0x99 and _testing.captured_orders() == [(0x1234, 0x99, "cuda:0")]
    v = stridex.view(p, stream=stridex.NO_SYNC)
    assert v.stream == 0x1234 and _testing.captured_orders() == []
    v = stridex.view(CAI(np.zeros(3), stream=None), stream=0x99)  # nothing pending: nothing to order
    assert v.stream == 0x99 and _testing.captured_orders() == []


@pytest.mark.parametrize(
    "overrides,key,found",
    [
        (dict(strides=(4,)), "strides", "(4,)"),
        (dict(shape=(2, -1)), "shape", "(2, -1)"),
        (dict(shape=[2, "3"]), "shape", "'3'"),
        (dict(data=(None, False)), "data", "None"),
        (dict(data=12345), "data", "12345"),
        (dict(typestr=4), "typestr", "4"),
        (dict(typestr="f4"), "typestr", "f4"),
        (dict(stream=0), "stream", "0"),
        (dict(stream="s"), "stream", "'s'"),
        (dict(version="3"), "version", "'3'"),
    ],
)
def test_cai_bad_values_are_value_errors_naming_key_and_value(overrides, key, found):
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError) as e:
        stridex.view(CAI(a, **overrides))
    assert f"__cuda_array_interface__['{key}']" in str(e.value) or f"'{key}'" in str(e.value)
    assert found in str(e.value)


def test_cai_strides_message_is_exact():
    with pytest.raises(
        ValueError,
        match=r"__cuda_array_interface__\['strides'\] must be a tuple of 2 ints, "
        r"found \(4,\)",
    ):
        stridex.view(CAI(np.zeros((2, 3), np.float32), strides=(4,)))


@pytest.mark.parametrize("missing", ["shape", "typestr", "data", "version"])
def test_cai_missing_keys(missing):
    with pytest.raises(ValueError, match=f"no '{missing}' key"):
        stridex.view(CAI(np.zeros(2), omit=(missing,)))


@pytest.mark.parametrize("version", [-1, 4, 2**63 - 1])
def test_cai_unsupported_versions(version):
    with pytest.raises(BufferError, match=f"version {version} is not supported .stridex reads versions 0 to 3"):
        stridex.view(CAI(np.zeros(2), version=version))


@pytest.mark.parametrize("version", [0, 1])
def test_cai_versions_before_2_are_read_as_v2(version):
    # rmm.DeviceBuffer (RAPIDS, and Dask's UCX receive buffers) says version 0, with strides None
    # and typestr |u1; CuPy, Numba and torch read it.
    a = np.arange(12, dtype=np.uint8)
    v = stridex.view(CAI(a, version=version, strides=None, typestr="|u1"))
    assert (v.shape, v.strides, v.dtype, v.ptr) == ((12,), (1,), "uint8", address(a))
    np.from_dlpack(v)[3] = 200
    assert a[3] == 200
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert stridex.view(CAI(m, version=version, strides=None)).strides == (3, 1)


def test_cai_non_null_pointer_required_for_data():
    with pytest.raises(ValueError, match="pointer is 0"):
        stridex.view(CAI(np.zeros(2), data=(0, False)))


def test_cai_strides_not_a_multiple_of_the_itemsize():
    with pytest.raises(BufferError, match="multiples"):
        stridex.view(CAI(np.zeros(4, np.float32), shape=(2,), strides=(6,)))


# ---- __array_interface__ ------------------------------------------------------------------------------


def test_array_interface_pointer_tuple():
    a = np.arange(6, dtype=np.uint16).reshape(2, 3)
    v = stridex.view(AI(a, shape=(2, 3), typestr="<u2", data=(address(a), False), strides=None))
    assert (v.shape, v.strides, v.ptr, v.dtype) == ((2, 3), (3, 1), address(a), "uint16")


def test_array_interface_buffer_object_plus_offset():
    buf = bytearray(np.arange(8, dtype=np.int32).tobytes())
    v = stridex.view(AI(buf, shape=(3,), typestr="<i4", data=buf, offset=8, strides=(8,)))
    assert v.strides == (2,) and not v.readonly
    np.testing.assert_array_equal(host_array(v), [2, 4, 6])
    ro = stridex.view(AI(None, shape=(2,), typestr="<i4", data=bytes(8)))
    assert ro.readonly


def test_array_interface_outside_its_buffer_is_refused():
    with pytest.raises(ValueError, match="bytes"):
        stridex.view(AI(None, shape=(3,), typestr="<i4", data=bytearray(8)))


def test_array_interface_mask_and_version():
    a = np.zeros(2)
    with pytest.raises(BufferError, match="mask"):
        stridex.view(AI(a, shape=(2,), typestr="<f8", data=(address(a), False), mask=a))
    with pytest.raises(BufferError, match="version"):
        stridex.view(AI(a, shape=(2,), typestr="<f8", data=(address(a), False), version=2))


# ---- the per-type cache ---------------------------------------------------------------------------


def test_a_type_changed_after_caching_is_probed_again():
    class Growing:
        def __init__(self, a):
            self.a = a

        @property
        def __array_interface__(self):
            return self.a.__array_interface__

    a = np.arange(3.0)
    g = Growing(a)
    stridex.view(g)
    fills = _internals.cache_stats()[1]
    stridex.view(g)
    assert _internals.cache_stats()[1] == fills  # cached (the abi3 build: probed each time)
    Growing.__dlpack__ = lambda self, **kw: make_capsule(self.a)[0]
    assert stridex.view(g).ptr == address(a)
    # The class changed: probed again. The abi3 build caches no class a class statement makes.
    assert _internals.cache_stats()[1] == fills + (0 if _internals.stable_abi else 1)


def test_many_types_do_not_break_the_cache():
    classes = [type(f"P{i}", (Conformant,), {}) for i in range(200)]
    for cls in classes:
        assert stridex.view(cls(np.zeros(2))).shape == (2,)
    del classes
    _internals.clear_type_cache()
    gc.collect()


def test_reentrant_producer_evicting_the_cache_is_safe():
    # A producer whose __dlpack__ imports 100 other types (evicting cache slots) mid-import.
    others = [type(f"Q{i}", (Conformant,), {}) for i in range(100)]

    class Reentrant(Conformant):
        def __dlpack__(self, **kw):
            for cls in others:
                stridex.view(cls(np.zeros(1)))
            _internals.clear_type_cache()
            return super().__dlpack__(**kw)

    a = np.arange(5.0)
    v = stridex.view(Reentrant(a))
    assert v.ptr == address(a)
