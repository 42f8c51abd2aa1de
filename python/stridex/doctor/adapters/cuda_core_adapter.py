"""The cuda.core adapter."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..adapter import Adapter
from ..cases import Case
from ..cuda_memory import CudaDriver, DeviceBuffer, raw_array, raw_write_element
from ..discovery import FrameworkInfo
from ..meta import Meta, c_strides, device_index, device_kind, host_values


class CudaCoreAdapter(Adapter):
    """cuda.core StridedMemoryView as a consumer: a view, so reads and writes go through memory."""

    name = "cuda.core"
    kinds = ("cpu", "cuda")
    producer = False
    has_readonly = True
    stream_kind = "explicit"

    def __init__(self, info: FrameworkInfo) -> None:
        super().__init__(info)
        self.smv = None
        for where in ("cuda.core", "cuda.core.utils", "cuda.core.experimental.utils"):
            with contextlib.suppress(Exception):
                module = __import__(where, fromlist=["StridedMemoryView"])
                self.smv = getattr(module, "StridedMemoryView")
                break
        if self.smv is None:
            raise ImportError("cuda.core has no StridedMemoryView")
        try:
            import ml_dtypes  # noqa: F401
        except Exception:  # noqa: BLE001
            self.dtypes = frozenset({"float32", "bool"})
            self.why_not = {"bfloat16": "bfloat16 needs ml_dtypes"}

    def consume(self, obj: Any, device: str, stream: Any = None) -> tuple[Any, str]:
        stream_ptr = self.stream_handle(stream) if stream is not None else -1
        if hasattr(self.smv, "from_any_interface"):
            view = self.smv.from_any_interface(obj, stream_ptr=stream_ptr)
            how = "StridedMemoryView.from_any_interface"
        else:
            view, how = self.smv(obj, stream_ptr=stream_ptr), "StridedMemoryView"
        ref = _SmvRef(view, device if device_kind(device) == "cuda" else "cpu")
        self.meta(ref)  # reading the attributes is part of the import (any wait shows up there)
        return ref, f"{how}(stream_ptr={'B' if stream is not None else -1})"

    def meta(self, arr: Any) -> Meta:
        view = arr.view
        shape = tuple(view.shape)
        strides = tuple(view.strides) if view.strides is not None else c_strides(shape)
        dtype = view.dtype
        name = np.dtype(dtype).name if dtype is not None else "unknown"
        device = f"cuda:{view.device_id}" if view.is_device_accessible else "cpu"
        return Meta(int(view.ptr) or None, shape, strides, name, device, bool(view.readonly))

    def to_host(self, arr: Any) -> np.ndarray:
        if isinstance(arr, DeviceBuffer):
            return host_values(raw_array(arr.meta, arr.device))
        return host_values(raw_array(self.meta(arr), arr.device))

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        raw_write_element(self.meta(arr), index, value, arr.device)

    def new_stream(self, device: str) -> Any:
        try:
            from cuda.core import Device
        except ImportError:  # cuda.core < 0.4
            from cuda.core.experimental import Device

        with CudaDriver.get().context(device):  # set_current below must not leak into later checks
            dev = Device(device_index(device))
            dev.set_current()
            return dev.create_stream()

    def stream_handle(self, stream: Any) -> int:
        if hasattr(stream, "__cuda_stream__"):
            return int(stream.__cuda_stream__()[1])
        return int(stream.handle)

    def prepare_snapshot(self, case: Case, device: str, stream: Any) -> Any:
        shape = case.expected_layout()[0]
        return DeviceBuffer(Meta(0, shape, c_strides(shape), case.dtype, device, False), device)

    def snapshot_async(self, arr: Any, stream: Any, out: Any = None) -> Any:
        CudaDriver.get().copy_async(
            out.meta.ptr, self.meta(arr).ptr, out.nbytes, self.stream_handle(stream), arr.device
        )
        return out


@dataclass
class _SmvRef:
    view: Any
    device: str
