"""The exporting side of stridex.ipc: tickets, and the Unix socket that serves them (the importing
side, which asks for them, is importer.py).

Every pickled View is a *ticket* in the process that pickled it. The ticket keeps the View (and so
its memory) alive and holds what the importer needs from the exporter: file descriptors (host
shared memory, VMM chunks, a stream-ordered pool) and the interprocess CUDA event. Each exporting
process runs one server thread on an abstract Unix socket (SOCK_SEQPACKET, so every message keeps
its boundary and its file descriptors). An importer sends

* ``O`` + ticket: open. The reply carries the fds (SCM_RIGHTS). Host tickets end here: the
  importer's mapping no longer needs the exporter.
* ``R`` + ticket: release. CUDA tickets end when the importer has no View of them left (legacy
  IPC and pool memory) or once it has waited on the event (VMM memory, whose chunks the driver
  then keeps).
  Only a ticket this connection opened or claimed is released by it.
* ``T``: the ticket table, a shared file of one word per CUDA IPC ticket (once per connection).
  A legacy IPC ticket needs no fds, so its importer *claims* it in the table with one atomic
  compare-and-swap (exactly once, as an open would) and then sends
* ``C`` + ticket: claimed, with no reply to wait for: the hand-over costs no round trip to this
  server thread. The exporter learns of the claim before any release of it (one connection keeps
  its messages in order), and a ticket without a slot (the table full) is opened with ``O``.

A connection that closes releases every ticket it opened, so a crashed importer frees memory too.
Only processes of the same user may connect (SO_PEERCRED), and a ticket is 16 random bytes that
only the pickle carries. docs/distributed.md describes the whole protocol.
"""

from __future__ import annotations

import atexit
import os
import secrets
import socket
import struct
import sys
import threading
from typing import TYPE_CHECKING, Protocol

from .. import _stridex

if TYPE_CHECKING:
    from .._stridex import View

TICKET_BYTES = 16


class TicketKind(Protocol):
    """What a ticket's kind of memory says about the ticket: its codec (codecs.py, which holds every
    kind), read here without importing it."""

    @property
    def name(self) -> str: ...
    # Exit waits for its importers (legacy CUDA IPC, and pool memory, which the exporter must not
    # free before the importer did). Host memory and VMM chunks outlive the exporter once the
    # importer holds the fd.
    @property
    def dies_with_exporter(self) -> bool: ...
    @property
    def claimable(self) -> bool: ...  # a word in the ticket table: claimed with no round trip
    @property
    def released_when_sent(self) -> bool: ...  # ends once its fds are in the importer's socket


class _Ticket:
    __slots__ = ("view", "export", "fds", "kind", "in_flight", "opened", "sent", "slot", "serial")

    def __init__(self, view: View, export: object, fds: list[int], kind: TicketKind, in_flight: bool):
        self.view = view  # keeps the memory alive
        self.export = export  # owns the fds and the CUDA event (host memory: its one fd)
        self.fds = fds
        self.kind = kind
        self.in_flight = in_flight  # pickled by multiprocessing: on its way to another process
        self.opened = False  # an importer asked for it (a second ask is refused)
        self.sent = False  # ... and its reply, fds included, is in the importer's socket
        self.slot, self.serial = -1, 0  # its word in the ticket table (claimable kinds), if any


def _exit_timeout() -> float:
    try:
        return float(os.environ.get("STRIDEX_IPC_EXIT_TIMEOUT", "30"))
    except ValueError:
        return 30.0


