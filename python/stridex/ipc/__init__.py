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
from collections.abc import Callable, Sequence
from typing import Any, Optional, cast

from .. import _stridex
from . import broker as _broker
from . import importer as _importer
from .host import shared_empty

__all__ = ["shared_empty", "to_shared", "pending", "wait_released", "register_multiprocessing"]

_PAYLOAD_VERSION = 1

# A pickled View: its payload (checked field by field when loaded), and what pickle stores for it.
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
    b = _broker.current()
    return b.pending() if b is not None else {}


def wait_released(timeout: float | None = None) -> bool:
    """Blocks until no other process still needs memory this process exported (True), or the
    timeout passed (False). Exit does this by itself (STRIDEX_IPC_EXIT_TIMEOUT, default 30 s)."""
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
    kind_of_device = view.device.type
    meta = _meta(view)
    if view.size == 0:
        if kind_of_device != "cpu":
            raise BufferError(f"cannot share an empty {view.device} View with another process: it has no memory")
        return _rebuild, ({"v": _PAYLOAD_VERSION, "kind": "empty", **meta},)
    kind: str
    export: _stridex._IpcExport | _OwnedFd
    if kind_of_device == "cuda":
        cuda = _stridex._ipc_export(view)
        export = cuda
        kind, fds = cuda.kind, cuda.fds
        device: Payload = {
            "device_uuid": cuda.device_uuid,
            "offset": cuda.offset,
            "extent": cuda.extent,
            "event": cuda.event,
        }
        if kind == "cuda_ipc":
            device["handle"] = cuda.handle
        elif kind == "cuda_pool":
            device["pool"], device["pool_id"] = cuda.pool_pointer, cuda.pool_id
        else:
            device["chunk_size"] = cuda.chunk_size
    elif kind_of_device == "cpu":
        from .host import export_host

        fd, device = export_host(view)
        kind, fds, export = "host", [fd], _OwnedFd(fd)
    else:
        raise BufferError(
            f"cannot share a {view.device} View with another process: only cpu memory in a shared "
            "mapping and cuda device memory can be shared"
        )
    b = _broker.broker()
    ticket = b.add(view, export, fds, kind, in_flight)
    if kind == "cuda_ipc":
        device["slot"], device["serial"] = b.claim_words(ticket)
    payload = {
        "v": _PAYLOAD_VERSION,
        "kind": kind,
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


class _Release:
    """Owner of an imported CUDA IPC View: tells the exporter when the last View is gone."""

    __slots__ = ("address", "ticket", "__weakref__")

    def __init__(self, address: bytes, ticket: bytes):
        self.address, self.ticket = address, ticket

    def __del__(self) -> None:
        _importer.release_ticket(self.address, self.ticket)


# The fields each kind of payload needs, with their types; unsigned ones must also be >= 0.
_FieldTypes = dict[str, type | tuple[type, ...]]
_COMMON: _FieldTypes = {"shape": list, "strides": list, "dtype": str, "readonly": bool}
_REMOTE: _FieldTypes = {"pid": int, "broker": bytes, "ticket": bytes}
_DEVICE: _FieldTypes = {"device_uuid": bytes, "offset": int, "extent": int, "event": (bytes, type(None))}
_FIELDS: dict[str, _FieldTypes] = {
    "empty": _COMMON,
    "host": {**_COMMON, **_REMOTE, "file_offset": int, "length": int, "lo": int, "writable": bool},
    "cuda_ipc": {**_COMMON, **_REMOTE, **_DEVICE, "handle": bytes, "slot": int, "serial": int},
    "cuda_vmm": {**_COMMON, **_REMOTE, **_DEVICE, "chunk_size": int},
    "cuda_pool": {**_COMMON, **_REMOTE, **_DEVICE, "pool": bytes, "pool_id": int},
}
_UNSIGNED = ("offset", "extent", "chunk_size", "file_offset", "length", "pool_id")


def _check_payload(payload: object) -> str:
    """The payload's kind, after checking every field: a malformed pickle is a ValueError."""
    if not isinstance(payload, dict) or payload.get("v") != _PAYLOAD_VERSION:
        raise ValueError(
            "not a stridex.View pickle of this stridex version (payload version "
            f"{payload.get('v') if isinstance(payload, dict) else None!r}, expected {_PAYLOAD_VERSION})"
        )
    kind = payload.get("kind")
    if not isinstance(kind, str) or kind not in _FIELDS:
        raise ValueError(f"unknown kind of pickled stridex.View memory: {kind!r}")
    for name, types in _FIELDS[kind].items():
        value = payload.get(name, _FIELDS)
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
    kind = _check_payload(payload)
    if kind == "empty":
        empty = bytearray(1)
        return _stridex.from_pointer(
            _stridex.view(empty).ptr,
            payload["shape"],
            payload["dtype"],
            strides=payload["strides"],
            owner=empty,
            readonly=payload["readonly"],
        )
    local = _broker.current()
    if payload["pid"] == os.getpid() and local is not None and local.address == payload["broker"]:
        return local.take_local(payload["ticket"])
    if kind == "cuda_ipc" and payload["slot"] >= 0:
        # No fds to wait for: claimed in the exporter's ticket table, with no round trip; the owner
        # that releases it is made only once the claim is ours.
        _importer.claim_ticket(payload["broker"], payload["pid"], payload["ticket"], payload["slot"], payload["serial"])
        return _import_handle(payload, _Release(payload["broker"], payload["ticket"]))
    if kind == "cuda_ipc":
        # The table was full: opened over the socket, the handle opened while the exporter answers.
        keep = _Release(payload["broker"], payload["ticket"])
        fds, view = _importer.open_ticket(
            payload["broker"],
            payload["pid"],
            payload["ticket"],
            lambda: _import_handle(payload, keep),
        )
        for fd in fds:
            os.close(fd)
        assert view is not None
        return view
    if kind == "cuda_pool":
        return _import_pool(payload)
    fds, _ = _importer.open_ticket(payload["broker"], payload["pid"], payload["ticket"])
    try:
        if kind == "host":
            from .host import import_host

            if len(fds) != 1:
                raise BufferError(f"expected 1 file descriptor for a host View, received {len(fds)}")
            return import_host(fds[0], payload, payload)
        if kind == "cuda_vmm":
            try:
                return _stridex._ipc_import_fds(
                    fds,
                    payload["chunk_size"],
                    payload["device_uuid"],
                    payload["offset"],
                    payload["shape"],
                    payload["strides"],
                    payload["dtype"],
                    payload["readonly"],
                    payload["event"],
                    None,
                )
            finally:
                # Mapped (or failed): the chunks no longer need the exporter, nor does its event.
                _importer.release_ticket(payload["broker"], payload["ticket"])
        raise AssertionError(kind)  # _check_payload knows every kind
    finally:
        for fd in fds:
            os.close(fd)


# The fields a handle's and a pool's import share, in their order (mypy counts the starred ones).
_Placement = tuple[bytes, int, int, Sequence[int], Sequence[int], str, bool, Optional[bytes]]


def _placement(payload: Payload) -> _Placement:
    """What a legacy handle's and a pool allocation's import take after the memory itself: the
    device, where the View lies in the shared range, its layout, and the producer's event."""
    fields = ("device_uuid", "offset", "extent", "shape", "strides", "dtype", "readonly", "event")
    return cast(_Placement, tuple(payload[f] for f in fields))


def _import_handle(payload: Payload, keep: object) -> _stridex.View:
    """A legacy CUDA IPC handle's View, whichever way its ticket was taken (claimed or opened)."""
    return _stridex._ipc_import_handle(payload["handle"], *_placement(payload), keep=keep)


def _import_pool(payload: Payload) -> _stridex.View:
    fds, _ = _importer.open_ticket(payload["broker"], payload["pid"], payload["ticket"])
    # The ticket stays open while the View lives, as a legacy handle's: the exporter must not free
    # the allocation before this process freed its import. _Release tells it once the last View is
    # gone, or at once when the import fails.
    keep = _Release(payload["broker"], payload["ticket"])
    try:
        if len(fds) != 1:
            raise BufferError(f"expected 1 file descriptor for a pool View, received {len(fds)}")
        # The exporting pool, named across every exporter: its process's broker and its id there.
        pool_key = payload["broker"] + payload["pool_id"].to_bytes(8, "little")
        return _stridex._ipc_import_pool(fds[0], pool_key, payload["pool"], *_placement(payload), keep=keep)
    except BaseException:
        del keep  # released now, not when the traceback (which holds this frame) goes
        raise
    finally:
        for fd in fds:
            os.close(fd)  # the pool, once imported, no longer needs its fd


def register_multiprocessing() -> None:
    """Registers the View reducer with multiprocessing's ForkingPickler, as torch does for its
    tensors (``import stridex`` does this as soon as multiprocessing is imported). Views pickled
    this way are on their way to another process: the exporter waits for them at exit, while a
    plain pickle may never be loaded and is not waited for."""
    import multiprocessing.reduction

    from .._post_import import _register_multiprocessing

    _register_multiprocessing(multiprocessing.reduction)
