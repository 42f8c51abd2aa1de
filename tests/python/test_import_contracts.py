"""Small contracts of stridex.view() a user meets (docs/import.md): the array interface's `data`
errors name the key like every other malformed dict; an exchange API stridex declines is named as
declined, with the reason, never as absent; and where stridex swallows a producer's error to try
something else, only an Exception is swallowed (a KeyboardInterrupt is the answer)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import stridex
from quirky_producers import AI, address

# ---- __array_interface__['data'] ------------------------------------------------------------------


class NoBuffer:
    """An __array_interface__ on an object without the buffer protocol."""

    def __init__(self, **d):
        d.setdefault("version", 3)
        d.setdefault("shape", (2,))
        d.setdefault("typestr", "<f8")
        self.__array_interface__ = d


@pytest.mark.parametrize("data", [16, 2.5, "abc", [1, 2], object()], ids=["int", "float", "str", "list", "object"])
def test_data_that_is_neither_tuple_buffer_nor_none_is_named(data):
    # CPython's "a bytes-like object is required, not 'int'" said nothing of the dict or the key.
    with pytest.raises(
        ValueError,
        match=r"__array_interface__\['data'\] must be a \(pointer, readonly\) tuple, an "
        r"object with the buffer protocol, or None \(the object's own buffer\), "
        r"found ",
    ):
        stridex.view(NoBuffer(data=data))


def test_data_none_on_an_object_without_a_buffer_is_named():
    with pytest.raises(
        ValueError,
        match=r"^__array_interface__\['data'\] is None \(the object's own buffer\), but "
        r"NoBuffer has no buffer protocol$",
    ):
        stridex.view(NoBuffer(data=None))


def test_data_missing_on_an_object_without_a_buffer_is_named():
    with pytest.raises(
        ValueError,
        match=r"^__array_interface__ has no 'data' key \(the object's own buffer\), but "
        r"NoBuffer has no buffer protocol \(found keys \{'version': 3, 'shape': \(2,\)",
    ):
        stridex.view(NoBuffer())


class BytesWithInterface(bytearray):
    """A buffer object whose __array_interface__ says nothing of its data: its own buffer."""


@pytest.mark.parametrize("data", ["absent", None])
def test_data_missing_or_none_still_means_the_objects_own_buffer(data):
    b = BytesWithInterface(16)
    d = {"version": 3, "shape": (2,), "typestr": "<f8"}
    if data is None:
        d["data"] = None
    b.__array_interface__ = d
    v = stridex.view(b)
    assert (v.ptr, v.shape, str(v.dtype)) == (address(np.frombuffer(b, np.uint8)), (2,), "float64")


def test_data_as_a_buffer_object_and_as_a_tuple_still_work():
    keep = np.arange(2.0)
    assert stridex.view(AI(keep, shape=(2,), typestr="<f8", data=keep)).ptr == address(keep)
    assert stridex.view(AI(keep, shape=(2,), typestr="<f8", data=(address(keep), False))).ptr == address(keep)


# ---- an exchange API stridex declines is named so -------------------------------------------------


class Header(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("prev_api", ctypes.c_void_p)]


class API(ctypes.Structure):
    _fields_ = [("header", Header)] + [
        (f, ctypes.c_void_p)
        for f in (
            "managed_tensor_allocator",
            "managed_tensor_from_py_object_no_sync",
            "managed_tensor_to_py_object_no_sync",
            "dltensor_from_py_object_no_sync",
            "current_work_stream",
        )
    ]


FromPyObject = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)
CurrentWorkStream = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))
# A private prototype: ctypes.pythonapi.PyCapsule_New is shared, and other tests set its argtypes.
_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi)
)
_KEEP: list = []  # the structs and callbacks stay alive for the session: a type may still point at them


def ctypes_exchange_api() -> API:
    """A working exchange API whose functions are ctypes callbacks: managed tensors from stridex's own
    exchange API (over a View of the object's array), and the legacy stream."""
    own = API.from_address(_capsule_pointer(stridex.View.__dlpack_c_exchange_api__))
    from_view = FromPyObject(own.managed_tensor_from_py_object_no_sync)

    def from_py_object(obj, out):
        return from_view(stridex.view(obj.array), out)

    def current_work_stream(device_type, device_id, out):
        out[0] = None
        return 0

    callbacks = (FromPyObject(from_py_object), CurrentWorkStream(current_work_stream))
    api = API()
    api.header.major, api.header.minor = 1, 3
    api.managed_tensor_from_py_object_no_sync = ctypes.cast(callbacks[0], ctypes.c_void_p).value
    api.current_work_stream = ctypes.cast(callbacks[1], ctypes.c_void_p).value
    _KEEP.extend((api, callbacks, from_view))
    return api


def _capsule_pointer(capsule) -> int:
    get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi)
    )
    return get(capsule, b"dlpack_exchange_api")


