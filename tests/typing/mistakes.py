"""Planted mistakes: `mypy --strict` must report each line marked `# E: <error code>` and nothing
else (tests/python/test_typing.py). Never run."""

from __future__ import annotations

import numpy as np

import stridex

a = np.zeros((3, 4), dtype=np.float32)
v = stridex.view(a)
stridex.view(a, 1)  # E: call-arg
stridex.View(a)  # E: call-arg
shape: tuple[str, ...] = v.shape  # E: assignment
first: str = v.strides[0]  # E: assignment
v.shape = (1, 2)  # E: misc
stridex.view()  # E: call-arg
stridex.from_pointer(a.ctypes.data, "3x4", "float32")  # E: arg-type
v.reshape("12")  # E: arg-type
stridex.Dtype(32)  # E: arg-type
stridex.Device.from_dlpack("cuda")  # E: arg-type
v.__dlpack__(max_version=1)  # E: arg-type
stridex.VirtualBuffer(1 << 20, devices=0)  # E: arg-type
stream: str = v.stream  # E: assignment
stridex.dtype(np.float32).nbytes  # E: attr-defined
stridex.set_shortcuts("off")  # E: arg-type
stridex.shortcuts_disabled(["numpy_struct"])  # E: arg-type
