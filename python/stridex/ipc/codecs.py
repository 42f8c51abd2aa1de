"""One codec per kind of memory a pickled View carries: what its payload holds, what its export adds
to the payload, how the importing process makes the View again, and how its ticket behaves in the
exporter (broker.py reads those traits from the codec the ticket was made with, and keeps no list
of kinds of its own).

* ``empty``: a View of no memory (its layout alone).
* ``host``: host memory in a shared mapping: one fd (host.py).
* ``cuda_ipc``: a legacy CUDA IPC handle of the allocation, plus the offset.
* ``cuda_vmm``: VMM memory (``VirtualBuffer(..., shareable=True)``): one fd per chunk.
* ``cuda_pool``: memory of stridex's stream-ordered pools: the pool's fd plus the allocation's
  export data and the offset.

The CUDA kinds are made Views again by one native entry, ``_stridex._ipc_import(kind, payload,
fds, keep)``, which reads the payload's fields itself (src/extension/ipc/ipc_import.cpp).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple

from .. import _stridex
from . import importer as _importer

# A pickled View's payload (checked field by field by stridex.ipc before a codec reads it).
Payload = dict[str, Any]
FieldTypes = dict[str, type | tuple[type, ...]]

# The fields every payload has, those of a payload that names its exporting process, and those of
# CUDA memory.
COMMON: FieldTypes = {"shape": list, "strides": list, "dtype": str, "readonly": bool}
REMOTE: FieldTypes = {"pid": int, "broker": bytes, "ticket": bytes}
DEVICE: FieldTypes = {"device_uuid": bytes, "offset": int, "extent": int, "event": (bytes, type(None))}
# Fields that must also be >= 0 (and below 2**64).
UNSIGNED = ("offset", "extent", "chunk_size", "file_offset", "length", "pool_id")


class Codec(NamedTuple):
    name: str
    # Every field of its payload, with its types.
    fields: FieldTypes
    # The fields a CUDA export (an _IpcExport) of this kind adds to the payload; None for the
    # kinds that are no CUDA export.
    export: Callable[[Any], Payload] | None
    # The View again, in the importing process (from a checked payload of another process).
    rebuild: Callable[[Payload], _stridex.View]
    # The memory dies with the exporting process (a legacy IPC allocation; pool memory, which the
    # exporter must not free before the importer did): exit waits for its importers.
    dies_with_exporter: bool = False
    # Its ticket takes a word in the exporter's ticket table, claimed with no round trip.
    claimable: bool = False
    # Its ticket ends once its fds are in the importer's socket: the importer's mapping no longer
    # needs the exporter.
    released_when_sent: bool = False


class _Release:
    """Owner of an imported CUDA IPC View: tells the exporter when the last View is gone."""

    __slots__ = ("address", "ticket", "__weakref__")

    def __init__(self, address: bytes, ticket: bytes):
        self.address, self.ticket = address, ticket

    def __del__(self) -> None:
        _importer.release_ticket(self.address, self.ticket)


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _rebuild_empty(payload: Payload) -> _stridex.View:
    empty = bytearray(1)
    return _stridex.from_pointer(
        _stridex.view(empty).ptr,
        payload["shape"],
        payload["dtype"],
        strides=payload["strides"],
        owner=empty,
        readonly=payload["readonly"],
    )


def _rebuild_host(payload: Payload) -> _stridex.View:
    from .host import import_host

    fds, _ = _importer.open_ticket(payload["broker"], payload["pid"], payload["ticket"])
    try:
        if len(fds) != 1:
            raise BufferError(f"expected 1 file descriptor for a host View, received {len(fds)}")
        return import_host(fds[0], payload, payload)
    finally:
        _close(fds)


def _import_handle(payload: Payload, keep: object) -> _stridex.View:
    """A legacy CUDA IPC handle's View, whichever way its ticket was taken (claimed or opened)."""
    return _stridex._ipc_import("cuda_ipc", payload, (), keep)


def _rebuild_handle(payload: Payload) -> _stridex.View:
    if payload["slot"] >= 0:
        # No fds to wait for: claimed in the exporter's ticket table, with no round trip; the owner
        # that releases it is made only once the claim is ours.
        _importer.claim_ticket(payload["broker"], payload["pid"], payload["ticket"], payload["slot"], payload["serial"])
        return _import_handle(payload, _Release(payload["broker"], payload["ticket"]))
    # The table was full: opened over the socket, the handle opened while the exporter answers.
    keep = _Release(payload["broker"], payload["ticket"])
    fds, view = _importer.open_ticket(
        payload["broker"],
        payload["pid"],
        payload["ticket"],
        lambda: _import_handle(payload, keep),
    )
    _close(fds)
    assert view is not None
    return view


def _rebuild_vmm(payload: Payload) -> _stridex.View:
    fds, _ = _importer.open_ticket(payload["broker"], payload["pid"], payload["ticket"])
    try:
        return _stridex._ipc_import("cuda_vmm", payload, fds, None)
    finally:
        # Mapped (or failed): the chunks no longer need the exporter, nor does its event.
        _importer.release_ticket(payload["broker"], payload["ticket"])
        _close(fds)


def _rebuild_pool(payload: Payload) -> _stridex.View:
    fds, _ = _importer.open_ticket(payload["broker"], payload["pid"], payload["ticket"])
    # The ticket stays open while the View lives, as a legacy handle's: the exporter must not free
    # the allocation before this process freed its import. _Release tells it once the last View is
    # gone, or at once when the import fails.
    keep = _Release(payload["broker"], payload["ticket"])
    try:
        # One fd, the exporting pool's; the pool is named across every exporter by its process's
        # broker and its pool_id there.
        return _stridex._ipc_import("cuda_pool", payload, fds, keep)
    except BaseException:
        del keep  # released now, not when the traceback (which holds this frame) goes
        raise
    finally:
        _close(fds)  # the pool, once imported, no longer needs its fd


CODECS: dict[str, Codec] = {
    c.name: c
    for c in (
        Codec("empty", COMMON, None, _rebuild_empty),
        Codec(
            "host",
            {**COMMON, **REMOTE, "file_offset": int, "length": int, "lo": int, "writable": bool},
            None,
            _rebuild_host,
            released_when_sent=True,
        ),
        Codec(
            "cuda_ipc",
            {**COMMON, **REMOTE, **DEVICE, "handle": bytes, "slot": int, "serial": int},
            lambda e: {"handle": e.handle},
            _rebuild_handle,
            dies_with_exporter=True,
            claimable=True,
        ),
        Codec(
            "cuda_vmm",
            {**COMMON, **REMOTE, **DEVICE, "chunk_size": int},
            lambda e: {"chunk_size": e.chunk_size},
            _rebuild_vmm,
        ),
        Codec(
            "cuda_pool",
            {**COMMON, **REMOTE, **DEVICE, "pool": bytes, "pool_id": int},
            lambda e: {"pool": e.pool_pointer, "pool_id": e.pool_id},
            _rebuild_pool,
            dies_with_exporter=True,
        ),
    )
}
