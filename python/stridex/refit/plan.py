"""The pull plan: which pieces of which source shards fill which destination shards, computed once
per (publishers' epochs, destination layout) by the sharded plan (``ShardLayout.plan``'s core) and
executed as one call of the copy engine (``_copy_pieces``: stridex.copy of sharded views, peer to
peer between GPUs, host paths on the host)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import _sharded, _stridex
from .._sharded import ShardedView
from .errors import RefitError
from .weights import Weight

RawPiece = tuple[int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@dataclass
class Plan:
    dst: list[_stridex.View]
    src: list[_stridex.View]
    pieces: list[RawPiece]
    gpus: set[int]
    bytes: int

    def run(self, stream: Any) -> None:
        if self.pieces:
            _stridex._copy_pieces(self.dst, self.src, self.pieces, _sharded._streams(stream, self.gpus), False)


def key(destinations: list[Weight]) -> tuple[Any, ...]:
    """What the plan of a pull depends on, on the destination's side."""
    return tuple(
        (w.name, tuple((tuple((s.start, s.stop) for s in i), v.ptr, v.shape, v.strides) for i, v in w.shards))
        for w in destinations
    )


def make(sources: dict[str, ShardedView], destinations: list[Weight]) -> Plan:
    """Every held destination shard filled from the sources' shards, one list for the whole pull."""
    dst_views: list[_stridex.View] = []
    src_views: list[_stridex.View] = []
    pieces: list[RawPiece] = []
    nbytes = 0
    for w in destinations:
        src = sources.get(w.name)
        if src is None:
            raise KeyError(f"pull(): no publisher publishes a weight named {w.name!r}")
        if src.shape != w.shape or src.dtype != w.dtype:
            raise RefitError(
                f"pull(): weight {w.name!r} is {src.shape} {src.dtype} at the publishers, {w.shape} {w.dtype} "
                "in the destination"
            )
        for k, sh in enumerate(w.sharded.shards):
            if sh.view is not None and sh.view.readonly:
                raise BufferError(f"pull(): destination shard {k} of {w.name!r} is read-only")
        held = src._held(f"pulling {w.name!r}")
        d0, s0 = len(dst_views), len(src_views)
        dst_views += [sh.view if sh.view is not None else _blank() for sh in w.sharded.shards]
        src_views += [sh.view if sh.view is not None else _blank() for sh in src.shards]
        for p in _sharded._plan(src.layout, w.sharded.layout, held):
            if w.sharded.shards[p.dst].view is None:
                continue
            extent = tuple(i.stop - i.start for i in p.index)
            pieces.append(
                (
                    s0 + p.src,
                    d0 + p.dst,
                    tuple(i.start for i in p.src_index),
                    tuple(i.start for i in p.dst_index),
                    extent,
                )
            )
            n = 1
            for e in extent:
                n *= e
            nbytes += n * w.dtype.itemsize
    gpus = {v.device.id for v in dst_views + src_views if v.device.type == "cuda"}
    return Plan(dst_views, src_views, pieces, gpus, nbytes)


def _blank() -> _stridex.View:
    """A placeholder for a shard held by another process (never read or written)."""
    return _stridex.empty((0,), "uint8")
