"""Sharded arrays: one global array as block shards on devices (docs/sharded.md).

The index arithmetic, the checks and the copy plans are the core's (``stridex/sharding.hpp``, bound
as ``_stridex._sharding_*``); the pieces are copied by the copy engine (``_stridex._copy_pieces``).
This module holds what only Python can: the framework objects (JAX, torch, CuPy, DTensor, in
``_sharded_jax.py`` and ``_sharded_torch.py``, imported when a call needs them) and the types.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import _stridex
from ._stridex import NO_SYNC, Device, Dtype, View

from ._sharded_index import Index, _box, _fmt


def _extent(index: Index) -> tuple[int, ...]:
    return tuple(s.stop - s.start for s in index)


class _Place(NamedTuple):
    """Where a shard is: the memory's stridex Device (None when another process holds it and did
    not say), the producer's device object (a jax.Device, ...), the rank holding it (None: this
    process)."""

    device: Device | None
    origin: Any
    rank: int | None

    def key(self) -> tuple[Any, ...]:
        # One GPU is one place whoever names it; JAX's CPU devices share one DLPack device (cpu:0)
        # and are told apart by their JAX id; other processes' shards by their rank.
        if self.rank is not None:
            return ("rank", self.rank, None if self.device is None else str(self.device))
        if self.device is not None and self.device.type == "cpu" and self.origin is not None:
            return ("jax-cpu", getattr(self.origin, "id", id(self.origin)))
        return ("device", None if self.device is None else str(self.device))


def _place(device: Any) -> _Place:
    """A layout's device in any spelling: a stridex.Device or its spellings, a jax.Device, a torch
    device, or an existing place."""
    if isinstance(device, _Place):
        return device
    if type(device).__module__.startswith(("jaxlib", "jax")) and hasattr(device, "platform"):
        from . import _sharded_jax

        return _Place(_sharded_jax.device_of(device), device, None)
    return _Place(Device(str(device) if type(device).__module__.startswith("torch") else device), None, None)


@dataclass(frozen=True)
class Shard:
    """One block of a sharded array: its index ranges in the global array (slices of step 1), the
    View of its memory (None when another process holds it), where it is, and the producer's
    device object (``origin``: a jax.Device, kept for the export back) or the holding rank."""

    index: Index
    view: View | None
    device: Device | None
    origin: Any = None
    rank: int | None = None

    @property
    def held(self) -> bool:
        """Whether this process holds the shard's memory (a DTensor's other ranks' shards are only
        described)."""
        return self.view is not None

    @property
    def shape(self) -> tuple[int, ...]:
        """The extents of the shard's index ranges."""
        return _extent(self.index)

    def _place(self) -> _Place:
        return _Place(self.device, self.origin, self.rank)

    def __repr__(self) -> str:
        where = f"rank {self.rank}" if self.rank is not None else (str(self.device) if self.device else "?")
        return f"Shard({_fmt(self.index)} on {where}{'' if self.held else ', not held'})"


@dataclass(frozen=True)
class Piece:
    """One piece of a copy plan: the global ``index`` read from source shard ``src`` at
    ``src_index`` (indices into that shard) and written to destination shard ``dst`` at
    ``dst_index``."""

    src: int
    dst: int
    index: Index
    src_index: Index
    dst_index: Index


