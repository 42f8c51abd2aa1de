"""Malformed and hostile input, one test per class of defect (docs/import.md, "What stridex refuses"),
each run over every protocol it applies to: no crash, hang or misread, only a typed exception that
names what is wrong, in a message that stays short. Runs without a GPU."""

from __future__ import annotations

import ctypes
import gc
import signal
import warnings
import weakref

import numpy as np
import pytest

import stridex
from quirky_producers import AI, CAI, Conformant, address, host_array, make_capsule
import stridex_testing as _testing
from export_support import DLManagedTensorVersioned, FromPyObject, exchange_api

F8 = np.dtype("<f8")


@pytest.fixture(autouse=True)
def no_driver_calls():
    _testing.capture_orders(True)
    yield
    _testing.capture_orders(False)


def tiny_array():
    return np.zeros(2, F8)


# ---- every imported layout's bytes are validated --------------------------------------------------
# One layout per protocol, described by (shape, element strides) over float64; each is refused
# because its bytes cannot be addressed (span, storage or a byte stride overflows int64).


def through_capsule(versioned):
    def make(a, shape, strides, byte_offset=0):
        capsule, _ = make_capsule(a, versioned=versioned, shape=shape, strides=strides, byte_offset=byte_offset)
        return lambda: stridex.view(capsule)

    return make


def through_dlpack_method(a, shape, strides, byte_offset=0):
    return lambda: stridex.view(Conformant(a, shape=shape, strides=strides, byte_offset=byte_offset))


def through_cai(a, shape, strides, byte_offset=0):
    byte_strides = None if strides is None else tuple(s * 8 for s in strides)
    return lambda: stridex.view(
        CAI(a, shape=shape, typestr="<f8", strides=byte_strides, data=(address(a) + byte_offset, False))
    )


def through_ai_pointer(a, shape, strides, byte_offset=0):
    byte_strides = None if strides is None else tuple(s * 8 for s in strides)
    return lambda: stridex.view(
        AI(a, shape=shape, typestr="<f8", strides=byte_strides, data=(address(a) + byte_offset, False))
    )


def through_from_pointer(a, shape, strides, byte_offset=0):
    return lambda: stridex.from_pointer(address(a) + byte_offset, shape, "float64", strides=strides, owner=a)


IMPORTERS = {
    "capsule-versioned": through_capsule(True),
    "capsule-legacy": through_capsule(False),
    "__dlpack__": through_dlpack_method,
    "cuda_array_interface": through_cai,
    "array_interface": through_ai_pointer,
    "from_pointer": through_from_pointer,
}
ELEMENT_STRIDES = ("capsule-versioned", "capsule-legacy", "__dlpack__", "from_pointer")


@pytest.mark.parametrize("protocol", IMPORTERS)
@pytest.mark.parametrize(
    "shape,strides,why",
    [
        ((2**62,), None, "overflows int64"),  # 2**65 bytes of storage: a 0-byte memoryview before
        ((2, 2), (2**61, 1), "overflows int64"),  # 2**64 bytes apart: byte_strides (0, 8) before
        ((2**31, 2**31), (0, 0), "overflows int64"),  # a broadcast whose nbytes overflows
    ],
)
def test_byte_span_overflow_is_refused(protocol, shape, strides, why):
    if protocol not in ELEMENT_STRIDES and strides is not None and any(s * 8 >= 2**63 for s in strides):
        pytest.skip("byte strides beyond int64 are refused earlier, by the dict parser")
    with pytest.raises(ValueError, match=why):
        IMPORTERS[protocol](tiny_array(), shape, strides)()


@pytest.mark.parametrize("protocol", ELEMENT_STRIDES)
def test_a_byte_stride_beyond_int64_is_refused_even_on_an_extent_1_axis(protocol):
    # Never stepped along, but exported as bytes by every interface: it must be exact.
    with pytest.raises(ValueError, match="times the item size 8 overflows int64"):
        IMPORTERS[protocol](tiny_array(), (1, 2), (2**61, 1))()


@pytest.mark.parametrize("protocol", IMPORTERS)
def test_addresses_never_wrap_around(protocol):
    # Element 0 at the array, and a negative stride that reaches 2**62 bytes below address 0.
    a = tiny_array()
    with pytest.raises(ValueError, match="address space"):
        IMPORTERS[protocol](a, (2,), (-(2**59),))()


