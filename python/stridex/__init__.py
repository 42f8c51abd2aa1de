"""stridex: zero-copy CPU and GPU arrays across frameworks, with every detail right.

``stridex.view(obj)`` imports any array (DLPack, CUDA array interface, NumPy array interface,
buffer protocol) as a :class:`View`; a View is consumed by any framework through the same
protocols. The native core lives in ``stridex._stridex``; importing stridex imports no framework.
"""

from __future__ import annotations

from types import ModuleType as _ModuleType

from ._stridex import *  # noqa: F401,F403  (view, from_pointer, DevicePtr, VirtualBuffer, ...)
from ._stridex import (
    NO_SYNC,
    ConsumedCapsuleError,
    Device,
    DevicePtr,
    Dtype,
    NoSyncType,
    PointerInfo,
    View,
    VirtualBuffer,
)
from ._stridex import __version__ as __version__  # CMakeLists.txt's project(VERSION): the one version
from ._stridex import copy, cuda_available, device_count, device_uuid, dtype, empty, from_pointer, pointer_info, view
from ._stridex import Shortcut, set_shortcuts, shortcuts  # the framework shortcuts and their switch
from ._shortcuts import shortcuts_disabled

# Memory (docs/memory.md): the caller's allocator and the pools' introspection.
from ._memory import get_allocator, set_allocator, using_allocator
from ._stridex import empty_cache, memory_stats

# The hand-over race sanitizer (docs/sanitizer.md).
from ._sanitize import StreamRaceError, StreamRaceWarning, sanitize, sanitizer_counts, sanitizer_reports

# Sharded arrays (docs/sharded.md): stridex.copy takes a ShardedView on either side.
from ._sharded import Piece, Shard, ShardedView, ShardLayout, reshard
from ._sharded import _install as _install_sharded

# The spellings the entry points take, as types for annotations (help() and the stubs name them).
# A submodule, left out of __all__: `from stridex import *` must not shadow the standard typing.
from . import typing as typing

# Views pickle as handles to shared memory (stridex.ipc); multiprocessing and Dask distributed
# learn about them from stridex.ipc (ipc/pickling.py) once they are imported, and stridex imports
# neither, nor stridex.ipc, until then.
from ._post_import import when_imported as _when_imported


def _register_with(module: _ModuleType) -> None:
    from .ipc import pickling

    pickling.on_import(module)


_when_imported("multiprocessing.reduction", _register_with)
_when_imported("distributed.protocol", _register_with)
_install_sharded()  # stridex.copy hands ShardedViews to the sharded copy


__all__ = [
    "NO_SYNC",
    "ConsumedCapsuleError",
    "Device",
    "DevicePtr",
    "Dtype",
    "NoSyncType",
    "PointerInfo",
    "View",
    "VirtualBuffer",
    "__version__",
    "copy",
    "cuda_available",
    "device_count",
    "device_uuid",
    "dtype",
    "empty",
    "from_pointer",
    "pointer_info",
    "view",
    "Shortcut",
    "set_shortcuts",
    "shortcuts",
    "shortcuts_disabled",
    # Memory
    "empty_cache",
    "get_allocator",
    "memory_stats",
    "set_allocator",
    "using_allocator",
    # the hand-over race sanitizer
    "StreamRaceError",
    "StreamRaceWarning",
    "sanitize",
    "sanitizer_counts",
    "sanitizer_reports",
    # sharded arrays
    "Piece",
    "Shard",
    "ShardLayout",
    "ShardedView",
    "reshard",
]
