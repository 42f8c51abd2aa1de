"""The Warp adapter."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import numpy as np

from ..adapter import Adapter
from ..cases import Case
from ..discovery import FrameworkInfo
from ..meta import Meta, host_values


class WarpAdapter(Adapter):
    name = "warp"
    kinds = ("cpu", "cuda")
    makes_negative = False  # its slicing takes no negative steps; it does import them
    has_0d = False
    stream_kind = "explicit"
    makes_stream = True
    why_not = {
        "negative": "slicing takes no negative steps",
        "0-d": "arrays have at least one dimension",
        "readonly": "no read-only arrays",
        "stream": "CPU arrays have no streams",
    }

    def __init__(self, info: FrameworkInfo) -> None:
        super().__init__(info)
        wp = self.m
        with contextlib.redirect_stdout(sys.stderr):
            wp.config.quiet = True
            wp.init()
        self._types = {"float32": wp.float32, "bool": wp.bool}
        if hasattr(wp, "bfloat16"):
            self._types["bfloat16"] = wp.bfloat16
        else:
            self.why_not = {**self.why_not, "bfloat16": "no bfloat16 before Warp 1.10"}
        self.dtypes = frozenset(self._types)

    def devices(self) -> set[str] | None:
        return {str(d) for d in self.m.get_devices()}

    def make(self, case: Case, device: str) -> Any:
        wp = self.m
        values = case.base_values().astype(case.numpy_dtype())
        base = wp.array(values, dtype=self._types[case.dtype], device=device)
        arr = base[case.index] if case.index else base
        wp.synchronize_device(device)
        return arr

    def meta(self, arr: Any) -> Meta:
        itemsize = self.m.types.type_size_in_bytes(arr.dtype)
        return Meta(
            arr.ptr if arr.ptr is not None else None,
            tuple(arr.shape),
            tuple(s // itemsize for s in arr.strides),
            arr.dtype.__name__,
            str(arr.device),
            False,
        )

    def to_host(self, arr: Any) -> np.ndarray:
        return host_values(arr.numpy())

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        host = arr.numpy().copy()  # Warp arrays take no item assignment: write all, one changed
        host[index] = value
        arr.assign(host)
        self.m.synchronize_device(arr.device)

    def importer(self, obj: Any, device: str):
        if hasattr(obj, "__dlpack__"):
            return self.m.from_dlpack, "warp.from_dlpack"
        return (lambda o: self.m.array(o, device=device, copy=False)), "warp.array(copy=False)"

    def new_stream(self, device: str) -> Any:
        return self.m.Stream(device)

    def stream_handle(self, stream: Any) -> int:
        return int(stream.cuda_stream)

    def stream_ctx(self, stream: Any):
        return self.m.ScopedStream(stream) if stream is not None else contextlib.nullcontext()

    def stridex_stream(self, stream: Any) -> Any:
        return stream if hasattr(stream, "__cuda_stream__") else int(stream.cuda_stream)

    def fill_async(self, arr: Any, value: Any, stream: Any) -> None:
        with self.m.ScopedStream(stream):
            arr.fill_(value)

    def prepare_snapshot(self, case: Case, device: str, stream: Any) -> Any:
        return self.m.empty(case.expected_layout()[0], dtype=self._types[case.dtype], device=device)

    def snapshot_async(self, arr: Any, stream: Any, out: Any = None) -> Any:
        with self.m.ScopedStream(stream):
            self.m.copy(out, arr)
        return out
