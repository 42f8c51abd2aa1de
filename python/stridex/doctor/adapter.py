"""The adapter base: a framework as producer and consumer (capabilities as data, hooks as methods).

Everything an adapter reports comes from the framework's own API (``tensor.stride()``,
``array.data.ptr`` ...), never from the protocol under test, so that a wrong ``__dlpack__`` or
interface shows up as a disagreement between producer and consumer. Where a framework has no way
to read or write single elements (cuda.core views, Numba device arrays), the adapter reads and
writes raw memory through the CUDA driver (cuda_memory.py, independent of stridex).

Capabilities are data (class attributes), so "can this framework represent this case" has one
answer, used by the matrix ("—") and by the claims table (checks.py)."""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import numpy as np

from .cases import Case
from .cuda_memory import CudaDriver
from .discovery import FrameworkInfo
from .meta import Meta, device_kind


class Adapter:
    """A framework as producer and consumer. Subclasses fill the capability table and the hooks."""

    name = ""
    kinds: tuple[str, ...] = ("cpu",)  # device kinds it holds arrays on
    dtypes: frozenset[str] = frozenset({"float32", "bool", "bfloat16"})
    makes_strided = True  # its own slicing gives non-compact views
    makes_negative = True  # ... and negative steps
    holds_strided = True  # it imports non-compact layouts without copying
    holds_negative = True
    has_0d = True
    makes_readonly = False  # it can mark an array read-only
    has_readonly = False  # its arrays carry a read-only flag that the doctor compares
    immutable = False  # its arrays are never written (JAX)
    experimental = False  # adapter not yet verified on hardware: its pairs are not claimed
    stream_kind: str | None = None  # "explicit": the doctor makes its stream; "implicit": it picks one
    makes_stream = False  # it can write an array on a stream of its own (stream-case producer)
    producer = True
    consumer = True
    why_not: dict[str, str] = {}  # reasons for the "—" above, by capability

    def __init__(self, info: FrameworkInfo) -> None:
        self.info = info
        self.m = info.module
        self.version = info.version

    # -- capability ---------------------------------------------------------------------------
    def devices(self) -> set[str] | None:
        """The exact devices it has (None: any device of its kinds)."""
        return None

    def _why(self, key: str, default: str) -> str:
        return f"{self.name}: {self.why_not.get(key, default)}"

    def _common(self, case: Case, device: str) -> str | None:
        kind = device_kind(device)
        if kind not in self.kinds:
            return self._why(kind, f"no {kind} arrays")
        devices = self.devices()
        if devices is not None and device not in devices:
            return f"{self.name}: no {device} here"
        if case.dtype not in self.dtypes:
            return self._why(case.dtype, f"no {case.dtype} dtype")
        if case.shape == () and not self.has_0d:
            return self._why("0-d", "no 0-d arrays")
        if case.stream and self.stream_kind is None:
            return self._why("stream", "no CUDA streams")
        return None

    def cannot_make(self, case: Case, device: str) -> str | None:
        if not self.producer:
            return f"{self.name}: consumer only here"
        reason = self._common(case, device)
        if reason:
            return reason
        if case.name == "strided" and not self.makes_strided:
            return self._why("strided", "arrays are always compact")
        if case.name == "negative" and not self.makes_negative:
            return self._why("negative", "no negative strides")
        if case.readonly and not (self.makes_readonly or self.immutable):
            return self._why("readonly", "no read-only arrays")
        if case.stream and not self.makes_stream:
            return self._why("stream", "cannot write on a stream of its own")
        return None

    def cannot_hold(self, case: Case, device: str) -> str | None:
        if not self.consumer:
            return f"{self.name}: producer only here"
        reason = self._common(case, device)
        if reason:
            return reason
        if case.name == "strided" and not self.holds_strided:
            return self._why("strided", "arrays are always compact")
        if case.name == "negative" and not self.holds_negative:
            return self._why("negative", "no negative strides")
        if case.readonly and not (self.has_readonly or self.immutable):
            return self._why("readonly", "no read-only arrays (it cannot show the flag)")
        return None

    # -- producer -----------------------------------------------------------------------------
    def make(self, case: Case, device: str) -> Any:
        raise NotImplementedError

    def export(self, arr: Any) -> Any:
        """What is handed to a consumer or to stridex.view: the array itself, unless overridden."""
        return arr

    def on_stream(self, arr: Any, stream: Any) -> Any:
        """`arr` as the framework says "its pending work is on `stream`" (stream case). Frameworks
        with a current stream say it by being current; Numba binds the stream to the array."""
        return arr

    # -- both ---------------------------------------------------------------------------------
    def meta(self, arr: Any) -> Meta:
        raise NotImplementedError

    def to_host(self, arr: Any) -> np.ndarray:
        """Values as float64 (bool stays bool), read with the framework's own element access."""
        raise NotImplementedError

    def can_write(self, arr: Any) -> bool:
        if self.immutable:
            return False
        return self.meta(arr).readonly is not True

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        raise NotImplementedError

    # -- consumer -----------------------------------------------------------------------------
    def importer(self, obj: Any, device: str) -> tuple[Callable[[Any], Any], str]:
        """The framework's own zero-copy entry point for `obj`, and its name (bench times it)."""
        raise NotImplementedError

    def consume(self, obj: Any, device: str, stream: Any = None) -> tuple[Any, str]:
        """Import `obj` with the framework's own entry point; returns (array, how). `stream` is the
        consumer's stream B in the stream case (frameworks with a current stream ignore it: the
        doctor has made B current)."""
        fn, how = self.importer(obj, device)
        return fn(obj), how

    # -- streams (GPU) ------------------------------------------------------------------------
    def new_stream(self, device: str) -> Any:
        raise NotImplementedError

    def stream_handle(self, stream: Any) -> int:
        return int(stream.__cuda_stream__()[1])

    def stream_ctx(self, stream: Any):
        """Make `stream` the framework's current stream (no-op for frameworks without one)."""
        return contextlib.nullcontext()

    def stridex_stream(self, stream: Any) -> Any:
        """What to pass as stridex.view(..., stream=): the native stream object itself."""
        return stream

    # The stream case enqueues a ~0.1 s kernel on A, then the write, the hand-over and the
    # consumer's copy: nothing in between may block the host (an allocation that synchronises
    # would wait for the kernel and hide a missing order), so what needs memory is prepared first.

    def prepare_fill(self, arr: Any, value: float, stream: Any) -> Any:
        """Called before the sleep; its result is what fill_async gets as `value`."""
        return value

    def fill_async(self, arr: Any, value: Any, stream: Any) -> None:
        """Enqueue, on `stream` (current), a write of `value` to every element."""
        raise NotImplementedError

    def prepare_snapshot(self, case: Case, device: str, stream: Any) -> Any:
        """Called before the sleep: memory for snapshot_async (None: it allocates without a sync)."""
        return None

    def snapshot_async(self, arr: Any, stream: Any, out: Any = None) -> Any:
        """Enqueue, on `stream` (current), a device copy of `arr`: the consumer's work on B."""
        raise NotImplementedError

    def synchronize(self, device: str) -> None:
        if device_kind(device) == "cuda":
            CudaDriver.get().synchronize(device)