@pytest.mark.parametrize("versioned", [True, False])
def test_capsule_data_plus_byte_offset_never_wraps(versioned):
    a = tiny_array()
    # byte_offset above int64 is refused as such; within int64 the sum with data must not wrap.
    with pytest.raises(ValueError, match="does not fit in int64"):
        stridex.view(make_capsule(a, versioned=versioned, byte_offset=2**64 - 8)[0])
    # Bytes [2**63 - 1, 2**64 - 2) past the array: a valid span, at an address past 2**64.
    capsule, counter = make_capsule(
        a, versioned=versioned, shape=(2**63 - 1,), strides=(1,), dtype=(1, 8), byte_offset=2**63 - 1
    )
    with pytest.raises(ValueError, match="address space"):
        stridex.view(capsule)
    del capsule
    gc.collect()
    assert counter.calls == 1  # refused, and the deleter ran exactly once


@pytest.mark.parametrize("protocol", ["cuda_array_interface", "array_interface", "from_pointer"])
def test_pointers_near_the_top_of_the_address_space(protocol):
    make = {
        "cuda_array_interface": lambda p: CAI(tiny_array(), shape=(2,), typestr="<f8", data=(p, False)),
        "array_interface": lambda p: AI(None, shape=(2,), typestr="<f8", data=(p, False)),
    }
    if protocol == "from_pointer":
        with pytest.raises(ValueError, match="address space"):
            stridex.from_pointer(2**64 - 8, (2,), "float64")
    else:
        with pytest.raises(ValueError, match="address space"):
            stridex.view(make[protocol](2**64 - 8))


def test_array_interface_offset_plus_span_cannot_overflow():
    buf = bytearray(16)
    for offset in (2**63 - 1, 2**63 - 8, 17):
        with pytest.raises(ValueError, match=r"__array_interface__\['offset'\]"):
            stridex.view(AI(buf, shape=(2,), typestr="<f8", data=buf, offset=offset))
    with pytest.raises(ValueError, match=r"__array_interface__\['offset'\]"):
        stridex.view(AI(buf, shape=(2,), typestr="<f8", data=buf, offset=2**64))
    v = stridex.view(AI(buf, shape=(1,), typestr="<f8", data=buf, offset=8))  # the last 8 bytes: fine
    assert v.ptr == stridex.view(buf).ptr + 8


def test_huge_but_valid_byte_strides_are_exact():
    # A stride of 2**61 bytes is a valid (if unusual) description: kept exactly, never wrapped to 0.
    a = tiny_array()
    v = stridex.view(AI(a, shape=(1, 2), typestr="<f8", strides=(2**61, 8), data=(address(a), False)))
    assert v.byte_strides == (2**61, 8) and v.strides == (2**58, 1)
    np.testing.assert_array_equal(host_array(v[0]), a)


def test_derived_views_keep_the_byte_rules():
    # An empty view may take any shape, but the strides reshape invents must still fit in bytes.
    empty = stridex.view(np.zeros(0))
    assert empty.reshape(0, 2**20, 2).byte_strides == (2**24, 16, 8)
    with pytest.raises(ValueError, match="times the item size 8 overflows int64"):
        empty.reshape(0, 2**61, 2)


# ---- integers from Python: range-checked, named, never narrowed -------------------------------------

VIEW = stridex.view(np.zeros((2, 3)))


