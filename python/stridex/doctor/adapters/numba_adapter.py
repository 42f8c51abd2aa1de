"""The Numba-CUDA adapter."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from ..adapter import Adapter
from ..cases import Case
from ..cuda_memory import CudaDriver, raw_array, raw_write_element
from ..meta import Meta, c_strides, device_index, host_values


class NumbaAdapter(Adapter):
    """numba.cuda device arrays: CUDA array interface only (no __dlpack__, O8). Element reads and
    writes go through raw memory: DeviceNDArray has no cheap strided element access."""

    name = "numba-cuda"
    kinds = ("cuda",)
    dtypes = frozenset({"float32", "bool"})
    stream_kind = "explicit"
    makes_stream = True
    why_not = {
        "cpu": "GPU memory only",
        "bfloat16": "device arrays take NumPy dtypes; no bfloat16",
        "readonly": "no read-only device arrays",
    }

    def devices(self) -> set[str] | None:
        try:
            return {f"cuda:{g.id}" for g in self.m.gpus} if self.m.is_available() else set()
        except Exception:  # noqa: BLE001
            return set()

    def make(self, case: Case, device: str) -> Any:
        cuda = self.m
        with cuda.gpus[device_index(device)]:
            # astype copies into a C-contiguous array (np.ascontiguousarray would make 0-d 1-d)
            base = cuda.to_device(case.base_values().astype(case.numpy_dtype(), order="C"))
            arr = base[case.index] if case.index else base
            cuda.synchronize()
        arr._stridex_doctor_device = device  # numba arrays do not say which GPU they are on
        return arr

    def meta(self, arr: Any) -> Meta:
        cai = arr.__cuda_array_interface__
        dtype = np.dtype(cai["typestr"])
        shape = tuple(cai["shape"])
        strides = c_strides(shape) if cai.get("strides") is None else tuple(s // dtype.itemsize for s in cai["strides"])
        device = getattr(arr, "_stridex_doctor_device", None)
        if device is None:
            with contextlib.suppress(Exception):
                device = f"cuda:{arr.gpu_data.context.device.id}"
        return Meta(cai["data"][0] or None, shape, strides, dtype.name, device, False)

    def _device(self, arr: Any) -> str:
        return self.meta(arr).device or "cuda:0"

    def to_host(self, arr: Any) -> np.ndarray:
        return host_values(raw_array(self.meta(arr), self._device(arr)))

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        raw_write_element(self.meta(arr), index, value, self._device(arr))

    def importer(self, obj: Any, device: str):
        cuda = self.m
        if hasattr(obj, "__cuda_array_interface__"):
            return cuda.as_cuda_array, "numba.cuda.as_cuda_array"
        if hasattr(cuda, "from_dlpack") and hasattr(obj, "__dlpack__"):
            return cuda.from_dlpack, "numba.cuda.from_dlpack"
        raise TypeError(f"numba.cuda imports only the CUDA array interface; {type(obj).__name__} has none")

    def consume(self, obj: Any, device: str, stream: Any = None) -> tuple[Any, str]:
        arr, how = super().consume(obj, device, stream)
        arr._stridex_doctor_device = device
        return arr, how

    def new_stream(self, device: str) -> Any:
        # cuda.stream() makes a blocking stream, which the legacy default stream would order
        # implicitly; a non-blocking one keeps the check honest
        handle = CudaDriver.get().non_blocking_stream(device)
        with self.m.gpus[device_index(device)]:
            return self.m.external_stream(handle)

    def stream_handle(self, stream: Any) -> int:
        if hasattr(stream, "__cuda_stream__"):
            return int(stream.__cuda_stream__()[1])
        handle = stream.handle
        return int(getattr(handle, "value", handle) or 0)

    def _on(self, arr: Any):
        return self.m.gpus[device_index(self._device(arr))]  # numba works in the current context

    def on_stream(self, arr: Any, stream: Any) -> Any:
        bound = arr.bind(stream)  # its CUDA array interface then exports `stream`
        bound._stridex_doctor_device = getattr(arr, "_stridex_doctor_device", None)
        return bound

    def prepare_fill(self, arr: Any, value: float, stream: Any) -> Any:
        with self._on(arr):
            src = self.m.to_device(np.full(arr.shape, value, dtype=arr.dtype))  # numba has no fill
            self.m.synchronize()
        return src

    def fill_async(self, arr: Any, value: Any, stream: Any) -> None:
        with self._on(arr):
            arr.copy_to_device(value, stream=stream)  # device to device on A

    def prepare_snapshot(self, case: Case, device: str, stream: Any) -> Any:
        with self.m.gpus[device_index(device)]:
            out = self.m.device_array(case.expected_layout()[0], dtype=case.numpy_dtype())
            self.m.synchronize()
        out._stridex_doctor_device = device
        return out

    def snapshot_async(self, arr: Any, stream: Any, out: Any = None) -> Any:
        with self._on(out):
            out.copy_to_device(arr, stream=stream)
        return out
