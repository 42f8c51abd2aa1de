"""Experimental adapters (TensorFlow, MLX, Paddle): written from documentation, not yet run on hardware."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..adapter import Adapter
from ..cases import Case
from ..meta import Meta, c_strides, device_index, device_kind, host_values


class TensorflowAdapter(Adapter):
    name = "tensorflow"
    kinds = ("cpu", "cuda")
    makes_strided = holds_strided = makes_negative = holds_negative = False
    immutable = True
    experimental = True
    why_not = {"strided": "tensors are always compact", "negative": "tensors are always compact"}

    def _dev(self, device: str) -> str:
        return "/CPU:0" if device_kind(device) == "cpu" else f"/GPU:{device_index(device)}"

    def make(self, case: Case, device: str) -> Any:
        tf = self.m
        with tf.device(self._dev(device)):
            t = tf.constant(case.expected_values().astype(np.float32 if case.dtype != "bool" else np.bool_))
            if case.dtype == "bfloat16":
                t = tf.cast(t, tf.bfloat16)
        return t

    def meta(self, arr: Any) -> Meta:
        spec = arr.device.lower()
        dev = "cpu" if ":cpu:" in spec else f"cuda:{int(spec.rsplit(':', 1)[1])}"
        return Meta(None, tuple(arr.shape), c_strides(tuple(arr.shape)), arr.dtype.name, dev, True)

    def to_host(self, arr: Any) -> np.ndarray:
        return host_values(self.m.cast(arr, self.m.float32).numpy() if arr.dtype.name == "bfloat16" else arr.numpy())

    def importer(self, obj: Any, device: str):
        return (lambda o: self.m.experimental.dlpack.from_dlpack(o.__dlpack__())), "tf.experimental.dlpack.from_dlpack"


class MlxAdapter(Adapter):
    name = "mlx"
    kinds = ("cpu",)
    makes_strided = holds_strided = makes_negative = holds_negative = False
    immutable = True
    experimental = True

    def make(self, case: Case, device: str) -> Any:
        mx = self.m
        values = case.expected_values()
        a = mx.array(values.astype(np.float32) if values.dtype != np.bool_ else values)
        return a.astype(mx.bfloat16) if case.dtype == "bfloat16" else a

    def meta(self, arr: Any) -> Meta:
        return Meta(
            None, tuple(arr.shape), c_strides(tuple(arr.shape)), str(arr.dtype).removeprefix("mlx.core."), "cpu", True
        )

    def to_host(self, arr: Any) -> np.ndarray:
        mx = self.m
        return host_values(np.array(arr.astype(mx.float32) if arr.dtype == mx.bfloat16 else arr))

    def importer(self, obj: Any, device: str):
        if hasattr(self.m, "from_dlpack"):
            return self.m.from_dlpack, "mlx.core.from_dlpack"
        return self.m.array, "mlx.core.array"


class PaddleAdapter(Adapter):
    name = "paddle"
    kinds = ("cpu", "cuda")
    makes_strided = holds_strided = makes_negative = holds_negative = False
    experimental = True

    def make(self, case: Case, device: str) -> Any:
        paddle = self.m
        place = paddle.CPUPlace() if device_kind(device) == "cpu" else paddle.CUDAPlace(device_index(device))
        values = case.expected_values()
        t = paddle.to_tensor(values.astype(np.float32) if values.dtype != np.bool_ else values, place=place)
        return t.astype("bfloat16") if case.dtype == "bfloat16" else t

    def meta(self, arr: Any) -> Meta:
        place = arr.place
        dev = f"cuda:{place.gpu_device_id()}" if place.is_gpu_place() else "cpu"
        strides = tuple(arr.strides) if hasattr(arr, "strides") else c_strides(tuple(arr.shape))
        return Meta(int(arr.data_ptr()), tuple(arr.shape), strides, str(arr.dtype).removeprefix("paddle."), dev, False)

    def to_host(self, arr: Any) -> np.ndarray:
        return host_values(arr.astype("float32").numpy() if "bfloat16" in str(arr.dtype) else arr.numpy())

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        arr[index] = value

    def importer(self, obj: Any, device: str):
        return self.m.utils.dlpack.from_dlpack, "paddle.utils.dlpack.from_dlpack"
