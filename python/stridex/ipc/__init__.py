"""stridex Views across processes: pickled as handles to their memory, never as copies.

``pickle.dumps(view)`` (and ``multiprocessing``, which pickles through ``ForkingPickler``) turns a
View into a handle to its memory; unpickling in another process on the same machine gives a View
of the *same* memory, with its shape, strides, dtype, device and read-only flag:

* CUDA device memory from any allocator: the legacy IPC handle of its allocation, plus the offset;
* VMM memory (``VirtualBuffer(..., shareable=True)``): one fd per chunk, over a Unix socket;
* memory of stridex's stream-ordered pools (``stridex.empty``, ``View.copy()``, ...): the pool's fd,
  over the socket, plus the allocation's export data and the offset;
* host memory in a shared mapping (``multiprocessing.shared_memory``, :func:`shared_empty`, ...).

Anything else (NumPy's private heap, pinned host memory, pools without IPC support) raises BufferError
naming why; :func:`to_shared` copies host memory into shared memory when the caller wants a copy.
Pending CUDA work travels as an interprocess event: the imported View carries it, and each
consumer's stream waits for it when the consumer takes the View (``__dlpack__(stream=...)``,
``stridex.view(v, stream=...)``, ``stridex.copy``, the casters); the host never waits, except
for a host reader. The exporter keeps the memory alive until every importer released it
(see broker.py, importer.py and docs/distributed.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _stridex
from .host import shared_empty
from .pickling import register_multiprocessing as _register_multiprocessing

# The broker (sockets, threads) and the codecs are imported when a View is first pickled or
# unpickled, not with this package: multiprocessing imports it (pickling.py), and stays cheap.
if TYPE_CHECKING:
    from .codecs import Codec as _Codec

__all__ = ["shared_empty", "to_shared", "pending", "wait_released", "register_multiprocessing"]

_PAYLOAD_VERSION = 1

# A pickled View's payload (codecs.py: one codec per kind of memory), and what pickle stores for a
# View: its rebuild and its payload.
Payload = dict[str, Any]
Reduction = tuple[Callable[[Payload], _stridex.View], tuple[Payload]]


def to_shared(view: object) -> _stridex.View:
    """An explicit copy of a host View (or anything stridex.view takes) into a fresh shared-memory
    block (see shared_empty), which pickles to other processes as shared memory. C-contiguous,
    writable. Device memory is refused (TypeError): copy it to the host first."""
    v = view if isinstance(view, _stridex.View) else _stridex.view(view)
    if not v.device.host_accessible:
        raise TypeError(f"to_shared copies host memory; found a View on {v.device}")
    return _stridex.copy(shared_empty(v.shape, v.dtype), v)


def pending() -> dict[str, int]:
    """This process's Views still pickled-but-not-released, counted by kind and state."""
    from . import broker as _broker

    b = _broker.current()
    return b.pending() if b is not None else {}


def wait_released(timeout: float | None = None) -> bool:
    """Blocks until no other process still needs memory this process exported (True), or the
    timeout passed (False). Exit does this by itself (STRIDEX_IPC_EXIT_TIMEOUT, default 30 s)."""
    from . import broker as _broker

    b = _broker.current()
    return True if b is None else b.wait(timeout)


def _meta(v: _stridex.View) -> Payload:
    return {"shape": list(v.shape), "strides": list(v.strides), "dtype": v.dtype.name, "readonly": v.readonly}


