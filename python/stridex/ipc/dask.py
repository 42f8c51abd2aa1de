"""Dask distributed serializers for stridex.View: frames, never pickles of pointers.

* ``dask`` family (every comm): a host View is one buffer frame of its bytes, a device View is
  staged through host memory (what TCP can carry) and lands in fresh device memory on the worker.
* ``cuda`` family (UCX comms, which send device frames GPU to GPU): a device View is one device
  frame -- the View itself, a CUDA-array-interface object UCX reads without a host copy. Host
  Views decline (NotImplementedError) and travel through the ``dask`` family.

Every copy is the copy engine's (``stridex.copy``, ``View.copy``): views that are not C-contiguous
are packed by it, a device View is staged into host memory by ``View.copy("cpu")`` (complete on
return), and staged bytes go into fresh device memory by ``stridex.copy``, which leaves the View
ready on the legacy default stream. ``import stridex`` registers these only when distributed is
imported (pickling.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import _stridex

if TYPE_CHECKING:
    from typing_extensions import Buffer

Header = dict[str, Any]

_registered = False


def _meta(v: _stridex.View) -> Header:
    return {
        "shape": list(v.shape),
        "dtype": v.dtype.name,
        "readonly": v.readonly,
        "nbytes": v.nbytes,
        "device": str(v.device),
    }


def _bytes_view(v: _stridex.View) -> _stridex.View:
    """A 1-d uint8 View of a contiguous View's bytes (a buffer any dtype can travel as)."""
    return _stridex.from_pointer(v.ptr, (v.nbytes,), "uint8", owner=v, readonly=v.readonly)


def _packed_device(v: _stridex.View) -> _stridex.View:
    # The packed copy is pending on the legacy default stream (the copy engine's default).
    return v if v.is_c_contiguous else v.contiguous()


# ---- dask family -----------------------------------------------------------------------------------
def dask_serialize_view(v: _stridex.View) -> tuple[Header, list[memoryview]]:
    header = _meta(v)
    if v.device.type == "cpu" or v.device.host_accessible:
        packed = v.contiguous(stream=_stridex.NO_SYNC)  # the View itself when already C-contiguous
        header["staged"] = False
        return header, [memoryview(_bytes_view(packed))] if v.nbytes else []
    if v.device.type != "cuda":
        raise TypeError(f"cannot send a {v.device} stridex.View through Dask")
    header["staged"] = True
    if not v.nbytes:
        return header, []
    # One copy engine call packs and stages: ordered after the View's pending work, complete on
    # return (NO_SYNC), so TCP may read the bytes at once.
    host = v.copy("cpu", stream=_stridex.NO_SYNC)
    return header, [memoryview(_bytes_view(host))]


def dask_deserialize_view(header: Header, frames: Sequence[Buffer]) -> _stridex.View:
    shape, dtype, readonly = header["shape"], header["dtype"], header["readonly"]
    data: Buffer = frames[0] if frames else bytearray(1)
    if header["staged"]:
        return _to_device(data, header)
    if not readonly and memoryview(data).readonly:
        data = bytearray(data)  # the View was writable: keep it so, on memory of our own
    base = _stridex.view(data)
    return _stridex.from_pointer(base.ptr, shape, dtype, owner=data, readonly=readonly)


def _to_device(data: Buffer, header: Header) -> _stridex.View:
    """Staged bytes into fresh device memory (device 0 of the receiving worker), through the copy
    engine: the View comes back ready on the legacy default stream (its ``stream`` says so), with
    no host block; the frame is read before the copy returns (pageable memory)."""
    shape, dtype = header["shape"], header["dtype"]
    buf = _stridex.VirtualBuffer(max(header["nbytes"], 1), device=0)
    out = buf.view(dtype, shape)
    if header["nbytes"]:
        host = _stridex.view(data)
        _stridex.copy(out, _stridex.from_pointer(host.ptr, shape, dtype, owner=host, readonly=True))
    return out


# ---- cuda family -----------------------------------------------------------------------------------
def cuda_serialize_view(v: _stridex.View) -> tuple[Header, list[_stridex.View]]:
    if v.device.type != "cuda":
        raise NotImplementedError("host stridex.Views travel through the 'dask' serializer family")
    packed = _packed_device(v)
    if packed.stream not in (None, 1) or packed.pending_event:
        # UCX is not stream-ordered: it synchronizes the legacy default stream before it sends, so
        # the View's pending work (a View unpickled from another process: its exporter's event) is
        # ordered before that stream (an event wait, no host block).
        packed = _stridex.view(packed, stream=1)
    header = _meta(v)
    return header, [_bytes_view(packed)] if v.nbytes else []


def cuda_deserialize_view(header: Header, frames: Sequence[object]) -> _stridex.View:
    shape, dtype, readonly = header["shape"], header["dtype"], header["readonly"]
    if not frames:
        return _to_device(bytearray(1), {**header, "nbytes": 0})
    frame = frames[0]
    base = frame if isinstance(frame, _stridex.View) else _stridex.view(frame)
    return _stridex.from_pointer(base.ptr, shape, dtype, owner=frame, readonly=readonly)


def register() -> None:
    """Registers the serializers with distributed (idempotent)."""
    global _registered
    if _registered:
        return
    # distributed is optional and untyped: its dispatchers are module attributes, typed Any.
    serialize = importlib.import_module("distributed.protocol.serialize")
    serialize.dask_serialize.register(_stridex.View)(dask_serialize_view)
    serialize.dask_deserialize.register(_stridex.View)(dask_deserialize_view)
    try:
        cuda = importlib.import_module("distributed.protocol.cuda")
    except ImportError:  # pragma: no cover - distributed always ships it today
        pass
    else:
        cuda.cuda_serialize.register(_stridex.View)(cuda_serialize_view)
        cuda.cuda_deserialize.register(_stridex.View)(cuda_deserialize_view)
    _registered = True
