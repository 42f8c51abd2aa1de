"""One adapter per framework: make a case's array, describe it, read and write it, import a foreign
array with the framework's own zero-copy entry point, and (on GPUs) its native streams.

Everything an adapter reports comes from the framework's own API (``tensor.stride()``,
``array.data.ptr`` ...), never from the protocol under test, so that a wrong ``__dlpack__`` or
interface shows up as a disagreement between producer and consumer. Where a framework has no way
to read or write single elements (cuda.core views, Numba device arrays), the adapter reads and
writes raw memory through the CUDA driver (loaded with ctypes, independent of stridex).

Capabilities are data (class attributes), so "can this framework represent this case" has one
answer, used by the matrix ("—") and by the claims table (checks.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .cases import Case, numpy_dtype
from .discovery import FrameworkInfo, one_line

ALIGN = 64  # bytes; XLA's CPU client aliases only 64-byte-aligned host memory (else it copies)
SLEEP_CYCLES = 200_000_000  # GPU clock cycles a producer's stream A spins: about 0.1 s on an H100


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
        return {"ptr": self.ptr, "shape": list(self.shape), "strides": None if self.strides is None else
                list(self.strides), "dtype": self.dtype, "device": self.device, "readonly": self.readonly}


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
    out = raw[start:start + values.size * dtype.itemsize].view(dtype).reshape(values.shape)
    out[...] = values.astype(dtype)
    return out


# ---------------------------------------------------------------------------------------------
# Raw memory, for frameworks without element access, and for consumer work on a stream.


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
            self._check(self.lib.cuMemcpy(ctypes.c_void_p(ctypes.addressof(buf)), ctypes.c_uint64(ptr),
                                          ctypes.c_size_t(nbytes)), "cuMemcpy (read)")
        return buf.raw[:nbytes]

    def write(self, ptr: int, data: bytes, device: str) -> None:
        buf = ctypes.create_string_buffer(data, len(data))
        with self.context(device):
            self._check(self.lib.cuMemcpy(ctypes.c_uint64(ptr), ctypes.c_void_p(ctypes.addressof(buf)),
                                          ctypes.c_size_t(len(data))), "cuMemcpy (write)")

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
            self._check(self.lib.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(dst), ctypes.c_uint64(src),
                                                      ctypes.c_size_t(nbytes), ctypes.c_void_p(stream)),
                        "cuMemcpyDtoDAsync")

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


def gpu_sleep(handle: int, device: str, frameworks: dict[str, Adapter]) -> None:
    """Enqueue a ~0.1 s kernel on the stream `handle`, with whichever framework can launch one."""
    torch = frameworks.get("torch")
    if torch is not None:
        t = torch.m
        with t.cuda.device(device_index(device)), t.cuda.stream(
                t.cuda.ExternalStream(handle, device=f"cuda:{device_index(device)}")):
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


# ---------------------------------------------------------------------------------------------
# Adapters


class Adapter:
    """A framework as producer and consumer. Subclasses fill the capability table and the hooks."""

    name = ""
    kinds: tuple[str, ...] = ("cpu",)  # device kinds it holds arrays on
    dtypes: frozenset[str] = frozenset({"float32", "bool", "bfloat16"})
    makes_strided = True  # its own slicing gives non-compact views
    makes_negative = True  # ... and negative steps
    holds_strided = True  # it imports non-compact layouts without copying
    holds_negative = True
    has_0d = True
    makes_readonly = False  # it can mark an array read-only
    has_readonly = False  # its arrays carry a read-only flag that the doctor compares
    immutable = False  # its arrays are never written (JAX)
    experimental = False  # adapter not yet verified on hardware: its pairs are not claimed
    stream_kind: str | None = None  # "explicit": the doctor makes its stream; "implicit": it picks one
    makes_stream = False  # it can write an array on a stream of its own (stream-case producer)
    producer = True
    consumer = True
    why_not: dict[str, str] = {}  # reasons for the "—" above, by capability

    def __init__(self, info: FrameworkInfo) -> None:
        self.info = info
        self.m = info.module
        self.version = info.version

    # -- capability ---------------------------------------------------------------------------
    def devices(self) -> set[str] | None:
        """The exact devices it has (None: any device of its kinds)."""
        return None

    def _why(self, key: str, default: str) -> str:
        return f"{self.name}: {self.why_not.get(key, default)}"

    def _common(self, case: Case, device: str) -> str | None:
        kind = device_kind(device)
        if kind not in self.kinds:
            return self._why(kind, f"no {kind} arrays")
        devices = self.devices()
        if devices is not None and device not in devices:
            return f"{self.name}: no {device} here"
        if case.dtype not in self.dtypes:
            return self._why(case.dtype, f"no {case.dtype} dtype")
        if case.shape == () and not self.has_0d:
            return self._why("0-d", "no 0-d arrays")
        if case.stream and self.stream_kind is None:
            return self._why("stream", "no CUDA streams")
        return None

    def cannot_make(self, case: Case, device: str) -> str | None:
        if not self.producer:
            return f"{self.name}: consumer only here"
        reason = self._common(case, device)
        if reason:
            return reason
        if case.name == "strided" and not self.makes_strided:
            return self._why("strided", "arrays are always compact")
        if case.name == "negative" and not self.makes_negative:
            return self._why("negative", "no negative strides")
        if case.readonly and not (self.makes_readonly or self.immutable):
            return self._why("readonly", "no read-only arrays")
        if case.stream and not self.makes_stream:
            return self._why("stream", "cannot write on a stream of its own")
        return None

    def cannot_hold(self, case: Case, device: str) -> str | None:
        if not self.consumer:
            return f"{self.name}: producer only here"
        reason = self._common(case, device)
        if reason:
            return reason
        if case.name == "strided" and not self.holds_strided:
            return self._why("strided", "arrays are always compact")
        if case.name == "negative" and not self.holds_negative:
            return self._why("negative", "no negative strides")
        if case.readonly and not (self.has_readonly or self.immutable):
            return self._why("readonly", "no read-only arrays (it cannot show the flag)")
        return None

    # -- producer -----------------------------------------------------------------------------
    def make(self, case: Case, device: str) -> Any:
        raise NotImplementedError

    def export(self, arr: Any) -> Any:
        """What is handed to a consumer or to stridex.view: the array itself, unless overridden."""
        return arr

    def on_stream(self, arr: Any, stream: Any) -> Any:
        """`arr` as the framework says "its pending work is on `stream`" (stream case). Frameworks
        with a current stream say it by being current; Numba binds the stream to the array."""
        return arr

    # -- both ---------------------------------------------------------------------------------
    def meta(self, arr: Any) -> Meta:
        raise NotImplementedError

    def to_host(self, arr: Any) -> np.ndarray:
        """Values as float64 (bool stays bool), read with the framework's own element access."""
        raise NotImplementedError

    def can_write(self, arr: Any) -> bool:
        if self.immutable:
            return False
        return self.meta(arr).readonly is not True

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        raise NotImplementedError

    # -- consumer -----------------------------------------------------------------------------
    def importer(self, obj: Any, device: str) -> tuple[Callable[[Any], Any], str]:
        """The framework's own zero-copy entry point for `obj`, and its name (bench times it)."""
        raise NotImplementedError

    def consume(self, obj: Any, device: str, stream: Any = None) -> tuple[Any, str]:
        """Import `obj` with the framework's own entry point; returns (array, how). `stream` is the
        consumer's stream B in the stream case (frameworks with a current stream ignore it: the
        doctor has made B current)."""
        fn, how = self.importer(obj, device)
        return fn(obj), how

    # -- streams (GPU) ------------------------------------------------------------------------
    def new_stream(self, device: str) -> Any:
        raise NotImplementedError

    def stream_handle(self, stream: Any) -> int:
        return int(stream.__cuda_stream__()[1])

    def stream_ctx(self, stream: Any):
        """Make `stream` the framework's current stream (no-op for frameworks without one)."""
        return contextlib.nullcontext()

    def stridex_stream(self, stream: Any) -> Any:
        """What to pass as stridex.view(..., stream=): the native stream object itself."""
        return stream

    # The stream case enqueues a ~0.1 s kernel on A, then the write, the hand-over and the
    # consumer's copy: nothing in between may block the host (an allocation that synchronises
    # would wait for the kernel and hide a missing order), so what needs memory is prepared first.

    def prepare_fill(self, arr: Any, value: float, stream: Any) -> Any:
        """Called before the sleep; its result is what fill_async gets as `value`."""
        return value

    def fill_async(self, arr: Any, value: Any, stream: Any) -> None:
        """Enqueue, on `stream` (current), a write of `value` to every element."""
        raise NotImplementedError

    def prepare_snapshot(self, case: Case, device: str, stream: Any) -> Any:
        """Called before the sleep: memory for snapshot_async (None: it allocates without a sync)."""
        return None

    def snapshot_async(self, arr: Any, stream: Any, out: Any = None) -> Any:
        """Enqueue, on `stream` (current), a device copy of `arr`: the consumer's work on B."""
        raise NotImplementedError

    def synchronize(self, device: str) -> None:
        if device_kind(device) == "cuda":
            CudaDriver.get().synchronize(device)