class ShardLayout:
    """A block sharding of a global shape: which index ranges each device holds. Shards are
    identical (replicas) or disjoint and cover the array, or the constructor raises ValueError
    naming the shards. Devices: stridex.Device spellings, jax.Device or torch devices."""

    def __init__(self, shape: Sequence[int], shards: Iterable[tuple[Sequence[slice | tuple[int, int]], Any]]):
        self.shape: tuple[int, ...] = tuple(int(e) for e in shape)
        entries = [(_box(index, self.shape, f"shard {k}"), _place(device)) for k, (index, device) in enumerate(shards)]
        self._index: tuple[Index, ...] = tuple(e[0] for e in entries)
        self._places: tuple[_Place, ...] = tuple(e[1] for e in entries)
        keys = _Keys()
        _stridex._sharding_check(self.shape, [_triple(i, keys(p)) for i, p in entries])

    @classmethod
    def _of(cls, shape: Sequence[int], index: Sequence[Index], places: Sequence[_Place]) -> ShardLayout:
        return cls(shape, zip(index, places))

    @property
    def shards(self) -> list[tuple[Index, Any]]:
        """(index, device) per shard: the device as given (a jax.Device stays one)."""
        return [(i, p.origin if p.origin is not None else p.device) for i, p in zip(self._index, self._places)]

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        inner = ", ".join(f"{_fmt(i)}: {d}" for i, d in self.shards)
        return f"ShardLayout({self.shape}, {{{inner}}})"

    @classmethod
    def grid(cls, shape: Sequence[int], grid: Sequence[int], devices: Sequence[Any]) -> ShardLayout:
        """Dimension d cut into grid[d] chunks as torch.chunk cuts (chunks of ceil(n / k), the last
        ones shorter or empty; dimensions past the grid uncut). Block b, row-major over the grid, is
        held by devices[b * r : (b + 1) * r], r = len(devices) / blocks: one device a block, or r
        replicas each."""
        blocks = math.prod(int(g) for g in grid)
        devices = list(devices)
        if blocks < 1 or not devices or len(devices) % blocks:
            raise ValueError(f"a grid of {blocks} blocks needs a multiple of {blocks} devices, found {len(devices)}")
        r = len(devices) // blocks
        places = [_place(d) for d in devices]
        keys = _Keys()
        raw = _stridex._sharding_grid(
            tuple(shape), tuple(grid), [[keys(places[b * r + k]) for k in range(r)] for b in range(blocks)]
        )
        order = [places[b * r + k] for b in range(blocks) for k in range(r)]
        return cls._of(shape, [tuple(slice(a, b) for a, b in zip(s[0], s[1])) for s in raw], order)

    @classmethod
    def rows(cls, shape: Sequence[int], devices: Sequence[Any]) -> ShardLayout:
        """Dimension 0 cut into one block per device (torch.chunk's sizes)."""
        return cls.grid(shape, (len(devices),), devices)

    @classmethod
    def columns(cls, shape: Sequence[int], devices: Sequence[Any]) -> ShardLayout:
        """Dimension 1 cut into one block per device."""
        return cls.grid(shape, (1, len(devices)), devices)

    @classmethod
    def blocks(cls, shape: Sequence[int], grid: tuple[int, int], devices: Sequence[Any]) -> ShardLayout:
        """2-D blocks: dimensions 0 and 1 cut into grid[0] x grid[1] blocks, row-major over devices."""
        return cls.grid(shape, tuple(grid), devices)

    @classmethod
    def replicated(cls, shape: Sequence[int], devices: Sequence[Any]) -> ShardLayout:
        """The whole array on every device."""
        return cls.grid(shape, (), devices)

    def plan(self, dst: ShardLayout) -> list[Piece]:
        """The pieces that fill every shard of `dst` (replicas too) from this layout: one piece per
        source block a destination shard meets, read from a replica on the destination's device
        when there is one, else from the replica read least so far (docs/sharded.md)."""
        return _plan(self, dst)


class _Keys:
    """Place keys as the ints the core's plan takes, one numbering for both sides of a plan."""

    def __init__(self) -> None:
        self.numbers: dict[tuple[Any, ...], int] = {}

    def __call__(self, place: _Place) -> int:
        return self.numbers.setdefault(place.key(), len(self.numbers))