def producer(attribute, value, **more):
    return type("Producer", (), {attribute: value, "__init__": lambda self, a: setattr(self, "array", a), **more})


CTYPES_REASON = (
    "the functions of {} are not code of a loaded library or of the executable: made at run time, like "
    "ctypes callbacks and JIT code, which stridex does not call"
)


@pytest.mark.parametrize("attribute", ["__c_dlpack_exchange_api__", "__dlpack_c_exchange_api__"])
def test_an_exchange_api_of_ctypes_callbacks_is_declined_with_the_reason(attribute):
    api = ctypes_exchange_api()
    value = (
        ctypes.addressof(api)
        if attribute == "__c_dlpack_exchange_api__"
        else _new_capsule(ctypes.addressof(api), b"dlpack_exchange_api", None)
    )
    with pytest.raises(TypeError) as e:
        stridex.view(producer(attribute, value)(np.arange(3.0)))
    message = str(e.value)
    assert message.startswith(
        "stridex.view() cannot import an object of type Producer: stridex declined its DLPack "
        f"exchange API ({CTYPES_REASON.format(attribute)}), and it has no __dlpack__, "
    )
    assert "it has no DLPack exchange API" not in message  # it has one: the old words were untrue


def test_a_declined_exchange_api_leaves_the_next_protocol_to_answer():
    a = np.arange(3.0)
    kind = producer(
        "__c_dlpack_exchange_api__",
        ctypes.addressof(ctypes_exchange_api()),
        __array_interface__=property(lambda self: self.array.__array_interface__),
    )
    assert stridex.view(kind(a)).ptr == address(a)


def looping_chain():
    h = Header(2, 0, None)
    h.prev_api = ctypes.addressof(h)  # major 2 pointing at itself
    _KEEP.append(h)
    return ctypes.addressof(h)


def major_2_alone():
    h = Header(2, 0, None)  # no prev_api: no table of major 1 anywhere
    _KEEP.append(h)
    return ctypes.addressof(h)