class Broker:
    """This process's tickets and the server thread that hands them out."""

    def __init__(self) -> None:
        self.address = b"\0stridex-ipc-%d-%s" % (os.getpid(), secrets.token_hex(8).encode())
        self._tickets: dict[bytes, _Ticket] = {}
        self._cond = threading.Condition()
        # Server threads at work on tickets. They are daemon threads: one that drops a View while
        # the interpreter finalizes dies inside the drop (an mmap or driver call that releases the
        # GIL), which aborts the process. So exit waits until none is at work, and then closes.
        self._busy = 0
        self._closed = False
        # The ticket table, made with the first CUDA IPC ticket (see _TicketTable).
        self._table: _TicketTable | None = None
        self._free_slots: list[int] = []
        self._serial = 0
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._server.bind(self.address)
        self._server.listen(64)
        threading.Thread(target=self._accept, name="stridex-ipc-broker", daemon=True).start()

    # ---- tickets -------------------------------------------------------------------------------
    def add(self, view: View, export: object, fds: list[int], kind: TicketKind, in_flight: bool) -> bytes:
        ticket = secrets.token_bytes(TICKET_BYTES)
        t = _Ticket(view, export, fds, kind, in_flight)
        with self._cond:
            if kind.claimable:
                if self._table is None:
                    self._table = _TicketTable.create()
                    self._free_slots = list(range(self._table.words.slots - 1, -1, -1))
                if self._free_slots:
                    self._serial += 1
                    t.slot, t.serial = self._free_slots.pop(), self._serial
                    self._table.words.issue(t.slot, t.serial)
            self._tickets[ticket] = t
        return ticket

    def claim_words(self, ticket: bytes) -> tuple[int, int]:
        """(slot, serial) of a ticket in the ticket table; slot -1 when it has none (open it)."""
        with self._cond:
            t = self._tickets[ticket]
            return t.slot, t.serial

    def _pop(self, ticket: bytes) -> _Ticket | None:
        """Under the lock: the ticket leaves, and its table slot is free for another."""
        t = self._tickets.pop(ticket, None)
        if t is not None and t.slot >= 0 and self._table is not None:
            self._table.words.clear(t.slot)
            self._free_slots.append(t.slot)
        self._cond.notify_all()
        return t

    def take_local(self, ticket: bytes) -> View:
        """A View pickled and unpickled in this same process: the original, ticket consumed."""
        with self._cond:
            t = self._pop(ticket)
        if t is None:
            raise BufferError(
                "this pickle of a stridex.View was already loaded, or its ticket released "
                "(each pickle of a View is loaded once)"
            )
        return t.view

    def release(self, ticket: bytes) -> None:
        with self._cond:
            t = self._pop(ticket)
        del t  # the View, fds and event go here, outside the lock

    def pending(self) -> dict[str, int]:
        with self._cond:
            kinds: dict[str, int] = {}
            for t in self._tickets.values():
                key = f"{t.kind.name} {'opened' if t.opened else 'not opened'}"
                kinds[key] = kinds.get(key, 0) + 1
            return kinds

    def clear(self) -> None:
        """Drops every ticket: at exit, once waiting is over (the memory goes with the process).
        Server threads take no more work, and those at work finish first (see _busy)."""
        with self._cond:
            self._closed = True
            tickets = [self._pop(ticket) for ticket in list(self._tickets)]
            self._table = None  # unmapped now, while the interpreter can still run its finalizer
        del tickets
        with self._cond:
            self._cond.wait_for(lambda: self._busy == 0, 10.0)

    def _blocking(self) -> int:
        # Not yet sent, rather than not yet opened: exit must not cut the reply off mid-way.
        return self._busy + sum(
            1
            for t in self._tickets.values()
            if (t.opened and t.kind.dies_with_exporter) or (t.in_flight and not t.sent)
        )

    def _begin(self) -> bool:
        """A server thread starts work on tickets; False once exit closed the broker."""
        with self._cond:
            if self._closed:
                return False
            self._busy += 1
            return True

    def _end(self) -> None:
        with self._cond:
            self._busy -= 1
            self._cond.notify_all()

    def wait(self, timeout: float | None) -> bool:
        """Waits until no importer still needs this process; True when none does."""
        with self._cond:
            return self._cond.wait_for(lambda: self._blocking() == 0, timeout)

    # ---- server --------------------------------------------------------------------------------
    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="stridex-ipc-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        opened: set[bytes] = set()
        try:
            _pid, uid, _gid = struct.unpack(
                "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            )
            if uid != os.getuid():
                return
            while True:
                msg = conn.recv(1 + TICKET_BYTES)
                if len(msg) != 1 + TICKET_BYTES:
                    return  # EOF or a malformed message: drop the connection
                if msg[:1] not in (b"O", b"R", b"T", b"C") or not self._begin():
                    return
                try:
                    self._handle(conn, msg[:1], msg[1:], opened)
                finally:
                    self._end()
        except OSError:
            pass
        finally:
            conn.close()
            if opened and self._begin():
                try:
                    for ticket in opened:  # the importer is gone: whatever it opened is free
                        self.release(ticket)
                finally:
                    self._end()

    def _handle(self, conn: socket.socket, op: bytes, ticket: bytes, opened: set[bytes]) -> None:
        # A function of its own: every reference it took to a ticket is gone when it returns.
        if op == b"O":
            self._open(conn, ticket, opened)
        elif op == b"T":
            with self._cond:
                table = self._table
            if table is None:
                conn.send(b"er" + b"no CUDA IPC ticket was ever issued here")
            else:
                socket.send_fds(conn, [b"ok"], [table.fd])
        elif op == b"C":
            with self._cond:
                t = self._tickets.get(ticket)
                if t is not None and t.slot >= 0:
                    t.opened = t.sent = True
                    opened.add(ticket)
                    self._cond.notify_all()
        elif ticket in opened:  # R: only what this connection opened or claimed
            opened.discard(ticket)
            self.release(ticket)

    def _open(self, conn: socket.socket, ticket: bytes, opened: set[bytes]) -> None:
        with self._cond:
            t = self._tickets.get(ticket)
            if t is not None and not t.opened:
                t.opened = True
            else:
                t = None
        if t is None:
            conn.send(b"er" + b"unknown ticket: the View was already unpickled once, or released")
            return
        try:
            socket.send_fds(conn, [b"ok"], list(t.fds))
        finally:
            # Once queued in the importer's socket, the reply (fds included) outlives this process.
            with self._cond:
                t.sent = True
                self._cond.notify_all()
        if t.kind.released_when_sent:
            self.release(ticket)  # the importer holds its own fd now
        else:
            opened.add(ticket)


class _TicketTable:
    """The exporter's ticket table: a memfd (handed to importers over the socket) and its words."""

    def __init__(self, fd: int):
        self.fd = fd
        self.words = _stridex._IpcTicketTable(fd)

    @classmethod
    def create(cls) -> _TicketTable:
        fd = os.memfd_create("stridex-ipc-tickets", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, _stridex._IpcTicketTable.nbytes)
            return cls(fd)
        except BaseException:
            os.close(fd)
            raise

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


_lock = threading.Lock()
_broker: Broker | None = None


def broker() -> Broker:
    global _broker
    with _lock:
        if _broker is None:
            _broker = Broker()
        return _broker


def current() -> Broker | None:
    return _broker


def _after_fork_in_child() -> None:
    # The server thread did not survive the fork, and the tickets belong to the parent.
    global _broker, _lock
    _broker, _lock = None, threading.Lock()


def wait_at_exit() -> None:
    """Exit's wait for importers (atexit here; multiprocessing's finalizers, registered with the
    View reducer in stridex.ipc.pickling, in its children and after its queues' feeders)."""
    b = _broker
    if b is None:
        return
    timeout = _exit_timeout()
    if not b.wait(timeout):
        print(
            f"stridex.ipc: exiting with Views still in use by other processes after waiting {timeout:g} s "
            f"({b.pending()}); their memory goes now (set STRIDEX_IPC_EXIT_TIMEOUT to wait longer)",
            file=sys.stderr,
        )
    # Views of tickets nobody will open (plain pickles never loaded) go now, while the interpreter
    # can still release them.
    b.clear()


atexit.register(wait_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)
