"""The round-trip matrix: a stridex.View made from each producer's array (through stridex.view and
through stridex.from_pointer), handed to each consumer. The consumer's array must alias the View's
memory (a write through either side is read through the other) with the View's shape, strides,
dtype and device, and read-only must hold where the consumer can say it.

Pairs that cannot work because of the consumer (docs/protocols.md) assert the consumer's clear error
instead; docs/export.md lists them. CPU pairs run everywhere; CUDA pairs need a GPU and skip
without one.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import Any, Callable

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX on a shared GPU
os.environ.setdefault("XLA_PYTHON_CLIENT_ALLOCATOR", "platform")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import stridex  # noqa: E402
from export_support import aligned, cuda_device_count, optional, view_of  # noqa: E402

HAS_CUDA = cuda_device_count() > 0
jax = optional("jax")
jnp = optional("jax.numpy")
wp = optional("warp")
torch = optional("torch")
cp = optional("cupy")
numba_cuda = optional("numba.cuda") if HAS_CUDA else None


def _cuda_core():
    for name in ("cuda.core", "cuda.core.experimental.utils", "cuda.core.utils"):
        m = optional(name)
        if m is not None and hasattr(m, "StridedMemoryView"):
            return m
    return None


cuda_core = _cuda_core() if HAS_CUDA else None


def _jax_has(platform: str) -> bool:
    if jax is None:
        return False
    try:
        return bool(jax.devices(platform))
    except RuntimeError:
        return False


_warp_ready = False


def _warp():
    global _warp_ready
    if wp is not None and not _warp_ready:
        wp.config.quiet = True
        wp.init()
        _warp_ready = True
    return wp


# ---- raw memory access at an address (the ground truth of "same memory") ------------------------

_libcuda = ctypes.CDLL("libcuda.so.1") if HAS_CUDA else None


def write_raw(address: int, data: bytes, device: str) -> None:
    if device == "cpu":
        ctypes.memmove(address, data, len(data))
    else:
        sync()
        assert _libcuda.cuMemcpyHtoD_v2(ctypes.c_uint64(address), data, ctypes.c_size_t(len(data))) == 0


def read_raw(address: int, size: int, device: str) -> bytes:
    out = ctypes.create_string_buffer(size)
    if device == "cpu":
        ctypes.memmove(out, address, size)
    else:
        sync()
        assert _libcuda.cuMemcpyDtoH_v2(out, ctypes.c_uint64(address), ctypes.c_size_t(size)) == 0
    return out.raw


def host_from_raw(address: int, shape, byte_strides, dtype, device: str) -> np.ndarray:
    """A host copy of the strided array a consumer describes (its pointer, shape and byte strides),
    read as raw bytes: what that consumer would read, whatever its own copy routines support."""
    dtype = np.dtype(dtype)
    if 0 in shape:
        return np.empty(shape, dtype)
    lo = sum(s * (n - 1) for s, n in zip(byte_strides, shape) if s < 0)
    hi = sum(s * (n - 1) for s, n in zip(byte_strides, shape) if s > 0) + dtype.itemsize
    raw = np.frombuffer(read_raw(address + lo, hi - lo, device), np.uint8)
    view = np.lib.stride_tricks.as_strided(
        raw[-lo:].view(np.uint8), shape=tuple(shape) + (dtype.itemsize,), strides=tuple(byte_strides) + (1,)
    )
    return np.ascontiguousarray(view).view(dtype).reshape(shape)


def sync():
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()
    if cp is not None:
        cp.cuda.Device().synchronize()


# ---- producers ------------------------------------------------------------------------------------

DTYPES = {
    "float32": np.float32,
    "bool": np.bool_,
    "bfloat16": ml_dtypes.bfloat16,
    "complex64": np.complex64,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
}


@dataclass
class Producer:
    name: str
    device: str
    reason: Callable[[], str | None]  # why it cannot run here, or None
    make: Callable[[tuple, str], Any]  # a C-contiguous array holding 0, 1, 2, ...
    pointer: Callable[[Any], int]
    dtypes: tuple = ("float32",)


def _np_make(shape, dtype):
    return aligned(shape, DTYPES[dtype])


def _jax_make(shape, dtype, platform):
    dev = jax.devices(platform)[0]
    host = aligned(shape, DTYPES[dtype])
    # device_put is asynchronous: wait, or JAX's copy may land after the test's own raw writes.
    return jax.device_put(host, dev).block_until_ready()


def _torch_make(shape, dtype):
    t = {
        "float32": torch.float32,
        "bool": torch.bool,
        "bfloat16": torch.bfloat16,
        "complex64": torch.complex64,
        "float8_e4m3fn": getattr(torch, "float8_e4m3fn", None),
    }[dtype]
    n = int(np.prod(shape))
    base = torch.arange(n, device="cuda")
    base = (base % 2 == 1) if dtype == "bool" else base.to(t)
    return base.reshape(shape).contiguous()


def _cupy_make(shape, dtype):
    return cp.asarray(aligned(shape, DTYPES[dtype]))


def _numba_make(shape, dtype):
    return numba_cuda.to_device(aligned(shape, DTYPES[dtype]))


def _core_make(shape, dtype):
    # A cuda.core Buffer; its memory is wrapped by pointer (a Buffer exports bytes, not a typed array).
    from cuda.core import Device  # noqa: PLC0415

    dev = Device()
    dev.set_current()
    host = aligned(shape, DTYPES[dtype])
    buf = dev.allocate(host.nbytes, stream=dev.default_stream)
    dev.default_stream.sync()
    write_raw(int(buf.handle), host.tobytes(), "cuda")
    return buf


PRODUCERS = [
    Producer("numpy", "cpu", lambda: None, _np_make, lambda a: a.ctypes.data, ("float32", "bool", "complex64")),
    Producer("ml_dtypes", "cpu", lambda: None, _np_make, lambda a: a.ctypes.data, ("bfloat16", "float8_e4m3fn")),
    Producer(
        "jax",
        "cpu",
        lambda: None if _jax_has("cpu") else "jax is not installed",
        lambda s, d: _jax_make(s, d, "cpu"),
        lambda a: a.unsafe_buffer_pointer(),
        ("float32", "bfloat16"),
    ),
    Producer(
        "warp",
        "cpu",
        lambda: None if wp is not None else "warp is not installed",
        lambda s, d: _warp().array(aligned(s, DTYPES[d]), device="cpu"),
        lambda a: a.ptr,
        ("float32",),
    ),
    Producer(
        "torch",
        "cuda",
        lambda: None if torch is not None and torch.cuda.is_available() else "needs torch with CUDA",
        _torch_make,
        lambda t: t.data_ptr(),
        ("float32", "bool", "bfloat16", "complex64"),
    ),
    Producer(
        "cupy",
        "cuda",
        lambda: None if cp is not None and HAS_CUDA else "needs cupy and a GPU",
        _cupy_make,
        lambda a: a.data.ptr,
        ("float32", "bool", "complex64"),
    ),
    Producer(
        "numba",
        "cuda",
        lambda: None if numba_cuda is not None else "needs numba-cuda and a GPU",
        _numba_make,
        lambda a: a.device_ctypes_pointer.value,
        ("float32",),
    ),
    Producer(
        "cuda.core",
        "cuda",
        lambda: None if cuda_core is not None else "needs cuda.core and a GPU",
        _core_make,
        lambda b: int(b.handle),
        ("float32",),
    ),
    Producer(
        "jax-gpu",
        "cuda",
        lambda: None if HAS_CUDA and _jax_has("gpu") else "needs jax with CUDA",
        lambda s, d: _jax_make(s, d, "gpu"),
        lambda a: a.unsafe_buffer_pointer(),
        ("float32",),
    ),
]


def view_from(producer: Producer, native, how: str, dtype: str, shape) -> stridex.View:
    if how == "view":
        if not hasattr(stridex, "view"):
            pytest.skip("stridex.view (import) is not in this build yet")
        if producer.name == "cuda.core":
            pytest.skip("a cuda.core Buffer is bytes, not a typed array: wrapped by pointer only")
        return stridex.view(native)
    # By pointer, WITHOUT a device: the device must come from the memory (the "GPU arrays returned as CPU arrays" bug report).
    return stridex.from_pointer(producer.pointer(native), shape, dtype, owner=native)


# ---- consumers ------------------------------------------------------------------------------------


def _np_strides(a):
    return tuple(s // a.dtype.itemsize for s in a.strides)


@dataclass
class Consumer:
    name: str
    device: str
    reason: Callable[[], str | None]
    consume: Callable[[stridex.View], Any]
    pointer: Callable[[Any], int]
    strides: Callable[[Any], tuple]
    device_of: Callable[[Any], str]
    to_host: Callable[[Any], np.ndarray]
    write: Callable[[Any, Any], None] | None  # sets element (0, ..., 0); None: immutable arrays
    readonly: Callable[[Any], bool] | None = None  # None: the consumer has no read-only arrays
    # (layout or dtype or "readonly" or "said_readonly") -> (exception types, message regex): what
    # cannot work, and why. "readonly": any read-only view; "said_readonly": a view whose producer
    # said read-only (not JAX's immutable arrays, which leave as legacy capsules as JAX's own do).
    refuses: dict = field(default_factory=dict)
    skips: dict = field(default_factory=dict)  # cases that crash or corrupt: never run
    # Imports a DLPack capsule that cannot say writable (legacy) read-only: NumPy's rule, which a
    # View of unknown writability (a legacy-only producer's array) must meet as the producer would.
    legacy_readonly: bool = False


def _index0(a):
    return (0,) * a.ndim


def _np_write(a, value):
    a[_index0(a)] = value


def _warp_strides(a):
    return tuple(s // a.numpy().itemsize for s in a.strides)


# JAX asks for legacy capsules only, which cannot say read-only, so views a producer said read-only
# refuse (as NumPy refuses); JAX's own immutable arrays go back.
JAX_REFUSES = {
    "step": (Exception, "compact"),  # O7: only compact strides
    "neg": (Exception, "compact"),
    "said_readonly": (BufferError, "read-only"),
}


# JAX imports CPU data that is not 64-byte aligned as a copy: the offset layout moves element 0 by
# 32 bytes, so it would not alias (not an export matter; JAX's own rule).
JAX_SKIPS = {"offset": "JAX copies CPU data that is not 64-byte aligned, so nothing to alias"}


def _jax_device(a):
    d = list(a.devices())[0]
    return "cpu" if d.platform == "cpu" else f"cuda:{d.id}"


def _torch_device(t):
    return "cpu" if t.device.type == "cpu" else f"cuda:{t.device.index}"


def _torch_host(t):
    t = t.cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _cupy_host(a):
    return a.get()


def _core_smv(v):
    smv_type = cuda_core.StridedMemoryView
    if hasattr(smv_type, "from_dlpack"):
        return smv_type.from_dlpack(v, stream_ptr=-1)
    return smv_type(v, stream_ptr=-1)


def _core_strides(smv):
    return tuple(smv.strides) if smv.strides is not None else tuple(np.empty(smv.shape, np.uint8).strides)


def _core_host(smv):
    # Read through cupy, from the SMV's own pointer, shape and strides (so the SMV is what is tested).
    dtype = np.dtype(smv.dtype)
    strides = _core_strides(smv) if smv.strides is not None else None
    mem = cp.cuda.UnownedMemory(smv.ptr, 1, smv)
    arr = cp.ndarray(
        smv.shape,
        dtype,
        cp.cuda.MemoryPointer(mem, 0),
        strides=None if strides is None else tuple(s * dtype.itemsize for s in strides),
    )
    return arr.get()


CONSUMERS = [
    Consumer(
        "np.from_dlpack",
        "cpu",
        lambda: None,
        np.from_dlpack,
        lambda a: a.__array_interface__["data"][0],
        _np_strides,
        lambda a: "cpu",
        np.asarray,
        _np_write,
        lambda a: not a.flags.writeable,
        refuses={"bfloat16": (Exception, "dtype"), "float8_e4m3fn": (Exception, "dtype")},  # O5
        legacy_readonly=True,
    ),
    Consumer(
        "np.asarray",
        "cpu",
        lambda: None,
        np.asarray,
        lambda a: a.__array_interface__["data"][0],
        _np_strides,
        lambda a: "cpu",
        np.asarray,
        _np_write,
        lambda a: not a.flags.writeable,
    ),
    Consumer(
        "memoryview",
        "cpu",
        lambda: None,
        memoryview,
        lambda m: np.asarray(m).__array_interface__["data"][0],
        lambda m: tuple(s // m.itemsize for s in m.strides),
        lambda m: "cpu",
        lambda m: np.asarray(m),
        lambda m, value: _np_write(np.asarray(m), value),
        lambda m: m.readonly,
        refuses={"bfloat16": (BufferError, "no PEP 3118"), "float8_e4m3fn": (BufferError, "no PEP 3118")},
    ),
    Consumer(
        "jax.dlpack.from_dlpack",
        "any",
        lambda: None if jax is not None else "jax is not installed",
        lambda v: jax.dlpack.from_dlpack(v),
        lambda a: a.unsafe_buffer_pointer(),
        lambda a: None,
        _jax_device,
        lambda a: np.asarray(a),
        None,
        refuses=JAX_REFUSES,
        skips=JAX_SKIPS,
    ),
    Consumer(
        "jnp.from_dlpack",
        "any",
        lambda: None if jnp is not None else "jax is not installed",
        lambda v: jnp.from_dlpack(v),
        lambda a: a.unsafe_buffer_pointer(),
        lambda a: None,
        _jax_device,
        lambda a: np.asarray(a),
        None,
        refuses=JAX_REFUSES,
        skips=JAX_SKIPS,
    ),
    Consumer(
        "wp.from_dlpack",
        "any",
        lambda: None if wp is not None else "warp is not installed",
        lambda v: _warp().from_dlpack(v),
        lambda a: a.ptr,
        _warp_strides,
        lambda a: "cpu" if a.device.is_cpu else f"cuda:{a.device.ordinal}",
        lambda a: a.numpy(),
        lambda a, value: _np_write(a.numpy(), value) if a.device.is_cpu else None,
        refuses={
            "said_readonly": (BufferError, "read-only"),  # legacy capsules only
            "complex64": (Exception, None),
            "float8_e4m3fn": (Exception, None),
        },
    ),
    Consumer(
        "wp.array",
        "any",
        lambda: None if wp is not None else "warp is not installed",
        lambda v: _warp().array(v, copy=False, device="cpu" if v.device == "cpu" else str(v.device)),
        lambda a: a.ptr,
        _warp_strides,
        lambda a: "cpu" if a.device.is_cpu else f"cuda:{a.device.ordinal}",
        lambda a: a.numpy(),
        lambda a, value: _np_write(a.numpy(), value) if a.device.is_cpu else None,
        refuses={"complex64": (Exception, None), "float8_e4m3fn": (Exception, None)},
    ),
    Consumer(
        "torch.from_dlpack",
        "cuda",
        lambda: None if torch is not None and torch.cuda.is_available() else "needs torch with CUDA",
        lambda v: torch.from_dlpack(v),
        lambda t: t.data_ptr(),
        lambda t: tuple(t.stride()),
        _torch_device,
        _torch_host,
        lambda t, value: t.__setitem__(_index0(t), value),
        skips={"neg": "torch <= 2.12 aborts the process on negative strides (pytorch#188023)"},
    ),
    Consumer(
        "torch.as_tensor",
        "cuda",
        lambda: None if torch is not None and torch.cuda.is_available() else "needs torch with CUDA",
        lambda v: torch.as_tensor(v, device=f"cuda:{v.device.id}"),
        lambda t: t.data_ptr(),
        lambda t: tuple(t.stride()),
        _torch_device,
        _torch_host,
        lambda t, value: t.__setitem__(_index0(t), value),
        # torch refuses CAI readonly=True (docs/protocols.md, "Read-only data"). bfloat16 has no CAI typestr: torch
        # then takes the view through __dlpack__ (so it works).
        refuses={"readonly": (TypeError, None)},
        skips={"neg": "torch <= 2.12 aborts the process on negative strides (pytorch#188023)"},
    ),
    Consumer(
        "cupy.from_dlpack",
        "cuda",
        lambda: None if cp is not None and HAS_CUDA else "needs cupy and a GPU",
        lambda v: cp.from_dlpack(v),
        lambda a: a.data.ptr,
        _np_strides,
        lambda a: f"cuda:{a.device.id}",
        _cupy_host,
        _np_write,
        refuses={"float8_e4m3fn": (Exception, None)},  # O6
        skips={"neg": "cupy 13.4-14.2 corrupts negative strides (cupy#10172)"},
    ),
    Consumer(
        "cupy.asarray",
        "cuda",
        lambda: None if cp is not None and HAS_CUDA else "needs cupy and a GPU",
        lambda v: cp.asarray(v),
        lambda a: a.data.ptr,
        _np_strides,
        lambda a: f"cuda:{a.device.id}",
        _cupy_host,
        _np_write,
        refuses={"bfloat16": (Exception, None), "float8_e4m3fn": (Exception, None)},
        skips={"neg": "cupy 13.4-14.2 corrupts negative strides (cupy#10172)"},
    ),
    Consumer(
        "numba.cuda.as_cuda_array",
        "cuda",
        lambda: None if numba_cuda is not None else "needs numba-cuda and a GPU",
        lambda v: numba_cuda.as_cuda_array(v),
        lambda a: a.device_ctypes_pointer.value,
        _np_strides,
        lambda a: f"cuda:{numba_cuda.get_current_device().id}",
        # Read from numba's own pointer, shape and strides (copy_to_host takes no negative
        # strides); no writes through numba (element assignment compiles a kernel, which this
        # numba-cuda cannot with NumPy 2.5: np.row_stack is gone). Aliasing is checked the
        # other way: element 0's memory written, read through numba's description.
        lambda a: host_from_raw(a.device_ctypes_pointer.value, a.shape, a.strides, a.dtype, "cuda"),
        None,
        refuses={"bfloat16": (Exception, None), "float8_e4m3fn": (Exception, None)},
    ),
    Consumer(
        "cuda.core.StridedMemoryView",
        "cuda",
        lambda: None if cuda_core is not None and cp is not None else "needs cuda.core, cupy and a GPU",
        _core_smv,
        lambda s: s.ptr,
        _core_strides,
        lambda s: f"cuda:{s.device_id}",
        _core_host,
        None,
        lambda s: s.readonly,
        refuses={"float8_e4m3fn": (Exception, None)},
    ),  # O6
]

LAYOUTS = {
    "c": lambda a: a,
    "T": lambda a: a.T,
    "step": lambda a: a[:, ::2],
    "neg": lambda a: a[::-1],
    "offset": lambda a: a[1:, 2:],
}

SHAPE = (4, 6)

RAW = {
    "float32": lambda x: np.float32(x).tobytes(),
    "bool": lambda x: np.bool_(x).tobytes(),
    "bfloat16": lambda x: np.array(x, ml_dtypes.bfloat16).tobytes(),
    "complex64": lambda x: np.complex64(x).tobytes(),
    "float8_e4m3fn": lambda x: np.array(x, ml_dtypes.float8_e4m3fn).tobytes(),
}


def _cases():
    for p in PRODUCERS:
        for c in CONSUMERS:
            if c.device not in ("any", p.device):
                continue
            for how in ("view", "pointer"):
                for dtype in p.dtypes:
                    layouts = LAYOUTS if dtype == "float32" else {"c": LAYOUTS["c"]}
                    for layout in layouts:
                        yield pytest.param(
                            p, c, how, dtype, layout, False, id=f"{p.name}-{how}-{dtype}-{layout}->{c.name}"
                        )
                if how == "pointer":
                    yield pytest.param(p, c, how, "float32", "c", True, id=f"{p.name}-readonly->{c.name}")


def _expected_refusal(c: Consumer, dtype: str, layout: str, readonly: bool, said_readonly: bool):
    keys = ("said_readonly" if said_readonly else None, "readonly" if readonly else None, layout, dtype)
    for key in keys:  # our own refusal comes first
        if key in c.refuses:
            return c.refuses[key]
    return None


@pytest.mark.parametrize(("producer", "consumer", "how", "dtype", "layout", "readonly"), list(_cases()))
def test_round_trip(producer: Producer, consumer: Consumer, how, dtype, layout, readonly):
    for why in (producer.reason(), consumer.reason()):
        if why:
            pytest.skip(why)
    for key in (layout, dtype):
        if key in consumer.skips:
            pytest.skip(consumer.skips[key])
    if consumer.name.startswith("j") and producer.device == "cuda" and not _jax_has("gpu"):
        pytest.skip("jax has no CUDA backend here")

    native = producer.make(SHAPE, dtype)
    base = view_from(producer, native, how, dtype, SHAPE)
    if readonly:
        base = stridex.from_pointer(base.ptr, base.shape, base.dtype, owner=base, readonly=True)
    # Refused as legacy capsules: views whose producer said read-only. stridex.view marks immutable
    # producers' arrays (JAX) read-only too, but those leave as the producer's own capsules do.
    said_readonly = base.writability == "readonly"
    readonly = base.readonly
    v = LAYOUTS[layout](base)
    device = str(v.device)
    assert device == ("cpu" if producer.device == "cpu" else f"cuda:{v.device.id}")

    refusal = _expected_refusal(consumer, dtype, layout, readonly, said_readonly)
    if refusal is not None:
        with pytest.raises(refusal[0], match=refusal[1]):
            consumer.consume(v)
        return

    out = consumer.consume(v)
    # Same memory, shape, strides, dtype and device.
    assert consumer.pointer(out) == v.ptr
    assert tuple(out.shape) == v.shape
    strides = consumer.strides(out)
    if strides is not None:
        assert strides == v.strides
    assert consumer.device_of(out) == device
    size = np.dtype(DTYPES[dtype]).itemsize
    if consumer.write is None and not readonly:
        # Immutable arrays (JAX caches its host copy): write element 0's memory before the first read.
        write_raw(v.ptr, RAW[dtype](False if dtype == "bool" else 5), device)
    expected = np.asarray(LAYOUTS[layout](np.asarray(_host_of(producer, native, dtype))))
    got = np.asarray(consumer.to_host(out))
    assert got.dtype == expected.dtype
    wide = dtype in ("bfloat16", "float8_e4m3fn")
    np.testing.assert_array_equal(
        got.astype(np.float64) if wide else got, expected.astype(np.float64) if wide else expected
    )
    if consumer.write is None and not readonly:
        assert got[_index0(expected)] == np.asarray(False if dtype == "bool" else 5).astype(DTYPES[dtype])

    if v.writability == "unknown" and consumer.legacy_readonly:
        # The producer's capsules cannot say writable: the consumer's own rule (read-only) holds.
        assert consumer.readonly(out), f"{consumer.name} imports a legacy-only producer's array read-only"
        readonly = True
    if readonly:
        if consumer.readonly is not None:
            assert consumer.readonly(out), f"{consumer.name} lost the read-only flag"
        # Still the same memory: element 0 written underneath is read through the consumer.
        if consumer.write is not None:
            value = False if dtype == "bool" else 7
            write_raw(v.ptr, RAW[dtype](value), device)
            assert np.asarray(consumer.to_host(out))[_index0(expected)] == np.asarray(value).astype(DTYPES[dtype])
        return
    if consumer.write is None or (device != "cpu" and consumer.name in ("wp.from_dlpack", "wp.array")):
        return
    # A write through the consumer lands in element 0's memory, and the other way round.
    value = True if dtype == "bool" else 3
    consumer.write(out, value)
    assert read_raw(v.ptr, size, device) == RAW[dtype](value)
    value = False if dtype == "bool" else 5
    write_raw(v.ptr, RAW[dtype](value), device)
    assert np.asarray(consumer.to_host(out))[_index0(expected)] == np.asarray(value).astype(DTYPES[dtype])


def _host_of(producer: Producer, native, dtype):
    """The producer's array as NumPy, read fresh."""
    if producer.name in ("numpy", "ml_dtypes"):
        return native
    if producer.name in ("jax", "jax-gpu"):
        return np.asarray(native)
    if producer.name == "warp":
        return native.numpy()
    if producer.name == "torch":
        return _torch_host(native)
    if producer.name == "cupy":
        return native.get()
    if producer.name == "numba":
        return native.copy_to_host()
    if producer.name == "cuda.core":
        raw = read_raw(int(native.handle), int(np.prod(SHAPE)) * np.dtype(DTYPES[dtype]).itemsize, "cuda")
        return np.frombuffer(raw, DTYPES[dtype]).reshape(SHAPE)
    raise AssertionError(producer.name)


