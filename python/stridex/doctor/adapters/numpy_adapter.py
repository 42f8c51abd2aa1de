"""The NumPy adapter."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..adapter import Adapter
from ..cases import Case
from ..discovery import FrameworkInfo
from ..meta import Meta, aligned_numpy, host_values


class NumpyAdapter(Adapter):
    name = "numpy"
    kinds = ("cpu",)
    makes_readonly = True
    has_readonly = True
    why_not = {"cuda": "host memory only"}

    def __init__(self, info: FrameworkInfo) -> None:
        super().__init__(info)
        try:
            import ml_dtypes  # noqa: F401

            self.dtypes = frozenset({"float32", "bool", "bfloat16"})
        except Exception:  # noqa: BLE001
            self.dtypes = frozenset({"float32", "bool"})
            self.why_not = {**self.why_not, "bfloat16": "bfloat16 needs ml_dtypes, not installed"}

    def make(self, case: Case, device: str) -> Any:
        base = aligned_numpy(case.base_values(), case.numpy_dtype())
        arr = base[case.index] if case.index else base[...]
        if case.readonly:
            arr.flags.writeable = False
        return arr

    def meta(self, arr: Any) -> Meta:
        return Meta(
            arr.__array_interface__["data"][0],
            tuple(arr.shape),
            tuple(s // arr.itemsize for s in arr.strides),
            arr.dtype.name,
            "cpu",
            not arr.flags.writeable,
        )

    def to_host(self, arr: Any) -> np.ndarray:
        return host_values(arr)

    def can_write(self, arr: Any) -> bool:
        if arr.flags.writeable:
            return True
        try:  # a read-only view of a writable base (the producer's own): write through it
            arr.flags.writeable = True
            arr.flags.writeable = False
            return True
        except ValueError:
            return False

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        readonly = not arr.flags.writeable
        if readonly:
            arr.flags.writeable = True
        try:
            arr[index] = value
        finally:
            if readonly:
                arr.flags.writeable = False

    def importer(self, obj: Any, device: str):
        if hasattr(obj, "__dlpack__"):
            return self.m.from_dlpack, "numpy.from_dlpack"
        return self.m.asarray, "numpy.asarray"
