"""Every public name of stridex, used as a user would: `mypy --strict` must accept this file
(tests/python/test_typing.py). It also runs: on a machine without a GPU the CUDA parts are skipped."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

import stridex
import stridex.ipc


def layout(v: stridex.View) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    return v.shape, v.strides, v.ndim


def main() -> None:
    version: str = stridex.__version__
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v: stridex.View = stridex.view(a[:, ::-2])
    w = stridex.view(a, stream=None)
    stridex.view(a, stream=stridex.NO_SYNC)
    shape, strides, ndim = layout(v)
    byte_strides: tuple[int, ...] = v.byte_strides
    lo, hi = v.byte_span
    ptr: int = v.ptr
    dt: stridex.Dtype = v.dtype
    name: str = dt.name
    np_dtype: np.dtype[Any] = dt.numpy
    dev: stridex.Device = v.device
    kind: str = dev.type
    pair: tuple[int, int] = dev.dlpack
    flags: list[bool] = [
        v.readonly,
        v.is_c_contiguous,
        v.is_f_contiguous,
        v.is_dense,
        dev.host_accessible,
        dev.cuda_accessible,
    ]
    sizes: list[int] = [v.size, v.itemsize, v.nbytes, len(w), dt.bits, dt.code, dt.lanes, dt.itemsize, dev.id]
    stream: int | None = v.stream
    sub: stridex.View = w[1:, ::2][0, ...][None]
    moved: stridex.View = w.T.permute(1, 0).reshape(12).reshape((3, 4)).squeeze()
    capsule = v.__dlpack__(max_version=(1, 0))
    device_pair: tuple[int, int] = v.__dlpack_device__()
    interface: dict[str, object] = w.__array_interface__
    back = np.from_dlpack(w)
    as_array = np.asarray(w)
    same = stridex.dtype(np.float32) == stridex.dtype("float32") == stridex.dtype(a)
    d2 = stridex.Dtype.from_dlpack(2, 32, 1)
    d3 = stridex.Dtype.from_typestr("<f4")
    d4 = stridex.Dtype.from_buffer_format("f")
    cpu = stridex.Device("cpu")
    cpu2 = stridex.Device.from_dlpack(1, 0)
    raw: stridex.View = stridex.from_pointer(a.ctypes.data, (3, 4), "float32", owner=a, strides=None, readonly=True)
    owner: object = raw.owner
    info: stridex.PointerInfo = stridex.pointer_info(a.ctypes.data)
    memory: str = info.memory_type
    base: stridex.DevicePtr | None = info.base
    gpus: int = stridex.device_count() if stridex.cuda_available() else 0
    p = stridex.DevicePtr(a.ctypes.data, device="cpu")
    q: stridex.DevicePtr = (p + 16).align_up(64)
    gap = q - p
    ordered: bool = p < q and p.is_aligned(1)
    address: int = int(p) + p.address
    no_sync: stridex.NoSyncType = stridex.NO_SYNC
    provenance: str = v.writability
    fresh: stridex.View = stridex.empty((3, 4), "float32", device="cpu", order="F")
    filled: stridex.View = stridex.copy(fresh, a, stream=stridex.NO_SYNC)
    copies: list[stridex.View] = [
        v.copy(),
        v.copy("cpu", "K"),
        v.contiguous(),
        v.to("cpu"),
        v.to(stridex.Device("cpu"), stream=None),
    ]
    shared: stridex.View = stridex.ipc.shared_empty((3, 4), np.float32)
    stridex.copy(shared, stridex.ipc.to_shared(a))
    unpickled: stridex.View = pickle.loads(pickle.dumps(shared))  # this process: the same View back
    released: bool = stridex.ipc.wait_released(timeout=0.0)
    tickets: dict[str, int] = stridex.ipc.pending()
    listed: list[stridex.Shortcut] = stridex.shortcuts()
    facts: list[str] = [
        listed[0].name,
        listed[0].framework,
        listed[0].reads,
        listed[0].checked,
        listed[0].fallback,
        listed[0].source,
    ]
    on: bool = listed[0].enabled
    previous: dict[str, bool] = stridex.set_shortcuts({"jaxlib_export": False})
    stridex.set_shortcuts(previous)
    with stridex.shortcuts_disabled("numpy_struct"):
        stridex.view(a)
    with stridex.shortcuts_disabled():
        stridex.set_shortcuts(True)
    if gpus:
        with stridex.VirtualBuffer(1 << 21, capacity=1 << 22, device=0) as buf:
            grown: stridex.View = buf.view("float32", (1024,))
            buf.grow(1 << 22)
            mapped: int = buf.mapped_bytes
            print(grown, mapped, buf.base, buf.stats)
            del grown  # closing the buffer (leaving the with block) needs every view gone
    print(
        version,
        shape,
        strides,
        ndim,
        byte_strides,
        lo,
        hi,
        ptr,
        name,
        np_dtype,
        kind,
        pair,
        flags,
        sizes,
        stream,
        sub,
        moved,
        capsule,
        device_pair,
        interface,
        back,
        as_array,
        same,
        d2,
        d3,
        d4,
        cpu,
        cpu2,
        owner,
        memory,
        base,
        gap,
        ordered,
        address,
        no_sync,
        provenance,
        filled,
        copies,
        unpickled.ptr == shared.ptr,
        released,
        tickets,
        facts,
        on,
    )


if __name__ == "__main__":
    main()