@pytest.mark.parametrize(
    "call,error,fragment",
    [
        (lambda: VIEW[2**70], IndexError, "index"),
        (lambda: VIEW[-(2**70)], IndexError, "index"),
        (lambda: VIEW[0, 2**63], IndexError, "index"),
        (lambda: VIEW.reshape(2**70), ValueError, "reshape(): shape"),
        (lambda: VIEW.reshape((2, 2**64)), ValueError, "reshape(): shape"),
        (lambda: VIEW.reshape(2.0, 3), TypeError, "reshape(): shape"),
        (lambda: VIEW.permute(1 + 2**32, 0), ValueError, "permute(): axis 4294967297"),
        (lambda: VIEW.permute(2**70, 0), ValueError, "permute(): axes"),
        (lambda: VIEW.permute(True, 0), TypeError, "permute(): axes"),
        (lambda: VIEW.squeeze(2**70), IndexError, "squeeze(): axis"),
        (lambda: VIEW.squeeze(1.0), TypeError, "squeeze(): axis"),
        (lambda: stridex.from_pointer(0, (0,), "uint8", device=(1, 2**40)), ValueError, "device[1]"),
        (lambda: stridex.from_pointer(0, (0,), "uint8", device=(2**31, 0)), ValueError, "device[0]"),
        (lambda: stridex.from_pointer(0, (2**64,), "uint8"), ValueError, "from_pointer(): shape"),
        (lambda: stridex.from_pointer(0, (0,), "uint8", strides=(2**64,)), ValueError, "from_pointer(): strides"),
        (lambda: stridex.from_pointer(0, [0] * 65, "uint8"), ValueError, "at most 64"),
        (lambda: stridex.Device.from_dlpack(1, 2**40), ValueError, "device_id"),
        (lambda: stridex.Dtype.from_dlpack(2**70, 32), ValueError, "code"),
        (lambda: stridex.DevicePtr(16, device=2**40), ValueError, "32 bits"),
        (lambda: stridex.view(np.zeros(2), stream=2**70), ValueError, "stream"),
        (lambda: VIEW.__dlpack__(stream=2**70), ValueError, "stream"),
        (lambda: VIEW.__dlpack__(max_version=(2**70, 0)), ValueError, "max_version"),
        (lambda: VIEW.__dlpack__(dl_device=(1, 2**70)), ValueError, "dl_device"),
    ],
)
def test_out_of_range_integers(call, error, fragment):
    with pytest.raises(error) as e:
        call()
    assert fragment in str(e.value)
    assert "bad_cast" not in str(e.value)


@pytest.mark.parametrize(
    "bad,error",
    [
        (1.5, TypeError),
        (True, TypeError),
        (-1, ValueError),
        (2**64, ValueError),
        ("0x10", TypeError),
        (np.float64(16.0), TypeError),
    ],
)
def test_addresses_are_ints_in_64_bits_everywhere(bad, error):
    # One parser for every address: DevicePtr and from_pointer used to disagree on True.
    for make in (
        lambda: stridex.from_pointer(bad, (0,), "uint8"),
        lambda: stridex.DevicePtr(bad, device=0),
        lambda: stridex.pointer_info(bad),
    ):
        with pytest.raises(error):
            make()


def test_addresses_take_index_and_int_objects():
    a = tiny_array()

    class OnlyInt:  # cuda.bindings' CUdeviceptr: __int__, no __index__
        def __int__(self):
            return address(a)

    for ptr in (address(a), np.uint64(address(a)), OnlyInt(), stridex.DevicePtr(address(a))):
        assert stridex.from_pointer(ptr, (2,), "float64", owner=a).ptr == address(a)
        assert int(stridex.DevicePtr(ptr, device=0)) == address(a)


@pytest.mark.parametrize("shape", [True, (True,), (2.0,), "2", b"\x02", 2.0])
def test_shapes_are_ints(shape):
    with pytest.raises(TypeError, match="from_pointer\\(\\): shape"):
        stridex.from_pointer(0, shape, "uint8")


def test_from_pointer_shape_int_is_one_axis():
    a = tiny_array()
    assert stridex.from_pointer(address(a), 2, "float64", owner=a).shape == (2,)
    assert stridex.from_pointer(address(a), np.int64(2), "float64", owner=a).shape == (2,)


# ---- sizes, alignments, streams and devices: the same rules (arguments.hpp) --------------------------

# Ints a user may hold in place of a Python int: each is taken where an int is.
INT_LIKES = [np.int64, np.uint32, int]


SIZE_ARGUMENTS = [
    (lambda bad: stridex.VirtualBuffer(bad), "VirtualBuffer(): size"),
    (lambda bad: stridex.VirtualBuffer(0, bad), "VirtualBuffer(): capacity"),
    (lambda bad: stridex.VirtualBuffer(0, 1 << 20, chunk_size=bad), "VirtualBuffer(): chunk_size"),
    (lambda bad: stridex.DevicePtr(0x1000, device=0).align_up(bad), "align_up(): alignment"),
    (lambda bad: stridex.DevicePtr(0x1000, device=0).align_down(bad), "align_down(): alignment"),
    (lambda bad: stridex.DevicePtr(0x1000, device=0).is_aligned(bad), "is_aligned(): alignment"),
]
BAD_SIZES = [
    (-1, ValueError, "must be >= 0, found -1"),
    (-(2**63), ValueError, "must be >= 0"),
    (2**63, ValueError, "does not fit in int64"),
    (2**64, ValueError, "does not fit in int64"),
    (True, TypeError, "must be an int, found bool"),
    (1.5, TypeError, "must be an int, found float"),
    ("16", TypeError, "must be an int, found str"),
    (None, TypeError, "must be an int, found NoneType"),
]


