"""The JAX adapter."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..adapter import Adapter
from ..cases import Case
from ..discovery import FrameworkInfo
from ..meta import Meta, c_strides, device_index, device_kind, host_values


class JaxAdapter(Adapter):
    name = "jax"
    kinds = ("cpu", "cuda")
    makes_strided = holds_strided = makes_negative = holds_negative = False
    immutable = True  # arrays are read-only by nature; there is no flag to compare
    stream_kind = "implicit"  # jax picks its own stream when it imports
    why_not = {
        "strided": "arrays are always compact (it copies non-compact input)",
        "negative": "arrays are always compact",
        "stream": "no user streams to write on",
    }

    def __init__(self, info: FrameworkInfo) -> None:
        super().__init__(info)
        import jax.dlpack  # noqa: F401  (submodules that `import jax` does not always load)
        import jax.numpy

        self.jnp = jax.numpy

    def _device(self, device: str):
        jax = self.m
        if device_kind(device) == "cpu":
            return jax.devices("cpu")[0]
        for platform in ("cuda", "gpu"):
            try:
                for d in jax.devices(platform):
                    if d.local_hardware_id == device_index(device):
                        return d
            except RuntimeError:
                continue
        return None

    def devices(self) -> set[str] | None:
        out = {"cpu"}
        for platform in ("cuda", "gpu"):
            try:
                out |= {f"cuda:{d.local_hardware_id}" for d in self.m.devices(platform)}
                break
            except RuntimeError:
                continue
        return out

    def make(self, case: Case, device: str) -> Any:
        values = case.base_values().astype(case.numpy_dtype())
        arr = self.m.device_put(values[case.index] if case.index else values, self._device(device))
        return arr.block_until_ready()

    def meta(self, arr: Any) -> Meta:
        (dev,) = arr.devices()
        name = "cpu" if dev.platform == "cpu" else f"cuda:{dev.local_hardware_id}"
        ptr = arr.unsafe_buffer_pointer() if arr.size else None
        return Meta(ptr, tuple(arr.shape), c_strides(tuple(arr.shape)), np.dtype(arr.dtype).name, name, True)

    def to_host(self, arr: Any) -> np.ndarray:
        return host_values(np.array(arr, copy=True))

    def importer(self, obj: Any, device: str):
        if hasattr(obj, "__dlpack__"):
            return self.m.dlpack.from_dlpack, "jax.dlpack.from_dlpack"
        return self.jnp.asarray, "jax.numpy.asarray"

    def snapshot_async(self, arr: Any, stream: Any, out: Any = None) -> Any:
        return self.jnp.array(arr, copy=True)  # runs on the stream jax imported the array on

    def synchronize(self, device: str) -> None:
        super().synchronize(device)
