"""stridex.DevicePtr, pointer_info and the CUDA queries: everything that runs without a GPU.

DevicePtr exists for the CUdeviceptr bug report: cuda.bindings' CUdeviceptr cannot be offset (`ptr + size * i` is a
TypeError) nor compared with an int (O3 in docs/protocols.md). A DevicePtr does both and goes anywhere an
int goes.
"""

import operator

import numpy as np
import pytest

import stridex
from stridex import Device, DevicePtr

CUDA0 = Device("cuda:0")
CUDA1 = Device("cuda:1")
BASE = 0x7F2A00000000


class FakeCUdeviceptr:
    """Shaped like cuda.bindings.driver.CUdeviceptr: __int__ only, no __index__, no __eq__."""

    def __init__(self, value=0):
        self._value = operator.index(value)  # as cuda.bindings' Cython cast does

    def __int__(self):
        return self._value


# ---- construction -------------------------------------------------------------------------------


def test_from_int_and_device_forms():
    for device in (0, "cuda:0", CUDA0):
        p = DevicePtr(BASE, device=device)
        assert p.address == BASE
        assert p.device == CUDA0
    assert DevicePtr(BASE, 1).device == CUDA1
    assert DevicePtr(BASE, device="cuda_host").device == Device("cuda_host")


def test_from_objects_with_int_or_index():
    assert DevicePtr(FakeCUdeviceptr(BASE), device=0) == BASE
    assert DevicePtr(np.uint64(BASE), device=0) == BASE
    q = DevicePtr(DevicePtr(BASE, device=1))  # a DevicePtr keeps its device
    assert q.device == CUDA1


def test_default_device_asks_the_memory():
    # Host memory is cpu whether or not there is a driver (without one no memory is CUDA memory).
    a = np.zeros(4)
    assert DevicePtr(a.ctypes.data).device == Device("cpu")


@pytest.mark.parametrize("bad", [1.5, "0x10", None, [1]])
def test_non_integers_are_type_errors(bad):
    with pytest.raises(TypeError):
        DevicePtr(bad, device=0)


@pytest.mark.parametrize("bad", [-1, 2**64, -(2**70)])
def test_addresses_outside_64_bits_are_value_errors(bad):
    with pytest.raises(ValueError, match=r"\[0, 2\*\*64\)"):
        DevicePtr(bad, device=0)


def test_bad_devices():
    with pytest.raises(TypeError):
        DevicePtr(BASE, device=1.0)
    with pytest.raises(ValueError):
        DevicePtr(BASE, device=-1)
    with pytest.raises(ValueError, match="32 bits"):
        DevicePtr(BASE, device=2**40)


# ---- int interop ----------------------------------------------------------------------------------


def test_int_index_and_formatting():
    p = DevicePtr(BASE, device=0)
    assert int(p) == BASE
    assert operator.index(p) == BASE
    assert hex(p) == hex(BASE)
    assert f"{p:#x}" == hex(BASE)
    assert "%x" % p == format(BASE, "x")
    assert [10, 20, 30][DevicePtr(2, device=0)] == 30  # goes where only ints go
    assert bool(p) and not DevicePtr(0, device=0)


def test_equality_and_hash_match_the_int():
    p = DevicePtr(BASE, device=0)
    assert p == BASE and BASE == p
    assert p != BASE + 1
    assert p == np.uint64(BASE)
    assert hash(p) == hash(BASE)
    assert {BASE: "x"}[p] == "x"
    assert {p: "y"}[BASE] == "y"
    assert len({p, BASE, DevicePtr(BASE, device=0)}) == 1
    assert p != float(BASE)  # floats are no addresses
    assert p != None  # noqa: E711
    assert p != FakeCUdeviceptr(BASE)  # it has no __index__: not an int to compare with
    assert p != -1


def test_equality_between_pointers_includes_the_device():
    assert DevicePtr(BASE, device=0) == DevicePtr(BASE, device=0)
    assert DevicePtr(BASE, device=0) != DevicePtr(BASE, device=1)


# ---- arithmetic ----------------------------------------------------------------------------------


def test_byte_arithmetic():
    p = DevicePtr(BASE, device=1)
    assert p + 16 == BASE + 16
    assert 16 + p == BASE + 16
    assert p - 16 == BASE - 16
    assert p + -16 == BASE - 16
    assert (p + 16).device == CUDA1
    assert isinstance(p + 16, DevicePtr)
    q = p
    q += 64  # rebinds, like an int: p is untouched
    q -= 32
    assert q - p == 32 and isinstance(q - p, int)
    assert p - q == -32
    assert int(p) == BASE