# ---- NumPy ---------------------------------------------------------------------------------


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
        return Meta(arr.__array_interface__["data"][0], tuple(arr.shape),
                    tuple(s // arr.itemsize for s in arr.strides), arr.dtype.name, "cpu", not arr.flags.writeable)

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


# ---- PyTorch -------------------------------------------------------------------------------


class TorchAdapter(Adapter):
    name = "torch"
    kinds = ("cpu", "cuda")
    makes_negative = holds_negative = False
    stream_kind = "explicit"
    makes_stream = True
    why_not = {"negative": "tensors cannot have negative strides", "readonly": "no read-only tensors",
               "stream": "CPU tensors have no streams"}

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
        return Meta(arr.data_ptr(), tuple(arr.shape), tuple(arr.stride()), str(arr.dtype).removeprefix("torch."),
                    dev, False)

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


# ---- CuPy ----------------------------------------------------------------------------------


class CupyAdapter(Adapter):
    name = "cupy"
    kinds = ("cuda",)
    stream_kind = "explicit"
    makes_stream = True
    why_not = {"cpu": "GPU memory only", "readonly": "no read-only arrays"}

    _bf16: str | None = None  # why CuPy has no bfloat16 here ("" when it has), probed on first use

    def _common(self, case: Case, device: str) -> str | None:
        if case.dtype == "bfloat16" and self._bf16 is None:
            try:
                import ml_dtypes

                with self.m.cuda.Device(device_index(device)):
                    self.m.zeros(1, dtype=ml_dtypes.bfloat16)
                self._bf16 = ""
            except Exception as exc:  # noqa: BLE001
                self._bf16 = f"no bfloat16 arrays ({one_line(exc)})"
        if case.dtype == "bfloat16" and self._bf16:
            return f"{self.name}: {self._bf16}"
        return super()._common(case, device)

    def devices(self) -> set[str] | None:
        try:
            return {f"cuda:{i}" for i in range(self.m.cuda.runtime.getDeviceCount())}
        except Exception:  # noqa: BLE001
            return set()

    def make(self, case: Case, device: str) -> Any:
        with self.m.cuda.Device(device_index(device)) as dev:
            base = self.m.asarray(case.base_values().astype(case.numpy_dtype()))
            arr = base[case.index] if case.index else base[...]
            dev.synchronize()
        return arr

    def meta(self, arr: Any) -> Meta:
        return Meta(int(arr.data.ptr), tuple(arr.shape), tuple(s // arr.itemsize for s in arr.strides),
                    arr.dtype.name, f"cuda:{arr.device.id}", False)

    def to_host(self, arr: Any) -> np.ndarray:
        with self.m.cuda.Device(arr.device.id):
            return host_values(self.m.asnumpy(arr))

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        with self.m.cuda.Device(arr.device.id):
            arr[index if index else ...] = value

    def importer(self, obj: Any, device: str):
        if hasattr(obj, "__dlpack__"):
            return self.m.from_dlpack, "cupy.from_dlpack"
        return self.m.asarray, "cupy.asarray"

    def new_stream(self, device: str) -> Any:
        with self.m.cuda.Device(device_index(device)):
            return self.m.cuda.Stream(non_blocking=True)

    def stream_handle(self, stream: Any) -> int:
        return int(stream.ptr)

    def stream_ctx(self, stream: Any):
        if stream is None:
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        stack.enter_context(self.m.cuda.Device(stream.device_id))  # a stream is used on its own device
        stack.enter_context(stream)
        return stack

    def fill_async(self, arr: Any, value: Any, stream: Any) -> None:
        with self.m.cuda.Device(arr.device.id), stream:
            arr.fill(value)

    def snapshot_async(self, arr: Any, stream: Any, out: Any = None) -> Any:
        with self.m.cuda.Device(arr.device.id), stream:
            return arr.copy()  # the memory pool does not synchronise


# ---- JAX -----------------------------------------------------------------------------------


class JaxAdapter(Adapter):
    name = "jax"
    kinds = ("cpu", "cuda")
    makes_strided = holds_strided = makes_negative = holds_negative = False
    immutable = True  # arrays are read-only by nature; there is no flag to compare
    stream_kind = "implicit"  # jax picks its own stream when it imports
    why_not = {"strided": "arrays are always compact (it copies non-compact input)",
               "negative": "arrays are always compact", "stream": "no user streams to write on"}

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


# ---- Warp ----------------------------------------------------------------------------------


class WarpAdapter(Adapter):
    name = "warp"
    kinds = ("cpu", "cuda")
    makes_negative = False  # its slicing takes no negative steps; it does import them
    has_0d = False
    stream_kind = "explicit"
    makes_stream = True
    why_not = {"negative": "slicing takes no negative steps", "0-d": "arrays have at least one dimension",
               "readonly": "no read-only arrays", "stream": "CPU arrays have no streams"}

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
        return Meta(arr.ptr if arr.ptr is not None else None, tuple(arr.shape),
                    tuple(s // itemsize for s in arr.strides), arr.dtype.__name__, str(arr.device), False)

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


# ---- Numba-CUDA ----------------------------------------------------------------------------


class NumbaAdapter(Adapter):
    """numba.cuda device arrays: CUDA array interface only (no __dlpack__, O8). Element reads and
    writes go through raw memory: DeviceNDArray has no cheap strided element access."""

    name = "numba-cuda"
    kinds = ("cuda",)
    dtypes = frozenset({"float32", "bool"})
    stream_kind = "explicit"
    makes_stream = True
    why_not = {"cpu": "GPU memory only", "bfloat16": "device arrays take NumPy dtypes; no bfloat16",
               "readonly": "no read-only device arrays"}

    def devices(self) -> set[str] | None:
        try:
            return {f"cuda:{g.id}" for g in self.m.gpus} if self.m.is_available() else set()
        except Exception:  # noqa: BLE001
            return set()

    def make(self, case: Case, device: str) -> Any:
        cuda = self.m
        with cuda.gpus[device_index(device)]:
            # astype copies into a C-contiguous array (np.ascontiguousarray would make 0-d 1-d)
            base = cuda.to_device(case.base_values().astype(case.numpy_dtype(), order="C"))
            arr = base[case.index] if case.index else base
            cuda.synchronize()
        arr._stridex_doctor_device = device  # numba arrays do not say which GPU they are on
        return arr

    def meta(self, arr: Any) -> Meta:
        cai = arr.__cuda_array_interface__
        dtype = np.dtype(cai["typestr"])
        shape = tuple(cai["shape"])
        strides = c_strides(shape) if cai.get("strides") is None else tuple(s // dtype.itemsize for s in cai["strides"])
        device = getattr(arr, "_stridex_doctor_device", None)
        if device is None:
            with contextlib.suppress(Exception):
                device = f"cuda:{arr.gpu_data.context.device.id}"
        return Meta(cai["data"][0] or None, shape, strides, dtype.name, device, False)

    def _device(self, arr: Any) -> str:
        return self.meta(arr).device or "cuda:0"

    def to_host(self, arr: Any) -> np.ndarray:
        return host_values(raw_array(self.meta(arr), self._device(arr)))

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        raw_write_element(self.meta(arr), index, value, self._device(arr))

    def importer(self, obj: Any, device: str):
        cuda = self.m
        if hasattr(obj, "__cuda_array_interface__"):
            return cuda.as_cuda_array, "numba.cuda.as_cuda_array"
        if hasattr(cuda, "from_dlpack") and hasattr(obj, "__dlpack__"):
            return cuda.from_dlpack, "numba.cuda.from_dlpack"
        raise TypeError(f"numba.cuda imports only the CUDA array interface; {type(obj).__name__} has none")

    def consume(self, obj: Any, device: str, stream: Any = None) -> tuple[Any, str]:
        arr, how = super().consume(obj, device, stream)
        arr._stridex_doctor_device = device
        return arr, how

    def new_stream(self, device: str) -> Any:
        # cuda.stream() makes a blocking stream, which the legacy default stream would order
        # implicitly; a non-blocking one keeps the check honest
        handle = CudaDriver.get().non_blocking_stream(device)
        with self.m.gpus[device_index(device)]:
            return self.m.external_stream(handle)

    def stream_handle(self, stream: Any) -> int:
        if hasattr(stream, "__cuda_stream__"):
            return int(stream.__cuda_stream__()[1])
        handle = stream.handle
        return int(getattr(handle, "value", handle) or 0)

    def _on(self, arr: Any):
        return self.m.gpus[device_index(self._device(arr))]  # numba works in the current context

    def on_stream(self, arr: Any, stream: Any) -> Any:
        bound = arr.bind(stream)  # its CUDA array interface then exports `stream`
        bound._stridex_doctor_device = getattr(arr, "_stridex_doctor_device", None)
        return bound

    def prepare_fill(self, arr: Any, value: float, stream: Any) -> Any:
        with self._on(arr):
            src = self.m.to_device(np.full(arr.shape, value, dtype=arr.dtype))  # numba has no fill
            self.m.synchronize()
        return src

    def fill_async(self, arr: Any, value: Any, stream: Any) -> None:
        with self._on(arr):
            arr.copy_to_device(value, stream=stream)  # device to device on A

    def prepare_snapshot(self, case: Case, device: str, stream: Any) -> Any:
        with self.m.gpus[device_index(device)]:
            out = self.m.device_array(case.expected_layout()[0], dtype=case.numpy_dtype())
            self.m.synchronize()
        out._stridex_doctor_device = device
        return out

    def snapshot_async(self, arr: Any, stream: Any, out: Any = None) -> Any:
        with self._on(out):
            out.copy_to_device(arr, stream=stream)
        return out


# ---- cuda.core -----------------------------------------------------------------------------


class CudaCoreAdapter(Adapter):
    """cuda.core StridedMemoryView as a consumer: a view, so reads and writes go through memory."""

    name = "cuda.core"
    kinds = ("cpu", "cuda")
    producer = False
    has_readonly = True
    stream_kind = "explicit"

    def __init__(self, info: FrameworkInfo) -> None:
        super().__init__(info)
        self.smv = None
        for where in ("cuda.core", "cuda.core.utils", "cuda.core.experimental.utils"):
            with contextlib.suppress(Exception):
                module = __import__(where, fromlist=["StridedMemoryView"])
                self.smv = getattr(module, "StridedMemoryView")
                break
        if self.smv is None:
            raise ImportError("cuda.core has no StridedMemoryView")
        try:
            import ml_dtypes  # noqa: F401
        except Exception:  # noqa: BLE001
            self.dtypes = frozenset({"float32", "bool"})
            self.why_not = {"bfloat16": "bfloat16 needs ml_dtypes"}

    def consume(self, obj: Any, device: str, stream: Any = None) -> tuple[Any, str]:
        stream_ptr = self.stream_handle(stream) if stream is not None else -1
        if hasattr(self.smv, "from_any_interface"):
            view = self.smv.from_any_interface(obj, stream_ptr=stream_ptr)
            how = "StridedMemoryView.from_any_interface"
        else:
            view, how = self.smv(obj, stream_ptr=stream_ptr), "StridedMemoryView"
        ref = _SmvRef(view, device if device_kind(device) == "cuda" else "cpu")
        self.meta(ref)  # reading the attributes is part of the import (any wait shows up there)
        return ref, f"{how}(stream_ptr={'B' if stream is not None else -1})"

    def meta(self, arr: Any) -> Meta:
        view = arr.view
        shape = tuple(view.shape)
        strides = tuple(view.strides) if view.strides is not None else c_strides(shape)
        dtype = view.dtype
        name = np.dtype(dtype).name if dtype is not None else "unknown"
        device = f"cuda:{view.device_id}" if view.is_device_accessible else "cpu"
        return Meta(int(view.ptr) or None, shape, strides, name, device, bool(view.readonly))

    def to_host(self, arr: Any) -> np.ndarray:
        if isinstance(arr, DeviceBuffer):
            return host_values(raw_array(arr.meta, arr.device))
        return host_values(raw_array(self.meta(arr), arr.device))

    def write(self, arr: Any, index: tuple[int, ...], value) -> None:
        raw_write_element(self.meta(arr), index, value, arr.device)

    def new_stream(self, device: str) -> Any:
        try:
            from cuda.core import Device
        except ImportError:  # cuda.core < 0.4
            from cuda.core.experimental import Device

        with CudaDriver.get().context(device):  # set_current below must not leak into later checks
            dev = Device(device_index(device))
            dev.set_current()
            return dev.create_stream()

    def stream_handle(self, stream: Any) -> int:
        if hasattr(stream, "__cuda_stream__"):
            return int(stream.__cuda_stream__()[1])
        return int(stream.handle)

    def prepare_snapshot(self, case: Case, device: str, stream: Any) -> Any:
        shape = case.expected_layout()[0]
        return DeviceBuffer(Meta(0, shape, c_strides(shape), case.dtype, device, False), device)

    def snapshot_async(self, arr: Any, stream: Any, out: Any = None) -> Any:
        CudaDriver.get().copy_async(out.meta.ptr, self.meta(arr).ptr, out.nbytes, self.stream_handle(stream),
                                    arr.device)
        return out


@dataclass
class _SmvRef:
    view: Any
    device: str


# ---- Experimental adapters: written from documentation, not yet run on hardware -------------


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
        return Meta(None, tuple(arr.shape), c_strides(tuple(arr.shape)), str(arr.dtype).removeprefix("mlx.core."),
                    "cpu", True)

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


ADAPTERS: dict[str, type[Adapter]] = {
    "numpy": NumpyAdapter,
    "torch": TorchAdapter,
    "cupy": CupyAdapter,
    "jax": JaxAdapter,
    "warp": WarpAdapter,
    "numba-cuda": NumbaAdapter,
    "cuda.core": CudaCoreAdapter,
    "tensorflow": TensorflowAdapter,
    "mlx": MlxAdapter,
    "paddle": PaddleAdapter,
}
from .buffers import CtypesAdapter, MemoryviewAdapter  # noqa: E402  (buffers.py builds on Adapter)

ADAPTERS.update({"memoryview": MemoryviewAdapter, "ctypes": CtypesAdapter})
