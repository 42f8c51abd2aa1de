"""The inference side of a refit: maps each publisher's regions once, and pulls versions into
destinations of its own sharding (plan.py), atomically per version (docs/refit.md).

A pull of version N: ``open`` N at every publisher (each refuses once it moved on: VersionGone,
nothing copied), every copy stream waits for the publishers' ready events, the plan's pieces are
enqueued, the done events are recorded after them, ``done`` goes to every publisher. Publishers
keep N's memory unchanged until then, so the copies read all of N. A publisher that goes away is
PublisherGone, within the timeout at most, never a hang.
"""

from __future__ import annotations

import atexit
import contextlib
import socket
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from .. import _stridex
from .._sharded import Shard, ShardedView
from . import plan as _plan
from . import wire
from .errors import PublisherGone, RefitError, VersionGone
from .publisher import _device_stream, default_timeout
from .signals import Signal, ordinal_of_uuid
from .weights import named


def _rebuild_function() -> Any:
    """stridex.ipc's rebuild of a pickled View's payload, as View.__reduce__ names it (a View of no
    memory reduces without any ticket)."""
    rebuild, _ = _stridex.empty((0,), "uint8").__reduce__()
    return rebuild


class _Source:
    """One publisher, as this subscriber sees it: the connection, the mapped regions, its shards."""

    def __init__(self, address: str, timeout: float):
        self.address = address
        self.timeout = timeout
        self.lock = threading.Lock()
        self.gone: str | None = None
        self.epoch = -1
        self.pid = 0
        self.regions: list[_stridex.View] = []
        self.shards: dict[str, tuple[tuple[int, ...], _stridex.Dtype, list[Shard]]] = {}
        self.ready: dict[str, Signal] = {}
        self.conn = self._connect()

    def _connect(self) -> socket.socket:
        deadline = time.monotonic() + self.timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(wire.abstract(self.address))
                return s
            except OSError as e:
                s.close()
                if time.monotonic() > deadline:
                    raise PublisherGone(
                        f"no refit publisher at {self.address!r} within {self.timeout:g} s: {e}"
                    ) from None
                time.sleep(0.05)

    def request(self, msg: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        with self.lock:
            if self.gone is not None:
                raise PublisherGone(self.gone)
            self.conn.settimeout(self.timeout if timeout is None else timeout)
            try:
                wire.send(self.conn, msg)
                reply = wire.recv(self.conn)
            except socket.timeout:
                reply, why = None, f"did not answer {msg.get('op')!r} within {self.conn.gettimeout():g} s"
            except OSError as e:
                reply, why = None, f"went away ({e})"
            else:
                why = "went away (its connection closed: it exited or crashed)"
            if reply is None:
                self.gone = f"the refit publisher {self.address!r} (pid {self.pid or '?'}) {why}"
                with contextlib.suppress(OSError):
                    self.conn.close()
                raise PublisherGone(self.gone)
            return reply

    def attach(self) -> None:
        reply = self.request({"op": "attach"})
        while not reply["ok"] and reply.get("reason") == "empty":  # nothing published yet
            self.request({"op": "wait", "at_least": None, "timeout": self.timeout}, timeout=self.timeout + 5)
            reply = self.request({"op": "attach"})
        if not reply["ok"]:
            raise RefitError(f"attaching to {self.address!r}: {reply.get('error', reply.get('reason'))}")
        self.regions, self.shards = [], {}  # the previous epoch's mappings go first
        rebuild = _rebuild_function()
        self.pid = reply["pid"]
        regions: list[_stridex.View] = []
        try:
            for p in reply["payloads"]:
                regions.append(rebuild(p))
        except (BufferError, ValueError, TypeError, OSError, RuntimeError) as e:
            regions.clear()  # mapped now, not when the traceback (which holds this frame) goes
            raise RefitError(f"attaching to {self.address!r}: {type(e).__name__}: {e}") from None
        shards: dict[str, tuple[tuple[int, ...], _stridex.Dtype, list[Shard]]] = {}
        for w in reply["descriptor"]["weights"]:
            dtype = _stridex.dtype(w["dtype"])
            out = []
            for index, r, offset, shape, strides in w["shards"]:
                base = regions[r]
                v = _stridex.from_pointer(base.ptr + offset, shape, dtype, strides=strides, owner=base, readonly=True)
                out.append(Shard(tuple(slice(a, b) for a, b in index), v, v.device))
            shards[w["name"]] = (tuple(w["shape"]), dtype, out)
        self.ready = {}
        for device, (uuid, handle) in reply["ready"].items():
            ordinal = ordinal_of_uuid(uuid)
            if ordinal is None:
                raise RefitError(
                    f"publisher {self.address!r} shares memory of GPU {uuid}, which this process cannot see"
                )
            self.ready[device] = Signal.opened(ordinal, handle)
        self.regions, self.shards, self.epoch = regions, shards, reply["epoch"]

    def close(self) -> None:
        self.regions, self.shards, self.ready = [], {}, {}
        with self.lock:
            if self.gone is None:
                self.gone = f"the subscriber closed its connection to {self.address!r}"
            with contextlib.suppress(OSError):
                self.conn.close()


class Subscriber:
    """The inference side of a refit: ``Subscriber(addresses)`` attaches to every publisher (their
    ``Publisher.address``; waits for the first publish), ``pull(version, into=...)`` copies a version
    into destinations of any sharding, ``hold(version)`` lends the publishers' memory zero-copy."""

    def __init__(self, publishers: str | Sequence[str], *, timeout: float | None = None):
        addresses = [publishers] if isinstance(publishers, str) else list(publishers)
        if not addresses:
            raise ValueError("Subscriber(): expected at least one publisher address")
        self.timeout = default_timeout() if timeout is None else float(timeout)
        self._sources: list[_Source] = []
        try:
            for a in addresses:
                self._sources.append(_Source(a, self.timeout))
                self._sources[-1].attach()
        except BaseException:
            for s in self._sources:  # the mappings and connections made so far go now
                s.close()
            raise
        self._merged: tuple[tuple[int, ...], dict[str, ShardedView]] | None = None
        self._plans: dict[Any, _plan.Plan] = {}
        self._done: dict[int, Signal] = {}  # this process's done event per GPU
        self._lock = threading.Lock()
        self._intos: dict[Any, tuple[Any, list[Any], Any]] = {}  # _destinations' cache
        self.stats = {"pulls": 0, "refused": 0, "plans": 0, "bytes": 0}
        _live.add(self)

    # ---- versions -------------------------------------------------------------------------------
    def versions(self) -> dict[str, int | None]:
        """Each publisher's published version now (None: none, or closed for an update)."""
        out = {}
        for s in self._sources:
            r = s.request({"op": "state"})
            out[s.address] = r["version"] if r["state"] == "published" else None
        return out

    def wait(self, after: int | None = None, timeout: float | None = None) -> int:
        """Blocks until every publisher has published one version above `after` (any version when
        None) and returns it; RefitError after `timeout` seconds (default: the subscriber's)."""
        limit = self.timeout if timeout is None else float(timeout)
        deadline = time.monotonic() + limit
        target = None if after is None else after + 1
        while True:
            seen = []
            for s in self._sources:
                left = max(deadline - time.monotonic(), 0.0)
                r = s.request({"op": "wait", "at_least": target, "timeout": left}, timeout=left + self.timeout)
                seen.append(r["version"] if r["state"] == "published" else None)
            if seen and all(v is not None and v == seen[0] for v in seen) and (target is None or seen[0] >= target):
                return int(seen[0])  # type: ignore[arg-type] - checked not None above
            known = [v for v in seen if v is not None]
            if known:
                target = max(known + ([target] if target is not None else []))
            if time.monotonic() > deadline:
                raise RefitError(f"wait(): no common version above {after} within {limit:g} s (seen {seen})")
            time.sleep(0.001)

    # ---- pulls ----------------------------------------------------------------------------------
    def pull(self, version: int | None = None, *, into: Any, stream: Any = None) -> int:
        """Copies `version` (None: the one every publisher holds now) into `into` (name ->
        destination in any weight spelling, each with its own sharding; or a Slots, whose readers
        then swap to it atomically), every piece on `stream` (None: each GPU's legacy default stream;
        a dict {device: stream} for several GPUs). Returns the version. Work enqueued on `stream`
        afterwards sees all of it. VersionGone when a publisher no longer (or not yet) holds it:
        nothing was copied; a GPU destination may then hold a mix until the next pull succeeds."""
        # A Slots (slots.py, which builds on this module) fills its free set through this same pull.
        fill_slots = getattr(into, "_refit_pull", None)
        if fill_slots is not None:
            return fill_slots(self, version, stream)
        with self._lock:
            destinations, dkey = self._destinations(into)
            v, opened = self._open(version)
            copied = False
            try:
                sources = self._sources_now()
                key = (tuple(s.epoch for s in self._sources), dkey)
                p = self._plans.get(key)
                if p is None:
                    p = self._plans[key] = _plan.make(sources, destinations)
                    self.stats["plans"] += 1
                self._wait_ready(p.gpus, stream)
                p.run(stream)
                events = self._record_done(p.gpus, stream)
                copied = True
            finally:
                self._close(v, opened, events if copied else {}, copied)
            self.stats["pulls"] += 1
            self.stats["bytes"] += p.bytes
            return v

    def _destinations(self, into: Any) -> tuple[list[Any], Any]:
        """`into` as weights and its plan key, made once per destination mapping: pulls into the
        same mappings of the same objects (the usual loop; a Slots' two sets) do nothing per tensor
        in Python. A destination is known by its object: one that changes its memory in place
        (torch's ``resize_``, ``.data =``) must be passed as a new object."""
        key = (id(into), tuple(map(id, into.values()))) if isinstance(into, dict) else None
        known = self._intos.get(key) if key is not None else None
        if known is not None:
            return known[1], known[2]
        destinations = named(into, "pull()")
        dkey = _plan.key(destinations)
        if key is not None:  # the objects are kept, so that their ids are not reused meanwhile
            if len(self._intos) >= 4:
                self._intos.pop(next(iter(self._intos)))
            self._intos[key] = ((into, list(into.values())), destinations, dkey)
        return destinations, dkey

    @contextlib.contextmanager
    def hold(self, version: int | None = None, *, stream: Any = None) -> Iterator[tuple[int, dict[str, ShardedView]]]:
        """``with sub.hold() as (version, weights):`` the publishers' memory itself, zero-copy
        (read-only ShardedViews by name), ordered for `stream` (each GPU's, as in pull). The
        publishers keep the version unchanged until the block exits: read it (enqueue the reads on
        `stream`) inside the block."""
        with self._lock:
            v, opened = self._open(version)
            copied = False
            try:
                sources = self._sources_now()
                gpus = {
                    sh.view.device.id
                    for sv in sources.values()
                    for sh in sv.shards
                    if sh.view is not None and sh.view.device.type == "cuda"
                }
                self._wait_ready(gpus, stream)
                yield v, sources
                events = self._record_done(gpus, stream)
                copied = True
            finally:
                self._close(v, opened, events if copied else {}, True)

    def close(self) -> None:
        """Drops every mapping (releasing the publishers' tickets) and the connections."""
        self._plans.clear()
        self._merged = None
        self._intos = {}
        self._done = {}
        for s in self._sources:
            s.close()

    def __enter__(self) -> Subscriber:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the steps of a pull ------------------------------------------------------------------------
    def _open(self, version: int | None) -> tuple[int, list[_Source]]:
        if version is None:
            now = self.versions()
            values = set(now.values())
            if len(values) != 1 or None in values:
                self.stats["refused"] += 1
                raise VersionGone(f"pull(): the publishers hold no common version now ({now}); wait() for one", now)
            version = int(values.pop())  # type: ignore[arg-type] - None excluded above
        opened: list[_Source] = []
        for s in self._sources:
            for _ in range(3):
                r = s.request({"op": "open", "version": version, "epoch": s.epoch})
                if r["ok"] or r.get("reason") != "reattach":
                    break
                self._plans.clear()
                self._merged = None
                s.attach()  # its weights moved: their regions are mapped anew
            if not r["ok"]:
                self._close(version, opened, {}, False)
                self.stats["refused"] += 1
                if r.get("reason") == "moved":
                    current = {s.address: r.get("version")}
                    raise VersionGone(
                        f"pull({version}): publisher {s.address!r} holds version {r.get('version')} "
                        f"({r.get('state')}); nothing was copied",
                        current,
                    )
                raise RefitError(f"pull({version}): publisher {s.address!r}: {r.get('error', r.get('reason'))}")
            opened.append(s)
        return version, opened

    def _close(self, version: int, opened: list[_Source], events: dict[str, Any], copied: bool) -> None:
        evicted = []
        for s in opened:
            try:
                r = s.request({"op": "done", "version": version, "events": events, "copied": copied})
            except PublisherGone:
                if copied:
                    raise
                continue
            if not r["ok"] and r.get("reason") == "evicted":
                evicted.append(s.address)
        if evicted and copied:
            raise RefitError(
                f"pull({version}): publishers {evicted} gave up waiting for this pull (their timeout passed) "
                "and may have changed the weights during it; pull again"
            )

    def _sources_now(self) -> dict[str, ShardedView]:
        epochs = tuple(s.epoch for s in self._sources)
        if self._merged is None or self._merged[0] != epochs:
            shards: dict[str, tuple[tuple[int, ...], _stridex.Dtype, list[Shard]]] = {}
            for s in self._sources:
                for name, (shape, dtype, parts) in s.shards.items():
                    if name in shards and (shards[name][0], shards[name][1]) != (shape, dtype):
                        raise RefitError(
                            f"weight {name!r} is {shards[name][0]} {shards[name][1]} at one publisher, "
                            f"{shape} {dtype} at {s.address!r}"
                        )
                    shards.setdefault(name, (shape, dtype, []))[2].extend(parts)
            self._merged = (epochs, {n: ShardedView(sh, dt, ps) for n, (sh, dt, ps) in shards.items()})
        return self._merged[1]

    def _wait_ready(self, gpus: set[int], stream: Any) -> None:
        for s in self._sources:
            for sig in s.ready.values():
                for g in gpus:
                    sig.wait(_device_stream(stream, g), g)

    def _record_done(self, gpus: set[int], stream: Any) -> dict[str, tuple[str, bytes]]:
        events = {}
        for g in sorted(gpus):
            sig = self._done.get(g)
            if sig is None:
                sig = self._done[g] = Signal(g)
            sig.record(_device_stream(stream, g))
            events[f"cuda:{g}"] = (_stridex.device_uuid(g), sig.handle)
        return events


_live: weakref.WeakSet[Subscriber] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for s in list(_live):
        s.close()
