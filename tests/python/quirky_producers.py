"""Small producers that reproduce the quirks of real frameworks (docs/protocols.md), and a reader
that sees a stridex.View's memory through NumPy. Holds no tests itself; used by test_import*.py and
test_stream_policy.py."""

from __future__ import annotations

import ctypes

import numpy as np

import stridex_testing as _testing

make_capsule = _testing.make_capsule

# ---- reading a View's memory ------------------------------------------------------------------


def host_array(v) -> np.ndarray:
    """A NumPy array over exactly the memory the View describes (its ptr, shape, byte strides and
    dtype), built from the address alone: no protocol of the View is involved."""
    dtype = v.dtype.numpy
    shape, strides = tuple(v.shape), tuple(v.byte_strides)
    if v.size == 0:
        return np.empty(shape, dtype)
    lo, hi = v.byte_span
    buf = (ctypes.c_char * (hi - lo)).from_address(v.ptr + lo)
    return np.ndarray(shape, dtype, buffer=buf, offset=-lo, strides=strides)


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


# ---- DLPack producers ---------------------------------------------------------------------------


class Recorder:
    """Base of the __dlpack__ producers below: keeps the array and what each call received."""

    device = (1, 0)  # what __dlpack_device__ answers (and the capsule says)

    def __init__(self, array, device=None, **capsule_fields):
        self.array = array
        if device is not None:
            self.device = device
        self.capsule_fields = capsule_fields
        self.calls = []  # kwargs of each __dlpack__ call, in order
        self.device_calls = 0
        self.counters = []  # DeleterCounter of every capsule handed out

    def __dlpack_device__(self):
        self.device_calls += 1
        return self.device

    def _capsule(self, versioned=True):
        capsule, counter = make_capsule(self.array, versioned=versioned, device=self.device, **self.capsule_fields)
        self.counters.append(counter)
        return capsule


class Conformant(Recorder):
    """The array API 2023.12 signature; versioned capsule when asked."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(dict(stream=stream, max_version=max_version))
        return self._capsule(versioned=max_version is not None and max_version[0] >= 1)


class LegacyAnswer(Recorder):
    """JAX, MLX, nanobind: a legacy "dltensor" capsule whatever max_version says (cuda-python#285)."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(dict(stream=stream, max_version=max_version))
        return self._capsule(versioned=False)


class StreamOnly(Recorder):
    """Array API 2021.12 (Warp, NumPy < 2.1, torch < 2.9): stream only; max_version is a TypeError."""

    def __dlpack__(self, stream=None):
        self.calls.append(dict(stream=stream))
        return self._capsule(versioned=False)


class NoKeywords(Recorder):
    """MLX <= 0.31: __dlpack__() takes no keywords at all."""

    def __dlpack__(self):
        self.calls.append({})
        return self._capsule(versioned=False)


class RejectsMinusOne(Recorder):
    """JAX on a GPU: an int stream is a raw CUstream, so -1 fails (CUDA_ERROR_INVALID_HANDLE)."""

    __module__ = "jaxlib.quirky"  # so that stridex picks the JAX row of its quirk table

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(dict(stream=stream, max_version=max_version))
        if stream == -1:
            raise RuntimeError("INTERNAL: CUDA_ERROR_INVALID_HANDLE: invalid resource handle (stream -1)")
        if self.device[0] == 1 and stream is not None:
            raise RuntimeError("UNIMPLEMENTED: WaitUntilBufferReadyOnStream is only implemented for GPU.")
        return self._capsule(versioned=False)


class NamedCapsule(Recorder):
    """__dlpack__ answering a capsule of the wrong name."""

    def __init__(self, array, name):
        super().__init__(array, name=name)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(dict(stream=stream, max_version=max_version))
        return self._capsule()


class RefusesDLPack(Recorder):
    """A __dlpack__ that refuses this array (BufferError), like NumPy for bfloat16."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(dict(stream=stream, max_version=max_version))
        raise BufferError("this producer cannot export this array")


def module_producer(module: str, base=Conformant):
    """A Conformant-like producer class whose __module__ says it comes from `module`, so that stridex
    uses that framework's row of the quirk table."""
    return type(f"Producer_{module.replace('.', '_')}", (base,), {"__module__": module})


# ---- CUDA array interface and array interface producers --------------------------------------


class CAI:
    """A __cuda_array_interface__ over host memory (a NumPy array) with chosen keys: `overrides`
    replace keys (strides=None included), `omit` removes them. On a machine without a driver stridex
    sees host memory (device cpu); tests of GPU behaviour turn on _testing.fake_cuda_pointers()."""

    def __init__(self, array, version=3, omit=(), **overrides):
        self.array = array
        d = {
            "shape": array.shape,
            "typestr": array.dtype.str,
            "data": (address(array) if array.size else 0, not array.flags.writeable),
            "strides": None if array.flags.c_contiguous else array.strides,
            "version": version,
        }
        d.update(overrides)
        for key in omit:
            d.pop(key, None)
        self.__cuda_array_interface__ = d


class CAIv2NoStrides:
    """CAI v2 without a strides key at all (Warp crashed on this: the second seed; JAX exports it)."""

    def __init__(self, array):
        self.array = array

    @property
    def __cuda_array_interface__(self):
        return {
            "shape": self.array.shape,
            "typestr": self.array.dtype.str,
            "data": (address(self.array), False),
            "version": 2,
        }


class AI:
    """An __array_interface__ with chosen keys (data may be a tuple, a buffer object or None)."""

    def __init__(self, keep, **d):
        self.keep = keep
        d.setdefault("version", 3)
        self.__array_interface__ = d
