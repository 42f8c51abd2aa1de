"""Adapters for Python's own buffers, present on every machine: ``memoryview`` (the buffer protocol,
as producer and consumer) and ``ctypes`` arrays (producer). With them a fresh install's doctor
checks more than NumPy against itself: every host producer against the buffer protocol, and
stridex's buffer export against ``memoryview``.

``array.array`` is not among them: it is one-dimensional, and every host case is 2-D or 0-d.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..cases import Case
from ..adapter import Adapter
from ..meta import Meta, aligned_numpy

# PEP 3118 format characters of the case dtypes ('<' and '=' prefixes are native here).
_FORMATS = {"f": "float32", "?": "bool"}
_CTYPES = {"float32": ctypes.c_float, "bool": ctypes.c_bool}


def _dtype_of(view: memoryview) -> str:
    return _FORMATS.get(view.format.lstrip("<=@"), f"format {view.format!r}")


def _buffer_meta(view: memoryview, ptr: int | None) -> Meta:
    return Meta(
        ptr,
        tuple(view.shape or ()),
        tuple(s // view.itemsize for s in view.strides or ()),
        _dtype_of(view),
        "cpu",
        view.readonly,
    )


def _values(view: memoryview) -> np.ndarray:
    values = np.array(view.tolist())  # element access through the buffer itself, not NumPy's import
    if view.ndim and 0 in view.shape:
        values = values.reshape(view.shape)
    return values if _dtype_of(view) == "bool" else values.astype(np.float64)


class MemoryviewAdapter(Adapter):
    """The buffer protocol: ``memoryview(x)`` as the consumer; as the producer, a memoryview of a
    case array (it has no ``__dlpack__`` and no interface: stridex must take the buffer)."""

    name = "memoryview"
    kinds = ("cpu",)
    dtypes = frozenset({"float32", "bool"})
    makes_readonly = True
    has_readonly = True
    why_not = {"cuda": "host memory only", "bfloat16": "the buffer protocol has no bfloat16 format"}

    def make(self, case: Case, device: str) -> Any:
        base = aligned_numpy(case.base_values(), case.numpy_dtype())
        arr = base[case.index] if case.index else base[...]
        if case.readonly:
            arr.flags.writeable = False
        return memoryview(arr)

    def meta(self, arr: Any) -> Meta:
        return _buffer_meta(arr, None)  # a memoryview does not say its address; the write check tells

    def to_host(self, arr: Any) -> np.ndarray:
        return _values(arr)

    def can_write(self, arr: Any) -> bool:
        return not arr.readonly

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        arr[index] = bool(value) if _dtype_of(arr) == "bool" else float(value)

    def importer(self, obj: Any, device: str):
        return memoryview, "memoryview"


class CtypesAdapter(Adapter):
    """ctypes arrays (``(c_float * 4) * 3``): C-contiguous, writable host memory with the buffer
    protocol, read and written through ctypes' own indexing (a memoryview of one has the format
    '<f', whose elements CPython's memoryview cannot read). Producer only: ctypes has no way to
    take a foreign buffer's layout."""

    name = "ctypes"
    kinds = ("cpu",)
    dtypes = frozenset({"float32", "bool"})
    makes_strided = makes_negative = False
    consumer = False
    why_not = {
        "cuda": "host memory only",
        "bfloat16": "no bfloat16 type",
        "strided": "arrays are always C-contiguous",
        "negative": "arrays are always C-contiguous",
    }

    def cannot_make(self, case: Case, device: str) -> str | None:
        # A ctypes array is always a whole array: no case that slices its base can be made.
        if case.index:
            return f"{self.name}: arrays are whole (no slicing), and this case slices its base"
        return super().cannot_make(case, device)

    def make(self, case: Case, device: str) -> Any:
        ctype = _CTYPES[case.dtype]
        for n in reversed(case.shape):
            ctype = ctype * n
        # on ALIGN-byte aligned memory, which is all XLA's CPU client aliases (it copies the rest)
        arr = ctype.from_buffer(aligned_numpy(np.zeros(max(ctypes.sizeof(ctype), 1)), np.dtype(np.uint8)))
        values = case.base_values()
        for index in np.ndindex(*case.shape):
            self.write(arr, index, values[index].item())
        return arr

    def meta(self, arr: Any) -> Meta:
        return _buffer_meta(memoryview(arr), ctypes.addressof(arr))

    def to_host(self, arr: Any) -> np.ndarray:
        def tolist(a: Any) -> Any:  # ctypes' own element access, nested like the array
            return [tolist(x) for x in a] if isinstance(a, ctypes.Array) else a

        shape = memoryview(arr).shape or ()
        values = np.array(arr.value if not shape else tolist(arr)).reshape(shape)
        return values if values.dtype == np.bool_ else values.astype(np.float64)

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        if not index:  # 0-d: a ctypes scalar
            arr.value = bool(value) if isinstance(arr, ctypes.c_bool) else float(value)
            return
        for i in index[:-1]:
            arr = arr[i]
        arr[index[-1]] = bool(value) if arr._type_ is ctypes.c_bool else float(value)