@pytest.mark.parametrize(
    "call,fragment,bad,error,says",
    [
        (call, fragment, *case)
        for call, fragment in SIZE_ARGUMENTS
        for case in BAD_SIZES
        # None is the default of capacity (the size) and chunk_size (capacity / 64)
        if not (case[0] is None and ("capacity" in fragment or "chunk_size" in fragment))
    ],
)
def test_sizes_are_int64_at_least_zero(call, fragment, bad, error, says):
    with pytest.raises(error) as e:
        call(bad)
    assert fragment in str(e.value) and says in str(e.value)


def test_alignments_take_int_likes():
    p = stridex.DevicePtr(0x1001, device=0)
    for kind in INT_LIKES:
        assert p.align_up(kind(256)) == 0x1100
        assert p.align_down(kind(256)) == 0x1000
        assert p.align_up(kind(256)).is_aligned(kind(256))


@pytest.mark.skipif(stridex.cuda_available(), reason="shows the sizes got past parsing by the driver's absence")
def test_virtual_buffer_takes_int_like_sizes():
    for kind in INT_LIKES:
        with pytest.raises(RuntimeError, match="libcuda.so.1"):  # parsed: then the driver is missing
            stridex.VirtualBuffer(kind(1 << 20), capacity=kind(1 << 21), chunk_size=kind(1 << 20))


@pytest.mark.parametrize(
    "bad,error,says",
    [
        (0, ValueError, "0 is forbidden"),
        (-2, ValueError, "must be -1 (none), 1, 2 or a stream handle, found -2"),
        (2**63, ValueError, "does not fit in int64"),
        (True, TypeError, "must be an int, found bool"),
        (1.5, TypeError, "must be an int, found float"),
        (None, TypeError, "must be an int, found NoneType"),
    ],
)
def test_with_stream_takes_stream_ints_as_dlpack_does(bad, error, says):
    with pytest.raises(error) as e:
        VIEW._with_stream(bad)
    assert "View._with_stream(): stream" in str(e.value) and says in str(e.value)


def test_with_stream_takes_int_likes():
    for kind in INT_LIKES:
        assert VIEW._with_stream(kind(7)).stream == 7
    assert VIEW._with_stream(np.int64(-1)).stream is None  # -1: nothing pending


ANY_DEVICE = [  # arguments that may name any kind of memory: a bare int says which kind nowhere
    lambda d: stridex.from_pointer(0, (0,), "uint8", device=d),
    lambda d: stridex.empty(2, "uint8", device=d),
    lambda d: VIEW.copy(device=d),
    lambda d: VIEW.to(d),
]
CUDA_DEVICE = [  # arguments that name CUDA devices anyway: an int is a CUDA ordinal
    lambda d: stridex.DevicePtr(16, device=d),
    lambda d: stridex.VirtualBuffer(0, 1 << 20, device=d),
    lambda d: stridex.VirtualBuffer(0, 1 << 20, devices=[d]),
]
BAD_DEVICES = [
    (True, TypeError, "must be a device"),
    (1.5, TypeError, "must be a device"),
    ([1, 0], TypeError, "must be a device"),  # a pair is a tuple, as __dlpack_device__ gives
    ((1, 0, 0), TypeError, "must be a (device_type, device_id) pair, found a tuple of 3 items"),
    ((2**31, 0), ValueError, "[0]"),
    ((1, 2**40), ValueError, "[1]"),
    ((True, 0), TypeError, "[0] must be an int"),
    ("gpu:0", ValueError, "invalid device"),
    ((99, 0), BufferError, "unsupported DLPack device type 99"),  # as __dlpack_device__ answers are
    ((2, -1), ValueError, "device id must be >= 0"),
]