@pytest.mark.parametrize(
    "attribute,value,reason",
    [
        ("__c_dlpack_exchange_api__", True, "__c_dlpack_exchange_api__ is not an address: an exact int in [1, 2**64)"),
        ("__c_dlpack_exchange_api__", 0, "__c_dlpack_exchange_api__ is not an address: an exact int in [1, 2**64)"),
        ("__c_dlpack_exchange_api__", 2**70, "__c_dlpack_exchange_api__ is not an address: an exact int in [1, 2**64)"),
        ("__c_dlpack_exchange_api__", 12345, "the table __c_dlpack_exchange_api__ points at is not readable memory"),
        (
            "__c_dlpack_exchange_api__",
            looping_chain,
            "the prev_api chain of __c_dlpack_exchange_api__ does not end within 8 tables",
        ),
        (
            "__c_dlpack_exchange_api__",
            major_2_alone,
            "the prev_api chain of __c_dlpack_exchange_api__ has no table of major version 1",
        ),
        (
            "__dlpack_c_exchange_api__",
            object(),
            "__dlpack_c_exchange_api__ is not a capsule named 'dlpack_exchange_api'",
        ),
        (
            "__dlpack_c_exchange_api__",
            lambda: _new_capsule(looping_chain(), b"dlpack_exchange_api", None),
            "the prev_api chain of __dlpack_c_exchange_api__ does not end within 8 tables",
        ),
    ],
    ids=["true", "zero", "huge", "unmapped", "loop", "no-major-1", "not-a-capsule", "capsule-loop"],
)
def test_each_reason_to_decline_is_named(attribute, value, reason):
    if callable(value):
        value = value()
    with pytest.raises(TypeError) as e:
        stridex.view(producer(attribute, value)(None))
    assert f"stridex declined its DLPack exchange API ({reason}), and it has no __dlpack__" in str(e.value)


def test_none_is_no_exchange_api_at_all():
    # None is absent (as __hash__ = None is), so there is nothing to decline.
    kind = type("Plain", (), {"__c_dlpack_exchange_api__": None, "__dlpack_c_exchange_api__": None})
    with pytest.raises(
        TypeError,
        match=r"of type Plain: it has no DLPack exchange API \(__dlpack_c_exchange_api__\), "
        r"no __dlpack__",
    ):
        stridex.view(kind())


# ---- only an Exception is swallowed ---------------------------------------------------------------


class OpaqueWithDtype:
    """A '<V2' array interface (what ml_dtypes' bfloat16 says) whose dtype property raises: stridex
    asks dtype.name for such typestrs, and does without the answer when it is a failure."""

    def __init__(self, error):
        self.error = error
        self.keep = np.arange(4, dtype=np.uint8)
        self.__array_interface__ = {"version": 3, "shape": (2,), "typestr": "<V2", "data": (address(self.keep), False)}

    @property
    def dtype(self):
        raise self.error


@pytest.mark.parametrize("error", [ValueError("no dtype here"), AttributeError("dtype"), RuntimeError("broken")])
def test_a_dtype_property_that_fails_leaves_the_typestr_to_decide(error):
    producer = OpaqueWithDtype(error)
    v = stridex.view(producer)  # two opaque 2-byte elements, as the typestr says
    assert (v.ptr, v.shape, v.dtype) == (address(producer.keep), (2,), stridex.Dtype.from_typestr("|V2"))


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit])
def test_a_dtype_property_that_is_interrupted_propagates(error):
    with pytest.raises(error):
        stridex.view(OpaqueWithDtype(error()))


def test_a_dtype_name_that_is_interrupted_propagates():
    class Name:
        @property
        def name(self):
            raise KeyboardInterrupt

    class Producer(OpaqueWithDtype):
        dtype = Name()

    with pytest.raises(KeyboardInterrupt):
        stridex.view(Producer(None))


class InterruptingMeta(type):
    """A metaclass whose exchange-API attribute runs code: the attributes are class attributes,
    found through the metaclass when a type is first seen."""

    error: BaseException = KeyboardInterrupt()

    @property
    def __c_dlpack_exchange_api__(cls):
        raise type(cls).error


@pytest.mark.parametrize(
    "error,swallowed", [(ValueError("no"), True), (AttributeError("no"), True), (KeyboardInterrupt(), False)]
)
def test_a_metaclass_exchange_api_attribute_that_raises(error, swallowed):
    meta = type("Meta", (InterruptingMeta,), {"error": error})
    a = np.arange(3.0)
    kind = meta("Producer", (), {"__array_interface__": property(lambda self: a.__array_interface__)})
    if swallowed:
        assert stridex.view(kind()).ptr == address(a)  # no API: the next protocol answers
    else:
        with pytest.raises(KeyboardInterrupt):
            stridex.view(kind())
