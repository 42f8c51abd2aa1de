"""Named weights in any spelling, as held shards: what a publisher shares and what a subscriber's
destinations hold.

A weight is a global array (name -> global shape, dtype) described by its shards. A process's side
of it is the shards it holds: a plain array (anything stridex.view takes) is one shard covering the
whole; a ShardedView its held shards; a torch DTensor its local shard (ShardedView.from_dtensor); a
jax.Array sharded over several devices its addressable shards (ShardedView.from_jax); a tuple
``(array, offsets, global_shape)`` one shard at those offsets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import _sharded, _stridex
from .._sharded import Shard, ShardedView
from .._sharded_index import Index


@dataclass(frozen=True)
class Weight:
    """One named global array and the shards of it this process holds."""

    name: str
    shape: tuple[int, ...]
    dtype: _stridex.Dtype
    shards: tuple[tuple[Index, _stridex.View], ...]
    sharded: ShardedView  # the same, as the sharded copy takes it


def as_sharded(x: Any, name: str) -> ShardedView:
    """One weight in any of the spellings above, zero-copy."""
    if isinstance(x, ShardedView):
        return x
    if isinstance(x, tuple) and len(x) == 3:
        array, offsets, shape = x
        v = _stridex.view(array)
        index = tuple(slice(int(o), int(o) + e) for o, e in zip(offsets, v.shape))
        if len(index) != len(shape) or v.ndim != len(shape):
            raise ValueError(f"weight {name!r}: {v.ndim}-d shard, {len(offsets)} offsets, global shape {tuple(shape)}")
        # The rest of the array is held elsewhere: described, not held (as a DTensor's other ranks).
        others = [Shard(box, None, None, rank=-1) for box in _complement(index, tuple(shape))]
        return ShardedView(shape, v.dtype, [Shard(index, v, v.device, _sharded._origin_of(array)), *others])
    if hasattr(x, "device_mesh") and hasattr(x, "placements") and hasattr(x, "to_local"):
        return ShardedView.from_dtensor(x)
    if type(x).__module__.startswith(("jaxlib", "jax")):
        devices = getattr(x, "devices", None)
        if callable(devices) and len(devices()) > 1:
            return ShardedView.from_jax(x)
    try:
        return _sharded._as_sharded(x, name)
    except (TypeError, BufferError) as e:
        raise TypeError(f"weight {name!r}: {e}") from None


def _complement(index: Index, shape: tuple[int, ...]) -> list[Index]:
    """Boxes that, with `index`, cover `shape` without overlapping it (slabs, one dimension at a
    time: at most two per dimension)."""
    out = []
    inner = [slice(0, e) for e in shape]
    for d, s in enumerate(index):
        for lo, hi in ((0, s.start), (s.stop, shape[d])):
            if hi > lo:
                out.append(tuple(inner[:d]) + (slice(lo, hi),) + tuple(slice(0, e) for e in shape[d + 1 :]))
        inner[d] = s
    return out


def named(weights: Mapping[str, Any], what: str) -> list[Weight]:
    """Every weight of a mapping name -> array, with its held shards (at least one each)."""
    if not isinstance(weights, Mapping):
        raise TypeError(f"{what}: expected a mapping of names to arrays, found {type(weights).__name__}")
    out = []
    for name, x in weights.items():
        if not isinstance(name, str):
            raise TypeError(f"{what}: weight names are strings, found {name!r}")
        sv = as_sharded(x, name)
        held = tuple((s.index, s.view) for s in sv.shards if s.view is not None)
        if not held:
            raise ValueError(f"{what}: weight {name!r} holds no shard in this process")
        out.append(Weight(name, sv.shape, sv.dtype, held, sv))
    return out
