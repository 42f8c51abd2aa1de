"""The caller's allocator (docs/memory.md): the built-in allocators, the process default.

Every allocating call (``stridex.empty``, ``View.copy``, ``contiguous``, ``to``, the copying
``__dlpack__`` export, ``copy.deepcopy``) takes its memory from stridex's stream-ordered pools unless
an allocator is named. An allocator is ``'stridex'`` (the pools), ``'torch'``, ``'cupy'``, ``'rmm'``,
or any object with the method::

    allocate(nbytes: int, device: str, stream: int) -> tuple[int, object]

``device`` is ``'cpu'``, ``'cuda:N'``, ``'cuda_host'`` or ``'cuda_managed'``; ``stream`` the encoded
stream the memory is first written on (1: the legacy default stream, 2: the per-thread default
stream, else a CUstream handle). It returns the address of at least ``nbytes`` bytes and an object
that keeps them alive: stridex holds that object until the last View of the memory goes, then drops
it (the memory returns to the allocator, on whatever thread drops it).
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator
from typing import Any, Protocol

from . import _stridex

# Encoded streams (docs/protocols.md): -1 (no stream: the call completes its copy itself) and 1 both
# mean the legacy default stream to an allocator.
_NONE, _LEGACY = -1, 1


class Allocator(Protocol):
    """What ``allocator=`` takes besides the built-in names."""

    def allocate(self, nbytes: int, device: str, stream: int) -> tuple[int, object]: ...


def _ordinal(device: str) -> int:
    return int(device.partition(":")[2] or 0)


class TorchAllocator:
    """torch's caching allocator: the memory is a uint8 tensor, allocated on the copy's stream, so it
    belongs to torch's pool, shows in ``torch.cuda.memory_allocated`` and returns to that stream's
    pool when the last View goes (torch's rule: use on another stream needs ``record_stream``)."""

    name = "torch"

    def __init__(self) -> None:
        # import_module: the frameworks are optional, and their stubs are not the package's concern
        torch: Any = importlib.import_module("torch")

        self._torch = torch

    def allocate(self, nbytes: int, device: str, stream: int) -> tuple[int, object]:
        torch = self._torch
        if device == "cpu":
            t = torch.empty(nbytes, dtype=torch.uint8)
        elif device == "cuda_host":
            t = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        elif device.startswith("cuda:"):
            dev = torch.device("cuda", _ordinal(device))
            if stream in (_NONE, _LEGACY):
                s = torch.cuda.default_stream(dev)
            else:
                s = torch.cuda.ExternalStream(stream, device=dev)
            with torch.cuda.stream(s):
                t = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        else:
            raise ValueError(f"allocator='torch' allocates cpu, cuda:N and cuda_host memory, not {device}")
        return t.data_ptr(), t

    def __repr__(self) -> str:
        return "stridex allocator 'torch'"


class CupyAllocator:
    """CuPy's memory pools: ``cupy.cuda.alloc`` (the current MemoryPool, which keeps a free list per
    stream) on the copy's stream, ``cupy.cuda.alloc_pinned_memory`` for cuda_host."""

    name = "cupy"

    def __init__(self) -> None:
        cupy: Any = importlib.import_module("cupy")

        self._cupy = cupy

    def allocate(self, nbytes: int, device: str, stream: int) -> tuple[int, object]:
        cupy = self._cupy
        if device == "cuda_host":
            mem = cupy.cuda.alloc_pinned_memory(nbytes)
            return mem.ptr, mem
        if not device.startswith("cuda:"):
            raise ValueError(f"allocator='cupy' allocates cuda:N and cuda_host memory, not {device}")
        with cupy.cuda.Device(_ordinal(device)):
            if stream in (_NONE, _LEGACY):
                ctx: Any = cupy.cuda.Stream.null
            else:
                ctx = cupy.cuda.ExternalStream(stream)
            with ctx:
                mem = cupy.cuda.alloc(nbytes)
        return mem.ptr, mem

    def __repr__(self) -> str:
        return "stridex allocator 'cupy'"


class RmmAllocator:
    """RMM's current device resource: an ``rmm.DeviceBuffer`` on the copy's stream."""

    name = "rmm"

    def __init__(self) -> None:
        rmm: Any = importlib.import_module("rmm")

        self._rmm = rmm

    def allocate(self, nbytes: int, device: str, stream: int) -> tuple[int, object]:
        rmm = self._rmm
        if not device.startswith("cuda:"):
            raise ValueError(f"allocator='rmm' allocates cuda:N memory, not {device}")
        Stream: Any = importlib.import_module("rmm.pylibrmm.stream").Stream

        class _Handle:  # the CUDA stream protocol RMM's Stream accepts
            def __cuda_stream__(self) -> tuple[int, int]:
                return (0, 0 if stream in (_NONE, _LEGACY) else stream)

        buf = rmm.DeviceBuffer(size=nbytes, stream=Stream(_Handle()))
        return buf.ptr, buf

    def __repr__(self) -> str:
        return "stridex allocator 'rmm'"


_BUILTIN: dict[str, type] = {"torch": TorchAllocator, "cupy": CupyAllocator, "rmm": RmmAllocator}
_made: dict[str, object] = {}
_lock = threading.Lock()


def _resolve(allocator: object) -> object:
    """None for stridex's pools, else an object with ``allocate``."""
    if allocator is None or allocator == "stridex":
        return None
    if isinstance(allocator, str):
        factory = _BUILTIN.get(allocator)
        if factory is None:
            raise ValueError(
                "allocator must be 'stridex', 'torch', 'cupy', 'rmm' or an object with "
                f"allocate(nbytes, device, stream), found {allocator!r}"
            )
        with _lock:
            if allocator not in _made:
                try:
                    _made[allocator] = factory()
                except ImportError as e:
                    raise ValueError(f"allocator={allocator!r} needs {allocator}, which cannot be imported: {e}") from e
            return _made[allocator]
    if not callable(getattr(allocator, "allocate", None)):
        raise TypeError(
            "allocator must be 'stridex', 'torch', 'cupy', 'rmm' or an object with "
            f"allocate(nbytes, device, stream), found {type(allocator).__name__}"
        )
    return allocator


def _framework_of(x: object) -> str | None:
    """The built-in allocator of the framework x belongs to (None: stridex's pools)."""
    root = type(x).__module__.partition(".")[0]
    return root if root in _BUILTIN else None


def _choose(allocator: object, like: object) -> object:
    """The allocator of one call (the extension asks only when allocator= or like= is given)."""
    if allocator is not None:
        return _resolve(allocator)
    return _resolve(_framework_of(like)) if like is not None else _stridex._get_default_allocator()


def set_allocator(allocator: object) -> None:
    """Makes ``allocator`` ('stridex', 'torch', 'cupy', 'rmm' or an allocator object) the process
    default for every allocating call that names none. Process-wide (all threads)."""
    _stridex._set_default_allocator(_resolve(allocator))


def get_allocator() -> object:
    """The process default: 'stridex' (the pools) or the allocator object in use."""
    current = _stridex._get_default_allocator()
    if current is None:
        return "stridex"
    name = getattr(current, "name", None)
    return name if isinstance(current, tuple(_BUILTIN.values())) else current


@contextlib.contextmanager
def using_allocator(allocator: object) -> Iterator[None]:
    """``with stridex.using_allocator('torch'):`` the process default for the block, the previous one
    restored after it (also on an exception). Process-wide, as set_allocator: not per thread."""
    resolved = _resolve(allocator)
    previous = _stridex._get_default_allocator()
    _stridex._set_default_allocator(resolved)
    try:
        yield
    finally:
        _stridex._set_default_allocator(previous)
