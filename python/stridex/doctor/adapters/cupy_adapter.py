"""The CuPy adapter."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from ..adapter import Adapter
from ..cases import Case
from ..discovery import one_line
from ..meta import Meta, device_index, host_values


class CupyAdapter(Adapter):
    name = "cupy"
    kinds = ("cuda",)
    stream_kind = "explicit"
    makes_stream = True
    why_not = {"cpu": "GPU memory only", "readonly": "no read-only arrays"}

    _bf16: str | None = None  # why CuPy has no bfloat16 here ("" when it has), probed on first use

    def _common(self, case: Case, device: str) -> str | None:
        if case.dtype == "bfloat16" and self._bf16 is None:
            try:
                import ml_dtypes

                with self.m.cuda.Device(device_index(device)):
                    self.m.zeros(1, dtype=ml_dtypes.bfloat16)
                self._bf16 = ""
            except Exception as exc:  # noqa: BLE001
                self._bf16 = f"no bfloat16 arrays ({one_line(exc)})"
        if case.dtype == "bfloat16" and self._bf16:
            return f"{self.name}: {self._bf16}"
        return super()._common(case, device)

    def devices(self) -> set[str] | None:
        try:
            return {f"cuda:{i}" for i in range(self.m.cuda.runtime.getDeviceCount())}
        except Exception:  # noqa: BLE001
            return set()

    def make(self, case: Case, device: str) -> Any:
        with self.m.cuda.Device(device_index(device)) as dev:
            base = self.m.asarray(case.base_values().astype(case.numpy_dtype()))
            arr = base[case.index] if case.index else base[...]
            dev.synchronize()
        return arr

    def meta(self, arr: Any) -> Meta:
        return Meta(
            int(arr.data.ptr),
            tuple(arr.shape),
            tuple(s // arr.itemsize for s in arr.strides),
            arr.dtype.name,
            f"cuda:{arr.device.id}",
            False,
        )

    def to_host(self, arr: Any) -> np.ndarray:
        with self.m.cuda.Device(arr.device.id):
            return host_values(self.m.asnumpy(arr))

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        with self.m.cuda.Device(arr.device.id):
            arr[index if index else ...] = value

    def importer(self, obj: Any, device: str):
        if hasattr(obj, "__dlpack__"):
            return self.m.from_dlpack, "cupy.from_dlpack"
        return self.m.asarray, "cupy.asarray"

    def new_stream(self, device: str) -> Any:
        with self.m.cuda.Device(device_index(device)):
            return self.m.cuda.Stream(non_blocking=True)

    def stream_handle(self, stream: Any) -> int:
        return int(stream.ptr)

    def stream_ctx(self, stream: Any):
        if stream is None:
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        stack.enter_context(self.m.cuda.Device(stream.device_id))  # a stream is used on its own device
        stack.enter_context(stream)
        return stack

    def fill_async(self, arr: Any, value: Any, stream: Any) -> None:
        with self.m.cuda.Device(arr.device.id), stream:
            arr.fill(value)

    def snapshot_async(self, arr: Any, stream: Any, out: Any = None) -> Any:
        with self.m.cuda.Device(arr.device.id), stream:
            return arr.copy()  # the memory pool does not synchronise