@pytest.mark.parametrize(
    "make,bad,error,says",
    [
        *[(make, *case) for make in ANY_DEVICE + CUDA_DEVICE for case in BAD_DEVICES],
        *[(make, 0, TypeError, "must be a device") for make in ANY_DEVICE],
        *[(make, 2**40, ValueError, "does not fit in int32") for make in CUDA_DEVICE],
        *[(make, -1, ValueError, "device id must be >= 0") for make in CUDA_DEVICE],
    ],
)
def test_devices_are_parsed_alike_everywhere(make, bad, error, says):
    # One parser for every device argument: it used to be three, each taking its own spellings.
    with pytest.raises(error) as e:
        make(bad)
    assert says in str(e.value)


def test_device_spellings_agree():
    # A stridex.Device, a name and a DLPack pair say the same; an int is a CUDA ordinal.
    for spelling in (stridex.Device("cpu"), "cpu", (1, 0), (np.int32(1), np.int64(0))):
        assert stridex.empty(2, "uint8", device=spelling).device == stridex.Device("cpu")
        assert VIEW.to(spelling) is VIEW
        assert VIEW.copy(device=spelling).device == stridex.Device("cpu")
    for ordinal in (3, np.int64(3)):
        assert stridex.DevicePtr(16, device=ordinal).device == stridex.Device("cuda:3")
        assert stridex.DevicePtr(16, device=(2, ordinal)).device == stridex.Device("cuda:3")
    with pytest.raises(ValueError, match="must be a CUDA device, found cpu"):
        stridex.VirtualBuffer(0, 1 << 20, device=(1, 0))


# ---- dtypes: byte order is never guessed ------------------------------------------------------------


@pytest.mark.parametrize("dtype", [">f4", np.dtype(">i8"), np.dtype(">c8"), np.zeros(1, ">f8")])
def test_from_pointer_refuses_non_native_byte_order(dtype):
    a = np.zeros(2, ">f8")
    with pytest.raises(ValueError, match="byte order"):
        stridex.from_pointer(address(a), (1,), dtype, owner=a)


@pytest.mark.parametrize(
    "dtype", ["<f4", "=f4", np.float32, np.dtype("f4"), "float32", "stridex.Dtype", np.zeros(1, np.float32)]
)
def test_from_pointer_native_dtypes(dtype):
    if isinstance(dtype, str) and dtype == "stridex.Dtype":
        dtype = stridex.Dtype("float32")  # made here: a parameter would outlive the module (nanobind's leak check)
    a = np.arange(2, dtype=np.float32)
    v = stridex.from_pointer(address(a), (2,), dtype, owner=a)
    assert v.dtype == "float32"
    np.testing.assert_array_equal(host_array(v), a)


# ---- messages name the key at fault and stay short --------------------------------------------------

HUGE = tuple(range(10**6))


@pytest.mark.parametrize(
    "make,fragment",
    [
        (lambda: AI(None, shape=HUGE, typestr="|u1", data=(0, False)), "__array_interface__['shape']"),
        (lambda: CAI(tiny_array(), shape=HUGE), "__cuda_array_interface__['shape']"),
        (lambda: AI(None, shape=(2,), typestr="<" + "f" * 10**6, data=(0, False)), "__array_interface__['typestr']"),
        (lambda: AI(None, shape=(2,), typestr="<f8", data=(HUGE, False)), "__array_interface__['data']"),
        (lambda: AI(None, shape=(2,), typestr="<f8", data=HUGE), "__array_interface__"),
        (lambda: AI(None, shape=(2,), typestr="<f8", strides=HUGE, data=(16, False)), "__array_interface__['strides']"),
        (lambda: CAI(tiny_array(), strides=(8,) * 10**6), "__cuda_array_interface__['strides']"),
        (lambda: CAI(tiny_array(), version=HUGE), "__cuda_array_interface__['version']"),
        (lambda: CAI(tiny_array(), stream=HUGE), "__cuda_array_interface__['stream']"),
    ],
)
def test_interface_errors_name_the_key_and_stay_short(make, fragment):
    with pytest.raises((ValueError, TypeError, BufferError)) as e:
        stridex.view(make())
    assert fragment in str(e.value)
    assert len(str(e.value)) < 600


