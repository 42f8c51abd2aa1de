"""The caller's allocator and the pools' introspection on the CPU (docs/memory.md): allocator=,
like=, the process default (set_allocator, using_allocator), the allocator protocol's errors, and
memory_stats / empty_cache without a GPU. GPU behaviour: test_memory_gpu.py."""

from __future__ import annotations

import copy
import gc

import numpy as np
import pytest

import stridex
from stridex import _memory


class Recording:
    """An allocator of host memory that records its calls and counts releases."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str, int]] = []
        self.released = 0

    def allocate(self, nbytes: int, device: str, stream: int) -> tuple[int, object]:
        self.calls.append((nbytes, device, stream))
        block = np.zeros(nbytes, np.uint8)
        owner = _Keep(block, self)
        return block.ctypes.data, owner


class _Keep:
    def __init__(self, block: np.ndarray, parent: Recording) -> None:
        self.block, self.parent = block, parent

    def __del__(self) -> None:
        self.parent.released += 1


@pytest.fixture(autouse=True)
def _default_restored():
    yield
    stridex.set_allocator("stridex")


def test_every_allocating_call_takes_the_allocator_and_the_memory_is_its():
    a = Recording()
    src = stridex.view(np.arange(12, dtype=np.float32).reshape(3, 4))
    e = stridex.empty((2, 5), "int16", allocator=a)
    t = src.T.contiguous(allocator=a)
    c = src.copy(order="F", allocator=a)
    assert a.calls == [(20, "cpu", 1), (48, "cpu", 1), (48, "cpu", 1)]
    assert e.shape == (2, 5) and e.device.type == "cpu"
    np.testing.assert_array_equal(np.asarray(t), np.arange(12, dtype=np.float32).reshape(3, 4).T)
    np.testing.assert_array_equal(np.asarray(c), np.arange(12, dtype=np.float32).reshape(3, 4))
    assert c.strides == (1, 3)
    assert a.released == 0
    del e, t, c
    gc.collect()
    assert a.released == 3


def test_the_view_aliases_the_allocators_memory():
    blocks: list[np.ndarray] = []

    class Keeps:
        def allocate(self, nbytes, device, stream):
            blocks.append(np.zeros(nbytes, np.uint8))
            return blocks[-1].ctypes.data, blocks[-1]

    v = stridex.empty((4,), "float32", allocator=Keeps())
    assert v.ptr == blocks[0].ctypes.data
    stridex.copy(v, np.array([1, 2, 3, 4], np.float32))
    np.testing.assert_array_equal(blocks[0].view(np.float32), [1, 2, 3, 4])


def test_the_stream_argument_reaches_the_allocator():
    a = Recording()
    stridex.empty((1,), "uint8", stream=stridex.NO_SYNC, allocator=a)
    stridex.empty((1,), "uint8", stream=0x5000, allocator=a)
    assert [c[2] for c in a.calls] == [-1, 0x5000]


def test_set_allocator_makes_a_process_default_and_stridex_restores_the_pools():
    a = Recording()
    src = stridex.view(np.arange(6, dtype=np.int32))
    assert stridex.get_allocator() == "stridex"
    stridex.set_allocator(a)
    assert stridex.get_allocator() is a
    src[::2].copy()
    copy.deepcopy(src[::2])
    stridex.empty(3, "int8")
    assert [c[0] for c in a.calls] == [12, 12, 3]
    # An explicit 'stridex' wins over the default.
    stridex.empty(3, "int8", allocator="stridex")
    assert len(a.calls) == 3
    stridex.set_allocator("stridex")
    stridex.empty(3, "int8")
    assert len(a.calls) == 3 and stridex.get_allocator() == "stridex"


def test_using_allocator_restores_the_previous_default_also_on_an_exception():
    outer, inner = Recording(), Recording()
    stridex.set_allocator(outer)
    with pytest.raises(KeyError):
        with stridex.using_allocator(inner):
            assert stridex.get_allocator() is inner
            stridex.empty(1, "uint8")
            raise KeyError("boom")
    assert stridex.get_allocator() is outer
    assert len(inner.calls) == 1
    with stridex.using_allocator("stridex"):
        stridex.empty(1, "uint8")
    assert outer.calls == []


def test_like_chooses_the_framework_of_the_array(monkeypatch):
    made: list[Recording] = []

    def factory() -> Recording:
        made.append(Recording())
        return made[-1]

    monkeypatch.setitem(_memory._BUILTIN, "fakefw", factory)
    monkeypatch.setattr(_memory, "_made", {})
    FakeArray = type("FakeArray", (), {"__module__": "fakefw.core"})
    stridex.empty((2,), "float64", like=FakeArray())
    stridex.view(np.zeros((2, 2))).T.contiguous(like=FakeArray())
    assert len(made) == 1 and [c[0] for c in made[0].calls] == [16, 32]
    # Another framework's array (numpy here): stridex's pools.
    stridex.empty((2,), "float64", like=np.zeros(1))
    assert len(made[0].calls) == 2
    # allocator= wins over like=.
    other = Recording()
    stridex.empty((1,), "uint8", allocator=other, like=FakeArray())
    assert len(other.calls) == 1 and len(made[0].calls) == 2


def test_an_unknown_allocator_name_or_object_is_refused_by_name():
    with pytest.raises(ValueError, match=r"allocator must be 'stridex', 'torch', 'cupy', 'rmm' .* found 'tensorflow'"):
        stridex.empty(1, "uint8", allocator="tensorflow")
    with pytest.raises(TypeError, match=r"allocator must be .* found int"):
        stridex.view(np.zeros(2)).copy(allocator=3)
    with pytest.raises(TypeError, match="found object"):
        stridex.set_allocator(object())
    assert stridex.get_allocator() == "stridex"


def test_a_builtin_whose_framework_is_missing_says_so(monkeypatch):
    def missing():
        raise ImportError("No module named 'fakefw'")

    monkeypatch.setitem(_memory._BUILTIN, "fakefw", missing)
    monkeypatch.setattr(_memory, "_made", {})
    with pytest.raises(ValueError, match=r"allocator='fakefw' needs fakefw, which cannot be imported"):
        stridex.empty(1, "uint8", allocator="fakefw")


def test_an_allocator_breaking_the_protocol_is_a_typed_error():
    class Wrong:
        def allocate(self, nbytes, device, stream):
            return 1234

    class Null:
        def allocate(self, nbytes, device, stream):
            return 0, None

    class Raises:
        def allocate(self, nbytes, device, stream):
            raise OSError("pool exhausted")

    with pytest.raises(TypeError, match=r"allocate\(\) must return \(address, keepalive\), found 1234"):
        stridex.empty(1, "uint8", allocator=Wrong())
    with pytest.raises(MemoryError, match="returned a NULL address for 8 bytes on cpu"):
        stridex.view(np.zeros(1)).copy(allocator=Null())
    with pytest.raises(OSError, match="pool exhausted"):
        stridex.empty(1, "uint8", allocator=Raises())


def test_memory_stats_names_the_pooled_devices():
    with pytest.raises(ValueError, match="stridex pools memory of cpu, cuda:N and cuda_host, not cuda_managed"):
        stridex.memory_stats("cuda_managed")
    with pytest.raises(ValueError, match="stridex pools memory of cpu, cuda:N and cuda_host, not cuda_managed"):
        stridex.empty_cache("cuda_managed")


def test_large_cpu_results_come_from_the_pageable_pool_and_are_reused():
    stridex.empty_cache("cpu")
    base = stridex.memory_stats("cpu")
    src = stridex.view(np.arange(1 << 19, dtype=np.float32))  # 2 MiB
    a = src[::-1].copy()
    ptr = a.ptr
    s = stridex.memory_stats("cpu")
    assert s["in_use"] == base["in_use"] + (2 << 20) and s["allocations"] == base["allocations"] + 1
    np.testing.assert_array_equal(np.asarray(a), np.arange(1 << 19, dtype=np.float32)[::-1])
    del a
    b = stridex.empty((1 << 19,), "float32")
    assert b.ptr == ptr  # the cached block, already faulted in
    del b
    assert stridex.memory_stats("cpu")["reserved"] >= 2 << 20
    stridex.empty_cache("cpu")
    assert stridex.memory_stats("cpu")["reserved"] == 0
    small = stridex.empty((16,), "float32")  # small results: the core's aligned allocation
    assert stridex.memory_stats("cpu")["allocations"] == base["allocations"]
    del small


@pytest.mark.skipif(stridex.cuda_available(), reason="checks the message given without a CUDA driver")
def test_without_a_driver_the_pools_say_why_and_empty_cache_has_nothing_to_do():
    with pytest.raises(RuntimeError, match="CUDA driver"):
        stridex.memory_stats(0)
    with pytest.raises(RuntimeError, match="CUDA driver"):
        stridex.memory_stats("cuda_host")
    assert stridex.empty_cache() is None
