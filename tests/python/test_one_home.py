"""Rules with one home each (docs/layout.md, "Where each rule lives"), checked at every entry that
uses them: the dtype parser, the device parser, "a NULL stream handle is the legacy stream", the
stream values a View may hold, and the rule that only Exceptions of a producer are swallowed."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import stridex
from stridex._stridex import _internals

BUF = np.zeros(64, np.uint8)  # memory for from_pointer (a plain NumPy array: no nanobind object)


# ---- one dtype parser -------------------------------------------------------------------------------
# Each entry: (the name its errors start with, a call that returns the parsed Dtype).
DTYPE_ENTRIES = [
    ("dtype(): spec", lambda spec: stridex.dtype(spec)),
    ("Dtype(): spec", lambda spec: stridex.Dtype(spec)),
    ("empty(): dtype", lambda spec: stridex.empty(2, spec).dtype),
    ("from_pointer(): dtype", lambda spec: stridex.from_pointer(BUF.ctypes.data, (1,), spec, owner=BUF).dtype),
]


def dtype_spellings():
    """(spelling, the name it means), every kind the parser takes; made inside a test, so that no
    stridex object outlives the module (nanobind's leak check at exit)."""
    out = [
        ("float32", "float32"),
        ("torch.float32", "float32"),
        ("bfloat16", "bfloat16"),
        ("torch.bfloat16", "bfloat16"),
        ("float32x4", "float32x4"),
        ("<f4", "float32"),
        ("=f8", "float64"),
        ("f4", "float32"),
        ("i8", "int64"),
        (np.float32, "float32"),
        (np.dtype("int16"), "int16"),
        (np.zeros(1, np.complex64), "complex64"),
        (np.float64(1.0), "float64"),
        (float, "float64"),
        (bool, "bool"),
        (stridex.Dtype("uint8"), "uint8"),
        (stridex.view(np.zeros(2, np.int32)), "int32"),
    ]
    if importlib.util.find_spec("ml_dtypes"):
        import ml_dtypes

        out += [(ml_dtypes.bfloat16, "bfloat16"), (ml_dtypes.float8_e4m3fn, "float8_e4m3fn")]
    if importlib.util.find_spec("torch"):
        import torch

        out += [(torch.float32, "float32"), (torch.bfloat16, "bfloat16"), (torch.zeros(1, dtype=torch.int8), "int8")]
    if importlib.util.find_spec("jax"):
        import jax.numpy as jnp

        out += [(jnp.float32, "float32"), (jnp.zeros(1, jnp.int16), "int16")]
    return out


class DtypeRaises:
    """An array-like whose dtype property raises: an Exception means "no dtype here"."""

    def __init__(self, error):
        self.error = error

    @property
    def dtype(self):
        raise self.error


class ReprRaises:
    def __init__(self, error):
        self.error = error

    def __repr__(self):
        raise self.error


def bad_dtypes():
    """(spelling, exception type, what the message says after the argument's name)."""
    return [
        (None, TypeError, " must be a dtype (a stridex.Dtype, a name such as 'float32' or 'torch.float32'"),
        (3, TypeError, " must be a dtype"),
        ("floaty", TypeError, ": unknown dtype name 'floaty' (expected a name such as"),
        ("torch.float", TypeError, ": unknown dtype name 'float'"),
        ("int3", TypeError, ": invalid dtype: int with 3 bits"),
        (object, TypeError, " <class 'object'> (NumPy's dtype('O')) is not a dtype stridex has: stridex views hold"),
        ("U3", TypeError, " 'U3' (NumPy's dtype('<U3')) is not a dtype stridex has: stridex views hold numbers"),
        (">f4", ValueError, " '>f4' (NumPy's dtype('>f4')) is not in native byte order"),
        (np.dtype(">i8"), ValueError, " dtype('>i8') is not in native byte order"),
        (np.zeros(1, ">f8"), ValueError, " dtype('>f8') is not in native byte order"),
        (DtypeRaises(ValueError("no dtype")), TypeError, " must be a dtype"),
        (ReprRaises(ValueError("no repr")), TypeError, "found <ReprRaises object>"),
    ]


def test_every_dtype_spelling_is_taken_by_every_entry():
    for spelling, name in dtype_spellings():
        for what, parse in DTYPE_ENTRIES:
            assert parse(spelling) == stridex.Dtype(name), (what, spelling)


def test_a_bad_dtype_is_the_same_error_at_every_entry():
    for spelling, error, says in bad_dtypes():
        answers = set()
        for what, parse in DTYPE_ENTRIES:
            if spelling is None and what == "empty(): dtype":
                continue  # a missing dtype: bind_copy.cpp says "a dtype is required" (test_first_use.py)
            with pytest.raises(error) as e:
                parse(spelling)
            message = str(e.value)
            assert message.startswith(what) and says in message, (what, spelling, message)
            answers.add((type(e.value), message[len(what) :]))
        assert len(answers) == 1, answers  # the same words, but for the argument's name


def test_stridex_dtype_is_the_parser_itself():
    assert stridex.dtype is stridex._stridex.dtype  # not a Python function of its own spellings


# ---- one device parser ------------------------------------------------------------------------------
VIEW_SOURCE = np.arange(4, dtype=np.float32)


def device_entries():
    """(the name its errors start with, a call that returns the parsed Device), every entry that
    takes any device: device=, to(), Device() and __dlpack__(dl_device=)."""
    v = stridex.view(VIEW_SOURCE)
    return [
        ("Device(): spec", lambda d: stridex.Device(d)),
        ("empty(): device", lambda d: stridex.empty(2, "uint8", device=d).device),
        ("View.to(): device", lambda d: v.to(d).device),
        ("View.copy(): device", lambda d: v.copy(device=d).device),
        ("from_pointer(): device", lambda d: stridex.from_pointer(0, (0,), "uint8", device=d).device),
        ("__dlpack__: dl_device", lambda d: stridex.view(v.__dlpack__(max_version=(1, 3), dl_device=d)).device),
    ]


def test_every_device_spelling_is_taken_by_every_entry():
    cpu = stridex.Device("cpu")
    for spelling in ("cpu", "cpu:0", cpu, (1, 0), (np.int32(1), np.int64(0))):
        for what, parse in device_entries():
            assert parse(spelling) == cpu, (what, spelling)


@pytest.mark.parametrize(
    "bad,error,says",
    [
        ((1, -1), ValueError, ": device id must be >= 0, found -1 for cpu"),  # the one error type (docs/import.md)
        ((2, -3), ValueError, ": device id must be >= 0, found -3 for cuda"),
        ("cuda:-1", ValueError, ": invalid device 'cuda:-1'"),
        ((99, 0), BufferError, ": unsupported DLPack device type 99"),
        ((1, 2**40), ValueError, "[1] 1099511627776 does not fit in int32"),
        (
            [1, 0],
            TypeError,
            " must be a device (a stridex.Device, a name such as 'cuda:0', or a (device_type, "
            "device_id) pair), found list",
        ),
        ((1, 0, 0), TypeError, " must be a (device_type, device_id) pair, found a tuple of 3 items"),
        (0, TypeError, " must be a device"),  # a bare int names no kind of memory here
        (1.5, TypeError, " must be a device"),
    ],
)
def test_a_bad_device_is_the_same_error_at_every_entry(bad, error, says):
    answers = set()
    for what, parse in device_entries():
        with pytest.raises(error) as e:
            parse(bad)
        message = str(e.value)
        assert message.startswith(what) and says in message, (what, message)
        answers.add((type(e.value), message[len(what) :]))
    assert len(answers) == 1, answers


def test_cuda_only_entries_take_an_ordinal_with_the_same_negative_id_error():
    with pytest.raises(ValueError, match=r"DevicePtr\(\): device: device id must be >= 0, found -1 for cuda"):
        stridex.DevicePtr(16, device=-1)
    with pytest.raises(ValueError, match=r"DevicePtr\(\): device: device id must be >= 0, found -1 for cuda"):
        stridex.DevicePtr(16, device=(2, -1))
    assert stridex.DevicePtr(16, device=2).device == stridex.DevicePtr(16, device=(2, 2)).device


# ---- streams: one "NULL is the legacy stream", and no invalid stream in a View -----------------------
class CudaStreamProtocol:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


class TorchLikeStream:
    def __init__(self, handle):
        self.cuda_stream = handle


class NumbaLikeStream:
    """numba.cuda streams: .handle is a ctypes c_void_p, whose .value is None for NULL."""

    __module__ = "numba.cuda.cudadrv.driver"

    class _Handle:
        value = None

    handle = _Handle()


def test_a_null_stream_handle_is_the_legacy_stream_in_every_spelling():
    for stream in (CudaStreamProtocol(0), TorchLikeStream(0), NumbaLikeStream()):
        assert _internals.parse_stream(stream) == ("stream", 1), stream
    assert _internals.parse_stream(CudaStreamProtocol(0x5010)) == ("stream", 0x5010)


def test_a_view_holds_no_stream_the_protocols_forbid():
    v = stridex.view(VIEW_SOURCE)
    for bad, says in ((0, "stream 0 is forbidden"), (-2, "found -2")):
        with pytest.raises(ValueError, match=says):
            v._with_stream(bad)
    assert v._with_stream(1).stream == 1 and v._with_stream(-1).stream is None


# ---- only Exceptions are swallowed ------------------------------------------------------------------
class Interrupting:
    """Every lookup stridex may try on a producer raises KeyboardInterrupt: the user pressed Ctrl-C."""

    def __getattr__(self, name):
        raise KeyboardInterrupt(name)

    def __repr__(self):
        raise KeyboardInterrupt("repr")


class NumbaIntRaises:
    """A Numba-like stream whose handle has no .value, whose int() raises: the handle is read then."""

    __module__ = "numba.cuda.cudadrv.driver"

    def __init__(self, error):
        self.error = error
        self.handle = 0x5010

    def __int__(self):
        raise self.error


def test_a_keyboard_interrupt_in_a_dtype_property_propagates():
    for what, parse in DTYPE_ENTRIES:
        with pytest.raises(KeyboardInterrupt):
            parse(DtypeRaises(KeyboardInterrupt()))


def test_a_keyboard_interrupt_in_repr_propagates_from_an_error_message():
    class NoDtype:
        def __repr__(self):
            raise KeyboardInterrupt("repr")

    for what, parse in DTYPE_ENTRIES:
        with pytest.raises(KeyboardInterrupt):
            parse(NoDtype())


def test_a_keyboard_interrupt_in_a_stream_object_propagates():
    assert _internals.parse_stream(NumbaIntRaises(ValueError("no int"))) == ("stream", 0x5010)
    with pytest.raises(KeyboardInterrupt):
        _internals.parse_stream(NumbaIntRaises(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        stridex.view(VIEW_SOURCE, stream=Interrupting())


def test_a_keyboard_interrupt_in_an_instance_protocol_lookup_propagates():
    with pytest.raises(KeyboardInterrupt):
        stridex.view(Interrupting())
