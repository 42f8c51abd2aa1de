"""What the doctor knows about an array, independent of any framework: the Meta record every adapter
reports, and the small layout helpers around it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


ALIGN = 64  # bytes; XLA's CPU client aliases only 64-byte-aligned host memory (else it copies)


@dataclass
class Meta:
    """What a framework says about one of its arrays. None means "this framework cannot tell"."""

    ptr: int | None  # address of element 0
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in elements
    dtype: str  # canonical name: float32, bool, bfloat16 ...
    device: str | None  # "cpu", "cuda:0"
    readonly: bool | None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def to_json(self) -> dict:
        return {
            "ptr": self.ptr,
            "shape": list(self.shape),
            "strides": None if self.strides is None else list(self.strides),
            "dtype": self.dtype,
            "device": self.device,
            "readonly": self.readonly,
        }


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))


def host_values(a: Any) -> np.ndarray:
    """A host array's values as float64 (bool stays bool): what the doctor compares."""
    a = np.asarray(a)
    return a.copy() if a.dtype == np.bool_ else a.astype(np.float64)


def device_kind(device: str) -> str:
    return device.split(":")[0]


def device_index(device: str) -> int:
    return int(device.split(":")[1]) if ":" in device else 0


def aligned_numpy(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A C-contiguous copy of `values` as `dtype` whose data starts on an ALIGN-byte boundary."""
    nbytes = max(values.size * dtype.itemsize, 1)
    raw = np.empty(nbytes + ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    out = raw[start : start + values.size * dtype.itemsize].view(dtype).reshape(values.shape)
    out[...] = values.astype(dtype)
    return out