def _triple(index: Index, place: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    return tuple(s.start for s in index), tuple(s.stop for s in index), place


def _slices(start: Sequence[int], shape: Sequence[int]) -> Index:
    return tuple(slice(a, a + n) for a, n in zip(start, shape))


def _plan(src: ShardLayout, dst: ShardLayout, src_shards: Sequence[int] | None = None) -> list[Piece]:
    """The core's plan; `src_shards` restricts the source to those shards (the held ones)."""
    if src.shape != dst.shape:
        raise ValueError(f"the destination's global shape is {dst.shape}, the source's {src.shape}")
    keys = _Keys()
    chosen = list(range(len(src._index))) if src_shards is None else list(src_shards)
    a = [_triple(src._index[k], keys(src._places[k])) for k in chosen]
    b = [_triple(i, keys(p)) for i, p in zip(dst._index, dst._places)]
    pieces = []
    for s, d, start, stop, s0, d0 in _stridex._sharding_plan(src.shape, a, b):
        shape = [q - p for p, q in zip(start, stop)]
        pieces.append(Piece(chosen[s], d, _slices(start, shape), _slices(s0, shape), _slices(d0, shape)))
    return pieces


class ShardedView:
    """A global array held as block shards, each a stridex.View on its device with its index
    ranges in the global array (replicas allowed). Made by ``ShardedView.from_jax``,
    ``from_arrays``, ``from_dtensor``, ``stridex.reshard`` or from Shards; checked on construction:
    shards of the wrong shape or dtype, overlapping or missing ones, raise naming what was
    expected and found. A ShardedView of a DTensor holds only this rank's shards (``partial``)."""

    def __init__(self, shape: Sequence[int], dtype: Any, shards: Sequence[Shard], *, sharding: Any = None):
        self._shape = tuple(int(e) for e in shape)
        self._dtype = _stridex.dtype(dtype)
        checked = []
        for k, s in enumerate(shards):
            if not isinstance(s, Shard):
                raise TypeError(f"shard {k}: expected a stridex.Shard, found {type(s).__name__}")
            index = _box(s.index, self._shape, f"shard {k}")
            if s.view is not None:
                if tuple(s.view.shape) != _extent(index):
                    raise ValueError(
                        f"shard {k}: its index ranges {_fmt(index)} hold shape {_extent(index)}, its view has shape "
                        f"{tuple(s.view.shape)}"
                    )
                if s.view.dtype != self._dtype:
                    raise TypeError(f"shard {k}: expected dtype {self._dtype}, found {s.view.dtype}")
                # Host memory is one space whatever ordinal a producer reports (JAX's CPU devices).
                same_host = s.device is not None and s.device.type == s.view.device.type == "cpu"
                if s.device is not None and s.view.device != s.device and not same_host:
                    raise ValueError(f"shard {k}: said to be on {s.device}, its view is on {s.view.device}")
            device = s.view.device if s.device is None and s.view is not None else s.device
            checked.append(Shard(index, s.view, device, s.origin, s.rank))
        self._shards = tuple(checked)
        self._layout = ShardLayout._of(self._shape, [s.index for s in checked], [s._place() for s in checked])
        # The producer's sharding object (a jax.sharding.Sharding), given back by to_jax.
        self._sharding = sharding

    @property
    def shape(self) -> tuple[int, ...]:
        """The global shape."""
        return self._shape

    @property
    def dtype(self) -> Dtype:
        """The dtype of every shard."""
        return self._dtype

    @property
    def ndim(self) -> int:
        """The number of dimensions of the global array."""
        return len(self._shape)

    @property
    def shards(self) -> tuple[Shard, ...]:
        """Every shard, held or not, in the order given."""
        return self._shards

    @property
    def layout(self) -> ShardLayout:
        """The sharding as a ShardLayout (index ranges and devices, no memory)."""
        return self._layout

    @property
    def partial(self) -> bool:
        """Whether some shards are held by other processes (only described here)."""
        return not all(s.held for s in self._shards)

    def __repr__(self) -> str:
        return f"ShardedView(shape={self._shape}, dtype={self._dtype}, shards={list(self._shards)})"

    def _held(self, operation: str) -> list[int]:
        """The held shards, checked to cover the array: what reading every element needs."""
        held = [k for k, s in enumerate(self._shards) if s.held]
        if len(held) < len(self._shards):
            keys = _Keys()
            try:
                _stridex._sharding_check(
                    self._shape, [_triple(self._shards[k].index, keys(self._shards[k]._place())) for k in held]
                )
            except ValueError as e:
                missing = sorted({s.rank for s in self._shards if not s.held and s.rank is not None})
                raise ValueError(
                    f"{operation} needs every element, and this partial ShardedView holds only some (the other "
                    f"shards are held by ranks {missing}): {e}"
                ) from None
        return held

    @staticmethod
    def from_jax(x: Any) -> ShardedView:
        """A jax.Array with any sharding, zero-copy: one Shard per addressable shard (its device and
        ``shard.index``; replicas too), shards on other processes' devices described, not held. The
        sharding is kept for ``to_jax``."""
        from . import _sharded_jax

        shape, dtype, parts, sharding = _sharded_jax.from_jax(x)
        return ShardedView(shape, dtype, [Shard(*part) for part in parts], sharding=sharding)

    @staticmethod
    def from_arrays(
        arrays: Sequence[Any], offsets: Sequence[Sequence[int]], shape: Sequence[int] | None = None
    ) -> ShardedView:
        """Per-device arrays (anything stridex.view takes: torch, CuPy, JAX, NumPy, Views) at their
        offsets in the global array, zero-copy. The global shape defaults to the smallest that
        holds every array; the arrays must cover it without partial overlaps."""
        if len(arrays) != len(offsets):
            raise ValueError(f"expected one offset per array ({len(arrays)}), found {len(offsets)}")
        views = [_stridex.view(a) for a in arrays]
        if not views:
            raise ValueError("a ShardedView of arrays needs at least one array")
        shards = []
        for k, (v, off) in enumerate(zip(views, offsets)):
            if len(off) != v.ndim:
                raise ValueError(f"array {k}: expected {v.ndim} offsets (its ndim), found {len(off)}")
            shards.append(Shard(_slices([int(o) for o in off], v.shape), v, v.device, _origin_of(arrays[k])))
        if shape is None:
            shape = [max(s.index[d].stop for s in shards) for d in range(views[0].ndim)]
        return ShardedView(shape, views[0].dtype, shards)

    @staticmethod
    def from_dtensor(x: Any) -> ShardedView:
        """A torch DTensor's local shard, zero-copy, with every other rank's shard described (its
        rank and index ranges, not held) from the device mesh and the placements (Shard(d) and
        Replicate(); Partial() holds no block data and is refused)."""
        from . import _sharded_torch

        shape, dtype, parts = _sharded_torch.from_dtensor(x)
        return ShardedView(shape, dtype, [Shard(*part) for part in parts])

    def to_jax(self) -> Any:
        """One sharded jax.Array over the shards' memory, zero-copy
        (jax.make_array_from_single_device_arrays over DLPack per shard): the imported sharding when
        there is one, else a NamedSharding built from the layout when JAX can express it (ValueError
        saying why not otherwise)."""
        from . import _sharded_jax

        self._held("to_jax()")
        return _sharded_jax.to_jax(self)

    def to_torch(self) -> list[tuple[Index, Any]]:
        """The held shards as torch tensors (torch.from_dlpack, zero-copy), each with its index; a JAX
        array's shards as JAX hands arrays over (unflagged legacy capsules)."""
        torch: Any = importlib.import_module("torch")  # optional; its stubs are not the package's concern
        return [(s.index, _consumed(torch.from_dlpack, s.view)) for s in self._shards if s.view is not None]

    def to_cupy(self) -> list[tuple[Index, Any]]:
        """The held shards as CuPy arrays (cupy.from_dlpack, zero-copy), each with its index; a JAX
        array's shards as JAX hands arrays over (unflagged legacy capsules)."""
        cupy: Any = importlib.import_module("cupy")
        return [(s.index, _consumed(cupy.from_dlpack, s.view)) for s in self._shards if s.view is not None]

    def to_numpy(self) -> list[tuple[Index, Any]]:
        """The held shards of host memory as NumPy arrays (zero-copy), each with its index; bfloat16
        and the other ml_dtypes types included (through the array interface, as numpy.asarray)."""
        import numpy

        return [(s.index, numpy.asarray(s.view)) for s in self._shards if s.view is not None]


class _AsJaxHandsOver:
    """An immutable View (a JAX array's) as JAX hands its arrays to other frameworks natively: a
    legacy capsule without a read-only flag, whatever max_version the consumer asks (a versioned
    capsule says READ_ONLY, which torch and CuPy do not take). The consumer's stream is kept."""

    def __init__(self, view: View) -> None:
        self._view = view

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._view.__dlpack_device__()

    def __dlpack__(self, stream: Any = None, **_: Any) -> Any:  # positional too: some consumers pass it so
        return self._view.__dlpack__(stream=stream)


def _consumed(from_dlpack: Any, v: View) -> Any:
    """from_dlpack(v) of torch or CuPy, immutable views as JAX would hand them over."""
    return from_dlpack(_AsJaxHandsOver(v) if v.writability == "immutable" else v)


def _origin_of(array: Any) -> Any:
    """The JAX device of a single-device jax.Array (what a CPU shard's export back needs)."""
    if type(array).__module__.startswith(("jaxlib", "jax")):
        devices = getattr(array, "devices", None)
        if callable(devices):
            ds = devices()
            if len(ds) == 1:
                return next(iter(ds))
    return None


def _as_sharded(x: Any, name: str) -> ShardedView:
    """A ShardedView side of a copy; anything else is one View, a single shard of the whole array."""
    if isinstance(x, ShardedView):
        return x
    v = x if isinstance(x, View) else _stridex.view(x)
    return ShardedView(v.shape, v.dtype, [Shard(tuple(slice(0, e) for e in v.shape), v, v.device)])


def _streams(stream: Any, gpus: set[int]) -> Any:
    """The sharded copy's stream argument as the executor takes it: None, NO_SYNC, or
    {ordinal: stream}. A mapping's keys are devices (any spelling, or CUDA ordinals); one stream
    is accepted when one GPU (`gpus`: those taking part) runs the copy."""
    if stream is None:
        return None
    if stream is NO_SYNC or (isinstance(stream, int) and stream == -1):
        return NO_SYNC
    if isinstance(stream, Mapping):
        out = {}
        for device, s in stream.items():
            # Any device spelling a layout takes (a jax.Device, a torch device ...), or a CUDA ordinal.
            d = Device(f"cuda:{device}") if isinstance(device, int) else _place(device).device
            if d is None or d.type != "cuda":
                raise ValueError(f"stream: a sharded copy's streams are keyed by CUDA devices, found {d}")
            out[d.id] = s
        return out
    if len(gpus) > 1:
        raise TypeError(
            f"stream: this sharded copy runs on {len(gpus)} GPUs ({', '.join(f'cuda:{g}' for g in sorted(gpus))}); "
            "pass a dict {device: stream} (each GPU's stream), None or stridex.NO_SYNC"
        )
    return {next(iter(gpus)): stream} if gpus else None


def _gpus(views: Iterable[View | None]) -> set[int]:
    return {v.device.id for v in views if v is not None and v.device.type == "cuda"}


def copy(dst: Any, src: Any, *, stream: Any = None, _staged: bool = False) -> Any:
    """stridex.copy when either side is a ShardedView: every held destination shard (replicas
    too) filled from the source's shards, piece by piece, by the copy engine. Returns dst."""
    d, s = _as_sharded(dst, "dst"), _as_sharded(src, "src")
    if d.shape != s.shape:
        raise ValueError(f"stridex.copy: the destination's global shape is {d.shape}, the source's {s.shape}")
    if d.dtype != s.dtype:
        raise ValueError(f"stridex.copy: the destination's dtype is {d.dtype}, the source's {s.dtype} (no casting)")
    # Refused before any piece is enqueued: nothing is half copied.
    for k, sh in enumerate(d.shards):
        if sh.view is not None and sh.view.readonly:
            raise BufferError(
                f"stridex.copy: cannot copy into a read-only view (destination shard {k} {_fmt(sh.index)})"
            )
    held = s._held("stridex.copy from a sharded source")
    pieces = [p for p in _plan(s.layout, d.layout, held) if d.shards[p.dst].view is not None]
    dst_views = [sh.view for sh in d.shards]
    src_views = [sh.view for sh in s.shards]
    streams = _streams(stream, _gpus(dst_views) | _gpus(src_views))
    raw = [
        (p.src, p.dst, tuple(i.start for i in p.src_index), tuple(i.start for i in p.dst_index), _extent(p.index))
        for p in pieces
    ]
    # Shards not held are never read or written: empty placeholder Views keep the numbering.
    blank = _stridex.empty((0,), "uint8")
    _stridex._copy_pieces(
        [v if v is not None else blank for v in dst_views],
        [v if v is not None else blank for v in src_views],
        raw,
        streams,
        _staged,
    )
    return dst


def reshard(src: Any, layout: ShardLayout, *, stream: Any = None) -> ShardedView:
    """A copy of `src` (a ShardedView, or anything stridex.view takes) in another block sharding:
    each destination shard allocated on its device (stridex.empty, on that GPU's stream) and filled
    piece by piece from the source's shards, peer to peer between GPUs, never gathered first."""
    s = _as_sharded(src, "src")
    if not isinstance(layout, ShardLayout):
        raise TypeError(f"reshard(): layout must be a stridex.ShardLayout, found {type(layout).__name__}")
    if layout.shape != s.shape:
        raise ValueError(f"reshard(): the layout's global shape is {layout.shape}, the source's {s.shape}")
    s._held("reshard()")
    gpus = {p.device.id for p in layout._places if p.device is not None and p.device.type == "cuda"}
    streams = _streams(stream, gpus | _gpus(sh.view for sh in s.shards))
    shards = []
    for index, place in zip(layout._index, layout._places):
        if place.rank is not None or place.device is None:
            raise ValueError(f"reshard(): the layout's shard {_fmt(index)} is on another process ({place.rank})")
        alloc_stream = (
            streams.get(place.device.id) if isinstance(streams, dict) and place.device.type == "cuda" else None
        )
        v = _stridex.empty(_extent(index), s.dtype, device=place.device, stream=alloc_stream)
        shards.append(Shard(index, v, place.device, place.origin))
    out = ShardedView(s.shape, s.dtype, shards)
    copy(out, s, stream=stream)
    return out


def _install() -> None:
    """stridex.copy hands ShardedViews to copy() above (the one copy door, src/extension/bind/bind_copy.cpp)."""
    _stridex._register_sharded(ShardedView, copy)
