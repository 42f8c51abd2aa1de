"""Raw memory, for frameworks without element access, and for consumer work on a stream.

The few CUDA driver calls the doctor needs, through ctypes: independent of stridex (whose behaviour
is under test) and of every framework."""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from .cases import numpy_dtype
from .meta import Meta, c_strides, device_index, device_kind


class _Framework(Protocol):
    """What gpu_sleep needs of an adapter (adapter.py's Adapter, which uses this module): the
    framework's module. A protocol, so that this module imports no adapter."""

    @property
    def m(self) -> Any: ...


SLEEP_CYCLES = 200_000_000  # GPU clock cycles a producer's stream A spins: about 0.1 s on an H100


class CudaDriver:
    """The few driver calls the doctor needs, through ctypes: independent of stridex and of any
    framework. Each call runs with the device's primary context current (what the runtime API and
    every framework use) and restores the caller's context after."""

    _instance: CudaDriver | None = None

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1" if sys.platform != "win32" else "nvcuda.dll")
        self._check(self.lib.cuInit(0), "cuInit")
        self._contexts: dict[int, ctypes.c_void_p] = {}
        self._streams: dict[tuple[str, int], int] = {}
        self._turns: dict[str, int] = {}

    @classmethod
    def get(cls) -> CudaDriver:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(rc, ctypes.byref(name))
            raise RuntimeError(f"{what} failed: {name.value.decode() if name.value else rc}")

    def _primary(self, device: str) -> ctypes.c_void_p:
        index = device_index(device)
        if index not in self._contexts:
            dev = ctypes.c_int()
            self._check(self.lib.cuDeviceGet(ctypes.byref(dev), index), "cuDeviceGet")
            ctx = ctypes.c_void_p()
            self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
            self._contexts[index] = ctx
        return self._contexts[index]

    def make_current(self, device: str) -> None:
        self._check(self.lib.cuCtxSetCurrent(self._primary(device)), "cuCtxSetCurrent")

    @contextlib.contextmanager
    def context(self, device: str):
        primary = self._primary(device)
        saved = ctypes.c_void_p()
        self._check(self.lib.cuCtxGetCurrent(ctypes.byref(saved)), "cuCtxGetCurrent")
        self._check(self.lib.cuCtxSetCurrent(primary), "cuCtxSetCurrent")
        try:
            yield
        finally:
            self.lib.cuCtxSetCurrent(saved)

    def read(self, ptr: int, nbytes: int, device: str) -> bytes:
        buf = ctypes.create_string_buffer(max(nbytes, 1))
        with self.context(device):
            self._check(
                self.lib.cuMemcpy(
                    ctypes.c_void_p(ctypes.addressof(buf)), ctypes.c_uint64(ptr), ctypes.c_size_t(nbytes)
                ),
                "cuMemcpy (read)",
            )
        return buf.raw[:nbytes]

    def write(self, ptr: int, data: bytes, device: str) -> None:
        buf = ctypes.create_string_buffer(data, len(data))
        with self.context(device):
            self._check(
                self.lib.cuMemcpy(
                    ctypes.c_uint64(ptr), ctypes.c_void_p(ctypes.addressof(buf)), ctypes.c_size_t(len(data))
                ),
                "cuMemcpy (write)",
            )

    def alloc(self, nbytes: int, device: str) -> int:
        ptr = ctypes.c_uint64()
        with self.context(device):
            self._check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(max(nbytes, 1))), "cuMemAlloc")
        return ptr.value

    def free(self, ptr: int, device: str) -> None:
        with self.context(device):
            self.lib.cuMemFree_v2(ctypes.c_uint64(ptr))

    def copy_async(self, dst: int, src: int, nbytes: int, stream: int, device: str) -> None:
        with self.context(device):
            self._check(
                self.lib.cuMemcpyDtoDAsync_v2(
                    ctypes.c_uint64(dst), ctypes.c_uint64(src), ctypes.c_size_t(nbytes), ctypes.c_void_p(stream)
                ),
                "cuMemcpyDtoDAsync",
            )

    def synchronize(self, device: str) -> None:
        with self.context(device):
            self._check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def non_blocking_stream(self, device: str) -> int:
        """A CU_STREAM_NON_BLOCKING stream on `device`. Two are kept per device and handed out in
        turn, so that two consecutive calls (stream A, then stream B) never get the same one."""
        turn = self._turns.get(device, 0)
        self._turns[device] = turn + 1
        key = (device, turn % 2)
        if key not in self._streams:
            stream = ctypes.c_void_p()
            with self.context(device):
                self._check(self.lib.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")
            self._streams[key] = stream.value
        return self._streams[key]


def reset_current_device() -> None:
    """Make cuda:0 current (its primary context: what the runtime API, and so torch, CuPy and Numba,
    read as the current device). Every GPU check starts from it, so cells on cuda:N > 0 also check
    hand-overs of memory that is not on the current device."""
    CudaDriver.get().make_current("cuda:0")


def raw_read(ptr: int, nbytes: int, device: str) -> bytes:
    if device_kind(device) == "cpu":
        return ctypes.string_at(ptr, nbytes)
    return CudaDriver.get().read(ptr, nbytes, device)


def raw_write(ptr: int, data: bytes, device: str) -> None:
    if device_kind(device) == "cpu":
        ctypes.memmove(ptr, data, len(data))
    else:
        CudaDriver.get().write(ptr, data, device)


def raw_array(meta: Meta, device: str) -> np.ndarray:
    """The array that `meta` describes, read from memory: checks a layout without element access."""
    dtype = numpy_dtype(meta.dtype)
    strides = meta.strides if meta.strides is not None else c_strides(meta.shape)
    if meta.size == 0:
        return np.empty(meta.shape, dtype=dtype)
    low = sum((n - 1) * s for n, s in zip(meta.shape, strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(meta.shape, strides) if s > 0)
    data = raw_read(meta.ptr + low * dtype.itemsize, (high - low + 1) * dtype.itemsize, device)
    flat = np.frombuffer(data, dtype=dtype)
    return np.lib.stride_tricks.as_strided(flat[-low:], meta.shape, tuple(s * dtype.itemsize for s in strides)).copy()


def raw_write_element(meta: Meta, index: tuple[int, ...], value, device: str) -> None:
    dtype = numpy_dtype(meta.dtype)
    strides = meta.strides if meta.strides is not None else c_strides(meta.shape)
    offset = sum(i * s for i, s in zip(index, strides)) * dtype.itemsize
    raw_write(meta.ptr + offset, np.array(value).astype(dtype).tobytes(), device)


class DeviceBuffer:
    """A plain device allocation holding a snapshot (consumer work for frameworks that do none)."""

    def __init__(self, meta: Meta, device: str) -> None:
        self.meta = Meta(0, meta.shape, c_strides(meta.shape), meta.dtype, device, False)
        self.nbytes = meta.size * numpy_dtype(meta.dtype).itemsize
        self.device = device
        self.meta.ptr = CudaDriver.get().alloc(self.nbytes, device)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            CudaDriver.get().free(self.meta.ptr, self.device)


_SPIN_SOURCE = r"""
extern "C" __global__ void stridex_doctor_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


def gpu_sleep(handle: int, device: str, frameworks: Mapping[str, _Framework]) -> None:
    """Enqueue a ~0.1 s kernel on the stream `handle`, with whichever framework can launch one."""
    torch = frameworks.get("torch")
    if torch is not None:
        t = torch.m
        with (
            t.cuda.device(device_index(device)),
            t.cuda.stream(t.cuda.ExternalStream(handle, device=f"cuda:{device_index(device)}")),
        ):
            t.cuda._sleep(SLEEP_CYCLES)
        return
    cupy = frameworks.get("cupy")
    if cupy is not None:
        cp = cupy.m
        with cp.cuda.Device(device_index(device)):
            kernel = cp.RawKernel(_SPIN_SOURCE, "stridex_doctor_spin")
            with cp.cuda.ExternalStream(handle):
                kernel((1,), (1,), (np.int64(SLEEP_CYCLES),))
        return
    raise RuntimeError("no framework here can launch a sleep kernel (the stream case needs torch or cupy)")
