"""A publisher's shared memory: each allocation that holds its shards, shared once, and one reused
bucket per device for the shards whose memory cannot be shared.

* Device memory: the allocation the driver reports for the shard's pointer (its base and size, as
  ``stridex.ipc`` exports the legacy IPC handle of an allocation plus the offset; a stridex pool's
  or a shareable VMM buffer's range likewise). All shards in one allocation (one torch
  caching-allocator segment holds many tensors) are one region: one handle, mapped once by each
  subscriber, whatever the number of tensors.
* Host memory in a shared mapping (``stridex.ipc.shared_empty``, ``multiprocessing.shared_memory``):
  the mapping is the region.
* Anything else (NumPy's private heap, pinned memory, memory of an allocator without IPC) is packed
  into the bucket of its device (``shared_empty`` on the host; a stridex pool allocation, or a
  shareable VirtualBuffer where the pool cannot be shared, on a GPU), made at the first publish and
  refilled by the copy engine on the trainer's stream at every publish.

Regions are made once per weight signature (names, shapes, dtypes, shard pointers and strides): a
publish of the same weights shares nothing new.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .. import _sharded, _stridex
from ..ipc import shared_empty
from ..ipc.host import _mapping_of, export_host
from .weights import Weight

ALIGN = 256  # bucket entries start at multiples of this (the copy engine's vector widths and more)


@dataclass
class Region:
    """One shared range: an allocation of the trainer's, or a bucket."""

    view: _stridex.View  # uint8 View of the whole range, what is pickled to subscribers (read-only but a bucket's)
    device: str
    bucket: bool
    key: Any = None  # the allocation's (_allocation), None for a bucket


@dataclass(frozen=True)
class Placed:
    """Where one shard lies in a region: its element 0 at byte `offset`, its layout in elements."""

    index: tuple[tuple[int, int], ...]
    region: int
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]


def signature(weights: list[Weight]) -> tuple[Any, ...]:
    """What must stay the same for a publish to reuse the regions of the previous one."""
    return tuple(
        (
            w.name,
            w.shape,
            str(w.dtype),
            tuple((_pairs(i), v.ptr, v.shape, v.strides, str(v.device)) for i, v in w.shards),
        )
        for w in weights
    )


def _pairs(index: Any) -> tuple[tuple[int, int], ...]:
    return tuple((s.start, s.stop) for s in index)


def export_check(region: _stridex.View) -> None:
    """Exports `region` as pickling it for a subscriber will (and drops the export): BufferError
    naming why when it cannot be shared. The driver may refuse a range that a View inside it passed
    (memory of a stream-ordered pool without IPC support, cuMemCreate memory not made shareable):
    found here, at publish, never at a subscriber's attach."""
    if region.device.type == "cuda":
        _stridex._ipc_export(region)
    else:
        fd, _ = export_host(region)
        os.close(fd)


# Whether each allocation (its key from _allocation) can be shared, asked once per process: a
# publish of the same allocations asks the driver nothing.
_shareable: dict[Any, bool] = {}
_SHAREABLE_MAX = 4096  # allocations remembered (JAX makes new arrays every step; XLA reuses memory)


def _region_shareable(key: Any, region: _stridex.View) -> bool:
    known = _shareable.get(key)
    if known is None:
        try:
            export_check(region)
            known = True
        except BufferError:
            known = False
        if len(_shareable) >= _SHAREABLE_MAX:
            _shareable.clear()
        _shareable[key] = known
    return known


def forget(key: Any) -> None:
    """An allocation whose export failed after all (at an attach): packed from the next epoch on."""
    _shareable[key] = False


def _allocation(v: _stridex.View) -> tuple[Any, int, int] | None:
    """(key, base, size) of the shareable range holding `v`, or None when it cannot be shared."""
    if v.device.type == "cuda":
        try:
            e = _stridex._ipc_export(v)  # BufferError naming why when it cannot be shared
        except BufferError:
            return None
        base = v.ptr - e.offset
        return (str(v.device), e.kind, base, e.extent), base, e.extent
    if v.device.type == "cpu":
        lo, hi = v.byte_span
        m = _mapping_of(v.ptr + lo)
        if m is None or "s" not in m.perms or v.ptr + hi > m.end:
            return None
        try:  # the file behind the mapping must be found (stridex.ipc passes its fd)
            fd, _ = export_host(_stridex.from_pointer(m.start, (1,), "uint8", owner=v, readonly=True))
        except BufferError:
            return None
        try:
            # the mapping's pages may run past the end of the file: the region ends with the file
            size = min(m.end - m.start, os.fstat(fd).st_size - m.offset)
        finally:
            os.close(fd)
        return ("cpu", m.start, m.end, size), m.start, size
    return None


