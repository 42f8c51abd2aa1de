"""torch DTensor's side of sharded arrays (docs/sharded.md): a DTensor's local shard as a
ShardedView, with every other rank's shard described from the device mesh and the placements.
Reads the DTensor through its public attributes only (``to_local``, ``device_mesh``,
``placements``, ``shape``), so any object that has them is taken the same way."""

from __future__ import annotations

import itertools
from typing import Any

from . import _stridex


def _placement(p: Any, ndim: int, m: int) -> int | None:
    """The tensor dimension a placement cuts (Shard(d)), None for Replicate(); others refused."""
    name = type(p).__name__
    if name == "_StridedShard":
        raise ValueError(
            f"from_dtensor(): mesh dimension {m} has a strided shard placement ({p}), whose rows interleave: "
            "not a block layout"
        )
    if p.is_shard():
        d = int(p.dim)
        return d + ndim if d < 0 else d
    if p.is_replicate():
        return None
    raise ValueError(
        f"from_dtensor(): mesh dimension {m} has placement {p}: a Partial placement holds pending reductions, "
        "not blocks of the array; redistribute to Shard or Replicate first"
    )


def from_dtensor(x: Any) -> tuple[tuple[int, ...], Any, list[tuple[Any, ...]]]:
    shape = tuple(int(e) for e in x.shape)
    mesh = x.device_mesh
    ranks = mesh.mesh
    mesh_shape = tuple(int(e) for e in ranks.shape)
    placements = tuple(x.placements)
    if len(placements) != len(mesh_shape):
        raise ValueError(f"from_dtensor(): {len(placements)} placements for a mesh of {len(mesh_shape)} dimensions")
    cuts = [_placement(p, len(shape), m) for m, p in enumerate(placements)]
    me = int(mesh.get_rank())
    local = x.to_local()
    local = local.detach() if hasattr(local, "detach") else local
    shards = []
    for coord in itertools.product(*(range(n) for n in mesh_shape)):
        # Placements apply in mesh order: a dimension cut twice is cut again inside its chunk,
        # as DTensor computes a rank's local shape and offset.
        box = [(0, e) for e in shape]
        for m, d in enumerate(cuts):
            if d is None:
                continue
            start, stop = box[d]
            a, b = _stridex._sharding_chunk(stop - start, mesh_shape[m], coord[m])
            box[d] = (start + a, start + b)
        index = tuple(slice(a, b) for a, b in box)
        rank = int(ranks[coord])
        if rank == me:
            v = _stridex.view(local)
            shards.append((index, v, v.device))
        else:
            shards.append((index, None, None, None, rank))
    dtype = _stridex.dtype(x.dtype) if hasattr(x, "dtype") else _stridex.view(local).dtype
    return shape, dtype, shards