# ---- dtype edge cases through every CPU consumer that can take them --------------------------------


@pytest.mark.parametrize("dtype", ["bool", "complex64", "bfloat16", "float8_e4m3fn"])
def test_zero_d_and_empty_through_numpy(dtype):
    if dtype in ("bfloat16", "float8_e4m3fn"):
        consume = np.asarray  # NumPy's DLPack import has no ml_dtypes (O5); __array__ has
    else:
        consume = np.from_dlpack
    scalar = aligned((), DTYPES[dtype])
    assert consume(view_of(scalar)).shape == ()
    empty = aligned((0, 2), DTYPES[dtype])
    assert consume(view_of(empty)).shape == (0, 2)


@pytest.mark.skipif(jax is None, reason="jax is not installed")
def test_jax_zero_d_empty_and_broadcast():
    scalar = aligned((), np.float32)
    scalar[()] = 4
    assert float(jax.dlpack.from_dlpack(view_of(scalar))) == 4.0
    assert jax.dlpack.from_dlpack(view_of(aligned((0, 3), np.float32))).shape == (0, 3)
    row = aligned((3,), np.float32)
    b = stridex.from_pointer(row.ctypes.data, (2, 3), "float32", strides=(0, 1), owner=row)
    with pytest.raises(Exception, match="compact"):  # broadcast strides are not compact either
        jax.dlpack.from_dlpack(b)
    # What JAX cannot take zero-copy it can take as a copy (C-contiguous, IS_COPIED).

    class Copying:
        def __init__(self, view):
            self.view = view

        def __dlpack__(self, **kwargs):
            return self.view.__dlpack__(copy=True, **kwargs)

        def __dlpack_device__(self):
            return self.view.__dlpack_device__()

    np.testing.assert_array_equal(np.asarray(jax.dlpack.from_dlpack(Copying(b))), np.broadcast_to(row, (2, 3)))
