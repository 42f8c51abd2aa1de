"""The trainer's side of a refit: shares its weights once, publishes versions, and keeps every
version's memory unchanged until the subscribers that opened a pull of it are done.

Protocol (wire.py carries it; one connection and one server thread per subscriber):

* ``attach``: the reply carries the descriptor (regions, where each shard lies in them), one pickled
  View payload per region (a stridex.ipc ticket for this subscriber, made once), the ready events'
  handles, the epoch (bumped when the weights moved and regions were shared anew) and the state.
* ``open`` version, epoch: a pull of that version begins. Accepted only while that version is the
  published one; refused (``moved``) once ``begin_update`` closed it, or (``reattach``) when the
  epoch changed. While a pull is open, ``begin_update`` does not return.
* ``done`` version, events: the pull has enqueued its last copy; its done events (the handles, sent
  once per device) are what the trainer's stream waits for at the next ``begin_update``.
* ``wait`` at_least: answers once a version >= at_least is published (or the timeout passed).
* ``state``: the version and state now.

A subscriber's connection that closes (exit, crash, SIGKILL) drops its open pulls, its events and the
tickets it has not claimed; the others go on.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from .. import _stridex
from ..ipc import broker as _ipc_broker
from . import wire
from .errors import RefitError
from . import regions as _regions
from .regions import Regions, signature
from .signals import Signal, ordinal_of_uuid
from .weights import Weight, named


def default_timeout() -> float:
    try:
        return float(os.environ.get("STRIDEX_REFIT_TIMEOUT", "60"))
    except ValueError:
        return 60.0


class _Subscriber:
    """The publisher's record of one connected subscriber."""

    def __init__(self, sid: int, conn: socket.socket):
        self.sid = sid
        self.conn = conn
        self.open = 0  # pulls opened and not done
        self.tickets: list[bytes] = []  # stridex.ipc tickets made for it (released if it vanishes)
        self.events: dict[tuple[str, bytes], Signal] = {}  # its done events, opened once
        self.evicted = False


