"""Two destination sets for readers on other threads and streams: a pull fills the set no reader
holds, then swaps; a reader holds one set and one version for the whole of its read."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from .errors import RefitError
from .signals import cuda_stream
from .weights import named


class Slots:
    """``Slots(first, second)``: two destination sets of the same weights (name -> destination, any
    sharding). ``sub.pull(version, into=slots)`` copies into the set no reader holds and swaps once
    the copies are enqueued; ``with slots.read(stream) as (version, weights):`` holds the current
    set, which no pull writes until the reader is done (host readers: the pull waits on the host for
    them; GPU readers: the pull's streams wait for an event recorded on the reader's stream)."""

    def __init__(self, first: Mapping[str, Any], second: Mapping[str, Any]):
        for s in (first, second):
            named(s, "Slots()")
        self._sets = (first, second)
        self._version: list[int | None] = [None, None]
        self._readers = [0, 0]
        self._read_events: list[list[Any]] = [[], []]  # GPU readers' done events, per set
        self._ready: list[list[Any]] = [[], []]  # the pull's events readers' streams wait for
        self._current: int | None = None
        self._cond = threading.Condition()
        self._writer = threading.Lock()

    @property
    def version(self) -> int | None:
        """The version readers get now."""
        with self._cond:
            return None if self._current is None else self._version[self._current]

    @contextlib.contextmanager
    def read(self, stream: Any = None) -> Iterator[tuple[int, Mapping[str, Any]]]:
        """The current version and its destination set, unchanged until the block exits. `stream`:
        the stream (or dict {ordinal: stream}) the reader enqueues GPU reads on."""
        with self._cond:
            if self._current is None:
                raise RefitError("Slots.read(): nothing was pulled into these slots yet")
            k = self._current
            self._readers[k] += 1
            ready = list(self._ready[k])
            version = self._version[k]
        try:
            for ordinal, event in ready:
                event.wait(cuda_stream(_of(stream, ordinal), ordinal))
            assert version is not None
            yield version, self._sets[k]
        finally:
            events = []
            for ordinal, _ in ready:
                import torch

                e = torch.cuda.Event()
                e.record(cuda_stream(_of(stream, ordinal), ordinal))
                events.append(e)
            with self._cond:
                self._read_events[k].extend(events)
                self._readers[k] -= 1
                self._cond.notify_all()

    def _refit_pull(self, sub: Any, version: int | None, stream: Any) -> int:
        """Subscriber.pull into these slots: `sub` (a Subscriber) fills the set no reader holds."""
        with self._writer:
            with self._cond:
                k = 0 if self._current is None else 1 - self._current
                while self._readers[k]:
                    self._cond.wait()
                waits, self._read_events[k] = self._read_events[k], []
            gpus = sorted({o for o, _ in self._ready[k]})
            for e in waits:
                for g in gpus:
                    e.wait(cuda_stream(_of(stream, g), g))
            v = sub.pull(version, into=self._sets[k], stream=stream)
            ready = []
            for sh in named(self._sets[k], "Slots"):
                for _, view in sh.shards:
                    if view.device.type == "cuda" and view.device.id not in {o for o, _ in ready}:
                        import torch

                        e = torch.cuda.Event()
                        e.record(cuda_stream(_of(stream, view.device.id), view.device.id))
                        ready.append((view.device.id, e))
            with self._cond:
                self._ready[k] = ready
                self._version[k] = v
                self._current = k
                self._cond.notify_all()
            return v


def _of(stream: Any, ordinal: int) -> Any:
    if isinstance(stream, Mapping):
        for key, s in stream.items():
            if (key if isinstance(key, int) else int(str(key).split(":")[-1])) == ordinal:
                return s
        return None
    return stream