def _reduce(view: _stridex.View, in_flight: bool = False) -> Reduction:
    """The reduction of a View: (rebuild, (payload,)). BufferError when its memory cannot be shared."""
    if not sys.platform.startswith("linux"):
        raise BufferError(
            f"sharing a stridex.View with another process needs Linux (abstract Unix sockets, "
            f"/proc/self/maps); this is {sys.platform}"
        )
    from . import broker as _broker
    from .codecs import CODECS as _CODECS

    kind_of_device = view.device.type
    meta = _meta(view)
    if view.size == 0:
        if kind_of_device != "cpu":
            raise BufferError(f"cannot share an empty {view.device} View with another process: it has no memory")
        return _rebuild, ({"v": _PAYLOAD_VERSION, "kind": "empty", **meta},)
    codec: _Codec
    export: _stridex._IpcExport | _OwnedFd
    if kind_of_device == "cuda":
        cuda = _stridex._ipc_export(view)
        codec, fds, export = _CODECS[cuda.kind], cuda.fds, cuda
        assert codec.export is not None  # every kind _ipc_export gives is a CUDA export's
        device: Payload = {
            "device_uuid": cuda.device_uuid,
            "offset": cuda.offset,
            "extent": cuda.extent,
            "event": cuda.event,
            **codec.export(cuda),
        }
    elif kind_of_device == "cpu":
        from .host import export_host

        fd, device = export_host(view)
        codec, fds, export = _CODECS["host"], [fd], _OwnedFd(fd)
    else:
        raise BufferError(
            f"cannot share a {view.device} View with another process: only cpu memory in a shared "
            "mapping and cuda device memory can be shared"
        )
    b = _broker.broker()
    ticket = b.add(view, export, fds, codec, in_flight)
    if codec.claimable:
        device["slot"], device["serial"] = b.claim_words(ticket)
    payload = {
        "v": _PAYLOAD_VERSION,
        "kind": codec.name,
        "pid": os.getpid(),
        "broker": b.address,
        "ticket": ticket,
        **meta,
        **device,
    }
    return _rebuild, (payload,)


class _OwnedFd:
    """A host export's fd, closed when its ticket goes."""

    __slots__ = ("fd",)

    def __init__(self, fd: int):
        self.fd = fd

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


def _check_payload(payload: object) -> str:
    """The payload's kind, after checking every field: a malformed pickle is a ValueError."""
    from .codecs import CODECS as _CODECS
    from .codecs import UNSIGNED as _UNSIGNED

    if not isinstance(payload, dict) or payload.get("v") != _PAYLOAD_VERSION:
        raise ValueError(
            "not a stridex.View pickle of this stridex version (payload version "
            f"{payload.get('v') if isinstance(payload, dict) else None!r}, expected {_PAYLOAD_VERSION})"
        )
    kind = payload.get("kind")
    if not isinstance(kind, str) or kind not in _CODECS:
        raise ValueError(f"unknown kind of pickled stridex.View memory: {kind!r}")
    for name, types in _CODECS[kind].fields.items():
        value = payload.get(name, _CODECS)
        if not isinstance(value, types) or (types is int and isinstance(value, bool)):
            raise ValueError(f"malformed {kind} handle in a pickled stridex.View: field {name!r} is {value!r}")
        if name in _UNSIGNED and isinstance(value, int) and not 0 <= value < 1 << 64:  # ints: checked above
            raise ValueError(f"malformed {kind} handle in a pickled stridex.View: {name} {value} is out of range")
    if len(payload["shape"]) != len(payload["strides"]) or not all(
        isinstance(x, int) for x in payload["shape"] + payload["strides"]
    ):
        raise ValueError(
            "malformed handle in a pickled stridex.View: shape and strides must be int lists of one "
            f"length, found {payload['shape']!r} and {payload['strides']!r}"
        )
    return kind


def _rebuild(payload: Payload) -> _stridex.View:
    from . import broker as _broker
    from .codecs import CODECS as _CODECS

    codec = _CODECS[_check_payload(payload)]
    if "pid" in codec.fields:  # memory of an exporting process: maybe this one, which takes it back
        local = _broker.current()
        if payload["pid"] == os.getpid() and local is not None and local.address == payload["broker"]:
            return local.take_local(payload["ticket"])
    return codec.rebuild(payload)


def register_multiprocessing() -> None:
    """Registers the View reducer with multiprocessing's ForkingPickler, as torch does for its
    tensors (``import stridex`` does this as soon as multiprocessing is imported). Views pickled
    this way are on their way to another process: the exporter waits for them at exit, while a
    plain pickle may never be loaded and is not waited for."""
    import multiprocessing.reduction

    _register_multiprocessing(multiprocessing.reduction)
