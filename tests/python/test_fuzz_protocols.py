"""Hypothesis-driven fuzzing of every import protocol with random, mostly malformed input: interface
dicts, DLPack capsules with random fields, __dlpack__ methods answering anything, buffer exports
of any format, and from_pointer arguments. Each input either gives a View that says exactly what
the input described, or a typed exception (never a crash, a hang or another exception type).

Nothing here dereferences the described memory: addresses may be anything, so only what import
computes (shape, strides, pointer, byte span) is checked. STRIDEX_FUZZ_EXAMPLES sets the number of
examples per test (default 50, a few seconds; docs/testing.md has the long run)."""

from __future__ import annotations

import gc
import os
import struct

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import stridex  # noqa: E402
from quirky_producers import make_capsule  # noqa: E402
import stridex_testing as _testing  # noqa: E402

TYPED = (TypeError, ValueError, BufferError, IndexError, OverflowError)
EXAMPLES = int(os.environ.get("STRIDEX_FUZZ_EXAMPLES", "50"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(autouse=True)
def no_driver_calls():
    _testing.capture_orders(True)
    yield
    _testing.capture_orders(False)


# ---- values ---------------------------------------------------------------------------------------

edge_ints = st.sampled_from(
    [
        0,
        1,
        2,
        3,
        7,
        8,
        -1,
        -8,
        2**31,
        2**32 + 1,
        2**61,
        2**62,
        2**63 - 1,
        2**63,
        2**64 - 8,
        2**64,
        -(2**63),
        2**70,
        -(2**70),
    ]
)
ints = st.one_of(st.integers(-16, 64), edge_ints, st.integers())
small_dims = st.lists(st.integers(0, 5), max_size=4).map(tuple)
dims = st.one_of(small_dims, st.lists(ints, max_size=5).map(tuple), st.lists(ints, min_size=60, max_size=70).map(tuple))
typestrs = st.one_of(
    st.sampled_from(
        [
            "<f8",
            "<f4",
            "|u1",
            "|i1",
            "<i2",
            "<u8",
            "<c16",
            "|b1",
            ">f8",
            ">i4",
            "<V2",
            "|V1",
            "|V12",
            "<f2",
            "|O",
            "<M8[s]",
            "<m8[ns]",
            "f4",
            "<f",
            "",
            "<f0",
            "<f99999999999999999999",
            "|u18446744073709551617",
        ]
    ),
    st.text(max_size=12),
)
anything = st.one_of(
    st.none(),
    st.booleans(),
    ints,
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.tuples(ints, st.booleans()),
    dims,
    st.just(object()),
)
pointers = st.one_of(
    st.sampled_from([0, 8, 4096, 0x10000, 2**47, 2**63, 2**64 - 8, 2**64 - 1]), st.integers(0, 2**64 - 1), ints
)


def value_or_other(strategy):
    return st.one_of(strategy, strategy, strategy, anything)


def interface(with_data_key):
    data = st.one_of(st.tuples(pointers, st.booleans()), anything) if with_data_key else anything
    return st.fixed_dictionaries(
        {},
        optional={
            "version": value_or_other(st.sampled_from([2, 3, 3, 3])),
            "shape": value_or_other(dims),
            "typestr": value_or_other(typestrs),
            "data": data,
            "strides": st.one_of(st.none(), value_or_other(dims)),
            "offset": value_or_other(ints),
            "mask": st.one_of(st.none(), anything),
            "stream": st.one_of(st.none(), value_or_other(ints)),
            "descr": anything,
        },
    )


class Holder:
    pass


def product(values):
    out = 1
    for v in values:
        out *= v
    return out


def check_described(v, d, protocol):
    """A View from an interface dict says what the dict said."""
    assert isinstance(v, stridex.View)
    assert v.shape == tuple(d["shape"])
    if d.get("strides") is not None:
        assert v.byte_strides == tuple(d["strides"])
    elif v.size:
        assert v.is_c_contiguous
    if isinstance(d.get("data"), tuple) and v.size:
        assert v.ptr == d["data"][0]
    lo, hi = v.byte_span
    assert lo <= 0 <= hi and v.nbytes >= 0
    if v.size:
        assert 0 <= v.ptr + lo and v.ptr + hi < 2**64  # the byte rules
    _ = repr(v)


# ---- the interface dicts ------------------------------------------------------------------------


@FUZZ
@given(d=interface(True))
def test_cuda_array_interface(d):
    h = Holder()
    h.__cuda_array_interface__ = d
    try:
        v = stridex.view(h)
    except TYPED:
        return
    check_described(v, d, "__cuda_array_interface__")


@FUZZ
@given(d=interface(True), backing=st.one_of(st.none(), st.integers(0, 64)))
def test_array_interface(d, backing):
    h = Holder()
    if backing is not None and "data" in d and not isinstance(d["data"], tuple):
        d["data"] = bytearray(backing)  # a real buffer object (with 'offset')
    h.__array_interface__ = d
    try:
        v = stridex.view(h)
    except TYPED:
        return
    check_described(v, d, "__array_interface__")
    if isinstance(d.get("data"), bytearray) and v.size:
        base = stridex.view(d["data"]).ptr
        lo, hi = v.byte_span
        assert base <= v.ptr + lo and v.ptr + hi <= base + len(d["data"])  # inside the buffer


# ---- DLPack capsules with random fields ----------------------------------------------------------

dtype_fields = st.one_of(
    st.sampled_from([(2, 64), (2, 32), (1, 8), (0, 4), (17, 4), (4, 16), (5, 128), (6, 8)]),
    st.tuples(st.integers(0, 255), st.integers(0, 255)),
    st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 65535)),
)