@pytest.mark.parametrize(
    "call",
    [
        lambda: stridex.from_pointer(0, (2,), "x" * 10**6),
        lambda: stridex.Dtype("x" * 10**6),
        lambda: stridex.Dtype.from_typestr("<" + "f" * 10**6),
        lambda: stridex.Dtype.from_buffer_format("Z" * 10**6),
        lambda: stridex.Device("cuda:" + "1" * 10**6),
        lambda: stridex.view(make_capsule(tiny_array(), name="n" * 10**5)[0]),
        lambda: VIEW.reshape(2**100000),
        lambda: stridex.view(type("x" * 10**5, (), {})()),  # a class name is foreign text too
        lambda: stridex.from_pointer(0, type("y" * 10**5, (), {})(), "uint8"),
    ],
)
def test_other_messages_stay_short(call):
    with pytest.raises((ValueError, TypeError, BufferError)) as e:
        call()
    assert len(str(e.value)) < 600


# ---- a protocol attribute set to None is no protocol -------------------------------------------------


class NoDLPack(np.ndarray):
    __dlpack__ = None


class NoDLPackDevice(np.ndarray):
    __dlpack__ = None
    __dlpack_device__ = None


class NoInterfaces(bytearray):
    __array_interface__ = None
    __cuda_array_interface__ = None
    __dlpack_c_exchange_api__ = None
    __c_dlpack_exchange_api__ = None


@pytest.mark.parametrize("kind", [NoDLPack, NoDLPackDevice])
def test_none_dlpack_falls_through_to_the_next_protocol(kind):
    a = np.arange(3.0).view(kind)
    v = stridex.view(a)
    assert v.ptr == address(a) and v.shape == (3,) and v.dtype == "float64"


def test_none_interfaces_fall_through_to_the_buffer_protocol():
    b = NoInterfaces(b"abc")
    v = stridex.view(b)
    assert v.shape == (3,) and v.dtype == "uint8" and not v.readonly


def test_instance_dlpack_none_falls_through():
    a = np.arange(4, dtype=np.int32)

    class Holder:
        pass

    h = Holder()
    h.__dlpack__ = None
    h.__array_interface__ = a.__array_interface__
    h.keep = a
    assert stridex.view(h).ptr == address(a)


# ---- the exchange API attribute is never dereferenced blindly ----------------------------------------

# A private prototype: ctypes.pythonapi.PyCapsule_New is shared, and other tests set its argtypes.
_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi)
)


class Header(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("prev_api", ctypes.c_void_p)]


class API(ctypes.Structure):
    _fields_ = [("header", Header)] + [
        (f, ctypes.c_void_p) for f in ("allocator", "from_py", "to_py", "dltensor_from_py", "work_stream")
    ]


def looping_chain():
    h = Header(2, 0, None)
    h.prev_api = ctypes.addressof(h)  # major 2 pointing at itself: a walk to major 1 never ends
    return h


def garbage_functions():
    api = API()
    api.header.major, api.header.minor = 1, 3
    api.from_py = api.work_stream = 0x1000  # mapped nowhere: not code
    return api


_KEEP = []


def data_as_functions():
    # Addresses inside a loaded object that are data, not code: a type object.
    api = API()
    api.header.major, api.header.minor = 1, 3
    api.from_py = api.work_stream = id(int)
    return api


def as_address(struct):
    _KEEP.append(struct)
    return ctypes.addressof(struct)


def as_capsule(struct, name=b"dlpack_exchange_api"):
    _KEEP.append(struct)
    return _new_capsule(ctypes.addressof(struct), name, None)


@pytest.mark.parametrize(
    "attribute,value",
    [
        ("__c_dlpack_exchange_api__", True),
        ("__c_dlpack_exchange_api__", 1),
        ("__c_dlpack_exchange_api__", 12345),
        ("__c_dlpack_exchange_api__", 2**64 - 8),
        ("__c_dlpack_exchange_api__", -1),
        ("__c_dlpack_exchange_api__", 1.5),
        ("__c_dlpack_exchange_api__", "garbage"),
        ("__c_dlpack_exchange_api__", id(_KEEP)),
        ("__c_dlpack_exchange_api__", id(stridex.View)),
        ("__c_dlpack_exchange_api__", lambda: as_address(looping_chain())),
        ("__c_dlpack_exchange_api__", lambda: as_address(garbage_functions())),
        ("__c_dlpack_exchange_api__", lambda: as_address(data_as_functions())),
        ("__dlpack_c_exchange_api__", True),
        ("__dlpack_c_exchange_api__", object()),
        ("__dlpack_c_exchange_api__", lambda: as_capsule(garbage_functions(), b"not_an_exchange_api")),
        ("__dlpack_c_exchange_api__", lambda: as_capsule(looping_chain())),
        ("__dlpack_c_exchange_api__", lambda: as_capsule(garbage_functions())),
        ("__dlpack_c_exchange_api__", lambda: as_capsule(data_as_functions())),
    ],
)
def test_garbage_exchange_apis_are_no_api(attribute, value):
    if callable(value):
        value = value()
    a = np.arange(4.0)

    def on_alarm(*_):
        raise TimeoutError("the exchange API walk did not end")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(10)
    try:
        kind = type("Garbage", (), {attribute: value, "__array_interface__": a.__array_interface__})
        v = stridex.view(kind())  # no crash, no hang: the next protocol answers
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert v.ptr == address(a) and v.shape == (4,)