class Publisher:
    """The trainer's side of a refit (one per trainer process). ``address`` is what subscribers
    connect to; ``publish`` shares the weights (the first time) and makes a version pullable;
    ``begin_update`` (or ``with updating():``) closes it before the weights change in place."""

    def __init__(self, name: str | None = None, *, timeout: float | None = None):
        self.address = name or f"stridex-refit-{os.getpid()}-{secrets.token_hex(6)}"
        self.timeout = default_timeout() if timeout is None else float(timeout)
        self._cond = threading.Condition()
        self._publish_lock = threading.Lock()
        self._version: int | None = None
        self._state = "empty"  # empty | published | updating | closed
        self._weights: list[Weight] = []
        self._regions: Regions | None = None
        self._epoch = 0
        self._stale = False  # a region failed to export at an attach: make them anew at the next publish
        self._ready: dict[str, Signal] = {}  # per device of the regions
        self._streams: dict[str, Any] = {}  # the stream each device's last publish was ordered on
        self._fence: dict[tuple[int, str], Signal] = {}  # done events the next begin_update waits for
        self._subs: dict[int, _Subscriber] = {}
        self._next_sid = 0
        self._stats = {"exports": 0, "epochs": 0, "publishes": 0, "evicted": 0, "host_wait_s": 0.0}
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(wire.abstract(self.address))
        self._server.listen(64)
        # Daemon threads, joined by close() (and so at exit, _close_all): a daemon thread still in a
        # native call when the interpreter finalizes is ended by pthread_exit, whose unwinding
        # through a noexcept frame (a GIL-release guard's destructor) is std::terminate.
        self._threads: list[threading.Thread] = []
        self._start(self._accept, "stridex-refit-publisher")
        _live.add(self)

    # ---- the trainer's calls --------------------------------------------------------------------
    def publish(self, weights: Mapping[str, Any], version: int, *, stream: Any = None) -> None:
        """Makes `version` of `weights` pullable, ordered after the work pending on `stream` (None:
        each GPU's legacy default stream; a dict {device: stream} for several GPUs): an interprocess
        event is recorded there, the host never waits for the GPU. The first publish shares the
        weights' memory; later ones share nothing new unless the weights moved (other pointers).
        Packed shards are copied into the bucket on `stream`. The previous version is closed first
        (``begin_update``) if the trainer did not close it already."""
        if not isinstance(version, int) or isinstance(version, bool):
            raise TypeError(f"publish(): version must be an int, found {version!r}")
        ws = named(weights, "publish()")
        with self._publish_lock:
            if self._state == "closed":
                raise RefitError("publish(): this publisher is closed")
            if self._version is not None and version <= self._version:
                raise ValueError(f"publish(): versions increase; {version} follows {self._version}")
            self.begin_update(stream)
            if self._regions is None or self._stale or self._regions.signature != signature(ws):
                self._stale = False
                regions = Regions(ws)
                with self._cond:
                    self._regions, self._weights = regions, ws
                    self._epoch += 1
                    self._stats["epochs"] += 1
            else:
                self._weights = ws  # the same memory; these Views may be new objects
            regions = self._regions
            assert regions is not None
            regions.pack(ws, stream)
            for device in regions.devices():
                if device.startswith("cuda"):
                    ordinal = int(device.split(":")[1])
                    s = _device_stream(stream, ordinal)
                    sig = self._ready.get(device)
                    if sig is None:
                        sig = self._ready[device] = Signal(ordinal)
                    sig.record(s)
                    self._streams[device] = s
            with self._cond:
                self._version = version
                self._state = "published"
                self._stats["publishes"] += 1
                self._cond.notify_all()

    def begin_update(self, stream: Any = None) -> None:
        """Closes the published version before the trainer changes the weights in place: new pulls
        of it are refused, and once every open pull has enqueued its copies (its ``done`` message,
        a host wait of the subscribers' enqueue time only; a subscriber that dies counts as done),
        `stream` (each GPU's, as in publish) waits for their done events on the GPU. Idempotent
        until the next publish."""
        t0 = time.perf_counter()
        with self._cond:
            if self._state != "published":
                return
            self._state = "updating"
            deadline = time.monotonic() + self.timeout
            while any(s.open for s in self._subs.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    for s in self._subs.values():
                        if s.open:  # its pull took longer than the timeout: it will be told
                            s.open, s.evicted = 0, True
                            self._stats["evicted"] += 1
                    break
                self._cond.wait(min(left, 0.5))
            waits = list(self._fence.values())
            self._fence.clear()
        self._stats["host_wait_s"] += time.perf_counter() - t0
        if not waits or self._regions is None:
            return
        for device in self._regions.devices():
            if device.startswith("cuda"):
                ordinal = int(device.split(":")[1])
                s = _device_stream(stream, ordinal)
                for sig in waits:
                    sig.wait(s, ordinal)

    @contextlib.contextmanager
    def updating(self, stream: Any = None) -> Iterator[None]:
        """``with pub.updating(stream): optimizer.step()``: begin_update before the block."""
        self.begin_update(stream)
        yield

    @property
    def version(self) -> int | None:
        return self._version

    def stats(self) -> dict[str, Any]:
        """Counters for tests and benchmarks: ``exports`` (region handles made, one per region and
        subscriber), ``epochs`` (times the regions were made), ``regions``, ``bucket_bytes``,
        ``subscribers``, ``open_pulls``, ``publishes``, ``evicted``, ``host_wait_s`` (time
        begin_update waited on the host for subscribers to enqueue)."""
        with self._cond:
            r = self._regions
            return {
                **self._stats,
                "regions": 0 if r is None else len(r.regions),
                "bucket_bytes": 0 if r is None else r.bucket_bytes,
                "subscribers": len(self._subs),
                "open_pulls": sum(s.open for s in self._subs.values()),
                "version": self._version,
                "state": self._state,
            }

    def close(self) -> None:
        """Stops serving and joins the server threads: subscribers get PublisherGone. The shared
        memory lives while importers hold it (stridex.ipc's exit waits for them). Idempotent."""
        with self._cond:
            self._state = "closed"
            subs = list(self._subs.values())
            self._cond.notify_all()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        for s in subs:
            with contextlib.suppress(OSError):
                s.conn.shutdown(socket.SHUT_RDWR)
        with self._cond:
            threads = list(self._threads)
        for t in threads:  # each ends once its socket is shut down (a `wait` within 0.5 s)
            if t is not threading.current_thread():
                t.join(5)
        with self._publish_lock, self._cond:
            # The Views go now, not when the interpreter tears down.
            self._regions, self._weights, self._ready, self._fence = None, [], {}, {}

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the server -----------------------------------------------------------------------------
    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return  # closed
            if not wire.same_user(conn):
                conn.close()
                continue
            with self._cond:
                if self._state == "closed":  # accepted as close() ran: not served
                    conn.close()
                    return
                sid = self._next_sid
                self._next_sid += 1
                sub = self._subs[sid] = _Subscriber(sid, conn)
            self._start(self._serve, f"stridex-refit-sub-{sid}", sub)

    def _start(self, target: Any, name: str, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._cond:
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)
        t.start()

    def _serve(self, sub: _Subscriber) -> None:
        try:
            while True:
                try:
                    msg = wire.recv(sub.conn)
                except (OSError, ValueError):
                    msg = None
                if msg is None:
                    return
                try:
                    reply = self._handle(sub, msg)
                except Exception as e:  # noqa: BLE001 - the subscriber hears every error
                    reply = {"ok": False, "reason": "error", "error": f"{type(e).__name__}: {e}"}
                try:
                    wire.send(sub.conn, reply)
                except OSError:
                    return
        finally:
            self._vanished(sub)

    def _vanished(self, sub: _Subscriber) -> None:
        with self._cond:
            self._subs.pop(sub.sid, None)
            sub.open = 0
            for key in [k for k in self._fence if k[0] == sub.sid]:
                del self._fence[key]  # a dead subscriber's events are never waited for
            tickets, sub.tickets = sub.tickets, []
            self._cond.notify_all()
        b = _ipc_broker.current()
        if b is not None:
            for t in tickets:  # those it claimed are released by its broker connection's close too
                b.release(t)
        sub.events.clear()
        with contextlib.suppress(OSError):
            sub.conn.close()

    def _handle(self, sub: _Subscriber, msg: dict[str, Any]) -> dict[str, Any]:
        op = msg.get("op")
        if op == "attach":
            return self._attach(sub)
        if op == "open":
            with self._cond:
                if sub.evicted:
                    sub.evicted = False
                if msg.get("epoch") != self._epoch:
                    return {"ok": False, "reason": "reattach", "version": self._version}
                if self._state != "published" or msg.get("version") != self._version:
                    return {"ok": False, "reason": "moved", "version": self._version, "state": self._state}
                sub.open += 1
                return {"ok": True}
        if op == "done":
            opened = {}
            for device, (uuid, handle) in (msg.get("events") or {}).items():
                key = (device, handle)
                if key not in sub.events:
                    ordinal = ordinal_of_uuid(uuid)
                    if ordinal is None:  # a GPU this process cannot see: opened on the first it can
                        ordinal = 0
                    sub.events[key] = Signal.opened(ordinal, handle)
                opened[(sub.sid, device)] = sub.events[key]
            with self._cond:
                if sub.evicted:
                    sub.evicted = False
                    return {"ok": False, "reason": "evicted"}
                if sub.open <= 0:
                    return {"ok": False, "reason": "error", "error": "done without an open pull"}
                sub.open -= 1
                if msg.get("copied", True):
                    self._fence.update(opened)
                self._cond.notify_all()
                return {"ok": True}
        if op == "wait":
            at_least = msg.get("at_least")
            deadline = time.monotonic() + min(float(msg.get("timeout", self.timeout)), self.timeout)
            with self._cond:
                while not (
                    self._state == "closed"
                    or (self._state == "published" and (at_least is None or (self._version or 0) >= at_least))
                ):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(min(left, 0.5))
                return {"ok": True, "version": self._version, "state": self._state}
        if op == "state":
            with self._cond:
                return {"ok": True, "version": self._version, "state": self._state, "epoch": self._epoch}
        return {"ok": False, "reason": "error", "error": f"unknown op {op!r}"}

    def _attach(self, sub: _Subscriber) -> dict[str, Any]:
        with self._publish_lock:  # a descriptor and regions of one epoch
            regions, weights, epoch = self._regions, self._weights, self._epoch
            if regions is None:
                return {"ok": False, "reason": "empty", "version": None}
            payloads, made = [], []
            for k, r in enumerate(regions.regions):
                try:
                    _rebuild, (payload,) = r.view.__reduce__()
                except BufferError as e:
                    # publish checked every region (regions.export_check); should the driver refuse
                    # one now, its shards go to the bucket from the next publish (a new epoch), and
                    # this subscriber hears why at once instead of waiting for anything.
                    if r.key is not None:
                        _regions.forget(r.key)
                        self._stale = True
                    b = _ipc_broker.current()
                    for t in made:
                        sub.tickets.remove(t)
                        if b is not None:
                            b.release(t)
                    return {
                        "ok": False,
                        "reason": "error",
                        "error": f"region {k} ({r.device}, {r.view.nbytes} bytes) cannot be shared: {e}; the next "
                        "publish packs its shards into a bucket",
                    }
                payloads.append(payload)
                if "ticket" in payload:
                    sub.tickets.append(payload["ticket"])
                    made.append(payload["ticket"])
                self._stats["exports"] += 1
            ready = {d: (_stridex.device_uuid(s.ordinal), s.handle) for d, s in self._ready.items()}
            return {
                "ok": True,
                "epoch": epoch,
                "pid": os.getpid(),
                "descriptor": regions.descriptor(weights),
                "payloads": payloads,
                "ready": ready,
                "version": self._version,
                "state": self._state,
            }


_live: weakref.WeakSet[Publisher] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    # Before stridex.ipc's exit wait (atexit runs in reverse order of registration, and stridex.ipc
    # registered first): importers then see the publisher closed and release what they hold.
    for p in list(_live):
        p.close()


def _device_stream(stream: Any, ordinal: int) -> Any:
    """The stream of device `ordinal` in publish's argument (one stream, or a dict by device)."""
    if isinstance(stream, Mapping):
        for key, s in stream.items():
            d = _stridex.Device(f"cuda:{key}") if isinstance(key, int) else _stridex.Device(str(key))
            if d.type == "cuda" and d.id == ordinal:
                return s
        return None
    return stream