def test_the_seed_loop():
    # the CUdeviceptr bug report: cuMemMap(ptr + size * i, ...) for every chunk, written naturally in Python.
    ptr, size = DevicePtr(BASE, device=0), 2 << 20
    offsets = [ptr + size * i for i in range(4)]
    assert [int(o) - BASE for o in offsets] == [0, size, 2 * size, 3 * size]
    # and into a cuda.bindings-style wrapper, through __index__
    assert [int(FakeCUdeviceptr(o)) for o in offsets] == [int(o) for o in offsets]


def test_out_of_range_results_are_value_errors():
    top = DevicePtr(2**64 - 1, device=0)
    with pytest.raises(ValueError, match="64-bit address space"):
        top + 1
    with pytest.raises(ValueError, match="64-bit address space"):
        DevicePtr(0x10, device=0) - 0x20
    with pytest.raises(ValueError):
        DevicePtr(1, device=0) + 2**70
    with pytest.raises(ValueError):
        DevicePtr(1, device=0) - 2**70
    assert DevicePtr(1, device=0) + 2**63 == 2**63 + 1  # beyond int64, still an address
    assert top - (2**64 - 1) == 0


def test_difference_beyond_int64_is_a_value_error():
    with pytest.raises(ValueError):
        DevicePtr(2**64 - 1, device=0) - DevicePtr(0, device=0)


def test_mixing_devices_is_a_value_error():
    with pytest.raises(ValueError, match="different devices"):
        DevicePtr(BASE, device=0) - DevicePtr(BASE, device=1)
    with pytest.raises(ValueError, match="different devices"):
        DevicePtr(BASE, device=0) < DevicePtr(BASE + 1, device=1)


@pytest.mark.parametrize("bad", [1.5, "1", None])
def test_non_int_operands_are_type_errors(bad):
    p = DevicePtr(BASE, device=0)
    with pytest.raises(TypeError):
        p + bad
    with pytest.raises(TypeError):
        p - bad


def test_pointer_plus_pointer_and_int_minus_pointer_are_type_errors():
    p = DevicePtr(BASE, device=0)
    with pytest.raises(TypeError):
        p + p
    with pytest.raises(TypeError):
        5 - p


def test_ordering_with_ints_and_pointers():
    p = DevicePtr(BASE, device=0)
    assert p < BASE + 1 and p <= BASE and p > BASE - 1 and p >= BASE
    assert p < p + 1 and p + 1 > p
    assert sorted([p + 2, p, p + 1]) == [p, p + 1, p + 2]


def test_alignment():
    p = DevicePtr(0x1001, device=0)
    assert p.align_up(256) == 0x1100
    assert p.align_down(256) == 0x1000
    assert p.align_up(256).is_aligned(256)
    assert not p.is_aligned(2)
    assert DevicePtr(10, device=0).align_up(12) == 12  # any positive alignment
    assert isinstance(p.align_up(16), DevicePtr)
    with pytest.raises(ValueError, match="positive"):
        p.align_up(0)
    with pytest.raises(ValueError):
        DevicePtr(2**64 - 1, device=0).align_up(16)


def test_repr():
    assert repr(DevicePtr(BASE, device=0)) == "DevicePtr(0x7f2a00000000, device=cuda:0)"
    assert str(DevicePtr(16, device="cuda:3")) == "DevicePtr(0x10, device=cuda:3)"


# ---- queries that never raise ---------------------------------------------------------------------


def test_cuda_queries_answer_without_a_driver():
    assert isinstance(stridex.cuda_available(), bool)
    assert stridex.cuda_available() == (stridex.device_count() > 0)


def test_pointer_info_of_numpy_memory_is_host():
    a = np.arange(16, dtype=np.float32)
    for ptr in (a.ctypes.data, DevicePtr(a.ctypes.data), FakeCUdeviceptr(a.ctypes.data)):
        info = stridex.pointer_info(ptr)
        assert info.memory_type == "host"
        assert info.device == Device("cpu")
        assert info.base is None and info.size == 0
        assert info.host_accessible
        assert info.device_ordinal == -1


def test_pointer_info_rejects_non_addresses():
    with pytest.raises(TypeError):
        stridex.pointer_info("0x1000")


@pytest.mark.skipif(stridex.cuda_available(), reason="checks the message shown without a CUDA driver")
def test_virtual_buffer_without_driver_says_what_is_missing():
    with pytest.raises(RuntimeError, match="libcuda.so.1"):
        stridex.VirtualBuffer(1 << 20)


def test_virtual_buffer_argument_errors():
    with pytest.raises(ValueError, match="not both"):
        stridex.VirtualBuffer(0, 1 << 20, device=0, devices=[0])
    with pytest.raises(ValueError, match=">= 0"):
        stridex.VirtualBuffer(-1, 1 << 20)
    with pytest.raises(ValueError, match="CUDA device"):
        stridex.VirtualBuffer(0, 1 << 20, device="cpu")
    with pytest.raises(TypeError):
        stridex.VirtualBuffer(0, 1 << 20, device=1.5)