def test_real_exchange_apis_still_work():
    # The checks accept the genuine article in both forms (capsule and int), chained or not.
    for kind in ("ExchangeProducer", "ExchangeProducerInt", "ExchangeProducerChained"):
        a = np.arange(3.0)
        assert stridex.view(getattr(_testing, kind)(a)).ptr == address(a)
    capsule = stridex.View.__dlpack_c_exchange_api__
    kind = type("Borrowed", (), {"__dlpack_c_exchange_api__": capsule})
    with pytest.raises(BufferError, match="expected a stridex.View"):
        stridex.view(kind())


# ---- View.__new__ cannot make a View that crashes ----------------------------------------------------


class SubView(stridex.View):
    pass


def uninitialised(kind):
    stridex.view(np.zeros(3))  # leave an instance in nanobind's pool: __new__ reuses its memory
    gc.collect()
    return kind.__new__(kind)


@pytest.mark.parametrize("kind", [stridex.View, SubView])
@pytest.mark.parametrize(
    "use",
    [
        lambda v: v.__dlpack__(),
        lambda v: v.__dlpack__(max_version=(1, 3)),
        lambda v: v.__dlpack_device__(),
        lambda v: v.__array_interface__,
        lambda v: v.__cuda_array_interface__,
        lambda v: memoryview(v),
        lambda v: stridex.view(v),
        lambda v: v.shape,
        lambda v: v[0],
        lambda v: repr(v),
        lambda v: np.from_dlpack(v),
    ],
)
def test_uninitialised_views_raise_type_errors(kind, use):
    v = uninitialised(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nanobind warns of the uninitialised instance
        with pytest.raises(TypeError):
            use(v)
    del v
    gc.collect()


@pytest.mark.parametrize("kind", [stridex.View, SubView])
def test_uninitialised_views_through_the_exchange_api(kind):
    v = uninitialised(kind)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    with pytest.raises(TypeError, match="holds no view"):
        FromPyObject(exchange_api().managed_tensor_from_py_object_no_sync)(v, ctypes.byref(out))
    assert not out


# ---- cyclic garbage collection --------------------------------------------------------------------


class WithInterface:
    def __init__(self, **interface):
        self.keep = np.arange(4.0)
        self.__array_interface__ = dict(shape=(4,), typestr="<f8", data=(address(self.keep), False), version=3)


class CAIHolder:
    def __init__(self):
        self.keep = np.arange(4.0)
        self.__cuda_array_interface__ = dict(shape=(4,), typestr="<f8", data=(address(self.keep), False), version=3)


class BytesWithDict(bytearray):
    pass


@pytest.mark.parametrize(
    "make",
    [WithInterface, CAIHolder, lambda: BytesWithDict(b"abcd")],
    ids=["array_interface", "cuda_array_interface", "buffer"],
)
def test_a_view_stored_on_its_owner_is_collected(make):
    h = make()
    h.v = stridex.view(h)
    assert gc.is_tracked(h.v)
    ref = weakref.ref(h)
    del h
    gc.collect()
    assert ref() is None


def test_collecting_a_cycle_leaves_other_views_intact():
    h = WithInterface()
    h.v = stridex.view(h)
    survivor = h.v[1:]  # shares the owner: keeps the memory alive on its own
    ref = weakref.ref(h)
    del h
    gc.collect()
    np.testing.assert_array_equal(host_array(survivor), [1.0, 2.0, 3.0])
    del survivor
    gc.collect()
    assert ref() is None
