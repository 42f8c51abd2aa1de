"""Interprocess CUDA events: the stream order between a trainer and its subscribers.

One event per device and side, created once and re-recorded every version (nothing is created per
step): the publisher's *ready* event is recorded on the trainer's stream at ``publish``; each
subscriber's *done* event is recorded on its copy stream after a pull's copies. The other side
opens the event's handle once and makes a stream wait for it (``cuStreamWaitEvent``): no host
waits. A re-recorded event is waited for as of the wait call, so the host messages of the refit
protocol order every record before the other side's wait (docs/refit.md, "Stream order").

The events are torch's (``torch.cuda.Event(interprocess=True)``): torch is imported only when a
device weight is refit. Host memory needs no event: host copies complete before their call returns.
"""

from __future__ import annotations

import importlib
from typing import Any


def _torch() -> Any:
    try:
        return importlib.import_module("torch")
    except ImportError as e:
        raise ImportError(
            "stridex.refit orders device copies across processes with torch's interprocess CUDA events; "
            f"install torch to refit device memory ({e})"
        ) from None


def cuda_stream(stream: Any, ordinal: int) -> Any:
    """A torch stream object for any stream spelling stridex takes, on device `ordinal`: None and 1
    (the legacy default stream), a torch stream, anything with __cuda_stream__, or a CUstream int."""
    torch = _torch()
    if stream is None or (isinstance(stream, int) and stream == 1):
        return torch.cuda.default_stream(ordinal)
    if isinstance(stream, torch.cuda.Stream):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return torch.cuda.ExternalStream(int(stream.__cuda_stream__()[1]), device=ordinal)
    if hasattr(stream, "ptr"):  # CuPy
        return torch.cuda.ExternalStream(int(stream.ptr), device=ordinal)
    if isinstance(stream, int) and stream > 2:
        return torch.cuda.ExternalStream(stream, device=ordinal)
    raise TypeError(f"stridex.refit: cannot use {stream!r} as a CUDA stream of cuda:{ordinal}")


class Signal:
    """An interprocess event: made here (``Signal(ordinal)``: record it) or opened from another
    process's handle (``Signal.opened(ordinal, handle)``: wait for it)."""

    def __init__(self, ordinal: int, event: Any = None):
        torch = _torch()
        self.ordinal = ordinal
        self.event = event if event is not None else torch.cuda.Event(interprocess=True, blocking=False)
        self._handle: bytes | None = None
        self.last_stream: Any = None

    @classmethod
    def opened(cls, ordinal: int, handle: bytes) -> Signal:
        torch = _torch()
        return cls(ordinal, torch.cuda.Event.from_ipc_handle(ordinal, handle))

    @property
    def handle(self) -> bytes:
        """The handle another process opens (the event is created on this device first)."""
        if self._handle is None:
            torch = _torch()
            with torch.cuda.device(self.ordinal):
                self._handle = bytes(self.event.ipc_handle())
        return self._handle

    def record(self, stream: Any) -> None:
        s = cuda_stream(stream, self.ordinal)
        # A record on another stream than the last one would stop covering the work of the last
        # one: the new stream waits for the previous record first (no host wait).
        if self.last_stream is not None and self.last_stream != s:
            self.event.wait(s)
        self.handle  # noqa: B018 - created on its device before the first record
        self.event.record(s)
        self.last_stream = s

    def wait(self, stream: Any, ordinal: int | None = None) -> None:
        """Stream `stream` (of device `ordinal`, default this event's) waits for the event."""
        self.event.wait(cuda_stream(stream, self.ordinal if ordinal is None else ordinal))

    def query(self) -> bool:
        return bool(self.event.query())

    def synchronize(self) -> None:
        self.event.synchronize()


def ordinal_of_uuid(uuid: str) -> int | None:
    """The CUDA ordinal this process gives the GPU of `uuid` ('GPU-...'), None when it cannot see it."""
    from .. import _stridex

    for k in range(_stridex.device_count()):
        if _stridex.device_uuid(k) == uuid:
            return k
    return None
