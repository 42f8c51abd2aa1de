"""The importing side of stridex.ipc: one connection per exporting process, over which a pickled
View's ticket is opened (``O``, the reply carrying its fds), claimed in the exporter's ticket table
(``T`` once, then ``C``) and released (``R``). broker.py serves these messages and describes the
protocol; docs/distributed.md describes the whole of it.
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

from .. import _stridex
from .broker import TICKET_BYTES

_T = TypeVar("_T")

_MAX_FDS = 4096  # chunks of one VMM export; a View of 4096 chunks is far beyond any real use

_connections: dict[bytes, tuple[socket.socket, threading.RLock]] = {}
_connections_lock = threading.Lock()
_tables: dict[bytes, _stridex._IpcTicketTable] = {}  # exporter's address -> its ticket table


def _connection(address: bytes, pid: int) -> tuple[socket.socket, threading.RLock]:
    with _connections_lock:
        entry = _connections.get(address)
        if entry is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                s.connect(address)
            except OSError as e:
                s.close()
                raise BufferError(
                    f"cannot reach the process that pickled this stridex.View (pid {pid}): {e}; "
                    "it must stay alive until the View is unpickled"
                ) from None
            entry = _connections[address] = (s, threading.RLock())
        return entry


def open_ticket(
    address: bytes, pid: int, ticket: bytes, meanwhile: Callable[[], _T] | None = None
) -> tuple[list[int], _T | None]:
    """Asks the exporter for a ticket's fds (the caller owns and closes them). `meanwhile` (work
    that needs no fds: opening a CUDA IPC handle) runs between the request and the reply, so the
    exporter's round trip overlaps it; its result comes back with the fds, or is dropped when the
    exporter refuses the ticket."""
    s, lock = _connection(address, pid)
    with lock:  # a request and its reply, with no other request between them
        try:
            s.send(b"O" + ticket)
        except OSError as e:
            raise BufferError(f"the process that pickled this stridex.View (pid {pid}) went away: {e}") from None
        try:
            made = meanwhile() if meanwhile is not None else None
        except BaseException:
            try:
                for fd in _reply(s, pid):
                    os.close(fd)
                s.send(b"R" + ticket)  # opened for nothing
            except (BufferError, OSError):
                pass
            raise
        return _reply(s, pid), made


def claim_ticket(address: bytes, pid: int, ticket: bytes, slot: int, serial: int) -> None:
    """Claims a CUDA IPC ticket in its exporter's ticket table (exactly once, as an open would)
    and tells the exporter, with no reply to wait for. BufferError when the claim fails: the
    View was already loaded from this pickle, or released."""
    s, lock = _connection(address, pid)
    with lock:
        table = _tables.get(address)
        if table is None:
            try:
                s.send(b"T" + bytes(TICKET_BYTES))
            except OSError as e:
                raise BufferError(f"the process that pickled this stridex.View (pid {pid}) went away: {e}") from None
            fds = _reply(s, pid)
            try:
                if len(fds) != 1:
                    raise BufferError(f"expected 1 file descriptor for the ticket table, received {len(fds)}")
                table = _tables[address] = _stridex._IpcTicketTable(fds[0])
            finally:
                for fd in fds:
                    os.close(fd)
        if not table.claim(slot, serial):
            raise BufferError(
                f"process {pid} refused the View: unknown ticket: the View was already unpickled once, or released"
            )
        try:
            s.send(b"C" + ticket)
        except OSError as e:
            raise BufferError(f"the process that pickled this stridex.View (pid {pid}) went away: {e}") from None


def _reply(s: socket.socket, pid: int) -> list[int]:
    try:
        reply, fds, _flags, _addr = socket.recv_fds(s, 1024, _MAX_FDS)
    except OSError as e:
        raise BufferError(f"the process that pickled this stridex.View (pid {pid}) went away: {e}") from None
    if reply != b"ok":
        for fd in fds:
            os.close(fd)
        if not reply:
            raise BufferError(f"the process that pickled this stridex.View (pid {pid}) went away")
        raise BufferError(f"process {pid} refused the View: {reply[2:].decode(errors='replace')}")
    return fds


def release_ticket(address: bytes, ticket: bytes) -> None:
    """Tells the exporter a ticket is done with. Never raises: it runs in finalizers."""
    entry = _connections.get(address)
    if entry is None:
        return
    s, lock = entry
    try:
        with lock:
            s.send(b"R" + ticket)
    except OSError:
        pass  # the exporter is gone; so is what it kept


def _after_fork_in_child() -> None:
    # The connections are the parent's: a child that imports opens its own.
    _connections.clear()
    _tables.clear()


atexit.register(_tables.clear)  # importers' mappings of ticket tables, unmapped before teardown
os.register_at_fork(after_in_child=_after_fork_in_child)