@FUZZ
@given(
    versioned=st.booleans(),
    shape=st.one_of(st.none(), dims.filter(lambda t: all(-(2**63) <= x < 2**63 for x in t))),
    strides=st.one_of(st.none(), dims.filter(lambda t: all(-(2**63) <= x < 2**63 for x in t))),
    byte_offset=st.one_of(st.integers(0, 64), st.integers(0, 2**64 - 1)),
    dtype=st.one_of(st.none(), dtype_fields),
    device=st.one_of(st.none(), st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1))),
    version=st.one_of(st.none(), st.tuples(st.integers(0, 3), st.integers(0, 9))),
    flags=st.integers(0, 7),
    null_strides=st.booleans(),
    null_shape=st.booleans(),
)
def test_capsules(versioned, shape, strides, byte_offset, dtype, device, version, flags, null_strides, null_shape):
    if shape is not None and strides is not None and len(shape) != len(strides):
        strides = strides[: len(shape)] + (1,) * (len(shape) - len(strides))
    if shape is not None and len(shape) > 64:
        return  # make_capsule's own limit, not stridex's
    array = np.zeros(4, np.float64)
    try:
        capsule, counter = make_capsule(
            array,
            versioned=versioned,
            shape=shape,
            strides=strides,
            byte_offset=byte_offset,
            dtype=dtype,
            device=device,
            version=version,
            flags=flags,
            null_strides=null_strides,
            null_shape=null_shape,
        )
    except TYPED:
        return
    try:
        v = stridex.view(capsule)
    except TYPED:
        v = None
    if v is not None:
        if shape is not None and not null_shape:
            assert v.shape == shape
        if strides is not None and not null_strides and shape is not None:
            assert v.strides == strides or v.size == 0 or any(e <= 1 for e in shape)
        lo, hi = v.byte_span
        if v.size:
            assert 0 <= v.ptr + lo and v.ptr + hi < 2**64
        _ = (repr(v), v.byte_strides, v.nbytes)
    del v, capsule
    gc.collect()
    assert counter.calls == 1  # the deleter ran exactly once, accepted or refused


# ---- __dlpack__ answering anything -----------------------------------------------------------------

answers = st.one_of(
    anything,
    st.sampled_from(["capsule", "legacy", "wrong-name", "raise-type", "raise-buffer", "raise-value", "raise-runtime"]),
)


class Weird:
    def __init__(self, answer, device):
        self.answer, self.device = answer, device
        self.array = np.arange(3.0)

    def __dlpack__(self, **kwargs):
        a = self.answer
        if a in ("capsule", "legacy"):
            return make_capsule(self.array, versioned=a == "capsule")[0]
        if a == "wrong-name":
            return make_capsule(self.array, name="not_dltensor")[0]
        if isinstance(a, str) and a.startswith("raise-"):
            raise {"type": TypeError, "buffer": BufferError, "value": ValueError, "runtime": RuntimeError}[a[6:]](
                "refused"
            )
        return a

    def __dlpack_device__(self):
        return self.device


@FUZZ
@given(
    answer=answers,
    device=st.one_of(st.tuples(st.integers(-3, 20), st.integers(-2, 3)), anything),
    stream=st.one_of(st.none(), st.sampled_from([1, 2, -1, 0, 2**70, 5])),
)
def test_dlpack_methods(answer, device, stream):
    try:
        v = stridex.view(Weird(answer, device), stream=stream)
    except TYPED:
        return
    except RuntimeError as e:  # the producer's own RuntimeError passes through unchanged
        assert str(e) == "refused"
        return
    assert v.shape == (3,) and v.dtype == "float64"


# ---- the buffer protocol --------------------------------------------------------------------------

formats = st.one_of(
    st.sampled_from(list("bBhHiIlLqQnNfde?cx") + ["<i", ">i", "=q", "@d", "2i", "<Zf", "T{i}"]),
    st.text(alphabet="<>=@!xcbB?hHiIlLqQnNefdspP0123456789{}T:", max_size=5),
)


@FUZZ
@given(fmt=formats, count=st.integers(0, 6), step=st.integers(-3, 3).filter(bool))
def test_buffer_protocol(fmt, count, step):
    try:
        size = struct.calcsize(fmt)
        mv = memoryview(bytearray(size * count)).cast("B").cast(fmt)[::step]
    except (struct.error, TypeError, ValueError):
        return
    try:
        v = stridex.view(mv)
    except TYPED:
        return
    assert v.shape == mv.shape and v.itemsize == mv.itemsize and v.byte_strides == mv.strides


# ---- from_pointer -----------------------------------------------------------------------------------


@FUZZ
@given(
    ptr=st.one_of(pointers, anything),
    shape=st.one_of(ints, dims, anything),
    dtype=st.one_of(st.sampled_from(["float32", "uint8", ">f4", "<f8", "bfloat16", "int4", "void"]), anything),
    strides=st.one_of(st.none(), dims, anything),
    device=st.one_of(st.none(), st.sampled_from(["cpu", (1, 0)]), st.tuples(ints, ints), anything),
)
def test_from_pointer(ptr, shape, dtype, strides, device):
    try:
        v = stridex.from_pointer(ptr, shape, dtype, device=device, strides=strides)
    except TYPED:
        return
    expected = (shape,) if isinstance(shape, int) else tuple(shape)
    assert v.shape == expected and v.size == product(expected)
    if v.size:
        lo, hi = v.byte_span
        assert 0 <= v.ptr + lo and v.ptr + hi < 2**64