class Regions:
    """The regions of one weight signature, where each shard lies in them, and the bucket packing."""

    def __init__(self, weights: list[Weight]):
        self.signature = signature(weights)
        self.regions: list[Region] = []
        self.placed: dict[str, list[Placed]] = {}
        # Packed shards: (weight number, shard number, the bucket View it is copied into).
        self.packs: list[tuple[int, int, _stridex.View]] = []
        self.keep = [v for w in weights for _, v in w.shards]  # the shards' memory stays alive
        by_key: dict[Any, int] = {}
        unshareable: set[Any] = set()
        to_pack: dict[str, list[tuple[int, int, _stridex.View]]] = {}
        for wi, w in enumerate(weights):
            places: list[Placed | None] = []
            for si, (index, v) in enumerate(w.shards):
                found = _allocation(v) if v.size else None
                if found is not None and found[0] not in by_key:
                    key, base, size = found
                    region = _stridex.from_pointer(base, (size,), "uint8", owner=v, readonly=True)
                    if _region_shareable(key, region):
                        by_key[key] = len(self.regions)
                        self.regions.append(Region(region, str(v.device), False, key))
                    else:
                        found = None
                        unshareable.add(key)
                elif found is not None and found[0] in unshareable:
                    found = None
                if found is None:
                    to_pack.setdefault(str(v.device), []).append((wi, si, v))
                    places.append(None)
                    continue
                r = by_key[found[0]]
                off = v.ptr - self.regions[r].view.ptr
                places.append(Placed(_pairs(index), r, off, tuple(v.shape), tuple(v.strides)))
            self.placed[w.name] = places  # type: ignore[assignment] - the packed ones are filled below
        for device, entries in to_pack.items():
            self._bucket(device, entries, weights)

    def _bucket(self, device: str, entries: list[tuple[int, int, _stridex.View]], weights: list[Weight]) -> None:
        offsets, total = [], 0
        for _, _, v in entries:
            offsets.append(total)
            total += -(-max(v.nbytes, 1) // ALIGN) * ALIGN
        bucket = _new_bucket(device, total)
        r = len(self.regions)
        # The bucket's own View, not one made over its pointer: stridex.ipc finds a pool allocation
        # by its owner, and a View over the same address with another owner would be exported as a
        # legacy handle, which the driver refuses for pool memory.
        self.regions.append(Region(bucket, device, True))
        for (wi, si, v), off in zip(entries, offsets):
            dst = _stridex.from_pointer(bucket.ptr + off, v.shape, v.dtype, owner=bucket)
            self.packs.append((wi, si, dst))
            index = weights[wi].shards[si][0]
            self.placed[weights[wi].name][si] = Placed(_pairs(index), r, off, tuple(dst.shape), tuple(dst.strides))

    @property
    def bucket_bytes(self) -> int:
        return sum(r.view.nbytes for r in self.regions if r.bucket)

    def devices(self) -> list[str]:
        return sorted({r.device for r in self.regions})

    def pack(self, weights: list[Weight], stream: Any) -> None:
        """Copies the packed shards into their buckets: one call of the copy engine, stream-ordered on
        each GPU (host copies complete before it returns)."""
        if not self.packs:
            return
        dst = [d for _, _, d in self.packs]
        src = [weights[wi].shards[si][1] for wi, si, _ in self.packs]
        gpus = {v.device.id for v in dst + src if v.device.type == "cuda"}
        pieces = [(k, k, (0,) * d.ndim, (0,) * d.ndim, tuple(d.shape)) for k, d in enumerate(dst)]
        _stridex._copy_pieces(dst, src, pieces, _sharded._streams(stream, gpus), False)

    def descriptor(self, weights: list[Weight]) -> dict[str, Any]:
        """The plain data a subscriber needs besides the regions' handles."""
        return {
            "regions": [
                {"device": r.device, "nbytes": r.view.nbytes, "bucket": r.bucket, "uuid": _uuid(r.device)}
                for r in self.regions
            ],
            "weights": [
                {
                    "name": w.name,
                    "shape": list(w.shape),
                    "dtype": str(w.dtype),
                    "shards": [
                        [list(map(list, p.index)), p.region, p.offset, list(p.shape), list(p.strides)]
                        for p in self.placed[w.name]
                    ],
                }
                for w in weights
            ],
        }


def _uuid(device: str) -> str | None:
    if not device.startswith("cuda"):
        return None
    return _stridex.device_uuid(int(device.split(":")[1]))


def _new_bucket(device: str, nbytes: int) -> _stridex.View:
    if device.startswith("cpu"):
        return shared_empty((nbytes,), "uint8")
    v = _stridex.empty((nbytes,), "uint8", device=device)
    try:
        export_check(v)
        return v
    except BufferError:  # a pool without IPC support: shareable VMM memory instead
        buf = _stridex.VirtualBuffer(nbytes, device=device, shareable=True)
        view = buf.view("uint8", (nbytes,))
        export_check(view)  # else no memory of this GPU can be shared: BufferError naming why
        return view
