"""Index ranges of block shards: the spellings a user may write, checked against a global shape,
and their words in messages (below the sharded types and their framework modules alike)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

Index = tuple[slice, ...]


def _box(index: Sequence[slice | int | tuple[int, int]], shape: Sequence[int], what: str) -> Index:
    """An index in any of the spellings (slices with step 1, (start, stop) pairs, ints for one
    element) as explicit slices, checked against the global shape."""
    if len(index) != len(shape):
        raise ValueError(
            f"{what}: expected {len(shape)} index ranges for the global shape {tuple(shape)}, found {len(index)}"
        )
    out = []
    for i, extent in zip(index, shape):
        if isinstance(i, slice):
            if i.step not in (None, 1):
                raise ValueError(f"{what}: block shards take index ranges of step 1, found {i}")
            start, stop, _ = i.indices(extent)
            # indices() clamps; a range past the shape is said as such, not silently cut.
            if (i.start is not None and i.start > extent) or (i.stop is not None and i.stop > extent):
                raise ValueError(f"{what}: the index ranges {_fmt(index)} leave the global shape {tuple(shape)}")
            out.append(slice(start, max(start, stop)))
        elif isinstance(i, tuple) and len(i) == 2:
            out.append(slice(int(i[0]), int(i[1])))
        else:
            raise TypeError(f"{what}: an index range is a slice or a (start, stop) pair, found {type(i).__name__}")
    return tuple(out)


def _fmt(index: Iterable[Any]) -> str:
    parts = []
    for i in index:
        if isinstance(i, slice):
            parts.append(f"{'' if i.start is None else i.start}:{'' if i.stop is None else i.stop}")
        else:
            parts.append(str(i))
    return "[" + ", ".join(parts) + "]"
