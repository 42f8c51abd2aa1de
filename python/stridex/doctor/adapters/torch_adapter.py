"""The PyTorch adapter."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from ..adapter import Adapter
from ..cases import Case
from ..meta import Meta, device_kind, host_values


class TorchAdapter(Adapter):
    name = "torch"
    kinds = ("cpu", "cuda")
    makes_negative = holds_negative = False
    stream_kind = "explicit"
    makes_stream = True
    why_not = {
        "negative": "tensors cannot have negative strides",
        "readonly": "no read-only tensors",
        "stream": "CPU tensors have no streams",
    }

    def devices(self) -> set[str] | None:
        try:
            n = self.m.cuda.device_count() if self.m.cuda.is_available() else 0
        except Exception:  # noqa: BLE001
            n = 0
        return {"cpu"} | {f"cuda:{i}" for i in range(n)}

    def _dtype(self, name: str):
        return {"float32": self.m.float32, "bool": self.m.bool, "bfloat16": self.m.bfloat16}[name]

    def make(self, case: Case, device: str) -> Any:
        t = self.m
        values = case.base_values()
        src = t.from_numpy(values.astype(np.float32) if values.dtype != np.bool_ else values)
        base = src.to(device=device, dtype=self._dtype(case.dtype), copy=True)
        arr = base[case.index] if case.index else base
        if device_kind(device) == "cuda":
            t.cuda.synchronize(device)
        return arr

    def meta(self, arr: Any) -> Meta:
        dev = "cpu" if arr.device.type == "cpu" else f"{arr.device.type}:{arr.device.index}"
        return Meta(
            arr.data_ptr(), tuple(arr.shape), tuple(arr.stride()), str(arr.dtype).removeprefix("torch."), dev, False
        )

    def to_host(self, arr: Any) -> np.ndarray:
        cpu = arr.detach().to("cpu")
        if cpu.dtype == self.m.bfloat16:
            cpu = cpu.float()
        return host_values(cpu.numpy())

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        with self.m.no_grad():
            if arr.dim() == 0:
                arr.fill_(value)
            else:
                arr[index] = value

    def importer(self, obj: Any, device: str):
        if hasattr(obj, "__dlpack__"):
            return self.m.from_dlpack, "torch.from_dlpack"
        return (lambda o: self.m.as_tensor(o, device=device)), "torch.as_tensor"

    def new_stream(self, device: str) -> Any:
        return self.m.cuda.Stream(device=device)

    def stream_handle(self, stream: Any) -> int:
        return int(stream.cuda_stream)

    def stream_ctx(self, stream: Any):
        return self.m.cuda.stream(stream) if stream is not None else contextlib.nullcontext()

    def fill_async(self, arr: Any, value: Any, stream: Any) -> None:
        with self.m.cuda.stream(stream):
            arr.fill_(value)

    def snapshot_async(self, arr: Any, stream: Any, out: Any = None) -> Any:
        with self.m.cuda.stream(stream):
            return arr.clone()  # the caching allocator does not synchronise
